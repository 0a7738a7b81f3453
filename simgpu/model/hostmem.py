"""Host memory as the GPU part sees it: every byte a device stage copies in is read out
of host RAM.

Like a loading dock and the warehouse behind it, a host-to-device copy needs both the
link (``h2d``) and the host's memory bandwidth (``membw``): the model's fluid sharing
runs each device's link through host memory, so copies slow when synthesis saturates
DDR, and synthesis slows when the GPU part streams the SRS.  A copy from pinned memory
runs at the link's speed; one from pageable memory (a stage that allocates and fills its
own device inputs because nothing was pre-staged) is staged by the driver through a
bounce buffer, at the profile's ``h2d_pageable_gbps``.
"""

from __future__ import annotations

from collections.abc import Hashable

from simgpu.model.contention import Thrash
from simgpu.profile import Profile
from simgpu.profile.resolve import Use, link_seconds
from simgpu.profile.schema import BURSTY_RESOURCES


def links(devices: int) -> dict[Hashable, Hashable]:
    """Each device's host-to-device link draws on host memory bandwidth."""
    return {("h2d", d): "membw" for d in range(devices)}


def _keys(res: str, devices: int) -> list[Hashable]:
    return [(res, d) for d in range(devices)] if res in ("gpu", "h2d") else [res]


def thrashing(profile: Profile, devices: int) -> dict[Hashable, Thrash]:
    """The profile's ``[contention]`` efficiency losses, keyed as the fluid share names
    resources (a device resource once per device)."""
    return {
        key: Thrash(spec.knee, spec.loss)
        for res, spec in profile.contention.items()
        for key in _keys(res, devices)
    }


def shared_by(profile: Profile, devices: int, law: str) -> frozenset[Hashable]:
    """The resources the profile's ``[contention]`` shares by `law` ("conserved",
    "in-order"), keyed as the fluid share names them (a device resource once per device)."""
    laws = profile.contention.items()
    return frozenset(key for res, spec in laws if spec.law == law for key in _keys(res, devices))


def bursty(profile: Profile, devices: int) -> frozenset[Hashable]:
    """The resources shared burst by burst: the lock-like ones, and each device the
    profile shares in order (one stream: the same law, simgpu.model.contention)."""
    return frozenset(BURSTY_RESOURCES) | shared_by(profile, devices, "in-order")


def link_upload(
    nbytes: int, gbps: float, device: int, on_stream: Use | None = None
) -> tuple[float, tuple[tuple[Hashable, float, float], ...]]:
    """A copy of `nbytes` from host memory to `device` at `gbps` (pageable or pinned):
    (seconds at full speed, fluid uses).  The copy draws `gbps` from the link (and,
    through it, from host memory).  `on_stream`, the device use of the way the copy is
    queued (Resolved.upload_gpu): like a lorry on a one-lane bridge, the copy holds the
    stream the workers share while it crosses, so the other workers' kernels wait
    behind it (its demand), and that share of its own time waits behind theirs (its
    bound); the rest of its time is bound by the link.  Without it, by the link alone."""
    seconds = link_seconds(nbytes, gbps)
    if on_stream is None or on_stream.bound <= 0:
        return seconds, ((("h2d", device), gbps, 1.0),)
    bound = min(1.0, on_stream.bound)
    return seconds, ((("h2d", device), gbps, 1.0 - bound), (("gpu", device), on_stream.demand, bound))
