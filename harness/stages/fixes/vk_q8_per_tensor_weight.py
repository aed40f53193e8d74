"""Vulkan: int8 conv2d whose weight is quantized per tensor (LOWER_ERROR at partitioning).

Vulkan fuses a pt2e int8 conv (``dq(x) -> conv(dq(w)) -> q``) into ``et_vk.q8ta_conv2d``, and its
pattern (``backends/vulkan/patterns/quantized_convolution.py:91-94``) traces the weight
dequantize's *scales argument* back to a constant tensor: ``assert self.weight_scales_node is not
None``. A per-tensor weight (``XNNPACKQuantizer`` with ``is_per_channel=False``) is dequantized by
``dequantize_per_tensor(w, scale, zero_point, ...)`` with a Python float scale, nothing to trace:
every int8 per-tensor conv2d fails ``to_edge_transform_and_lower`` with that bare assert.

The rewrite: the weight's ``dequantize_per_tensor(w, s, z, qmin, qmax, int8)`` becomes
``dequantize_per_channel(w, S, Z, 0, qmin, qmax, int8)`` with ``S`` a new float32 constant of
``C_out`` copies of ``s`` and ``Z`` an int64 constant of ``C_out`` copies of ``z`` (the dtypes
pt2e's own per-channel weights use). The conv and its activation q/dq are untouched, so the
q8ta pattern matches as it does for a per-channel weight.

Why it is exact: per element, ``dequantize_per_tensor`` computes ``(float(w) - z) * s`` and
``dequantize_per_channel`` ``(float(w) - Z[c]) * S[c]`` in float32; with ``S[c] = float32(s)`` and
``Z[c] = z`` that is the same subtraction and the same multiplication (eager rounds the Python
scale to the tensor's float32 the same way), so the dequantized weight, and everything after it,
is bit-identical in eager. On the delegate it is a per-channel int8 conv whose channels share one
scale; it is judged by the int8 policy against the quantized eager model, like any int8 cell.

Only non-transposed 2d convs (4-d weight) whose weight is a constant placeholder behind a
``dequantize_per_tensor`` and whose input is dequantized (a static int8 conv), and only when every
reader of that dequantize is such a conv's weight, and only where the q8ta pattern then fuses the
conv (``vk_util.q8ta_fuses``: not a grouped conv with output channels per group not a multiple
of 4, which would leave the stock LOWER_ERROR for the float path's runtime abort, nor a depthwise
conv with ``OC % 4 != 0``, which asserts later in the same pattern); a transposed conv's
per-channel axis is 1 and is left alone, as are conv1d and float convs.

Nor where the delegate it would reach is wrong anyway, which would turn the stock LOWER_ERROR (a
loud failure) into a silent MISMATCH (issue 39: a fix makes no cell worse; measured with the
per-channel twin on stock Vulkan, lavapipe, 1.5.1 wheel + main plug-in):

- batch > 1: the q8ta shaders compute one image (known issue ``vulkan-q8ta-conv-batch``, upstream
  #22254). ``vk-q8-batch-split`` splits such a conv into batch-1 convs, each with its own copy of
  the per-tensor weight dequantize; a lane sorts its fixes, so with both (``--fixes all``) that
  pass runs first and this one then converts every batch-1 copy.
- a program input that is not in the contiguous dim order (a channels-last input): the Vulkan
  delegate reads its inputs' memory as NCHW whatever their dim order (float and int8 alike:
  ``cases/memory_format_dynamic.json``): int8 per-channel ``Conv2d(4, 3, 4)`` on a channels-last
  1x4x11x10 input is MISMATCH stock (125 output steps; contiguous: PASS), with or without a clamp
  epilogue, circular 'same' padding or dilation. It is the program's inputs that count, not the
  conv's: a circular pad's decomposition copies a channels-last input into a contiguous buffer
  before the conv, and the cell is still wrong.
"""

from __future__ import annotations

import torch

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, is_call
from harness.stages.fixes.vk_util import (INPUT, WEIGHT, add_constant, constant_tensor, conv2d,
                                          edge_ops, finish, is_contiguous, new_node,
                                          program_pass_problem, ProgramPass, q8ta_fuses,
                                          unique_name)


def _weight_reader(node) -> bool:
    p = conv2d(node)
    # batch 1 only: q8ta is wrong for batch > 1 (known issue vulkan-q8ta-conv-batch); the
    # batch > 1 convs are vk-q8-batch-split's, which runs before this pass when both are chosen
    return p is not None and is_call(node.args[INPUT], "dequantize") and \
        node.args[WEIGHT] is not None and q8ta_fuses(p) and p["batch"] == 1


def _inputs_contiguous(ep) -> bool:
    """Every user input of the program is in the contiguous dim order. The Vulkan delegate reads
    an input's memory as NCHW whatever its dim order (a channels-last input gives wrong values,
    float and int8 alike: cases/memory_format_dynamic.json, issue 39), so a per-tensor conv made
    delegable here would turn the stock LOWER_ERROR into a silent MISMATCH; left alone."""
    user_inputs = set(ep.graph_signature.user_inputs)
    for node in ep.graph_module.graph.nodes:
        v = node.meta.get("val") if node.op == "placeholder" and node.name in user_inputs else None
        if not is_contiguous(v):
            return False
    return True


def matches(dq) -> bool:
    """``dq`` dequantizes a constant int8 weight per tensor for non-transposed int8 conv2ds only."""
    if not is_call(dq, "quantized_decomposed.dequantize_per_tensor.default"):
        return False
    if not isinstance(dq.args[0], torch.fx.Node) or dq.args[0].op != "placeholder":
        return False
    if not isinstance(dq.args[1], float) or not isinstance(dq.args[2], int):
        return False  # the tensor-qparams overload never reaches here; be sure anyway
    readers = list(dq.users)
    return bool(readers) and all(_weight_reader(u) and u.args[WEIGHT] is dq and u.args[INPUT] is not dq
                                 for u in readers)


class PerTensorWeightAsPerChannelPass(ProgramPass or object):
    def call(self, ep):
        graph, edge, modified = ep.graph_module.graph, edge_ops(), False
        if not _inputs_contiguous(ep):
            return finish(ep, False)
        for dq in list(graph.nodes):
            if not matches(dq) or constant_tensor(ep, dq.args[0]) is None:
                continue
            weight, scale, zero_point = dq.args[0], dq.args[1], dq.args[2]
            out_channels = int(weight.meta["val"].shape[0])
            scales = add_constant(ep, unique_name(ep, f"vk_pc_{dq.name}_scale"),
                                  torch.full((out_channels,), scale, dtype=torch.float32))
            zeros = add_constant(ep, unique_name(ep, f"vk_pc_{dq.name}_zero_point"),
                                 torch.full((out_channels,), zero_point, dtype=torch.int64))
            with graph.inserting_before(dq):
                per_channel = new_node(
                    graph, edge.quantized_decomposed.dequantize_per_channel.default,
                    (weight, scales, zeros, 0, *dq.args[3:]), dq, dq.kwargs)
            dq.replace_all_uses_with(per_channel)
            graph.erase_node(dq)
            modified = True
        return finish(ep, modified)


@register
class VkQ8PerTensorWeight(Fix):
    name = "vk-q8-per-tensor-weight"
    backends = ("vulkan",)
    summary = ("int8 conv2d with a per-tensor weight: dequantize it per channel with the same "
               "scale and zero point in every channel, which the q8ta pattern can trace (batch 1 "
               "and contiguous inputs only: q8ta is wrong for the others)")
    bug = ("Vulkan int8 per-tensor conv2d: LOWER_ERROR `assert self.weight_scales_node is not "
           "None` (backends/vulkan/patterns/quantized_convolution.py:91-94 traces per-channel "
           "weight scales only)")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "LOWER_ERROR -> PASS, delegated as et_vk.q8ta_conv2d; batch 2 and channels-last "
                "inputs stay LOWER_ERROR (0 cells made worse); tests/test_vulkan_graph_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [PerTensorWeightAsPerChannelPass()]
