"""The command line as a user meets it: real runs, one-line errors, untouched output on bad input."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from harness.spec import ConvCase
from honest import assert_executed

SEED = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding="valid",
                input_shape=(1, 3, 16, 16))


def harness(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def one_error_line(proc):
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("convconf: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def case_file(tmp_path):
    f = tmp_path / "seed.json"
    f.write_text(json.dumps([SEED.to_dict()]))
    return f


@pytest.mark.slow
def test_run_case_file_on_both_backends(tmp_path, case_file, vulkan_runtime):
    out = tmp_path / "run"
    proc = harness("run", "--out", out, "--cases", case_file, "--max-examples", 0, "--no-cache",
                   "--fixes", "vulkan-conv-padding,xnnpack-conv1d-same-even", "--no-progress",
                   "-j", 2, "--vulkan-runtime", vulkan_runtime.library)  # named: "all" grows
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(out / "matrix.csv", keep_default_na=False)
    assert {"case_id", "backend", "fixes", "status", "max_abs_error", "message", "dim", "padding",
            "quant"} <= set(df.columns)
    # every lane has its row, honest; what each status is on 1.5.1: cases/from_tests.json
    got = {(r.backend, r.fixes): r for r in df.itertuples()}
    assert sorted(got) == [("vulkan", ""), ("vulkan", "vulkan-conv-padding"), ("xnnpack", ""),
                           ("xnnpack", "xnnpack-conv1d-same-even")]
    for row in got.values():
        assert_executed(row._asdict())
    # what the run prints and writes is what its rows say
    stock, fixed = got[("vulkan", "")].status, got[("vulkan", "vulkan-conv-padding")].status
    assert (f"vulkan+vulkan-conv-padding: changed 1/1 cells: {stock}->{fixed} x1" if
            stock != fixed else "vulkan+vulkan-conv-padding: no-op here (1 cells") in proc.stdout
    assert "static contract check vs the runtime" in proc.stdout
    assert len(open(out / "journal.jsonl").readlines()) == len(df)
    not_ok = [r for r in got.values() if r.status not in ("PASS", "NO_RUNTIME")]
    found = json.loads((out / "findings.json").read_text())
    assert found["cells_not_pass"] == len(not_ok)
    assert bool(found["findings"]) == bool(not_ok)
    assert (out / "junit.xml").exists() and f"{len(found['findings'])} findings" in proc.stdout
    for status in {r.status for r in not_ok}:
        assert status in proc.stdout
    fail = harness("run", "--resume", out, "--fail-on-mismatch", "--no-progress")
    assert fail.returncode == (1 if not_ok else 0)  # a cell outside PASS is a finding


@pytest.mark.parametrize("args, words", [
    (["run", "--out", "{tmp}/o", "--backends", "xnnpack,metal"], "unknown backend 'metal'"),
    (["run", "--out", "{tmp}/o", "--fixes", "vulkan-conv-paddin"], "unknown fix 'vulkan-conv-paddin'"),
    (["run", "--out", "{tmp}/o", "--cases", "{tmp}/bad.json"], "bad.json: not valid JSON"),
    (["run", "--out", "{tmp}/o", "--cases", "{tmp}/nope.json"], "nope.json: cannot read"),
    (["run", "--out", "{tmp}/o", "--cases", "{tmp}/wrongfield.json"], "case #0: unknown field"),
    (["run", "--resume", "{tmp}/nothing"], "not a convconf run folder"),
    (["run", "--out", "{tmp}/o", "--profile", "weekly"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_clear_line(tmp_path, args, words):
    (tmp_path / "bad.json").write_text("[{")
    (tmp_path / "wrongfield.json").write_text(json.dumps([{**SEED.to_dict(), "colour": 1}]))
    line = one_error_line(harness(*[a.format(tmp=tmp_path) for a in args]))
    assert words in line
    assert not (tmp_path / "o").exists()


def test_existing_run_is_not_overwritten(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "journal.jsonl").write_text('{"case_id": "x", "backend": "b", "fixes": "", "status": "PASS"}\n')
    line = one_error_line(harness("run", "--out", out, "--backends", "xnnpack", "--fixes", "all"))
    assert "already holds a run" in line
    assert (out / "journal.jsonl").read_text().count("\n") == 1


def test_fixes_lists_every_fix_with_kind_bug_and_evidence():
    from harness.stages import fixes

    proc = harness("fixes")
    assert proc.returncode == 0, proc.stderr
    for name in fixes.names():
        fix = fixes.get(name)
        assert f"{name}  [{fix.kind}]  backends: {','.join(fix.backends)}" in proc.stdout
    assert proc.stdout.count("  bug: ") == proc.stdout.count("  verified: ") == len(fixes.names())
    line = one_error_line(harness("fixes", "xnnpack-tconv-output-paddin"))
    assert "unknown fix 'xnnpack-tconv-output-paddin'" in line


def test_fixes_each_is_accepted_and_still_checks_the_rest(tmp_path):
    line = one_error_line(harness("run", "--out", tmp_path / "o", "--fixes", "each",
                                  "--backends", "xnnpack,metal"))
    assert "unknown backend 'metal'" in line and not (tmp_path / "o").exists()
