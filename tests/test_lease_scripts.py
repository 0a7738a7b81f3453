"""The device lease scripts (experiments/leases) are records of calls as they ran, and the
next lease's script runs on device time that a typo would waste: each must parse, and
every lease_lib step it calls must still be defined there."""

import re
import subprocess
from pathlib import Path

import pytest

LEASES = Path(__file__).resolve().parents[1] / "experiments" / "leases"
SCRIPTS = sorted(LEASES.glob("*.sh"))


def _defined() -> set[str]:
    text = (LEASES / "lease_lib.sh").read_text()
    return set(re.findall(r"^([a-z_]+)\(\) *\{", text, flags=re.M))


def test_the_library_defines_the_steps_a_call_is_made_of():
    assert {"lease_start", "lease_validate", "lease_finish", "calibrate_spanned"} <= _defined()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_lease_script_parses(script: Path):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "script", [s for s in SCRIPTS if "lease_lib.sh" in s.read_text()], ids=lambda p: p.name
)
def test_each_lease_step_a_script_calls_is_in_the_library(script: Path):
    text = "\n".join(line.split("#", 1)[0] for line in script.read_text().splitlines())
    called = set(re.findall(r"(?<![\w./-])(lease_[a-z_]+|calibrate_spanned|until_|time_left)\b", text))
    assert called - {"lease_lib"} <= _defined(), sorted(called - _defined() - {"lease_lib"})
