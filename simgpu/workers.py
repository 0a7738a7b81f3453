"""Worker processes that leave Ctrl-C to the process that started them.

A terminal's Ctrl-C reaches every process of the foreground group: without this, each
worker of a pool prints its own KeyboardInterrupt traceback while the driver is still
shutting the run down cleanly.  Workers made here ignore SIGINT; the driver stops them
(`shutdown`) when it has accounted for the run.  They are spawned, not forked: the
driver has threads (and CUDA) that a fork would copy half-way.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def _quiet(initializer: Callable[..., Any] | None, initargs: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


def spawn_pool(
    workers: int, initializer: Callable[..., Any] | None = None, initargs: tuple = ()
) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes that ignore Ctrl-C (see the module docstring)."""
    return ProcessPoolExecutor(
        max_workers=max(1, int(workers)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_quiet,
        initargs=(initializer, initargs),
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: queued work cancelled, workers terminated (they ignore Ctrl-C, so
    they must be told), their pipes closed.  For a run that is being interrupted; a pool
    whose work is done is shut down the usual way."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # no public way before 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)


@contextlib.contextmanager
def pool_of(
    workers: int, initializer: Callable[..., Any] | None = None, initargs: tuple = ()
) -> Iterator[ProcessPoolExecutor]:
    """`with pool_of(k) as pool:` a spawn_pool shut down when the block ends, and stopped
    at once if the block is left by an exception (Ctrl-C among them)."""
    pool = spawn_pool(workers, initializer, initargs)
    try:
        yield pool
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
