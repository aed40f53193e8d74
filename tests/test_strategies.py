import pytest
from hypothesis import find, given, settings

from harness.stages.build import eager_check
from harness.generation.generate import generate
from harness.generation.strategies import conv_cases, mixed_cases, quant_cases


@given(mixed_cases())
def test_generated_cases_are_legal_in_eager(case):
    assert eager_check(case) is None


@given(quant_cases())
def test_quant_cases_are_quantized_and_not_transposed(case):
    assert case.quant in ("int8_per_tensor", "int8_per_channel")
    assert not case.transposed


@given(conv_cases())
def test_same_padding_only_with_stride_one(case):
    # an implication, checked on every drawn case ("same" is drawn at all:
    # test_coverage_of_the_dimensions_that_matter)
    assert case.padding != "same" or set(case.spatial("stride")) == {1}, case


def test_coverage_of_the_dimensions_that_matter():
    cases = generate(300, seed=1)
    assert {c.padding_spelling for c in cases} == {"int", "tuple", "list1", "valid", "same"}
    assert {c.kernel_parity for c in cases} == {"odd", "even"}
    assert {c.dim for c in cases} == {1, 2, 3}
    assert {c.quant for c in cases} == {None, "int8_per_tensor", "int8_per_channel"}
    assert any(c.groups > 1 and c.groups == c.in_channels for c in cases)  # depthwise
    assert {max(c.spatial("stride")) for c in cases} >= {1, 2, 3}
    assert {max(c.spatial("dilation")) for c in cases} >= {1, 2, 3}
    assert {c.bias for c in cases} == {True, False}
    assert any(c.transposed for c in cases)


def test_generation_is_deterministic():
    assert [c.case_id for c in generate(20, seed=7)] == [c.case_id for c in generate(20, seed=7)]
    assert [c.case_id for c in generate(20, seed=7)] != [c.case_id for c in generate(20, seed=8)]


def coverage_of_later_fields(cases) -> dict:
    transposed = [c for c in cases if c.transposed]
    return {
        "padding_mode": {c.padding_mode for c in cases},
        "dtype": {c.dtype for c in cases},
        "dim 3": any(c.dim == 3 for c in cases),
        "batch > 1": any(c.input_shape[0] > 1 for c in cases),
        "transposed, dilation > 1": any(max(c.spatial("dilation")) > 1 for c in transposed),
        "transposed, output_padding > 0": any(max(c.spatial("output_padding")) > 0
                                              for c in transposed),
        "transposed, groups > 1": any(c.groups > 1 for c in transposed),
    }


def test_a_run_sized_draw_reaches_every_later_value():
    """60 cases (the size of a CI/acceptance run): every new value of the widened space."""
    cases = generate(60, seed=1)
    assert len(cases) == 60
    assert coverage_of_later_fields(cases) == {
        "padding_mode": {"zeros", "reflect", "replicate", "circular"},
        "dtype": {"float32", "float16", "bfloat16"},
        "dim 3": True, "batch > 1": True, "transposed, dilation > 1": True,
        "transposed, output_padding > 0": True, "transposed, groups > 1": True,
    }


SHRUNK = [  # (what the failure needs, the simplest case Hypothesis shrinks to)
    (lambda c: c.dtype == "float16", "conv1d_i1o1_k1_s1_p0_d1_g1_b0_x1x1x1_f16"),
    (lambda c: c.padding_mode == "circular", "conv1d_i1o1_k1_s1_p0_mcircular_d1_g1_b0_x1x1x1_f32"),
    (lambda c: c.dim == 3, "conv3d_i1o1_k1_s1_p0_d1_g1_b0_x1x1x1x1x1_f32"),
    (lambda c: c.input_shape[0] > 1, "conv1d_i1o1_k1_s1_p0_d1_g1_b0_x2x1x1_f32"),
    (lambda c: c.transposed and c.groups > 1, "convT1d_i2o2_k1_s1_p0_d1_g2_b0_x1x2x1_f32"),
    (lambda c: c.quant is not None, "conv1d_i1o1_k1_s1_p0_d1_g1_b0_x1x1x1_q8t"),
]


# Each shrink is ~35 s of drawing: two run in the fast tier (.ci/run), all six nightly (slow).
FAST_SHRINKS = {"conv1d_i1o1_k1_s1_p0_d1_g1_b0_x1x1x1_f16", "conv3d_i1o1_k1_s1_p0_d1_g1_b0_x1x1x1x1x1_f32"}


@pytest.mark.parametrize("needs, simplest", [
    pytest.param(n, s, id=s, marks=() if s in FAST_SHRINKS else pytest.mark.slow) for n, s in SHRUNK])
def test_shrinking_goes_towards_the_simplest_conv(needs, simplest):
    """A failure that needs one feature shrinks to the simplest conv with just that feature:
    1d, float32, zeros, batch 1, not transposed, not quantized (draws are the same in number
    whichever branch, so the shrinker's shortest-first order does not favour another one)."""
    found = find(mixed_cases(), needs, settings=settings(database=None, max_examples=500))
    assert found.label == simplest
