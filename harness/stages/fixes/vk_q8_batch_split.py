"""Vulkan: int8 conv2d with batch > 1 (silently wrong values).

The Vulkan partitioner refuses a float conv2d with batch > 1 (``op_registry.py check_conv_node``)
and the float shaders throw on one, but the int8 path does not: a pt2e int8 conv
(``dq(x) -> conv(dq(w)) -> q``) is fused into ``et_vk.q8ta_conv2d`` / ``_pw`` / ``_dw`` whatever
the batch, and those shaders compute one image: int8 per-channel ``Conv2d(3, 6, 3)`` on
4x3x16x16 runs and returns wrong values (MISMATCH, far more than one output step off), with
nothing failing.

The rewrite: one conv per sample. For ``n`` in ``0..N-1``: ``slice_copy(dq(x), 0, n, n + 1)``, a
``quantize -> dequantize`` pair with the input's own qparams, the conv (own copies of its weight
constants and weight dequantize: Vulkan's q8ta replacement repacks a weight in place in the state
dict, so two convs must not share one), and the output's own ``quantize -> dequantize``; then
``cat(..., dim=0)`` of the dequantized per-sample outputs replaces the original output
dequantize. Each per-sample conv is a batch-1 q8ta conv, which is correct; the slices and the
concatenation are float ops the delegate takes (Slice.cpp, Concat.cpp), so everything stays in
the delegate.

Why it is within the int8 policy (and exact in its arithmetic): the sliced values are
dequantized int8 values, which the added quantize maps back to the same integers (the same
qparams), so each per-sample conv reads exactly sample ``n``'s quantized activation and the same
integer weights, bias and qparams as the batched conv; a convolution's samples are independent, so
sample ``n`` of the batched conv and the per-sample conv are the same sums of the same products.
The only freedom is float summation order inside eager's conv kernel (a batch-1 call may block
differently), which can move a value sitting on a rounding boundary of the output quantize by one
step; the harness's int8 policy is one output step. The concatenation copies already-dequantized
values, so it adds nothing.

Why not "keep it out of the delegate": a float conv with batch > 1 stays outside Vulkan anyway
(NOT_DELEGATED at best); the per-sample rewrite keeps the int8 conv delegated and correct.

Only non-transposed 2d static int8 convs (dequantized input, a constant weight behind a
dequantize, bias a constant or absent) with batch > 1 whose one reader is the output quantize,
itself read by dequantizes only, and which the q8ta pattern fuses (``vk_util.q8ta_fuses``: a
grouped conv with output channels per group not a multiple of 4 is not fused, and a batch-1
copy of it would go to the float path and abort, where the batched one stays outside the
delegate); everything else is left alone.
"""

from __future__ import annotations

import torch

from harness.stages.fixes import register
from harness.stages.fixes.base import Fix, is_call
from harness.stages.fixes.vk_util import (BIAS, INPUT, WEIGHT, add_constant, constant_tensor,
                                          conv2d, drop_if_unused, edge_ops, finish, new_node,
                                          program_pass_problem, ProgramPass, q8ta_fuses,
                                          unique_name)


def matches(conv) -> dict | None:
    """(conv args + its q/dq nodes) when ``conv`` is a static int8 conv2d with batch > 1."""
    p = conv2d(conv)
    if p is None or p["batch"] <= 1 or not q8ta_fuses(p):
        return None
    dq_in, dq_w = p["x"], p["w"]
    if not is_call(dq_in, "quantized_decomposed.dequantize_per_tensor.default"):
        return None
    if not is_call(dq_w, "dequantize") or not isinstance(dq_w.args[0], torch.fx.Node) \
            or dq_w.args[0].op != "placeholder" or len(dq_w.users) != 1:
        return None
    if list(conv.users) == [] or len(conv.users) != 1:
        return None
    q_out = next(iter(conv.users))
    if not is_call(q_out, "quantized_decomposed.quantize_per_tensor.default"):
        return None
    if not q_out.users or not all(
            is_call(u, "quantized_decomposed.dequantize_per_tensor.default") for u in q_out.users):
        return None
    return dict(p, dq_in=dq_in, dq_w=dq_w, q_out=q_out)


def _copy_weight_dq(ep, graph, dq_w, conv, n: int):
    """A private copy of the weight's dequantize and of every constant it reads."""
    args = []
    for a in dq_w.args:
        tensor = constant_tensor(ep, a) if isinstance(a, torch.fx.Node) else None
        if isinstance(a, torch.fx.Node):
            if tensor is None:
                raise ValueError(f"{dq_w.name}: argument {a.name} is not a constant")
            a = add_constant(ep, unique_name(ep, f"vk_b{n}_{a.name}"), tensor)
        args.append(a)
    with graph.inserting_before(conv):
        return new_node(graph, dq_w.target, args, conv, dq_w.kwargs)


def _constants_ok(ep, p) -> bool:
    if any(isinstance(a, torch.fx.Node) and constant_tensor(ep, a) is None for a in p["dq_w"].args):
        return False
    return p["bias"] is None or constant_tensor(ep, p["bias"]) is not None


class Int8BatchSplitPass(ProgramPass or object):
    def call(self, ep):
        graph, edge, modified = ep.graph_module.graph, edge_ops(), False
        quant = edge.quantized_decomposed
        for conv in list(graph.nodes):
            p = matches(conv)
            if p is None or not _constants_ok(ep, p):
                continue
            in_qparams = tuple(p["dq_in"].args[1:])
            q_out = p["q_out"]
            out_qparams = tuple(q_out.args[1:])
            outputs = []
            for n in range(p["batch"]):
                w_n = _copy_weight_dq(ep, graph, p["dq_w"], conv, n)
                b_n = p["bias"]
                if b_n is not None:
                    b_n = add_constant(ep, unique_name(ep, f"vk_b{n}_{b_n.name}"),
                                       constant_tensor(ep, b_n))
                with graph.inserting_before(conv):
                    x_n = new_node(graph, edge.aten.slice_copy.Tensor, (p["dq_in"], 0, n, n + 1, 1), conv)
                    x_n = new_node(graph, quant.quantize_per_tensor.default, (x_n, *in_qparams), conv,
                                   p["dq_in"].kwargs)
                    x_n = new_node(graph, quant.dequantize_per_tensor.default, (x_n, *in_qparams), conv,
                                   p["dq_in"].kwargs)
                    args = list(conv.args)
                    args[INPUT], args[WEIGHT], args[BIAS] = x_n, w_n, b_n
                    c_n = new_node(graph, conv.target, args, conv)
                    c_n = new_node(graph, quant.quantize_per_tensor.default, (c_n, *out_qparams), conv,
                                   q_out.kwargs)
                    outputs.append(new_node(graph, quant.dequantize_per_tensor.default,
                                            (c_n, *out_qparams), conv, q_out.kwargs))
            for dq_out in list(q_out.users):
                if tuple(dq_out.args[1:]) != out_qparams:
                    raise ValueError(f"{dq_out.name}: dequantizes with other qparams than {q_out.name}")
                with graph.inserting_before(dq_out):
                    cat = new_node(graph, edge.aten.cat.default, (outputs, 0), dq_out)
                if tuple(cat.meta["val"].shape) != tuple(dq_out.meta["val"].shape):
                    raise AssertionError(f"{conv.name}: per-sample shape {tuple(cat.meta['val'].shape)}")
                dq_out.replace_all_uses_with(cat)
                graph.erase_node(dq_out)
            old = [p["dq_w"].args[i] for i in range(len(p["dq_w"].args))
                   if isinstance(p["dq_w"].args[i], torch.fx.Node)] + [p["bias"]]
            graph.erase_node(q_out)
            graph.erase_node(conv)
            graph.erase_node(p["dq_w"])
            for node in old:
                drop_if_unused(ep, node)
            modified = True
        return finish(ep, modified)


@register
class VkQ8BatchSplit(Fix):
    name = "vk-q8-batch-split"
    backends = ("vulkan",)
    summary = ("int8 conv2d with batch > 1: one batch-1 int8 conv per sample (slice, requantize "
               "with the same qparams), outputs concatenated")
    bug = ("Vulkan int8 (q8ta) conv2d with batch > 1 runs and returns wrong values: the float "
           "partitioner refuses batch > 1, the q8ta pattern does not, and its shaders compute "
           "one image")
    verified = ("cases/vulkan_graph_fixes.json (lavapipe, 1.5.1 wheel + main plug-in): "
                "MISMATCH -> PASS, delegated; tests/test_vulkan_graph_fixes.py")

    def unavailable(self) -> str | None:
        return program_pass_problem()

    def transform_passes(self) -> list:
        return [Int8BatchSplitPass()]
