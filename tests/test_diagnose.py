"""Deciding parameters by experiment (issue 22 part 1): one-step variants of a finding's
representative, each run as a real cell in its lane.

- the variants are legal cases one step away, a spelling swap is the same conv to PyTorch;
- the deciding parameters name only variants that ran and left the finding, none when the
  control did not reproduce it, and a budget of 0 says it ran out and claims nothing;
- for real, on the Vulkan lane: the make_ivec2 finding (padding spelled [1]) comes out with
  "padding spelling (length-1 list)", in findings.json/md, report.html and bug-report.
"""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings

from harness.generation.strategies import conv_cases
from harness.generation.variants import LIST1, one_step
from harness.record import CellResult
from harness.results import diagnosis, findings, matrix
from harness.results.diagnosis import Diagnosis, Variant
from harness.spec import ConvCase

IVEC2 = ("Exception raised from make_ivec2 at executorch/backends/vulkan/runtime/utils/"
         "VecUtils.h:367: (ints.size() == 2) is false!")
LISTED = ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3, padding=(1,),
                  input_shape=(1, 3, 8, 8))
DECIDING = f"padding {LIST1}"


@settings(max_examples=60)
@given(conv_cases())
def test_variants_are_legal_cases_one_step_away_and_spellings_are_the_same_conv(case):
    steps = one_step(case)
    ids = [s.case.case_id for s in steps]
    assert len(set(ids)) == len(ids) and case.case_id not in ids
    for s in steps:
        v = s.case
        assert min(v.output_shape()[2:]) >= 1, s  # the input grew where the kernel did
        assert s.field and " -> " in s.change
        if "spelling" in s.field:  # the same convolution to PyTorch, spelled otherwise
            assert v.output_shape() == case.output_shape(), s
            assert (v.kernel_size, v.groups, v.dtype, v.quant) == \
                (case.kernel_size, case.groups, case.dtype, case.quant)


def test_the_spellings_of_the_seed_bug_are_its_first_variants():
    steps = one_step(LISTED)
    assert [(s.field, s.change) for s in steps[:2]] == [
        (DECIDING, "padding spelled [1] -> 1"), (DECIDING, "padding spelled [1] -> (1, 1)")]
    assert [s.case.padding for s in steps[:2]] == [1, (1, 1)]
    valid = one_step(ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3,
                              padding="valid", input_shape=(1, 3, 8, 8)))
    # "valid" reaches the graph as the length-1 list [0]: the same spelling bug
    assert [(s.field, s.case.padding) for s in valid[:2]] == [(DECIDING, 0), (DECIDING, (0, 0))]
    fields = {s.field for s in steps}
    assert {"kernel parity", "kernel 3x3/5x5", "kernel size", "padding", "bias"} <= fields


def _variant(field, keeps, finding="", status=None):
    return Variant(field, f"{field} x -> y", "case", status or ("RUNTIME_ERROR" if keeps or finding
                                                                else "PASS"), finding, keeps)


def test_deciding_names_only_variants_that_ran_and_left_the_finding():
    d = Diagnosis("F-1", "vulkan", "case", "example", control="RUNTIME_ERROR", control_keeps=True,
                  variants=[_variant(DECIDING, False), _variant("kernel parity", True),
                            _variant("kernel size", False, finding="F-2"),
                            _variant(DECIDING, False)], planned=9)
    assert d.deciding == [DECIDING, "kernel size" + diagnosis.CHANGES_THE_FAILURE]
    assert d.summary == "4 of 9 variants in 0.0 s"
    assert diagnosis.variants_line(d.variants[:2]) == (
        f"{DECIDING} x -> y: PASS; kernel parity x -> y: still fails")
    # the control did not reproduce the finding: nothing is claimed, whatever the variants did
    d.control_keeps = False
    assert d.deciding == []
    back = Diagnosis.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back == d and back.variants[0].outcome == "PASS"


def _ivec2_run(tmp_path):
    """A run folder (matrix only) whose one finding is the make_ivec2 one."""
    tmp_path.mkdir(exist_ok=True)
    cell = CellResult(case=LISTED, backend="vulkan", status="RUNTIME_ERROR", message=IVEC2)
    matrix.write(matrix.frame([cell.to_row()]), tmp_path)
    return findings.find([cell], tmp_path)


@pytest.mark.parametrize("budget", [0.0, 1e-9])
def test_a_budget_of_zero_says_it_ran_out_and_claims_nothing(tmp_path, budget):
    from harness.run import runner
    from harness.run.diagnose import diagnose
    from harness.run.shrink import Lab

    (f,) = _ivec2_run(tmp_path)
    config = runner.RunConfig(backends=["vulkan"], fixes=[], profile="ci", max_examples=0,
                              seed=0)
    with Lab(tmp_path, config) as lab:
        d = diagnose(f, lab, budget)
        assert lab.tries == 0  # not even the control ran
    assert d.variants == [] and d.deciding == [] and d.planned == len(one_step(LISTED))
    assert d.note.startswith(f"budget ran out after 0 of {d.planned} variants")
    diagnosis.write(tmp_path, {f.id: d})
    (again,) = findings.find(matrix.read(tmp_path), tmp_path)
    assert again.deciding == [] and again.diagnosis == d.note
    cells = [CellResult.from_row(r) for r in matrix.read(tmp_path).to_dict(orient="records")]
    findings.write(tmp_path, cells, [again])
    md = (tmp_path / "findings.md").read_text()
    assert "deciding: **none found** [budget ran out after 0 of" in md
    assert "data-limited" in md  # one cell: the correlational rule is marked as such


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)],
                          capture_output=True, text=True, timeout=900)


def test_bad_input_is_one_line(tmp_path):
    for proc in (harness("diagnose", tmp_path / "nothing"),
                 harness("run", "--out", tmp_path / "o", "--diagnose-budget", "-1")):
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith("convconf: error: ")
    assert not (tmp_path / "o").exists()
    passing = CellResult(case=LISTED, backend="vulkan", status="PASS")
    (tmp_path / "pass").mkdir()
    matrix.write(matrix.frame([passing.to_row()]), tmp_path / "pass")
    proc = harness("diagnose", tmp_path / "pass")
    assert proc.returncode == 2 and "has no findings" in proc.stderr, proc.stderr
    _ivec2_run(tmp_path / "fail")
    proc = harness("diagnose", tmp_path / "fail", "--finding", "F-00000000")
    assert proc.returncode == 2 and "no finding 'F-00000000'" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_the_make_ivec2_finding_is_decided_by_the_length1_spelling(tmp_path, vulkan_runtime,
                                                                  chromium):
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([LISTED.to_dict()]))
    out = tmp_path / "run"
    proc = harness("run", "--out", out, "--cases", cases, "--max-examples", 0, "--backends",
                   "vulkan", "--vulkan-runtime", vulkan_runtime.library, "--no-progress",
                   "--diagnose", "--diagnose-budget", 300)
    assert proc.returncode == 0, proc.stderr
    (f,) = json.loads((out / "findings.json").read_text())["findings"]
    assert "make_ivec2" in f["signature"]
    assert DECIDING in f["deciding"] and f["deciding"][0] == DECIDING
    ran = {v["change"]: v for v in f["variants"]}
    assert {"padding spelled [1] -> 1", "padding spelled [1] -> (1, 1)"} <= set(ran)
    for v in f["variants"]:  # each variant's row says where it landed, consistently
        assert v["keeps"] == (v["finding"] == f["id"]), v
        assert (v["finding"] == "") == (v["status"] in ("PASS", "NO_RUNTIME")), v
    assert ran["padding [1] -> [0]"]["keeps"]  # the value does not matter, the spelling does
    for v in f["variants"]:  # a field is deciding exactly when one of its variants left
        assert (v["field"] in {d.split(" (changes")[0] for d in f["deciding"]}) or v["keeps"]
    stored = json.loads((out / "diagnosis.json").read_text())[f["id"]]
    assert stored["control_keeps"] and stored["planned"] == len(f["variants"])
    assert f["diagnosis"].startswith(f"{stored['planned']} of {stored['planned']} variants")
    assert f"deciding: **{DECIDING}" in (out / "findings.md").read_text()
    assert "padding spelled [1] -&gt; (1, 1)" in (out / "report.html").read_text()
    report = harness("bug-report", out, f["id"])
    assert report.returncode == 0, report.stderr
    assert "deciding parameters" in report.stdout and f"**{DECIDING}" in report.stdout
    assert "| padding spelled [1] -> 1 | padding spelling (length-1 list) | PASS |" in report.stdout
    _check_report_in_chromium(out / "report.html", chromium, tmp_path / "findings.png")
    # the same folder diagnosed again with no budget: honest about it, nothing claimed
    again = harness("diagnose", out, "--budget", 0)
    assert again.returncode == 0, again.stderr
    (f0,) = json.loads((out / "findings.json").read_text())["findings"]
    assert f0["deciding"] == [] and f0["variants"] == []
    assert f0["diagnosis"].startswith("budget ran out after 0 of ")


def _check_report_in_chromium(html, chromium, shot):
    """The findings row names what decides it; the variants row under it lists each variant
    and its outcome, visible in a real browser."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(html.as_uri())
        (row,) = page.locator("#findings tr.finding").all()
        # the row's collapsed "more" names it; the variants row under it shows it too
        assert DECIDING in row.locator(".deciding").text_content()
        variants = page.locator("#findings tr.finding-variants")
        assert variants.count() == 1 and variants.first.is_visible()
        text = variants.first.inner_text()
        assert f"deciding: {DECIDING}" in text and "padding spelled [1] -> 1: PASS" in text
        assert "kernel 3 -> 2: still fails" in text
        page.locator("#findings").screenshot(path=str(shot))  # kept out of git (tmp)
        assert shot.stat().st_size > 5_000
        browser.close()
