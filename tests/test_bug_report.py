"""``harness bug-report``: on a real Vulkan run (the depthwise right-edge bug and the make_ivec2
bug), the markdown names the environment, the known upstream issue, the fingerprint, the picture
and the fix lane that clears it, and the script inside it runs standalone in a fresh process
(no convconf on the path) and reproduces the cell's status. Bad input is one line, exit 2."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results import matrix
from harness.spec import ConvCase

pytestmark = pytest.mark.slow

DW_EDGE = ConvCase(dim=2, in_channels=4, out_channels=4, groups=4, kernel_size=7, padding=3,
                   input_shape=(1, 4, 8, 8))
VALID = ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3, padding="valid",
                 input_shape=(1, 3, 8, 8))
FIX = "vk-conv2d-dw-edge-filter-index"


def harness(*args, env=None):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True,
                          text=True, timeout=900, env=env)


def one_error_line(proc) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith("convconf: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, vulkan_runtime):
    tmp = tmp_path_factory.mktemp("bugreport")
    cases = tmp / "cases.json"
    cases.write_text(json.dumps([DW_EDGE.to_dict(), VALID.to_dict()]))
    out = tmp / "run"
    proc = harness("run", "--out", out, "--cases", cases, "--max-examples", 0, "--backends",
                   "vulkan", "--fixes", FIX, "--vulkan-runtime", vulkan_runtime.library,
                   "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return out


def finding(run_dir, status):
    found = json.loads((run_dir / "findings.json").read_text())["findings"]
    (f,) = [f for f in found if f["status"] == status and "vulkan" in f["lanes"]]
    return f


def script_of(markdown: str) -> str:
    (code,) = re.findall(r"```python\n(.*?)\n```", markdown, flags=re.S)
    return code


def run_standalone(code: str, where: Path, run_dir: Path) -> list[str]:
    """The script alone in a fresh process: its own folder, no convconf on the path, the
    run's Vulkan plug-in named by $VULKAN_RUNTIME (the script holds no local path)."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / "repro.py"
    path.write_text(code)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONVCONF_KNOWN_ISSUES")}
    env["VULKAN_RUNTIME"] = json.loads((run_dir / "run.json").read_text())["vulkan_runtime"]
    proc = subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True,
                          timeout=600, cwd=where, env=env)
    return [ln for ln in proc.stdout.splitlines() if ln.startswith("STATUS: ")]


def test_depthwise_edge_report(run_dir, tmp_path):
    f = finding(run_dir, "MISMATCH")
    assert f["error_pattern"] == "right edge 3 cols · all channels · all batches"
    out = tmp_path / "reports" / "dw.md"
    proc = harness("bug-report", run_dir, f["id"], "--out", out)
    assert proc.returncode == 0, proc.stderr
    md = out.read_text()
    title = md.splitlines()[0]
    assert title.startswith("# [ET-VK] Conv2d(4, 4, 7, padding=3, groups=4) on input 1x4x8x8")
    assert "right edge 3 cols" in title
    header = json.loads((run_dir / "run.json").read_text())
    vk = header["vulkan"]
    assert f"executorch {header['versions']['executorch']}, torch {header['versions']['torch']}" in md
    assert vk["source_commit"] in md
    if vk.get("skew_note"):  # the 1.5.1 plug-in is built from main, not 1.5.1's commit
        assert "**Source skew:** " + vk["skew_note"] in md
    assert vk["devices"][0]["deviceName"] in md and vk["devices"][0]["driverName"] in md
    assert "known, not reported upstream" in md and "Depthwise conv2d with a kernel" in md
    assert "fingerprint): **right edge 3 cols · all channels · all batches**" in md
    (picture,) = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    assert (out.parent / picture).resolve() == (run_dir / f["picture"]).resolve()
    assert (out.parent / picture).stat().st_size > 1000
    assert f"lane `vulkan+{FIX}`: 1/1 of the finding's stock cells PASS" in md
    assert "data-limited" in md  # one cell: the rule is a correlation over too little
    code = script_of(md)
    assert "import harness" not in code and "from harness" not in code
    assert "make_ivec2" not in code.split('"""')[2]  # the minimal reproducer: no contract check
    assert str(run_dir) not in code and "/.cache/" not in code  # no local path
    assert run_standalone(code, tmp_path / "fresh", run_dir)[0].startswith("STATUS: MISMATCH")


def test_make_ivec2_report_names_the_upstream_issue(run_dir, tmp_path):
    f = finding(run_dir, "RUNTIME_ERROR")
    proc = harness("bug-report", run_dir, f["id"])  # to stdout
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert md.startswith("# [ET-VK] Conv2d(3, 4, 3, padding='valid') on input 1x3x8x8: the runtime "
                         "raises: make_ivec2")
    assert "known: #22774 (open), #22778 (open)" in md
    assert "[pytorch/executorch#22774](https://github.com/pytorch/executorch/issues/22774)" in md
    assert "None of this run's fix lanes clears it" in md  # the dw fix does not
    assert "![" not in md  # no picture for a runtime error
    assert run_standalone(script_of(md), tmp_path / "fresh",
                          run_dir)[0].startswith("STATUS: RUNTIME_ERROR")


def test_releases_affected_from_bisect_runs(run_dir, tmp_path):
    f = finding(run_dir, "MISMATCH")
    older = tmp_path / "1.4.1"
    shutil.copytree(run_dir, older)
    header = json.loads((older / "run.json").read_text())
    header["versions"] = {**header["versions"], "executorch": "1.4.1"}
    (older / "run.json").write_text(json.dumps(header))
    df = matrix.read(older)  # as if that release computed the depthwise edge right
    hit = (df.case_id == DW_EDGE.case_id) & (df.fixes == "")
    df.loc[hit, ["status", "message", "error_pattern"]] = ["PASS", "", ""]
    matrix.write(df, older)
    proc = harness("bug-report", run_dir, f["id"], "--releases", older, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "## Releases affected" in proc.stdout
    assert "| 1.4.1 | " in proc.stdout and "| absent | PASS |" in proc.stdout
    assert "| present (1 cells) | MISMATCH, PASS |" in proc.stdout


def test_bad_input_is_one_line(run_dir, tmp_path):
    assert "no finding 'F-00000000'" in one_error_line(harness("bug-report", run_dir, "F-00000000"))
    clean = tmp_path / "clean"  # a run whose every cell passed: no findings
    shutil.copytree(run_dir, clean)
    df = matrix.read(clean)
    df["status"], df["message"], df["error_pattern"] = "PASS", "", ""
    matrix.write(df, clean)
    assert "has no findings" in one_error_line(harness("bug-report", clean, "F-6587608b"))
    assert "cannot read matrix" in one_error_line(harness("bug-report", tmp_path / "nope", "F-1"))
    f = finding(run_dir, "MISMATCH")
    bad = tmp_path / "known.json"
    bad.write_text('[{"id": "x"}]')
    env = {**os.environ, "CONVCONF_KNOWN_ISSUES": str(bad)}
    line = one_error_line(harness("bug-report", run_dir, f["id"], env=env))
    assert str(bad) in line and "entry #0" in line
    assert not (tmp_path / "x.md").exists()
