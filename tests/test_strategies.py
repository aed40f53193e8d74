from hypothesis import given

from harness.build import eager_check
from harness.generate import generate
from harness.strategies import conv_cases, mixed_cases, quant_cases


@given(mixed_cases())
def test_generated_cases_are_legal_in_eager(case):
    assert eager_check(case) is None


@given(quant_cases())
def test_quant_cases_are_quantized_and_not_transposed(case):
    assert case.quant in ("int8_per_tensor", "int8_per_channel")
    assert not case.transposed


@given(conv_cases())
def test_same_padding_only_with_stride_one(case):
    if case.padding == "same":
        assert set(case.spatial("stride")) == {1}


def test_coverage_of_the_dimensions_that_matter():
    cases = generate(300, seed=1)
    assert {c.padding_spelling for c in cases} == {"int", "tuple", "list1", "valid", "same"}
    assert {c.kernel_parity for c in cases} == {"odd", "even"}
    assert {c.dim for c in cases} == {1, 2}
    assert {c.quant for c in cases} == {None, "int8_per_tensor", "int8_per_channel"}
    assert any(c.groups > 1 and c.groups == c.in_channels for c in cases)  # depthwise
    assert {max(c.spatial("stride")) for c in cases} >= {1, 2, 3}
    assert {max(c.spatial("dilation")) for c in cases} >= {1, 2, 3}
    assert {c.bias for c in cases} == {True, False}
    assert any(c.transposed for c in cases)


def test_generation_is_deterministic():
    assert [c.case_id for c in generate(20, seed=7)] == [c.case_id for c in generate(20, seed=7)]
    assert [c.case_id for c in generate(20, seed=7)] != [c.case_id for c in generate(20, seed=8)]
