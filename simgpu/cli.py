"""The `simgpu` command: predict, designs, profiles (and run/calibrate/validate)."""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from simgpu.config import PipelineConfig, Workload, load_config
from simgpu.errors import DesignError, SimgpuError, UserError
from simgpu.prover import B_G2_THREADS
from simgpu.units import parse_count, parse_size, size_ladder

# typer re-exports click's exceptions (recent releases vendor click); find their base
# class through the MRO so this works with either.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

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


def reports_errors(fn):
    """Turn the errors a user can cause into one line on stderr and an exit code, for
    the console script and typer's test runner alike (2: bad input; 1: a failure)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            raise _fail(f"error: {e}", 2) from None
        except DesignError as e:
            raise _fail(f"design error: {e}", 2) from None
        except SimgpuError as e:
            raise _fail(f"error: {e}", 1) from None

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
VramOpt = Annotated[
    str | None,
    typer.Option("--vram", help="VRAM per device, e.g. 16G, 24GiB (default: the profile's)"),
]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="cuzk-style TOML; flags override it")]
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


def _opt_size(value: str | None, what: str) -> int | None:
    return None if value is None else parse_size(value, what)


def _overrides(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def pipeline_config(
    config: Path | None,
    *,
    vram: str | None = None,
    gpu_workers: int | None = None,
    partition_workers: int | None = None,
    devices: int | None = None,
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
) -> PipelineConfig:
    """The config file's keys, then the flags (flags win)."""
    cfg = load_config(config)
    budget = None
    if memory_budget is not None and memory_budget != "auto":
        budget = parse_size(memory_budget, "--memory-budget")
    return cfg.with_overrides(
        **_overrides(
            vram=_opt_size(vram, "--vram"),
            gpu_workers_per_device=gpu_workers,
            partition_workers=partition_workers,
            devices=devices,
            max_gpu_queue_depth=queue_depth,
            total_budget=budget,
            proofs=proofs,
            concurrency=concurrency,
            arrival_rate=arrival_rate,
            retries=retries,
            seed=seed,
            workload=workload,
            partitions=partitions,
            constraints=None if constraints is None else parse_count(constraints, "--constraints", 1),
        )
    )


def resolve_workload(profile: Any, cfg: PipelineConfig) -> Workload:
    base = profile.workload(cfg.workload or None)
    wl = Workload(
        base.name if cfg.constraints is None else f"{base.name} (n={cfg.constraints:,})",
        cfg.partitions or base.partitions,
        cfg.constraints or base.constraints,
        dict(base.params),
    )
    if wl.constraints > 1 << 32:
        raise UserError(
            f"{wl.constraints:,} constraints per partition: BLS12-381 has no NTT domain beyond 2^32"
        )
    return wl


def _meta(mode: str, design: Any, profile_name: str, vram: int, workload: Workload, cfg: PipelineConfig):
    from simgpu.report.document import Meta

    cfg_doc = {k: v for k, v in asdict(cfg).items() if k not in ("workload", "partitions", "constraints")}
    if cfg_doc.get("vram") is None:
        cfg_doc["vram"] = vram
    return Meta(
        mode=mode,
        design=design.name if design.source == "builtin" else f"{design.source}:{design.name}",
        profile=profile_name,
        workload={
            "name": workload.name,
            "partitions": workload.partitions,
            "constraints": workload.constraints,
        },
        config=cfg_doc,
    )


# --------------------------------------------------------------------- commands


@app.command()
@reports_errors
def predict(
    design: DesignOpt = "single-lock",
    profile: ProfileOpt = "seed-rtx5070ti",
    vram: VramOpt = None,
    config: ConfigOpt = None,
    workload: Annotated[
        str | None, typer.Option(help="a workload of the profile (default: its default)")
    ] = None,
    constraints: Annotated[
        str | None,
        typer.Option(help="constraints per partition, e.g. 2^27 (overrides the workload)"),
    ] = None,
    partitions: Annotated[
        int | None, typer.Option(help="partitions per proof (overrides the workload)")
    ] = None,
    proofs: Annotated[
        int | None, typer.Option("--proofs", "-n", help="proofs to submit (cuzk-bench -c)")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-j", help="closed-loop clients (cuzk-bench -j)")
    ] = None,
    arrival_rate: Annotated[
        float | None, typer.Option(help="open loop: Poisson arrivals, proofs per second")
    ] = None,
    gpu_workers: Annotated[int | None, typer.Option("--gpu-workers", help="gpu_workers_per_device")] = None,
    partition_workers: Annotated[
        int | None, typer.Option(help="synthesis pool size (partition_workers)")
    ] = None,
    devices: Annotated[int | None, typer.Option(help="GPUs")] = None,
    max_gpu_queue_depth: Annotated[
        int | None, typer.Option(help="bound of the GPU queue (0 = unbounded)")
    ] = None,
    memory_budget: Annotated[
        str | None, typer.Option(help="host memory budget (auto = RAM - safety margin)")
    ] = None,
    retries: Annotated[int | None, typer.Option(help="re-queue a partition this often after an OOM")] = None,
    runs: Annotated[int, typer.Option(help="Monte Carlo replications (seeds seed..seed+runs-1)")] = 1,
    seed: Annotated[int | None, typer.Option(help="first seed")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print the JSON document instead of the table")
    ] = False,
    trace: Annotated[Path | None, typer.Option(help="write a Chrome/Perfetto trace of the first run")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a PNG: Gantt chart + memory over time")] = None,
) -> None:
    """Predict throughput, latency, VRAM/host peaks and OOM risk of a design."""
    from simgpu.model.montecarlo import predict as run_predict
    from simgpu.profile import find_profile, load_profile
    from simgpu.report.document import build_document, write_json
    from simgpu.report.plot import write_plot
    from simgpu.report.table import print_table
    from simgpu.report.trace import write_trace
    from simgpu.sched.registry import resolve_design

    if runs < 1:
        raise UserError(f"--runs: must be at least 1, got {runs}")
    prof = load_profile(find_profile(profile))
    cfg = pipeline_config(
        config,
        vram=vram,
        gpu_workers=gpu_workers,
        partition_workers=partition_workers,
        devices=devices,
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
    )
    wl = resolve_workload(prof, cfg)
    dsg = resolve_design(design)
    prediction = run_predict(prof, cfg, wl, dsg, runs=runs)
    meta = _meta("predict", dsg, prof.name, prof.hardware.vram, wl, cfg)
    doc = build_document(meta, prediction.aggregate(), prediction.summaries)
    if trace:
        write_trace(trace, prediction.first, meta)
    if plot:
        write_plot(plot, prediction.first, meta)
    if json_out:
        sys.stdout.write(write_json(doc, None) + "\n")
    else:
        print_table(doc, Console())
        if trace:
            Console().print(f"trace: {trace} (open in https://ui.perfetto.dev)")
        if plot:
            Console().print(f"plot: {plot}")


@app.command()
@reports_errors
def run(
    design: DesignOpt = "single-lock",
    constraints: Annotated[str, typer.Option(help="constraints per partition, e.g. 2^20")] = "2^12",
    partitions: Annotated[int, typer.Option(help="partitions per proof")] = 2,
    proofs: Annotated[int, typer.Option("--proofs", "-n", help="proofs to submit")] = 2,
    concurrency: Annotated[int, typer.Option("--concurrency", "-j", help="closed-loop clients")] = 2,
    gpu_workers: Annotated[int, typer.Option("--gpu-workers", help="GPU workers per device")] = 2,
    partition_workers: Annotated[int, typer.Option(help="synthesis worker processes")] = 2,
    vram: VramOpt = None,
    backend: Annotated[
        str, typer.Option(help="cupy (the GPU) or cpu (small circuits, emulated VRAM)")
    ] = "cupy",
    devices: Annotated[int, typer.Option(help="GPUs")] = 1,
    b_g2_threads: Annotated[
        int, typer.Option(help="cores one b_g2_msm is split over (its G2 pool has one process per core)")
    ] = B_G2_THREADS,
    resident_bases: Annotated[bool, typer.Option(help="keep the key's bases in VRAM")] = False,
    retries: Annotated[int, typer.Option(help="re-queue a partition this often after an OOM")] = 0,
    max_gpu_queue_depth: Annotated[int, typer.Option(help="bound of the GPU queue (0 = unbounded)")] = 0,
    keys_dir: Annotated[Path, typer.Option(help="where trusted-setup keys are cached")] = Path("out/keys"),
    circuit: CircuitOpt = "generic",
    seed: Annotated[int, typer.Option(help="witness seed")] = 0,
    json_out: Annotated[
        bool, typer.Option("--json", help="print the JSON document instead of the table")
    ] = False,
    trace: Annotated[Path | None, typer.Option(help="write a Chrome/Perfetto trace")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a PNG: Gantt chart + memory over time")] = None,
) -> None:
    """Prove for real with the same scheduler code, and report like predict."""
    from simgpu.real.run import real_run
    from simgpu.report.document import write_json
    from simgpu.report.plot import write_plot
    from simgpu.report.table import print_table
    from simgpu.report.trace import write_trace
    from simgpu.sched.registry import resolve_design

    n = parse_count(constraints, "--constraints", 16)
    cfg = PipelineConfig().with_overrides(
        proofs=proofs,
        concurrency=concurrency,
        gpu_workers_per_device=gpu_workers,
        partition_workers=partition_workers,
        devices=devices,
        retries=retries,
        seed=seed,
        max_gpu_queue_depth=max_gpu_queue_depth,
        vram=_opt_size(vram, "--vram"),
    )
    dsg = resolve_design(design)
    settings = _prover_settings(backend, cfg, b_g2_threads, resident_bases, keys_dir, circuit)
    console = Console(stderr=json_out)
    outcome = real_run(n, partitions, cfg, dsg, settings, log=lambda m: console.print(m, markup=False))
    doc = _real_document(outcome, dsg, backend, n, partitions, cfg)
    meta = _meta(
        "run",
        dsg,
        doc["profile"],
        outcome.vram_capacity,
        Workload(doc["workload"]["name"], partitions, n),
        cfg,
    )
    if trace:
        write_trace(trace, outcome.result, meta)
    if plot:
        write_plot(plot, outcome.result, meta)
    if json_out:
        sys.stdout.write(write_json(doc, None) + "\n")
    else:
        print_table(doc, console)
        if outcome.result.interrupted:
            console.print(f"[yellow]{outcome.result.interrupted}[/yellow]: the table covers what finished")


def _prover_settings(
    backend: str, cfg: PipelineConfig, b_g2_threads: int, resident_bases: bool, keys_dir: Path, circuit: str
) -> Any:
    from simgpu.real.executor import ProverSettings

    return ProverSettings(
        circuit=_circuit(circuit),
        backend=backend,
        devices=cfg.devices,
        vram_limit=cfg.vram,
        partition_workers=cfg.partition_workers,
        b_g2_threads=b_g2_threads,
        resident_bases=resident_bases,
        keys_dir=keys_dir,
        seed=cfg.seed,
    )


def _real_document(
    outcome: Any, dsg: Any, backend: str, n: int, partitions: int, cfg: PipelineConfig
) -> dict:
    from simgpu.report.document import build_document
    from simgpu.report.metrics import aggregate

    workload = Workload(f"groth16-n{n}", partitions, n)
    meta = _meta("run", dsg, f"real {backend}: {outcome.device_name}", outcome.vram_capacity, workload, cfg)
    meta.extra = {
        "verification": outcome.verification,
        "interrupted": outcome.result.interrupted,
        "runtime": {"wall_s": outcome.result.wall_seconds, "setup_s": outcome.setup_seconds},
    }
    return build_document(meta, aggregate([outcome.summary]), [outcome.summary])


@app.command()
@reports_errors
def validate(
    profile: ProfileOpt = "h200-cupy",
    design: DesignOpt = "single-lock",
    constraints: Annotated[
        str | None, typer.Option(help="constraints per partition (default: the profile's)")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option(help="partitions per proof (default: the profile's)")
    ] = None,
    proofs: Annotated[int, typer.Option("--proofs", "-n")] = 3,
    concurrency: Annotated[int, typer.Option("--concurrency", "-j")] = 2,
    gpu_workers: Annotated[int, typer.Option("--gpu-workers")] = 2,
    partition_workers: Annotated[int, typer.Option(help="synthesis worker processes")] = 4,
    vram: VramOpt = None,
    backend: Annotated[str, typer.Option(help="cupy or cpu")] = "cupy",
    b_g2_threads: Annotated[
        int | None,
        typer.Option(help="cores one b_g2_msm is split over (default: as the profile was calibrated)"),
    ] = None,
    runs: Annotated[int, typer.Option(help="Monte Carlo runs of the prediction")] = 5,
    keys_dir: Annotated[Path, typer.Option(help="where trusted-setup keys are cached")] = Path("out/keys"),
    circuit: CircuitOpt = "generic",
    json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of the table")] = False,
) -> None:
    """Predict and run the same configuration; print them side by side."""
    import json

    from rich.table import Table

    from simgpu.model.montecarlo import predict as run_predict
    from simgpu.profile import find_profile, load_profile
    from simgpu.real.run import real_run
    from simgpu.report.compare import compare, machine_differences
    from simgpu.report.document import build_document
    from simgpu.sched.registry import resolve_design

    prof = load_profile(find_profile(profile))
    base = prof.workload()
    n = parse_count(constraints, "--constraints", 16) if constraints else base.constraints
    parts = partitions or base.partitions
    cfg = PipelineConfig().with_overrides(
        proofs=proofs,
        concurrency=concurrency,
        gpu_workers_per_device=gpu_workers,
        partition_workers=partition_workers,
        vram=_opt_size(vram, "--vram"),
    )
    dsg = resolve_design(design)
    wl = Workload(f"groth16-n{n}", parts, n)
    prediction = run_predict(prof, cfg, wl, dsg, runs=runs)
    predicted = build_document(
        _meta("predict", dsg, prof.name, prof.hardware.vram, wl, cfg),
        prediction.aggregate(),
        prediction.summaries,
    )
    console = Console(stderr=json_out)
    calibrated = prof.calibrated_b_g2_threads
    if b_g2_threads is None:
        b_g2_threads = calibrated or B_G2_THREADS
    elif calibrated is not None and b_g2_threads != calibrated:
        console.print(
            f"note: {prof.name}'s b_g2_msm times hold for --b-g2-threads {calibrated}; "
            f"this run splits it over {b_g2_threads}, so expect that stage to differ",
            markup=False,
        )
    settings = _prover_settings(backend, cfg, b_g2_threads, False, keys_dir, circuit)
    outcome = real_run(n, parts, cfg, dsg, settings, log=lambda m: console.print(m, markup=False))
    measured = _real_document(outcome, dsg, backend, n, parts, cfg)
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
        sys.stdout.write(json.dumps(doc, indent=2, default=float) + "\n")
        return
    t = Table(title=f"validate {dsg.name}: {prof.name} vs a real run ({outcome.device_name})")
    for col in ("metric", "predicted", "measured", "error"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in rows:

        def fmt(v: Any) -> str:
            return "-" if v is None else (str(v) if isinstance(v, bool | int) else f"{v:.3f}")

        err = "-" if r["rel_error"] is None else f"{100 * r['rel_error']:+.1f} %"
        t.add_row(r["metric"], fmt(r["predicted"]), fmt(r["measured"]), err)
    console.print(t)
    console.print(f"real run: {measured['verification']['proofs_verified']} proofs verified")


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
    b_g2_threads: Annotated[
        int, typer.Option(help="cores one b_g2_msm is split over (its G2 pool has one process per core)")
    ] = B_G2_THREADS,
    vram: VramOpt = None,
    keys_dir: Annotated[Path, typer.Option(help="where trusted-setup keys are cached")] = Path("out/keys"),
    circuit: CircuitOpt = "generic",
) -> None:
    """Measure the real prover over a ladder of sizes and write a fitted profile."""
    from simgpu.calibrate.build import calibrate as run_calibration
    from simgpu.real.executor import ProverSettings

    if repeats < 1:
        raise UserError(f"--repeats: must be at least 1, got {repeats}")
    ladder = size_ladder(sizes)
    settings = ProverSettings(
        backend=backend,
        vram_limit=_opt_size(vram, "--vram"),
        partition_workers=2,
        b_g2_threads=b_g2_threads,
        keys_dir=keys_dir,
        circuit=_circuit(circuit),
    )
    console = Console()
    cn = None if contention_size is None else parse_count(contention_size, "--contention-size", 16)
    t0 = time.perf_counter()
    doc, errors = run_calibration(
        out,
        ladder,
        settings,
        repeats=repeats,
        contention_size=cn,
        partitions=partitions,
        log=lambda m: console.print(m, markup=False),
    )
    console.print(f"wrote {out} in {time.perf_counter() - t0:.0f} s; worst relative fit error per law:")
    for key, err in sorted(errors.items(), key=lambda kv: -kv[1])[:12]:
        console.print(f"  {key:28s} {100 * err:6.1f} %")
    for m in doc["calibration"]["missing"]:
        console.print(f"[yellow]missing:[/yellow] {m}")


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
        return code if isinstance(code, int) else 0
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        err.print("aborted")
        return 130
    except _ClickException as e:
        err.print(f"error: {e.format_message()}", markup=False)
        return 2
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
