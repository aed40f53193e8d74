"""Vulkan: a transposed conv2d with dilation > 1, taken by the partitioner, refused by the runtime.

``op_registry.py`` (1.5.1) registers ``aten.convolution`` with ``check_conv_node``, which
declines a batch > 1 conv2d and a transposed conv1d, nothing about dilation; the runtime then
refuses the graph it was given: ``Convolution.cpp check_conv2d_params`` throws
"aten.convolution.default: transposed = true, dilation > 1 is not supported yet!" when the
delegate is built (RUNTIME_ERROR, or an abort in a C++ host). The stock cell of such a case may
fail earlier (a length-1 int list: make_ivec2, vulkan-make-ivec2-length-1); with the int-list
fixes it reaches this check (nightly F-bc248a3e, issue 39: a dynamic channels-last
``ConvTranspose2d(9, 6, (4, 3), stride=(3, 1), padding=[1], dilation=(3, 2), groups=3)``).

The rule, where upstream would write it: while the cell is lowered the Vulkan partitioner also
declines a transposed ``aten.convolution`` with any dilation > 1, so the conv stays outside the
delegate and the portable kernel runs it: RUNTIME_ERROR -> NOT_DELEGATED with right values. The
partitioner's contract then says what the runtime does (``check_conv_node`` already declines a
transposed conv1d for the same reason). A graph rewrite instead (a dilated transposed conv as a
transposed conv of a zero-dilated kernel) would compute it on Vulkan, but the runtime's grouped
transposed conv is wrong anyway (vulkan-grouped-transposed-conv). A no-op for every other conv.
Not reported upstream as of 2026-12-07.
"""

from __future__ import annotations

from harness.stages.fixes import register
from harness.stages.fixes.base import is_call
from harness.stages.fixes.vk_util import DILATION, TRANSPOSED, PartitionerRule

REASON = "transposed conv with dilation > 1 (Convolution.cpp check_conv2d_params refuses it)"


def dilated_transposed_conv(node) -> bool:
    """An ``aten.convolution`` node that is transposed with some dilation > 1."""
    if not is_call(node, "aten.convolution") or len(node.args) <= TRANSPOSED:
        return False
    dilation = node.args[DILATION]
    dilation = list(dilation) if isinstance(dilation, (list, tuple)) else [dilation]
    return bool(node.args[TRANSPOSED]) and any(int(d) > 1 for d in dilation)


@register
class VkTconvDilation(PartitionerRule):
    name = "vk-tconv-dilation"
    backends = ("vulkan",)
    summary = ("a transposed conv with dilation > 1: the Vulkan partitioner declines it (the "
               "runtime refuses it), the portable kernel runs it")
    bug = ("the Vulkan partitioner delegates a transposed conv2d with dilation > 1 and the "
           "runtime refuses it at build: 'transposed = true, dilation > 1 is not supported yet!' "
           "(Convolution.cpp check_conv2d_params); not reported upstream")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "RUNTIME_ERROR -> NOT_DELEGATED (right values) for dilated transposed convs, "
                "dilation-1 transposed and dilated forward convs no-op; "
                "tests/test_vulkan_graph_fixes.py")

    reason = REASON

    def declines(self, node) -> bool:
        return dilated_transposed_conv(node)
