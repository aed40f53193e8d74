"""The one record every execution path fills: it round-trips through a matrix row unchanged."""

import json

import pytest

from harness.results import matrix
from harness.record import CellResult
from harness.spec import ConvCase


def test_a_result_survives_the_journal_and_the_matrix(tmp_path):
    case = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding="valid",
                    input_shape=(1, 3, 16, 16), quant="int8_per_channel")
    result = CellResult(case=case, backend="vulkan@h200", fixes="vulkan-conv-padding",
                        status="MISMATCH", phase="compare", message="3/8 outside",
                        predicted="clean", max_abs_error=0.5, out_shape=[1, 8, 14, 14],
                        delegated_ops={"aten.convolution": 1}, contract_violations=[],
                        run_time_s=0.01)
    row = json.loads(json.dumps(result.to_row()))  # what the journal stores
    assert row["case_id"] == case.case_id and row["padding_spelling"] == "valid"
    assert CellResult.from_row(row) == result
    matrix.write(matrix.frame([row]), tmp_path)  # and what the matrix reads back, NaN and all
    back = CellResult.from_row(matrix.read(tmp_path).to_dict(orient="records")[0])
    assert back == result and back.key == result.key


def test_an_unknown_field_is_refused():
    case = ConvCase(dim=1, in_channels=1, out_channels=1, kernel_size=1, input_shape=(1, 1, 4))
    with pytest.raises(AttributeError, match="no field 'stauts'"):
        CellResult(case=case, backend="xnnpack").update(stauts="PASS")
