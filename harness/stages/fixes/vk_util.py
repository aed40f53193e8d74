"""Shared pieces of the Vulkan graph fixes (``vk_*.py``); registers no fix of its own.

Every Vulkan graph fix reads an edge-dialect ``aten.convolution`` the way the Vulkan runtime
will see it (``Convolution.cpp get_conv2d_method``: depthwise is ``weight.shape[0] == groups``
and ``weight.shape[1] == 1``, i.e. a channel multiplier of 1), and some replace a constant
weight by a new one; those are ``ExportedProgramPassBase`` passes, since a new constant is a
new lifted input of the program (graph signature + state dict), not just a graph node.
"""

from __future__ import annotations

import contextlib

import torch

from harness.stages.fixes.base import (Fix, any_node, check_same_shape, fake_val,  # noqa: F401
                                       is_call, pass_result, set_conv_args, static_sizes, val)

try:  # executorch >= 1.4.1: to_edge_transform_and_lower also runs passes given the whole program
    from executorch.exir.pass_base import ExportedProgramPassBase as ProgramPass
except ImportError:  # 1.3.1: graph passes only; a fix that adds a constant cannot run there
    ProgramPass = None


def program_pass_problem() -> str | None:
    """Why a fix built on ``ProgramPass`` cannot run here (one line), or None."""
    if ProgramPass is not None:
        return None
    from executorch.version import __version__

    return (f"executorch {__version__} has no program passes (exir.pass_base."
            f"ExportedProgramPassBase, since 1.4.1): this fix adds a constant, a graph pass cannot")

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
INPUT, WEIGHT, BIAS, STRIDE, PADDING, DILATION, TRANSPOSED, OUTPUT_PADDING, GROUPS = range(9)
KEPT_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node")


def edge_ops():
    from executorch.exir.dialects._ops import ops as exir_ops

    return exir_ops.edge


def per_dim(value, rank: int) -> list[int]:
    """A conv int-list argument per spatial dim (a length-1 list broadcast, as PyTorch does)."""
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return values * rank if len(values) == 1 else values


def new_node(graph, target, args, like, kwargs=None):
    """A call node inserted at the graph's current insertion point, with a real ``meta["val"]``
    and the provenance of ``like`` (the conv it is part of)."""
    node = graph.call_function(target, tuple(args), dict(kwargs or {}))
    node.meta.update({k: like.meta[k] for k in KEPT_META if k in like.meta})
    node.meta["val"] = fake_val(target, args, kwargs)
    return node


def conv2d(node) -> dict | None:
    """The arguments of a non-transposed 2d ``aten.convolution`` per spatial dim; else None."""
    return conv_args(node, 2)


def conv_args(node, rank: int) -> dict | None:
    """The arguments of a non-transposed ``aten.convolution`` with ``rank`` spatial dims, per
    spatial dim; else None (also for a conv of a dynamic program: ``static_sizes``)."""
    if not is_call(node, "aten.convolution") or len(node.args) <= GROUPS or node.args[TRANSPOSED]:
        return None
    x, w = node.args[INPUT], node.args[WEIGHT]
    if not isinstance(x, torch.fx.Node) or not isinstance(w, torch.fx.Node):
        return None
    if val(x).dim() != rank + 2 or val(w).dim() != rank + 2:
        return None
    if not all(map(static_sizes, (x, w, node))):
        return None  # a dynamic program: see static_sizes
    return {"x": x, "w": w, "bias": node.args[BIAS],
            "stride": per_dim(node.args[STRIDE], rank),
            "padding": per_dim(node.args[PADDING], rank),
            "dilation": per_dim(node.args[DILATION], rank), "groups": int(node.args[GROUPS]),
            "batch": int(val(x).shape[0]), "kernel": list(val(w).shape[2:]),
            "cin": int(val(x).shape[1]), "cout": int(val(w).shape[0])}


def is_float_conv(node) -> bool:
    """A float conv Vulkan delegates (float32/float16, ``utils.FP_T``; a bfloat16 conv stays
    outside, and rewriting it would only move other ops into the delegate): neither its input
    nor its weight comes from a dequantize (a pt2e int8 conv is ``dq(x) -> conv(dq(w))``, which
    Vulkan fuses into ``et_vk.q8ta_conv2d``)."""
    return not any(is_call(node.args[i], "dequantize") for i in (INPUT, WEIGHT)) and \
        val(node.args[INPUT]).dtype in (torch.float32, torch.float16)


def vulkan_depthwise(p: dict) -> bool:
    """``Convolution.cpp get_conv2d_method``: weight (groups, 1, kh, kw)."""
    w = p["w"].meta["val"]
    return int(w.shape[0]) == p["groups"] and int(w.shape[1]) == 1


def constant_tensor(ep, node) -> torch.Tensor | None:
    """The tensor of a parameter / buffer / lifted constant placeholder; else None."""
    from executorch.backends.transforms.utils import get_param_tensor, is_param_node

    if not isinstance(node, torch.fx.Node) or node.op != "placeholder" or not is_param_node(ep, node):
        return None
    return get_param_tensor(ep, node)


def add_constant(ep, name: str, data: torch.Tensor) -> torch.fx.Node:
    """A new constant of the program, placed before its first placeholder: a persistent buffer,
    as pt2e's own frozen weights and qparams are (Vulkan's q8ta pattern rewrites those in the
    state dict, ``utils.update_program_state_dict``, and finds only buffers and parameters)."""
    from executorch.backends.transforms.utils import create_constant_placeholder
    from torch.export.graph_signature import InputKind

    graph = ep.graph_module.graph
    first = next(n for n in graph.nodes if n.op == "placeholder")
    with graph.inserting_before(first):
        return create_constant_placeholder(ep, graph, name, InputKind.BUFFER,
                                           data.detach().clone().contiguous(),
                                           persistent_buffer=True)


def drop_if_unused(ep, node) -> None:
    """Remove a constant placeholder nothing reads any more (and its tensor)."""
    from executorch.backends.transforms.utils import delete_constant_placeholder

    if isinstance(node, torch.fx.Node) and node.op == "placeholder" and not node.users:
        delete_constant_placeholder(ep, node)


def unique_name(ep, base: str) -> str:
    taken = {n.name for n in ep.graph_module.graph.nodes}
    taken |= set(ep.state_dict) | set(ep.constants)
    i = 0
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


def finish(ep, modified: bool):
    from executorch.exir.pass_base import ExportedProgramPassResult

    from executorch.exir._program_utils import _get_updated_graph_signature

    pass_result(ep.graph_module, modified)
    if modified:
        # a rewritten output node (the conv replaced by another node) renames the user output
        ep._graph_signature = _get_updated_graph_signature(ep.graph_signature, ep.graph_module)
    return ExportedProgramPassResult(ep, modified)


def q8ta_fuses(p: dict) -> bool:
    """Whether Vulkan's q8ta pattern (``patterns/quantized_convolution.py``) takes this int8
    non-transposed conv2d once its weight scales are traceable: a grouped, non-depthwise conv
    needs output channels per group a multiple of 4 (else the pattern declines and the conv
    goes to the float path with a dequantized weight, which aborts at runtime), and a depthwise
    one needs ``OC % 4 == 0`` (else an assert at lowering). An int8 fix leaves any other conv
    as it is, so that it never turns one failure into another. Nor does it act on a grouped,
    non-depthwise 1x1 conv: q8ta's pointwise path ignores the groups (int8 Conv2d(8, 8, 1,
    groups=2) is MISMATCH stock, cases/vulkan_runtime_findings.json), so a per-tensor one that
    the fix let through would turn a loud LOWER_ERROR into a silent MISMATCH."""
    groups, out_channels = p["groups"], p["cout"]
    if 1 < groups < out_channels and (out_channels // groups) % 4 != 0:
        return False
    w = p["w"].meta["val"]
    if 1 < groups < out_channels and all(int(k) == 1 for k in w.shape[2:]):
        return False
    depthwise = int(w.shape[1]) == 1 and groups == out_channels
    return not (depthwise and out_channels % 4 != 0)


# --- dim orders and fake values (the layout fixes, issue 39) ----------------------------------
def dim_order(v) -> tuple | None:
    """A tensor value's dim order (its fake value's), None for anything else."""
    return tuple(v.dim_order()) if isinstance(v, torch.Tensor) else None


def is_contiguous_order(order) -> bool:
    return order == tuple(range(len(order)))


def is_contiguous(v) -> bool:
    """Whether a value is in the contiguous dim order the Vulkan delegate assumes (a non-tensor
    has none to break)."""
    order = dim_order(v)
    return order is None or is_contiguous_order(order)


def graph_fake_mode(graph):
    """The ``FakeTensorMode`` of the graph's own fake values (its placeholders' first): a value a
    pass computes is made under it, with the program's ShapeEnv, so that a dynamic program's
    SymInts carry through and a later pass that checks the modes agree (``FuseBatchNormPass``,
    any retrace) sees one mode."""
    from torch._subclasses.fake_tensor import FakeTensor

    for node in sorted(graph.nodes, key=lambda n: n.op != "placeholder"):
        for v in torch.utils._pytree.tree_leaves(node.meta.get("val")):
            if isinstance(v, FakeTensor):
                return v.fake_mode
    return None


def recompute(node, mode=None):
    """``node`` run on its arguments' existing fake values under the graph's fake ``mode``
    (``graph_fake_mode`` of the node's graph when not given): a real recomputation, not a shape
    rule, and never on fresh tensors, so the SymInts of a dynamic program's sizes pass through.
    A real tensor among the values (there should be none) is brought into the mode first, so
    that no value of another mode (or none) is made."""
    import contextlib

    from torch._subclasses.fake_tensor import FakeTensor

    mode = mode if mode is not None else graph_fake_mode(node.graph)

    def value(a):
        v = a.meta["val"] if isinstance(a, torch.fx.Node) else a
        if mode is not None and isinstance(v, torch.Tensor) and not isinstance(v, FakeTensor):
            v = mode.from_tensor(v, static_shapes=True)
        return v

    args = torch.fx.node.map_aggregate(node.args, value)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, value)
    with mode if mode is not None else contextlib.nullcontext():
        return node.target(*args, **kwargs)


def recompute_downstream(graph, changed: set, mode, skip=lambda node: False) -> None:
    """Every call in the graph that reads a node of ``changed`` gets its fake value again, in
    graph order (so the values, and their dim orders, say what runs); a node that reads none
    keeps its own (e.g. a padding's index arange). ``skip``: nodes whose value is already
    right (a pass's own inserted nodes)."""
    for node in graph.nodes:
        if node.op == "call_function" and not skip(node) and \
                any(a in changed for a in node.all_input_nodes):
            node.meta["val"] = recompute(node, mode)
            changed.add(node)


@contextlib.contextmanager
def vulkan_partitioner_declines(declines, reason: str):
    """While one cell is lowered: the Vulkan partitioner also declines every node for which
    ``declines(node)`` holds, logging ``reason`` as its own skips do (restored on exit, so
    nothing leaks into the next cell in the worker). Where upstream would add the rule:
    ``op_registry.py``'s per-op checks."""
    from executorch.backends.vulkan.partitioner import vulkan_partitioner as vp

    cls = vp.VulkanSupportedOperators
    original = cls._is_node_supported

    def _is_node_supported(self, node):
        if declines(node):
            self.log_skip(node, reason)
            return False
        return original(self, node)

    cls._is_node_supported = _is_node_supported
    try:
        yield
    finally:
        cls._is_node_supported = original


class PartitionerRule(Fix):
    """A fix whose patch is a partitioner rule: while a cell is lowered the Vulkan partitioner
    also declines every node ``declines`` holds for (``vulkan_partitioner_declines``, logging
    ``reason``). A program none of whose nodes it declines lowers byte for byte as without it
    (``patch_acts_on``: such a lane reuses that program, prepare.py)."""
    reason: str = ""

    def declines(self, node) -> bool:
        raise NotImplementedError

    def patch(self):
        return vulkan_partitioner_declines(self.declines, self.reason)

    def patch_acts_on(self, edge_manager) -> bool:
        return any_node(edge_manager, self.declines)
