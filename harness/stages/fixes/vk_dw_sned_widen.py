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

Kernels with a side > 5 (no 3x3/5x5 shader can hold them, e.g. a 7x7 stride-2 depthwise conv)
take the second form: fold the dilation into a dense kernel of side ``(k - 1) * d + 1`` (zero
taps between the real ones), convolve at stride 1 and dilation 1 (stride == dilation: the
existing ``conv2d_dw`` / ``output_tile`` shaders) on the explicitly padded input with padding 0,
and keep every ``s``-th output row and column (``slice_copy(y, 2, 0, Ho1, sh)``, then dim 3;
only in a dim whose stride is > 1),
which Vulkan delegates. Exact for the same reason: a stride-``s`` output ``o`` is the stride-1
output ``o * s`` (same window origin ``o * s - p``), and the dense kernel's taps are the dilated
taps at the same offsets plus zero taps; ``ceil(Ho1 / s)`` kept rows is the strided output size.
It costs ``sh * sw`` times the work; the first form is used whenever the kernel fits 5x5.

Not rewritten: int8 convs (``q8ta_conv2d_dw``, another shader), batch > 1 (not delegated),
stride == dilation (``conv2d_dw`` exists) and 3x3/5x5 kernels.
"""

from __future__ import annotations

import torch

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix
from harness.stages.fixes.vk_util import (DILATION, INPUT, PADDING, STRIDE, WEIGHT, add_constant,
                                          constant_tensor, conv2d, drop_if_unused, edge_ops,
                                          fake_val, finish, is_float_conv, new_node,
                                          program_pass_problem, ProgramPass, unique_name,
                                          vulkan_depthwise)


def plan(conv) -> tuple[dict, int | None] | None:
    """(the conv's arguments, the widened kernel side K, or None for the dense stride-1 form
    of a kernel with a side > 5) when it is the bug's pattern; else None."""
    p = conv2d(conv)
    if p is None or not is_float_conv(conv) or not vulkan_depthwise(p) or p["batch"] != 1:
        return None
    if p["stride"] == p["dilation"] or p["kernel"] in ([3, 3], [5, 5]):
        return None
    if max(p["kernel"]) > 5:
        return p, None
    return p, (3 if max(p["kernel"]) <= 3 else 5)


def _widened(weight, p, side):
    (kh, kw), (ph, pw), (dh, dw) = p["kernel"], p["padding"], p["dilation"]
    wide = torch.zeros(*weight.shape[:2], side, side, dtype=weight.dtype)
    wide[:, :, :kh, :kw] = weight
    return wide, [pw, pw + (side - kw) * dw, ph, ph + (side - kh) * dh], list(p["stride"]), \
        list(p["dilation"])


def _dense(weight, p):
    (kh, kw), (ph, pw), (dh, dw) = p["kernel"], p["padding"], p["dilation"]
    dense = torch.zeros(*weight.shape[:2], (kh - 1) * dh + 1, (kw - 1) * dw + 1, dtype=weight.dtype)
    dense[:, :, ::dh, ::dw] = weight
    return dense, [pw, pw, ph, ph], [1, 1], [1, 1]


def check_same_shape_as(node, shape) -> None:
    if tuple(node.meta["val"].shape) != tuple(shape):
        raise AssertionError(f"{node.name}: rewritten shape {tuple(node.meta['val'].shape)} != {shape}")


class DepthwiseSnedWidenPass(ProgramPass or object):
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
            old_shape = tuple(conv.meta["val"].shape)
            new_w, pads, stride, dilation = _widened(weight, p, side) if side else _dense(weight, p)
            w_node = add_constant(ep, unique_name(ep, f"vk_widen_{conv.name}_w"), new_w)
            with graph.inserting_before(conv):
                pad = new_node(graph, edge.aten.constant_pad_nd.default, (p["x"], pads, 0.0), conv)
            args = list(conv.args)
            args[INPUT], args[WEIGHT], args[PADDING] = pad, w_node, [0, 0]
            args[STRIDE], args[DILATION] = stride, dilation
            conv.args = tuple(args)
            conv.meta["val"] = fake_val(conv.target, conv.args)
            out = conv
            if side is None:  # stride 1 computed: keep every s-th row / column (s > 1)
                old_users = list(conv.users)
                for dim, step in ((2, p["stride"][0]), (3, p["stride"][1])):
                    if step > 1:
                        with graph.inserting_after(out):
                            out = new_node(graph, edge.aten.slice_copy.Tensor,
                                           (out, dim, 0, int(out.meta["val"].shape[dim]), step), conv)
                for user in old_users:
                    user.replace_input_with(conv, out)
            check_same_shape_as(out, old_shape)
            drop_if_unused(ep, p["w"])
            modified = True
        return finish(ep, modified)


@register
class VkDwSnedWiden(Fix):
    name = "vk-dw-sned-widen"
    backends = ("vulkan",)
    summary = ("depthwise conv2d, stride != dilation, kernel not 3x3/5x5: widen the kernel with "
               "zero taps to 3x3/5x5 and pad explicitly (the sned output_tile shaders exist); a "
               "kernel side > 5: dense kernel at stride 1, every s-th output kept")
    bug = ("Vulkan depthwise conv2d with stride != dilation and a kernel other than 3x3/5x5: "
           "Conv2dDW.cpp pick_conv2d_dw_shader asks for conv2d_dw_sned_<dtype>, which does not "
           "exist -> RUNTIME_ERROR get_shader_info")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "RUNTIME_ERROR -> PASS, delegated (both forms); tests/test_vulkan_graph_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [DepthwiseSnedWidenPass()]
