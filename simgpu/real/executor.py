"""The real Groth16 prover as RealRuntime's stage executor.

Each stage of a partition calls simgpu.prover.groth16 on the partition's data:
synthesis in a pool of worker processes (CPU-heavy Python, outside this process's GIL),
b_g2_msm in a pool of processes holding the key's G2 points (simgpu.prover.g2pool) or,
with `b_g2_on="gpu"`, on the partition's device (the G2 MSM kernels), prep
and epilogue on the calling thread, prestage and kernels on the worker's device backend
(CuPy, or the CPU backend whose VRAM is a capped ledger).  Every partition proof is
verified in its epilogue; a proof that does not verify fails its partition with
`ProofInvalid`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simgpu.config import PipelineConfig
from simgpu.errors import OutOfMemory, SimgpuError, UserError
from simgpu.profile import Resolved, profile_from_dict
from simgpu.prover import B_G2_THREADS, address_space, groth16, handoff
from simgpu.prover.circuits import FAMILIES, CircuitSpec, circuit_spec
from simgpu.prover.device import MSM_CAPACITIES
from simgpu.prover.g2pool import G2Pool
from simgpu.prover.memory_plan import ProverShape, prover_plan, prover_profile_dict
from simgpu.prover.setup import cached_keys, key_path
from simgpu.prover.synthesis import synthesize, warm_worker
from simgpu.sched.work import Partition
from simgpu.workers import spawn_pool, stop_pool

GPU_STAGES = ("prestage", "kernels")
BACKENDS = ("cupy", "cpu")
#: How a partition's a, b, c reach the device (ProverSettings.abc_upload).
ABC_UPLOADS = ("pinned", "staged")


def calibrated_upload(recorded: str | None) -> str | None:
    """The upload a run takes to match a calibrated profile: as it recorded, where some of
    its pins were refused ("mixed") the pinned way it asked for; None where it says none."""
    return "pinned" if recorded == "mixed" else recorded


#: The CPU backend's largest partition: its H computation is the kernels' Python-integer
#: reference, about a second at 2^12 and a minute at 2^16.
MAX_CPU_CONSTRAINTS = 1 << 16
#: The most chunks one b_g2_msm may be split over (its pool has at least that many
#: processes: one per core is the point, hundreds would only thrash).
MAX_B_G2_THREADS = 256
SETUP_SEED = 20260601
#: Set (to anything) to leave Python's cyclic collector as it is, set-up's objects
#: included (see _freeze_setup): the A/B of a lease (experiments/leases/device_lease46.sh
#: 3), not a setting for a prover.
GC_AS_USUAL_ENV = "SIMGPU_GC_AS_USUAL"


class ProofInvalid(SimgpuError):
    """A partition proof that the verifier rejected."""


@dataclass(eq=False)
class HostData:
    """A partition's data in host RAM, as its stages hand it on: the synthesis output,
    then the prepped scalars, the kernels' G1 points and the G2 point for the epilogue.
    It is the executor's own: designs see only the handle (`part.host`).  Freeing it
    drops the references (the memory goes back when nothing else holds it)."""

    synth: Any = None
    prepared: Any = None
    kernel_out: Any = None
    b_g2: Any = None

    def free(self) -> None:
        self.synth = None
        self.prepared = None
        self.kernel_out = None
        self.b_g2 = None


@dataclass
class StageProbe:
    """What the executor reports about each stage it runs, for a measurer (calibrate):
    the parts of a stage it can time apart (`seconds`: a synthesis's compute and the
    worker's pickling of its result; the kernels' phases) and the device pool's peak
    during a device stage.  Set `ProverExecutor.probe` to one; it is refilled per stage."""

    seconds: dict[str, float] = field(default_factory=dict)
    vram_peak: int = 0

    def clear(self) -> None:
        self.seconds = {}
        self.vram_peak = 0


_frozen_by = 0  # executors whose set-up is frozen now (gc.freeze is the process's)
_frozen_lock = threading.Lock()


def _freeze_setup() -> bool:
    """Move every object set-up left (the prover's modules, numpy's, numba's, CuPy's, the
    keys' bookkeeping) out of the cyclic collector's sight, where GC_AS_USUAL_ENV is not
    set; whether it did.

    The collector runs holding the interpreter lock, on whichever thread allocated last,
    and a full pass visits every tracked object: set-up leaves about 132 thousand of them
    (a CPU-backend run at 2^16 on the developer's 2-core machine), and a full pass over
    them took 34-73 ms there.  Every GPU worker's launch loop stands still through it.
    A short run may see none after set-up (four proofs there saw three passes of the
    youngest generation only: experiments/collector_pauses.py); a daemon's long run, or
    one that makes many Python objects (a traced run's sampler), reaches full passes.
    Frozen (gc.freeze), a full pass visits only what the run made since (0.0 ms right
    after).  Like a librarian who stops re-shelving the reference collection every
    evening and checks only the day's returns."""
    global _frozen_by
    if os.environ.get(GC_AS_USUAL_ENV):
        return False
    with _frozen_lock:
        gc.collect()
        gc.freeze()
        _frozen_by += 1
    return True


def _thaw_setup() -> None:
    """Give the frozen objects back to the collector once no executor needs them frozen:
    a process that runs many executors (calibrate, the validation grid) must collect the
    cycles each one leaves, device arrays among them."""
    global _frozen_by
    with _frozen_lock:
        _frozen_by -= 1
        if _frozen_by == 0:
            gc.unfreeze()


def host_rss() -> int:
    """Resident set size of this process, in bytes (Linux /proc)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def host_ram() -> int:
    """Physical RAM of this machine, in bytes (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


@dataclass
class ProverSettings:
    """How the real prover is set up for a run: where its GPU stages run and with what."""

    backend: str = "cpu"  # "cpu" or "cupy"
    devices: int = 1
    #: each device's pool cap in bytes: one for every device, or one per device (mixed
    #: cards); None = the card's own memory
    vram_limit: int | tuple[int, ...] | None = None
    partition_workers: int = 2
    b_g2_threads: int = B_G2_THREADS
    #: where b_g2_msm runs: "cpu" (the G2 pool, outside the GPU lock: supraseal) or "gpu"
    #: (the worker's device, as bellperson does)
    b_g2_on: str = "cpu"
    resident_bases: bool = False
    stream_batch: int | None = None
    #: how b_g2_msm's G2 MSM on a device sizes its arrays: by the "witness" (the
    #: partition's own count) or by the "key" (one count for every partition;
    #: simgpu.prover.device.MSM_CAPACITIES)
    msm_capacity: str = "witness"
    #: how each partition's a, b, c reach the device (ABC_UPLOADS): "pinned", page-locked
    #: where they land so that the prestage only queues their copies (transfer.pin_pages),
    #: or "staged", packed through the page-locked staging under the GPU lock
    abc_upload: str = "pinned"
    keys_dir: Path = field(default_factory=lambda: Path(os.environ.get("SIMGPU_KEYS", "out/keys")))
    total_budget: int | None = None
    safety_margin: int = 2 << 30
    seed: int = 0
    circuit: str = FAMILIES[0]  # the circuit family proved (simgpu.prover.circuits.circuit_spec)

    def vram_limit_of(self, device: int) -> int | None:
        """Device `device`'s pool cap (None: uncapped)."""
        return self.vram_limit[device] if isinstance(self.vram_limit, tuple) else self.vram_limit

    def spec(self, constraints: int) -> CircuitSpec:
        """The circuit of `constraints` rows these settings prove."""
        return circuit_spec(self.circuit, constraints)

    @classmethod
    def from_config(cls, cfg: PipelineConfig, **prover: Any) -> ProverSettings:
        """The settings of a run of `cfg` (devices, VRAM cap, pool size, witness seed), plus
        the prover's own options (backend, b_g2_threads, resident_bases, keys_dir)."""
        return cls(
            devices=cfg.devices,
            vram_limit=cfg.vram,
            partition_workers=cfg.partition_workers,
            seed=cfg.seed,
            **{k: v for k, v in prover.items() if v is not None},
        )

    @classmethod
    def as_calibrated(cls, prof: Any, **prover: Any) -> ProverSettings:
        """The prover set up as the calibrated profile `prof` measured it (its
        [calibration]: where b_g2_msm ran and over how many cores, the circuit, how the G2
        MSM sized its arrays; the defaults where the profile does not say), plus `prover`."""
        calibrated = {
            "b_g2_on": prof.calibrated_b_g2_on,
            "b_g2_threads": prof.calibrated_b_g2_threads,
            "circuit": prof.calibrated_circuit,
            "msm_capacity": prof.calibrated_msm_capacity,
            "abc_upload": calibrated_upload(prof.calibrated_abc_upload),
        }
        return cls(**{k: v for k, v in calibrated.items() if v is not None} | prover)

    def check(self, constraints: int) -> ProverSettings:
        """Refuse, in one line, what this machine or this prover cannot run, before any
        work: an unknown backend, no GPU for cupy, a circuit too large for the CPU backend."""
        if self.backend not in BACKENDS:
            raise UserError(f"--backend {self.backend!r}: unknown (known: {', '.join(BACKENDS)})")
        if self.b_g2_on not in ("cpu", "gpu"):
            raise UserError(f"--b-g2-on {self.b_g2_on!r}: must be cpu or gpu")
        if self.abc_upload not in ABC_UPLOADS:
            raise UserError(f"--abc-upload {self.abc_upload!r}: must be {' or '.join(ABC_UPLOADS)}")
        if self.msm_capacity not in MSM_CAPACITIES:
            raise UserError(f"--msm-capacity {self.msm_capacity!r}: must be {' or '.join(MSM_CAPACITIES)}")
        if isinstance(self.vram_limit, tuple) and len(self.vram_limit) != self.devices:
            raise UserError(f"--vram: {len(self.vram_limit)} sizes for {self.devices} device(s)")
        if self.circuit not in FAMILIES:
            raise UserError(f"--circuit {self.circuit!r}: unknown (known: {', '.join(FAMILIES)})")
        k = self.b_g2_threads
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_B_G2_THREADS:
            raise UserError(f"--b-g2-threads: must be a whole number in 1..{MAX_B_G2_THREADS}, got {k!r}")
        if self.backend == "cpu" and constraints > MAX_CPU_CONSTRAINTS:
            raise UserError(
                f"--constraints {constraints:,}: the CPU backend proves at most {MAX_CPU_CONSTRAINTS:,} "
                "constraints per partition (its NTT is a Python reference); use --backend cupy on a GPU"
            )
        try:
            self.keys_dir.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as e:
            raise UserError(f"--keys-dir {self.keys_dir}: cannot be a directory of keys ({e})") from None
        if self.backend == "cupy":
            from simgpu.prover.cupy_device import cupy_device_available

            if not cupy_device_available():
                raise UserError(
                    "--backend cupy: no usable CUDA device (CuPy missing or no GPU here); "
                    "--backend cpu proves small circuits without one"
                )
        return self


class DeviceG2:
    """b_g2_msm on a device behind the G2 pool's interface (`msm(prepared, chunks)`,
    `close()`), for callers that hold the pool (calibration): `chunks` has no meaning
    on the GPU."""

    def __init__(self, pk: Any, backend: Any) -> None:
        self.pk, self.backend = pk, backend

    def msm(self, prepared: Any, chunks: int = 1) -> Any:
        return groth16.b_g2_msm(prepared, self.pk, backend=self.backend)

    def close(self, stop: bool = False) -> None:
        return None


class ProverExecutor:
    """Runs the prover's stages for RealRuntime (see simgpu.real.runtime.StageExecutor)."""

    def __init__(self, spec: CircuitSpec, settings: ProverSettings) -> None:
        self.spec = spec
        self.settings = settings.check(spec.constraints)
        # The trusted setup (on the GPU for CuPy) needs far more memory than proving: make
        # the keys on an uncapped device, then emulate the smaller card.
        self.backends = [self._make_backend(d, capped=False) for d in range(settings.devices)]
        self.pk, self.vk, self.setup_seconds = cached_keys(
            spec, SETUP_SEED, settings.keys_dir, self.backends[0] if settings.backend == "cupy" else None
        )
        if settings.vram_limit and settings.backend == "cupy":
            for d, b in enumerate(self.backends):
                b.pool.free_all_blocks()
                b.set_vram_limit(settings.vram_limit_of(d))
        for b in self.backends:
            groth16.preload(self.pk, b)
        #: how each received result's a, b and c reached the device: page-locked where
        #: they lay, or through the staging (abc_upload "staged", a refusal, a pickled
        #: result): the runs' and calibrate's record of which prover they measured
        self.abc_uploads = {"pinned": 0, "staged": 0}
        self._uploads_lock = threading.Lock()
        #: page-locks each received result's a, b and c where they lie, so that the
        #: prestage only queues their copies (the GPU's backend; None on the CPU's)
        self._can_pin = hasattr(self.backends[0], "pin_pages")
        self.pin: Callable[[np.ndarray], Any] | None = (
            self.backends[0].pin_pages if self._can_pin and settings.abc_upload == "pinned" else None
        )
        self._pool: ProcessPoolExecutor | None = None
        #: names this executor's handed-off synthesis results (see close)
        self._tag = f"simgpu-{os.getpid()}-{id(self):x}"
        self.g2: G2Pool | DeviceG2 | None = None
        self._peaks = [0] * settings.devices
        self._peak_lock = threading.Lock()
        self.verified: dict[tuple[int, int], bool] = {}
        #: calibrate's hook: when set, each stage reports what it can time apart
        self.probe: StageProbe | None = None
        try:
            # b_g2_msm's processes, one per core: concurrent MSMs share the cores, as the
            # CPU threads of a native prover do, and none of them holds this process's GIL.
            # With b_g2_on "gpu", the first device instead (run_stage uses the partition's).
            if settings.b_g2_on == "cpu":
                workers = max(settings.b_g2_threads, os.cpu_count() or 1)
                self.g2 = G2Pool(key_path(spec, SETUP_SEED, settings.keys_dir), workers)
            else:
                self.g2 = DeviceG2(self.pk, self.backends[0])
            self._warm_up()
        except BaseException:
            self.close(stop=True)  # no worker processes left behind (a card too small, Ctrl-C)
            raise
        self.baseline = [b.used() for b in self.backends]
        plan = prover_plan(
            ProverShape.estimate(spec),
            stream_batch=self.backends[0].stream_batch,
            resident_bases=settings.resident_bases,
            b_g2_on=settings.b_g2_on,
            msm_capacity=settings.msm_capacity,
        )
        self.plan = plan
        self._resolved: Resolved = profile_from_dict(
            prover_profile_dict(
                plan,
                name="prover",
                hardware=self.hardware(),
                workload={"name": "run", "partitions": 1, "constraints": spec.constraints},
            )
        ).resolve(spec.constraints)
        #: set-up's objects out of the collector's sight for the run (_freeze_setup)
        self.gc_frozen = _freeze_setup()

    # ------------------------------------------------------------ set-up

    def _make_backend(self, device: int, capped: bool = True) -> Any:
        s = self.settings
        kw: dict[str, Any] = {"resident_bases": s.resident_bases, "msm_capacity": s.msm_capacity}
        if s.stream_batch:
            kw["stream_batch"] = s.stream_batch
        if s.backend == "cupy":
            from simgpu.prover.cupy_device import CupyDevice

            try:
                return CupyDevice(device=device, vram_limit=s.vram_limit_of(device) if capped else None, **kw)
            except SimgpuError as e:
                raise SimgpuError(f"{e} (without a GPU, --backend cpu runs small circuits)") from None
        if s.backend == "cpu":
            from simgpu.prover.cpu_device import CpuDevice

            return CpuDevice(vram_limit=s.vram_limit_of(device), device=device, **kw)
        raise UserError(f"unknown backend {s.backend!r} (cupy or cpu)")

    def _warm_up(self) -> None:
        """Prove one partition per device before the run: kernel compilation, NTT tables
        and pinned copies happen here, not in the first measured partition.  The warm-up
        proof is verified too; a card too small for one partition is a user error."""
        synth = synthesize(self.spec, 0)
        for d, b in enumerate(self.backends):
            try:
                proof = groth16.prove(self.pk, synth, b, b_g2=lambda p, b=b: self._b_g2(p, b))
            except OutOfMemory as e:
                on = f" (gpu{d})" if self.settings.devices > 1 else ""
                raise UserError(
                    f"--vram {self.settings.vram_limit_of(d)}{on}: one partition of "
                    f"{self.spec.constraints:,} constraints does not fit ({e})"
                ) from None
            if not groth16.verify(self.vk, synth.public_inputs, proof):
                raise ProofInvalid("the warm-up proof did not verify: the prover is broken here")
        # Start every synthesis worker too: a spawned process spends a few tenths of a
        # second importing numpy and the prover, which would otherwise land in the first
        # partitions of the run.  A submit that finds no idle worker spawns one, and
        # workers take far longer to start than these submits take to arrive.
        # Each worker also builds this circuit (its matrices and field program, cached per
        # process) at full size: the H200 calibration of 2026-12-01 timed that build (about
        # 1 s at 2^22) into the first synthesis of each worker.
        jobs = [self.pool().submit(warm_worker, self.spec) for _ in range(self.settings.partition_workers)]
        address_space.warm()  # the loops that map and unmap handed-off results
        for f in jobs:
            f.result()

    def hardware(self) -> dict[str, Any]:
        """The machine as a profile's [hardware] table sees it: what the executor knows
        (device, its capacity or cap, cores, RAM, the CUDA driver, the allocator a cap
        meets: CuPy's caching pool on the GPU, exact bytes in the CPU backend's ledger).
        Bandwidths are not known here (1.0 GB/s placeholders); calibrate measures and
        replaces them."""
        b = self.backends[0]
        driver = ""
        if self.settings.backend == "cupy":
            from simgpu.gpu.cuda import get_cupy

            driver = str(get_cupy().cuda.runtime.driverGetVersion())
        return {
            "gpu": self.device_name(),
            "vram": int(b.capacity()),
            "vram_resident": 0,
            "cpu_cores": os.cpu_count() or 1,
            "host_ram": host_ram() or (1 << 40),
            "host_resident": 0,
            "membw_gbps": 1.0,
            "h2d_gbps": 1.0,
            "driver": driver,
            "vram_pool": "caching" if self.settings.backend == "cupy" else "exact",
        }

    def device_name(self) -> str:
        if self.settings.backend == "cupy":
            from simgpu.gpu.cuda import get_cupy

            cp = get_cupy()
            return cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        return "CPU backend (emulated device)"

    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = spawn_pool(self.settings.partition_workers)
        return self._pool

    def close(self, stop: bool = False) -> None:
        """Shut the worker processes down (`stop`: at once, their work abandoned)."""
        if self._pool is not None:
            if stop:
                stop_pool(self._pool)
            else:
                self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self.g2 is not None:
            self.g2.close(stop)
            self.g2 = None
        handoff.clear(self._tag)  # results a stopped run never received
        if getattr(self, "gc_frozen", False):
            self.gc_frozen = False
            _thaw_setup()

    # ------------------------------------------------------------ stages

    def _noted(self, synth: Any) -> Any:
        """`synth`, its upload's way counted (abc_uploads) where a, b, c could be pinned
        (the backend can, or a pin is set: CPU tests stand one in)."""
        if self._can_pin or self.pin is not None:
            with self._uploads_lock:
                self.abc_uploads["pinned" if synth.abc_pin is not None else "staged"] += 1
        return synth

    def stage_on(self, name: str) -> str:
        if name == "b_g2_msm":
            return self.settings.b_g2_on
        return "gpu" if name in GPU_STAGES else "cpu"

    def _b_g2(self, prepared: Any, backend: Any) -> Any:
        """b_g2_msm where the settings put it: the G2 pool, or `backend`'s device."""
        if self.settings.b_g2_on == "cpu":
            return self.g2.msm(prepared, self.settings.b_g2_threads)
        return groth16.b_g2_msm(prepared, self.pk, backend=backend)

    def partition_seed(self, part: Partition) -> int:
        # distinct witnesses per (run seed, proof, partition); 0 is the warm-up's
        return 1 + (self.settings.seed * 1_000_003 + part.proof.id) * 1009 + part.index

    def run_stage(self, name: str, part: Partition, device: int | None, inputs: dict[str, Any]) -> Any:
        probe = self.probe
        if probe is not None:
            probe.clear()
        if name == "synthesis":
            # in a worker process; the result comes back through shared memory (handoff)
            seed = self.partition_seed(part)
            if probe is None:
                job = self.pool().submit(handoff.synthesize_handed_off, self.spec, seed, self._tag)
                return HostData(synth=self._noted(handoff.receive(job.result(), self.pin)))
            job = self.pool().submit(handoff.synthesize_handed_off_timed, self.spec, seed, self._tag)
            out, compute, share, extra = job.result()
            synth = self._noted(handoff.receive(out, self.pin))
            probe.seconds.update(compute=compute, pickle=share, extra=extra)
            return HostData(synth=synth)
        host: HostData = part.host
        if name == "prep":
            host.prepared = groth16.prep(host.synth, self.pk)
            host.synth = None  # prep holds a, b, c until prestage uploads them
            return host
        if name == "prestage":
            return self._on_device(device, name, lambda b: groth16.prestage(host.prepared, b))
        if name == "kernels":
            timings = probe.seconds if probe is not None else None
            out = self._on_device(
                device,
                name,
                lambda b: groth16.kernels(host.prepared, self.pk, b, inputs.get("buffers"), timings=timings),
            )
            host.kernel_out = out
            return out
        if name == "b_g2_msm":
            if self.settings.b_g2_on == "cpu":
                g2 = self.g2.msm(host.prepared, self.settings.b_g2_threads)
            else:
                g2 = self._on_device(device, name, lambda b: self._b_g2(host.prepared, b))
            host.b_g2 = g2
            return g2
        if name == "epilogue":
            rng = np.random.default_rng(self.partition_seed(part))
            proof = groth16.epilogue(host.prepared, self.pk, host.kernel_out, host.b_g2, rng)
            ok = groth16.verify(self.vk, host.prepared.public_inputs, proof)
            self.verified[(part.proof.id, part.index)] = ok
            if not ok:
                raise ProofInvalid(f"{part.label}: the proof does not verify")
            return proof
        raise UserError(f"the prover has no stage {name!r}")

    def _on_device(self, device: int | None, stage: str, fn: Any) -> Any:
        backend = self.backends[device or 0]
        with backend.peak_scope(stage) as meter:
            out = fn(backend)
            backend.synchronize()
        with self._peak_lock:
            self._peaks[device or 0] = max(self._peaks[device or 0], meter.peak)
        if self.probe is not None:
            self.probe.vram_peak = meter.peak
        return out

    def free(self, handle: Any) -> None:
        # A device whose pool is being traced sees the frees inside its scope (its hook is
        # thread-local, and this runs on whichever worker lets the buffers go).
        with contextlib.ExitStack() as scopes:
            for backend in self.backends:
                if getattr(backend, "alloc_trace", None) is not None:
                    scopes.enter_context(backend.peak_scope("free"))
            handle.free()

    # ------------------------------------------------------------ memory

    def vram_capacity(self, device: int) -> int:
        return int(self.backends[device].capacity())

    def vram_resident(self, device: int) -> int:
        return int(self.baseline[device])

    def vram_used(self, device: int) -> int:
        return int(self.backends[device].used())

    def vram_peak(self, device: int) -> int:
        return self._peaks[device]

    def reset_vram_peaks(self) -> None:
        with self._peak_lock:
            self._peaks = [backend.used() for backend in self.backends]

    def vram_estimate(self, part: Partition, stages: tuple[str, ...]) -> int:
        return self._resolved.vram_peak(stages)

    def partition_estimate(self, part: Partition) -> int:
        return self._resolved.partition_estimate

    def partition_release_at_gpu_start(self, part: Partition) -> int:
        # a, b, c are on the device once the GPU work starts, as in cuzk's two-step release
        return self._resolved.buffers["host_abc"]

    def host_capacity(self) -> int:
        return host_ram() or (1 << 40)

    def host_budget(self) -> int:
        s = self.settings
        total = s.total_budget if s.total_budget is not None else self.host_capacity() - s.safety_margin
        return max(self._resolved.partition_estimate, total - host_rss())

    def host_rss(self) -> int:
        return host_rss()
