"""The Vulkan runtime's argument contract for convolution, checked on a serialized VkGraph.

Modelled on ExecuTorch's runtime source (backends/vulkan/runtime/graph/ops/impl/):
- 2D conv paths (Convolution.cpp add_conv2d_node, Conv2dDW.cpp, Conv2dGemm.cpp, Q8taConv2d.cpp) read
  stride, padding and dilation through ``utils::make_ivec2`` (runtime/utils/VecUtils.h), which
  asserts ``ints.size() == 2``; ``calc_out_sizes_hw`` also reads output_padding when transposed.
- Pointwise 1x1 (Conv2dPW.cpp) and QuantizedConvolution.cpp (hence Q8taConv2d.cpp) read
  ``list->at(1)``: a length-1 list is an out-of-range error there instead of the assert; same
  cause, different symptom (the runtime confirmed it for et_vk.q8ta_conv2d). Pointwise is any
  1x1 conv2d that is not depthwise, grouped ones included (get_conv2d_method), and it reads
  stride and padding only: its dilation, of any length, is never read (a grouped 1x1 conv with
  dilation [3] ran there, conv2d_pw_tiled_float, where this model had predicted the assert).
- Conv1d paths read only ``->at(0)``: a length-1 list is legal for conv1d.
- Further rejections: transposed conv with dilation > 1; input batch > 1; non-constant weights
  (add_conv1d_node / prepack_weights go through ``prepack_standard(weight, passthrough=false)``,
  which is ``VK_CHECK_COND(graph.val_is_tref(weight))``: a weight dequantized inside the graph,
  as quantized conv1d gets, is refused).
- Learnt from the runtime (each rule below was an unpredicted RUNTIME_ERROR first, then read in
  the source at the runtime's commit):
  - height-packed conv1d (Convolution.cpp conv1d path) dispatches K=1 to ``et_vk.conv1d_pw``,
    which checks ``groups == 1`` (Conv1dPW.cpp), and anything neither pointwise nor depthwise to a
    ``VK_THROW``;
  - depthwise conv2d with stride != dilation and a kernel that is neither 3x3 nor 5x5 picks the
    shader ``conv2d_dw_sned_<dtype>`` (Conv2dDW.cpp pick_conv2d_dw_shader), which no yaml
    generates: ``Could not find ShaderInfo``;
  - et_vk.q8ta_conv2d (and _transposed) with groups > 1 needs in_channels_per_group % 4 == 0
    (Q8taConv2d.cpp:305-307, Q8taConv2dTransposed.cpp:147-149; not _dw / _pw, which have no
    such check).
- The quantized conv path (int8 q -> dq -> conv -> q fused into et_vk.q8ta_conv2d / _dw / _pw /
  _transposed), read at the runtime's commit (main cff6f4dd32) and the 1.5.1 wheel's patterns:
  - [q8ta-batch] batch > 1 runs and is wrong for samples 1.. (the shaders index batch 0 only;
    op_registry.py:844-845 refuses batch != 1 for the float conv only): a MISMATCH, no error;
  - lowering rules (``check_lowering``, on the program the partitioner receives, so after the
    lane's fix passes): [q8ta-per-tensor-weight] quantized_convolution.py:91-94 asserts on a
    per-tensor quantized weight; [q8ta-dw-oc4] :229-233 asserts on a depthwise int8 conv whose
    out channels are not a multiple of 4. Both are LOWER_ERRORs: the lowering raises, the
    prediction is added to the error as a note (its traceback) and tested against it.
The partitioner checks none of the runtime rules, so a violation is what the runtime would abort
on (or, for [q8ta-batch], compute wrong).
"""

from __future__ import annotations

from dataclasses import dataclass

# aten.convolution.default argument positions in the VkGraph OperatorCall (same as the ATen schema).
IN, WEIGHT, BIAS, STRIDE, PADDING, DILATION, TRANSPOSED, OUTPUT_PADDING, GROUPS = range(9)
IVEC2_ARGS = {STRIDE: "stride", PADDING: "padding", DILATION: "dilation"}


@dataclass(frozen=True)
class Violation:
    rule: str
    op: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.op}: {self.detail}"


def _value(graph, ref):
    return graph.values[ref].value


def _kind(v) -> str:
    return type(v).__name__


def check_graph(graph) -> list[Violation]:
    found: list[Violation] = []
    for op in graph.chain:
        if "conv" not in op.name:
            continue
        if op.name.startswith("aten.convolution"):
            found += _check_aten_convolution(graph, op)
        else:
            found += _check_custom_conv(graph, op)
    return found


def _check_aten_convolution(graph, op) -> list[Violation]:
    out: list[Violation] = []
    args = op.args
    inp = _value(graph, args[IN])
    weight = _value(graph, args[WEIGHT])
    rank = len(inp.dims)
    transposed = bool(getattr(_value(graph, args[TRANSPOSED]), "bool_val", False))
    groups = getattr(_value(graph, args[GROUPS]), "int_val", 1)
    lists = {i: _value(graph, args[i]) for i in (STRIDE, PADDING, DILATION, OUTPUT_PADDING)}

    if rank == 4:
        # get_conv2d_method (Convolution.cpp:282-298): depthwise first, then any 1x1 is
        # pointwise, grouped too; Conv2dPW.cpp reads stride and padding, never dilation
        depthwise = not transposed and groups == weight.dims[0] and weight.dims[1] == 1
        pointwise = not transposed and not depthwise and list(weight.dims[2:]) == [1, 1]
        checked = dict(IVEC2_ARGS)
        if pointwise:
            del checked[DILATION]
        if transposed:
            checked[OUTPUT_PADDING] = "output_padding"
        for pos, name in checked.items():
            v = lists[pos]
            if _kind(v) != "IntList" or len(v.items) != 2:
                items = getattr(v, "items", v)
                symptom = ("Conv2dPW.cpp reads list->at(1): out-of-range error" if pointwise
                           else "utils::make_ivec2 asserts (ints.size() == 2) is false")
                out.append(Violation("ivec2", op.name,
                                     f"{name} IntList {list(items)} has length "
                                     f"{len(items)}, 2D conv needs 2 ({symptom})"))
        if inp.dims[0] > 1:
            out.append(Violation("batch", op.name, f"input batch {inp.dims[0]} > 1 is not supported"))
        if depthwise:
            out += _check_depthwise_shader(op.name, lists, list(weight.dims[2:]))
    elif rank == 3:
        for pos, name in IVEC2_ARGS.items():
            v = lists[pos]
            if _kind(v) != "IntList" or len(v.items) < 1:
                out.append(Violation("list-at0", op.name, f"{name} must be a non-empty IntList"))
        if not transposed and "HEIGHT" in _layout(inp):
            out += _check_height_packed_conv1d(op.name, list(weight.dims), groups)
    else:
        out.append(Violation("rank", op.name, f"input rank {rank} is neither conv1d nor conv2d"))

    dilation = getattr(lists[DILATION], "items", [])
    if transposed and any(d > 1 for d in dilation):
        out.append(Violation("transposed-dilation", op.name,
                             f"transposed conv with dilation {list(dilation)} > 1 is not supported"))
    if getattr(weight, "constant_id", -1) < 0:
        out.append(Violation("const-weight", op.name, "weight is not a constant tensor"))
    return out


def _layout(tensor) -> str:
    layout = getattr(tensor, "memory_layout", None)
    return getattr(layout, "name", str(layout))


def _check_height_packed_conv1d(op: str, weight: list[int], groups: int) -> list[Violation]:
    if weight[2] == 1:
        if groups != 1:
            return [Violation("conv1d-pw-groups", op, f"pointwise conv1d with groups={groups}: "
                              "Conv1dPW.cpp checks groups == 1 (conv1d_pw only supports groups=1)")]
        return []
    if groups == weight[0] and weight[1] == 1:
        return []
    return [Violation("conv1d-height-packed", op, f"conv1d weight {weight}, groups={groups} is "
                      "neither pointwise nor depthwise: the height-packed conv1d path throws")]


def _check_depthwise_shader(op: str, lists: dict, kernel: list[int]) -> list[Violation]:
    stride, dilation = (list(getattr(lists[i], "items", [])) for i in (STRIDE, DILATION))
    if len(stride) != 2 or len(dilation) != 2 or stride == dilation or kernel in ([3, 3], [5, 5]):
        return []  # a length-1 list is already an ivec2 violation; equal ones pick a real shader
    return [Violation("dw-shader", op, f"depthwise conv2d with stride {stride} != dilation "
                      f"{dilation} and kernel {kernel}: picks shader conv2d_dw_sned_<dtype>, which "
                      "the shader library does not have")]


# et_vk.q8ta_conv2d, _dw, _pw (patterns/quantized_convolution.py make_q8ta_conv2d_custom_op, 1.5.1
# wheel lines 318-338): x, input_scale, input_zero_point, weights, weight_sums, weight_scales,
# output_scale, output_zero_point, bias, kernel_size, stride, padding, dilation, groups,
# activation(, out). et_vk.q8ta_conv2d_transposed has output_padding after padding, so its
# dilation and groups sit one further (Q8taConv2dTransposed.cpp reads groups at args.at(14)).
Q8TA_INT_LISTS = {9: "kernel_size", 10: "stride", 11: "padding", 12: "dilation"}
Q8TA_TRANSPOSED_INT_LISTS = {9: "kernel_size", 10: "stride", 11: "padding",
                             12: "output_padding", 13: "dilation"}
Q8TA_GROUPS, Q8TA_TRANSPOSED_GROUPS = 13, 14

# Where each quantized-conv rule is in the runtime source the plug-in is built from (ExecuTorch
# main cff6f4dd32, backends/vulkan/runtime/graph/ops/) and the Python of the 1.5.1 wheel.
SRC_Q8TA_BATCH = {  # dispatch over W, H, C only; the shader's batch index is 0
    "et_vk.q8ta_conv2d.default": "impl/Q8taConv2d.cpp:60-80 dispatches {W/4, H, C/4}; "
                                 "glsl/q8ta_conv2d.glsl:87,125 batch index 0",
    "et_vk.q8ta_conv2d_dw.default": "impl/Q8taConv2dDW.cpp:24-44 dispatches {W/4, H, C/4}; "
                                    "glsl/q8ta_conv2d_dw.glsl:81,109 'batch = 0 since N == 1'",
    "et_vk.q8ta_conv2d_pw.default": "impl/Q8taConv2dPW.cpp:23-49 dispatches {C/4, W/4, H}",
    "et_vk.q8ta_conv2d_transposed.default": "impl/Q8taConv2dTransposed.cpp:66-84 dispatches "
                                            "{W/4, H, C/4}; glsl/q8ta_conv2d_transposed.glsl:87,175 "
                                            "batch index 0",
}
SRC_Q8TA_GROUPS = {"et_vk.q8ta_conv2d.default": "impl/Q8taConv2d.cpp:305-307",
                   "et_vk.q8ta_conv2d_transposed.default": "impl/Q8taConv2dTransposed.cpp:147-149"}
SRC_PER_TENSOR = ("backends/vulkan/patterns/quantized_convolution.py:91-94 (1.5.1 wheel): "
                  "trace_args_until_placeholder(dequantize_weight_node.args[1]) finds no "
                  "placeholder behind a per-tensor scale (a float), then "
                  "`assert self.weight_scales_node is not None`")
SRC_DW_OC4 = ("backends/vulkan/patterns/quantized_convolution.py:229-233 (1.5.1 wheel): "
              "make_q8ta_conv2d_custom_op `assert OC % 4 == 0, \"depthwise conv requires that OC "
              "is divisible by 4\"` (FusePatternsPass, in vulkan_preprocess)")


def _q8ta_layout(name: str) -> tuple[dict, int]:
    if "q8ta_conv2d_transposed" in name:
        return Q8TA_TRANSPOSED_INT_LISTS, Q8TA_TRANSPOSED_GROUPS
    return Q8TA_INT_LISTS, Q8TA_GROUPS


def _check_custom_conv(graph, op) -> list[Violation]:
    """Quantized / fused conv ops (et_vk.*).

    - [ivec2] every int list a 2D conv reads must have length 2. Q8taConv2d.cpp builds its params
      with QuantizedConvolution.cpp ``create_conv2d_params``, which reads ``list->at(1)`` before
      make_ivec2 sees it: a length-1 list is a std::out_of_range (seen on the runtime:
      ``IndexError: vector::_M_range_check``), not the make_ivec2 assert.
    - [q8ta-batch] the q8ta conv shaders compute batch 0 only (SRC_Q8TA_BATCH): nothing checks
      the batch (the partitioner's batch check, op_registry.py check_conv_node, is for the float
      conv only), so a batch > 1 input runs and every sample after the first is wrong (MISMATCH,
      not an error).
    - [q8ta-group-channels] the general and transposed q8ta conv need in_channels_per_group % 4
      == 0 when groups > 1 (SRC_Q8TA_GROUPS); the depthwise and pointwise ops have no such check.
    """
    tensors = [v for v in (_value(graph, a) for a in op.args) if _kind(v) == "VkTensor"]
    if not tensors or len(tensors[0].dims) != 4:
        return []
    q8ta = "q8ta_conv2d" in op.name
    names, groups_at = _q8ta_layout(op.name) if q8ta else ({}, None)
    found = []
    if q8ta or "conv2d_q8" in op.name:
        batch = tensors[0].dims[0]
        if batch > 1:
            found.append(Violation("q8ta-batch", op.name, f"input batch {batch} > 1: the q8ta conv "
                                   f"shaders compute batch 0 only, samples 1..{batch - 1} come out "
                                   f"wrong ({SRC_Q8TA_BATCH.get(op.name, SRC_Q8TA_BATCH['et_vk.q8ta_conv2d.default'])})"))
    if op.name in SRC_Q8TA_GROUPS and len(op.args) > groups_at:
        groups = getattr(_value(graph, op.args[groups_at]), "int_val", 1)
        per_group = tensors[0].dims[1] // max(groups, 1)
        if groups > 1 and per_group % 4:
            found.append(Violation("q8ta-group-channels", op.name, f"groups={groups} with "
                                   f"{per_group} input channels per group: needs "
                                   f"in_channels_per_group % 4 == 0 ({SRC_Q8TA_GROUPS[op.name]})"))
    return found + [Violation("ivec2", op.name, f"{names.get(i, f'int-list argument #{i}')} IntList "
                                        f"{list(v.items)} has length {len(v.items)}, 2D conv needs 2 "
                                        f"(create_conv2d_params reads list->at(1): out-of-range error)")
            for i, v in ((i, _value(graph, a)) for i, a in enumerate(op.args))
            if _kind(v) == "IntList" and len(v.items) != 2]


# Lowering rules: what the Vulkan partitioner's quantized-convolution pattern asserts on, read
# on the program the partitioner is given (after the lane's fix passes). A violation here is a
# LOWER_ERROR the lowering will raise, not a runtime failure.

def check_lowering(exported_program) -> list[Violation]:
    """Mirror of ``QuantizedConvolutionMatch.__init__`` (patterns/quantized_convolution.py:31-159,
    1.5.1 wheel) up to its asserts, and of ``make_q8ta_conv2d_custom_op``'s depthwise assert:
    - [q8ta-per-tensor-weight] a 2D conv (not transposed with dilation > 1) whose constant weight
      reaches it through a dequantize with a per-tensor (non-tensor) scale (SRC_PER_TENSOR);
    - [q8ta-dw-oc4] a complete q -> dq -> conv (-> relu) -> q pattern that is depthwise
      (not transposed, one input channel per group, groups == out channels) with out channels not
      a multiple of 4 (SRC_DW_OC4)."""
    found = []
    for node in exported_program.graph_module.graph.nodes:
        if node.op == "call_function" and _target_name(node).endswith(("convolution.default",
                                                                       "conv2d.default")):
            found += _check_quantized_conv_node(node)
    return found


def _target_name(node) -> str:
    return getattr(node.target, "__name__", str(node.target))  # edge ops: "aten.convolution.default"


def _is(node, what: str) -> bool:
    import torch

    return isinstance(node, torch.fx.Node) and node.op == "call_function" and \
        what in getattr(node.target, "__name__", str(node.target))


def _trace_to_placeholder(arg, depth: int = 4):
    """utils.trace_args_until_placeholder: follow args[0] up to ``depth`` steps."""
    import torch

    if not isinstance(arg, torch.fx.Node):
        return None, []
    chain, cur = [arg], arg
    while cur.op != "placeholder" and depth > 0 and cur.args:
        cur = cur.args[0]
        if not isinstance(cur, torch.fx.Node):
            return None, []
        chain.append(cur)
        depth -= 1
    return (cur, chain) if cur.op == "placeholder" else (None, [])


def _check_quantized_conv_node(conv) -> list[Violation]:
    args = conv.args
    name = f"{_target_name(conv)} -> et_vk.q8ta_conv2d*"
    transposed = bool(args[6]) if len(args) > 6 else False
    dilation = list(args[5]) if len(args) > 5 else [1, 1]
    groups = args[8] if len(args) > 8 else 1
    if transposed and dilation != [1, 1]:
        return []  # :56-57 no match
    const, chain = _trace_to_placeholder(args[1])
    if const is None:
        return []  # :64-65 weight not constant
    dq = [n for n in chain if _is(n, "dequantize")]
    if not dq:
        return []  # :73-74 weight not quantized
    dq = dq[-1]
    if transposed and _is(dq, "dequantize_per_channel") and dq.args[3] != 1:
        return []  # :83-88 per-IC transposed weights: no match
    if _trace_to_placeholder(dq.args[1])[0] is None:
        return [Violation("q8ta-per-tensor-weight", name,
                          f"weight dequantized by {getattr(dq.target, '__name__', dq.target)} "
                          f"with scale {dq.args[1]!r}: the quantized-convolution pattern asserts "
                          f"instead of declining ({SRC_PER_TENSOR})")]
    out_channels = conv.meta["val"].shape[-3]
    if 1 < groups < out_channels and (out_channels / groups) % 4 != 0:
        return []  # :110-113 no match
    x = args[0]
    if not _is(x, "dequantize"):
        return []  # :128-129 input not dequantized: no match
    if len(conv.users) != 1:
        return []  # :141-142
    user = next(iter(conv.users))
    if _is(user, "relu"):
        user = next(iter(user.users), None)
    if user is None or not _is(user, "quantize"):
        return []  # :150-151
    weight = const.meta["val"]
    if transposed or weight.dim() != 4:
        return []
    oc, ic_per_group = weight.shape[0], weight.shape[1]
    if ic_per_group == 1 and groups == oc and oc % 4:
        return [Violation("q8ta-dw-oc4", name, f"depthwise int8 conv with {oc} output channels: "
                          f"{SRC_DW_OC4}")]
    return []
