"""Vulkan: a program input (or output) in a channels-last dim order (wrong values, silently).

The Vulkan delegate ignores the dim order of the tensors it is handed: ``VulkanBackend.cpp
execute`` copies each input with ``maybe_cast_and_copy_into_staging(staging,
args[i]->toTensor().const_data_ptr(), numel)`` and each output back with
``maybe_cast_and_copy_from_staging``, both as if the memory were NCHW (no ``dim_order`` is read
anywhere in ``backends/vulkan/runtime``). ``vulkan_preprocess`` serializes the graph's tensors
by sizes alone, and ``RemoveRedundantOpsTransform`` drops every ``_to_dim_order_copy`` /
``_clone_dim_order`` it is given as a no-op. So ``Conv2d(4, 8, 3)`` fed
``x.to(memory_format=torch.channels_last)`` (the program's input placeholder has dim order
``(0, 2, 3, 1)``) reads NHWC bytes as NCHW and writes its NCHW result into a channels-last
output: every element wrong (cases/memory_format_dynamic.json, float and int8 alike).

The rewrite, at the edge dialect before partitioning: each user input whose dim order is not
contiguous gets a ``dim_order_ops._to_dim_order_copy(x, dim_order=contiguous)`` after it, every
node's fake value downstream is recomputed (so the graph between is contiguous), and each
program output whose layout that changed gets a copy back to its old dim order before the
output (a dim order that only moves size-1 dims is the same layout: no copy). The program's inputs and outputs keep their dim orders; the delegate in between sees
contiguous tensors only. The copies must run outside the delegate (inside it, preprocess removes
them and the bug is back), so while the cell is lowered ``patch`` makes the Vulkan partitioner
decline a ``_to_dim_order_copy`` / ``_clone_dim_order`` that changes the dim order (its input's
differs from its output's): such a copy is not a no-op, and the Vulkan runtime has no op for
it. The portable ``_to_dim_order_copy`` kernel runs them, exactly (a copy). So a fixed cell is
NOT_DELEGATED with the right values (the copies are outside), never PASS: a graph fix cannot move
the layout change into the delegate. A channels-last module (a constant weight in channels-last)
is another bug (vk-channels-last-weight): a program where the rewrite would leave a node reading
a contiguous input beside a channels-last weight is left alone (``mixed_dim_orders``: a portable
kernel refuses two dim orders, NOT_DELEGATED -> RUNTIME_ERROR on a channels-last module whose
transposed conv stays outside, issue 39), and in a lane with the weight fix that fix runs first
(``runs_after``), so the rewrite then goes ahead.

What upstream would merge: either the runtime honouring the dim order (``execute`` permuting a
channels-last input into NCHW staging and back for an output, as XNNPACK's ``XNNExecutor.cpp``
does since pytorch/executorch#11118), or the partitioner/preprocess declining dim-order-changing
copies plus a boundary copy like this one. Not reported upstream (#21837 is the portable
runtime's own silent acceptance of a mismatched dim order, a different bug). A no-op when every
user input is contiguous.
"""

from __future__ import annotations

import torch

from harness.stages.fixes import register
from harness.stages.fixes.vk_util import (KEPT_META, ProgramPass, dim_order, edge_ops, finish,
                                          graph_fake_mode, is_contiguous, is_contiguous_order,
                                          program_pass_problem, recompute,
                                          recompute_downstream, PartitionerRule)

ADDED = "convconf_vk_channels_last_input"  # meta key of the copies this pass adds


def _to_contiguous_copy(node) -> bool:
    return (isinstance(node, torch.fx.Node) and node.op == "call_function"
            and "_to_dim_order_copy" in str(node.target)
            and is_contiguous_order(tuple(node.kwargs.get("dim_order") or ())))


def channels_last_inputs(ep) -> list:
    """The user-input placeholders whose dim order is not contiguous and that something other
    than a copy to contiguous reads (so the pass is idempotent). A lifted parameter or constant
    is left as it is: a channels-last module's weight is another bug. 4-D only: exir maps no
    other non-contiguous dim order to a memory format (dim_order_utils.get_memory_format, known
    issue exir-dim-order-memory-format-map), so the copy back to a channels_last_3d output
    fails to lower, and the 1.5.1 binding refuses a channels_last_3d input anyway
    (pybindings-5d-channels-last-input)."""
    user_inputs = set(ep.graph_signature.user_inputs)
    return [n for n in ep.graph_module.graph.nodes if n.op == "placeholder"
            and n.name in user_inputs and not is_contiguous(n.meta.get("val"))
            and n.meta["val"].dim() == 4 and not all(map(_to_contiguous_copy, n.users))]


def mixed_dim_orders(ep, inputs) -> torch.fx.Node | None:
    """A node the rewrite would hand two dim orders: it reads a channels-last input (or
    something computed from one) and also a non-contiguous tensor that no channels-last input
    reaches (a channels-last module's weight, or its dequantize), or None. Once the input side
    is contiguous that node reads a contiguous and a channels-last tensor, which a portable
    kernel refuses ("2 input tensors have different dim orders", tensor_util_portable.cpp) where
    the conv stays outside the delegate; run where vk-channels-last-weight has made the weights
    contiguous (``runs_after``), the rewrite goes ahead."""
    reached = set(inputs)
    for node in ep.graph_module.graph.nodes:
        if node.op == "call_function" and any(a in reached for a in node.all_input_nodes):
            reached.add(node)
            if any(a not in reached and not is_contiguous(a.meta.get("val"))
                   for a in node.all_input_nodes):
                return node
    return None


def same_layout(order, other, value) -> bool:
    """Whether two dim orders lay ``value``'s elements out alike: its dims of size other than 1
    come in the same order (a size-1 dim goes anywhere). A channels-last conv with one output
    channel gets an output dim order such as (0, 2, 1, 3) that is the contiguous layout in
    another name; copying back to it is a no-op that exir cannot even plan (the portable
    _to_dim_order_copy refused it: "out_dim_order[i] == dim_order_ref[i]", issue 39)."""
    if order is None or other is None:
        return order == other
    def moving(o):
        return [d for d in o if not (type(value.shape[d]) is int and value.shape[d] == 1)]
    return moving(order) == moving(other)


def _copy(graph, x, order, like, mode):
    """``_to_dim_order_copy(x, dim_order=order)`` at the insertion point, marked as ours."""
    node = graph.call_function(edge_ops().dim_order_ops._to_dim_order_copy.default, (x,),
                               {"dim_order": list(order)})
    node.meta.update({k: like.meta[k] for k in KEPT_META if k in like.meta})
    node.meta[ADDED] = True
    node.meta["val"] = recompute(node, mode)
    return node


class ChannelsLastInputToContiguousPass(ProgramPass or object):
    def call(self, ep):
        graph = ep.graph_module.graph
        inputs = channels_last_inputs(ep)
        if not inputs or mixed_dim_orders(ep, inputs) is not None:
            return finish(ep, False)
        output = next(n for n in graph.nodes if n.op == "output")
        mode = graph_fake_mode(graph)
        was = {n: dim_order(n.meta.get("val")) for n in graph.nodes}
        first_op = next(n for n in graph.nodes if n.op != "placeholder")  # placeholders stay first
        changed = set()
        for x in inputs:
            with graph.inserting_before(first_op):
                copy = _copy(graph, x, range(x.meta["val"].dim()), x, mode)
            x.replace_all_uses_with(copy, delete_user_cb=lambda u, c=copy: u is not c)
            changed.add(copy)
        recompute_downstream(graph, changed, mode, skip=lambda n: n.meta.get(ADDED))
        # the program's outputs keep their dim orders: a copy back where one changed
        outs = []
        for out in output.args[0]:
            if isinstance(out, torch.fx.Node) and was.get(out) and \
                    not same_layout(dim_order(out.meta.get("val")), was[out], out.meta["val"]):
                with graph.inserting_before(output):
                    out = _copy(graph, out, was[out], out, mode)
            outs.append(out)
        output.args = (type(output.args[0])(outs),)
        return finish(ep, True)


def _changes_dim_order(node) -> bool:
    """A dim-order copy whose input's dim order differs from its output's: not a no-op, and
    ``RemoveRedundantOpsTransform`` (vulkan_preprocess) would drop it as one."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    if "_to_dim_order_copy" not in str(node.target) and "_clone_dim_order" not in str(node.target):
        return False
    src = node.args[0] if node.args else None
    a = dim_order(src.meta.get("val")) if isinstance(src, torch.fx.Node) else None
    b = dim_order(node.meta.get("val"))
    return a is not None and b is not None and a != b


def decline_dim_order_changes():
    """While one cell is lowered: the Vulkan partitioner declines a dim-order-changing copy."""
    return VkChannelsLastInput().patch()


@register
class VkChannelsLastInput(PartitionerRule):
    name = "vk-channels-last-input"
    backends = ("vulkan",)
    runs_after = ("vk-channels-last-weight",)  # it makes the weights contiguous first
    summary = ("a user input in a channels-last dim order: copy it to contiguous outside the "
               "delegate (and an output back to its dim order), so the delegate sees NCHW only")
    bug = ("Vulkan reads a channels-last program input as NCHW and writes its output as NCHW "
           "whatever the output's dim order (VulkanBackend.cpp execute copies raw memory into "
           "staging, no dim order read): every element wrong, silently; not reported upstream")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "MISMATCH -> NOT_DELEGATED (right values; the two copies run outside the "
                "delegate) for channels-last float and int8 inputs, contiguous controls no-op; "
                "tests/test_vulkan_graph_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [ChannelsLastInputToContiguousPass()]

    reason = "copy changes the dim order (the runtime ignores dim orders)"

    def declines(self, node) -> bool:
        return _changes_dim_order(node)
