"""Naming the culprit (issue 37): per-cell runtime logs at the fd level, a ``component`` on every
cell that is not PASS, findings keyed by it (one finding across lanes for shared code, one per
shader), and lowering set up as ExecuTorch's examples set it up.

The tests assert what the harness guarantees (the runtime's own words reach the cell, the
culprit is named, grouping follows the component), never that a delegate is bug-free: they use
configurations whose outcome on executorch 1.5.1 is documented upstream (#11704, the portable
Conv3d) or in cases/upstream/known_issues.json."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.lane import Lane
from harness.record import CellResult
from harness.results import findings, known_issues, matrix
from harness.spec import ConvCase
from harness.stages import culprit

CONV3D = ConvCase(dim=3, in_channels=2, out_channels=4, kernel_size=3, input_shape=(1, 2, 5, 5, 5))
# int8 per-channel Conv2d whose weight is a runtime input: XNNPACK leaves the weight's
# quantize_per_channel outside the delegate (cases/context.json)
RUNTIME_WEIGHT_Q8 = ConvCase(dim=2, in_channels=8, out_channels=16, kernel_size=3, padding=1,
                             input_shape=(1, 8, 12, 12), quant="int8_per_channel",
                             weights="input")


def test_the_fds_of_a_block_go_to_its_own_file_and_come_back():
    from harness.stages.execute import captured

    with captured(echo=False) as said:
        os.write(2, b"[kernel_ops_util.cpp:394] Check failed (x): native stderr\n")
        os.write(1, b"native stdout\n")
    assert "Check failed (x): native stderr" in said.text
    assert "native stdout" in said.text
    os.write(2, b"")  # fd 2 is usable again


def test_a_portable_conv3d_cell_names_its_kernel_and_check():
    """Float Conv3d: neither partitioner takes it; the portable aten::convolution.out rejects
    5-D input. The message carries the runtime's check and operator, not a bare error code."""
    from harness.stages.cell import run_cell

    row = run_cell(CONV3D, "xnnpack")
    if row.status != "RUNTIME_ERROR":  # its expected status lives in cases/culprit.json
        pytest.skip(f"the portable kernel no longer rejects 5-D input here ({row.status})")
    assert row.component == "portable:aten::convolution.out"
    assert "Check failed (in.dim() == 3 || in.dim() == 4)" in row.message
    assert "KernelCall failed at instruction" in row.message
    assert "in operator aten::convolution.out" in row.message
    assert "kernel_ops_util.cpp" in row.runtime_log
    assert "runtime_log" in (row.evidence or {})  # the whole text, for the run folder
    assert culprit.shared(row.component)
    # the same program on the Vulkan lane is the same code (a portable kernel): one finding
    # across lanes, listing each lane's cell, named by its upstream issue
    other = CellResult(case=CONV3D, backend="vulkan", status=row.status, message=row.message,
                       component=row.component, runtime_log=row.runtime_log)
    (f,) = findings.find([row, other])
    assert f.backend == "vulkan,xnnpack" and f.count == 2
    assert f.cells_by_lane == {"vulkan": [CONV3D.case_id], "xnnpack": [CONV3D.case_id]}
    assert f.component == "portable:aten::convolution.out"
    assert "Check failed" in f.runtime_line
    assert [k["id"] for k in f.known_issues][0] == "portable-conv3d-5d-input"
    assert "#11704" in f.known
    assert "portable convolution kernel takes 1-D and 2-D convs only" in f.known_issues[0]["title"]
    md = findings.markdown([f], 2)
    assert "`portable:aten::convolution.out`" in md and "vulkan: 1; xnnpack: 1" in md


def test_an_input_the_python_binding_refuses_is_one_finding_across_lanes():
    """A channels_last_3d input: ExecuTorch's Python binding (pybindings.cpp) deduces a dim order
    for contiguous and 4-D channels-last tensors only and refuses the input before any kernel or
    delegate runs. The culprit is the binding, shared by both lanes: one finding, and never a
    delegate's (its expected statuses: cases/culprit.json)."""
    from harness.stages.cell import run_cell

    case = ConvCase(dim=3, in_channels=2, out_channels=4, kernel_size=3,
                    input_shape=(1, 2, 5, 5, 5), memory_format="channels_last_3d")
    row = run_cell(case, "xnnpack")
    if "should be contiguous or channels-last" not in row.message:
        pytest.skip(f"the binding takes this input here ({row.status}: {row.message[:80]})")
    assert row.component == "runtime:pybindings"  # its status: cases/culprit.json
    assert culprit.shared(row.component)
    other = CellResult(case=case, backend="vulkan", status=row.status, message=row.message,
                       component=row.component)
    (f,) = findings.find([row, other])
    assert f.backend == "vulkan,xnnpack" and f.component == "runtime:pybindings"


def test_a_quantized_program_leaving_a_dequantize_outside_lowers():
    """int8 per-channel Conv3d on XNNPACK leaves a dequantize_per_channel outside the delegate:
    with ExecuTorch's quantized kernels imported (as its examples do) it lowers, where the
    harness used to say LOWER_ERROR 'Missing out variants' (its own setup)."""
    from harness.stages.cell import prepare
    from harness.stages.lower import register_runtime_ops

    assert register_runtime_ops() == ""
    case = ConvCase(dim=3, in_channels=2, out_channels=4, kernel_size=3,
                    input_shape=(1, 2, 5, 5, 5), quant="int8_per_channel")
    p = prepare(case, Lane("xnnpack"))
    assert p.status != "LOWER_ERROR", p.message
    assert "Missing out variants" not in p.message
    assert p.pte is not None
    assert any("dequantize_per_channel" in op for op in p.undelegated_ops)


def _mismatch(case, shader, pattern, backend="vulkan"):
    comp = f"delegate:vulkan:{shader}"
    return CellResult(case=case, backend=backend, status="MISMATCH",
                      message=culprit.with_culprit(
                          "12/256 elements outside atol=0.0001 rtol=0.0001, max|d|=3.1", comp),
                      error_pattern=pattern, component=comp, reached=[shader, "image_to_nchw"])


def test_mismatches_of_one_shader_are_one_finding_and_shaders_stay_apart(tmp_path):
    def dw(k, hw):
        return ConvCase(dim=2, in_channels=4, out_channels=4, groups=4, kernel_size=k,
                        padding=k // 2, input_shape=(1, 4, hw, hw))

    grouped = ConvCase(dim=2, in_channels=8, out_channels=4, groups=2, kernel_size=3, padding=1,
                       input_shape=(1, 8, 8, 8))
    tgrouped = ConvCase(dim=2, in_channels=8, out_channels=8, groups=2, kernel_size=3,
                        transposed=True, input_shape=(1, 8, 4, 4))
    cells = [  # the generic depthwise shader, two variants with different patterns: one bug
        _mismatch(dw(7, 8), "conv2d_dw_float", "right edge 3 cols · all channels · all batches"),
        _mismatch(dw(4, 1), "conv2d_dw_float", "everything"),
        _mismatch(dw(7, 8), "conv2d_dw_float", "right edge 3 cols · all channels · all batches",
                  backend="vulkan@h200"),  # the same bug on another device
        # the same symptom ("everything") from another shader: another bug
        _mismatch(tgrouped, "conv_transpose2d_float", "everything"),
        _mismatch(grouped, "conv2d_float", "channels of group >= 1 · everything spatial · all "
                                           "batches")]
    found = {f.component: f for f in findings.find(cells)}
    assert set(found) == {"delegate:vulkan:conv2d_dw_float", "delegate:vulkan:conv_transpose2d_float",
                          "delegate:vulkan:conv2d_float"}
    dw_finding = found["delegate:vulkan:conv2d_dw_float"]
    assert dw_finding.count == 3 and dw_finding.lanes == ["vulkan", "vulkan@h200"]
    # each known distinct bug keeps its own finding
    ids = {f.known_issues[0]["id"] for f in found.values() if f.known_issues}
    assert ids == {"vulkan-dw-generic-shader-right-edge", "vulkan-grouped-transposed-conv",
                   "vulkan-grouped-conv-channels-per-group-not-x4"}
    # the id is the cell's, however the cell is read back (the component travels in the row)
    matrix.write(matrix.frame([c.to_row() for c in cells]), tmp_path)
    back = matrix.read(tmp_path)
    assert {findings.cell_finding_id(r) for r in back.itertuples()} == \
        {f.id for f in found.values()}
    assert list(back["component"])[0] == "delegate:vulkan:conv2d_dw_float"


def test_a_lowering_pass_both_lanes_run_is_one_finding_and_distinct_bugs_stay_apart():
    """FuseBatchNormPass is XNNPACK's code, run by the Vulkan preprocess too: one finding
    across lanes. Two different Vulkan pass failures stay two."""
    case = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, input_shape=(1, 4, 6, 6))
    bn = ("Exception: An error occurred when running the 'FuseBatchNormPass' pass after the "
          "following passes: [] <- RuntimeError: The size of tensor a (4) must match the size "
          "of tensor b (8) at non-singleton dimension 0")
    fp = ("Exception: An error occurred when running the 'FusePatternsPass' pass after the "
          "following passes: [] <- ValueError: too many values to unpack (expected {})")
    cells = [CellResult(case=case, backend=b, status="LOWER_ERROR", message=bn, phase="lower")
             for b in ("xnnpack", "vulkan")]
    # two other cases (a run holds one cell per case and lane)
    other, third = (ConvCase(dim=2, in_channels=4, out_channels=n, kernel_size=3,
                             input_shape=(1, 4, 6, 6)) for n in (8, 12))
    cells += [CellResult(case=other, backend="vulkan", status="LOWER_ERROR", phase="lower",
                         message=fp.format(4)),
              CellResult(case=third, backend="vulkan", status="LOWER_ERROR", phase="lower",
                         message="Exception: An error occurred when running the "
                                 "'FusePatternsPass' pass after the following passes: [] <- "
                                 "RuntimeError: unsupported param type, placeholder.")]
    found = findings.find(cells)
    assert len(found) == 3
    shared = next(f for f in found if f.count == 2)
    assert shared.component == "lowering:FuseBatchNormPass"
    assert shared.backend == "vulkan,xnnpack"
    assert culprit.component(status="LOWER_ERROR", backend="vulkan", phase="quantize",
                             message="QuantUnsupported: ...") == "quantizer"
    assert culprit.component(status="LOWER_ERROR", backend="xnnpack", phase="lower",
                             message="SetupError: executorch.kernels.quantized did not ...") \
        == "harness"


def test_a_matrix_from_before_the_column_keeps_its_ids():
    """No culprit in the message, no component: the key (and id) a finding always had."""
    msg = ("Exception raised from make_ivec2 at executorch/backends/vulkan/runtime/utils/"
           "VecUtils.h:367: (ints.size() == 2) is false!")
    assert findings.finding_id("vulkan", "RUNTIME_ERROR", msg) == "F-4e38da80"  # nightly.json
    assert findings.finding_id("vulkan", "RUNTIME_ERROR",
                               "Failed to execute method forward, error: 0x12") == "F-162fe890"


@pytest.mark.slow
def test_an_aborting_cell_keeps_the_runtime_log_it_died_with(tmp_path):
    """A real run: the portable quantize_per_channel kernel aborts the worker (SIGABRT); the
    cell is CRASH with the kernel's assert in its message and runtime log (read by the parent
    from the cell's own log file), and the portable kernel as its component."""
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"case": RUNTIME_WEIGHT_Q8.to_dict()}]))
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "harness", "run", "--out", str(out), "--cases",
                    str(cases), "--backends", "xnnpack", "--max-examples", "0", "--no-progress",
                    "--no-report", "--no-cache", "-j", "1", "--vulkan-runtime", "none"],
                   check=True, capture_output=True, timeout=900)
    (row,) = json.loads((out / "matrix.json").read_text())
    if row["status"] != "CRASH":  # its expected status lives in cases/culprit.json
        pytest.skip(f"the portable quantize_per_channel no longer aborts here ({row['status']})")
    assert "SIGABRT" in row["message"]
    assert "op_quantize.cpp" in row["message"] and "assert failed" in row["message"]
    assert "quantize_per_channel_out" in row["runtime_log"]
    assert row["component"] == "portable:quantized_decomposed::quantize_per_channel.out"
    assert not list((out / "logs" / "cells").glob("*.log"))  # read and removed by the parent
    (f,) = json.loads((out / "findings.json").read_text())["findings"]
    assert f["component"] == row["component"] and "assert failed" in f["runtime_line"]
    assert known_issues.match("xnnpack", RUNTIME_WEIGHT_Q8, "CRASH", row["message"],
                              component=row["component"])[0].id == \
        "portable-quantize-per-channel-float-scale"
