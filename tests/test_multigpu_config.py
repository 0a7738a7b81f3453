"""The configuration of several GPUs: `--vram` for every device or one per device (mixed
cards), `[hardware] vram` as a list, `[gpus] placement` / `--placement`, and their errors."""

from __future__ import annotations

import json

import pytest

from simgpu.cli import main
from simgpu.config import PipelineConfig, load_config
from simgpu.errors import UserError
from simgpu.sweep.cuzk_toml import config_toml

G = 1 << 30


def predict_json(args: list[str], capsys) -> dict:
    assert main(["predict", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_one_size_is_every_devices_and_a_list_is_one_per_device(capsys):
    doc = predict_json(["--devices", "2", "--vram", "16G"], capsys)
    assert [d["vram_bytes"] for d in doc["devices"]] == [16 * G, 16 * G]
    assert doc["config"]["vram"] == 16 * G and doc["config"]["placement"] == "shared-queue"
    doc = predict_json(["--devices", "2", "--vram", "16G,32G", "--placement", "best-fit"], capsys)
    assert [d["vram_bytes"] for d in doc["devices"]] == [16 * G, 32 * G]
    assert doc["config"]["vram"] == [16 * G, 32 * G] and doc["config"]["placement"] == "best-fit"


def test_the_toml_takes_a_list_of_sizes_and_a_placement(tmp_path):
    f = tmp_path / "cuzk.toml"
    f.write_text('[gpus]\ndevices = [0, 1]\nplacement = "round-robin"\n[hardware]\nvram = ["16GiB", "24G"]\n')
    cfg = load_config(f)
    assert cfg.vram == (16 * G, 24 * G) and cfg.placement == "round-robin"
    assert (cfg.vram_of(0), cfg.vram_of(1)) == (16 * G, 24 * G)
    f.write_text('[hardware]\nvram = ["16GiB"]\n')  # a list of one is that one size
    assert load_config(f).vram == 16 * G and load_config(f).vram_of(0) == 16 * G


def test_a_mixed_machine_writes_back_to_the_same_configuration(tmp_path):
    cfg = PipelineConfig(devices=2, vram=(16 * G, 24 * G), placement="most-free")
    f = tmp_path / "best.toml"
    f.write_text(config_toml(cfg))
    assert load_config(f) == cfg


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--devices", "2", "--vram", "16G,banana"], "--vram (device 1): cannot parse 'banana'"),
        (["--devices", "2", "--vram", "16G,24G,32G"], "vram: 3 sizes for 2 device(s)"),
        (["--vram", "16G,24G"], "vram: 2 sizes for 1 device(s)"),
        (["--devices", "2", "--vram", "16G,"], "--vram (device 1): cannot parse ''"),
        (["--devices", "2", "--vram", "16G,0"], "vram: must be positive, got 0"),
        (["--devices", "2", "--vram", "16G,0.1G"], "(gpu1) is not more than the"),
        (["--placement", "banana"], "placement: unknown policy 'banana' (known: shared-queue, round-robin"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(["predict", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[gpus]\nplacement = 3\n", "[gpus] placement: expected str, got 3"),
        ('[gpus]\nplacement = "fastest"\n', "placement: unknown policy 'fastest'"),
        ("[hardware]\nvram = []\n", "[hardware] vram: give at least one size"),
        ('[gpus]\ndevices = [0, 1]\n[hardware]\nvram = ["16G", "x"]\n', "[hardware] vram (device 1)"),
    ],
)
def test_bad_keys_are_one_line(toml, message, tmp_path):
    f = tmp_path / "cuzk.toml"
    f.write_text(toml)
    with pytest.raises(UserError) as e:
        load_config(f)
    assert message in str(e.value)


def test_a_card_too_small_for_everything_is_refused_but_one_of_two_is_a_prediction(capsys):
    assert main(["predict", "--devices", "2", "--vram", "8G,8G"]) == 2
    assert "circuit too big" in capsys.readouterr().err
    doc = predict_json(["--devices", "2", "--vram", "8G,16G", "-n", "1", "-j", "1"], capsys)
    assert {o["pool"] for o in doc["oom_events"]} == {"gpu0"}  # the shared queue sent work there
    doc = predict_json(
        ["--devices", "2", "--vram", "8G,16G", "-n", "1", "-j", "1", "--placement", "best-fit"], capsys
    )
    assert not doc["oom_events"] and doc["proofs"]["completed"] == 1
    assert doc["devices"][0]["busy_frac"] == 0  # nothing fits the 8 GiB card: it stays idle


def test_sweep_and_tune_take_one_size_for_every_device(tmp_path, capsys):
    f = tmp_path / "cuzk.toml"
    f.write_text('[gpus]\ndevices = 2\n[hardware]\nvram = ["16G", "24G"]\n')
    assert main(["sweep", "--config", str(f), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "sweep: [hardware] vram lists one size per device" in err and len(err.strip().splitlines()) == 1
