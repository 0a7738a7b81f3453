"""The proving daemon, written once for both runtimes.

Proof requests arrive (closed loop: `concurrency` clients each submitting and waiting,
like cuzk-bench's -j; or open loop at a Poisson `arrival_rate`).  Each proof splits into
partitions.  The admitter takes, one partition at a time in the order the proofs arrived
(a proof's partitions together, by index), each one's share of the host-memory budget
and a slot of the synthesis pool (`partition_workers`).  The partition is then
synthesised and prepped on the CPU and put on the GPU queue (bounded by
`max_gpu_queue_depth`: a full queue holds the synthesis slot, which is the
backpressure).  `gpu_workers_per_device` workers per device take partitions off the
queue and run the design on each; which device a partition goes to is the placement
policy's (simgpu.sched.placement: one shared queue, or a dispatcher handing each
partition to a worker of the device the policy chose).  A partition ends completed or
failed with a reason; a proof fails if any of its partitions does, and its partitions
still queued are then abandoned rather than proved for nothing.

Admission is one process, like a maître d' seating parties in the order they came.
Were each partition to ask for its slot itself, concurrent proofs' partitions would take
the slots in whatever order their threads reached the pool (the real runtime's threads
race there; SimPy's processes never do).  The proofs would then interleave on the GPU,
all j of them would end together, and the GPU would idle while the next j were
synthesised from cold.  The order is the daemon's rule, the same in both runtimes.

The host budget is kept as cuzk keeps it: the daemon's budget (RAM less a safety
margin, less what is resident) gates synthesis; a partition reserves its estimate before
it may start, gives back part of it when its GPU work starts (cuzk: the a, b, c share,
once they are on their way to the device) and the rest when it ends.  The budget is an
estimate: the host ledger, not the budget, decides whether memory runs out.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from simgpu.config import PipelineConfig, Workload
from simgpu.errors import DesignError, OutOfMemory, RunStopped, SimgpuError
from simgpu.sched.placement import PEAK_STAGES, DeviceView, Placement, make_placement
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
    #: Every proof the run was asked for, submitted or not (the report accounts for each).
    proofs: list[Proof] = field(default_factory=list)

    def run(self) -> Proc:
        cfg = self.config
        self.queue: Queue = self.rt.queue("gpu", cfg.max_gpu_queue_depth)
        self.pool: Semaphore = self.rt.semaphore("partition_workers", cfg.partition_workers)
        self.budget: Semaphore = self.rt.semaphore("host_budget", self.rt.host_budget())
        self.reserved: dict[Partition, int] = {}  # what each live partition holds of the budget
        self.placement: Placement = make_placement(cfg.placement)
        self.admissions: Queue = self.rt.queue("admissions")
        admitter = self.rt.spawn(self.admitter(), "admitter")
        workers = [
            Worker(device, i) for device in range(cfg.devices) for i in range(cfg.gpu_workers_per_device)
        ]
        self.workers = workers
        dispatcher = None
        if self.placement.dispatches:
            # workers say when they are idle; each device has its own queue of placed partitions
            self.idle: Queue = self.rt.queue("idle_workers")
            self.placed: list[Queue] = [self.rt.queue(f"gpu{d}/placed") for d in range(cfg.devices)]
            dispatcher = self.rt.spawn(self.dispatcher(), "dispatcher")
        worker_tasks = [
            self.rt.spawn(self.gpu_worker(w), w.name, device=w.device, worker=w.name) for w in workers
        ]
        proofs = [Proof(i, self.workload.partitions, self.workload.constraints) for i in range(cfg.proofs)]
        self.proofs = proofs
        if cfg.arrival_rate:
            arrivals = [self.rt.spawn(self.open_loop(proofs), "arrivals")]
        else:
            arrivals = [
                self.rt.spawn(self.client(proofs[j :: cfg.concurrency]), f"client{j}")
                for j in range(min(cfg.concurrency, len(proofs)))
            ]
        for task in arrivals:
            yield task
        yield self.admissions.put(None)
        yield admitter
        if dispatcher is not None:
            yield self.queue.put(None)  # the dispatcher hands each worker its stop sign
            yield dispatcher
        else:
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
        proof.started = True
        self.rt.record("proof_submitted", proof=proof.id, partitions=proof.partitions)
        parts = [Partition(proof, i, proof.constraints, self.rt.event()) for i in range(proof.partitions)]
        admitted = self.rt.event()  # succeeds with the partitions' tasks, all admitted
        try:
            yield self.admissions.put((parts, admitted))
            tasks = yield admitted
            for task in tasks:
                yield task
        except RunStopped as e:
            # The run is being stopped: this proof ends failed, with that reason, and the
            # client that submitted it submits no more.
            self.finish(proof, f"not finished: {e}")
            raise
        self.finish(proof)
        return proof

    def finish(self, proof: Proof, reason: str | None = None) -> None:
        """A submitted proof ends: completed, or failed with a reason (once)."""
        if proof.finished_at is not None:
            return
        proof.finished_at = self.rt.now()
        if reason is not None and not proof.failed:
            proof.failed, proof.reason = True, reason
        if proof.failed:
            self.rt.record("proof_failed", proof=proof.id, reason=proof.reason)
        else:
            self.rt.record("proof_completed", proof=proof.id, latency=proof.finished_at - proof.submitted_at)

    def abandon(self, reason: str) -> None:
        """Fail every submitted proof still in flight (a run that cannot finish): nothing a
        user submitted is left without an end."""
        for proof in self.proofs:
            if proof.started:
                self.finish(proof, reason)

    def admitter(self) -> Proc:
        """Admit the proofs' partitions in turn: for each, its share of the budget, then a
        synthesis slot, then its task.  Both waits are strictly FIFO, so admitting one at
        a time gives the order they would have if every partition had asked at once, in
        arrival order.  If admission cannot go on, the proof waiting for it hears why."""
        while True:
            item = yield self.admissions.get()
            if item is None:
                return
            parts, admitted = item
            tasks = []
            try:
                for part in parts:
                    tasks.append((yield from self.admit(part)))
            except SimgpuError as e:
                admitted.fail(e)
                raise
            admitted.succeed(tasks)

    def admit(self, part: Partition) -> Proc:
        """One partition's budget share and synthesis slot, then its task (which holds
        both from here on).  A partition of a proof that already failed takes neither.
        Its waits are recorded from its turn: the time it stood in line before that is
        covered by the waits of the partitions ahead of it."""
        rt = self.rt
        name, where = f"p{part.proof.id}.{part.index}", {"proof": part.proof.id, "partition": part.index}
        if part.proof.failed:
            return rt.spawn(self.partition(part, admitted=False), name, **where)
        estimate = rt.partition_estimate(part)
        yield from self.waiting(self.budget.acquire(estimate), "host_budget", part)
        self.reserved[part] = estimate
        try:
            yield from self.waiting(self.pool.acquire(), "synthesis_slot", part)
        except BaseException:
            self.budget.release(self.reserved.pop(part))
            raise
        rt.record("partition_admitted", **where)
        return rt.spawn(self.partition(part, admitted=True), name, **where)

    def partition(self, part: Partition, admitted: bool) -> Proc:
        """One partition's life on the host once admitted (its budget share and a
        synthesis slot held): it is made ready for the GPU, then it waits for its end and
        gives its memory back.  Not admitted, it is abandoned at once."""
        rt = self.rt
        try:
            if not admitted:
                raise PartitionAbandoned(f"{part.proof.label} already failed")
            yield from self.synthesize(part)
            yield part.done
            rt.record("partition_completed", proof=part.proof.id, partition=part.index)
        except DesignError:
            raise
        except SimgpuError as e:
            part.fail(e)
            if not part.proof.failed:
                part.proof.failed = True
                part.proof.reason = f"partition {part.index}: {e}"
            rt.record("partition_failed", proof=part.proof.id, partition=part.index, reason=str(e))
            if isinstance(e, RunStopped):
                raise
        finally:
            rt.free(part.host)
            part.host = None
            held = self.reserved.pop(part, None)
            if held is not None:
                self.budget.release(held)

    def _early_release(self, part: Partition) -> int:
        """What a partition gives back of its reservation when its GPU work starts."""
        return self.rt.partition_release_at_gpu_start(part)

    def gpu_work_starts(self, part: Partition) -> None:
        """A GPU worker took `part`: give back the early share of its reservation."""
        held = self.reserved.get(part, 0)
        if held < self.rt.partition_estimate(part):
            return  # its share went back at an earlier attempt's GPU start
        share = min(held, self._early_release(part))
        if share > 0:
            self.reserved[part] = held - share
            self.budget.release(share)

    def make_ready(self, part: Partition) -> Proc:
        """A synthesis slot, then `synthesize` (a retry's way back to the GPU queue)."""
        yield from self.waiting(self.pool.acquire(), "synthesis_slot", part)
        yield from self.synthesize(part)

    def synthesize(self, part: Partition) -> Proc:
        """Holding a synthesis slot: synthesis and prep on the CPU, then onto the GPU
        queue (a full queue keeps the slot: that is the backpressure on synthesis); the
        slot is given back however it ends."""
        rt = self.rt
        try:
            if part.proof.failed:
                raise PartitionAbandoned(f"{part.proof.label} already failed")
            part.host = yield rt.stage("synthesis", part, None)
            yield rt.stage("prep", part, None)
            # recorded before the put: the worker that takes it acts only after it
            rt.record("partition_queued", proof=part.proof.id, partition=part.index)
            yield from self.waiting(self.queue.put(part), "gpu_queue_room", part)
        finally:
            self.pool.release()

    def waiting(self, waitable: object, on: str, part: Partition | None = None) -> Proc:
        """Yield `waitable` and return its value; a wait that lasted is recorded when it
        ends (`waited`: what the report's bottleneck shares are made of)."""
        since = self.rt.now()
        value = yield waitable
        waited = self.rt.now() - since
        if waited > 0:
            # a worker's wait for its next partition belongs to no partition (not its last one)
            where = (
                {"proof": None, "partition": None}
                if part is None
                else {"proof": part.proof.id, "partition": part.index}
            )
            self.rt.record("waited", on=on, waited=waited, **where)
        return value

    # ---------------------------------------------------------------- GPU workers

    def dispatcher(self) -> Proc:
        """Place each ready partition, in queue order, on the device the policy chooses
        (simgpu.sched.placement), and hand it to an idle worker there."""
        rt, policy, n = self.rt, self.placement, self.config.devices
        idle = [0] * n
        committed = [0] * n
        # per partition, its placements not yet finished: (device, need), oldest first
        open_: dict[Partition, list[tuple[int, int]]] = {}

        def note(msg: tuple[Worker, Partition | None]) -> None:
            worker, finished = msg
            idle[worker.device] += 1
            if finished is not None:
                device, need = open_[finished].pop(0)
                if not open_[finished]:
                    del open_[finished]
                committed[device] -= need

        while True:
            part = yield from self.waiting(self.queue.get(), "gpu_queue_item")
            if part is None:
                break
            need = rt.vram_estimate(part, *PEAK_STAGES)
            while True:
                while len(self.idle):  # what the workers said since: nothing here waits
                    note((yield self.idle.get()))
                views = [
                    DeviceView(d, idle[d], rt.vram_free(d), rt.vram_capacity(d), committed[d])
                    for d in range(n)
                ]
                device = policy.choose(need, views)
                if device is None and sum(idle) == len(self.workers):
                    device = policy.overflow(need, views)  # nothing in flight can make room
                if device is not None:
                    break
                note((yield self.idle.get()))  # a worker finishing is what can change the answer
            idle[device] -= 1
            committed[device] += need
            open_.setdefault(part, []).append((device, need))
            rt.record(
                "partition_placed",
                proof=part.proof.id,
                partition=part.index,
                device=device,
                placement=policy.name,
                need=need,
                available=views[device].available,
            )
            yield self.placed[device].put(part)
        for w in self.workers:
            yield self.placed[w.device].put(None)

    def gpu_worker(self, worker: Worker) -> Proc:
        finished: Partition | None = None
        while True:
            if self.placement.dispatches:
                yield self.idle.put((worker, finished))
                part = yield from self.waiting(self.placed[worker.device].get(), "gpu_queue_item")
            else:
                part = yield from self.waiting(self.queue.get(), "gpu_queue_item")
            if part is None:
                return
            finished = part
            # when this worker took it: the end of its wait in the queue (cuzk's GPU_PICKUP)
            self.rt.record("partition_picked", proof=part.proof.id, partition=part.index)
            if part.proof.failed:
                part.fail(PartitionAbandoned(f"{part.proof.label} already failed"))
                continue
            part.attempts += 1
            self.rt.set_context(proof=part.proof.id, partition=part.index)
            self.gpu_work_starts(part)
            try:
                yield from self.design(self.rt, worker, part)
            except DesignError:
                raise  # a bug in the design stops the run; it is not a partition's failure
            except RunStopped as e:
                part.fail(e)
                raise
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
            # Synthesised again within what it still holds of the budget: taking back the
            # share it gave at its GPU start could wait behind a partition that waits for
            # this one to end (the budget is FIFO).  The host ledger still books its bytes.
            yield from self.make_ready(part)
        except SimgpuError as e:
            part.fail(e)
