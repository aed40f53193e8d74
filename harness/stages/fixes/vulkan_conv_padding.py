"""Vulkan: broadcast length-1 conv int lists to the spatial rank (upstream issue #22774).

``Conv2d(padding="valid")`` exports ``aten.convolution`` with ``padding=[0]``; PyTorch broadcasts
a single value over every spatial dim, the Vulkan runtime reads the list with ``make_ivec2`` and
aborts. The pass rewrites the edge graph before partitioning, so the builder serializes
``IntList [0, 0]``: padding="valid" then lowers exactly like padding=0.

A conv whose input or output is not in the contiguous dim order is left alone: the Vulkan
delegate reads and writes every tensor as NCHW (known issues vulkan-channels-last-input-mismatch,
vulkan-channels-last-module-output-mismatch), so past make_ivec2 such a conv would compute wrong
values silently where stock fails loudly (`--fixes each`: RUNTIME_ERROR -> MISMATCH, issue 39).
In a lane with vk-channels-last-input / vk-channels-last-weight, which run before this fix
(``runs_after``) and make the conv's tensors contiguous, the conv is broadcast as any other.
"""

from __future__ import annotations

from torch.fx.passes.infra.pass_base import PassBase, PassResult

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, is_call
from harness.stages.fixes.vk_util import is_contiguous

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
INT_LIST_ARGS = (3, 4, 5, 7)


class BroadcastConvIntListsPass(PassBase):
    def call(self, graph_module) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            if not is_call(node, "aten.convolution"):
                continue
            if not all(is_contiguous(v) for v in (node.args[0].meta.get("val"),
                                                 node.meta.get("val"))):
                continue  # the NCHW-only delegate would read it wrong (docstring)
            rank = node.args[0].meta["val"].dim() - 2
            args = list(node.args)
            for i in INT_LIST_ARGS:
                value = args[i]
                if isinstance(value, (list, tuple)) and len(value) == 1 and rank > 1:
                    args[i] = list(value) * rank
                    modified = True
            node.args = tuple(args)
        if modified:
            graph_module.recompile()
        return PassResult(graph_module, modified)


@register
class VulkanConvPadding(Fix):
    name = "vulkan-conv-padding"
    backends = ("vulkan",)
    runs_after = ("vk-channels-last-input", "vk-channels-last-weight")
    summary = "broadcast length-1 stride/padding/dilation/output_padding lists to the spatial rank"
    bug = ("Vulkan make_ivec2 (VecUtils.h) asserts on a length-1 conv2d int list, e.g. "
           "padding=\"valid\" (upstream #22774, PR #22778)")
    verified = "cases/seed.json, cases/short_int_lists_2d.json (lavapipe, H200): RUNTIME_ERROR -> PASS"

    def transform_passes(self) -> list:
        return [BroadcastConvIntListsPass()]
