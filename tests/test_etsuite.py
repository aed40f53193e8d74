"""``nox -s etsuite`` (``python -m harness.run.etsuite``): ExecuTorch's own conv tests beside ours.

What the driver guarantees, on a small real slice of the suite in the installed wheel (one file,
one flow, two test functions: three configurations), with a native abort in one configuration:
every configuration gets a row with the suite's verdict and our status, every disagreement a
reason class, an unexplained one is listed in the summary, the abort costs that configuration
only, and the configurations become a case file with our expectations. Nothing here says a
delegate is right: the statuses are whatever the real suite and the real harness say.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results import etsuite as table

ROOT = Path(__file__).resolve().parents[1]


def _driver(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness.run.etsuite", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_slice_with_a_native_abort(tmp_path):
    out = tmp_path / "etsuite"
    cases_out = tmp_path / "etsuite_conv.json"
    proc = _driver("--out", str(out), "--files", "test_conv1d", "--flows", "xnnpack",
                   "--tests", "test_conv1d_basic", "test_conv1d_padding",
                   "--vulkan-runtime", "none", "--cases-out", str(cases_out),
                   env={"CONVCONF_ETSUITE_ABORT": "test_conv1d_padding:0"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "etsuite.json").read_text())
    rows = {(r["test"], r["subtest"]): r for r in data["rows"]}
    # every configuration of the slice has a row: basic[0], padding[0], padding[1]
    assert set(rows) == {("test_conv1d_basic", 0), ("test_conv1d_padding", 0),
                         ("test_conv1d_padding", 1)}
    for r in rows.values():
        assert r["flow"] == "xnnpack" and r["suite"], r
        assert r["case_id"] and r["ours_stock"] and r["ours_fixed"], r  # ours ran every one
        assert r["agree"] or r["reason"], r  # a disagreement always has a reason class
        if r["agree"]:
            assert (r["suite"] in table.SUITE_PASS) == (r["ours_stock"] == "PASS"), r
    # the abort: that subtest is the suite's "Process Crash", named by its signal; the rest of
    # its test function never ran (the suite stops a function at its first failure) ...
    crashed = rows[("test_conv1d_padding", 0)]
    assert crashed["suite"] == "PROCESS_CRASH" and "SIGABRT" in crashed["suite_error"], crashed
    after = rows[("test_conv1d_padding", 1)]
    assert after["suite"] == "NOT_RUN" and after["reason"] == table.R_NOT_RUN, after
    assert "PROCESS_CRASH" in after["note"], after
    # ... and it did not take the run down: the other test function got a real verdict
    assert rows[("test_conv1d_basic", 0)]["suite"] not in ("PROCESS_CRASH", "NOT_RUN")
    log = (out / "suite" / "test_conv1d.xnnpack.log").read_text()
    assert "attempt 1" in log  # run again without the crashed function
    # counts add up, and every unexplained disagreement is listed by name in the summary
    c = data["counts"]
    assert c["rows"] == 3 and c["agree"] + c["disagree"] == 3
    assert sum(c["by_reason"].values()) == c["disagree"]
    summary = (out / "etsuite.md").read_text()
    for r in rows.values():
        if not r["agree"] and r["reason"] == table.UNEXPLAINED:
            assert f"{r['test']}[{r['subtest']}] xnnpack" in summary
    assert summary.strip("`\n") in proc.stdout
    # the configurations as a case file with our expectations, one entry per distinct case,
    # spelled as corpus files spell cases (fields at their defaults left out)
    corpus = json.loads(cases_out.read_text())
    assert {e["case"]["input_shape"][0] for e in corpus} == {4}  # the suite's batch, as given
    assert not any("quant" in e["case"] or "transposed" in e["case"] for e in corpus)
    ids = {r["case_id"] for r in rows.values()}
    assert len(corpus) == len(ids)
    for entry in corpus:
        assert entry["source"].startswith("executorch backends/test/suite: test_conv1d::")
        assert set(entry["expect"]) == {"xnnpack"}, entry  # the stock lane: fix sets grow
        assert entry["suite"]["xnnpack"], entry  # what the suite said, beside ours


@pytest.mark.parametrize("args, says", [
    (["--flows", "nope"], "unknown flow or file: nope"),
    (["--files", "test_conv9d"], "unknown flow or file: test_conv9d"),
    (["--table-only"], "no suite.json"),
])
def test_bad_input_is_one_line(tmp_path, args, says):
    proc = _driver("--out", str(tmp_path / "x"), *args, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("convconf: error: ") and says in lines[0]
    assert not (tmp_path / "x").exists()


def test_reasons_on_typed_records():
    """The reason classes, on hand-made suite verdicts and cells of real ConvCases."""
    from harness.record import CellResult
    from harness.spec import ConvCase

    case3d = ConvCase.from_dict({"dim": 3, "in_channels": 3, "out_channels": 6, "kernel_size": 3,
                                 "input_shape": [4, 3, 8, 8, 8]})
    case2d = ConvCase.from_dict({"dim": 2, "in_channels": 3, "out_channels": 6, "kernel_size": 3,
                                 "input_shape": [4, 3, 16, 16]})
    c3 = [table.SuiteConfig("test_conv3d", "test_conv3d_x", i, case3d) for i in range(2)]
    c2 = table.SuiteConfig("test_conv2d", "test_conv2d_x", 0, case2d)
    lowered = {"aten::convolution": 1}
    verdicts = [
        table.SuiteVerdict("test_conv3d", "test_conv3d_x", 0, "xnnpack", "SKIPPED",
                           delegated_ops=lowered),
        table.SuiteVerdict("test_conv3d", "test_conv3d_x", 1, "xnnpack", "NOT_RUN"),
        table.SuiteVerdict("test_conv2d", "test_conv2d_x", 0, "xnnpack", "SUCCESS",
                           delegated_ops=lowered),
        table.SuiteVerdict("test_conv2d", "test_conv2d_x", 0, "vulkan_static_int8_per_channel",
                           "SUCCESS", delegated_ops=lowered),
    ]
    q = case2d.__class__.from_dict({**case2d.to_dict(), "quant": "int8_per_channel"})
    cells = [CellResult(case=case3d, backend="xnnpack", fixes="", status="PASS"),
             CellResult(case=case2d, backend="xnnpack", fixes="", status="MISMATCH",
                        max_abs_error=0.05, max_rel_error=0.5),
             CellResult(case=q, backend="vulkan", fixes="", status="LOWER_ERROR")]
    rows = table.side_by_side(c3 + [c2], verdicts, cells,
                              {"xnnpack": ("xnnpack", None),
                               "vulkan_static_int8_per_channel": ("vulkan", "int8_per_channel")})
    got = {(r.test, r.subtest, r.flow): r.reason for r in rows}
    assert got == {("test_conv3d_x", 0, "xnnpack"): table.R_3D,
                   ("test_conv3d_x", 1, "xnnpack"): table.R_3D,
                   ("test_conv2d_x", 0, "xnnpack"): table.R_TOLERANCE,
                   ("test_conv2d_x", 0, "vulkan_static_int8_per_channel"): table.R_NOT_QUANTIZED}
    assert table.counts(rows)["unexplained"] == 0
