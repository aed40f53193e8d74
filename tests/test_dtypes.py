"""The widened space: modules for the later fields, and the fp16/bf16 reference and tolerance."""

import copy

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.stages.build import build_module, make_inputs, upcast_reference
from harness.stages.compare import LOW_PRECISION_STEPS, compare
from harness.stages.cell import run_cell
from harness.lane import Lane
from harness.stages.prepare import prepare_case
from harness.spec import ConvCase
from harness.generation.strategies import conv_cases
from honest import assert_executed

T3D = ConvCase(dim=3, transposed=True, in_channels=4, out_channels=2, kernel_size=2, stride=2,
               dilation=(2, 1, 1), output_padding=(1, 1, 0), groups=2, input_shape=(2, 4, 2, 3, 2),
               dtype="bfloat16")
REFLECT = ConvCase(dim=2, in_channels=2, out_channels=3, kernel_size=3, padding=2,
                   padding_mode="reflect", input_shape=(1, 2, 3, 4), dtype="float16")


def test_module_is_what_the_case_spells():
    m = build_module(T3D)
    assert type(m) is torch.nn.ConvTranspose3d
    assert (m.output_padding, m.dilation, m.groups) == ((1, 1, 0), (2, 1, 1), 2)
    assert m.weight.dtype == torch.bfloat16 and make_inputs(T3D)[0].dtype == torch.bfloat16
    r = build_module(REFLECT)
    assert (type(r), r.padding_mode, r.weight.dtype) == (torch.nn.Conv2d, "reflect", torch.float16)


@given(conv_cases(quant=st.just(None)))
def test_reference_is_float32_math_cast_once(case):
    """The reference is the case's own (already rounded) weights and inputs computed in float32
    and cast to the dtype once; eager's own kernel of that dtype is measured against it in
    epsilon steps (recorded, not judged: how far PyTorch's kernel is is not the harness's to
    bound)."""
    module, inputs = build_module(case), make_inputs(case)
    dtype = getattr(torch, case.dtype)
    ref = upcast_reference(module, inputs, dtype)
    with torch.no_grad():
        by_hand = copy.deepcopy(module).float()(*(x.float() for x in inputs)).to(dtype)
        eager = module(*inputs)
    assert ref.dtype == dtype and torch.equal(ref, by_hand)
    verdict = compare(eager, ref, eager_ref=eager)
    if dtype != torch.float32 and ref.numel() and float(ref.abs().max()) > 0:
        steps = float((eager.double() - ref.double()).abs().max()) / (
            torch.finfo(dtype).eps * float(ref.float().abs().max()))
        assert verdict.metrics["eager_error_steps"] == pytest.approx(steps)
        assert verdict.ok == (verdict.metrics["error_steps"] <= LOW_PRECISION_STEPS[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tolerance_is_steps_of_epsilon_at_the_output_magnitude(dtype):
    ref = (torch.linspace(-8, 8, 64)).to(dtype)
    step = torch.finfo(dtype).eps * 8.0  # one epsilon at the output magnitude (max|ref| = 8)
    allowed = LOW_PRECISION_STEPS[dtype]
    inside = (ref.double() + (allowed - 0.5) * step).to(dtype)
    outside = (ref.double() + (allowed + 1.5) * step).to(dtype)
    ok, bad = compare(inside, ref, eager_ref=ref), compare(outside, ref)
    assert ok.ok and ok.metrics["eager_error_steps"] == 0.0
    assert ok.metrics["tolerance"] == pytest.approx(allowed * step)
    assert not bad.ok and "eps at the output magnitude" in bad.message
    assert bad.metrics["error_steps"] > allowed
    assert not compare(inside.float(), ref).ok  # a delegate that returns float32 is a MISMATCH


def test_prepare_keeps_both_references():
    refs = prepare_case(REFLECT, [Lane("xnnpack")])[Lane("xnnpack")].refs
    assert refs.ref.dtype == refs.eager_ref.dtype == torch.float16
    assert torch.equal(refs.ref, upcast_reference(build_module(REFLECT), refs.inputs,
                                                     torch.float16))


def test_fp16_cell_on_xnnpack_is_judged_in_steps():
    case = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, padding=1,
                    input_shape=(2, 4, 5, 5), dtype="float16")
    row = run_cell(case, "xnnpack", [])  # its status on 1.5.1: cases/from_tests.json
    status = assert_executed(row)
    if status in ("PASS", "MISMATCH"):  # measured in fp16 epsilon steps, eager's own beside it
        assert (row.error_steps <= LOW_PRECISION_STEPS[torch.float16]) == (status == "PASS")
        assert row.eager_error_steps is not None and row.tolerance is not None


def test_report_groups_and_finding_features_show_the_later_dimensions():
    from harness.results import findings
    from harness.results import report
    from harness.record import CellResult

    old = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding=1,
                   input_shape=(1, 3, 16, 16))
    new = ConvCase(dim=3, in_channels=2, out_channels=2, kernel_size=3, padding=1,
                   padding_mode="circular", input_shape=(2, 2, 3, 3, 3), dtype="bfloat16")
    rows = [CellResult(case=c, backend="vulkan").to_row() for c in (old, new, T3D)]
    groups = [report.feature_group(r) for r in rows]
    assert groups[0] == "2d · int · odd k · dil=1 · stride=1 · fp32"  # as before the new fields
    assert groups[1] == "3d · int · odd k · dil=1 · stride=1 · bf16 · circular · batch>1"
    assert groups[2] == "T3d · int · even k · dil>1 · stride>1 · bf16 · out_pad>0 · batch>1"
    assert rows[1]["batch"] == 2 and rows[1]["padding_mode"] == "circular"
    feats = findings.features(CellResult(case=new, backend="vulkan"))
    assert (feats["dim"], feats["padding_mode"], feats["dtype"], feats["batch > 1"]) == \
        (3, "circular", "bfloat16", True)
