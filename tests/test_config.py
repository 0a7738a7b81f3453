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
