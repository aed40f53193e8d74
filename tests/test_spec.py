import json

import pytest
from hypothesis import given

from harness.spec import CaseError, ConvCase, load_cases
from harness.strategies import mixed_cases

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
                                         "bias", "input_shape", "dtype", "quant"}


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


@pytest.mark.parametrize("bad, words", [
    ({"dim": 3, "in_channels": 1, "out_channels": 1, "kernel_size": 1, "input_shape": [1, 1, 1]}, "'dim'"),
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
