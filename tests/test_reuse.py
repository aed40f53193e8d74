"""Lowering once per distinct program, through a real run (real lowering, real Vulkan plug-ins).

A fixed lane whose fix passes change nothing in a case's graph takes the program its stock lane
lowered (prepare.py; the bytes are checked in test_lowering_memo.py). What the run must then
guarantee, checked here:
- the statuses are exactly those of each cell lowered and executed alone;
- a graph-fix lane with the stock program on the stock plug-in is not executed: its row is the
  stock row (status, message, metrics), saying ``reused_from == "stock"``;
- a runtime-fix lane with the stock program still executes, on its own patched plug-in (the
  make_ivec2 case: RUNTIME_ERROR stock, PASS patched, from the same bytes);
- a warm rerun (the cache) gives the same rows; the report says "same program as stock".
"""

import os
from pathlib import Path

import pytest

from harness.lane import Lane
from harness.run import runner, workers
from harness.spec import ConvCase
from honest import assert_executed

VALID = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding="valid",
                 input_shape=(1, 3, 12, 12))  # vulkan-conv-padding rewrites this graph
PLAIN = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding=1,
                 input_shape=(1, 3, 12, 12))  # ... and leaves this one as it is
GRAPH_FIX = Lane("vulkan", ("vulkan-conv-padding",))
RUNTIME_FIX = Lane("vulkan", ("vk-conv-int-list-broadcast",))
LANES = [Lane("vulkan"), GRAPH_FIX, RUNTIME_FIX, Lane("xnnpack"),
         Lane("xnnpack", ("xnnpack-conv1d-same-even",))]
# what a verdict copied from another lane may not share with it
OWN = {"backend", "fixes", "reused_from", "cached", "cell_time_s", "lower_time_s"}


def _config(library: str, cache: Path | None) -> runner.RunConfig:
    return runner.RunConfig(backends=["vulkan", "xnnpack"], fixes=[], profile="ci",
                            max_examples=0, seed=0, jobs=2, vulkan_runtime=library,
                            cache_dir=str(cache) if cache else None,
                            lane_names=[lane.name for lane in LANES])


def _rows(df) -> dict:
    return {(r["case_id"], Lane.of(r["backend"], r["fixes"] or "")): r
            for r in df.to_dict(orient="records")}


def _executed_tags(run_dir: Path) -> set[str]:
    text = "".join(p.read_text(errors="replace") for p in (run_dir / "logs").rglob("*.log"))
    return {line[len(workers.MARK):] for line in text.splitlines() if line.startswith(workers.MARK)}


@pytest.fixture(scope="module")
def runs(vulkan_runtime, tmp_path_factory):
    """The run cold (empty cache), then warm (its cache)."""
    from harness.runtimes import RuntimeBuildError

    tmp = tmp_path_factory.mktemp("reuse")
    out = {}
    for name in ("cold", "warm"):
        config = _config(vulkan_runtime.library, tmp / "cache")
        try:
            runner.start(tmp / name, config, [VALID, PLAIN])  # builds the patched plug-in once
        except RuntimeBuildError as e:  # pragma: no cover - a machine that cannot build it
            if os.environ.get("CI"):
                pytest.fail(f"the patched Vulkan runtime must build in CI: {e}")
            pytest.skip(f"no patched Vulkan runtime: {e}")
        config = runner.load_run(tmp / name)[0]
        if config.vulkan_patched.get(runner.patch_key(runner.lane_patches(RUNTIME_FIX)),
                                     {}).get("problem"):
            pytest.skip("no patched Vulkan runtime on this machine")
        out[name] = (tmp / name, runner.execute(tmp / name, config, [VALID, PLAIN], progress=False))
    return out


@pytest.mark.slow
def test_statuses_are_those_of_every_cell_alone(runs, vulkan_runtime):
    """Every cell of the stock plug-in lowered and executed alone, in this process (no sharing,
    no reuse), against the run: the same status and message."""
    from harness.stages.cell import run_cell

    rows = _rows(runs["cold"][1])
    assert len(rows) == 2 * len(LANES)
    for case in (VALID, PLAIN):
        for lane in LANES:
            if lane == RUNTIME_FIX:  # its plug-in is not the one this process loaded
                continue
            alone = run_cell(case, lane.backend, lane.fixes)
            row = rows[(case.case_id, lane)]
            assert (row["status"], row["message"]) == (alone.status, alone.message), (case, lane)


@pytest.mark.slow
def test_reused_program_executes_only_where_the_plug_in_differs(runs):
    run_dir, df = runs["cold"]
    rows = _rows(df)
    executed = _executed_tags(run_dir)
    stock = rows[(PLAIN.case_id, Lane("vulkan"))]
    # PLAIN: the graph fix changes nothing -> the stock program, the stock verdict, not executed
    same = rows[(PLAIN.case_id, GRAPH_FIX)]
    assert same["reused_from"] == "stock"
    assert {k: v for k, v in same.items() if k not in OWN} == \
        {k: v for k, v in stock.items() if k not in OWN}
    assert f"{PLAIN.case_id}|{GRAPH_FIX.name}" not in executed
    assert f"{PLAIN.case_id}|vulkan" in executed
    xnn = rows[(PLAIN.case_id, Lane("xnnpack", ("xnnpack-conv1d-same-even",)))]
    assert xnn["reused_from"] == "stock" and xnn["status"] == rows[(PLAIN.case_id,
                                                                    Lane("xnnpack"))]["status"]
    # VALID: the graph fix rewrites it -> lowered and executed for itself
    assert rows[(VALID.case_id, GRAPH_FIX)]["reused_from"] == ""
    assert f"{VALID.case_id}|{GRAPH_FIX.name}" in executed
    # the runtime fix: the stock program (reused), executed on its own plug-in, which fixes it
    for case in (VALID, PLAIN):
        assert rows[(case.case_id, RUNTIME_FIX)]["reused_from"] == "stock"
        assert f"{case.case_id}|{RUNTIME_FIX.name}" in executed
    for lane in (Lane("vulkan"), RUNTIME_FIX):  # executed, each on its plug-in, honest (the
        assert_executed(rows[(VALID.case_id, lane)])  # statuses: vulkan_runtime_patches.json)


@pytest.mark.slow
def test_a_warm_rerun_gives_the_same_rows_and_the_report_says_so(runs):
    from harness.results import matrix, report

    cold, warm = _rows(runs["cold"][1]), _rows(runs["warm"][1])
    assert set(cold) == set(warm)
    for key, row in cold.items():
        assert (warm[key]["status"], warm[key]["message"], warm[key]["reused_from"]) == \
            (row["status"], row["message"], row["reused_from"]), key
        assert warm[key]["cached"], key
    run_dir = runs["cold"][0]
    assert "reused_from" in matrix.read(run_dir).columns
    html = report.write(run_dir).read_text()
    assert html.count("same program as stock") >= 4  # PLAIN's three fixed lanes, VALID's runtime fix
