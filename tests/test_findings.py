"""Findings: cells -> distinct problems with a deciding rule; junit.xml for CI."""

import json
import xml.etree.ElementTree as ET

import pytest

from harness.results import findings
from harness.results import junit
from harness.results import matrix
from harness.record import CellResult
from harness.spec import ConvCase

IVEC2 = ("Exception raised from make_ivec2 at executorch/backends/vulkan/runtime/utils/"
         "VecUtils.h:367: (ints.size() == 2) is false!")
PW = ("Exception raised from conv1d_pw at executorch/backends/vulkan/runtime/graph/ops/impl/"
      "Conv1dPW.cpp:220: (graph.get_int(args[6]) == 1) is false! conv1d_pw only supports groups=1")


def test_the_same_check_at_the_same_place_is_one_signature():
    other_values = IVEC2.replace("== 2", "== 3")
    assert findings.signature("RUNTIME_ERROR", IVEC2) == findings.signature("RUNTIME_ERROR", other_values)
    assert findings.signature("RUNTIME_ERROR", IVEC2) != findings.signature("RUNTIME_ERROR", PW)
    a = findings.signature("MISMATCH", "252/336 elements outside atol=0.0001 rtol=0.0001, max|d|=8.57")
    b = findings.signature("MISMATCH", "12/12 elements outside atol=0.0001 rtol=0.0001, max|d|=1.21")
    assert a == b
    cv = "[ivec2] aten.convolution.default: padding IntList [0] has length 1, 2D conv needs 2 (x)"
    assert findings.signature("CONTRACT_VIOLATION", cv) == "[ivec2] aten.convolution.default"
    # one problem seen on two devices is one finding, with a stable id
    assert findings.finding_id("vulkan", "RUNTIME_ERROR", IVEC2) == \
        findings.finding_id("vulkan@h200", "RUNTIME_ERROR", IVEC2) == "F-" + \
        __import__("hashlib").sha1(f"vulkan|RUNTIME_ERROR|{findings.signature('RUNTIME_ERROR', IVEC2)}"
                                   .encode()).hexdigest()[:8]


def _cells():
    """The shape of the seed bug: 2D cells with a length-1 list fail stock and pass fixed."""
    out = []
    for padding in ("valid", [1], 0, 1, (1, 1), "same"):
        for k in (2, 3):
            case = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=k, padding=padding,
                            input_shape=(1, 4, 8, 8))
            bad = case.has_short_int_list()
            out.append(CellResult(case=case, backend="vulkan", status="RUNTIME_ERROR" if bad
                                  else "PASS", message=IVEC2 if bad else "", cell_time_s=0.5))
            out.append(CellResult(case=case, backend="vulkan", fixes="vulkan-conv-padding",
                                  status="PASS", cell_time_s=0.5))
    c1 = ConvCase(dim=1, in_channels=4, out_channels=4, kernel_size=1, groups=2, input_shape=(1, 4, 7))
    out.append(CellResult(case=c1, backend="vulkan", status="RUNTIME_ERROR", message=PW))
    out.append(CellResult(case=c1, backend="vulkan", fixes="vulkan-conv-padding",
                          status="NO_RUNTIME", message="VulkanBackend is not registered"))
    return out


def test_findings_name_their_rule_and_the_fix_that_clears_them(tmp_path):
    df = matrix.frame([r.to_row() for r in _cells()])
    found = {f.signature.split(" at ")[0]: f for f in findings.find(df)}
    assert set(found) == {"make_ivec2", "conv1d_pw"}
    ivec2 = found["make_ivec2"]
    assert ivec2.count == 4 and ivec2.lanes == ["vulkan"]
    assert ivec2.rule == "has a length-1 list" and (ivec2.precision, ivec2.recall) == (1.0, 1.0)
    assert ivec2.rule_in == "4/4 in" and ivec2.rule_out == "0/9 out"
    assert ivec2.fixed_by == {"vulkan-conv-padding": "4/4"}
    assert found["conv1d_pw"].fixed_by == {}  # its fixed cell never ran: not "cleared"
    cells = [CellResult.from_row(r) for r in df.to_dict(orient="records")]
    findings.write(tmp_path, cells, findings.find(cells, tmp_path))
    written = json.loads((tmp_path / "findings.json").read_text())["findings"]
    assert len(written) == 2 and "| make_ivec2" not in (tmp_path / "findings.md").read_text()
    assert "has a length-1 list (4/4 in, 0/9 out)" in (tmp_path / "findings.md").read_text()


def test_junit_xml_reads_back_with_the_matrix_counts(tmp_path):
    cells = _cells()
    df = matrix.frame([r.to_row() for r in cells])
    root = ET.parse(junit.write(tmp_path, df)).getroot()
    assert root.tag == "testsuites" and int(root.get("tests")) == len(cells)
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"vulkan", "vulkan+vulkan-conv-padding"}
    for name, suite in suites.items():
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert all(c.get("classname") == name for c in cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
    stock = suites["vulkan"]
    failed = [c.find("failure") for c in stock.findall("testcase") if c.find("failure") is not None]
    assert len(failed) == 5 and {f.get("type") for f in failed} == {"RUNTIME_ERROR"}
    assert any("make_ivec2" in f.get("message") for f in failed)
    assert suites["vulkan+vulkan-conv-padding"].get("skipped") == "1"
    assert float(stock.get("time")) == 6.0  # 12 timed cells x 0.5 s, the untimed one counts 0


@pytest.mark.slow
def test_run_shrinks_each_finding_and_saves_the_minimal_case(tmp_path, vulkan_runtime):
    import subprocess
    import sys

    big = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, padding="valid",
                   input_shape=(1, 4, 12, 12))
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([big.to_dict()]))
    out, saved = tmp_path / "run", tmp_path / "found.json"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--out", str(out), "--cases", str(cases),
         "--max-examples", "0", "--backends", "vulkan", "--shrink", "40", "--no-progress",
         "--vulkan-runtime", vulkan_runtime.library, "--save-failures", str(saved),
         "--diagnose"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    shrunk = json.loads((out / "shrunk.json").read_text())
    (fid, entry), = shrunk.items()
    small = ConvCase.from_dict(entry["case"])
    assert small.padding == "valid" and small.dim == 2  # what decides the bug is kept
    assert (small.in_channels, small.out_channels) <= (4, 8) and small != big  # the rest shrank
    assert entry["tries"] >= 2 and entry["seconds"] > 0 and (out / entry["repro"]).exists()
    # tries per minute: per finding in shrunk.json, in total in the run's output and findings.md
    assert entry["tries_per_min"] == round(60 * entry["tries"] / entry["seconds"], 1)
    line = findings.shrink_line(entry["tries"], entry["seconds"])
    assert line in proc.stdout and line in (out / "findings.md").read_text()
    # then diagnosed: the minimal case is the representative, its "valid" spelling decides it
    diagnosed = json.loads((out / "diagnosis.json").read_text())[fid]
    assert diagnosed["source"] == "shrunk" and diagnosed["representative"] == small.case_id
    assert "padding spelling (length-1 list)" in diagnosed["deciding"]
    found = json.loads((out / "findings.json").read_text())["findings"]
    assert found[0]["id"] == fid and found[0]["minimal"]["case_id"] == small.case_id
    corpus = json.loads(saved.read_text())
    assert [e["case"] for e in corpus] == [small.to_dict()]  # the minimal case, not the big one
    assert corpus[0]["expect"] == {"vulkan": "RUNTIME_ERROR"} and fid in corpus[0]["note"]
    assert small.case_id in (out / "report.html").read_text()


@pytest.mark.slow
def test_baseline_makes_known_failures_xfail_and_fails_only_on_new_ones(tmp_path):
    import subprocess
    import sys

    def harness(*args):
        return subprocess.run([sys.executable, "-m", "harness", *map(str, args)],
                              capture_output=True, text=True, timeout=900)

    def case_file(name, *cases):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps([c.to_dict() for c in cases]))
        return path

    seed = dict(dim=2, in_channels=3, out_channels=4, kernel_size=3, input_shape=(1, 3, 8, 8))
    valid, listed = ConvCase(**seed, padding="valid"), ConvCase(**seed, padding=(1,))
    batch2 = ConvCase(**{**seed, "input_shape": (2, 3, 8, 8)}, padding=0)
    common = ["--max-examples", 0, "--backends", "vulkan", "--vulkan-runtime", "none",
              "--no-progress", "--no-report", "--cache", tmp_path / "cache"]
    first = harness("run", "--out", tmp_path / "a", "--cases", case_file("a", valid), *common)
    assert first.returncode == 0, first.stderr
    made = harness("expect", tmp_path / "a", "--out", tmp_path / "expected.json")
    assert made.returncode == 0 and "1 known findings" in made.stdout
    # the same finding on another spelling: known, exit 0, xfail in junit.xml
    again = harness("run", "--out", tmp_path / "b", "--cases", case_file("b", valid, listed),
                    "--baseline", tmp_path / "expected.json", *common)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 known failure(s), 0 new or regressed" in again.stdout
    skipped = ET.parse(tmp_path / "b" / "junit.xml").getroot().iter("skipped")
    assert sorted(s.get("type") for s in skipped) == ["xfail", "xfail"]
    started = {d: json.loads((tmp_path / d / "run.json").read_text())["started"] for d in "ab"}
    (known,) = json.loads((tmp_path / "b" / "findings.json").read_text())["findings"]
    assert (known["first_seen"], known["last_seen"]) == (started["a"], started["b"])
    # a different problem (batch 2) is new: exit 1, named
    new = harness("run", "--out", tmp_path / "c", "--cases", case_file("c", valid, batch2),
                  "--baseline", tmp_path / "expected.json", *common)
    assert new.returncode == 1 and "1 known failure(s), 1 new or regressed" in new.stdout
    assert ET.parse(tmp_path / "c" / "junit.xml").getroot().get("failures") == "1"
    # a run folder works as the baseline too; a broken file is one line, exit 2, nothing written
    from harness.results import baseline

    from_dir = baseline.load(tmp_path / "a")
    assert from_dir.finding_ids == baseline.load(tmp_path / "expected.json").finding_ids
    (tmp_path / "bad.json").write_text('{"findings": ["F-1"]}')
    bad = harness("run", "--out", tmp_path / "e", "--cases", case_file("e", valid),
                  "--baseline", tmp_path / "bad.json", *common)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "bad.json" in bad.stderr
    assert not (tmp_path / "e").exists()


def test_report_says_when_a_finding_did_not_shrink(tmp_path):
    from harness.results import report

    df = matrix.frame([r.to_row() for r in _cells()])
    matrix.write(df, tmp_path)
    fid = findings.finding_id("vulkan", "RUNTIME_ERROR", PW)
    (tmp_path / "shrunk.json").write_text(json.dumps(
        {fid: {"note": "no failing neighbour found within the budget", "seconds": 5.0, "tries": 3}}))
    html = report.write(tmp_path).read_text()
    assert "no failing neighbour found within the budget (5.0 s, 3 tries)" in html
    assert findings.find(df, tmp_path)[1].minimal["tries"] == 3


def _mismatch(case: ConvCase, wrong) -> CellResult:
    """A MISMATCH cell whose verdict and error pattern are compare's own, for an output wrong
    at ``wrong`` (an index into it)."""
    import torch

    from harness.stages.compare import compare

    n, c = case.input_shape[0], case.out_channels
    ref = torch.randn(n, c, *case.input_shape[2:], generator=torch.Generator().manual_seed(0))
    out = ref.clone()
    out[wrong] += 1.0
    v = compare(out, ref, groups=case.groups)
    return CellResult(case=case, backend="vulkan", status="MISMATCH", message=v.message,
                      error_pattern=v.metrics["error_pattern"], max_abs_error=1.0)


def test_where_the_output_is_wrong_splits_mismatch_findings_and_other_sizes_stay_one(tmp_path):
    def dw(k, hw, c=4):
        return ConvCase(dim=2, in_channels=c, out_channels=c, groups=c, kernel_size=k,
                        padding=k // 2, input_shape=(1, c, hw, hw))

    def grouped(i, o, hw):
        return ConvCase(dim=2, in_channels=i, out_channels=o, groups=2, kernel_size=3, padding=1,
                        input_shape=(1, i, hw, hw))

    cells = [_mismatch(dw(7, 8), (Ellipsis, slice(-3, None))),  # the depthwise right edge ...
             _mismatch(dw(9, 12, 8), (Ellipsis, slice(-4, None))),  # ... wider, on more channels
             _mismatch(grouped(8, 4, 8), (slice(None), slice(2, 4))),  # channels of group 1
             _mismatch(grouped(4, 8, 10), (slice(None), slice(4, 8))),
             _mismatch(dw(5, 6), (Ellipsis, slice(-1, None)))]  # one column: "1 col"
    assert cells[0].message.split("/")[1] != cells[1].message.split("/")[1]  # other sizes
    df = matrix.frame([r.to_row() for r in cells])
    assert list(df["error_pattern"])[:3] == [
        "right edge 3 cols · all channels · all batches",
        "right edge 4 cols · all channels · all batches",
        "channels of group >= 1 · everything spatial · all batches"]
    assert cells[4].error_pattern == "right edge 1 col · all channels · all batches"
    found = findings.find(df)
    assert len(found) == 2 and sorted(f.count for f in found) == [2, 3]
    by_where = {f.error_pattern.split(" · ")[0]: f for f in found}
    assert set(by_where) == {"right edge 3 cols", "channels of group >= 1"}
    assert by_where["right edge 3 cols"].case_ids == sorted(c.case_id for c in cells[:2]
                                                            + cells[4:])
    assert by_where["right edge 3 cols"].signature.endswith(
        " @ right edge N cols · all channels · all batches")
    # the id of each cell is its finding's, however the cell is read back
    matrix.write(df, tmp_path)
    back = matrix.read(tmp_path)
    ids = {findings.cell_finding_id(r) for r in back.itertuples()}
    assert ids == {f.id for f in found}
    assert {findings.cell_finding_id(r) for r in back.to_dict(orient="records")} == ids
    # a matrix from before the column: it loads, and its MISMATCH cells are one finding again,
    # with the id such a matrix always had
    old = back.drop(columns=["error_pattern"])
    (legacy,) = findings.find(old)
    assert legacy.count == 5 and legacy.error_pattern == ""
    assert legacy.id == findings.finding_id("vulkan", "MISMATCH", cells[0].message)
    # a baseline written then still knows these cells (by the message-only id)
    from harness.results import baseline

    verdict = baseline.classify(df, baseline.Baseline("old", {legacy.id}))
    assert all(v.startswith("known: ") for v in verdict)


def test_a_try_lands_in_a_finding_only_at_its_culprit():
    """Two bugs can share a key (the runtime says the same words); a shrink or diagnosis try
    lands in the finding only at the same culprit component, where both name one."""
    from harness.results.findings import Finding, lands_in

    f = Finding("F-678cb295", "xnnpack", "RUNTIME_ERROR", "sig", 1, ["xnnpack"], ["c"], {},
                component="delegate:xnnpack:XNNConvTranspose2d", aliases=["F-678cb295"])
    assert lands_in("F-678cb295", f, "delegate:xnnpack:XNNConvTranspose2d")
    assert not lands_in("F-678cb295", f, "delegate:xnnpack:XNNConv2d")
    assert lands_in("F-678cb295", f)  # the try's culprit unknown: the key decides
    assert not lands_in("F-00000000", f, "delegate:xnnpack:XNNConvTranspose2d")
    assert not lands_in("", f)
