"""Where the points run: a Dask cluster, local or reached by address.

Like a build farm: `dask_client` hands out a connection to workers (a LocalCluster with
one single-threaded worker process per core unless told otherwise, or the scheduler at
`--scheduler tcp://host:port`), and `PointRunner` sends it points and collects their
results by index, so the order they finish in never shows in the answer.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import SimgpuError, UserError
from simgpu.sweep.grid import Point
from simgpu.sweep.point import PointResult, ProfileSpec, evaluate

#: The most worker processes a LocalCluster is started with (one per core is the point).
MAX_LOCAL_WORKERS = 1024
#: Seconds to reach a scheduler, and then to see at least one of its workers.  A cluster
#: that does not answer in this time is reported, not waited for.
CONNECT_TIMEOUT_S = 5.0


@contextmanager
def dask_client(
    scheduler: str | None = None, workers: int | None = None, timeout: float = CONNECT_TIMEOUT_S
) -> Iterator[Any]:
    """A distributed.Client: on the scheduler at `scheduler`, or on a LocalCluster of
    `workers` processes (default: one per core) started here and stopped on exit."""
    from distributed import Client, LocalCluster

    if scheduler:
        if workers is not None:
            raise UserError("--workers sizes the LocalCluster; a cluster at --scheduler has its own workers")
        try:
            client = Client(scheduler, timeout=timeout, set_as_default=False)
        except (OSError, ValueError, TimeoutError) as e:
            raise UserError(f"--scheduler: cannot reach the Dask scheduler at {scheduler}: {e}") from None
        try:
            try:
                client.wait_for_workers(1, timeout=timeout)
            except (TimeoutError, OSError):
                raise UserError(
                    f"--scheduler: the Dask scheduler at {scheduler} has no workers (waited {timeout:g} s)"
                ) from None
            yield client
        finally:
            client.close()
        return
    if workers is not None and not 1 <= workers <= MAX_LOCAL_WORKERS:
        raise UserError(f"--workers: must be in 1..{MAX_LOCAL_WORKERS}, got {workers:,}")
    # Processes, one thread each: the model is pure Python, so threads would share one
    # interpreter lock.  The scheduler's web server on a free port, not on 8787: a second
    # sweep on the same machine must not collide with the first.  Dask's own logs only at
    # CRITICAL, here and in the workers (dask_setup below): a point's error comes back
    # through its result, and on a loaded machine a worker's last heartbeat can race the
    # scheduler's shutdown and print a traceback of nothing that went wrong.
    cluster = LocalCluster(
        n_workers=workers or os.cpu_count() or 1,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.CRITICAL,
        preload=[__name__],
    )
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def dask_setup(worker: Any) -> None:
    """Run by each LocalCluster worker as it starts (Dask's preload hook): Dask's logs
    in the worker process at CRITICAL, as in this one."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


class PointRunner:
    """Runs points of one sweep or tune on a cluster: the profile, base configuration,
    workload and run count are sent to the workers once; each point is then one task
    (all its seeds in one task: a point's runs are short, and one task per point keeps the
    scheduler's overhead per simulation small)."""

    def __init__(
        self, client: Any, spec: ProfileSpec, base: PipelineConfig, workload: Workload, runs: int
    ) -> None:
        self.client = client
        self.runs = runs
        self._shared = client.scatter([spec, base, workload], broadcast=True, hash=False)
        self._tag = f"simgpu-point-{uuid.uuid4().hex[:8]}"
        self._count = 0

    def run(
        self, points: Sequence[Point], on_done: Callable[[PointResult], None] | None = None
    ) -> list[PointResult]:
        """The results of `points`, in their order; `on_done` is called as each finishes."""
        from distributed import as_completed

        futures = []
        for point in points:
            futures.append(
                self.client.submit(
                    evaluate, *self._shared, self.runs, point, key=f"{self._tag}-{self._count}", pure=False
                )
            )
            self._count += 1
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[PointResult | None] = [None] * len(futures)
        try:
            for fut in as_completed(futures, loop=self.client.loop):
                i = index[fut.key]
                results[i] = _result(fut, points[i])
                if on_done is not None:
                    on_done(results[i])
        finally:
            # On an error or Ctrl-C, leave nothing running on the cluster.
            pending = [f for f in futures if not f.done()]
            if pending:
                self.client.cancel(pending)
        assert all(r is not None for r in results)
        return results  # type: ignore[return-value]


def _result(fut: Any, point: Point) -> PointResult:
    from distributed import KilledWorker

    try:
        return fut.result()
    except (SimgpuError, KeyboardInterrupt):
        raise
    except ImportError as e:
        # A worker of someone else's cluster without simgpu (or another version of it).
        raise SimgpuError(
            f"a Dask worker could not run point ({point.label()}): {type(e).__name__}: {e} "
            "(do the workers have this simgpu installed?)"
        ) from None
    except KilledWorker as e:
        raise SimgpuError(f"Dask workers died running point ({point.label()}): {e}") from None
