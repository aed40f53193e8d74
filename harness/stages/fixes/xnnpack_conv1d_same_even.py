"""XNNPACK: quantized Conv1d(padding="same") with an even kernel.

PyTorch spells "same" with an even kernel as ``constant_pad_nd(x, [0, 1])`` (the odd remainder,
on the right) in front of a symmetric ``convolution(padding=[p])``. XNNPACK maps Conv1d to Conv2d;
before upstream #20734 the quantized pad stayed outside the partition or went in fp32 between a
dequantize and a quantized conv. This pass folds a temporal-only zero pad into the conv: the
conv takes the pad's input with the larger side's padding on both sides, and the one extra
output column that the smaller side gains is cropped. Symmetric-max padding plus a crop is the
asymmetric padding exactly, written in ops whose shapes every later pass can retrace; in a
quantized graph the crop sits between an implicit q/dq pair with the conv's own output params,
so the conv keeps its quantized output and the crop is exact on int8 values.
"""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, is_call, pass_result


def _edge_ops():
    from executorch.exir.dialects._ops import ops as exir_ops

    return exir_ops.edge


def _val(arg):
    return arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg


def _refresh_meta(node) -> None:
    args = [_val(a) if not isinstance(a, (list, tuple)) else a for a in node.args]
    fake = next(v for v in args if isinstance(v, torch.Tensor))
    with fake.fake_mode:
        node.meta["val"] = node.target(*args)


def foldable(conv) -> tuple | None:
    """(pad node, left, right) when ``conv`` is a quantized stride-1 conv1d behind a zero
    temporal-only pad of unequal sides."""
    if not is_call(conv, "aten.convolution"):
        return None
    pad, weight = conv.args[0], conv.args[1]
    if not is_call(pad, "constant_pad_nd") or len(pad.users) != 1 or not is_call(pad.args[0], "dequantize"):
        return None  # only the quantized pattern of the bug; fp32 "same" is left as exported
    amounts = list(pad.args[1])
    value = pad.args[2] if len(pad.args) > 2 else 0
    if (value != 0 or len(amounts) != 2 or any(a < 0 for a in amounts) or amounts[0] == amounts[1]
            or _val(weight).dim() != 3 or conv.args[6] or list(conv.args[3]) != [1]):
        return None
    return pad, amounts[0], amounts[1]


class FoldTemporalPadIntoConv1dPass(PassBase):
    def call(self, graph_module) -> PassResult:
        graph, edge, modified = graph_module.graph, _edge_ops(), False
        for conv in list(graph.nodes):
            found = foldable(conv)
            if not found:
                continue
            pad, left, right = found
            out_len = _val(conv).shape[-1]
            widest = max(left, right)
            base = list(conv.args[4])[0]
            args = list(conv.args)
            args[0], args[4] = pad.args[0], [base + widest]
            conv.args = tuple(args)
            _refresh_meta(conv)
            start = widest - left

            users = list(conv.users)
            quant = users[0] if len(users) == 1 and is_call(users[0], "quantize_per_tensor") else None
            with graph.inserting_after(conv):
                if quant is not None:
                    qparams = tuple(quant.args[1:])
                    q = graph.call_function(edge.quantized_decomposed.quantize_per_tensor.default,
                                            (conv, *qparams))
                    _refresh_meta(q)
                    with graph.inserting_after(q):
                        dq = graph.call_function(
                            edge.quantized_decomposed.dequantize_per_tensor.default, (q, *qparams))
                    _refresh_meta(dq)
                    crop_input, anchor = dq, dq
                else:
                    crop_input, anchor = conv, conv
            with graph.inserting_after(anchor):
                crop = graph.call_function(edge.aten.slice_copy.Tensor,
                                           (crop_input, -1, start, start + out_len))
            _refresh_meta(crop)
            if quant is not None:
                quant.args = (crop, *quant.args[1:])
            else:
                conv.replace_all_uses_with(crop, delete_user_cb=lambda u, crop=crop: u is not crop)
            graph.erase_node(pad)
            modified = True
        return pass_result(graph_module, modified)


@register
class XnnpackConv1dSameEven(Fix):
    name = "xnnpack-conv1d-same-even"
    backends = ("xnnpack",)
    summary = "fold the temporal zero pad of conv1d 'same' (even kernel) into the conv"
    bug = ("XNNPACK quantized Conv1d padding=\"same\" with an even kernel: pad left outside the "
           "partition (fixed upstream by #20734, in 1.4.x)")
    verified = ("cases/xnnpack_conv1d_same_even*.json: 1.3.1 NOT_DELEGATED/LOWER_ERROR -> PASS; "
                "no-op on 1.5.1")

    def transform_passes(self) -> list:
        return [FoldTemporalPadIntoConv1dPass()]
