"""The bookkeeping of a page-lock (simgpu.gpu.transfer.HostPin): which uploads it serves,
that it waits for their copies before it unlocks, once, and that dropping it unlocks.
CUDA's two calls are stood in for here (the device runs the real ones in
test_transfer_gpu.py): a host without a GPU checks the order of what a pin asks of them."""

from __future__ import annotations

import gc
import mmap
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from simgpu.gpu import transfer


class _Refused(Exception):
    pass


class _Runtime:
    """cudaHostRegister / cudaHostUnregister, noted in order."""

    CUDARuntimeError = _Refused

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.refuse: str | None = None

    def hostRegister(self, ptr: int, nbytes: int, flags: int) -> None:  # noqa: N802 - CuPy's name
        if self.refuse:
            raise _Refused(self.refuse)
        assert flags == transfer.HOST_REGISTER_PORTABLE
        self.calls.append(("lock", ptr))

    def hostUnregister(self, ptr: int) -> None:  # noqa: N802
        self.calls.append(("unlock", ptr))


class _Copy:
    """A queued copy's event: done once the stream reaches it."""

    def __init__(self, runtime: _Runtime, done: bool = False) -> None:
        self.runtime, self.done = runtime, done

    def synchronize(self) -> None:
        self.runtime.calls.append(("waited", id(self)))
        self.done = True


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> _Runtime:
    rt = _Runtime()
    monkeypatch.setattr(transfer.cuda, "get_cupy", lambda: SimpleNamespace(cuda=SimpleNamespace(runtime=rt)))
    monkeypatch.delenv(transfer.PAGEABLE_ENV, raising=False)
    return rt


def _abc(rows: int = 512) -> tuple[mmap.mmap, np.ndarray]:
    raw = mmap.mmap(-1, 3 * rows * 32)  # page-aligned, as a received result's mapping
    return raw, np.frombuffer(raw, dtype=np.uint32).reshape(3, rows, 8)


def test_a_pin_serves_the_uploads_from_inside_it_and_unlocks_after_their_copies(runtime):
    _, abc = _abc()
    pin = transfer.pin_pages(abc)
    assert pin is not None and runtime.calls == [("lock", abc.ctypes.data)]
    assert transfer._pin_of(abc[1]) is pin and transfer._pin_of(abc[2, 100:200]) is pin
    assert transfer._pin_of(np.zeros((4, 8), np.uint32)) is None  # memory of its own
    pending, landed = _Copy(runtime), _Copy(runtime, done=True)
    pin.note(landed)
    pin.note(pending)
    pin.close()
    # the copy still queued is waited for before the memory is unlocked; a landed one is not
    assert runtime.calls[1:] == [("waited", id(pending)), ("unlock", abc.ctypes.data)]
    pin.close()
    assert runtime.calls[-1] == ("unlock", abc.ctypes.data) and len(runtime.calls) == 3  # once
    assert transfer._pin_of(abc[1]) is None  # uploads from it now go through the staging


def test_dropping_the_last_reference_unlocks(runtime):
    _, abc = _abc()
    pin = transfer.pin_pages(abc)
    pin.note(_Copy(runtime))
    del pin
    gc.collect()
    assert [c[0] for c in runtime.calls] == ["lock", "waited", "unlock"]
    assert transfer._pin_of(abc) is None


def test_a_refusal_falls_back_and_is_said_once(runtime):
    _, abc = _abc()
    runtime.refuse = "cudaErrorHostMemoryAlreadyRegistered: test"
    transfer._refusals.discard(runtime.refuse)
    with pytest.warns(UserWarning, match="not page-locked"):
        assert transfer.pin_pages(abc) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same refusal again: no second warning
        assert transfer.pin_pages(abc) is None
    assert runtime.calls == []


def test_the_pageable_a_b_switch_locks_nothing(runtime, monkeypatch):
    _, abc = _abc()
    monkeypatch.setenv(transfer.PAGEABLE_ENV, "1")
    assert transfer.pin_pages(abc) is None and runtime.calls == []
