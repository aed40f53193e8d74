"""Vulkan: float grouped conv2d whose channels per group are not a multiple of 4 (wrong values).

A grouped, non-depthwise conv2d runs ``conv2d.glsl`` (sliding window), which walks the input
channels of a group in 4-channel texels: when the input or output channels per group are not a
multiple of 4, a group's channels share a texel with the next group's and the sums mix groups:
``Conv2d(4, 4, 3, padding=1, groups=2)`` on 1x4x8x8 is MISMATCH (128 of 256 outputs wrong). A
grouped 1x1 conv is routed to the groups-unaware pointwise path (``Convolution.cpp
get_conv2d_method`` checks the kernel, not the groups) and is wrong whatever its channels per
group (``Conv2d(8, 8, 1, groups=2)``): the same rewrite fixes it, so the pattern includes it.

The rewrite: one ``groups=1`` conv per group on ``slice_copy(x, 1, g * cin_g, (g + 1) * cin_g)``,
with that group's rows of the weight (and bias) as new constants, and ``cat(..., dim=1)`` of the
group outputs. Every op is one Vulkan delegates (Slice.cpp, Concat.cpp, the convs); a groups=1
conv has no group bookkeeping, so the channel alignment no longer matters.

Why it is exact: a grouped conv *is*, by definition, the channel-concatenation of the groups'
independent convolutions; each output element is the same sum of the same products ``x * w``
over the same window and the same input channels, plus the same bias. Slicing and concatenating
copy values. In eager the result is bit-identical as long as the conv kernel sums in the same
order for the group alone (integer-valued data proves the arithmetic whatever the order; see the
tests). Only float convs (an int8 grouped conv is ``et_vk.q8ta_conv2d``, whose partitioner rule
already refuses output channels per group not a multiple of 4), batch 1 (the partitioner refuses
batch > 1 convs), non-depthwise (``weight.shape[0] == groups and weight.shape[1] == 1`` runs
``conv2d_dw``) and constant weights; everything else is left alone.
"""

from __future__ import annotations


from harness.stages.fixes import register
from harness.stages.fixes.base import Fix
from harness.stages.fixes.vk_util import (BIAS, GROUPS, INPUT, WEIGHT, add_constant,
                                          check_same_shape, constant_tensor, conv2d,
                                          drop_if_unused, edge_ops, finish, is_float_conv,
                                          new_node, program_pass_problem, ProgramPass, unique_name,
                                          vulkan_depthwise)


def matches(conv) -> dict | None:
    """The conv's arguments when it is the bug's pattern (weights not yet checked constant)."""
    p = conv2d(conv)
    if p is None or not is_float_conv(conv) or p["groups"] <= 1 or p["batch"] != 1:
        return None
    if vulkan_depthwise(p):
        return None
    cin_g, cout_g = p["cin"] // p["groups"], p["cout"] // p["groups"]
    if cin_g % 4 == 0 and cout_g % 4 == 0 and p["kernel"] != [1, 1]:
        return None
    return p


class GroupedConvSplitPass(ProgramPass or object):
    def call(self, ep):
        graph, edge, modified = ep.graph_module.graph, edge_ops(), False
        for conv in list(graph.nodes):
            p = matches(conv)
            if p is None:
                continue
            weight = constant_tensor(ep, p["w"])
            bias = constant_tensor(ep, p["bias"]) if p["bias"] is not None else None
            if weight is None or (p["bias"] is not None and bias is None):
                continue  # a weight the runtime would not prepack anyway
            g, cin_g, cout_g = p["groups"], p["cin"] // p["groups"], p["cout"] // p["groups"]
            pieces = []
            for i in range(g):
                w_i = add_constant(ep, unique_name(ep, f"vk_split_{conv.name}_w"),
                                   weight[i * cout_g:(i + 1) * cout_g])
                b_i = None if bias is None else add_constant(
                    ep, unique_name(ep, f"vk_split_{conv.name}_b"), bias[i * cout_g:(i + 1) * cout_g])
                with graph.inserting_before(conv):
                    x_i = new_node(graph, edge.aten.slice_copy.Tensor,
                                   (p["x"], 1, i * cin_g, (i + 1) * cin_g, 1), conv)
                    args = list(conv.args)
                    args[INPUT], args[WEIGHT], args[BIAS], args[GROUPS] = x_i, w_i, b_i, 1
                    pieces.append(new_node(graph, conv.target, args, conv))
            with graph.inserting_before(conv):
                cat = new_node(graph, edge.aten.cat.default, (pieces, 1), conv)
            check_same_shape(conv, cat.meta["val"])
            conv.replace_all_uses_with(cat)
            old_w, old_b = p["w"], p["bias"]
            graph.erase_node(conv)
            drop_if_unused(ep, old_w)
            drop_if_unused(ep, old_b)
            modified = True
        return finish(ep, modified)


@register
class VkGroupedSplit(Fix):
    name = "vk-grouped-split"
    backends = ("vulkan",)
    summary = ("float grouped conv2d with channels per group not a multiple of 4 (or a grouped "
               "1x1): one groups=1 conv per group on a channel slice, concatenated")
    bug = ("Vulkan float grouped (non-depthwise) conv2d with input or output channels per group "
           "not a multiple of 4 returns wrong values (conv2d.glsl walks a group in 4-channel "
           "texels); a grouped 1x1 conv takes the groups-unaware pointwise path")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "MISMATCH -> PASS, delegated; tests/test_vulkan_graph_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [GroupedConvSplitPass()]
