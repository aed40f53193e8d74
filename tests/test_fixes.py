"""The two seed fixes, on real lowering: what they rewrite and what the delegate then gets."""

import pytest
import torch

from harness.stages import fixes
from harness.stages.backends import get
from harness.stages.backends.vulkan import vk_graphs
from harness.stages.build import build_module, make_inputs
from harness.stages.lower import lower
from harness.lane import Lane
from harness.stages.cell import prepare, run_cell
from harness.stages.quantize import quantize
from harness.spec import ConvCase
from honest import assert_executed, assert_honest

VK_FIX = "vulkan-conv-padding"
XNN_FIX = "xnnpack-conv1d-same-even"


def conv2d(**kw):
    base = dict(dim=2, in_channels=3, out_channels=8, kernel_size=3, input_shape=(1, 3, 16, 16))
    return ConvCase(**{**base, **kw})


def vk_signature(case, fix_names):
    """Op names and every non-tensor argument of the serialized Vulkan graph."""
    exported = torch.export.export(build_module(case), make_inputs(case))
    graph = vk_graphs(lower(exported, get("vulkan"), fix_names).edge_manager)[0]
    return [(op.name, [getattr(graph.values[a].value, "items", type(graph.values[a].value).__name__)
                       for a in op.args]) for op in graph.chain]


def test_registry_and_parse():
    assert {VK_FIX, XNN_FIX} <= set(fixes.names())  # every registered fix, not a fixed count
    assert fixes.parse("all") == fixes.names() == sorted(fixes.names())
    assert fixes.parse(f"{XNN_FIX}, {VK_FIX},{VK_FIX}") == [VK_FIX, XNN_FIX]
    for name in fixes.names():  # what `harness fixes` lists: each says its kind, bug, evidence
        fix = fixes.get(name)
        assert fix.name == name and fix.backends and fix.summary, name
        assert fix.kind in ("graph", "runtime") and fix.bug and fix.verified, name
    assert fixes.for_backend([VK_FIX, XNN_FIX], "vulkan") == [VK_FIX]
    with pytest.raises(KeyError, match="unknown fix 'nope'"):
        fixes.parse("nope")


def test_fixes_that_need_program_passes_are_left_out_where_executorch_has_none(monkeypatch):
    """executorch 1.3.1 has no ExportedProgramPassBase: the fixes that add a constant say why
    they cannot run, "all" leaves them out, naming one is a one-line error, the releases view
    reads "unavailable" for their lanes in that release."""
    import pandas as pd

    from harness.results import releases
    from harness.stages.fixes import vk_util

    assert fixes.unavailable() == {}  # the installed release runs every fix
    monkeypatch.setattr(vk_util, "ProgramPass", None)
    gone = fixes.unavailable()
    assert {"vk-grouped-split", "vk-q8-batch-split"} <= set(gone) < set(fixes.names())
    assert all("no program passes" in why and "\n" not in why for why in gone.values())
    assert not set(fixes.parse("all")) & set(gone) and VK_FIX in fixes.parse("all")
    with pytest.raises(KeyError, match="fix vk-grouped-split cannot run here: executorch"):
        fixes.parse(f"{VK_FIX},vk-grouped-split")
    row = dict(case_id="c", backend="vulkan", status="PASS")
    new = pd.DataFrame([dict(row, fixes=""), dict(row, fixes="vk-grouped-split")])
    old = pd.DataFrame([dict(row, fixes="")])
    old.attrs["fixes_unavailable"] = gone
    table = releases.counts([("1.3.1", old), ("1.5.1", new)])
    lane = next(i for i in table.index if "vk-grouped-split" in i)
    assert table.loc[lane, "1.3.1"].startswith("unavailable: executorch")
    assert table.loc[lane, "1.5.1"] == "PASS 1"


def test_valid_with_fix_serializes_exactly_like_padding_zero():
    fixed_valid = vk_signature(conv2d(padding="valid"), [VK_FIX])
    stock_zero = vk_signature(conv2d(padding=0), [])
    assert fixed_valid == stock_zero
    conv = next(args for name, args in stock_zero if "convolution" in name)
    assert [0, 0] in conv


def test_fix_changes_nothing_for_padding_zero():
    assert vk_signature(conv2d(padding=0), [VK_FIX]) == vk_signature(conv2d(padding=0), [])


@pytest.mark.parametrize("kw", [dict(padding="valid"), dict(padding=(1,)), dict(padding=[2]),
                                dict(padding="same"), dict(padding="same", kernel_size=4),
                                dict(stride=(2,), padding=1), dict(dilation=[2], padding=(0,))])
def test_vulkan_fix_makes_every_list_ivec2(kw):
    case = conv2d(**kw)
    fixed = prepare(case, Lane("vulkan", (VK_FIX,)))
    assert fixed.status is None, fixed.message
    for name, args in vk_signature(case, [VK_FIX]):
        if "convolution" in name:
            assert all(len(a) == 2 for a in args if isinstance(a, list)), args
    if case.has_short_int_list():
        assert prepare(case, Lane("vulkan")).status == "CONTRACT_VIOLATION"


def quant_conv1d_same(k=4, dilation=1, length=16, scheme="int8_per_tensor"):
    return ConvCase(dim=1, in_channels=4, out_channels=4, kernel_size=k, dilation=dilation,
                    padding="same", input_shape=(1, 4, length), quant=scheme)


def edge_graph_after_fix(case):
    from executorch.exir import to_edge_transform_and_lower

    from harness.stages.fixes.xnnpack_conv1d_same_even import FoldTemporalPadIntoConv1dPass

    module, inputs = build_module(case), make_inputs(case)
    converted, _ = quantize(case, module, inputs, get("xnnpack"))
    exported = torch.export.export(converted, inputs)
    edge = to_edge_transform_and_lower(exported, transform_passes=[FoldTemporalPadIntoConv1dPass()])
    return edge.exported_program().graph_module.graph


def test_xnnpack_fix_rewrites_the_graph():
    graph = edge_graph_after_fix(quant_conv1d_same(k=4))
    targets = [str(n.target) for n in graph.nodes if n.op == "call_function"]
    assert not any("constant_pad_nd" in t for t in targets)
    conv = next(n for n in graph.nodes if "convolution" in str(n.target))
    # "same" with k=4 is pad left 1, right 2: symmetric 2 on both sides, then crop 1 on the left.
    assert list(conv.args[4]) == [2]
    crop = next(n for n in graph.nodes if "slice_copy" in str(n.target))
    assert crop.args[1:] == (-1, 1, 17)
    assert list(crop.meta["val"].shape) == [1, 4, 16]
    assert "dequantize" in str(crop.args[0].target)  # the crop works on exact int8 values


@pytest.mark.parametrize("scheme", ["int8_per_tensor", "int8_per_channel"])
@pytest.mark.parametrize("k, dilation, length", [(4, 1, 16), (2, 3, 9), (6, 1, 5)])
def test_xnnpack_fix_lane_is_the_folded_program_and_honest(scheme, k, dilation, length):
    """The fixed lane's row: produced, labelled, the pad folded away by the fix (no
    constant_pad_nd anywhere in the program), honest in output steps. Its status on this release
    is the corpus's (cases/xnnpack_conv1d_same_even.json, cases/from_tests.json)."""
    case = quant_conv1d_same(k, dilation, length, scheme)
    row = run_cell(case, "xnnpack", [XNN_FIX])
    assert row.fixes == XNN_FIX and row.backend == "xnnpack"
    status = assert_executed(row)
    assert status != "LOWER_ERROR", row.message  # the rewritten graph lowers
    assert "aten.constant_pad_nd" not in {**row.delegated_ops, **row.undelegated_ops}, row
    if status in ("PASS", "MISMATCH"):
        assert (row.error_steps <= 1 + 1e-5) == (status == "PASS")  # one output step


def test_xnnpack_fix_leaves_fp32_and_odd_kernels_alone():
    for case in (ConvCase(dim=1, in_channels=4, out_channels=4, kernel_size=4, padding="same",
                          input_shape=(1, 4, 16)),
                 quant_conv1d_same(k=3)):
        stock = run_cell(case, "xnnpack", [])
        fixed = run_cell(case, "xnnpack", [XNN_FIX])
        # a no-op: the same program, so the same verdict (what that verdict is: the corpus)
        assert fixed.fixes == XNN_FIX and stock.fixes == ""
        assert (fixed.delegated_ops, fixed.undelegated_ops) == (stock.delegated_ops,
                                                                stock.undelegated_ops)
        assert fixed.pte_size_kb == stock.pte_size_kb
        assert fixed.status == stock.status, (stock.message, fixed.message)
        assert_honest(fixed)


# ------------------------------------------- vk-conv1d-pw-stride-pad (issue 39: Conv1dPW.cpp)

PW1D = "vk-conv1d-pw-stride-pad"


def _edge_program(module, x):
    from executorch.exir import to_edge

    return to_edge(torch.export.export(module.eval(), (x,))).exported_program()


def _int_conv1d(*args, seed=0, **kw):
    """A Conv1d with integer-valued weights (every product and sum exact in float32)."""
    module = torch.nn.Conv1d(*args, **kw)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randint(-4, 5, p.shape, generator=gen).float())
    return module.eval()


@pytest.mark.parametrize("kw, length", [(dict(stride=2), 9), (dict(padding=1), 9),
                                        (dict(stride=3, padding=2, dilation=2), 10),
                                        (dict(stride=2, padding=3, bias=False), 1)])
def test_vk_conv1d_pw_rewrite_is_exact_and_idempotent(kw, length):
    from harness.stages.fixes.vk_conv1d_pw_stride_pad import PointwiseConv1dExplicitStridePadPass

    module = _int_conv1d(4, 8, 1, **kw)
    x = torch.randint(-4, 5, (2, 4, length), generator=torch.Generator().manual_seed(1)).float()
    ep = _edge_program(module, x)
    assert PointwiseConv1dExplicitStridePadPass()(ep.graph_module).modified is True
    (conv,) = [n for n in ep.graph_module.graph.nodes if "aten.convolution" in str(n.target)]
    assert (list(conv.args[3]), list(conv.args[4]), list(conv.args[5])) == ([1], [0], [1])
    assert list(conv.meta["val"].shape) == list(module(x).shape)
    with torch.no_grad():
        assert torch.equal(ep.module()(x), module(x))
    assert PointwiseConv1dExplicitStridePadPass()(ep.graph_module).modified is False


@pytest.mark.parametrize("module", [torch.nn.Conv1d(4, 8, 1), torch.nn.Conv1d(4, 8, 3, stride=2),
                                    torch.nn.Conv1d(4, 8, 1, stride=2, groups=2),
                                    torch.nn.Conv2d(4, 8, 1, stride=2),
                                    torch.nn.Conv1d(4, 8, 1, stride=2).to(torch.bfloat16)],
                         ids=["k1-s1-p0", "k3", "grouped", "conv2d", "bf16"])
def test_vk_conv1d_pw_fix_leaves_other_convs_alone(module):
    from harness.stages.fixes.vk_conv1d_pw_stride_pad import PointwiseConv1dExplicitStridePadPass

    shape = (1, 4, 9, 9) if isinstance(module, torch.nn.Conv2d) else (1, 4, 9)
    ep = _edge_program(module, torch.randn(shape).to(next(module.parameters()).dtype))
    before = str(ep.graph_module.graph)
    assert PointwiseConv1dExplicitStridePadPass()(ep.graph_module).modified is False
    assert str(ep.graph_module.graph) == before
    fix = fixes.get(PW1D)
    assert fix.backends == ("vulkan",) and fix.kind == "graph" and PW1D in fixes.parse("all")
