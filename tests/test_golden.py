"""Moving code must not move answers: a fixed set of predictions, byte for byte."""

from __future__ import annotations

import pytest

from tests.golden import CASES, GOLDEN, predict_json


@pytest.mark.parametrize("name", sorted(CASES))
def test_prediction_json_is_unchanged(name: str) -> None:
    stored = (GOLDEN / f"{name}.json").read_text()
    assert predict_json(CASES[name]) == stored, (
        f"the JSON of `simgpu predict {' '.join(CASES[name])}` changed; if that is intended, "
        "run `python tests/golden.py --update` and say why in the commit"
    )
