"""Vulkan: depthwise conv2d with a kernel other than 3x3/5x5 and padding > 0 (wrong right edge).

Such a conv runs the generic ``conv2d_dw.glsl`` shader (``Conv2dDW.cpp pick_conv2d_dw_shader``:
3x3/5x5 kernels take the ``output_tile`` shaders). It clamps the window's end to the input width
(``end = min(ipos + overlay_region, in_sizes)``) and walks the flattened filter with one counter
``kx`` that is only advanced for the columns it reads, so in an output column whose window
crosses the right edge every later row of the window is multiplied by the wrong filter taps:
``Conv2d(4, 4, 7, padding=3, groups=4)`` on 1x4x8x8 is MISMATCH (96 of 256 outputs).

The rewrite: the zero padding becomes an explicit ``constant_pad_nd(x, [pw, pw, ph, ph], 0.0)``
(which Vulkan delegates, ``Pad.cpp``) and the conv gets padding ``[0, 0]``. With padding 0 no
window of a valid output position leaves the input (``(o - 1) * s + (k - 1) * d + 1 <= W``), so
the shader never clamps and the filter index stays aligned; the conv stays a depthwise conv of
the same kernel, delegated.

Why it is exact: a zero-padded convolution *is* the convolution of the explicitly zero-padded
input with padding 0, term for term: the same products ``x * w`` in the same windows, and the
padded positions contribute ``0 * w = +-0``, which leaves a float sum unchanged (for finite
weights; ``0 * inf`` would be NaN). The output shape is the same (checked on the fake tensors).
Only float convs (an int8 depthwise conv is ``et_vk.q8ta_conv2d_dw``, another shader), batch 1
(the Vulkan partitioner refuses batch > 1 convs; rewriting one would change what else is
delegated), stride == dilation (otherwise the shader is ``conv2d_dw_sned``, which does not exist:
see ``vk-dw-sned-widen``) and some padding > 0; everything else is left alone.
"""

from __future__ import annotations

from torch.fx.passes.infra.pass_base import PassBase, PassResult

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, pass_result, set_conv_args
from harness.stages.fixes.vk_util import (PADDING, conv2d, edge_ops, is_float_conv, new_node, vulkan_depthwise)


def matches(conv) -> dict | None:
    """The conv's arguments when it is the bug's pattern; else None."""
    p = conv2d(conv)
    if p is None or not is_float_conv(conv) or not vulkan_depthwise(p) or p["batch"] != 1:
        return None
    if p["kernel"] in ([3, 3], [5, 5]) or p["stride"] != p["dilation"]:
        return None
    if not any(p["padding"]):
        return None
    return p


class DepthwiseExplicitPadPass(PassBase):
    def call(self, graph_module) -> PassResult:
        graph, edge, modified = graph_module.graph, edge_ops(), False
        for conv in list(graph.nodes):
            p = matches(conv)
            if p is None:
                continue
            ph, pw = p["padding"]
            with graph.inserting_before(conv):
                pad = new_node(graph, edge.aten.constant_pad_nd.default,
                               (p["x"], [pw, pw, ph, ph], 0.0), conv)
            args = list(conv.args)
            args[0], args[PADDING] = pad, [0, 0]
            set_conv_args(conv, args)
            modified = True
        return pass_result(graph_module, modified)


@register
class VkDwEdgePad(Fix):
    name = "vk-dw-edge-pad"
    backends = ("vulkan",)
    summary = ("depthwise conv2d, kernel not 3x3/5x5, padding > 0: pad explicitly "
               "(constant_pad_nd) and convolve with padding 0, so conv2d_dw.glsl never clips")
    bug = ("Vulkan depthwise conv2d with a kernel other than 3x3/5x5 and padding > 0 is wrong at "
           "the right edge: conv2d_dw.glsl clamps the window end to the input width and does not "
           "advance the filter index kx for the skipped columns (e.g. every ConvNeXt 7x7 block)")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "MISMATCH -> PASS, delegated; tests/test_vulkan_graph_fixes.py")

    def transform_passes(self) -> list:
        return [DepthwiseExplicitPadPass()]
