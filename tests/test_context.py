"""The conv in context (prologue, epilogue, weights as inputs): what the harness guarantees.

Ids of cases without context are unchanged, the fields round-trip through JSON, the matrix and
the journal, an illegal combination is one line (exit 2 at the CLI), the built graph is eager
PyTorch of exactly the described ops, and every graph input is fed wherever the program runs
(execution, repro script, bundle). Nothing here says what a delegate does with the graph: that
is cases/context.json's business.
"""

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given

from harness.generation.generate import PROFILES, generate
from harness.generation.strata import STRATA
from harness.generation.strategies import conv_cases
from harness.record import CASE_FIELDS, CellResult
from harness.results import matrix
from harness.spec import CaseError, ConvCase, load_cases
from harness.stages.build import (batchnorm_stats, build_conv, build_module, calibration_inputs,
                                  eager_check, input_names, make_inputs)

BASE = dict(dim=2, in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 7, 6))
EVERY_FIELD = ConvCase(**BASE, prologue=["pad", [1, 0, 2, 1], 0.5],
                       epilogue=["batchnorm", ["hardtanh", -0.5, 2.0], "add", ["clamp", None, 1.0],
                                 "relu6", "add", "relu"], weights="input")


def test_defaults_keep_every_id():
    """The context fields at their default (given or not) leave the identity as it was."""
    old = ConvCase(dim=2, in_channels=3, out_channels=64, kernel_size=3, padding="valid",
                   input_shape=(1, 3, 224, 224))
    assert old.case_id == "conv2d_i3o64_k3_s1_pvalid_d1_g1_b1_x1x3x224x224_f32-3a1b4470"
    spelled = ConvCase.from_dict({**old.to_dict(), "prologue": None, "epilogue": [],
                                  "weights": "constant"})
    assert spelled.case_id == old.case_id
    assert "prologue" not in old.to_json() and "epilogue" not in old.to_json()
    assert "weights" not in old.to_json()
    # a generated case without context hashes the same JSON as before the fields existed
    for case in generate(30, seed=3):
        if not case.has_context:
            assert not {"prologue", "epilogue", "weights"} & set(json.loads(case.to_json()))


def test_context_changes_id_and_label():
    assert EVERY_FIELD.label.endswith("_f32_pre1x0x2x1v0.5_ebn.ht.add.clamp.relu6.add.relu_win")
    ids = {ConvCase(**BASE, **extra).case_id for extra in [
        {}, {"epilogue": ["relu"]}, {"epilogue": ["relu6"]}, {"epilogue": [["clamp", 0, 1]]},
        {"epilogue": [["clamp", 0, 2]]}, {"prologue": ["pad", [1, 1, 1, 1], 0]},
        {"prologue": ["pad", [1, 1, 1, 1], 1]}, {"weights": "input"}]}
    assert len(ids) == 8


@given(conv_cases())
def test_context_round_trips_through_json(case):
    assert ConvCase.from_json(case.to_json()) == case
    assert ConvCase.from_dict(json.loads(json.dumps(case.to_dict()))) == case


def test_case_file_and_matrix_round_trip(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps([EVERY_FIELD.to_dict()]))
    assert load_cases(str(f)) == [EVERY_FIELD]
    rows = [CellResult(case=c, backend="xnnpack", status="PASS").to_row()
            for c in (EVERY_FIELD, ConvCase(**BASE))]
    matrix.write(matrix.frame(rows), tmp_path)
    back = [CellResult.from_row(r) for r in matrix.read(tmp_path).to_dict("records")]
    assert [r.case for r in back] == [EVERY_FIELD, ConvCase(**BASE)]
    # matrix.csv: one value a cell, a list as JSON text, None as an empty cell
    csv = pd.read_csv(tmp_path / "matrix.csv", dtype=str, keep_default_na=False)
    assert json.loads(csv.loc[0, "epilogue"]) == EVERY_FIELD.to_dict()["epilogue"]
    assert json.loads(csv.loc[0, "prologue"]) == ["pad", [1, 0, 2, 1], 0.5]
    assert csv.loc[1, "prologue"] == "" and json.loads(csv.loc[1, "epilogue"]) == []
    assert csv.loc[0, "weights"] == "input" and csv.loc[1, "weights"] == "constant"
    context = {k: json.loads(csv.loc[0, k]) for k in ("prologue", "epilogue")}
    assert ConvCase.from_dict({**EVERY_FIELD.to_dict(), **context}) == EVERY_FIELD


@pytest.mark.parametrize("extra, words", [
    ({"epilogue": "relu"}, "'epilogue': must be a list of ops"),
    ({"epilogue": ["gelu"]}, "'epilogue': unknown op 'gelu'"),
    ({"epilogue": ["hardtanh"]}, "'epilogue': hardtanh needs its bounds"),
    ({"epilogue": [["hardtanh", 1.0, 1.0]]}, "'epilogue': hardtanh needs min < max"),
    ({"epilogue": [["clamp", None, None]]}, "'epilogue': clamp needs at least one bound"),
    ({"epilogue": [["clamp", "0", 1]]}, "'epilogue': clamp bounds must be finite numbers"),
    ({"epilogue": [["relu", 0, 1]]}, "'epilogue': an op is a name or"),
    ({"prologue": ["pad", [1, 1], 0], "padding": 1}, "'padding': a prologue pads explicitly"),
    ({"prologue": ["pad", [1, 1], 0], "padding": "same"}, "'padding': a prologue pads"),
    ({"prologue": ["pad", [1, 1], 0], "padding_mode": "reflect"}, "'padding_mode': a prologue"),
    ({"prologue": ["pad", [1], 0]}, "'prologue': pads must be 2 to 4"),
    ({"prologue": ["pad", [1, 1, 1, 1, 1, 1], 0]}, "'prologue': pads must be 2 to 4"),
    ({"prologue": ["pad", [-1, 1], 0]}, "'prologue': pads must be"),
    ({"prologue": ["reflect", [1, 1], 0]}, "'prologue': must be null or"),
    ({"prologue": ["pad", [1, 1], None]}, "'prologue': the pad value must be a finite number"),
    ({"weights": "runtime"}, "'weights': must be one of"),
    ({"weights": "input", "padding": 1, "padding_mode": "circular"}, "'padding_mode': weights="),
])
def test_illegal_context_is_one_line_naming_the_field(extra, words):
    with pytest.raises(CaseError, match=words) as e:
        ConvCase.from_dict({**BASE, **extra})
    assert "\n" not in str(e.value)


def test_legal_context_spellings():
    for extra in [{"prologue": ["pad", [1, 1, 0, 0], 0], "padding": [0, 0]},
                  {"prologue": ["pad", [1, 1], -2.5], "padding": "valid"},
                  {"prologue": ["pad", [2, 0], 0], "padding": [0]},
                  {"epilogue": [["clamp", 1, 0]]},  # torch.clamp takes min > max (all = max)
                  {"weights": "input", "bias": False, "transposed": True, "stride": 2}]:
        assert eager_check(ConvCase.from_dict({**BASE, **extra})) is None


def test_bad_case_file_is_one_line_exit_2(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps([{**ConvCase(**BASE).to_dict(), "epilogue": ["swish"]}]))
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--out", tmp_path / "run",
                           "--cases", f, "--max-examples", "0", "--backends", "xnnpack"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"convconf: error: {f}: case #0: field 'epilogue': unknown op 'swish' (one of relu, "
        f"relu6, batchnorm, add, hardtanh, clamp) (got ['swish'])"]
    assert not (tmp_path / "run").exists()


def described(case: ConvCase, inputs: tuple) -> torch.Tensor:
    """Eager PyTorch of the ops the case describes, written here without build.py's Model."""
    x, rest = inputs[0], list(inputs[1:])
    conv = build_conv(case).to(getattr(torch, case.dtype))
    if case.prologue is not None:
        x = F.pad(x, list(case.prologue[1]), value=case.prologue[2])
    if case.weights == "input":
        weight = rest.pop(0)
        bias = rest.pop(0) if case.bias else None
        # the inputs are the conv's own weights: the functional conv computes what it computes
        assert torch.equal(weight, conv.weight.detach()) and (
            bias is None or torch.equal(bias, conv.bias.detach()))
    y = conv(x)
    assert y.shape == case.output_shape()
    for i, op in enumerate(case.epilogue):
        name = op if isinstance(op, str) else op[0]
        if name == "relu":
            y = torch.relu(y)
        elif name == "relu6":
            y = torch.clamp(y, 0, 6)
        elif name == "batchnorm":
            s = {k: v.to(y.dtype) for k, v in batchnorm_stats(case, i).items()}
            y = F.batch_norm(y, s["running_mean"], s["running_var"], s["weight"], s["bias"],
                             training=False, eps=1e-5)
        elif name == "add":
            y = y + rest.pop(0)
        else:  # hardtanh, clamp
            y = torch.clamp(y, op[1], op[2])
    assert not rest, "an input the graph does not use"
    return y


GRAPHS = [
    EVERY_FIELD,
    ConvCase(**BASE, epilogue=["batchnorm", "relu"], dtype="float16"),
    ConvCase(**BASE, epilogue=["add", "relu"], bias=False, weights="input", dtype="bfloat16"),
    ConvCase(dim=1, in_channels=4, out_channels=8, kernel_size=4, padding="same", groups=4,
             input_shape=(2, 4, 9), epilogue=["relu6", "add"], weights="input"),
    ConvCase(dim=2, transposed=True, in_channels=4, out_channels=6, kernel_size=3, stride=2,
             output_padding=1, groups=2, input_shape=(1, 4, 3, 5), prologue=["pad", [1, 1], 0],
             epilogue=["batchnorm", ["hardtanh", 0, 6]], weights="input"),
    ConvCase(dim=3, in_channels=2, out_channels=4, kernel_size=2, padding="valid",
             input_shape=(1, 2, 3, 3, 3), prologue=["pad", [0, 1, 1, 0, 1, 1], -1.0],
             epilogue=[["clamp", 0.0, None], "batchnorm"]),
]


@pytest.mark.parametrize("case", GRAPHS, ids=lambda c: c.label)
def test_built_graph_is_eager_of_the_described_ops(case):
    inputs = make_inputs(case)
    assert len(inputs) == len(input_names(case))
    with torch.no_grad():
        got = build_module(case)(*inputs)
        want = described(case, inputs)
    assert got.dtype == getattr(torch, case.dtype) and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # the weights are the case's own for every salt; the activations are drawn per salt
    for calib in calibration_inputs(case)[1:]:
        for name, a, b in zip(input_names(case), inputs, calib, strict=True):
            assert torch.equal(a, b) == (name in ("weight", "bias")), name


def test_the_exported_graph_takes_every_input_in_order():
    exported = torch.export.export(build_module(EVERY_FIELD), make_inputs(EVERY_FIELD))
    assert list(exported.graph_signature.user_inputs) == input_names(EVERY_FIELD) == [
        "x", "weight", "bias", "residual0", "residual1"]


@pytest.mark.slow
def test_quantized_context_quantizes_the_whole_graph():
    """int8: the module handed to the quantizer is the whole graph (the epilogue's add is
    quantized with the conv), and the output's step is the one the output comes from."""
    from harness.stages import backends
    from harness.stages.quantize import output_qparams, quantize

    for epilogue in (["batchnorm", "relu", "add"], [["clamp", None, 1.0]]):
        case = ConvCase(**BASE, epilogue=epilogue, quant="int8_per_channel")
        converted, _ = quantize(case, build_module(case), make_inputs(case), backends.get("xnnpack"))
        targets = [str(n.target) for n in converted.graph.nodes if n.op == "call_function"]
        assert any("convolution" in t or "conv2d" in t for t in targets)
        assert "batch_norm" not in " ".join(targets)  # folded into the conv by prepare_pt2e
        placeholders = [n for n in converted.graph.nodes if n.op == "placeholder"]
        assert [n.name for n in placeholders] == input_names(case)
        assert output_qparams(converted) is not None


@pytest.mark.slow
def test_every_input_is_fed_when_executing_and_in_the_repro(tmp_path):
    """The cell's program takes every graph input and runs on them; the repro script builds
    the same graph, feeds the same inputs and reaches the cell's status."""
    from harness.results.repro import script
    from harness.runtimes.load import pybindings
    from harness.stages.cell import prepare, run_cell
    from harness.lane import Lane

    case = ConvCase(**BASE, epilogue=["add", "relu"], weights="input", quant=None)
    prepared = prepare(case, Lane("xnnpack", ()))
    assert prepared.pte, prepared.message
    assert len(prepared.refs.inputs) == 4
    program = pybindings()._load_for_executorch_from_buffer(prepared.pte)
    assert program.method_meta("forward").num_inputs() == len(prepared.refs.inputs)
    row = run_cell(case, "xnnpack")
    assert row.out_shape == list(case.output_shape()), row
    for q in (None, "int8_per_channel"):
        case = ConvCase(**BASE, epilogue=["batchnorm", "add", "relu6"], quant=q,
                        prologue=["pad", [1, 1, 0, 1], 0.5])
        row = run_cell(case, "xnnpack")
        path = tmp_path / f"repro_{q}.py"
        path.write_text(script(case, "xnnpack", "", row.status, row.message))
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"STATUS: {row.status}" in proc.stdout, (proc.stdout, row)


def test_strategies_reach_the_context_and_the_shapes_of_issue_24():
    cases = generate(100, seed=1)
    assert sum(c.has_context for c in cases) < 60  # mostly a lone conv
    assert any(c.prologue is not None and c.prologue[2] == 0 for c in cases) or any(
        c.prologue is not None for c in cases)
    assert any(c.epilogue for c in cases) and any(c.weights == "input" for c in cases)
    assert any(c.groups > 1 and c.groups == c.in_channels and c.out_channels > c.groups
               for c in cases)  # depthwise with a channel multiplier > 1
    assert any(c.out_channels >= 128 for c in cases)
    wide = [c for c in cases if c.out_channels >= 128]
    assert max(c.input_shape[2] for c in wide) <= 16  # wide stays cheap


def test_strategies_reach_every_context_value():
    cases = generate(300, seed=2)
    ops = {op if isinstance(op, str) else op[0] for c in cases for op in c.epilogue}
    assert ops == {"relu", "relu6", "hardtanh", "clamp", "batchnorm", "add"}
    assert any(len(c.epilogue) > 1 for c in cases)
    values = {c.prologue[2] for c in cases if c.prologue is not None}
    assert 0.0 in values and values - {0.0}
    assert {c.weights for c in cases} == {"constant", "input"}
    assert any(c.weights == "input" and c.quant for c in cases)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_small_runs_are_stratified(seed):
    n = PROFILES["ci"]  # the quick default: the strata, nothing dropped
    cases = generate(n, seed)
    assert len(cases) == n == len(STRATA)
    assert {c.quant for c in cases} == {None, "int8_per_tensor", "int8_per_channel"}
    assert {c.dim for c in cases} >= {1, 2}
    assert {c.padding_spelling for c in cases} == {"int", "tuple", "list1", "valid", "same"}
    strata = cases[:len(STRATA)]
    assert [(c.padding_spelling, c.dim, c.quant) for c in strata] == [s.axes for s in STRATA]
    assert not all(c.in_channels == c.out_channels == 1 for c in strata)  # not the simplest
    assert [c.case_id for c in generate(n, seed)] == [c.case_id for c in cases]
    assert [c.case_id for c in generate(n, seed + 100)] != [c.case_id for c in cases]


@pytest.mark.slow
def test_the_bundle_feeds_every_input(vulkan_runtime, tmp_path):
    """A bundled cell carries one raw file per graph input, in order, and the device side's
    result ingests to the status the local lane had."""
    from harness.stages.build import torch_dtype

    case = ConvCase(**BASE, epilogue=["add", "relu"], weights="input")
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([case.to_dict()]))

    def harness(*args):
        return subprocess.run([sys.executable, "-m", "harness", *map(str, args)],
                              capture_output=True, text=True, timeout=900)

    run = tmp_path / "run"
    proc = harness("run", "--out", run, "--backends", "vulkan", "--cases", cases,
                   "--max-examples", 0, "-j", 1, "--no-cache", "--no-progress",
                   "--vulkan-runtime", vulkan_runtime.library)
    assert proc.returncode == 0, proc.stderr
    made = harness("bundle", run, "--out", tmp_path / "b")
    local = matrix.read(run)
    if made.returncode != 0:  # nothing lowered to bundle is the local row's own verdict
        assert local.loc[0, "status"] in ("LOWER_ERROR", "INVALID"), made.stderr
        return
    files = sorted((tmp_path / "b" / "cells" / "0001").glob("input*.bin"))
    assert [f.name for f in files] == [f"input{i:03d}.bin" for i in range(4)]
    shapes = [case.input_shape, (8, 4, 3, 3), (8,), case.output_shape()]
    itemsize = torch.empty((), dtype=torch_dtype(case)).element_size()
    assert [f.stat().st_size for f in files] == [itemsize * torch.Size(s).numel() for s in shapes]
    device = subprocess.run(["sh", str(tmp_path / "b" / "run.sh"), str(tmp_path / "results")],
                            capture_output=True, text=True, timeout=900,
                            env={"PATH": "/usr/bin:/bin"})
    assert device.returncode == 0, device.stderr
    back = harness("ingest", run, tmp_path / "results", "--device-name", "lavapipe")
    assert back.returncode == 0, back.stderr
    df = matrix.read(run)
    assert df[df.backend == "vulkan@lavapipe"].status.tolist() == local.status.tolist()
