"""Vulkan: int8 Conv1d, which the q8ta conv pattern cannot take (LOWER_ERROR or a runtime abort).

Vulkan runs a pt2e int8 conv (``dq(x) -> conv(dq(w)) -> q``) as ``et_vk.q8ta_conv2d*`` when its
pattern (``backends/vulkan/patterns/quantized_convolution.py``) fuses it; the pattern is written
for conv2d, and an int8 **conv1d** never runs:

- the detector matches any ``aten.convolution`` with a dequantized constant weight, and the
  replacement unpacks the weight as ``OC, IC_per_group, H, W = weight.shape``: a 3-d weight is
  ``ValueError: not enough values to unpack`` inside ``FusePatternsPass`` (LOWER_ERROR); a
  per-tensor one asserts earlier (``weight_scales_node is not None``);
- where the detector declines it (a grouped conv1d whose output channels per group are not a
  multiple of 4), the conv is delegated as a float conv with the weight's
  ``quantized_decomposed.dequantize_per_channel`` beside it. The 1.5.1 partitioner accepts that
  op (``op_registry.py register_quantizedequantize_cpp_ops``), the runtime registers only the
  per-tensor quantize/dequantize (``QuantizeDequantize.cpp``): ``build_graph`` aborts the process
  with ``Missing operator: quantized_decomposed.dequantize_per_channel.default`` (CRASH).

The rewrite: the weight's dequantize (per channel or per tensor) of a constant int8 weight is
folded into a float32 constant, computed by the same op on the real tensors, and the conv reads
that constant. The activation's quantize/dequantize stay (Vulkan runs them per tensor), so the
conv is a float conv1d between them, as pt2e's reference model computes it.

Why it is exact: the folded weight *is* ``dequantize(w)``, computed by the same kernel eager
runs, so the program computes the quantized eager model's arithmetic; it is judged by the int8
policy (one output step) against that model like any int8 cell.

Only non-transposed conv1d (any groups; a grouped kernel-1 conv1d is then refused by
Conv1dPW.cpp as in float, known issue ``vulkan-conv1d-pw-groups``). Not conv2d: an int8 conv2d
the pattern declines hits the same missing operator, but folding it runs Vulkan's float conv2d,
which missed the int8 policy by a hair (1.06 output steps on int8 Conv2d(4, 8, 4, "same"),
measured with ``--fixes each``: a CRASH would become a MISMATCH); nor conv3d (Vulkan has no
conv3d), transposed convs, or runtime weights (nothing to fold).
"""

from __future__ import annotations

import torch

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, is_call
from harness.stages.fixes.vk_util import (GROUPS, INPUT, TRANSPOSED, WEIGHT, add_constant,
                                          constant_tensor, drop_if_unused, finish,
                                          program_pass_problem, ProgramPass, unique_name, val)

DEQUANTIZE = ("quantized_decomposed.dequantize_per_channel.default",
              "quantized_decomposed.dequantize_per_tensor.default")


def _folds_for(conv, dq) -> bool:
    """``conv`` is a non-transposed int8 conv1d reading ``dq`` as its weight only."""
    if not is_call(conv, "aten.convolution") or len(conv.args) <= GROUPS or conv.args[TRANSPOSED]:
        return False
    if conv.args[WEIGHT] is not dq or conv.args[INPUT] is dq:
        return False
    return val(dq).dim() == 3  # a conv1d weight (out, in / groups, k)


def matches(dq) -> bool:
    """``dq`` dequantizes a constant int8 weight read only by convs this fix takes."""
    if not any(is_call(dq, name) for name in DEQUANTIZE):
        return False
    if not isinstance(dq.args[0], torch.fx.Node) or dq.args[0].op != "placeholder":
        return False
    readers = list(dq.users)
    return bool(readers) and all(_folds_for(u, dq) for u in readers)


def _real(ep, arg):
    """A dequantize argument's real value: a constant placeholder's tensor, else the argument."""
    if isinstance(arg, torch.fx.Node):
        tensor = constant_tensor(ep, arg)
        if tensor is None:
            raise LookupError(arg.name)
        return tensor
    return arg


class FoldWeightDequantPass(ProgramPass or object):
    def call(self, ep):
        graph, modified = ep.graph_module.graph, False
        for dq in list(graph.nodes):
            if not matches(dq):
                continue
            try:
                args = [_real(ep, a) for a in dq.args]
            except LookupError:
                continue  # a qparam that is not a constant: nothing to fold
            with torch.no_grad():
                folded = dq.target(*args, **dq.kwargs)
            if tuple(folded.shape) != tuple(dq.meta["val"].shape) or \
                    folded.dtype != dq.meta["val"].dtype:
                continue
            constant = add_constant(ep, unique_name(ep, f"vk_folded_{dq.args[0].name}"), folded)
            dq.replace_all_uses_with(constant)
            inputs = [a for a in dq.args if isinstance(a, torch.fx.Node)]
            graph.erase_node(dq)
            for node in inputs:
                drop_if_unused(ep, node)
            modified = True
        return finish(ep, modified)


@register
class VkQ8FoldWeightDequant(Fix):
    name = "vk-q8-fold-weight-dequant"
    backends = ("vulkan",)
    summary = ("int8 conv1d: fold the constant weight's dequantize into a float weight, so the "
               "conv runs in Vulkan's float conv1d between the activation's quantize/dequantize")
    bug = ("Vulkan int8 conv1d: FusePatternsPass fails 'not enough values to unpack' "
           "(quantized_convolution.py unpacks a 4-d weight) or, where the pattern declines it, the "
           "conv is delegated with quantized_decomposed.dequantize_per_channel, which the runtime "
           "does not register (VulkanBackend.cpp 'Missing operator', SIGABRT)")
    verified = ("cases/fix_vk_q8_fold_weight_dequant.json (lavapipe, 1.5.1 wheel + main "
                "plug-in): LOWER_ERROR / CRASH -> PASS, delegated; tests/test_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [FoldWeightDequantPass()]
