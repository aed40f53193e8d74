"""The Vulkan runtime's argument contract for convolution, checked on a serialized VkGraph.

Modelled on ExecuTorch's runtime source (backends/vulkan/runtime/graph/ops/impl/):
- 2D conv paths (Convolution.cpp add_conv2d_node, Conv2dDW.cpp, Conv2dGemm.cpp, Q8taConv2d.cpp) read
  stride, padding and dilation through ``utils::make_ivec2`` (runtime/utils/VecUtils.h), which
  asserts ``ints.size() == 2``; ``calc_out_sizes_hw`` also reads output_padding when transposed.
- Pointwise 1x1 (Conv2dPW.cpp) and QuantizedConvolution.cpp (hence Q8taConv2d.cpp) read
  ``list->at(1)``: a length-1 list is an out-of-range error there instead of the assert; same
  cause, different symptom (the runtime confirmed it for et_vk.q8ta_conv2d).
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
  - et_vk.q8ta_conv2d with groups > 1 needs in_channels_per_group % 4 == 0 (Q8taConv2d.cpp).
The partitioner checks none of this, so a violation here is what the runtime would abort on.
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
        pointwise = not transposed and list(weight.dims[2:]) == [1, 1] and groups == 1
        checked = dict(IVEC2_ARGS)
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
        if not transposed and groups == weight.dims[0] and weight.dims[1] == 1:
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


# et_vk.q8ta_conv2d* (custom_ops_lib.py): x, input_scale, input_zero_point, weights, weight_sums,
# weight_scales, output_scale, output_zero_point, bias, kernel_size, stride, padding, dilation,
# groups, activation, out.
Q8TA_INT_LISTS = {9: "kernel_size", 10: "stride", 11: "padding", 12: "dilation"}
Q8TA_GROUPS = 13


def _check_custom_conv(graph, op) -> list[Violation]:
    """Quantized / fused conv ops (et_vk.*): every int list a 2D conv reads must have length 2.
    Q8taConv2d.cpp builds its params with QuantizedConvolution.cpp ``create_conv2d_params``,
    which reads ``list->at(1)`` before make_ivec2 sees it: a length-1 list is a std::out_of_range
    (seen on the runtime: ``IndexError: vector::_M_range_check``), not the make_ivec2 assert."""
    tensors = [v for v in (_value(graph, a) for a in op.args) if _kind(v) == "VkTensor"]
    if not tensors or len(tensors[0].dims) != 4:
        return []
    names = Q8TA_INT_LISTS if "q8ta_conv2d" in op.name else {}
    found = []
    if "q8ta_conv2d" in op.name and len(op.args) > Q8TA_GROUPS:
        groups = getattr(_value(graph, op.args[Q8TA_GROUPS]), "int_val", 1)
        per_group = tensors[0].dims[1] // max(groups, 1)
        if groups > 1 and per_group % 4:
            found.append(Violation("q8ta-group-channels", op.name, f"groups={groups} with "
                                   f"{per_group} input channels per group: Q8taConv2d.cpp needs "
                                   "in_channels_per_group % 4 == 0"))
    return found + [Violation("ivec2", op.name, f"{names.get(i, f'int-list argument #{i}')} IntList "
                                        f"{list(v.items)} has length {len(v.items)}, 2D conv needs 2 "
                                        f"(create_conv2d_params reads list->at(1): out-of-range error)")
            for i, v in ((i, _value(graph, a)) for i, a in enumerate(op.args))
            if _kind(v) == "IntList" and len(v.items) != 2]
