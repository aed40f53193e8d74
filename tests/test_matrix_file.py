"""matrix.json keeps every value a cell recorded: a folder rewritten from it (ingest, merge,
report) reads back what the run measured, digit for digit."""

import json

from harness.record import CellResult
from harness.results import matrix
from harness.spec import ConvCase

CASE = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, input_shape=(1, 3, 8, 8))


def test_matrix_json_round_trips_floats_exactly_and_writes_nan_as_null(tmp_path):
    tiny = 1.6689300537109375e-06
    rows = [CellResult(case=CASE, backend="vulkan", status="PASS", max_abs_error=tiny,
                       max_rel_error=3e-12, reached=["conv2d_float"]).to_row(),
            CellResult(case=CASE, backend="xnnpack", status="LOWER_ERROR", message="m").to_row()]
    matrix.write(matrix.frame(rows), tmp_path)
    raw = json.loads((tmp_path / "matrix.json").read_text())  # strict JSON: no NaN tokens
    assert raw[0]["max_abs_error"] == tiny and raw[0]["max_rel_error"] == 3e-12
    assert raw[1]["max_abs_error"] is None
    again = tmp_path / "again"
    again.mkdir()
    matrix.write(matrix.read(tmp_path), again)  # as ingest / merge rewrite a folder
    assert (again / "matrix.json").read_text() == (tmp_path / "matrix.json").read_text()
    assert (again / "matrix.csv").read_text() == (tmp_path / "matrix.csv").read_text()
    back = matrix.read(again)
    assert back.loc[0, "max_abs_error"] == tiny and back.loc[0, "reached"] == ["conv2d_float"]


def test_the_fix_summary_counts_cells_turned_pass_and_cells_made_worse():
    """--fixes each: what each fix did against stock, with the cells it made worse named as a
    count (a pass lost, or a loud failure turned into wrong values), which must be 0 for a fix."""
    import pandas as pd

    rows = [("a", "", "LOWER_ERROR"), ("a", "f1", "PASS"), ("b", "", "LOWER_ERROR"),
            ("b", "f1", "MISMATCH"), ("c", "", "PASS"), ("c", "f1", "RUNTIME_ERROR"),
            ("d", "", "MISMATCH"), ("d", "f1", "RUNTIME_ERROR")]
    df = pd.DataFrame(rows, columns=["case_id", "fixes", "status"]).assign(backend="vulkan")
    (line,) = matrix.fix_summary_lines(df)
    assert line.endswith("(turned PASS 1, made worse 2)"), line
    assert not matrix.made_worse("MISMATCH", "RUNTIME_ERROR")  # a guard: loud, not worse
    assert matrix.made_worse("NOT_DELEGATED", "CRASH") and not matrix.made_worse("PASS", "PASS")
