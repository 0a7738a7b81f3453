"""The `simgpu` command: predict, designs, profiles (and run/calibrate/validate)."""

from __future__ import annotations

import functools
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from simgpu.config import PipelineConfig, Workload, load_config, parse_count, parse_size
from simgpu.errors import DesignError, SimgpuError, UserError

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
    str, typer.Option("--profile", "-p", help="profile name under calibration/ or a path to a TOML")
]
VramOpt = Annotated[
    str | None,
    typer.Option("--vram", help="VRAM per device, e.g. 16G, 24GiB (default: the profile's)"),
]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="cuzk-style TOML; flags override it")]


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


def _meta(mode: str, design: Any, profile: Any, workload: Workload, cfg: PipelineConfig):
    from simgpu.report import Meta

    cfg_doc = {k: v for k, v in asdict(cfg).items() if k not in ("workload", "partitions", "constraints")}
    if cfg_doc.get("vram") is None:
        cfg_doc["vram"] = profile.hardware.vram
    return Meta(
        mode=mode,
        design=design.name if design.source == "builtin" else f"{design.source}:{design.name}",
        profile=profile.name,
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
    from simgpu.report import build_document, print_table, write_json, write_plot, write_trace
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
    meta = _meta("predict", dsg, prof, wl, cfg)
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
def designs() -> None:
    """List the shipped designs, one line each."""
    from simgpu.sched.registry import builtin_designs

    width = max(len(d.name) for d in builtin_designs())
    for d in builtin_designs():
        typer.echo(f"{d.name:<{width}}  {d.summary}")


@app.command()
def profiles() -> None:
    """List the shipped profiles."""
    from simgpu.profile import CALIBRATION_DIR, load_profile

    for path in sorted(CALIBRATION_DIR.glob("*.toml")):
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
