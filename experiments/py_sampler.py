"""Where each driver thread is in Python, sampled, and when the interpreter lock was held
(issue #19: what fills a GPU stage's long host stretches beside another worker).

A kernel trace (experiments/kernel_trace.py) sees every driver call; between two calls a
thread is either running Python or waiting to run it, and CUPTI cannot tell which, nor
who ran instead.  This sampler can, the way a wall clock in a shared office can: a thread
that wakes every `period` seconds, takes the interpreter lock, and notes

    late_us   how long after its alarm it got the lock: while another thread holds the
              lock in one long C call (a pickle load, a numpy op that keeps it) nobody
              else runs, so the sampler is late by as much;
    runq_us   of that, how long it sat runnable with no core free (the kernel's
              run-queue wait, /proc/thread-self/schedstat): busy cores, not the lock.
              A late sample with little run-queue wait waited for the lock;
    frames    for every other thread, where it stands: its innermost Python frame (the
              C call it is inside shows as the line that called it) and its innermost
              frame in this project's code (what stage work that is).

It also notes every pass of Python's cyclic garbage collector (`gc`: its start, its
length, its generation), which runs holding the lock on whichever thread allocated last:
a long pass holds every thread up as a long C call does.

Each sample costs the lock for a few tens of microseconds, so a 1 ms period perturbs
the run by a few percent; the run's timings are then the traced run's, its shares
are what it is for.

    sampler = PySampler(period=0.001)
    sampler.start(); ...; sampler.stop()
    record = sampler.record()    # JSON-able: frame table, threads, samples

Times are `time.perf_counter()` seconds, the stage spans' clock.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Any

#: path parts that mark the project's own code (the stage work a frame belongs to)
PROJECT = ("/simgpu/", "/experiments/")


class PySampler:
    """Sample every other thread's Python frame every `period` seconds."""

    def __init__(self, period: float = 0.001) -> None:
        self.period = float(period)
        self._frames: dict[str, int] = {}
        self._samples: list[list[Any]] = []  # [t_s, late_us, [[native tid, top, own], ...], runq_us]
        self._names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gc: list[list[Any]] = []  # [t_s, dur_us, generation] per collector pass
        self._gc_began = 0.0

    def _fid(self, code: Any, line: int) -> int:
        key = f"{code.co_filename}:{line}:{code.co_name}"
        return self._frames.setdefault(key, len(self._frames))

    def _where(self, frame: Any) -> tuple[int, int]:
        top = self._fid(frame.f_code, frame.f_lineno)
        f = frame
        while f is not None and not any(p in f.f_code.co_filename for p in PROJECT):
            f = f.f_back
        return top, (self._fid(f.f_code, f.f_lineno) if f is not None else -1)

    def _run(self) -> None:
        me = threading.get_ident()
        runq = _runqueue_reader()
        natives: dict[int, int] = {}
        due = time.perf_counter() + self.period
        while not self._stop.is_set():
            # sleep releases the lock; waking needs it back: the wait past `due` is the
            # time some other thread kept it (or the cores were all busy)
            waited = runq()
            time.sleep(max(0.0, due - time.perf_counter()))
            now = time.perf_counter()
            waited = runq() - waited
            late = now - due
            frames = sys._current_frames()
            if not natives.keys() >= frames.keys():  # a thread started since
                for t in threading.enumerate():
                    if t.ident is not None and t.native_id is not None:
                        natives[t.ident] = t.native_id
                        self._names[t.native_id] = t.name
            row = []
            for ident, frame in frames.items():
                if ident != me:
                    row.append((natives.get(ident, -ident), *self._where(frame)))
            del frames
            # tuples of numbers, which the cyclic collector stops tracking: a run's
            # samples would otherwise be a few hundred thousand lists for every full
            # pass to visit, the sampler making the pauses it is there to see
            self._samples.append((round(now, 6), round(late * 1e6, 1), tuple(row), round(waited / 1e3, 1)))
            # the next alarm from now, not from `due`: a late sample is not followed by a
            # burst of catch-up samples
            due = now + self.period

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._gc_began = now
        elif self._gc_began:
            self._gc.append(
                [round(self._gc_began, 6), round((now - self._gc_began) * 1e6, 1), info["generation"]]
            )
            self._gc_began = 0.0

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._run, name="py-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def record(self) -> dict[str, Any]:
        """`frames` ("file:line:function" by id), `threads` (native tid -> name),
        `samples` ([t_s, late_us, [[native tid, innermost frame id, innermost project
        frame id or -1], ...], runq_us]), `gc` ([t_s, dur_us, generation] per pass of the
        cyclic collector), `period_s`."""
        return {
            "period_s": self.period,
            "frames": list(self._frames),
            "threads": {str(k): v for k, v in self._names.items()},
            "samples": self._samples,
            "gc": self._gc,
        }


def _runqueue_reader() -> Any:
    """A function giving this thread's run-queue wait so far in ns (the second field of
    /proc/thread-self/schedstat), or always 0 where there is none (not Linux)."""
    path = "/proc/thread-self/schedstat"
    try:
        with open(path) as f:
            int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return lambda: 0

    def read() -> int:
        with open(path) as f:
            return int(f.read().split()[1])

    return read
