"""XNNPACK: transposed conv with output_padding >= stride (possible when dilation > stride).

PyTorch allows ``output_padding < max(stride, dilation)``; XNNPACK's deconvolution requires
``adjustment < stride`` in every spatial dim (``reshape_deconvolution2d_nhwc`` answers
``xnn_status_invalid_parameter``), and ExecuTorch 1.5.1's ``op_conv2d.py`` passes
``output_padding`` through as the adjustment unchecked. Such a conv lowers and then fails at the
first forward with "Failed to execute method forward, error: 0x1" (minimal case:
``ConvTranspose1d(1, 1, 1, dilation=3, output_padding=1)`` on 1x1x1).

The rewrite, per offending dim ``i`` (``output_padding[i] >= stride[i]``), with ``q, r =
divmod(output_padding[i], stride[i])``: append ``q`` zero rows to the conv's *input* at the end of
that dim (``constant_pad_nd``) and give the conv ``output_padding[i] = r < stride[i]``.

Why it is exact: a transposed conv's output is a window ``[p, F - p + op)`` of the "full"
output ``F = (L - 1) * s + (K - 1) * d + 1``, extended past ``F`` by rows that get no input tap
(bias only). ``q`` more input rows make the full output ``q * s`` rows longer; those rows and the
window's output_padding rows beyond them only receive taps from the appended zeros, so they are
``bias + sum of 0 * w`` = the bias exactly; every earlier row only gains ``+0`` terms, which
leave any float sum unchanged. The new window ``[p, F + q*s - p + r)`` is the old one, so the
output shape does not change, padding stays in the conv (no crop), and with or without a bias
every new op (``constant_pad_nd``) is one XNNPACK delegates: no bias broadcast, no cat. (Exact for
finite weights: ``0 * inf`` would be NaN.) Dims with ``output_padding < stride`` keep their
arguments; 3d transposed convs are left alone (XNNPACK does not delegate them), and so is every
conv the bug cannot reach. The pass runs before partitioning, so XNNPACK's Conv1dUnsqueezePass
(inside the delegate's preprocess) sees an ordinary conv1d with output_padding < stride.

Quantized (pt2e static) convs: the pad goes between the activation's dequantize and a new
quantize -> dequantize pair with the same params (dq -> pad -> q -> dq -> conv), so the conv still
reads a dequantized activation, which is how XNNPACK's partitioner recognizes a quantized conv;
the pad's values are dequantized int8 values and 0.0 (= zero_point), which requantize exactly.

Why not the crop-and-fill rewrite (conv at padding 0 and output_padding 0, slice ``[p, F - p +
min(op, p))``, append ``op - p`` bias rows): it is exact too, but with a bias the fill needs the
bias broadcast (``view`` + ``expand_copy`` + ``cat``), and XNNPACK's partitioner has no expand
config, so that op stays outside the delegate; the input pad needs no fill at all.
"""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from harness.stages.fixes import register
from harness.stages.fixes.base import (Fix, fake_val, is_call, pass_result, set_conv_args,
                                       static_sizes)

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
STRIDE, TRANSPOSED, OUTPUT_PADDING = 3, 6, 7
_KEPT_META = ("stack_trace", "nn_module_stack")


def _edge_ops():
    from executorch.exir.dialects._ops import ops as exir_ops

    return exir_ops.edge


def _per_dim(value, rank: int) -> list[int]:
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return values * rank if len(values) == 1 else values


def rewrite_plan(conv) -> tuple[list[int], list[int]] | None:
    """(zero rows to append to the input per spatial dim, new output_padding) for a transposed
    1d/2d ``aten.convolution`` with some ``output_padding[i] >= stride[i]``; else None."""
    if not is_call(conv, "aten.convolution") or len(conv.args) <= OUTPUT_PADDING \
            or not conv.args[TRANSPOSED]:
        return None
    if not all(map(static_sizes, (conv.args[0], conv))):
        return None  # a dynamic program: comparing its symbolic shapes would fix them
    rank = conv.args[1].meta["val"].dim() - 2  # the weight's rank, as XNNPACK decides 1d/2d
    if rank not in (1, 2):
        return None
    stride = _per_dim(conv.args[STRIDE], rank)
    out_pad = _per_dim(conv.args[OUTPUT_PADDING], rank)
    if all(op < s for op, s in zip(out_pad, stride)):
        return None
    extra = [op // s if op >= s else 0 for op, s in zip(out_pad, stride)]
    new_out_pad = [op % s if op >= s else op for op, s in zip(out_pad, stride)]
    return extra, new_out_pad


class TransposedConvOutputPaddingPass(PassBase):
    @staticmethod
    def _requantize(graph, edge, pad, qparams: tuple, kwargs: dict):
        """q -> dq with the input's own params after the pad, so that the conv keeps a dequantized
        activation (how XNNPACK's partitioner recognizes a quantized conv). Exact: the padded
        values are integers' dequantized images and zero_point's 0.0."""
        with graph.inserting_after(pad):
            q = graph.call_function(edge.quantized_decomposed.quantize_per_tensor.default,
                                    (pad, *qparams), dict(kwargs))
        with graph.inserting_after(q):
            dq = graph.call_function(edge.quantized_decomposed.dequantize_per_tensor.default,
                                     (q, *qparams), dict(kwargs))
        for node in (q, dq):
            node.meta.update({k: pad.meta[k] for k in _KEPT_META if k in pad.meta})
            node.meta["val"] = fake_val(node.target, node.args, node.kwargs)
        return dq

    def call(self, graph_module) -> PassResult:
        graph, edge, modified = graph_module.graph, _edge_ops(), False
        for conv in list(graph.nodes):
            plan = rewrite_plan(conv)
            if plan is None:
                continue
            extra, new_out_pad = plan
            pads: list[int] = []
            for rows in reversed(extra):  # constant_pad_nd lists the last dim first
                pads += [0, rows]
            with graph.inserting_before(conv):
                pad = graph.call_function(edge.aten.constant_pad_nd.default,
                                          (conv.args[0], pads, 0.0))
            pad.meta.update({k: conv.meta[k] for k in _KEPT_META if k in conv.meta})
            pad.meta["val"] = fake_val(pad.target, pad.args)
            conv_input = pad
            source = conv.args[0]
            if isinstance(source, torch.fx.Node) and \
                    source.target == edge.quantized_decomposed.dequantize_per_tensor.default:
                conv_input = self._requantize(graph, edge, pad, tuple(source.args[1:]), source.kwargs)
            args = list(conv.args)
            args[0], args[OUTPUT_PADDING] = conv_input, new_out_pad
            set_conv_args(conv, args)  # the window must not move
            modified = True
        return pass_result(graph_module, modified)


@register
class XnnpackTconvOutputPadding(Fix):
    name = "xnnpack-tconv-output-padding"
    backends = ("xnnpack",)
    summary = ("transposed conv with output_padding >= stride (legal when dilation > stride) "
               "fails at runtime in XNNPACK (adjustment must be < stride): append "
               "output_padding // stride zero rows to the input, keep output_padding % stride")
    bug = ("XNNPACK ConvTranspose with output_padding >= stride (legal when dilation > stride): "
           "op_conv2d.py passes it as adjustment unchecked, deconvolution-nhwc.c "
           "reshape_deconvolution2d_nhwc rejects adjustment >= stride -> error 0x1 at forward")
    verified = ("cases/xnnpack_transposed_dilation_output_padding.json on 1.5.1 (CPU): "
                "RUNTIME_ERROR -> PASS, controls unchanged; tests/test_xnnpack_tconv_fix.py")

    def transform_passes(self) -> list:
        return [TransposedConvOutputPaddingPass()]
