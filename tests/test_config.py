"""Sizes and the cuzk-style configuration."""

from __future__ import annotations

import pytest

from simgpu.config import PipelineConfig, load_config
from simgpu.errors import UserError
from simgpu.units import parse_size

GiB = 1 << 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16G", 16 * GiB),
        ("16GiB", 16 * GiB),
        ("12.5GB", 12_500_000_000),
        ("2^27", 1 << 27),
        ("512MiB", 512 << 20),
        ("1.5g", int(1.5 * GiB)),
        ("4096", 4096),
        (" 8 GiB ", 8 * GiB),
    ],
)
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["banana", "-16G", "", "16 parsecs", "G", "2^"])
def test_bad_sizes_are_one_line_user_errors(text):
    with pytest.raises(UserError, match="--vram"):
        parse_size(text, "--vram")


def test_cuzk_keys_load_and_flags_override(tmp_path):
    f = tmp_path / "cuzk.toml"
    f.write_text(
        """
[daemon]
listen = "unix:///run/curio/cuzk.sock"
[gpus]
devices = [0, 1]
gpu_workers_per_device = 3
[synthesis]
partition_workers = 12
[pipeline]
max_gpu_queue_depth = 8
[memory]
total_budget = "400GiB"
[run]
proofs = 5
"""
    )
    cfg = load_config(f)
    assert (cfg.devices, cfg.gpu_workers_per_device, cfg.partition_workers) == (2, 3, 12)
    assert cfg.max_gpu_queue_depth == 8 and cfg.total_budget == 400 * GiB and cfg.proofs == 5
    cfg = cfg.with_overrides(gpu_workers_per_device=1, proofs=None)
    assert cfg.gpu_workers_per_device == 1 and cfg.proofs == 5


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("[gpus\n", "not valid TOML"),
        ("[gpus]\nbanana = 1\n", "unknown key"),
        ("[gpus]\ngpu_workers_per_device = 0\n", "in 1[.][.]"),
        ("[gpus]\ngpu_workers_per_device = 'two'\n", "expected int"),
        ("[memory]\ntotal_budget = 'lots'\n", "cannot parse"),
    ],
)
def test_bad_config_files(tmp_path, body, match):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(UserError, match=match):
        load_config(f)


def test_zero_workers_is_rejected():
    with pytest.raises(UserError):
        PipelineConfig().with_overrides(partition_workers=0)


# ------------------------------------------------------------------ cuzk's keys


def write(tmp_path, body):
    f = tmp_path / "cuzk.toml"
    f.write_text(body)
    return f


def test_cuzk_keys_that_change_nothing_modelled_are_accepted(tmp_path):
    """Addresses, logging, parameter paths, SRS eviction, deprecated budgets: no effect."""
    from simgpu.config import NO_EFFECT

    merged: dict[str, list[str]] = {}
    for sec, key in NO_EFFECT:
        merged.setdefault(sec, []).append(key)

    def value(key):
        return "true" if key == "sort_by_type" else "1" if key.endswith("_ms") else "'x'"

    body = "\n".join(
        f"[{sec}]\n" + "\n".join(f"{k} = {value(k)}" for k in keys) for sec, keys in merged.items()
    )
    assert load_config(write(tmp_path, body)) == PipelineConfig()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("[gpus]\ngpu_threads = 32\n", "b_g2_msm and prep times hold for cuzk's default pool"),
        ("[synthesis]\nthreads = 48\n", "synthesis times hold for cuzk's default"),
        ("[scheduler]\nmax_batch_size = 2\n", "cross-sector batching"),
        ("[pipeline]\nenabled = false\n", "monolithic"),
        ("[pipeline]\nslot_size = 3\n", "Phase 6"),
        ("[pipeline]\nsynthesis_concurrency = 2\n", "whole-proof syntheses"),
    ],
)
def test_cuzk_keys_outside_the_profile_are_refused_unless_at_their_default(tmp_path, body, why):
    with pytest.raises(UserError, match=why):
        load_config(write(tmp_path, body))
    from simgpu.config import AT_DEFAULT_ONLY

    section, key = body[1 : body.index("]")], body.split("\n")[1].split(" = ")[0]
    default = AT_DEFAULT_ONLY[(section, key)][0]
    text = "true" if default is True else str(default)
    assert load_config(write(tmp_path, f"[{section}]\n{key} = {text}\n")) == PipelineConfig()


def test_max_parallel_synthesis_is_cuzks_later_name_for_partition_workers(tmp_path):
    assert load_config(write(tmp_path, "[pipeline]\nmax_parallel_synthesis = 12\n")).partition_workers == 12
    assert load_config(write(tmp_path, "[pipeline]\nmax_parallel_synthesis = 0\n")).partition_workers == 18
    same = "[synthesis]\npartition_workers = 12\n[pipeline]\nmax_parallel_synthesis = 12\n"
    assert load_config(write(tmp_path, same)).partition_workers == 12
    with pytest.raises(UserError, match="contradicts"):
        load_config(write(tmp_path, same.replace("= 12\n[pipeline]", "= 10\n[pipeline]")))


def test_every_cuzk_key_simgpu_accepts_is_documented_in_the_readme():
    from conftest import ROOT

    from simgpu.config import _TOML_KEYS, AT_DEFAULT_ONLY, NO_EFFECT

    readme = (ROOT / "README.md").read_text()
    for section, key in [*_TOML_KEYS, *NO_EFFECT, *AT_DEFAULT_ONLY]:
        assert f"`[{section}] {key}`" in readme, f"README does not document [{section}] {key}"
