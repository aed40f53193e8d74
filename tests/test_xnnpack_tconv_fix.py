"""xnnpack-tconv-output-padding: transposed conv with stride <= output_padding < dilation.

XNNPACK needs output_padding < stride; the pass appends output_padding // stride zero rows to the
conv's input and keeps output_padding % stride. Here: it is a no-op wherever the bug cannot
happen, the rewritten edge graph computes exactly what the original does in eager, and (slow)
the fixed lane hands XNNPACK the padded program (stock and fixed statuses: the corpus).
"""

import pytest
import torch

from harness.spec import ConvCase
from honest import assert_executed
from harness.stages import fixes
from harness.stages.fixes.xnnpack_tconv_output_padding import (
    TransposedConvOutputPaddingPass,
    rewrite_plan,
)

FIX = "xnnpack-tconv-output-padding"
MODULES = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}


def edge_program(module, x):
    from executorch.exir import to_edge

    return to_edge(torch.export.export(module.eval(), (x,))).exported_program()


def convs(graph):
    return [n for n in graph.nodes if n.op == "call_function" and "convolution" in str(n.target)]


def tconv(dim, cin, cout, k, *, shape, stride=1, padding=0, dilation=1, output_padding=0,
          groups=1, bias=True):
    return MODULES[dim](cin, cout, k, stride=stride, padding=padding, output_padding=output_padding,
                        groups=groups, bias=bias, dilation=dilation), torch.randn(*shape)


def test_registered_for_xnnpack_only():
    fix = fixes.get(FIX)
    assert fix.backends == ("xnnpack",)
    assert "output_padding" in fix.summary and "stride" in fix.summary
    assert [type(p) for p in fix.transform_passes()] == [TransposedConvOutputPaddingPass]
    assert fixes.for_backend([FIX], "vulkan") == []


CONTROLS = {
    "convT1d op0 d2": dict(dim=1, cin=1, cout=1, k=2, dilation=2, shape=(1, 1, 5)),
    "convT1d op1 < s2": dict(dim=1, cin=1, cout=1, k=2, stride=2, output_padding=1, bias=False,
                             shape=(1, 1, 5)),
    "convT2d op(1,2) < s(2,3), d3": dict(dim=2, cin=2, cout=4, k=3, stride=(2, 3), dilation=3,
                                         output_padding=(1, 2), padding=1, shape=(1, 2, 4, 4)),
    "convT3d op1 >= s1 (not delegated by XNNPACK)": dict(dim=3, cin=1, cout=1, k=2, dilation=2,
                                                         output_padding=1, shape=(1, 1, 3, 3, 3)),
}


@pytest.mark.parametrize("kw", CONTROLS.values(), ids=CONTROLS.keys())
def test_no_op_where_the_bug_cannot_happen(kw):
    torch.manual_seed(0)
    ep = edge_program(*tconv(**kw))
    gm = ep.graph_module
    before = (str(gm.graph), gm.code, [dict(n.meta) for n in gm.graph.nodes])
    assert rewrite_plan(convs(gm.graph)[0]) is None
    result = TransposedConvOutputPaddingPass()(gm)
    assert result.modified is False
    assert (str(gm.graph), gm.code, [dict(n.meta) for n in gm.graph.nodes]) == before


def test_no_op_on_a_forward_conv():
    torch.manual_seed(0)
    gm = edge_program(torch.nn.Conv1d(2, 2, 3, dilation=3), torch.randn(1, 2, 9)).graph_module
    before = str(gm.graph)
    assert TransposedConvOutputPaddingPass()(gm).modified is False
    assert str(gm.graph) == before


def test_rewrite_of_the_minimal_case():
    """ConvTranspose1d(1, 1, 1, dilation=3, output_padding=1) on 1x1x1: one zero row appended to
    the input, output_padding 0; every new or changed node's meta["val"] is its real shape."""
    torch.manual_seed(0)
    ep = edge_program(*tconv(1, 1, 1, 1, dilation=3, output_padding=1, bias=False, shape=(1, 1, 1)))
    gm = ep.graph_module
    assert TransposedConvOutputPaddingPass()(gm).modified is True
    conv = convs(gm.graph)[0]
    pad = conv.args[0]
    assert "constant_pad_nd" in str(pad.target)
    assert pad.args[1:] == ([0, 1], 0.0)
    assert list(pad.meta["val"].shape) == [1, 1, 2]
    assert list(conv.args[7]) == [0]  # output_padding, now < stride
    assert list(conv.meta["val"].shape) == [1, 1, 2]  # what eager gives
    assert TransposedConvOutputPaddingPass()(gm).modified is False  # idempotent


def test_only_offending_dims_are_padded():
    torch.manual_seed(0)
    # dim 0: op 1 < s 2 (kept); dim 1: op 3 >= s 1 -> 3 zero columns, op 0.
    gm = edge_program(*tconv(2, 3, 4, 3, stride=(2, 1), dilation=(1, 4), output_padding=(1, 3),
                             padding=1, shape=(1, 3, 5, 6))).graph_module
    TransposedConvOutputPaddingPass()(gm)
    conv = convs(gm.graph)[0]
    assert conv.args[0].args[1] == [0, 3, 0, 0]  # last dim first
    assert list(conv.args[7]) == [1, 0]


# (dim, cin, cout, k, stride, padding, dilation, output_padding, groups, bias, input shape)
EXACT = [
    (1, 1, 1, 1, 1, 0, 3, 1, 1, False, (1, 1, 1)),      # the minimal case
    (1, 2, 3, 3, 1, 1, 3, 2, 1, True, (2, 2, 6)),       # op > p, bias, batch 2
    (1, 2, 3, 2, 1, 2, 3, 1, 1, True, (1, 2, 7)),       # op <= p
    (1, 4, 6, 3, 2, 1, 4, 3, 2, True, (1, 4, 6)),       # op 3 = 1 * s 2 + 1, groups 2
    (2, 4, 4, 3, 1, 1, 2, 1, 2, True, (1, 4, 5, 5)),    # 2d, groups 2, bias
    (2, 2, 2, 2, (1, 2), (1, 0), 3, (2, 2), 1, False, (1, 2, 4, 5)),
    (2, 3, 5, 3, (2, 1), (0, 2), (3, 4), (2, 3), 1, True, (2, 3, 4, 5)),
    (2, 4, 4, 3, 1, 1, 3, 2, 4, True, (1, 4, 6, 6)),    # depthwise
]


@pytest.mark.parametrize("cfg", EXACT, ids=lambda c: "conv%dd_k%s_s%s_p%s_d%s_op%s_g%s_b%d" % (
    c[0], c[3], c[4], c[5], c[6], c[7], c[8], c[9]))
def test_rewritten_graph_is_exact_in_eager(cfg):
    """Bit-identity of the rewritten edge graph against the original, in eager.

    Two inputs. (1) Integer-valued weights and inputs: every product and partial sum is exact
    in float32, so any summation order gives the same bits and equality tests the rewrite's
    arithmetic (window, output shape, bias-only rows) whatever kernel eager picks. (2) Random
    floats with oneDNN disabled on both sides (with it, eager may pick another convolution
    kernel for the padded input's shape, which rounds differently: 1.3e-7 relative over a
    1,214-config sweep): the appended zero rows only add +-0 terms, which leave a float sum
    unchanged, but the input is wider, and the BLAS behind eager's slow transposed conv takes
    other vector/tail paths for another matrix width (2d: 11 of 388 rewritten sweep configs
    differ by <= 1.2e-7; integer data makes all of them equal); so (2) is held to 1e-6 relative.
    """
    dim, cin, cout, k, s, p, d, op, groups, bias, shape = cfg
    module = MODULES[dim](cin, cout, k, stride=s, padding=p, output_padding=op, groups=groups,
                          bias=bias, dilation=d).eval()
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(-4, 5, shape, generator=gen).float()
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randint(-4, 5, param.shape, generator=gen).float())
    ep = edge_program(module, x)
    original = ep.module()
    assert TransposedConvOutputPaddingPass()(ep.graph_module).modified is True
    assert "constant_pad_nd" in ep.graph_module.code
    rewritten = ep.module()
    with torch.no_grad():
        ref = module(x)
        assert torch.equal(original(x), ref)
        out = rewritten(x)
        assert out.shape == ref.shape and torch.equal(out, ref)
        xf = torch.randn(shape, generator=gen)
        with torch.backends.mkldnn.flags(enabled=False):
            ref_f, out_f = original(xf), rewritten(xf)
    torch.testing.assert_close(out_f, ref_f, rtol=1e-6, atol=1e-6 * ref_f.abs().max().item())


def _run_cell():
    try:
        from harness.stages.cell import run_cell
    except ImportError:  # the pre-restructure location
        from harness.run.pipeline import run_cell
    return run_cell


FAILING = {
    "minimal convT1d k1 d3 op1 (issue 20)": ConvCase(
        dim=1, transposed=True, in_channels=1, out_channels=1, kernel_size=1, dilation=3,
        output_padding=1, bias=False, input_shape=(1, 1, 1)),
    "convT2d g2 p1 d2 op1 bias": ConvCase(
        dim=2, transposed=True, in_channels=4, out_channels=4, kernel_size=3, padding=1,
        dilation=2, output_padding=1, groups=2, input_shape=(1, 4, 5, 5)),
    "convT1d int8 per-tensor d2 op1": ConvCase(
        dim=1, transposed=True, in_channels=4, out_channels=4, kernel_size=2, dilation=2,
        output_padding=1, input_shape=(1, 4, 8), quant="int8_per_tensor"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", FAILING.values(), ids=FAILING.keys())
def test_the_fix_lane_runs_the_padded_program_and_both_rows_are_honest(case):
    """The fix's own transformation, as the delegate receives it: the fixed lane's program has
    the explicit pad the pass inserts (and the stock one has none); both rows are produced,
    labelled and honest. That stock XNNPACK fails these (error 0x1 on 1.5.1) and the fixed
    lane passes is the corpus's: cases/xnnpack_transposed_dilation_output_padding.json."""
    run_cell = _run_cell()
    stock, fixed = run_cell(case, "xnnpack", []), run_cell(case, "xnnpack", [FIX])
    assert (stock.fixes, fixed.fixes) == ("", FIX)
    for row in (stock, fixed):
        assert_executed(row)
    ops = lambda r: {**r.delegated_ops, **r.undelegated_ops}  # noqa: E731
    assert "aten.constant_pad_nd" not in ops(stock), ops(stock)
    assert ops(fixed).get("aten.constant_pad_nd") == 1 and ops(fixed).get("aten.convolution") == 1
