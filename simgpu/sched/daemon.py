"""The proving daemon, written once for both runtimes.

Proof requests arrive (closed loop: `concurrency` clients each submitting and waiting,
like cuzk-bench's -j; or open loop at a Poisson `arrival_rate`).  Each proof splits into
partitions; each partition takes its share of the host-memory budget, waits for a slot
of the synthesis pool (`partition_workers`), is synthesised and prepped on the CPU and
put on the GPU queue (bounded by `max_gpu_queue_depth`: a full queue holds the
synthesis slot, which is the backpressure).  `gpu_workers_per_device` workers per device
take partitions off the queue and run the design on each.  A partition ends completed
or failed with a reason; a proof fails if any of its partitions does, and its partitions
still queued are then abandoned rather than proved for nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import OutOfMemory, SimgpuError
from simgpu.sched.runtime import Proc, Queue, Runtime, Semaphore
from simgpu.sched.work import Partition, Proof, Worker

Design = Callable[[Runtime, Worker, Partition], Proc]


class PartitionAbandoned(SimgpuError):
    """A partition not proved because another partition of its proof already failed."""


@dataclass
class Daemon:
    """The shared plumbing one run needs; `run()` is the daemon's main process."""

    rt: Runtime
    config: PipelineConfig
    workload: Workload
    design: Design

    def run(self) -> Proc:
        cfg = self.config
        self.queue: Queue = self.rt.queue("gpu", cfg.max_gpu_queue_depth)
        self.pool: Semaphore = self.rt.semaphore("partition_workers", cfg.partition_workers)
        self.budget: Semaphore = self.rt.semaphore("host_budget", self.rt.host_budget())
        workers = [
            Worker(device, i) for device in range(cfg.devices) for i in range(cfg.gpu_workers_per_device)
        ]
        worker_tasks = [
            self.rt.spawn(self.gpu_worker(w), w.name, device=w.device, worker=w.name) for w in workers
        ]
        proofs = [Proof(i, self.workload.partitions, self.workload.constraints) for i in range(cfg.proofs)]
        if cfg.arrival_rate:
            arrivals = [self.rt.spawn(self.open_loop(proofs), "arrivals")]
        else:
            arrivals = [
                self.rt.spawn(self.client(proofs[j :: cfg.concurrency]), f"client{j}")
                for j in range(min(cfg.concurrency, len(proofs)))
            ]
        for task in arrivals:
            yield task
        for _ in workers:  # one stop sign per worker, behind all real work
            yield self.queue.put(None)
        for task in worker_tasks:
            yield task
        return proofs

    # ---------------------------------------------------------------- arrivals

    def client(self, proofs: list[Proof]) -> Proc:
        """A closed-loop client: submit a proof, wait for it, submit the next."""
        for proof in proofs:
            yield self.rt.spawn(self.prove(proof), f"proof{proof.id}", proof=proof.id)

    def open_loop(self, proofs: list[Proof]) -> Proc:
        """Poisson arrivals at `arrival_rate` proofs per second, seeded."""
        rng = random.Random(self.config.seed)
        tasks = []
        for proof in proofs:
            tasks.append(self.rt.spawn(self.prove(proof), f"proof{proof.id}", proof=proof.id))
            yield self.rt.sleep(rng.expovariate(self.config.arrival_rate))
        for task in tasks:
            yield task

    # ---------------------------------------------------------------- a proof

    def prove(self, proof: Proof) -> Proc:
        proof.submitted_at = self.rt.now()
        self.rt.record("proof_submitted", proof=proof.id, partitions=proof.partitions)
        parts = [Partition(proof, i, proof.constraints, self.rt.event()) for i in range(proof.partitions)]
        tasks = [
            self.rt.spawn(self.partition(p), f"p{proof.id}.{p.index}", proof=proof.id, partition=p.index)
            for p in parts
        ]
        for task in tasks:
            yield task
        proof.finished_at = self.rt.now()
        if proof.failed:
            self.rt.record("proof_failed", proof=proof.id, reason=proof.reason)
        else:
            self.rt.record("proof_completed", proof=proof.id, latency=proof.finished_at - proof.submitted_at)
        return proof

    def partition(self, part: Partition) -> Proc:
        """One partition's life on the host: its share of the memory budget, then it is
        made ready for the GPU, then it waits for its end and gives its memory back."""
        rt = self.rt
        estimate = rt.partition_estimate(part)
        yield self.budget.acquire(estimate)
        try:
            yield from self.make_ready(part)
            yield part.done
            rt.record("partition_completed", proof=part.proof.id, partition=part.index)
        except SimgpuError as e:
            part.fail(e)
            if not part.proof.failed:
                part.proof.failed = True
                part.proof.reason = f"partition {part.index}: {e}"
            rt.record("partition_failed", proof=part.proof.id, partition=part.index, reason=str(e))
        finally:
            rt.free(part.host)
            part.host = None
            self.budget.release(estimate)

    def make_ready(self, part: Partition) -> Proc:
        """A synthesis slot, synthesis and prep on the CPU, then onto the GPU queue (a full
        queue keeps the slot: that is the backpressure on synthesis)."""
        rt = self.rt
        yield self.pool.acquire()
        try:
            if part.proof.failed:
                raise PartitionAbandoned(f"{part.proof.label} already failed")
            part.host = yield rt.stage("synthesis", part, None)
            yield rt.stage("prep", part, None)
            # recorded before the put: the worker that takes it acts only after it
            rt.record("partition_queued", proof=part.proof.id, partition=part.index)
            yield self.queue.put(part)
        finally:
            self.pool.release()

    # ---------------------------------------------------------------- GPU workers

    def gpu_worker(self, worker: Worker) -> Proc:
        while True:
            part = yield self.queue.get()
            if part is None:
                return
            # when this worker took it: the end of its wait in the queue (cuzk's GPU_PICKUP)
            self.rt.record("partition_picked", proof=part.proof.id, partition=part.index)
            if part.proof.failed:
                part.fail(PartitionAbandoned(f"{part.proof.label} already failed"))
                continue
            part.attempts += 1
            self.rt.set_context(proof=part.proof.id, partition=part.index)
            try:
                yield from self.design(self.rt, worker, part)
            except OutOfMemory as e:
                if part.attempts <= self.config.retries:
                    self.rt.record(
                        "partition_retry",
                        proof=part.proof.id,
                        partition=part.index,
                        attempt=part.attempts,
                        reason=str(e),
                    )
                    self.rt.spawn(self._requeue(part), f"requeue.p{part.proof.id}.{part.index}")
                else:
                    part.fail(e)
            except SimgpuError as e:
                part.fail(e)

    def _requeue(self, part: Partition) -> Proc:
        """Back off (the memory that was short may free up), then make the partition
        ready again from synthesis: its a, b, c went to the device and died there."""
        self.rt.free(part.host)
        part.host = None
        try:
            yield self.rt.sleep(self.config.retry_backoff)
            yield from self.make_ready(part)
        except SimgpuError as e:
            part.fail(e)
