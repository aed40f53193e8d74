"""Long-run robustness: journal, resume after kill -9, truncated journal lines, cache keys."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from harness.stages import cache as cache_mod
from harness import versions
from harness.run.journal import Journal, read
from harness.lane import Lane
from harness.stages.cell import run_cell
from harness.spec import ConvCase
from honest import assert_honest

CASES = [ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=k, padding=p,
                  input_shape=(1, 2, 10)) for k in (1, 2, 3) for p in (0, "valid")]
ROW = {"case_id": "c", "backend": "xnnpack", "fixes": "", "status": "PASS"}


def test_truncated_last_line_is_reported_not_fatal(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps(ROW) + "\n" + json.dumps({**ROW, "case_id": "d"})[:20])
    got = read(path)
    assert [r["case_id"] for r in got.rows] == ["c"]
    assert len(got.problems) == 1 and "line 2 is truncated" in got.problems[0]
    Journal(path).mend(got)
    Journal(path).append({**ROW, "case_id": "e"})
    assert [r["case_id"] for r in read(path).rows] == ["c", "e"] and not read(path).problems


def test_garbage_middle_line_is_reported(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps(ROW) + "\nnot json\n" + json.dumps({**ROW, "case_id": "z"}) + "\n")
    got = read(path)
    assert [r["case_id"] for r in got.rows] == ["c", "z"]
    assert "line 2 is unreadable" in got.problems[0]


def test_cache_key_changes_with_versions():
    stack = versions.stack()
    xnn = Lane("xnnpack")
    k = cache_mod.key("case", xnn, stack)
    assert k == cache_mod.key("case", xnn, dict(stack))
    assert k != cache_mod.key("case", xnn, {**stack, "executorch": "1.4.1"})
    assert k != cache_mod.key("case", xnn, {**stack, "torch": "2.9.0"})
    assert k != cache_mod.key("case", xnn, {**stack, "pipeline": "another-stage-digest"})
    assert k != cache_mod.key("case", Lane("vulkan"), stack)
    assert k != cache_mod.key("case", Lane("xnnpack", ("vulkan-conv-padding",)), stack)


def test_warm_cell_reuses_the_lowered_program_and_invalidates_on_version(tmp_path, monkeypatch):
    store = cache_mod.Cache(tmp_path)
    cold = run_cell(CASES[1], "xnnpack", [], store)
    warm = run_cell(CASES[1], "xnnpack", [], store)
    assert (cold.cached, warm.cached) == (False, True)
    assert cold.status == warm.status  # the cached program, the same verdict
    assert_honest(warm)
    assert warm.max_abs_error == cold.max_abs_error
    bumped = {**versions.stack(), "executorch": "0.0.0-other"}
    monkeypatch.setattr(versions, "stack", lambda: bumped)
    assert run_cell(CASES[1], "xnnpack", [], store).cached is False


def _run(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "harness", "run", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kw)


@pytest.mark.slow
def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
    case_file = tmp_path / "cases.json"
    case_file.write_text(json.dumps([c.to_dict() for c in CASES]))
    # Vulkan without a runtime: its cells are final as each case is prepared, so rows arrive
    # one case at a time and the kill lands between cases (XNNPACK's executions come after).
    common = ["--cases", case_file, "--max-examples", 0, "--backends", "xnnpack,vulkan",
              "--vulkan-runtime", "none", "--no-cache", "--no-progress", "--no-report", "-j", 1]
    cells = 2 * len(CASES)
    killed = tmp_path / "killed"
    proc = _run(["--out", killed, *common])
    journal = killed / "journal.jsonl"
    deadline = time.monotonic() + 240
    while not (journal.exists() and len(read(journal).rows) >= 2):  # poll, bounded
        assert time.monotonic() < deadline, "no 2 cells in the journal after 240 s"
        try:  # wait on the run itself between looks: one that ended is a failure at once
            code = proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"the run ended (exit {code}) before the kill: {journal} has "
                    f"{len(read(journal).rows) if journal.exists() else 0} cells")
    os.killpg(proc.pid, signal.SIGKILL)  # the whole run, workers included
    proc.wait()
    partial = len(read(journal).rows)
    assert 2 <= partial < cells, "the kill should land mid-run"
    # --no-cache: what step 1 prepared went to execution in memory, no scratch cache on disk
    assert not (killed / "prepared").exists()
    with open(journal, "a") as fh:  # a cell cut mid-write by the kill
        fh.write('{"case_id": "half')
    resumed = subprocess.run([sys.executable, "-m", "harness", "run", "--resume", killed,
                              "--no-progress", "--no-report"], capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "is truncated" in resumed.stderr and f"{partial} cells already done" in resumed.stderr
    full = tmp_path / "full"
    done = _run(["--out", full, *common])
    assert done.wait(timeout=600) == 0
    cols = ["case_id", "backend", "fixes", "status", "max_abs_error"]
    a = pd.read_csv(killed / "matrix.csv")[cols]
    b = pd.read_csv(full / "matrix.csv")[cols]
    pd.testing.assert_frame_equal(a, b)
    assert len(read(journal).rows) == cells and not read(journal).problems
    assert not (killed / "prepared").exists()


def test_a_hung_cell_becomes_a_crash_row_and_the_run_completes(tmp_path):
    from harness.run import runner

    config = runner.RunConfig(backends=["vulkan"], fixes=[], profile="ci", max_examples=0, seed=0,
                              jobs=1, timeout=0.5, cache_dir=None)  # far less than one lowering
    runner.start(tmp_path, config, CASES[:2])
    df = runner.execute(tmp_path, config, CASES[:2], progress=False)
    assert list(df["status"]) == ["CRASH", "CRASH"]  # harness-made: the timeout, not a delegate
    assert df["message"].str.contains("timeout: cell did not finish within 0.5 s").all()
    assert len(read(tmp_path / "journal.jsonl").rows) == 2
