"""The `simgpu` command line: each command parses its flags, calls one function, prints.

Every command that runs a pipeline (predict, run, validate, and sweep and tune for the
fixed part of their grid) builds its configuration the same way, `pipeline_config`:
PipelineConfig's defaults (cuzk's), then the command's own defaults (COMMAND_DEFAULTS: a
real run proves small circuits), then the --config file, then the flags; a later source
wins.  Exit codes: 0 done (a predicted OOM is an
answer), 1 a run that failed for another reason, 2 bad input, 3 the design never
finishes (deadlock or livelock), 130 interrupted.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from simgpu.config import PLACEMENTS, PipelineConfig, Workload, read_config_table, vram_sizes
from simgpu.errors import DesignError, Interrupted, SimgpuError, UserError
from simgpu.units import parse_count, parse_size, size_ladder

# typer re-exports click's exceptions (recent releases vendor click); find their base
# class through the MRO so this works with either.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

#: Exit codes (README: "Exit codes").
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STUCK, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: Per command, the defaults that differ from PipelineConfig's (cuzk's daemon defaults).
COMMAND_DEFAULTS: dict[str, dict[str, Any]] = {
    "predict": {},
    # a real run proves small circuits on this machine unless told otherwise
    "run": {"proofs": 2, "concurrency": 2, "partition_workers": 2, "partitions": 2, "constraints": 1 << 12},
    # a real run beside a prediction on the profile's own workload
    "validate": {"proofs": 3, "concurrency": 2, "partition_workers": 4},
}
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Predict how a GPU proving pipeline shares a GPU (locks, VRAM, host RAM), then "
    "check it on a real Groth16 prover.",
)


def _fail(message: str, code: int) -> typer.Exit:
    Console(stderr=True, highlight=False, soft_wrap=True).print(message, markup=False)
    return typer.Exit(code)


@contextlib.contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """SIGTERM read as Ctrl-C while the block runs (in the main thread only, where Python
    delivers signals): a long measurement stopped by a job scheduler or `timeout` then
    keeps what it measured, where the default would end the process at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def reports_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the errors a user can cause into one line on stderr and an exit code, for
    the console script and typer's test runner alike (2: bad input; 1: a failure)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            raise _fail(f"error: {e}", EXIT_BAD_INPUT) from None
        except Interrupted as e:
            raise _fail(str(e), EXIT_INTERRUPTED) from None
        except DesignError as e:
            raise _fail(f"design error: {e}", EXIT_BAD_INPUT) from None
        except SimgpuError as e:
            raise _fail(f"error: {e}", EXIT_FAILED) from None

    return wrapper


# --------------------------------------------------------------------- shared options

DesignOpt = Annotated[
    str,
    typer.Option("--design", "-d", help="a shipped design (see `simgpu designs`) or path/to/file.py:name"),
]
ProfileOpt = Annotated[
    str,
    typer.Option(
        "--profile", "-p", help="a shipped profile (`simgpu profiles`), ./calibration/NAME.toml, or a path"
    ),
]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="cuzk-style TOML; flags override it")]
VramOpt = Annotated[
    str | None, typer.Option("--vram", help="VRAM per device, e.g. 16G, 24GiB (default: the profile's)")
]
#: predict and run: one size for every device, or one per device (mixed cards).
VramListOpt = Annotated[
    str | None,
    typer.Option(
        "--vram",
        help="VRAM of every device (16G), or one size per device for mixed cards (16G,24G); "
        "default: the profile's",
    ),
]
PlacementOpt = Annotated[
    str | None,
    typer.Option(
        help=f"which device a partition goes to: {', '.join(PLACEMENTS)} (README: Placement); "
        f"default {PLACEMENTS[0]}"
    ),
]
ConstraintsOpt = Annotated[
    str | None, typer.Option(help="constraints per partition, e.g. 2^20 (overrides the workload)")
]
PartitionsOpt = Annotated[int | None, typer.Option(help="partitions per proof (overrides the workload)")]
ProofsOpt = Annotated[int | None, typer.Option("--proofs", "-n", help="proofs to submit (cuzk-bench -c)")]
ConcurrencyOpt = Annotated[
    int | None, typer.Option("--concurrency", "-j", help="closed-loop clients (cuzk-bench -j)")
]
GpuWorkersOpt = Annotated[int | None, typer.Option("--gpu-workers", help="GPU workers per device")]
PartitionWorkersOpt = Annotated[int | None, typer.Option(help="synthesis pool size (partition_workers)")]
DevicesOpt = Annotated[int | None, typer.Option(help="GPUs")]
QueueDepthOpt = Annotated[int | None, typer.Option(help="bound of the GPU queue (0 = unbounded)")]
RetriesOpt = Annotated[int | None, typer.Option(help="re-queue a partition this often after an OOM")]
SeedOpt = Annotated[int | None, typer.Option(help="first seed (>= 0)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the JSON document instead of the table")]
TraceOpt = Annotated[Path | None, typer.Option(help="write a Chrome/Perfetto trace (.json)")]
PlotOpt = Annotated[Path | None, typer.Option(help="write a Gantt chart + memory over time (.png/.pdf/.svg)")]
RecordsOpt = Annotated[
    Path | None, typer.Option(help="write the (first) run's event records, JSON Lines, for simgpu explain")
]
BackendOpt = Annotated[str | None, typer.Option(help="cupy (the GPU) or cpu (small circuits, emulated VRAM)")]
KeysOpt = Annotated[Path, typer.Option(help="where trusted-setup keys are cached")]
#: Where b_g2_msm runs (run, validate, calibrate).
B2gOnOpt = Annotated[
    str, typer.Option("--b-g2-on", help="where b_g2_msm runs: cpu (the G2 pool) or gpu (the worker's device)")
]
MsmCapacityOpt = Annotated[
    str,
    typer.Option(
        "--msm-capacity",
        help="how b_g2_msm's G2 MSM on a device sizes its arrays: witness (each partition's "
        "count) or key (one count for every partition, the circuit's)",
    ),
]
AbcUploadOpt = Annotated[
    str,
    typer.Option(
        "--abc-upload",
        help="how each partition's a, b, c reach the device: pinned (page-locked where they land, "
        "the prestage only queues their copies, as cuzk) or staged (packed through a page-locked "
        "staging buffer under the GPU lock, as profiles calibrated before 2026-12-06 measured)",
    ),
]
BG2Opt = Annotated[
    int | None, typer.Option(help="cores one b_g2_msm is split over (its G2 pool has one process per core)")
]
CircuitOpt = Annotated[
    str,
    typer.Option(
        "--circuit",
        help="circuit family proved: generic (the shipped profiles') or porep (docs/circuits.md)",
    ),
]


def _circuit(name: str) -> str:
    from simgpu.prover.circuits import FAMILIES

    if name not in FAMILIES:
        raise UserError(f"--circuit: unknown circuit {name!r} (one of {', '.join(FAMILIES)})")
    return name


def pipeline_config(
    config: Path | None,
    *,
    command: str = "predict",
    vram: str | None = None,
    gpu_workers: int | None = None,
    partition_workers: int | None = None,
    devices: int | None = None,
    placement: str | None = None,
    queue_depth: int | None = None,
    memory_budget: str | None = None,
    proofs: int | None = None,
    concurrency: int | None = None,
    arrival_rate: float | None = None,
    retries: int | None = None,
    seed: int | None = None,
    workload: str | None = None,
    partitions: int | None = None,
    constraints: str | None = None,
    host_ram: str | None = None,
) -> PipelineConfig:
    """A command's configuration: defaults, the command's defaults, the file, the flags."""
    from simgpu.config import load_toml

    fields = dict(COMMAND_DEFAULTS[command])
    if config is not None:
        fields.update(read_config_table(load_toml(config, "config file"), str(config)))
    budget = None
    if memory_budget is not None and memory_budget != "auto":
        budget = parse_size(memory_budget, "--memory-budget")
    flags = {
        "vram": None if vram is None else vram_sizes(vram, "--vram"),
        "host_ram": None if host_ram is None else parse_size(host_ram, "--host-ram"),
        "gpu_workers_per_device": gpu_workers,
        "partition_workers": partition_workers,
        "devices": devices,
        "placement": placement,
        "max_gpu_queue_depth": queue_depth,
        "total_budget": budget,
        "proofs": proofs,
        "concurrency": concurrency,
        "arrival_rate": arrival_rate,
        "retries": retries,
        "seed": seed,
        "workload": workload,
        "partitions": partitions,
        "constraints": None if constraints is None else parse_count(constraints, "--constraints", 1),
    }
    fields.update({k: v for k, v in flags.items() if v is not None})
    if memory_budget == "auto":
        fields["total_budget"] = None
    return replace(PipelineConfig(), **fields).validate()


def writable(path: Path | None, what: str, suffixes: tuple[str, ...] = ()) -> Path | None:
    """An output path checked before any work is done: a file name (not a directory) in a
    directory that exists and can be written, with one of `suffixes` if given."""
    if path is None:
        return None
    text = str(path)
    if not text.strip():
        raise UserError(f"{what}: the path is empty")
    if "\x00" in text:
        raise UserError(f"{what}: the path holds a NUL byte")
    if path.is_dir():
        raise UserError(f"{what} {text}: is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"{what} {text}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"{what} {text}: directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{what} {text}: the file exists and is not writable")
    if suffixes and path.suffix.lower() not in suffixes:
        raise UserError(f"{what} {text}: give a file ending in {', '.join(suffixes)}")
    return path


PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _outputs(trace: Path | None, plot: Path | None, records: Path | None = None) -> None:
    writable(trace, "--trace")
    writable(records, "--records")
    writable(plot, "--plot", PLOT_SUFFIXES)
    if plot is not None:
        from simgpu.report.plot import require_matplotlib

        require_matplotlib()


def _write_outputs(
    result: Any, meta: Any, trace: Path | None, plot: Path | None, records: Path | None = None
) -> None:
    if records:
        from simgpu.report.records import write_records

        write_records(records, result, meta)
    if trace:
        from simgpu.report.trace import write_trace

        write_trace(trace, result, meta)
    if plot:
        from simgpu.report.plot import write_plot

        write_plot(plot, result, meta)


def _stuck(doc: dict[str, Any]) -> bool:
    return bool(doc.get("deadlock"))


def _positive(value: int, what: str, most: int | None = None) -> int:
    if value < 1 or (most is not None and value > most):
        limit = f"in 1..{most:,}" if most is not None else "at least 1"
        raise UserError(f"{what}: must be {limit}, got {value:,}")
    return value


PricePerHourOpt = Annotated[
    float | None,
    typer.Option(help="what the machine costs per hour: adds proofs per hour and the price per proof"),
]


def _price(value: float | None) -> float | None:
    if value is not None and not (value >= 0 and value < float("inf")):
        raise UserError(f"--price-per-hour: must be a non-negative number, got {value}")
    return value


# --------------------------------------------------------------------- commands


@app.command()
@reports_errors
def predict(
    design: DesignOpt = "single-lock",
    profile: ProfileOpt = "seed-rtx5070ti",
    vram: VramListOpt = None,
    config: ConfigOpt = None,
    workload: Annotated[
        str | None, typer.Option(help="a workload of the profile (default: its default)")
    ] = None,
    constraints: ConstraintsOpt = None,
    partitions: PartitionsOpt = None,
    proofs: ProofsOpt = None,
    concurrency: ConcurrencyOpt = None,
    arrival_rate: Annotated[
        float | None, typer.Option(help="open loop: Poisson arrivals, proofs per second")
    ] = None,
    gpu_workers: GpuWorkersOpt = None,
    partition_workers: PartitionWorkersOpt = None,
    devices: DevicesOpt = None,
    placement: PlacementOpt = None,
    max_gpu_queue_depth: QueueDepthOpt = None,
    memory_budget: Annotated[
        str | None, typer.Option(help="host memory budget (auto = RAM - safety margin)")
    ] = None,
    retries: RetriesOpt = None,
    host_ram: Annotated[
        str | None, typer.Option("--host-ram", help="host RAM, e.g. 512G (default: the profile's)")
    ] = None,
    price_per_hour: PricePerHourOpt = None,
    runs: Annotated[int, typer.Option(help="Monte Carlo replications (seeds seed..seed+runs-1)")] = 1,
    seed: SeedOpt = None,
    json_out: JsonOpt = False,
    trace: TraceOpt = None,
    plot: PlotOpt = None,
    records: RecordsOpt = None,
) -> None:
    """Predict throughput, latency, VRAM/host peaks and OOM risk of a design."""
    from simgpu.model.montecarlo import MAX_RUNS
    from simgpu.model.montecarlo import predict as run_predict
    from simgpu.profile import find_profile, load_profile
    from simgpu.report.document import build_document, meta_of, write_json
    from simgpu.report.table import print_table
    from simgpu.sched.registry import resolve_design

    _positive(runs, "--runs", MAX_RUNS)
    _outputs(trace, plot, records)
    price = _price(price_per_hour)
    prof = load_profile(find_profile(profile))
    cfg = pipeline_config(
        config,
        vram=vram,
        gpu_workers=gpu_workers,
        partition_workers=partition_workers,
        devices=devices,
        placement=placement,
        queue_depth=max_gpu_queue_depth,
        memory_budget=memory_budget,
        proofs=proofs,
        concurrency=concurrency,
        arrival_rate=arrival_rate,
        retries=retries,
        seed=seed,
        workload=workload,
        partitions=partitions,
        constraints=constraints,
        host_ram=host_ram,
    )
    wl = prof.workload_for(cfg.workload or None, cfg.partitions, cfg.constraints)
    dsg = resolve_design(design)
    prediction = run_predict(prof, cfg, wl, dsg, runs=runs)
    meta = meta_of("predict", dsg.label, prof.name, prof.hardware.vram, wl, cfg)
    doc = build_document(meta, prediction.aggregate(), prediction.summaries, price_per_hour=price)
    _write_outputs(prediction.first, meta, trace, plot, records)
    if json_out:
        sys.stdout.write(write_json(doc, None) + "\n")
    else:
        print_table(doc, Console())
        if trace:
            Console().print(f"trace: {trace} (open in https://ui.perfetto.dev)")
        if plot:
            Console().print(f"plot: {plot}")
    if _stuck(doc):
        raise typer.Exit(EXIT_STUCK)


# --------------------------------------------------------------------- sweep and tune

DesignsOpt = Annotated[
    str,
    typer.Option("--design", "-d", help="axis: designs, comma-separated (single-lock,two-lock), or all"),
]
GpuWorkersAxis = Annotated[
    str | None, typer.Option("--gpu-workers", help="axis: GPU workers per device, e.g. 1..4 or 1,2,4")
]
PartitionWorkersAxis = Annotated[
    str | None, typer.Option("--partition-workers", help="axis: synthesis pool sizes, e.g. 4..16:4")
]
VramAxis = Annotated[
    str | None, typer.Option("--vram", help="axis: VRAM per device, e.g. 8G..48G:4G or 16G,24G")
]
HostRamAxis = Annotated[str | None, typer.Option("--host-ram", help="axis: host RAM, e.g. 256G..768G:128G")]
ConcurrencyAxis = Annotated[
    str | None, typer.Option("--concurrency", "-j", help="axis: closed-loop clients, e.g. 1..4")
]
WorkloadOpt = Annotated[str | None, typer.Option(help="a workload of the profile (default: its default)")]
# sweep's and tune's own wording (its points are whole runs); the names differ so that
# predict's and run's options keep theirs (annotations resolve at the module's end)
PointConstraintsOpt = Annotated[
    str | None,
    typer.Option("--constraints", help="constraints per partition, e.g. 2^27 (overrides the workload)"),
]
PointProofsOpt = Annotated[int | None, typer.Option("--proofs", "-n", help="proofs to submit per run")]
PointSeedOpt = Annotated[int | None, typer.Option("--seed", help="first seed of every point's runs")]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(help="a running Dask scheduler, tcp://host:port (default: a LocalCluster here)"),
]
WorkersOpt = Annotated[int | None, typer.Option(help="LocalCluster worker processes (default: one per core)")]
ProgressOpt = Annotated[bool, typer.Option(help="show a progress bar on stderr")]


def _space(
    command: str,
    profile: str,
    config: Path | None,
    design: str,
    axes: dict[str, str | None],
    **fixed: Any,
) -> tuple[Any, Any, PipelineConfig, Workload, Any]:
    """What sweep and tune share: the profile (as data for the workers), the base
    configuration (--config, then the fixed flags), the workload and the grid."""
    from simgpu.profile import find_profile
    from simgpu.sweep import require_extra
    from simgpu.sweep.grid import build_grid

    require_extra(command, "distributed", *(("optuna",) if command == "tune" else ()))
    from simgpu.sweep.point import ProfileSpec

    spec = ProfileSpec.read(find_profile(profile))
    prof = spec.load()
    cfg = pipeline_config(config, **fixed)
    if isinstance(cfg.vram, tuple):
        # the grid's VRAM axis is one size for every device; a list there means alternatives
        raise UserError(
            f"{command}: [hardware] vram lists one size per device; {command} takes one size for "
            "every device (its --vram axis)"
        )
    wl = prof.workload_for(cfg.workload or None, cfg.partitions, cfg.constraints)
    grid = build_grid(axes, cfg, prof.hardware.vram, prof.hardware.host_ram, design)
    return spec, prof, cfg, wl, grid


@app.command()
@reports_errors
def sweep(
    design: DesignsOpt = "single-lock",
    gpu_workers: GpuWorkersAxis = None,
    partition_workers: PartitionWorkersAxis = None,
    vram: VramAxis = None,
    host_ram: HostRamAxis = None,
    concurrency: ConcurrencyAxis = None,
    profile: ProfileOpt = "seed-rtx5070ti",
    config: ConfigOpt = None,
    workload: WorkloadOpt = None,
    constraints: PointConstraintsOpt = None,
    partitions: PartitionsOpt = None,
    proofs: PointProofsOpt = None,
    runs: Annotated[int, typer.Option(help="Monte Carlo runs per point (seeds seed..seed+runs-1)")] = 5,
    seed: PointSeedOpt = None,
    price_per_hour: PricePerHourOpt = None,
    scheduler: SchedulerOpt = None,
    workers: WorkersOpt = None,
    out: Annotated[Path | None, typer.Option(help="write the points: .parquet, .csv or .json")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print the JSON document instead of the table")
    ] = False,
    plot: Annotated[Path | None, typer.Option(help="write a PNG heatmap of proofs per hour")] = None,
    x: Annotated[
        str | None, typer.Option("--x", help="the heatmap's horizontal axis (default: vram)")
    ] = None,
    y: Annotated[
        str | None, typer.Option("--y", help="the heatmap's vertical axis (default: gpu_workers)")
    ] = None,
    progress: ProgressOpt = True,
) -> None:
    """Run the Monte Carlo of every point of a grid of configurations, on Dask."""
    from simgpu.model.montecarlo import MAX_RUNS
    from simgpu.report.document import write_json
    from simgpu.sweep import require_extra
    from simgpu.sweep.cluster import PointRunner, dask_client
    from simgpu.sweep.heatmap import heatmap_axes, require_matplotlib, write_heatmap
    from simgpu.sweep.progress import progress_bar
    from simgpu.sweep.results import SweepResult, check_out_path, write_results
    from simgpu.sweep.table import print_sweep

    _positive(runs, "--runs", MAX_RUNS)
    price = _price(price_per_hour)
    axes = {
        "design": design,
        "gpu_workers": gpu_workers,
        "partition_workers": partition_workers,
        "vram": vram,
        "host_ram": host_ram,
        "concurrency": concurrency,
    }
    spec, prof, cfg, wl, grid = _space(
        "sweep",
        profile,
        config,
        design,
        axes,
        workload=workload,
        constraints=constraints,
        partitions=partitions,
        proofs=proofs,
        seed=seed,
    )
    # Every output is checked before the points run, not after.
    if out is not None:
        writable(out, "--out")
        check_out_path(out)
        if out.suffix.lower() == ".parquet":
            require_extra("sweep", "pyarrow")
    if plot is not None:
        writable(plot, "--plot", (".png",))
        require_matplotlib()
    if plot is not None or x is not None or y is not None:
        heatmap_axes(grid, x, y)
    with dask_client(scheduler, workers) as client:
        runner = PointRunner(client, spec, cfg, wl, runs)
        with progress_bar(grid.size, f"sweep: {grid.size} points x {runs} runs", enabled=progress) as advance:
            results = runner.run(list(grid.points()), on_done=advance)
    result = SweepResult(grid, results, prof.name, wl, cfg, runs, price)
    if out is not None:
        write_results(out, result)
    if plot is not None:
        write_heatmap(plot, result, x, y)
    if json_out:
        sys.stdout.write(write_json(result.document(), None) + "\n")
    else:
        console = Console()
        print_sweep(result, console)
        for path, what in ((out, "points"), (plot, "heatmap")):
            if path is not None:
                console.print(f"{what}: {path}", markup=False)
    # what it wrote and printed says why of each; a grid with nothing to predict is bad input
    if not any(r.ok for r in results):
        reason = next((r.error for r in results if r.error), "no point ran")
        raise _fail(f"error: no point of the grid can be built: {reason}", 2)


@app.command()
@reports_errors
def tune(
    design: DesignsOpt = "single-lock",
    gpu_workers: GpuWorkersAxis = None,
    partition_workers: PartitionWorkersAxis = None,
    vram: VramAxis = None,
    host_ram: HostRamAxis = None,
    concurrency: ConcurrencyAxis = None,
    max_oom_risk: Annotated[
        float, typer.Option(help="the OOM risk's upper 95% bound must be at most this")
    ] = 0.05,
    max_host_ram: Annotated[
        str | None, typer.Option(help="peak host RSS must be at most this, e.g. 512G")
    ] = None,
    trials: Annotated[int, typer.Option(help="Optuna trials")] = 40,
    runs: Annotated[
        int | None,
        typer.Option(help="Monte Carlo runs per trial (default: the fewest that can show --max-oom-risk)"),
    ] = None,
    sampler_seed: Annotated[int, typer.Option(help="seed of Optuna's sampler")] = 0,
    batch: Annotated[int, typer.Option(help="trials proposed and run at once")] = 8,
    profile: ProfileOpt = "seed-rtx5070ti",
    config: ConfigOpt = None,
    workload: WorkloadOpt = None,
    constraints: PointConstraintsOpt = None,
    partitions: PartitionsOpt = None,
    proofs: PointProofsOpt = None,
    seed: PointSeedOpt = None,
    price_per_hour: PricePerHourOpt = None,
    scheduler: SchedulerOpt = None,
    workers: WorkersOpt = None,
    out: Annotated[Path, typer.Option(help="the best configuration, as cuzk-style TOML")] = Path("best.toml"),
    json_out: Annotated[
        bool, typer.Option("--json", help="print the JSON document instead of the table")
    ] = False,
    progress: ProgressOpt = True,
) -> None:
    """Find the configuration with the most proofs per hour that is safe (Optuna)."""
    from simgpu.report.document import write_json
    from simgpu.sweep.cluster import PointRunner, dask_client
    from simgpu.sweep.progress import progress_bar
    from simgpu.sweep.tune import check_search, min_runs
    from simgpu.sweep.tune import tune as run_tune
    from simgpu.sweep.tune_report import print_tune, tune_document, write_best

    needed = min_runs(max_oom_risk)
    if runs is None:
        runs = needed
    elif runs < needed:
        raise UserError(
            f"--runs {runs}: with no OOM in {runs} runs the OOM risk's upper 95% bound is still above "
            f"{max_oom_risk:g}; showing --max-oom-risk {max_oom_risk:g} takes at least {needed} runs"
        )
    from simgpu.model.montecarlo import MAX_RUNS

    _positive(runs, "--runs", MAX_RUNS)
    price = _price(price_per_hour)
    ram_limit = None if max_host_ram is None else parse_size(max_host_ram, "--max-host-ram")
    writable(out, "--out", (".toml",))
    axes = {
        "design": design,
        "gpu_workers": gpu_workers,
        "partition_workers": partition_workers,
        "vram": vram,
        "host_ram": host_ram,
        "concurrency": concurrency,
    }
    spec, prof, cfg, wl, grid = _space(
        "tune",
        profile,
        config,
        design,
        axes,
        workload=workload,
        constraints=constraints,
        partitions=partitions,
        proofs=proofs,
        seed=seed,
    )
    check_search(grid, trials, batch)
    with dask_client(scheduler, workers) as client:
        runner = PointRunner(client, spec, cfg, wl, runs)
        with progress_bar(trials, f"tune: {trials} trials x {runs} runs", enabled=progress) as advance:
            result = run_tune(
                runner,
                grid,
                trials,
                max_oom_risk=max_oom_risk,
                max_host_ram=ram_limit,
                sampler_seed=sampler_seed,
                batch=batch,
                on_trial=advance,
            )
    best = result.best_trial
    if best is not None:
        write_best(out, best, cfg, prof.name, result)
    if json_out:
        doc = tune_document(result, prof.name, wl, cfg, price, out if best else None)
        sys.stdout.write(write_json(doc, None) + "\n")
    else:
        print_tune(result, grid, prof.name, price, out if best else None, Console())
    if best is None:
        raise _fail(
            "error: no trial met the constraints (see the trials above; loosen them or widen the space)", 1
        )


@app.command()
@reports_errors
def run(
    design: DesignOpt = "single-lock",
    config: ConfigOpt = None,
    constraints: ConstraintsOpt = None,
    partitions: PartitionsOpt = None,
    proofs: ProofsOpt = None,
    concurrency: ConcurrencyOpt = None,
    gpu_workers: GpuWorkersOpt = None,
    partition_workers: PartitionWorkersOpt = None,
    vram: VramListOpt = None,
    backend: BackendOpt = "cupy",
    devices: DevicesOpt = None,
    placement: PlacementOpt = None,
    b_g2_threads: BG2Opt = None,
    b_g2_on: B2gOnOpt = "cpu",
    msm_capacity: MsmCapacityOpt = "witness",
    abc_upload: AbcUploadOpt = "pinned",
    resident_bases: Annotated[bool, typer.Option(help="keep the key's bases in VRAM")] = False,
    retries: RetriesOpt = None,
    max_gpu_queue_depth: QueueDepthOpt = None,
    keys_dir: KeysOpt = Path("out/keys"),
    seed: Annotated[int | None, typer.Option(help="witness seed (>= 0)")] = None,
    json_out: JsonOpt = False,
    trace: TraceOpt = None,
    plot: PlotOpt = None,
    records: RecordsOpt = None,
    timeline: Annotated[
        Path | None,
        typer.Option(
            help="write the run as a cuzk daemon log (TIMELINE/CUZK_TIMING lines; docs/log-format.md)"
        ),
    ] = None,
    circuit: CircuitOpt = "generic",
) -> None:
    """Prove for real with the same scheduler code, and report like predict."""
    from simgpu.real.executor import ProverSettings
    from simgpu.real.run import real_document, real_run
    from simgpu.report.document import meta_of, write_json
    from simgpu.report.table import print_table
    from simgpu.sched.registry import resolve_design

    _outputs(trace, plot, records)
    writable(timeline, "--timeline")
    cfg = pipeline_config(
        config,
        command="run",
        vram=vram,
        gpu_workers=gpu_workers,
        partition_workers=partition_workers,
        devices=devices,
        placement=placement,
        queue_depth=max_gpu_queue_depth,
        proofs=proofs,
        concurrency=concurrency,
        retries=retries,
        seed=seed,
        partitions=partitions,
        constraints=constraints,
    )
    n = cfg.constraints or COMMAND_DEFAULTS["run"]["constraints"]
    parts = cfg.partitions or COMMAND_DEFAULTS["run"]["partitions"]
    if n < 16:
        raise UserError(f"--constraints: the prover needs at least 16 constraints, got {n}")
    dsg = resolve_design(design)
    settings = ProverSettings.from_config(
        cfg,
        backend=backend,
        b_g2_threads=b_g2_threads,
        resident_bases=resident_bases,
        keys_dir=keys_dir,
        b_g2_on=b_g2_on,
        msm_capacity=msm_capacity,
        abc_upload=abc_upload,
        circuit=_circuit(circuit),
    ).check(n)
    console = Console(stderr=json_out)
    outcome = real_run(n, parts, cfg, dsg, settings, log=lambda m: console.print(m, markup=False))
    wl = Workload(f"groth16-n{n}", parts, n)
    doc = real_document(outcome, dsg, settings.backend, wl, cfg)
    meta = meta_of("run", dsg.label, doc["profile"], outcome.vram_capacity, wl, cfg)
    _write_outputs(outcome.result, meta, trace, plot, records)
    if timeline:
        from simgpu.report.timeline import write_timeline

        write_timeline(timeline, outcome.result, cfg, n, os.cpu_count() or 1)
    if json_out:
        sys.stdout.write(write_json(doc, None) + "\n")
    else:
        print_table(doc, console)
        if timeline:
            console.print(f"timeline: {timeline} (read it back: simgpu calibrate --from-log {timeline})")
        if outcome.result.interrupted:
            console.print(f"[yellow]{outcome.result.interrupted}[/yellow]: the table covers what finished")
    if outcome.result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if _stuck(doc):
        raise typer.Exit(EXIT_STUCK)


@app.command()
@reports_errors
def validate(
    profile: ProfileOpt = "h200-cupy",
    design: DesignOpt = "single-lock",
    config: ConfigOpt = None,
    constraints: Annotated[
        str | None, typer.Option(help="constraints per partition (default: the profile's)")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option(help="partitions per proof (default: the profile's)")
    ] = None,
    proofs: ProofsOpt = None,
    concurrency: ConcurrencyOpt = None,
    gpu_workers: GpuWorkersOpt = None,
    partition_workers: PartitionWorkersOpt = None,
    vram: VramOpt = None,
    backend: BackendOpt = "cupy",
    b_g2_threads: Annotated[
        int | None,
        typer.Option(help="cores one b_g2_msm is split over (default: as the profile was calibrated)"),
    ] = None,
    b_g2_on: Annotated[
        str | None,
        typer.Option(
            "--b-g2-on", help="where b_g2_msm runs: cpu or gpu (default: as the profile was calibrated)"
        ),
    ] = None,
    msm_capacity: Annotated[
        str | None,
        typer.Option(
            "--msm-capacity",
            help="how the device's G2 MSM sizes its arrays: witness or key (default: as the "
            "profile was calibrated)",
        ),
    ] = None,
    abc_upload: Annotated[
        str | None,
        typer.Option(
            "--abc-upload",
            help="how a, b, c reach the device: pinned or staged (default: as the profile was calibrated)",
        ),
    ] = None,
    runs: Annotated[int, typer.Option(help="Monte Carlo runs of the prediction")] = 5,
    keys_dir: KeysOpt = Path("out/keys"),
    circuit: Annotated[
        str | None,
        typer.Option("--circuit", help="circuit family proved (default: the profile's calibration's)"),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of the table")] = False,
) -> None:
    """Predict and run the same configuration; print them side by side."""
    import json

    from simgpu.model.montecarlo import MAX_RUNS
    from simgpu.model.montecarlo import predict as run_predict
    from simgpu.profile import find_profile, load_profile
    from simgpu.prover import B_G2_THREADS
    from simgpu.real.executor import ProverSettings, calibrated_upload
    from simgpu.real.run import real_document, real_run
    from simgpu.report.compare import compare, machine_differences, print_comparison
    from simgpu.report.document import build_document, json_safe, meta_of
    from simgpu.sched.registry import resolve_design

    _positive(runs, "--runs", MAX_RUNS)
    prof = load_profile(find_profile(profile))
    cfg = pipeline_config(
        config,
        command="validate",
        vram=vram,
        gpu_workers=gpu_workers,
        partition_workers=partition_workers,
        proofs=proofs,
        concurrency=concurrency,
        partitions=partitions,
        constraints=constraints,
    )
    base = prof.workload_for(None, cfg.partitions, cfg.constraints)
    wl = Workload(f"groth16-n{base.constraints}", base.partitions, base.constraints)
    if wl.constraints < 16:
        raise UserError(f"--constraints: the prover needs at least 16 constraints, got {wl.constraints}")
    dsg = resolve_design(design)
    console = Console(stderr=json_out)

    def as_calibrated(given: Any, calibrated: Any, default: Any, flag: str) -> Any:
        """The run's setting: the one given, else the profile's calibration's; a given one
        that differs from the calibration's is noted (the profile's times need not hold)."""
        if given is None:
            return default if calibrated is None else calibrated
        if calibrated is not None and given != calibrated:
            console.print(
                f"note: {prof.name}'s stage times hold for {flag} {calibrated}; this run uses "
                f"{given}, so expect the stages it touches to differ",
                markup=False,
            )
        return given

    b_g2_threads = as_calibrated(b_g2_threads, prof.calibrated_b_g2_threads, B_G2_THREADS, "--b-g2-threads")
    b_g2_on = as_calibrated(b_g2_on, prof.calibrated_b_g2_on, "cpu", "--b-g2-on")
    circuit = as_calibrated(circuit, prof.calibrated_circuit, "generic", "--circuit")
    msm_capacity = as_calibrated(msm_capacity, prof.calibrated_msm_capacity, "witness", "--msm-capacity")
    upload = calibrated_upload(prof.calibrated_abc_upload)
    abc_upload = as_calibrated(abc_upload, upload, "pinned", "--abc-upload")
    settings = ProverSettings.from_config(
        cfg,
        backend=backend,
        b_g2_threads=b_g2_threads,
        keys_dir=keys_dir,
        b_g2_on=b_g2_on,
        msm_capacity=msm_capacity,
        abc_upload=abc_upload,
        circuit=_circuit(circuit),
    ).check(wl.constraints)
    prediction = run_predict(prof, cfg, wl, dsg, runs=runs)
    predicted = build_document(
        meta_of("predict", dsg.label, prof.name, prof.hardware.vram, wl, cfg),
        prediction.aggregate(),
        prediction.summaries,
    )
    outcome = real_run(
        wl.constraints, wl.partitions, cfg, dsg, settings, log=lambda m: console.print(m, markup=False)
    )
    measured = real_document(outcome, dsg, settings.backend, wl, cfg)
    rows = compare(predicted, measured)
    differences = machine_differences(prof.hardware, outcome.device_name, os.cpu_count() or 1)
    if differences:
        console.print(
            f"note: {prof.name} was measured on another machine ({'; '.join(differences)}): "
            f"its stage times need not hold here; `simgpu calibrate` measures this one",
            markup=False,
        )
    if json_out:
        doc = {
            "predicted": predicted,
            "measured": measured,
            "comparison": rows,
            "machine_differences": differences,
        }
        sys.stdout.write(json.dumps(json_safe(doc), indent=2, default=float, allow_nan=False) + "\n")
    else:
        title = f"validate {dsg.name}: {prof.name} vs a real run ({outcome.device_name})"
        print_comparison(rows, title, console)
        console.print(f"real run: {measured['verification']['proofs_verified']} proofs verified")
    if outcome.result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if _stuck(measured):
        # as run says it: the real run stopped on a deadlock or livelock
        if not json_out:
            dl = measured["deadlock"]
            cycle = " -> ".join(dl.get("cycle") or [])
            console.print(f"[red]the real run is stuck ({dl['kind']})[/red]: {cycle or dl.get('cause', '')}")
        raise typer.Exit(EXIT_STUCK)


@app.command()
@reports_errors
def calibrate(
    out: Annotated[Path, typer.Option(help="the profile to write, e.g. calibration/mybox.toml")],
    sizes: Annotated[
        str, typer.Option(help="constraints ladder: 2^14..2^22 (every other power), or a list")
    ] = "2^14..2^22",
    backend: Annotated[str, typer.Option(help="cupy (the GPU) or cpu")] = "cupy",
    repeats: Annotated[int, typer.Option(help="timed repeats per size (after a warm-up proof)")] = 3,
    partitions: Annotated[int, typer.Option(help="partitions per proof of the profile's workload")] = 4,
    contention_size: Annotated[
        str | None, typer.Option(help="size for the contention runs (default: mid-ladder)")
    ] = None,
    pairing_sizes: Annotated[
        str | None,
        typer.Option(
            help="more ladder sizes at which each stage is timed beside the others' work (busy "
            "cores, the device's pairings, results coming back), so that its shares follow the "
            "size, e.g. 2^20 (default: the contention size only)"
        ),
    ] = None,
    b_g2_threads: BG2Opt = None,
    b_g2_on: B2gOnOpt = "cpu",
    msm_capacity: MsmCapacityOpt = "witness",
    abc_upload: AbcUploadOpt = "pinned",
    vram: VramOpt = None,
    keys_dir: KeysOpt = Path("out/keys"),
    circuit: CircuitOpt = "generic",
    from_log: Annotated[
        Path | None,
        typer.Option(
            "--from-log", help="fit from a proving daemon's log (cuzk TIMELINE/CUZK_TIMING lines) instead"
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="with --from-log: the daemon's TOML, for what the log does not say"
        ),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(help="with --from-log: the profile for what a log cannot inform (default: the seed)"),
    ] = None,
    device_law: Annotated[
        str | None,
        typer.Option(
            help="how GPU workers share the device, as fitted: exclusive (one stream, whatever of a "
            "stage is on it has all of it; the default, validated best), proportional, or in-order"
        ),
    ] = None,
) -> None:
    """Measure the real prover over a ladder of sizes and write a fitted profile; or,
    with --from-log, fit one from a proving daemon's own log."""
    from simgpu.calibrate.build import calibrate as run_calibration
    from simgpu.prover import B_G2_THREADS
    from simgpu.real.executor import ProverSettings

    writable(out, "--out", (".toml",))
    from simgpu.calibrate.fit import DEFAULT_DEVICE_LAW, DEVICE_LAWS

    device_law = DEFAULT_DEVICE_LAW if device_law is None else device_law
    if device_law not in DEVICE_LAWS:
        raise UserError(f"--device-law {device_law!r}: one of {', '.join(DEVICE_LAWS)}")
    if from_log is not None:
        from simgpu.calibrate.fromlog import fit_from_log

        fitted = fit_from_log(from_log, out, config, base)
        console = Console(highlight=False, soft_wrap=True)
        for line in fitted.summary():
            console.print(line, markup=False)
        console.print(f"wrote {out}", markup=False)
        return
    if config is not None or base is not None:
        raise UserError("--config and --base go with --from-log")
    _positive(repeats, "--repeats", 1000)
    _positive(partitions, "--partitions", 10_000)
    ladder = size_ladder(sizes)
    settings = ProverSettings(
        backend=backend,
        vram_limit=None if vram is None else parse_size(vram, "--vram"),
        partition_workers=4,
        b_g2_threads=B_G2_THREADS if b_g2_threads is None else b_g2_threads,
        b_g2_on=b_g2_on,
        msm_capacity=msm_capacity,
        abc_upload=abc_upload,
        keys_dir=keys_dir,
        circuit=_circuit(circuit),
    ).check(max(ladder))
    console = Console()
    cn = None if contention_size is None else parse_count(contention_size, "--contention-size", 16)
    stage_sizes = [] if pairing_sizes is None else size_ladder(pairing_sizes, "--pairing-sizes")
    if off := [n for n in stage_sizes if n not in ladder]:
        raise UserError(f"--pairing-sizes {off[0]:,}: not on the ladder (--sizes); its stages were not timed")
    t0 = time.perf_counter()
    with _term_as_interrupt():  # a scheduler's or `timeout`'s stop writes what was measured, as Ctrl-C does
        doc, errors = run_calibration(
            out,
            ladder,
            settings,
            repeats=repeats,
            contention_size=cn,
            partitions=partitions,
            log=lambda m: console.print(m, markup=False),
            device_law=device_law,
            stage_sizes=stage_sizes,
        )
    console.print(f"wrote {out} in {time.perf_counter() - t0:.0f} s; worst relative fit error per law:")
    for key, err in sorted(errors.items(), key=lambda kv: -kv[1])[:12]:
        console.print(f"  {key:28s} {100 * err:6.1f} %")
    for size, factors in doc["calibration"].get("alone_pooled", {}).items():
        # the host's drift over calibrate, as each driver stage's calls alone saw it
        moved = ", ".join(f"{st} x{f:.2f}" for st, f in factors.items())
        console.print(f"  alone over every call, n={int(size[1:]):,}: {moved}")
    for m in doc["calibration"]["missing"]:
        console.print(f"[yellow]missing:[/yellow] {m}")


@app.command()
@reports_errors
def explain(
    file: Annotated[Path, typer.Argument(help="a predict/run --json document, or a --records file")],
    json_out: Annotated[bool, typer.Option("--json", help="print the explanation as JSON")] = False,
) -> None:
    """Tell each distinct OOM cause of a run (who held which bytes since when, under which
    lock, what the failing worker asked for, which step let both happen) and what bounded
    its progress."""
    from simgpu.report.document import write_json
    from simgpu.report.explain import as_json, load, report

    run = load(file)
    if json_out:
        sys.stdout.write(write_json(as_json(run), None) + "\n")
    else:
        typer.echo(report(run))


@app.command()
def designs() -> None:
    """List the shipped designs, one line each."""
    from simgpu.sched.registry import builtin_designs

    width = max(len(d.name) for d in builtin_designs())
    for d in builtin_designs():
        typer.echo(f"{d.name:<{width}}  {d.summary}")


@app.command()
def profiles() -> None:
    """List the shipped profiles."""
    from simgpu.profile import load_profile, shipped_profiles

    for path in shipped_profiles():
        p = load_profile(path)
        wl = p.workload()
        typer.echo(
            f"{p.name:<18} {p.hardware.gpu}, {p.hardware.vram / 2**30:.0f} GiB; "
            f"default workload {wl.name} ({wl.partitions} x {wl.constraints:,})"
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error a user can cause is one line on stderr, exit code 2."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        # Outside standalone mode click returns a command's exit code instead of exiting.
        code = app(args=argv, standalone_mode=False)
        return code if isinstance(code, int) else EXIT_OK
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        err.print("aborted")
        return EXIT_INTERRUPTED
    except _ClickException as e:
        err.print(f"error: {e.format_message()}", markup=False)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
