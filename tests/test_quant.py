"""Quantized cells: the same-math reference, the tolerance rule, and no silent float."""

import pytest
import torch
from hypothesis import example, given, settings

from conftest import lowering_examples
from harness.stages.backends import Backend, QuantUnsupported
from harness.stages.build import build_module, make_inputs
from harness.stages.compare import compare
from harness.results.matrix import frame
from harness.stages.cell import run_cell
from harness.stages.quantize import quantize
from harness.spec import ConvCase
from harness.status import Status
from harness.generation.strategies import quant_cases
from honest import assert_executed, assert_honest
from witness import lowering_raises

Q2D = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, padding=1,
               input_shape=(1, 4, 12, 12), quant="int8_per_channel")


@pytest.mark.parametrize("scheme", ["int8_per_tensor", "int8_per_channel"])
def test_quantized_xnnpack_conv2d_is_judged_in_output_steps(scheme):
    """An int8 cell is judged against the quantized eager model in output steps and never runs
    in float; its status on this release is the corpus's (cases/from_tests.json)."""
    row = run_cell(ConvCase(**{**Q2D.to_dict(), "quant": scheme}), "xnnpack", [])
    status = assert_executed(row)
    if status in ("PASS", "MISMATCH"):
        assert (row.error_steps <= 1 + 1e-5) == (status == "PASS"), row
        # the reference is real int8 error vs the float model: measured, finite, not zero
        assert row.sqnr_db is not None and 0 < row.sqnr_db < float("inf"), row.sqnr_db
    assert status != "PASS" or any("quantize_per" in op for op in row.delegated_ops), row


def test_tolerance_rule_rejects_a_perturbed_output():
    ref = torch.linspace(-1, 1, 64).reshape(1, 4, 16)
    scale = 0.01
    assert compare(ref.clone(), ref, out_scale=scale).ok
    assert compare(ref + 0.9 * scale, ref, out_scale=scale).ok  # within one output step
    perturbed = ref.clone()
    perturbed[0, 2, 5] += 2 * scale  # two steps off in a single element
    verdict = compare(perturbed, ref, out_scale=scale)
    assert not verdict.ok and verdict.metrics["error_steps"] == pytest.approx(2, rel=1e-3)
    assert "2.00 output steps" in verdict.message
    assert not compare(ref[..., :-1], ref, out_scale=scale).ok  # shape mismatch


def test_fp32_tolerance_rule():
    ref = torch.randn(1, 3, 8)
    assert compare(ref + 1e-6, ref).ok
    assert not compare(ref + 1e-2, ref).ok


def test_vulkan_quantized_conv2d_cells_are_honest_and_the_fix_normalises_q8ta(vulkan_runtime):
    """The int8 Vulkan conv on both spellings, stock and fixed: each cell honest, a quantized
    PASS never in float, the contract check reads et_vk.q8ta_conv2d's lists too, and the fix's
    own transformation leaves none short. Statuses: cases/from_tests.json."""
    valid = ConvCase(**{**Q2D.to_dict(), "padding": "valid"})
    rows = [run_cell(Q2D, "vulkan", []), run_cell(valid, "vulkan", []),
            run_cell(valid, "vulkan", ["vulkan-conv-padding"])]
    for row in rows:
        status = assert_executed(row)
        assert status != "PASS" or any("quantize_per" in op for op in row.delegated_ops), row
        assert (row.predicted == "CONTRACT_VIOLATION") == bool(row.contract_violations), row
        if status in ("PASS", "MISMATCH"):
            assert (row.error_steps <= 1 + 1e-5) == (status == "PASS"), row
    stock, fixed = rows[1], rows[2]
    assert fixed.fixes == "vulkan-conv-padding" and stock.fixes == ""
    assert not [v for v in fixed.contract_violations if v.startswith("[ivec2]")], fixed
    q8ta = [v for v in stock.contract_violations if "et_vk.q8ta_conv2d" in v]
    assert all("IntList" in v for v in q8ta), q8ta  # the check names the list it read


def test_a_lower_error_is_what_the_lowering_raised():
    """Whatever the Vulkan lowering does with a per-tensor int8 conv, the row is LOWER_ERROR
    exactly when ExecuTorch's own lowering (witness.py, without the harness's lowering code)
    raises, and then carries that error. (On 1.5.1 it raises in quantized_convolution.py:
    cases/from_tests.json.)"""
    case = ConvCase(**{**Q2D.to_dict(), "quant": "int8_per_tensor"})
    row, raised = run_cell(case, "vulkan", []), lowering_raises(case, "vulkan")
    assert_honest(row, runtime=False)
    assert (row.status == "LOWER_ERROR") == (raised is not None), (row.status, raised)
    if raised is not None:
        assert row.message.startswith(type(raised).__name__), (row.message, raised)


def test_a_quantizer_that_annotates_nothing_is_never_silently_float():
    from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
        VulkanQuantizer, get_symmetric_quantization_config)

    class VulkanQuantizerOnly(Backend):  # ExecuTorch's own VulkanQuantizer: linear only on 1.5.1
        name = "vulkan-quantizer"

        def quantizer(self, scheme):
            return VulkanQuantizer().set_global(get_symmetric_quantization_config())

    module, inputs = build_module(Q2D), make_inputs(Q2D)
    with pytest.raises(QuantUnsupported, match="VulkanQuantizer annotated no op.*linear.*float"):
        quantize(Q2D, module, inputs, VulkanQuantizerOnly())


def test_matrix_has_quant_and_sqnr_columns():
    df = frame([run_cell(Q2D, "xnnpack", []).to_row()])
    assert {"quant", "sqnr_db", "error_steps", "max_abs_error_vs_float"} <= set(df.columns)
    assert df.loc[0, "quant"] == "int8_per_channel" and df.loc[0, "sqnr_db"] > 0


@pytest.fixture(scope="module")
def cell_worker(tmp_path_factory):
    """A kept worker process for one cell at a time, as the harness runs cells (an abort in
    ExecuTorch, e.g. a portable kernel's, kills that call only and is the cell's CRASH)."""
    from harness.run import workers

    logs = str(tmp_path_factory.mktemp("cell-worker-logs"))
    with workers.one_worker(timeout=600, log_dir=logs) as call:
        yield call, logs  # the logs: what a dead worker printed (workers.crash_output)


@settings(max_examples=lowering_examples())
@given(quant_cases())
# int8 per channel with the weight an input: the portable quantize_per_channel kernel aborts
# the process (known issue portable-quantize-per-channel-float-scale); a clean clone's CI run of
# 2026-12-07 drew an aborting case while the cell ran in the test's own process, and lost its
# xdist worker with it
@example(ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, input_shape=(1, 4, 6, 6),
                  quant="int8_per_channel", weights="input"))
def test_generated_quant_cases_on_xnnpack_are_judged_in_output_steps(cell_worker, case):
    """Whatever XNNPACK does with an int8 case (its bugs are corpus entries), the row is
    consistent with the int8 policy: PASS iff within one output step of the quantized eager
    model, a MISMATCH says by how many steps, a failure says why, and a quantized cell never
    ran in float (its q/dq ops are inside the delegate, or it is not PASS). A native abort is
    the cell's CRASH, saying what killed the worker; the test session goes on."""
    from harness.lane import Lane
    from harness.run import runner

    call, _ = cell_worker
    task = runner.CellTask(case, Lane("xnnpack"))
    row, death = call(runner.execute_work, task)
    if row is None:
        assert death and ("signal" in death or "exit" in death), death
        return
    assert row.status in {s.value for s in Status} - {"NO_RUNTIME", "CONTRACT_VIOLATION", "CRASH"}
    if row.status != "PASS":
        assert row.message, row
    if row.status in ("PASS", "MISMATCH") and row.error_steps is not None:
        assert (row.error_steps <= 1 + 1e-5) == (row.status == "PASS"), row
        assert row.tolerance and row.sqnr_db is not None
    if row.status == "MISMATCH":
        assert "output steps" in row.message or "vs reference" in row.message or "NaN" in \
            row.message, row.message
    if row.status == "PASS":
        assert any("quantize_per" in op for op in row.delegated_ops), row.delegated_ops
