"""The float tolerance is an error bound from the computation (issue #48, stages/compare.py,
docs/concepts.md "Tolerance policy"): a float64 reference and, per output element, SAFETY x (the
sum's rounding error, min(gamma_K, gamma~_K)(u) |W|*|X|, plus the roundings to the dtype).

What is asserted is the harness's promise: a result that the arithmetic allows (the float64
answer rounded once, PyTorch's float32 kernel on the case, a float32 sum in any order) is inside the
bound, a result further off than the bound is outside it, the verdict and the fingerprint use
the same per-element rule, and the row says how far inside or outside (``bound_ratio``).
Which status a delegate earns on a long reduction is its corpus entry
(cases/nightly/long_reductions.json), not a test."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.generation.strategies import conv_cases
from harness.spec import ConvCase
from harness.stages import compare as cmp
from harness.stages.build import (build_module, error_bound, exact_reference, make_inputs,
                                  upcast_reference)
from harness.stages.compare import ErrorBound, compare, gamma, gamma_tilde, tolerance_mask
from honest import assert_executed

U32 = 2.0 ** -24
U16 = 2.0 ** -11


def _bound(exact, magnitude, terms, dtype="float32", roundings=0) -> ErrorBound:
    return ErrorBound(exact=torch.as_tensor(exact, dtype=torch.float64),
                      magnitude=torch.as_tensor(magnitude, dtype=torch.float64), terms=terms,
                      dtype=dtype, roundings=roundings)


def test_the_bound_is_the_written_formula():
    """Higham's gamma_K and the probabilistic gamma~_K, the smaller taken; the unit roundoffs
    of float32 and float16 (the accumulation runs in the program's dtype); the bound per
    element, floored at what flushing subnormals to zero costs (K + 1 smallest normals)."""
    assert gamma(10, U32) == pytest.approx(10 * U32 / (1 - 10 * U32))
    assert gamma_tilde(9216, U32) == pytest.approx(cmp.LAMBDA * 96 * U32, rel=1e-3)
    assert cmp.unit_roundoff(torch.float32) == U32 and cmp.unit_roundoff(torch.float16) == U16
    small, large = _bound([0.0], [1.0], 27), _bound([0.0], [1.0], 65537)
    assert small.accumulation == gamma(27, U32)  # below K ~ LAMBDA^2 Higham's is the smaller
    assert large.accumulation == gamma_tilde(65537, U32)
    # fp16: the sum may run in fp16 (XNNPACK's does): its unit roundoff for the accumulation
    b = _bound([3.0, -2.0, 0.0], [10.0, 4.0, 0.0], 300, dtype="float16", roundings=1)
    assert b.accumulation == gamma_tilde(300, U16)
    expected = cmp.SAFETY * ((gamma_tilde(300, U16) + U16) * torch.tensor([10.0, 4.0, 0.0])
                             + U16 * torch.tensor([3.0, 2.0, 0.0]))
    expected[2] = 301 * torch.finfo(torch.float16).tiny  # no terms: the subnormal floor
    assert torch.allclose(b.allowed(), expected.double())


def test_a_perturbation_inside_passes_and_one_outside_is_its_ratio():
    """Hand-built sums: half the bound on one element passes (ratio 0.5); three times the bound
    is a MISMATCH whose ratio is 3 and whose message says "3x the bound"; the other elements
    are exact, so the mask names that element alone."""
    g = torch.Generator().manual_seed(0)
    w, x = torch.rand(8, 512, generator=g) * 2 - 1, torch.randn(512, generator=g)
    exact = (w.double() * x.double()).sum(1).reshape(1, 8, 1)
    bound = _bound(exact, (w.double().abs() * x.double().abs()).sum(1).reshape(1, 8, 1), 512)
    allowed = bound.allowed()
    ref = exact.float()
    for factor, ok in ((0.5, True), (3.0, False)):
        out = exact.clone()
        out[0, 5, 0] += factor * allowed[0, 5, 0]
        out = out.float()
        v = compare(out, ref, bound=bound)
        d = (out.double() - exact).abs() / allowed
        assert v.ok is ok and v.metrics["bound_ratio"] == pytest.approx(float(d.max()))
        assert v.metrics["bound_ratio"] == pytest.approx(factor, rel=1e-3)
        assert v.metrics["tolerance_bound"] == pytest.approx(float(allowed[0, 5, 0]))
    assert "1/8 elements outside the error bound (K=512), worst 3x the bound" in v.message
    assert tolerance_mask(out, ref, bound=bound).nonzero().tolist() == [[0, 5, 0]]


def test_the_old_constant_rule_cried_wolf_where_the_bound_does_not():
    """A near-zero output of a 9217-term sum: 1e-3 off is what float32 summation order gives
    there (docs/releases-and-bisection.md, caeb005e08), past 1e-4 + 1e-4 |ref|, far inside the
    bound of its terms' magnitude; a wrong value of 1.0 on an output of magnitude 3.8e3 is
    outside both."""
    exact = torch.tensor([[[0.02], [150.0]]], dtype=torch.float64)
    bound = _bound(exact, torch.full_like(exact, 3.8e3), 9217)
    drift = (exact + torch.tensor([[[1e-3], [0.0]]], dtype=torch.float64)).float()
    assert not compare(drift, exact.float()).ok  # the constant rule, without a bound
    assert compare(drift, exact.float(), bound=bound).metrics["bound_ratio"] < 0.01
    wrong = (exact + torch.tensor([[[0.0], [1.0]]], dtype=torch.float64)).float()
    assert not compare(wrong, exact.float(), bound=bound).ok


_values = st.floats(-10, 10, allow_nan=False, width=32)  # fp16 sums of 300 stay finite


@given(st.lists(st.tuples(_values, _values), min_size=1, max_size=300),
       st.sampled_from(["float32", "float16", "bfloat16"]))
def test_the_float64_answer_rounded_once_is_inside_and_three_bounds_off_is_not(pairs, dtype):
    """Any products (float32 values, exact in float64), any dtype: the float64 sum rounded to
    the dtype once is inside its bound; the same moved by three bounds is outside it."""
    torch_dtype = getattr(torch, dtype)
    w = torch.tensor([p[0] for p in pairs], dtype=torch.float64).to(torch_dtype).double()
    x = torch.tensor([p[1] for p in pairs], dtype=torch.float64).to(torch_dtype).double()
    exact = (w * x).sum().reshape(1, 1, 1)
    bound = _bound(exact, (w.abs() * x.abs()).sum().reshape(1, 1, 1), len(pairs), dtype)
    ref = exact.to(torch_dtype)
    assert compare(ref, ref, bound=bound).ok
    off = exact + 3 * bound.allowed()
    assert torch.isfinite(off.to(torch_dtype)).all()
    verdict = compare(off.to(torch_dtype), ref, bound=bound)
    assert not verdict.ok and verdict.metrics["bound_ratio"] > 1


@given(st.lists(st.tuples(_values, _values), min_size=1, max_size=63), st.randoms())
def test_a_float32_sum_in_any_order_is_inside(pairs, rnd):
    """Below K = 64 the bound is Higham's deterministic gamma_K: a float32 dot product summed
    one term at a time, in any order (rounding every product and every partial sum), is
    inside it, whatever the values."""
    order = list(range(len(pairs)))
    rnd.shuffle(order)
    acc = np.float32(0)
    for i in order:
        acc = np.float32(acc + np.float32(np.float32(pairs[i][0]) * np.float32(pairs[i][1])))
    w = torch.tensor([p[0] for p in pairs], dtype=torch.float64)
    x = torch.tensor([p[1] for p in pairs], dtype=torch.float64)
    bound = _bound((w * x).sum().reshape(1, 1, 1), (w.abs() * x.abs()).sum().reshape(1, 1, 1),
                   len(pairs))
    verdict = compare(torch.tensor(float(acc)).reshape(1, 1, 1), bound.exact.float(), bound=bound)
    assert verdict.ok, verdict.metrics


@given(conv_cases(quant=st.just(None)))
def test_a_float32_computation_of_every_generated_case_is_inside_its_bound(case):
    """The bound of any generated float case (any rank, transposed, groups, padding mode,
    context: prologue pad, batchnorm, residual add, clamps, weights as inputs, channels-last)
    is built from the case's own module and inputs, and a correct computation of it, PyTorch's
    float32 kernel on the same operands rounded once to the dtype (float32 accumulation), is
    inside it. (Not eager's own fp16/bf16 kernel: a bf16 Conv3d on a 1x1x1x2x4 input returned
    3.9e33 here once, eager's bug, recorded as eager_error_steps, never judged.)"""
    module, inputs = build_module(case), make_inputs(case)
    correct = upcast_reference(module, inputs, getattr(torch, case.dtype))
    bound = error_bound(case, module, inputs)
    assert bound.exact.dtype == bound.magnitude.dtype == torch.float64
    assert bound.exact.shape == bound.magnitude.shape == correct.shape
    assert bool((bound.magnitude >= bound.exact.abs() * (1 - 1e-12)).all())
    per_group = case.in_channels // case.groups * math.prod(
        case.kernel_size if isinstance(case.kernel_size, tuple) else (case.kernel_size,) * case.dim)
    assert bound.terms >= per_group
    verdict = compare(correct, correct, bound=bound)
    assert verdict.ok, (case, verdict.metrics)


def test_magnitude_is_the_conv_of_absolute_values_through_the_epilogue():
    """|W| conv |X| + |b| with the case's own padding (a prologue pad's constant as |value|),
    then batchnorm (y - mean) a + b as |a| (M + |mean|) + |b| and a residual add as M + |r|;
    K counts the bias and both."""
    case = ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3, input_shape=(1, 3, 6, 6),
                    prologue=("pad", (1, 1, 1, 1), -0.5), epilogue=("batchnorm", "relu", "add"))
    module, inputs = build_module(case), make_inputs(case)
    bound = error_bound(case, module, inputs)
    conv, bn = module.conv, module.bn0
    x = torch.nn.functional.pad(inputs[0].double(), [1, 1, 1, 1], value=0.5).abs()
    m = torch.nn.functional.conv2d(x, conv.weight.double().abs(), conv.bias.double().abs())
    a = (bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)).abs().view(1, -1, 1, 1)
    m = a * (m + bn.running_mean.double().abs().view(1, -1, 1, 1)) \
        + bn.bias.double().abs().view(1, -1, 1, 1) + inputs[1].double().abs()
    assert torch.allclose(bound.magnitude, m)
    assert bound.terms == 3 * 9 + 1 + 2 and bound.roundings == 6 + 1
    assert torch.allclose(bound.exact, exact_reference(module, inputs))


def test_fingerprint_and_verdict_use_the_same_rule():
    """A MISMATCH's error pattern draws exactly the elements outside the bound: one wrong
    channel of a 2-D output is "channel 1", not the elements the old constant rule would add."""
    g = torch.Generator().manual_seed(1)
    exact = torch.randn(1, 4, 6, 6, generator=g, dtype=torch.float64) * 100
    bound = _bound(exact, exact.abs() * 40, 9217)
    out = exact.clone()
    out += 1e-3  # past the constant rule's atol on every small element, inside the bound
    out[:, 1] += 5 * bound.allowed()[:, 1]
    verdict = compare(out.float(), exact.float(), bound=bound, groups=1)
    assert not verdict.ok
    assert tolerance_mask(out.float(), exact.float(), bound=bound).sum() == 36
    assert "channel 1" in verdict.metrics["error_pattern"], verdict.metrics["error_pattern"]


def test_the_report_shows_how_far_outside_the_bound():
    """The cells table shows a float MISMATCH's max|d| with its ratio to the bound; a PASS, an
    int8 cell (no ratio) and a cell with no values keep the bare number."""
    from harness.results.report import max_abs_text

    assert max_abs_text("MISMATCH", {"max_abs_error": 0.0123, "bound_ratio": 23.01}) == \
        "0.0123 (23x the bound)"
    assert max_abs_text("PASS", {"max_abs_error": 8.7e-4, "bound_ratio": 0.0026}) == "0.00087"
    assert max_abs_text("MISMATCH", {"max_abs_error": 0.5}) == "0.5"
    assert max_abs_text("RUNTIME_ERROR", {}) == ""


def test_int8_stays_one_output_step():
    """A quantized cell is judged in output steps; a bound handed with it is not used."""
    ref = torch.linspace(-1, 1, 16).reshape(1, 1, 16)
    bound = _bound(ref.double(), torch.ones_like(ref) * 1e6, 100)
    assert not compare(ref + 0.2, ref, out_scale=0.1, bound=bound).ok
    assert compare(ref + 0.05, ref, out_scale=0.1, bound=bound).metrics.get("bound_ratio") is None


def test_a_cached_references_keeps_its_bound(tmp_path):
    """The bound travels with the lane's references through the cache (torch.load with
    weights only)."""
    import io

    case = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=3, input_shape=(1, 2, 8))
    module, inputs = build_module(case), make_inputs(case)
    buf = io.BytesIO()
    torch.save({"bound": error_bound(case, module, inputs)}, buf)
    back = torch.load(io.BytesIO(buf.getvalue()))["bound"]
    assert isinstance(back, ErrorBound) and back.terms == 7
    assert torch.equal(back.exact, exact_reference(module, inputs))


LONG = ConvCase(dim=2, in_channels=1024, out_channels=8, kernel_size=3, padding=1,
                input_shape=(1, 1024, 28, 28))


@pytest.mark.slow
def test_a_long_reduction_on_xnnpack_is_judged_by_its_bound():
    """Conv2d(1024, 8, 3): 9217-term sums lowered to XNNPACK and executed; the row carries
    the bound and the ratio, and its status is PASS exactly when the ratio is <= 1 (its
    status on 1.5.1: cases/nightly/long_reductions.json)."""
    from harness.stages.cell import run_cell

    row = run_cell(LONG, "xnnpack", [])
    status = assert_executed(row)
    assert row.tolerance_bound is not None and row.tolerance_bound > 0
    assert (status == "PASS") == (row.bound_ratio <= 1)
    assert status != "MISMATCH" or "x the bound" in row.message
    fp16 = run_cell(dataclasses.replace(LONG, dtype="float16"), "xnnpack", [])
    assert (assert_executed(fp16) == "PASS") == (fp16.bound_ratio <= 1)
