"""Vulkan: depthwise conv2d with stride != dilation and a kernel other than 3x3/5x5 (no shader).

``Conv2dDW.cpp pick_conv2d_dw_shader`` names the shader ``conv2d_dw`` + ``_sned`` (stride not
equal to dilation) + ``_output_tile_3x3`` / ``_output_tile_5x5`` for those kernels; for any other
kernel it asks for ``conv2d_dw_sned_float``, which the shader library does not have:
``Conv2d(4, 4, 4, stride=2, groups=4)`` on 1x4x10x10 is RUNTIME_ERROR ``get_shader_info``.

The rewrite (kernels up to 5x5): widen the kernel with zero taps to K x K (K = 3 when both sides
are <= 3, else 5), the new taps appended after the real ones (bottom rows, right columns), same
stride and dilation, so the runtime picks ``conv2d_dw_sned_output_tile_KxK``, which exists. The
widened window reaches ``(K - k) * d`` further down/right; that much extra zero padding on the
bottom/right keeps every output position (and the output shape). All padding goes into one
explicit ``constant_pad_nd(x, [pw, pw + (K - kw) * dw, ph, ph + (K - kh) * dh], 0.0)`` and the
conv gets padding ``[0, 0]``: nothing of the original padding is left to the shader's edge
handling (the generic depthwise shader is wrong there, see ``vk-dw-edge-pad``).

Why it is exact: output ``(oy, ox)`` of the new conv sums the same products ``x * w`` as the old
one at the same input positions (the real taps ``j < k`` keep their offsets ``j * d`` from the
same window origin ``o * s - p``, which the explicit left/top pad preserves), plus terms
``x' * 0`` for the appended taps, and the old padding's ``0 * w`` terms are still ``0 * w``;
``+-0`` terms leave a float sum unchanged (finite inputs; ``inf * 0`` would be NaN). The output
shape is ``(H + 2p + (K - k) d - (K - 1) d - 1) / s + 1 = (H + 2p - (k - 1) d - 1) / s + 1``,
checked on the fake tensors.

Not rewritten: kernels with a side > 5 (no 3x3/5x5 shader can hold them; e.g. a 7x7 stride-2
depthwise conv stays RUNTIME_ERROR with this fix), int8 convs (``q8ta_conv2d_dw``, another
shader), batch > 1 (not delegated), stride == dilation (``conv2d_dw`` exists) and 3x3/5x5
kernels.
"""

from __future__ import annotations

import torch
from executorch.exir.pass_base import ExportedProgramPassBase

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix
from harness.stages.fixes.vk_util import (INPUT, PADDING, WEIGHT, add_constant, check_same_shape,
                                          constant_tensor, conv2d, drop_if_unused, edge_ops, fake_val,
                                          finish, is_float_conv, new_node, unique_name,
                                          vulkan_depthwise)


def plan(conv) -> tuple[dict, int] | None:
    """(the conv's arguments, the widened kernel side K) when it is the bug's pattern and the
    kernel fits 5x5; else None."""
    p = conv2d(conv)
    if p is None or not is_float_conv(conv) or not vulkan_depthwise(p) or p["batch"] != 1:
        return None
    if p["stride"] == p["dilation"] or p["kernel"] in ([3, 3], [5, 5]):
        return None
    if max(p["kernel"]) > 5:
        return None
    return p, (3 if max(p["kernel"]) <= 3 else 5)


class DepthwiseSnedWidenPass(ExportedProgramPassBase):
    def call(self, ep):
        graph, edge, modified = ep.graph_module.graph, edge_ops(), False
        for conv in list(graph.nodes):
            found = plan(conv)
            if found is None:
                continue
            p, side = found
            weight = constant_tensor(ep, p["w"])
            if weight is None:
                continue
            (kh, kw), (ph, pw), (dh, dw) = p["kernel"], p["padding"], p["dilation"]
            wide = torch.zeros(*weight.shape[:2], side, side, dtype=weight.dtype)
            wide[:, :, :kh, :kw] = weight
            w_node = add_constant(ep, unique_name(ep, f"vk_widen_{conv.name}_w"), wide)
            pads = [pw, pw + (side - kw) * dw, ph, ph + (side - kh) * dh]
            with graph.inserting_before(conv):
                pad = new_node(graph, edge.aten.constant_pad_nd.default, (p["x"], pads, 0.0), conv)
            args = list(conv.args)
            args[INPUT], args[WEIGHT], args[PADDING] = pad, w_node, [0, 0]
            conv.args = tuple(args)
            new_val = fake_val(conv.target, conv.args)
            check_same_shape(conv, new_val)
            conv.meta["val"] = new_val
            drop_if_unused(ep, p["w"])
            modified = True
        return finish(ep, modified)


@register
class VkDwSnedWiden(Fix):
    name = "vk-dw-sned-widen"
    backends = ("vulkan",)
    summary = ("depthwise conv2d, stride != dilation, kernel not 3x3/5x5 but at most 5x5: widen "
               "the kernel with zero taps to 3x3/5x5 and pad explicitly (the sned output_tile "
               "shaders exist); kernels larger than 5 are left alone")
    bug = ("Vulkan depthwise conv2d with stride != dilation and a kernel other than 3x3/5x5: "
           "Conv2dDW.cpp pick_conv2d_dw_shader asks for conv2d_dw_sned_<dtype>, which does not "
           "exist -> RUNTIME_ERROR get_shader_info")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "RUNTIME_ERROR -> PASS, delegated, kernels <= 5; tests/test_vulkan_graph_fixes.py")

    def transform_passes(self) -> list:
        return [DepthwiseSnedWidenPass()]
