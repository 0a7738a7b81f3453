"""Malformed values for every option of every command, and for every key of the TOML files
the commands read: each gives exit code 2 and one line on stderr, never a traceback.

The options are read off the commands' own signatures, so an option added later is
fuzzed too (and a new option type without malformed values here fails the test)."""

from __future__ import annotations

import inspect
import string
import typing
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simgpu import cli
from simgpu.config import _TOML_KEYS
from simgpu.profile.tomlwrite import dumps

COMMANDS = {
    "predict": cli.predict,
    "run": cli.run,
    "validate": cli.validate,
    "calibrate": cli.calibrate,
    "sweep": cli.sweep,
    "tune": cli.tune,
}

#: Valid arguments each command gets beside the fuzzed one, so that the run would be
#: cheap and local if the fuzzed value were (wrongly) accepted.
BASE = {
    "predict": [],
    "run": ["--backend", "cpu"],
    "validate": ["--backend", "cpu", "--constraints", "2^10"],
    "calibrate": ["--backend", "cpu", "--out", "{tmp}/p.toml"],
    "sweep": ["--no-progress", "--vram", "16G,24G"],
    "tune": ["--no-progress", "--trials", "2", "--batch", "2", "--out", "{tmp}/best.toml"],
}

garbage = st.text(
    alphabet=string.ascii_letters + string.punctuation.replace("-", ""), min_size=1, max_size=12
).map(lambda s: "x" + s)
BAD_INT = ["banana", "1.5", "-1", "", "9" * 25, "0x10"]
BAD_FLOAT = ["banana", "-1", "inf", "nan", ""]
#: Floats for which 0 is malformed too (a rate, a share that must leave room).
POSITIVE_FLOATS = {"arrival_rate"}
BAD_SIZE = ["banana", "-1G", "1e999", "", "2^99", "nan", "12 parsecs"]
BAD_INPUT_PATH = ["{tmp}/missing.toml", "{tmp}", "{tmp}/file.toml/below", "\x00"]
BAD_OUTPUT_PATH = ["{tmp}", "{tmp}/missing/x.json", "{tmp}/file.toml/below", "\x00"]
SIZE_OPTIONS = {
    "vram",
    "constraints",
    "memory_budget",
    "sizes",
    "contention_size",
    "pairing_sizes",
    "host_ram",
    "max_host_ram",
}
#: The grid axes of sweep and tune: ranges (1..4:1) or lists, of counts or sizes.
AXES = {"gpu_workers", "partition_workers", "concurrency"}
BAD_AXIS = ["banana", "4..1", "1..", "..4", "1..4:0", "1..4:-1", "1,,2", "0", "-1", "1e999"]
#: Options that only choose among names: any name not among them is malformed.
NAME_OPTIONS = {
    "design",
    "profile",
    "backend",
    "workload",
    "x",
    "y",
    "base",
    "b_g2_on",
    "circuit",
    "placement",
    "device_law",
    "msm_capacity",
    "abc_upload",
}
OUTPUT_PATHS = {"trace", "plot", "out", "timeline", "records"}
#: A directory the command creates if it must: malformed when it cannot be one.
BAD_DIRECTORY = ["{tmp}/file.toml", "{tmp}/file.toml/below", "\x00"]


def options(command: str) -> list[tuple[str, str, Any]]:
    """(flag, parameter name, base type) of every option of `command`, bool flags left out."""
    fn = inspect.unwrap(COMMANDS[command])
    out = []
    for name, hint in typing.get_type_hints(fn, include_extras=True).items():
        if name == "return":
            continue
        base = typing.get_args(hint)[0]
        base = next((t for t in typing.get_args(base) if t is not type(None)), base)
        if base is bool:
            continue
        out.append((f"--{name.replace('_', '-')}", name, base))
    return out


def malformed(name: str, base: Any) -> st.SearchStrategy[str]:
    if name in SIZE_OPTIONS:
        return st.sampled_from(BAD_SIZE) | garbage
    if name in AXES:
        return st.sampled_from(BAD_AXIS) | garbage
    if name == "scheduler":
        return st.sampled_from(["banana", "tcp://", "tcp://:x", "http//nowhere"])
    if name in NAME_OPTIONS:
        return garbage
    if name in OUTPUT_PATHS:
        return st.sampled_from(BAD_OUTPUT_PATH)
    if name == "keys_dir":
        return st.sampled_from(BAD_DIRECTORY)
    if base is Path:
        return st.sampled_from(BAD_INPUT_PATH)
    if base is int:
        return st.sampled_from(BAD_INT) | garbage
    if base is float:
        extra = ["0"] if name in POSITIVE_FLOATS else []
        if name == "max_oom_risk":
            extra = ["0", "1.5"]
        return st.sampled_from(BAD_FLOAT + extra) | garbage
    raise AssertionError(f"option {name} of type {base}: add its malformed values to this test")


CASES = [(command, flag, name, base) for command in COMMANDS for flag, name, base in options(command)]


def check_refused(args: list[str], capsys: Any) -> None:
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2, (args, code, err)
    assert "Traceback" not in err, (args, err)
    assert len(err.strip().splitlines()) == 1, (args, err)


@pytest.mark.parametrize(("command", "flag", "name", "base"), CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_option_refuses_malformed_values(command, flag, name, base, data, tmp_path, capsys):
    (tmp_path / "file.toml").write_text("[run]\nproofs = 1\n")
    value = data.draw(malformed(name, base)).replace("{tmp}", str(tmp_path))
    base_args = [a.format(tmp=tmp_path) for a in BASE[command]]
    if flag in base_args:  # the fuzzed flag replaces the base's valid one
        i = base_args.index(flag)
        del base_args[i : i + 2]
    check_refused([command, *base_args, f"{flag}={value}"], capsys)


# --------------------------------------------------------------------- config TOML keys

BAD_TOML_VALUES = [
    '"banana"',
    "-7",
    "1.5",
    "99999999999999999999999",
    "[1, 2]",
    "{ a = 1 }",
    "inf",
    "nan",
    "true",
]


@pytest.mark.parametrize(
    ("section", "key"), sorted(_TOML_KEYS), ids=[f"{s}.{k}" for s, k in sorted(_TOML_KEYS)]
)
def test_every_config_key_refuses_malformed_values(section, key, tmp_path, capsys):
    refused = 0
    for value in BAD_TOML_VALUES:
        f = tmp_path / "cuzk.toml"
        f.write_text(f"[{section}]\n{key} = {value}\n")
        code = cli.main(["predict", "--config", str(f)])
        err = capsys.readouterr().err
        assert "Traceback" not in err
        if code == 2:
            assert len(err.strip().splitlines()) == 1, err
            refused += 1
        else:
            # a value this key legitimately takes (a float rate, a list of devices):
            # then it must have predicted
            assert code in (0, 3), (section, key, value, code, err)
    assert refused >= 5, (section, key)


# --------------------------------------------------------------------- profile TOML keys


#: Stands for TOML's `inf` (the profile writer refuses to write one).
INF = "__inf__"


def profile_mutations() -> list[tuple[str, Any]]:
    """(dotted key, malformed value) for the keys of a profile."""
    bad_number = ["banana", -1, INF, [1], {"law": 3}]
    out: list[tuple[str, Any]] = []
    for key in ("vram", "cpu_cores", "host_ram", "membw_gbps", "h2d_gbps", "vram_resident", "host_resident"):
        out += [(f"hardware.{key}", v) for v in bad_number]
    out += [("hardware.vram", "0.1GiB")]  # less than what is resident
    out += [("memory.partition_estimate", v) for v in bad_number]
    out += [("buffers.d_a", v) for v in ["-1GiB", "banana(", {"points": []}, {"points": [[0, 1]]}]]
    out += [("stages.prep.time", v) for v in bad_number + ["n ** n ** n", "open('x')", {"law": "a*n"}]]
    out += [("stages.prep.noise_cv", v) for v in [-0.1, 5, "x"]]
    out += [("stages.prep.on", v) for v in ["tpu", 3]]
    out += [("stages.prep.uses", v) for v in [{"warp": {"demand": 1}}, {"membw": {"bound": 2}}, "x"]]
    out += [("stages.prestage.vram_out", v) for v in [["nope"], "host_abc", 3]]
    out += [("stages.prep.surprise", 1), ("workloads.two.partitions", "many"), ("workloads.two", "x")]
    return out


@pytest.mark.parametrize(
    ("key", "value"), profile_mutations(), ids=[f"{k}={v!r}" for k, v in profile_mutations()]
)
def test_every_profile_key_refuses_malformed_values(key, value, tmp_path, capsys):
    import tomllib

    raw = tomllib.loads((DATA / "tiny.toml").read_text())
    *path, last = key.split(".")
    target = raw
    for part in path:
        target = target[part]
    target[last] = value
    f = tmp_path / "bad.toml"
    f.write_text(dumps(raw, "malformed").replace(f'"{INF}"', "inf"))
    check_refused(["predict", "-p", str(f)], capsys)
