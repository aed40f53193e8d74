"""Every curated case in cases/*.json, on every lane it names, must keep its expected status."""

import re
from pathlib import Path

import pytest

from harness.backends import get as get_backend
from harness.corpus import entries, split_lane
from harness.pipeline import run_cell
from harness.spec import ConvCase

HERE = Path(__file__).parent


def _params():
    for path in sorted(HERE.glob("*.json")):
        for entry in entries(path):
            case = ConvCase.from_dict(entry["case"])
            for lane, expected in sorted(entry.get("expect", {}).items()):
                yield pytest.param(case, lane, expected, id=f"{path.stem}:{case.case_id}:{lane}")


@pytest.mark.slow
@pytest.mark.parametrize("case, lane, expected", list(_params()))
def test_expected_status(case, lane, expected):
    backend, fixes = split_lane(lane)
    row = run_cell(case, backend, fixes)
    accepted = {expected}
    if expected == "NO_RUNTIME" and get_backend(backend).runtime_available():
        accepted = {"PASS"}  # a registered runtime turns "contract clean" into a real run
    assert row["status"] in accepted, f"{lane}: {row['status']} ({row['message']})"
    if row["status"] == "CONTRACT_VIOLATION":  # the message names the violated rule
        assert re.match(r"\[[a-z0-9-]+\] ", row["message"]), row["message"]
