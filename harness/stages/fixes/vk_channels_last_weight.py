"""Vulkan: a channels-last module (a conv's constant weight in a channels-last dim order).

``model.to(memory_format=torch.channels_last)`` leaves the conv's weight parameter
channels-last; ``torch.export`` keeps it (the weight placeholder's fake value and the state
dict's tensor have dim order ``(0, 2, 3, 1)``), and PyTorch's memory-format propagation makes
the conv's *output* channels-last as well, whatever the input's layout (a convolution's output
follows ``suggest_memory_format`` of its input or its weight). The lowered program's output
then has dim order ``(0, 2, 3, 1)``, and the Vulkan delegate ignores dim orders: ``VulkanBackend.cpp
execute`` writes its NCHW result into that channels-last output with
``maybe_cast_and_copy_from_staging`` as if the memory were NCHW (no ``dim_order`` is read in
``backends/vulkan/runtime``). Every element lands in the wrong place: ``Conv2d(1, 256, 3,
padding=2, dilation=2)`` converted to channels-last, fed a contiguous 1x1x4x4, is MISMATCH on
Vulkan (the stock cell is RUNTIME_ERROR first, for its length-1 dilation list). The weight's
bytes are not the problem: ``vulkan_graph_builder.maybe_add_constant_tensor`` serializes
``tensor.contiguous()`` (NCHW bytes) whatever the stride, and for C_in = 1 a channels-last and
an NCHW weight are the same bytes anyway (issue 39, cases/vulkan_graph_fixes.json).

The rewrite, at the edge dialect before partitioning: each ``aten.convolution`` whose weight is
a parameter / buffer / lifted-constant placeholder of the program with a non-contiguous dim
order gets that constant replaced by its contiguous copy (the state dict's or constants'
tensor and the placeholder's fake value: same name, same values), and every node's fake value
downstream is recomputed (a real recomputation), so the conv's output, and the program's
output it reaches, is contiguous where only the weight had made it channels-last. The delegate
then computes what it always did and the program's output declares the NCHW layout it writes:
right values, fully delegated. What changes for a user: the program returns the same values in
a contiguous tensor (the eager module returns a channels-last one); values are compared, and
a consumer that reads by dim order reads the same numbers. A channels-last program *input* is
another bug (vk-channels-last-input); with both fixes a channels-last module fed a
channels-last input is right too. An int8 conv's weight (a dequantize of a constant, q8ta) is
left alone; a no-op for a contiguous module.

What upstream would merge: ``VulkanBackend.cpp execute`` honouring the dim order of its outputs
(and inputs: permute into / out of NCHW staging, as XNNPACK's ``XNNExecutor.cpp`` does since
pytorch/executorch#11118), or the Vulkan partitioner declining a partition whose output is not
contiguous. Not reported upstream as of 2026-12-07.
"""

from __future__ import annotations

import torch

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, is_call
from harness.stages.fixes.vk_util import (WEIGHT, ProgramPass, finish, is_contiguous,
                                          program_pass_problem, recompute_downstream)


def constant_name(ep, node) -> tuple[str, str] | None:
    """``(table, key)`` of a placeholder's tensor: ``("state_dict" | "constants", name)``;
    None for a user input."""
    sig = ep.graph_signature
    if node.name in sig.inputs_to_parameters:
        return "state_dict", sig.inputs_to_parameters[node.name]
    if node.name in sig.inputs_to_buffers:
        key = sig.inputs_to_buffers[node.name]
        return ("constants" if key in sig.non_persistent_buffers else "state_dict"), key
    if node.name in sig.inputs_to_lifted_tensor_constants:
        return "constants", sig.inputs_to_lifted_tensor_constants[node.name]
    return None


def channels_last_weights(ep) -> list:
    """The constant placeholders some ``aten.convolution`` reads as its weight whose dim order
    (their fake value's) is not contiguous."""
    found = []
    for node in ep.graph_module.graph.nodes:
        if not is_call(node, "aten.convolution") or len(node.args) <= WEIGHT:
            continue
        w = node.args[WEIGHT]
        if not isinstance(w, torch.fx.Node) or w.op != "placeholder" or w in found:
            continue
        if not is_contiguous(w.meta.get("val")) and constant_name(ep, w) is not None:
            found.append(w)
    return found


def _contiguous_constant(ep, node) -> None:
    """The placeholder's tensor and fake value replaced by their contiguous copies."""
    table, key = constant_name(ep, node)
    tensors = getattr(ep, table)
    old = tensors[key]
    data = old.detach().clone(memory_format=torch.contiguous_format)
    if isinstance(old, torch.nn.Parameter):
        data = torch.nn.Parameter(data, requires_grad=old.requires_grad)
    tensors[key] = data
    fake = node.meta["val"]
    with fake.fake_mode:
        node.meta["val"] = fake.clone(memory_format=torch.contiguous_format)


class ChannelsLastWeightToContiguousPass(ProgramPass or object):
    def call(self, ep):
        weights = channels_last_weights(ep)
        if not weights:
            return finish(ep, False)
        mode = weights[0].meta["val"].fake_mode  # the program's (its ShapeEnv included)
        for w in weights:
            _contiguous_constant(ep, w)
        recompute_downstream(ep.graph_module.graph, set(weights), mode)
        return finish(ep, True)


@register
class VkChannelsLastWeight(Fix):
    name = "vk-channels-last-weight"
    backends = ("vulkan",)
    summary = ("a conv's constant weight in a channels-last dim order (a channels-last module): "
               "replace it by its contiguous copy, so the conv's output is NCHW as the delegate "
               "writes it")
    bug = ("Vulkan writes a conv's NCHW result into a program output whose dim order is "
           "channels-last (a channels-last module's weight makes the conv's output "
           "channels-last; VulkanBackend.cpp execute reads no dim order): every element "
           "misplaced, silently; not reported upstream")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "MISMATCH -> PASS (fully delegated) for channels-last float modules with a "
                "contiguous input, contiguous modules no-op; tests/test_vulkan_graph_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [ChannelsLastWeightToContiguousPass()]
