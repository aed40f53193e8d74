"""The Vulkan graph fixes (harness/stages/fixes/vk_*.py): what the harness guarantees about them.

Each fix is a no-op on a graph without its pattern (same graph, same code, same constants);
each rewrite computes what the original computes in eager: bit-identical in float (integer-valued
weights and inputs make every product and partial sum exact, so equality tests the rewrite's
arithmetic whatever summation order eager's kernel picks; random floats are held to 1e-6
relative), within the int8 policy (one output step) for the int8 rewrites; and (slow) the
rewritten conv stays inside the Vulkan delegate. Whether the delegate then computes the right
numbers is the corpus's business (cases/vulkan_graph_fixes.json), not this file's.
"""

import copy

import pytest
import torch

from harness.lane import Lane
from harness.spec import ConvCase
from harness.stages import fixes
from harness.stages.fixes.vk_channels_last_input import (ChannelsLastInputToContiguousPass,
                                                        decline_dim_order_changes)
from harness.stages.fixes.vk_channels_last_weight import ChannelsLastWeightToContiguousPass
from harness.stages.fixes.vk_dw_edge_pad import DepthwiseExplicitPadPass
from harness.stages.fixes.vk_dw_sned_widen import DepthwiseSnedWidenPass
from harness.stages.fixes.vk_grouped_split import GroupedConvSplitPass
from harness.stages.fixes.vk_q8_batch_split import Int8BatchSplitPass
from harness.stages.fixes.vk_q8_per_tensor_weight import PerTensorWeightAsPerChannelPass
from harness.stages.fixes.vulkan_conv_padding import BroadcastConvIntListsPass

PASSES = {
    "vk-dw-edge-pad": DepthwiseExplicitPadPass,
    "vk-grouped-split": GroupedConvSplitPass,
    "vk-dw-sned-widen": DepthwiseSnedWidenPass,
    "vk-q8-per-tensor-weight": PerTensorWeightAsPerChannelPass,
    "vk-q8-batch-split": Int8BatchSplitPass,
    "vk-channels-last-input": ChannelsLastInputToContiguousPass,
    "vk-channels-last-weight": ChannelsLastWeightToContiguousPass,
}


def run_pass(fix_name, ep):
    """Run the fix's pass the way lowering does (GraphModule passes on the graph module,
    ExportedProgram passes on the program) -> modified."""
    from executorch.exir.pass_base import ExportedProgramPassBase

    p = PASSES[fix_name]()
    if isinstance(p, ExportedProgramPassBase):
        return p(ep).modified
    return p(ep.graph_module).modified


def edge_program(module, x):
    from executorch.exir import to_edge

    return to_edge(torch.export.export(module.eval(), (x,))).exported_program()


def int_module(module, shape, seed=0):
    """``module`` with integer-valued parameters and an integer-valued input."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randint(-4, 5, param.shape, generator=gen).float())
    return module.eval(), torch.randint(-4, 5, shape, generator=gen).float()


def snapshot(ep):
    gm = ep.graph_module
    return (str(gm.graph), gm.code, [str(s) for s in ep.graph_signature.input_specs],
            sorted(ep.state_dict), sorted(ep.constants))


def convs(ep):
    return [n for n in ep.graph_module.graph.nodes
            if n.op == "call_function" and "aten.convolution" in str(n.target)]


def test_registered_as_vulkan_graph_fixes():
    for name, pass_type in PASSES.items():
        fix = fixes.get(name)
        assert fix.backends == ("vulkan",) and fix.kind == "graph"
        assert fix.bug and fix.verified and "cases/vulkan_graph_fixes.json" in fix.verified
        assert [type(p) for p in fix.transform_passes()] == [pass_type]
        assert fixes.for_backend([name], "xnnpack") == []
        assert name in fixes.names()
    assert "vk-util" not in fixes.names()  # the helpers module registers nothing


# ---------------------------------------------------------------- float: no-op where absent

def conv(cin, cout, k, **kw):
    return torch.nn.Conv2d(cin, cout, k, **kw)


FLOAT_CONTROLS = {
    "plain 3x3": (conv(3, 8, 3, padding=1), (1, 3, 8, 8)),
    "dw 3x3 p1": (conv(4, 4, 3, padding=1, groups=4), (1, 4, 8, 8)),
    "dw 5x5 s2 p2": (conv(4, 4, 5, stride=2, padding=2, groups=4), (1, 4, 11, 11)),
    "dw 7x7 p0": (conv(4, 4, 7, groups=4), (1, 4, 8, 8)),
    "dw 7x7 p3 batch 2": (conv(4, 4, 7, padding=3, groups=4), (2, 4, 8, 8)),
    "dw 4x4 s2 batch 2": (conv(4, 4, 4, stride=2, groups=4), (2, 4, 10, 10)),
    "grouped 3x3, 4 channels per group": (conv(8, 8, 3, padding=1, groups=2), (1, 8, 8, 8)),
    "grouped 3x3 p1 batch 2": (conv(4, 4, 3, padding=1, groups=2), (2, 4, 8, 8)),
    "conv1d dw k7 p3": (torch.nn.Conv1d(4, 4, 7, padding=3, groups=4), (1, 4, 9)),
    "conv1d grouped": (torch.nn.Conv1d(4, 4, 3, groups=2), (1, 4, 9)),
    "transposed grouped": (torch.nn.ConvTranspose2d(4, 4, 3, groups=2), (1, 4, 5, 5)),
    "bf16 dw 7x7 p3 (Vulkan delegates fp32/fp16 only)":
        (conv(4, 4, 7, padding=3, groups=4).to(torch.bfloat16), (1, 4, 8, 8)),
    "bf16 grouped 3x3": (conv(4, 4, 3, padding=1, groups=2).to(torch.bfloat16), (1, 4, 8, 8)),
}


@pytest.mark.parametrize("control", FLOAT_CONTROLS)
def test_float_graph_without_the_pattern_is_left_alone(control):
    """Every Vulkan graph fix, on a copy of the same program each: nothing modified."""
    module, shape = FLOAT_CONTROLS[control]
    torch.manual_seed(0)
    dtype = next(module.parameters()).dtype
    exported = edge_program(module, torch.randn(shape).to(dtype))
    assert PASSES, "no graph fix to run"
    for fix_name in PASSES:
        ep = copy.deepcopy(exported)
        before = snapshot(ep)
        assert run_pass(fix_name, ep) is False, fix_name
        assert snapshot(ep) == before, fix_name


# ------------------------------------------------------------- float: exact where rewritten

# (fix, module factory, input shape, what the rewritten graph must hold)
FLOAT_REWRITES = [
    ("vk-dw-edge-pad", lambda: conv(4, 4, 7, padding=3, groups=4), (1, 4, 8, 8)),
    ("vk-dw-edge-pad", lambda: conv(4, 4, (2, 6), padding=(0, 2), groups=4), (1, 4, 6, 9)),
    ("vk-dw-edge-pad", lambda: conv(8, 8, 4, stride=2, padding=1, dilation=2, groups=8, bias=False),
     (1, 8, 11, 10)),
    ("vk-grouped-split", lambda: conv(4, 4, 3, padding=1, groups=2), (1, 4, 8, 8)),
    ("vk-grouped-split", lambda: conv(6, 9, 3, stride=2, dilation=2, groups=3, bias=False),
     (1, 6, 11, 11)),
    ("vk-grouped-split", lambda: conv(8, 8, 1, groups=2), (1, 8, 5, 5)),
    ("vk-grouped-split", lambda: conv(4, 8, 3, padding=1, groups=4), (1, 4, 6, 6)),  # multiplier 2
    ("vk-dw-sned-widen", lambda: conv(4, 4, 4, stride=2, groups=4), (1, 4, 10, 10)),
    ("vk-dw-sned-widen", lambda: conv(4, 4, 2, dilation=2, groups=4), (1, 4, 8, 8)),
    ("vk-dw-sned-widen", lambda: conv(8, 8, (2, 3), stride=2, padding=1, groups=8), (1, 8, 9, 7)),
    ("vk-dw-sned-widen", lambda: conv(4, 4, 1, stride=2, groups=4), (1, 4, 7, 7)),
    ("vk-dw-sned-widen", lambda: conv(4, 4, 7, stride=2, padding=3, groups=4), (1, 4, 10, 10)),
    ("vk-dw-sned-widen", lambda: conv(4, 4, 7, dilation=2, padding=6, groups=4), (1, 4, 16, 16)),
    ("vk-dw-sned-widen", lambda: conv(4, 4, (6, 7), stride=(3, 2), groups=4, bias=False),
     (1, 4, 13, 12)),
]


@pytest.mark.parametrize("fix_name,factory,shape", FLOAT_REWRITES,
                         ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(FLOAT_REWRITES)])
def test_float_rewrite_is_bit_identical_in_eager(fix_name, factory, shape):
    module, x = int_module(factory(), shape)
    ep = edge_program(module, x)
    original = copy.deepcopy(ep).module()
    assert run_pass(fix_name, ep) is True
    rewritten = ep.module()
    with torch.no_grad():
        ref = module(x)
        assert torch.equal(original(x), ref)
        out = rewritten(x)
        assert out.shape == ref.shape and torch.equal(out, ref)
        xf = torch.randn(shape, generator=torch.Generator().manual_seed(1))
        ref_f, out_f = original(xf), rewritten(xf)
    torch.testing.assert_close(out_f, ref_f, rtol=1e-6, atol=1e-6 * ref_f.abs().max().item())
    # the rewrite is idempotent: its result has no pattern left
    snap = snapshot(ep)
    assert run_pass(fix_name, ep) is False and snapshot(ep) == snap


def test_dw_edge_pad_shape_of_the_rewrite():
    module, x = int_module(conv(4, 4, 7, padding=3, groups=4), (1, 4, 8, 8))
    ep = edge_program(module, x)
    run_pass("vk-dw-edge-pad", ep)
    (c,) = convs(ep)
    pad = c.args[0]
    assert "constant_pad_nd" in str(pad.target) and pad.args[1:] == ([3, 3, 3, 3], 0.0)
    assert list(c.args[4]) == [0, 0] and list(c.meta["val"].shape) == [1, 4, 8, 8]


def test_grouped_split_shape_of_the_rewrite():
    module, x = int_module(conv(6, 9, 3, groups=3), (1, 6, 7, 7))
    ep = edge_program(module, x)
    run_pass("vk-grouped-split", ep)
    pieces = convs(ep)
    assert len(pieces) == 3 and all(c.args[8] == 1 for c in pieces)
    assert [list(c.args[1].meta["val"].shape) for c in pieces] == [[3, 2, 3, 3]] * 3
    assert [c.args[0].args[2:4] for c in pieces] == [(0, 2), (2, 4), (4, 6)]
    assert "p_weight" not in {n.name for n in ep.graph_module.graph.nodes}  # no dead weight


def test_sned_widen_kernel_sides():
    for k, stride, dilation, side in ((4, 2, 1, 5), (2, 1, 2, 3), ((2, 3), 2, 1, 3), (7, 2, 1, 7)):
        module, x = int_module(conv(4, 4, k, stride=stride, dilation=dilation, groups=4), (1, 4, 16, 16))
        ep = edge_program(module, x)
        run_pass("vk-dw-sned-widen", ep)
        (c,) = convs(ep)
        assert list(c.args[1].meta["val"].shape[2:]) == [side, side]
        assert list(c.args[4]) == [0, 0]
        if side == 7:  # dense form: stride 1 == dilation 1, then strided slices
            assert list(c.args[3]) == [1, 1] and list(c.args[5]) == [1, 1]
        else:  # widened: the sned output_tile shader of that size
            assert list(c.args[3]) != list(c.args[5])


# ------------------------------------------------------------------------------------- int8

def int8_edge_program(case: ConvCase):
    from harness.stages.backends import get as backend
    from harness.stages.build import build_module, make_inputs
    from harness.stages.quantize import output_qparams, quantize

    module, inputs = build_module(case), make_inputs(case)
    converted, _ = quantize(case, module, inputs, backend("vulkan"))
    from executorch.exir import to_edge

    ep = to_edge(torch.export.export(converted, inputs)).exported_program()  # no .eval(): pt2e
    return ep, inputs[0], output_qparams(converted)[0]


def q8(cin, cout, k, shape, quant, **kw):
    return ConvCase(dim=2, in_channels=cin, out_channels=cout, kernel_size=k, input_shape=shape,
                    quant=quant, **kw)


INT8_CONTROLS = {
    "per-channel batch 1": q8(4, 4, 3, (1, 4, 8, 8), "int8_per_channel"),
    "per-channel dw batch 1": q8(8, 8, 3, (1, 8, 6, 6), "int8_per_channel", padding=1, groups=8),
    "per-tensor conv1d batch 1": ConvCase(dim=1, in_channels=4, out_channels=4, kernel_size=3,
                                          input_shape=(1, 4, 9), quant="int8_per_tensor"),
    # q8ta does not fuse a grouped conv with 2 output channels per group: the int8 fixes stay out
    "per-channel grouped 2 per group, batch 2": q8(4, 4, 3, (2, 4, 8, 8), "int8_per_channel",
                                                   groups=2),
    "per-tensor grouped 2 per group": q8(4, 4, 3, (1, 4, 8, 8), "int8_per_tensor", groups=2),
}


@pytest.mark.slow  # pt2e quantization: seconds per case
@pytest.mark.parametrize("control", INT8_CONTROLS)
def test_int8_graph_without_the_pattern_is_left_alone(control):
    exported, _, _ = int8_edge_program(INT8_CONTROLS[control])
    assert PASSES, "no graph fix to run"
    for fix_name in PASSES:
        ep = copy.deepcopy(exported)
        before = snapshot(ep)
        assert run_pass(fix_name, ep) is False, fix_name
        assert snapshot(ep) == before, fix_name


@pytest.mark.slow  # pt2e quantization: seconds per case
def test_float_fixes_leave_int8_convs_alone():
    """The float fixes' patterns in an int8 graph (q8ta has its own shaders): no-op."""
    for case, name in ((q8(4, 4, 7, (1, 4, 8, 8), "int8_per_channel", padding=3, groups=4), "vk-dw-edge-pad"),
                       (q8(8, 8, 4, (1, 8, 10, 10), "int8_per_channel", stride=2, groups=8), "vk-dw-sned-widen"),
                       (q8(8, 8, 1, (1, 8, 6, 6), "int8_per_channel", groups=2), "vk-grouped-split")):
        ep, _, _ = int8_edge_program(case)
        before = snapshot(ep)
        assert run_pass(name, ep) is False and snapshot(ep) == before


INT8_REWRITES = [
    ("vk-q8-per-tensor-weight", q8(4, 4, 3, (1, 4, 8, 8), "int8_per_tensor")),
    ("vk-q8-per-tensor-weight", q8(3, 6, 1, (1, 3, 9, 9), "int8_per_tensor", stride=2)),
    ("vk-q8-per-tensor-weight", q8(8, 8, 3, (1, 8, 6, 6), "int8_per_tensor", padding=1, groups=8)),
    ("vk-q8-batch-split", q8(3, 6, 3, (4, 3, 16, 16), "int8_per_channel")),
    ("vk-q8-batch-split", q8(8, 8, 1, (2, 8, 6, 6), "int8_per_channel")),
    ("vk-q8-batch-split", q8(4, 4, 3, (2, 4, 8, 8), "int8_per_tensor", bias=False)),
]


@pytest.mark.slow  # pt2e quantization: seconds per case
@pytest.mark.parametrize("fix_name,case", INT8_REWRITES,
                         ids=[f"{f}-{c.case_id}" for f, c in INT8_REWRITES])
def test_int8_rewrite_is_within_one_output_step_in_eager(fix_name, case):
    ep, x, out_scale = int8_edge_program(case)
    original = copy.deepcopy(ep).module()
    assert run_pass(fix_name, ep) is True
    rewritten = ep.module()
    with torch.no_grad():
        ref, out = original(x), rewritten(x)
    assert out.shape == ref.shape
    assert (out - ref).abs().max().item() <= out_scale * 1.0001  # the int8 policy: one step
    if fix_name == "vk-q8-per-tensor-weight":  # the same dequantized weight: bit-identical
        assert torch.equal(out, ref)
    snap = snapshot(ep)
    assert run_pass(fix_name, ep) is False and snapshot(ep) == snap


@pytest.mark.slow  # pt2e quantization: seconds per case
def test_per_tensor_weight_dequantizes_to_the_same_bits():
    ep, _, _ = int8_edge_program(q8(4, 4, 3, (1, 4, 8, 8), "int8_per_tensor"))
    (c,) = convs(ep)
    dq = c.args[1]
    w = ep.state_dict.get(ep.graph_signature.inputs_to_buffers.get(dq.args[0].name))
    before = torch.ops.quantized_decomposed.dequantize_per_tensor(w, *dq.args[1:])
    run_pass("vk-q8-per-tensor-weight", ep)
    (c,) = convs(ep)
    dq = c.args[1]
    assert "dequantize_per_channel" in str(dq.target)
    consts = {**ep.state_dict, **ep.constants}
    sig = ep.graph_signature.inputs_to_buffers
    scales, zeros = consts[sig[dq.args[1].name]], consts[sig[dq.args[2].name]]
    assert scales.dtype == torch.float32 and zeros.dtype == torch.int64 and scales.shape == (4,)
    after = torch.ops.quantized_decomposed.dequantize_per_channel(w, scales, zeros, *dq.args[3:])
    assert torch.equal(before, after)


@pytest.mark.slow  # pt2e quantization: seconds per case
def test_batch_split_gives_each_sample_its_own_weight():
    ep, _, _ = int8_edge_program(q8(3, 6, 3, (3, 3, 8, 8), "int8_per_channel"))
    run_pass("vk-q8-batch-split", ep)
    pieces = convs(ep)
    assert len(pieces) == 3
    assert len({c.args[1].args[0] for c in pieces}) == 3  # no shared weight placeholder
    assert all(c.args[0].meta["val"].shape[0] == 1 for c in pieces)
    assert [n for n in ep.graph_module.graph.nodes if n.op == "placeholder" and not n.users] == []


# ------------------------------------------------------------------- delegation (lowering)

DELEGATED = {
    "vk-dw-edge-pad": ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=7, padding=3,
                               groups=4, input_shape=(1, 4, 8, 8)),
    "vk-grouped-split": ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, padding=1,
                                 groups=2, input_shape=(1, 4, 8, 8)),
    "vk-dw-sned-widen": ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=7, stride=2,
                                 padding=3, groups=4, input_shape=(1, 4, 10, 10)),
    "vk-q8-per-tensor-weight": q8(4, 4, 3, (1, 4, 8, 8), "int8_per_tensor"),
    "vk-q8-batch-split": q8(3, 6, 3, (2, 3, 8, 8), "int8_per_channel"),
}


@pytest.mark.slow
@pytest.mark.parametrize("fix_name", DELEGATED)
def test_rewritten_conv_stays_in_the_delegate(fix_name):
    from harness.stages.cell import prepare

    prepared = prepare(DELEGATED[fix_name], Lane("vulkan", (fix_name,)))
    assert prepared.status in (None, "NO_RUNTIME"), (prepared.status, prepared.message)
    assert prepared.undelegated_ops == {}, prepared.undelegated_ops
    assert prepared.delegated_ops.get("aten.convolution", 0) >= 1


# ------------------------------------- vk-q8-per-tensor-weight makes no cell worse (issue 39)

# Where q8ta itself is wrong (batch > 1: known issue vulkan-q8ta-conv-batch; a channels-last
# program input: the delegate reads inputs as NCHW) the fix must leave the stock LOWER_ERROR.
ISSUE_39_CELL = ConvCase.from_dict({  # `--fixes each` measured it LOWER_ERROR -> MISMATCH
    "dim": 2, "in_channels": 4, "out_channels": 3, "kernel_size": 4, "padding": "same",
    "padding_mode": "circular", "dilation": [3, 2], "input_shape": [2, 4, 11, 10],
    "quant": "int8_per_tensor", "epilogue": [["clamp", None, 1.0]], "memory_format": "channels_last"})
PER_TENSOR_LEFT_ALONE = {
    "the issue 39 cell": ISSUE_39_CELL,
    "batch 2": q8(4, 4, 3, (2, 4, 8, 8), "int8_per_tensor"),
    "channels-last input": q8(4, 3, 4, (1, 4, 11, 10), "int8_per_tensor",
                              memory_format="channels_last"),
    "channels-last input, circular": ConvCase.from_dict(
        {**ISSUE_39_CELL.to_dict(), "input_shape": [1, 4, 11, 10], "epilogue": []}),
}


@pytest.mark.slow  # pt2e quantization: seconds per case
@pytest.mark.parametrize("control", PER_TENSOR_LEFT_ALONE)
def test_per_tensor_weight_leaves_batch_and_channels_last_alone(control):
    ep, _, _ = int8_edge_program(PER_TENSOR_LEFT_ALONE[control])
    before = snapshot(ep)
    assert run_pass("vk-q8-per-tensor-weight", ep) is False and snapshot(ep) == before


@pytest.mark.slow  # pt2e quantization: seconds per case
def test_batch_split_then_per_tensor_weight_converts_every_sample():
    """A lane runs its fixes sorted: the batch split first, then this fix on its batch-1 convs."""
    assert Lane("vulkan", ("vk-q8-per-tensor-weight", "vk-q8-batch-split")).fixes == (
        "vk-q8-batch-split", "vk-q8-per-tensor-weight")
    ep, _, _ = int8_edge_program(q8(4, 4, 3, (2, 4, 8, 8), "int8_per_tensor"))
    assert run_pass("vk-q8-batch-split", ep) is True
    assert run_pass("vk-q8-per-tensor-weight", ep) is True
    pieces = convs(ep)
    assert len(pieces) == 2
    assert all("dequantize_per_channel" in str(c.args[1].target) for c in pieces)


@pytest.mark.slow  # lowers and executes on the Vulkan runtime
@pytest.mark.parametrize("control", PER_TENSOR_LEFT_ALONE)
def test_per_tensor_weight_makes_no_cell_worse(control, vulkan_runtime):
    """`--fixes each`'s rule (results/matrix.py made_worse): a fix never turns a cell from passing
    to failing, nor a loud failure into a MISMATCH."""
    from harness.results.matrix import made_worse
    from harness.stages.cell import run_cell

    case = PER_TENSOR_LEFT_ALONE[control]
    stock = run_cell(case, "vulkan", ())
    fixed = run_cell(case, "vulkan", ("vk-q8-per-tensor-weight",))
    assert not made_worse(stock.status, fixed.status), (stock.status, fixed.status, fixed.message)


# The cells the fix turns PASS (LOWER_ERROR -> PASS: the minimal 3x3, the 1x1 stride 2, batch 2
# with vk-q8-batch-split, a channels-last module with a contiguous input) are delegate statuses:
# pinned in cases/vulkan_graph_fixes.json, which cases/test_corpus.py checks.


# ------------------------------- vk-channels-last-input: a channels-last program input (issue 39)

CHANNELS_LAST = torch.channels_last


def dim_order_copies(ep):
    return [n for n in ep.graph_module.graph.nodes
            if n.op == "call_function" and "_to_dim_order_copy" in str(n.target)]


def test_channels_last_input_is_copied_to_contiguous_and_the_output_back():
    """The program's input and output keep their channels-last dim order; everything between
    (what the delegate will get) is contiguous; eager computes the same numbers, bit for bit."""
    module, x = int_module(conv(4, 8, 3, padding=1), (1, 4, 8, 8))
    x = x.to(memory_format=CHANNELS_LAST)
    ep = edge_program(module, x)
    original = copy.deepcopy(ep).module()
    assert run_pass("vk-channels-last-input", ep) is True
    to_contiguous, back = dim_order_copies(ep)
    assert to_contiguous.kwargs["dim_order"] == [0, 1, 2, 3] and to_contiguous.args[0].op == "placeholder"
    assert back.kwargs["dim_order"] == [0, 2, 3, 1] and list(back.users)[0].op == "output"
    (c,) = convs(ep)
    assert c.args[0] is to_contiguous
    assert c.meta["val"].is_contiguous() and to_contiguous.meta["val"].is_contiguous()
    placeholder = to_contiguous.args[0]
    assert tuple(placeholder.meta["val"].dim_order()) == (0, 2, 3, 1)
    assert tuple(back.meta["val"].dim_order()) == (0, 2, 3, 1)
    assert [s.arg.name for s in ep.graph_signature.output_specs] == [back.name]
    with torch.no_grad():
        ref = module(x)
        out = ep.module()(x)
        assert torch.equal(original(x), ref) and torch.equal(out, ref)
        assert out.is_contiguous(memory_format=CHANNELS_LAST)
    # idempotent: a second run finds the input read by its copy only
    snap = snapshot(ep)
    assert run_pass("vk-channels-last-input", ep) is False and snapshot(ep) == snap


def test_channels_last_module_with_a_contiguous_input_is_left_alone():
    """Only user inputs are copied: a channels-last weight (a lifted parameter) is not."""
    module, x = int_module(conv(4, 8, 3, padding=1), (1, 4, 8, 8))
    ep = edge_program(module.to(memory_format=CHANNELS_LAST), x)
    before = snapshot(ep)
    assert run_pass("vk-channels-last-input", ep) is False and snapshot(ep) == before


def test_the_partitioner_declines_dim_order_changing_copies_only_while_lowering():
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanSupportedOperators
    from harness.stages.fixes.vk_channels_last_input import _changes_dim_order

    module, x = int_module(conv(4, 8, 3, padding=1), (1, 4, 8, 8))
    ep = edge_program(module, x.to(memory_format=CHANNELS_LAST))
    run_pass("vk-channels-last-input", ep)
    assert [_changes_dim_order(n) for n in dim_order_copies(ep)] == [True, True]
    assert not any(_changes_dim_order(n) for n in convs(ep))
    stock = VulkanSupportedOperators._is_node_supported
    with decline_dim_order_changes():
        assert VulkanSupportedOperators._is_node_supported is not stock
    assert VulkanSupportedOperators._is_node_supported is stock  # restored: nothing leaks
    assert fixes.get("vk-channels-last-input").patch is not None


@pytest.mark.slow  # lowers with the Vulkan partitioner
def test_channels_last_fix_keeps_the_conv_delegated_and_the_copies_outside():
    from harness.stages.cell import prepare

    case = ConvCase.from_dict({"dim": 2, "in_channels": 4, "out_channels": 8, "kernel_size": 3,
                               "padding": 1, "input_shape": [1, 4, 8, 8],
                               "memory_format": "channels_last"})
    prepared = prepare(case, Lane("vulkan", ("vk-channels-last-input",)))
    assert prepared.undelegated_ops == {"dim_order_ops._to_dim_order_copy": 2}, prepared.undelegated_ops
    assert prepared.delegated_ops.get("aten.convolution", 0) >= 1


# ---------------------- vk-channels-last-weight: a channels-last module's weight (issue 39)

def weight_placeholder(ep):
    (c,) = convs(ep)
    return c, c.args[1]


@pytest.mark.parametrize("cin,shape", [(4, (1, 4, 8, 8)), (1, (1, 1, 4, 4))],
                         ids=["C_in 4", "C_in 1 (the nightly cell: same bytes, channels-last strides)"])
def test_channels_last_weight_becomes_contiguous_with_the_same_values(cin, shape):
    """The weight (state dict and fake value) and the conv's output become contiguous; the
    weight's values and eager's numbers are unchanged, bit for bit; idempotent."""
    module, x = int_module(conv(cin, 8, 3, padding=2, dilation=2), shape)
    module = module.to(memory_format=CHANNELS_LAST)
    ep = edge_program(module, x)
    original = copy.deepcopy(ep).module()
    c, w = weight_placeholder(ep)
    assert tuple(w.meta["val"].dim_order()) == (0, 2, 3, 1)
    assert tuple(c.meta["val"].dim_order()) == (0, 2, 3, 1)  # the weight made the output CL
    key = ep.graph_signature.inputs_to_parameters[w.name]
    before = ep.state_dict[key].detach().clone()
    assert run_pass("vk-channels-last-weight", ep) is True
    c, w2 = weight_placeholder(ep)
    assert w2 is w and ep.graph_signature.inputs_to_parameters[w.name] == key
    weight = ep.state_dict[key]
    assert isinstance(weight, torch.nn.Parameter)
    assert weight.is_contiguous() and weight.stride() == (cin * 9, 9, 3, 1)
    assert torch.equal(weight, before)
    assert tuple(w.meta["val"].dim_order()) == (0, 1, 2, 3)
    assert tuple(c.meta["val"].dim_order()) == (0, 1, 2, 3)
    (out,) = next(n for n in ep.graph_module.graph.nodes if n.op == "output").args[0]
    assert tuple(out.meta["val"].dim_order()) == (0, 1, 2, 3)
    with torch.no_grad():
        ref = module(x)
        assert torch.equal(original(x), ref) and torch.equal(ep.module()(x), ref)
    snap = snapshot(ep)
    assert run_pass("vk-channels-last-weight", ep) is False and snapshot(ep) == snap


def test_channels_last_weight_is_a_no_op_for_a_contiguous_module():
    """A contiguous module, with a contiguous or a channels-last input: nothing modified (the
    input is vk-channels-last-input's)."""
    for memory_format in (torch.contiguous_format, CHANNELS_LAST):
        module, x = int_module(conv(4, 8, 3, padding=1), (1, 4, 8, 8))
        ep = edge_program(module, x.to(memory_format=memory_format))
        before = snapshot(ep)
        assert run_pass("vk-channels-last-weight", ep) is False and snapshot(ep) == before


def test_channels_last_weight_and_input_together_leave_every_boundary_contiguous_inside():
    """Both fixes on a channels-last module fed a channels-last input, in the order a lane runs
    them (the weight fix first, ``runs_after``): the conv sees a contiguous input and weight and
    writes a contiguous output; same numbers. The input fix first would leave the conv reading
    a contiguous input beside a channels-last weight: it declines that (no-op)."""
    order = fixes.ordered(["vk-channels-last-input", "vk-channels-last-weight"])
    assert order == ["vk-channels-last-weight", "vk-channels-last-input"]
    module, x = int_module(conv(4, 8, 3, padding=1), (1, 4, 8, 8))
    module, x = module.to(memory_format=CHANNELS_LAST), x.to(memory_format=CHANNELS_LAST)
    ep = edge_program(module, x)
    before = snapshot(ep)
    assert run_pass("vk-channels-last-input", ep) is False and snapshot(ep) == before
    for name in order:
        assert run_pass(name, ep) is True, name
    c, w = weight_placeholder(ep)
    assert all(v.is_contiguous() for v in (c.args[0].meta["val"], w.meta["val"], c.meta["val"]))
    with torch.no_grad():
        assert torch.equal(ep.module()(x), module(x))


# ----------------------------------- dynamic programs stay dynamic under every fix (issue 39)

def dynamic_edge_program(module, x, dims):
    from executorch.exir import to_edge

    shapes = ({a: torch.export.Dim(f"d{a}", min=1, max=8 if a == 0 else 64) for a in dims},)
    return to_edge(torch.export.export(module.eval(), (x,), dynamic_shapes=shapes)).exported_program()


DYNAMIC = {  # the nightly's cell (PASS stock, CRASH with vk-conv1d-pw-stride-pad), pointwise twins
    "conv1d k5 g3 dil 2, dynamic batch": (torch.nn.Conv1d(3, 9, 5, dilation=2, groups=3),
                                         (2, 3, 17), (0,)),
    "conv1d k1 stride 2, dynamic batch": (torch.nn.Conv1d(4, 8, 1, stride=2), (2, 4, 9), (0,)),
    "conv1d k1 pad 1, dynamic length": (torch.nn.Conv1d(4, 8, 1, padding=1), (1, 4, 9), (2,)),
    "dw 7x7 p3, dynamic batch": (conv(4, 4, 7, padding=3, groups=4), (2, 4, 8, 8), (0,)),
    "grouped 3x3, dynamic height": (conv(4, 4, 3, padding=1, groups=2), (1, 4, 8, 8), (2,)),
}


@pytest.mark.parametrize("control", DYNAMIC)
def test_every_vulkan_graph_fix_leaves_a_dynamic_program_dynamic(control):
    """A fix reading a conv of a dynamic program must not guard on its sizes: ``int()`` of a
    SymInt specializes the symbol in the ShapeEnv that every copy of the program shares, and
    the lowered program comes out static (the runtime then aborts at any other size: "Attempted
    to resize a static tensor", issue 39). The Vulkan graph fixes leave such a conv alone."""
    from executorch.exir.pass_base import ExportedProgramPassBase

    from harness.stages.fixes.vk_conv1d_pw_stride_pad import PointwiseConv1dExplicitStridePadPass
    from harness.stages.fixes.vk_util import conv_args

    module, shape, dims = DYNAMIC[control]
    torch.manual_seed(0)
    exported = dynamic_edge_program(module, torch.randn(shape), dims)

    def symbolic(ep):
        (out,) = next(n for n in ep.graph_module.graph.nodes if n.op == "output").args[0]
        return [a for a in dims if not isinstance(out.meta["val"].shape[a], int)]

    assert symbolic(exported) == list(dims)
    passes = dict(PASSES, **{"vk-conv1d-pw-stride-pad": PointwiseConv1dExplicitStridePadPass})
    for fix_name, pass_type in passes.items():
        ep = copy.deepcopy(exported)
        p = pass_type()
        result = p(ep) if isinstance(p, ExportedProgramPassBase) else p(ep.graph_module)
        assert result.modified is False, fix_name
        assert symbolic(ep) == list(dims), fix_name
        assert symbolic(exported) == list(dims), f"{fix_name} specialized the shared ShapeEnv"
    assert [conv_args(c, len(shape) - 2) for c in convs(exported)] == [None]


def _padding_arg(ep) -> list:
    conv = next(n for n in ep.graph_module.graph.nodes if "convolution" in str(n.target))
    return list(conv.args[4])


def test_the_int_list_broadcast_leaves_a_channels_last_conv_alone_unless_made_contiguous():
    """vulkan-conv-padding: past make_ivec2 a channels-last conv would be read as NCHW (silent
    wrong values where stock fails loudly), so it is left alone; after vk-channels-last-input
    (which sorts before it in a lane) its tensors are contiguous and it is broadcast."""
    module = torch.nn.Conv2d(4, 8, 3, padding="valid")
    x = torch.randn(1, 4, 6, 6)
    def broadcast(ep) -> bool:  # the fix's pass, as lowering runs it (cases/seed.json has its cells)
        return BroadcastConvIntListsPass()(ep.graph_module).modified

    plain = edge_program(module, x)
    assert broadcast(plain) and _padding_arg(plain) == [0, 0]
    cl = edge_program(module, x.to(memory_format=torch.channels_last))
    assert not broadcast(cl) and _padding_arg(cl) == [0]
    assert fixes.all_for("vulkan").index("vk-channels-last-input") \
        < fixes.all_for("vulkan").index("vulkan-conv-padding")
    assert run_pass("vk-channels-last-input", cl)
    assert broadcast(cl) and _padding_arg(cl) == [0, 0]


# ---------------------------------------------------------------- vk-tconv-dilation

def delegated_convs(module, x, fix=None):
    """Whether the Vulkan partitioner takes ``module``'s one conv (1) or not (0), lowering only,
    with ``fix``'s patch active or not."""
    import contextlib

    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.export(module.eval(), (x,))
    with fix.patch() if fix else contextlib.nullcontext():
        edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()])
    return 1 - len(convs(edge.exported_program()))


@pytest.mark.parametrize("module, shape, declined", [
    pytest.param(torch.nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1, dilation=2),
                 (1, 4, 6, 6), True, id="transposed-dilation-2"),
    pytest.param(torch.nn.ConvTranspose2d(4, 4, (3, 2), dilation=(1, 3)), (1, 4, 5, 7), True,
                 id="transposed-dilation-1x3"),
    pytest.param(torch.nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1), (1, 4, 6, 6), False,
                 id="transposed-undilated"),
    pytest.param(torch.nn.Conv2d(4, 8, 3, padding=2, dilation=2), (1, 4, 8, 8), False,
                 id="forward-dilated"),
])
def test_tconv_dilation_declines_only_dilated_transposed_convs(module, shape, declined):
    """The partitioner takes every one of these stock; with the fix's patch it leaves exactly the
    dilated transposed ones outside (what Convolution.cpp check_conv2d_params refuses), and the
    partitioner is itself again afterwards."""
    from executorch.backends.vulkan.partitioner import vulkan_partitioner as vp

    fix = fixes.get("vk-tconv-dilation")
    assert fix.backends == ("vulkan",) and fix.kind == "graph"
    assert "cases/vulkan_graph_fixes.json" in fix.verified
    original = vp.VulkanSupportedOperators._is_node_supported
    x = torch.randn(*shape)
    assert delegated_convs(module, x) == 1
    assert delegated_convs(module, x, fix) == (0 if declined else 1)
    assert vp.VulkanSupportedOperators._is_node_supported is original
