import json

import pytest
import torch
from hypothesis import given

from harness.stages.build import eager_check
from harness.spec import CaseError, ConvCase, load_cases
from harness.generation.strategies import mixed_cases

SEED_VALID = ConvCase(dim=2, in_channels=3, out_channels=64, kernel_size=3, padding="valid",
                      input_shape=(1, 3, 224, 224))


@given(mixed_cases())
def test_json_round_trip_keeps_spelling(case):
    again = ConvCase.from_json(case.to_json())
    assert again == case
    assert again.case_id == case.case_id
    assert again.padding_spelling == case.padding_spelling


def test_json_field_names():
    assert set(SEED_VALID.to_dict()) == {"dim", "transposed", "in_channels", "out_channels",
                                         "kernel_size", "stride", "padding", "dilation", "groups",
                                         "bias", "input_shape", "dtype", "quant", "padding_mode",
                                         "output_padding", "prologue", "epilogue", "weights",
                                         "memory_format", "module_channels_last", "dynamic",
                                         "dynamic_sizes"}


def test_case_id_is_stable_and_readable():
    # Pinned: an id that changes silently breaks diffs between runs and machines.
    assert SEED_VALID.case_id == ConvCase.from_dict(json.loads(SEED_VALID.to_json())).case_id
    assert SEED_VALID.case_id == "conv2d_i3o64_k3_s1_pvalid_d1_g1_b1_x1x3x224x224_f32-3a1b4470"


def test_spellings_are_distinct_cases():
    spellings = [0, (0,), (0, 0), "valid"]
    cases = [ConvCase(dim=2, in_channels=1, out_channels=1, kernel_size=3, padding=p,
                      input_shape=(1, 1, 8, 8)) for p in spellings]
    assert len({c.case_id for c in cases}) == 4
    assert [c.padding_spelling for c in cases] == ["int", "list1", "tuple", "valid"]
    assert [c.has_short_int_list() for c in cases] == [False, True, False, True]


# Ids as they were before padding_mode/output_padding existed (cases/seed.json, the corpus, a
# generated transposed and a quantized case): the new fields at their default must keep them.
PINNED_IDS = {
    "conv2d_i3o64_k3_s1_p0_d1_g1_b1_x1x3x224x224_f32-d076a9ac":
        {"dim": 2, "in_channels": 3, "out_channels": 64, "kernel_size": 3, "stride": 1,
         "padding": 0, "input_shape": [1, 3, 224, 224]},
    "conv2d_i3o64_k14_s14_pvalid_d1_g1_b1_x1x3x224x224_f32-8f9e64c2":
        {"dim": 2, "in_channels": 3, "out_channels": 64, "kernel_size": 14, "stride": 14,
         "padding": "valid", "input_shape": [1, 3, 224, 224]},
    "conv2d_i3o8_k3_s1_p1L_d1_g1_b1_x1x3x16x16_f32-67804a52":
        {"dim": 2, "in_channels": 3, "out_channels": 8, "kernel_size": 3, "padding": [1],
         "input_shape": [1, 3, 16, 16]},
    "convT1d_i4o16_k4_s3L_p2L_d1_g4_b1_x1x4x7_f32-b6246c7d":
        {"dim": 1, "transposed": True, "in_channels": 4, "out_channels": 16, "kernel_size": 4,
         "stride": [3], "padding": [2], "groups": 4, "input_shape": [1, 4, 7]},
    "conv2d_i12o8_k3_s1_p0_d1_g2_b1_x1x12x8x8_q8c-ff8e99f8":
        {"dim": 2, "in_channels": 12, "out_channels": 8, "kernel_size": 3, "groups": 2,
         "input_shape": [1, 12, 8, 8], "quant": "int8_per_channel"},
}


@pytest.mark.parametrize("case_id", sorted(PINNED_IDS))
def test_old_case_ids_survive_the_later_fields(case_id):
    case = ConvCase.from_dict(PINNED_IDS[case_id])
    assert case.case_id == case_id
    spelled = ConvCase.from_dict({**PINNED_IDS[case_id], "padding_mode": "zeros",
                                  "output_padding": 0})
    assert spelled.case_id == case_id


def test_later_fields_off_default_change_id_and_label():
    base = ConvCase(dim=3, transposed=True, in_channels=2, out_channels=4, kernel_size=2,
                    stride=2, groups=2, input_shape=(2, 2, 3, 3, 3))
    shifted = ConvCase.from_dict({**base.to_dict(), "output_padding": 1, "dtype": "bfloat16"})
    assert base.case_id != shifted.case_id
    assert shifted.label == "convT3d_i2o4_k2_s2_p0_d1_op1_g2_b1_x2x2x3x3x3_bf16"
    # [0] is a spelling of its own (the harness keeps spellings apart), unlike the default 0.
    spelled = ConvCase.from_dict({**base.to_dict(), "output_padding": [0]})
    assert spelled.case_id != base.case_id and "_op0L_" in spelled.label
    mode = ConvCase(dim=1, in_channels=1, out_channels=1, kernel_size=3, padding=2,
                    padding_mode="circular", dtype="float16", input_shape=(1, 1, 4))
    assert mode.label == "conv1d_i1o1_k3_s1_p2_mcircular_d1_g1_b1_x1x1x4_f16"
    assert ConvCase.from_json(mode.to_json()) == mode


_1D = {"dim": 1, "in_channels": 1, "out_channels": 1, "kernel_size": 3, "input_shape": [1, 1, 4]}


@pytest.mark.parametrize("extra, words", [
    ({"padding_mode": "mirror"}, "'padding_mode': must be one of"),
    ({"padding_mode": "reflect", "transposed": True}, "'padding_mode': a transposed"),
    ({"output_padding": 1}, "'output_padding': only transposed"),
    ({"output_padding": 1, "transposed": True}, "'output_padding': must be smaller than"),
    ({"output_padding": [1], "transposed": True, "dilation": 2}, None),
    ({"dtype": "float16", "quant": "int8_per_tensor"}, "'dtype': a quantized case"),
    ({"dtype": "float64"}, "'dtype': must be one of"),
    ({"padding": 4, "padding_mode": "reflect"}, "'padding': reflect needs padding < input size 4"),
    ({"padding": 3, "padding_mode": "reflect"}, None),
    ({"padding": 5, "padding_mode": "circular"}, "'padding': circular needs padding <= input"),
    ({"padding": 4, "padding_mode": "circular"}, None),
    ({"padding": 9, "padding_mode": "replicate"}, None),
    ({"padding": "same", "kernel_size": 9, "padding_mode": "reflect"}, "'padding': reflect"),
    ({"padding": "same", "transposed": True}, "'padding': a transposed convolution takes no"),
])
def test_illegal_combinations_name_the_field_as_eager_does(extra, words):
    """Each rule agrees with eager PyTorch: rejected here iff nn.Conv* rejects it."""
    data = {**_1D, **extra}
    if words is None:
        case = ConvCase.from_dict(data)
        assert eager_check(case) is None
        return
    with pytest.raises(CaseError, match=words):
        ConvCase.from_dict(data)
    if "dtype" not in extra and extra.get("padding_mode") != "mirror":  # eager agrees
        with pytest.raises((ValueError, TypeError, RuntimeError, NotImplementedError)):
            build_module_from(data)(*make_inputs_from(data))


def test_length1_padding_list_with_a_mode_is_rejected_above_1d():
    data = {"dim": 2, "in_channels": 1, "out_channels": 1, "kernel_size": 3, "padding": [1],
            "padding_mode": "replicate", "input_shape": [1, 1, 4, 4]}
    with pytest.raises(CaseError, match="'padding': a length-1 list"):
        ConvCase.from_dict(data)


def build_module_from(data):
    """nn.Conv* built from a case dict without ConvCase's checks (what eager says on its own)."""
    cls = {(1, False): torch.nn.Conv1d, (1, True): torch.nn.ConvTranspose1d}[
        (data["dim"], data.get("transposed", False))]
    kwargs = {k: data[k] for k in ("kernel_size", "padding", "padding_mode", "dilation", "stride",
                                   "output_padding") if k in data}
    return cls(data["in_channels"], data["out_channels"], **kwargs)


def make_inputs_from(data):
    return (torch.randn(data["input_shape"]),)


def test_case_file_with_later_fields_round_trips(tmp_path):
    cases = [ConvCase(dim=2, in_channels=2, out_channels=2, kernel_size=3, padding=1,
                      padding_mode="reflect", dtype="float16", input_shape=(3, 2, 5, 5)),
             ConvCase(dim=3, transposed=True, in_channels=2, out_channels=2, kernel_size=3,
                      stride=2, dilation=2, output_padding=(1, 0, 1), input_shape=(1, 2, 2, 3, 2))]
    f = tmp_path / "c.json"
    f.write_text(json.dumps([c.to_dict() for c in cases] + [{"case": json.loads(cases[0].to_json())}]))
    again = load_cases(str(f))
    assert again == cases + cases[:1]
    assert [c.case_id for c in again[:2]] == [c.case_id for c in cases]
    f.write_text(json.dumps([{**_1D, "padding_mode": "reflect", "padding": 7}]))
    with pytest.raises(CaseError, match=r"c\.json: case #0: field 'padding': reflect"):
        load_cases(str(f))


@pytest.mark.parametrize("bad, words", [
    ({"dim": 4, "in_channels": 1, "out_channels": 1, "kernel_size": 1, "input_shape": [1, 1, 1]}, "'dim'"),
    ({"dim": 1, "in_channels": 1, "out_channels": 1, "kernel_size": 1, "input_shape": [1, 1, 4],
      "padding": "full"}, "'padding'"),
    ({"dim": 1, "in_channels": 1, "out_channels": 1, "kernel_size": 1, "input_shape": [1, 1]}, "'input_shape'"),
    ({"dim": 1, "in_channels": 1, "kernel_size": 1, "input_shape": [1, 1, 4]}, "missing"),
    ({"dim": 1, "in_channels": 1, "out_channels": 1, "kernel_size": 1, "input_shape": [1, 1, 4],
      "colour": 1}, "unknown field"),
])
def test_bad_case_names_the_field(bad, words):
    with pytest.raises(CaseError, match=words):
        ConvCase.from_dict(bad)


def test_load_cases_errors_name_file_and_entry(tmp_path):
    f = tmp_path / "c.json"
    f.write_text("[{\"dim\": 1")
    with pytest.raises(CaseError, match=r"c\.json: not valid JSON"):
        load_cases(str(f))
    f.write_text(json.dumps([SEED_VALID.to_dict(), {"dim": 9}]))
    with pytest.raises(CaseError, match=r"c\.json: case #1"):
        load_cases(str(f))
    with pytest.raises(CaseError, match="cannot read"):
        load_cases(str(tmp_path / "missing.json"))
