"""Vulkan: kernel-1 (pointwise) conv1d with stride > 1 or padding > 0 (wrong values).

The partitioner (``op_registry.py pick_conv_storage``) gives a float conv1d with kernel size 1
height-packed storage, and the runtime (``Convolution.cpp``) sends every height-packed kernel-1
conv1d to ``et_vk.conv1d_pw`` (``Conv1dPW.cpp``). That op is a per-position matrix product:
``conv1d_pw(graph, args)`` reads in, weight, bias, groups and the clamp and never reads
``args[3]`` (stride) or ``args[4]`` (padding), ``conv1d_pw.glsl`` computes output position ``l``
from input position ``l``, and ``resize_conv1d_pw_node`` sizes the output with the input's
length. So ``Conv1d(4, 8, 1, stride=2)`` or ``Conv1d(4, 8, 1, padding=1)`` runs and returns
the stride-1, unpadded result in place of the real one.

The rewrite: the zero padding becomes an explicit ``constant_pad_nd(x, [p, p], 0.0)`` and the
stride an explicit ``slice_copy(x, 2, 0, INT64_MAX, s)`` (both delegated by Vulkan, ``Pad.cpp``,
``Slice.cpp``, and resizable), and the conv gets stride ``[1]``, padding ``[0]`` and dilation
``[1]`` (with one tap, dilation never moves a read). What is left is exactly what conv1d_pw
computes, and it stays a kernel-1 conv1d, delegated to the same op.

Why it is exact: with kernel size 1, output position ``o`` of ``conv1d(x, stride s, padding p)``
reads only input position ``o * s - p`` of the zero-padded input, i.e. element ``o * s`` of
``pad(x, p)``, which is element ``o`` of ``pad(x, p)[..., ::s]``: the same products and sums,
and a padded position contributes ``0 * w = +-0`` (finite weights). The output length
``floor((L + 2p - 1) / s) + 1 = ceil((L + 2p) / s)`` is the slice's length (checked on the
fake tensors). Only float, non-transposed convs with groups == 1 (a grouped one is refused by
``Conv1dPW.cpp``, see the ``vulkan-conv1d-pw-groups`` known issue), anything else is left alone.
"""

from __future__ import annotations

from torch.fx.passes.infra.pass_base import PassBase, PassResult

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, pass_result, set_conv_args
from harness.stages.fixes.vk_util import (DILATION, INPUT, PADDING, STRIDE, conv_args, edge_ops,
                                          is_float_conv, new_node)

INT64_MAX = 2**63 - 1  # what torch.export writes for an open slice end


def matches(conv) -> dict | None:
    """The conv's stride and padding when it is the bug's pattern; else None."""
    p = conv_args(conv, 1)
    if p is None or p["kernel"] != [1] or p["groups"] != 1 or not is_float_conv(conv):
        return None
    (stride,), (padding,) = p["stride"], p["padding"]
    if stride == 1 and padding == 0:
        return None
    return {"x": p["x"], "stride": stride, "padding": padding}


class PointwiseConv1dExplicitStridePadPass(PassBase):
    def call(self, graph_module) -> PassResult:
        graph, edge, modified = graph_module.graph, edge_ops(), False
        for conv in list(graph.nodes):
            p = matches(conv)
            if p is None:
                continue
            x = p["x"]
            with graph.inserting_before(conv):
                if p["padding"]:
                    x = new_node(graph, edge.aten.constant_pad_nd.default,
                                 (x, [p["padding"], p["padding"]], 0.0), conv)
                if p["stride"] > 1:
                    x = new_node(graph, edge.aten.slice_copy.Tensor,
                                 (x, 2, 0, INT64_MAX, p["stride"]), conv)
            args = list(conv.args)
            args[INPUT], args[STRIDE], args[PADDING], args[DILATION] = x, [1], [0], [1]
            set_conv_args(conv, args)
            modified = True
        return pass_result(graph_module, modified)


@register
class VkConv1dPwStridePad(Fix):
    name = "vk-conv1d-pw-stride-pad"
    backends = ("vulkan",)
    summary = ("kernel-1 conv1d with stride > 1 or padding > 0: pad (constant_pad_nd) and "
               "subsample (slice_copy with step) explicitly, convolve with stride 1 padding 0")
    bug = ("Vulkan kernel-1 (pointwise) float conv1d with stride > 1 or padding > 0 returns "
           "wrong values: Conv1dPW.cpp / conv1d_pw.glsl ignore stride and padding (output "
           "position l reads input position l) and resize the output to the input's length")
    verified = ("cases/fix_vk_conv1d_pw_stride_pad.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "MISMATCH -> PASS, delegated; tests/test_fixes.py")

    def transform_passes(self) -> list:
        return [PointwiseConv1dExplicitStridePadPass()]
