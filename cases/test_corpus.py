"""Every curated case in cases/*.json, on every lane it names, must keep its expected status.

Expectations are what really happens with the Vulkan runtime plug-in present (the CI setup), so
the corpus runs through the runner: each cell in an isolated worker, since some Vulkan cells
abort natively. One test per file, naming every cell that moved."""

import os
import re
from pathlib import Path

import pytest

from harness.run import runner
from harness import versions
from harness.lane import Lane
from harness.results import lanes as lane_names
from harness.results.corpus import entries, expectations
from harness.spec import ConvCase

HERE = Path(__file__).parent
# cases/nightly/*.json: large corpus files (ExecuTorch's suite's 200 conv configurations) that
# the nightly session checks (CONVCONF_CORPUS=nightly); the test command runs cases/*.json
FILES = sorted(HERE.glob("*.json")) + (
    sorted((HERE / "nightly").glob("*.json")) if os.environ.get("CONVCONF_CORPUS") == "nightly" else [])


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_expected_status(path, vulkan_runtime, tmp_path):
    wanted = {}
    cases = []
    release = versions.stack()["executorch"]  # expect_by_release: a bug of some releases only
    for entry in entries(path):
        case = ConvCase.from_dict(entry["case"])
        cases.append(case)
        for name, expected in expectations(entry, release).items():
            lane = lane_names.parse(name)
            wanted[(case.case_id, lane.backend_column, lane.fixes_column)] = expected
    assert wanted, f"{path.name} expects nothing on executorch {release}"
    lanes = sorted({Lane.of(b, f) for _, b, f in wanted})  # exactly the lanes the file names
    config = runner.RunConfig(backends=sorted({lane.backend for lane in lanes}),
                              fixes=sorted({f for lane in lanes for f in lane.fixes}),
                              profile="ci", max_examples=0, seed=0, jobs=2, cache_dir=None,
                              vulkan_runtime=vulkan_runtime.library,
                              lane_names=[lane.name for lane in lanes])
    runner.start(tmp_path, config, cases)
    df = runner.execute(tmp_path, config, cases, progress=False)
    got = {(r.case_id, r.backend, r.fixes): r for r in df.itertuples()}
    moved = [f"{cid} {backend}{'+' + fixes if fixes else ''}: expected {expected}, got "
             f"{got[(cid, backend, fixes)].status} ({got[(cid, backend, fixes)].message[:200]})"
             for (cid, backend, fixes), expected in wanted.items()
             if got[(cid, backend, fixes)].status != expected]
    assert not moved, "\n".join(moved)
    for r in df.itertuples():  # a violation or a runtime failure names its rule / the runtime's check
        if r.status == "CONTRACT_VIOLATION":
            assert re.match(r"\[[a-z0-9-]+\] ", r.message), r.message
        if r.status in ("RUNTIME_ERROR", "CRASH"):
            assert r.message, r
