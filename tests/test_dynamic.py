"""Issue 39, dynamic shapes: one lowering, every size executed, the worst size reported.

Asserts harness guarantees only (what the delegates do: cases/memory_format_dynamic.json)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.generation.strategies import conv_cases
from harness.generation.variants import one_step
from harness.lane import Lane
from harness.spec import CaseError, ConvCase
from harness.stages import lower as lower_module
from harness.stages.cell import execute, run_cell
from harness.stages.prepare import prepare_case
from harness.stages.sizes import worst_size

BASE = dict(dim=2, in_channels=4, out_channels=8, kernel_size=3, input_shape=(2, 4, 8, 8))
SIZES = [[1, 4, 4, 4], [3, 4, 12, 16], [2, 4, 6, 7], [2, 4, 6, 9]]


def test_the_fields_round_trip_and_name_their_bounds():
    case = ConvCase(**BASE, dynamic="both", dynamic_sizes=SIZES)
    assert ConvCase.from_json(case.to_json()) == case
    assert case.dynamic_bounds() == {0: (1, 3), 2: (4, 12), 3: (4, 16)}
    assert case.label.endswith("_dynBS4")
    assert case.at_size(SIZES[1]).input_shape == tuple(SIZES[1])


@pytest.mark.parametrize("bad", [
    dict(dynamic="batch"),                                        # no sizes
    dict(dynamic_sizes=[[1, 4, 8, 8]]),                           # static with sizes
    dict(dynamic="batch", dynamic_sizes=[[1, 4, 6, 8]]),          # changes a static dimension
    dict(dynamic="spatial", dynamic_sizes=[[2, 4, 3, 8]]),        # output of size 1
    dict(dynamic="batch", dynamic_sizes=[[3, 4, 8, 8]], input_shape=(1, 4, 8, 8)),  # example 1
    dict(dynamic="batch", dynamic_sizes=[[3, 4, 8, 8]], quant="int8_per_tensor"),
    dict(dynamic="batch", dynamic_sizes=[[3, 4, 8, 8]], epilogue=["add"]),
])
def test_illegal_dynamic_cases_are_one_line(bad):
    with pytest.raises(CaseError):
        ConvCase(**{**BASE, **bad})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(conv_cases(dynamics=st.sampled_from(["batch", "spatial", "both"]),
                  memory_formats=st.sampled_from(["contiguous", "input"])))
def test_strategies_draw_only_valid_sizes(case):
    """Every drawn size: legal for the case (spec), a non-empty output, >= 2 where a spatial
    dimension is dynamic, inside the bounds, with the lower and the upper bound among them."""
    if case.dynamic == "none":  # quantized / residual cases stay static
        assert not case.dynamic_sizes
        return
    bounds = case.dynamic_bounds()
    assert bounds
    for size in case.dynamic_sizes:
        out = case.at_size(size).output_shape()
        assert min(out[2:]) >= 1
        for axis, (lo, hi) in bounds.items():
            assert lo <= size[axis] <= hi
            if axis >= 2:
                assert size[axis] >= 2 and out[axis] >= 2
    for axis, (lo, hi) in bounds.items():
        values = {s[axis] for s in case.dynamic_sizes}
        assert lo in values and hi in values and len(values) >= 3 or hi - lo < 2


def test_dynamic_to_static_is_a_one_step_variant():
    case = ConvCase(**BASE, dynamic="batch", dynamic_sizes=[[1, 4, 8, 8], [3, 4, 8, 8]])
    step = {s.field: s.case for s in one_step(case)}["dynamic"]
    assert step.dynamic == "none" and step.input_shape == case.input_shape


def test_a_dynamic_cell_lowers_once_and_executes_every_size(monkeypatch):
    calls = []
    real = lower_module.lower

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr("harness.stages.prepare.lower", counting)
    case = ConvCase(**BASE, padding=1, dynamic="both", dynamic_sizes=SIZES)
    lane = Lane("xnnpack", ())
    prepared = prepare_case(case, [lane])[lane]
    assert len(calls) == 1 and prepared.status is None, prepared.message
    assert [s["size"] for s in prepared.refs.sizes] == SIZES
    row = execute(case, prepared)
    assert [s["size"] for s in row.sizes] == SIZES
    assert all(set(s) == {"size", "status", "max_abs", "message"} for s in row.sizes)
    assert row.status == worst_size(row.sizes)["status"]
    if row.status == "PASS":
        assert row.max_abs_error == max(s["max_abs"] for s in row.sizes)


def test_a_size_the_program_refuses_is_that_size_s_status():
    """A size past the export's bounds (written here into the prepared references: the case
    itself cannot name one) is refused by the runtime: that size is RUNTIME_ERROR, the others
    still run, and the cell reports the refusal as its worst size."""
    import dataclasses

    from harness.stages.build import size_inputs

    case = ConvCase(**BASE, dynamic="batch", dynamic_sizes=[[1, 4, 8, 8], [3, 4, 8, 8]])
    lane = Lane("xnnpack", ())
    prepared = prepare_case(case, [lane])[lane]
    far = dict(prepared.refs.sizes[1], size=[9, 4, 8, 8], inputs=size_inputs(case, (9, 4, 8, 8)))
    refs = dataclasses.replace(prepared.refs, sizes=[*prepared.refs.sizes, far])
    row = execute(case, dataclasses.replace(prepared, refs=refs))
    # every size has its own status, and the cell's is the worst of them, named by its size;
    # past the Dim's upper bound the runtime refuses the input (its memory is planned for the
    # bound), which is that size's status while the others still ran
    assert [s["size"] for s in row.sizes] == [[1, 4, 8, 8], [3, 4, 8, 8], [9, 4, 8, 8]]
    assert row.sizes[2]["status"] not in ("PASS", "MISMATCH"), row.sizes[2]
    assert row.sizes[2]["message"]
    assert all(s["status"] for s in row.sizes[:2])
    assert row.status == row.sizes[2]["status"] and "at size 9x4x8x8" in row.message


def test_vulkan_runs_a_dynamic_spatial_cell(vulkan_runtime):
    case = ConvCase(**{**BASE, "input_shape": (1, 4, 8, 8)}, padding=(1, 1), stride=(1, 1),
                    dilation=(1, 1), dynamic="spatial",
                    dynamic_sizes=[[1, 4, 4, 4], [1, 4, 12, 16], [1, 4, 6, 7]])
    row = run_cell(case, "vulkan")
    assert len(row.sizes) == 3 or row.status in ("LOWER_ERROR", "NOT_DELEGATED")
    assert row.status in ("PASS", "MISMATCH", "RUNTIME_ERROR", "NOT_DELEGATED")


def test_a_lane_that_fixes_a_dynamic_size_says_so_and_the_next_lanes_stay_dynamic(monkeypatch):
    """Every deep copy of the exported program shares its ShapeEnv: a lane whose fix pass reads
    a symbolic size with int() (as vk_util.conv_args once did) fixed it for every lane lowered
    after it (nightly F-384df924: XNNPACK 'Propagating input shapes failed' at every batch but
    the export's). That lane is a LOWER_ERROR naming our setup, and the lanes after it lower
    their own export: the same program as the stock lane's."""
    case = ConvCase(dim=1, in_channels=3, out_channels=9, kernel_size=5, dilation=2, groups=3,
                    padding="valid", input_shape=(2, 3, 17), dynamic="batch",
                    dynamic_sizes=((1, 3, 17), (4, 3, 17), (2, 3, 17)))
    from torch.fx.passes.infra.pass_base import PassResult

    from harness.stages import fixes

    def int_of_the_batch(graph_module):  # a pass reading the batch as an int
        import torch

        x = next(n for n in graph_module.graph.nodes if n.op == "placeholder"
                 and isinstance(n.meta["val"].shape[0], torch.SymInt))
        int(x.meta["val"].shape[0])
        return PassResult(graph_module, False)

    bad = ["xnnpack-tconv-output-padding"]
    monkeypatch.setattr(fixes.get(bad[0]), "transform_passes", lambda: [int_of_the_batch])
    stock, specializing, after = (Lane("xnnpack", ()), Lane("xnnpack", tuple(bad)),
                                  Lane("xnnpack", ("xnnpack-conv1d-same-even",)))
    got = prepare_case(case, [stock, specializing, after])
    assert got[stock].status is None and got[after].status is None, got[after].message
    assert got[specializing].status == "LOWER_ERROR"  # harness-made: our setup's verdict
    assert got[specializing].message.startswith("SetupError: this lane's fixes fixed the "
                                                "program's dynamic size s")
    assert got[after].pte == got[stock].pte


def test_sizes_the_stock_lowering_fixes_are_not_blamed_on_a_fix():
    """ExecuTorch's own XNNPACK lowering fixes the sizes of a dynamic circular-pad program (its
    cells then fail at other sizes: known issue portable-slice-copy-dynamic-circular). That is
    the stock program: no lane of it is our setup's error, fixed or not."""
    case = ConvCase.from_dict({
        "dim": 2, "in_channels": 2, "out_channels": 4, "kernel_size": [2, 3], "stride": [2],
        "padding": "valid", "padding_mode": "circular", "dilation": [1, 2], "groups": 2,
        "input_shape": [2, 2, 10, 8], "dtype": "float16", "dynamic": "both",
        "dynamic_sizes": [[1, 2, 4, 7], [3, 2, 10, 14], [2, 2, 9, 11]]})
    lanes = [Lane("xnnpack", ()), Lane("xnnpack", ("xnnpack-tconv-output-padding",))]
    got = prepare_case(case, lanes)
    blamed = {lane.name: got[lane].message for lane in lanes
              if got[lane].message.startswith("SetupError")}
    assert blamed == {}
