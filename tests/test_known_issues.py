"""cases/upstream/known_issues.json: it loads, each entry is matched by a cell showing its bug and not by a
control one feature away, and a malformed file is one ValueError line naming the entry and field.
Pure Python: no lowering, no runtime."""

import copy
import json

import pytest

from harness.results import known_issues
from harness.results.known_issues import KNOWN_ISSUES_FILE, features, load, match
from harness.spec import ConvCase


def case(**kw) -> ConvCase:
    base = dict(dim=2, in_channels=4, out_channels=4, kernel_size=3, input_shape=(1, 4, 8, 8))
    return ConvCase(**{**base, **kw})


IVEC2 = ("Exception raised from make_ivec2 at executorch/backends/vulkan/runtime/utils/VecUtils.h:367: "
         "(ints.size() == 2) is false!")
GEMM_EXTENT = ("Exception raised from prepack_conv2d_gemm_weight at executorch/backends/vulkan/runtime/"
               "graph/ops/impl/Conv2dGemm.cpp:91: (output_width / 4 <= max_extent && "
               "utils::safe_downcast<uint32_t>(output_height) <= max_extent) is false!")
SNED = ("get_shader_info at executorch/backends/vulkan/runtime/api/ShaderRegistry.cpp:51: "
        "(it != listings_.end()) is false! Could not find ShaderInfo with name conv2d_dw_sned_float")
INDEX = ("Exception raised from index_tensor at executorch/backends/vulkan/runtime/graph/ops/impl/"
         "IndexTensor.cpp:76: (indices_list->size() == 1) is false! index.Tensor: only one index "
         "tensor is supported")
MISMATCH = "252/336 elements outside atol=0.0001 rtol=0.0001, max|d|=8.57"
XNN_0X1 = "Failed to execute method forward, error: 0x1"
OUT_VARIANTS = "RuntimeError: Missing out variants: {'quantized_decomposed::dequantize_per_channel'}"
Q8TA_306 = ("add_q8ta_conv2d_node at executorch/backends/vulkan/runtime/graph/ops/impl/"
            "Q8taConv2d.cpp:306: (conv_params.in_channels_per_group % 4 == 0) is false!")
DW7 = dict(in_channels=4, out_channels=4, groups=4, kernel_size=7)

# issue 39: the nightly's findings without a fix (each entry's note says why, or names its fix)
PYB = "Input 0 for method forward should be contiguous or channels-last."
FUSE = "Exception: An error occurred when running the 'FusePatternsPass' pass after the following passes: [] <- "
MISSING_DQ = ("worker killed by SIGABRT (signal 6); it printed: [VulkanBackend.cpp:480] In function "
              "build_graph(), assert failed (VK_HAS_OP(op_name)): Missing operator: "
              "quantized_decomposed.dequantize_per_channel.default")
TOTENSORREF = ("Exception raised from toTensorRef at executorch/backends/vulkan/runtime/graph/containers/"
               "Value.h:262: (isTensorRef()) is false! Expected value to have type TensorRef, got TENSOR instead.")
PW_MISMATCH = "32/40 elements outside atol=0.0001 rtol=0.0001, max|d|=3 — culprit: delegate:vulkan:conv1d_pw_texture3d_texture2d_float"
C1D_MISMATCH = "9/36 elements outside atol=0.0001 rtol=0.0001, max|d|=1.02 — culprit: delegate:vulkan:conv1d_float"
VK_OUT = "outside the vulkan delegate: aten.convolution x1"
XNN_OUT = "outside the xnnpack delegate: aten.convolution x1"
REFLECT_OUT = "outside the xnnpack delegate: aten.abs x2, aten.arange.start_step x1, aten.index.Tensor x1, aten.sub.Tensor x1"
CONV_DIM_ORDER = ("Failed to execute method forward, error: 0x12 — runtime: [kernel_ops_util.cpp:389] Check failed "
                  "(tensor_is_default_or_channels_last_dim_order(weight)): | [method.cpp:1483] KernelCall failed at "
                  "instruction 0:0 in operator aten::convolution.out: 0x12")
INDEX_DIM_ORDER = ("Failed to execute method forward, error: 0x12 — runtime: [tensor_util_portable.cpp:130] Check failed "
                   "(all_contiguous || all_channels_last): 2 input tensors have different dim orders | [method.cpp:1483] "
                   "KernelCall failed at instruction 0:16 in operator aten::index.Tensor_out: 0x12")
SLICE_RESIZE = ("Failed to execute method forward, error: 0x12 — runtime: [op_slice_copy.cpp:52] Check failed "
                "(resize_tensor(out, {target_sizes, target_ndim}) == Error::Ok): | [method.cpp:1483] KernelCall failed "
                "at instruction 0:1 in operator aten::slice_copy.Tensor_out: 0x12")
ARGS = ("Exception raised from execute at executorch/backends/vulkan/runtime/VulkanBackend.cpp:729: (args.size() == "
        "num_inputs + num_outputs) is false! Vulkan graph declares 1 inputs and 1 outputs, but the delegate call supplied 3 arguments")
BN3D = ("Exception raised from add_native_batch_norm_node at executorch/backends/vulkan/runtime/graph/ops/impl/"
        "BatchNorm.cpp:65: (in_sizes.size() == 4) is false! BatchNorm only support 4d tensor")
TCONV_DILATION = ("Exception raised from check_conv2d_params at executorch/backends/vulkan/runtime/graph/ops/impl/"
                  "Convolution.cpp:279: aten.convolution.default: transposed = true, dilation > 1 is not supported yet!")
CL_COPIES_OUT = "outside the vulkan delegate: dim_order_ops._to_dim_order_copy x2"
DIM_ORDER_MAP = "AssertionError: Failed to map a given dim_order: [0, 2, 1, 3] to a torch.memory_format"
CL_TAGGED = ("Exception: An error occurred when running the 'ChannelsLastTaggedReshapePass' pass after the following "
             "passes: [] <- AssertionError: Expected p_weight to be NCHW in channels last reshape pass")
RESHAPE2 = "RuntimeError: XNNPACK reshape only supports 1 dynamic dimension. This may occur when"
FUSE_BN = ("Exception: An error occurred when running the 'FuseBatchNormPass' pass after the following passes: [] <- "
           "RuntimeError: The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 1")
XNN_SHAPES = ("Failed to execute method forward, error: 0x1 — runtime: [XNNExecutor.cpp:169] Internal Error: "
              "Propagating input shapes failed with code: xnn_status_invalid_parameter")
PORTABLE_MISMATCH = "max|d|=2.64 is 205.00 output steps > 1.0 — culprit: portable:aten::convolution.out"
XNN_RESIZE = ("Failed to execute method forward, error: 0x10 — runtime: [XNNExecutor.cpp:279] Failed to resize output "
              "tensor for XNNExecutor | [method.cpp:1528] CALL_DELEGATE execute failed at instruction 0: 0x10")
VK_CL_MISMATCH = "512/512 elements outside atol=0.0001 rtol=0.0001, max|d|=18.2 — culprit: delegate:vulkan:conv2d_float"
VK_CLM_MISMATCH = "504/512 elements outside atol=0.0001 rtol=0.0001, max|d|=15.3 — culprit: delegate:vulkan:conv2d_float"
XNN_MISMATCH = "max|d|=13.8 is 105.69 output steps > 1.0 — culprit: delegate:xnnpack:XNNConv2d"
XNN_PAD = ("Failed to execute method forward, error: 0x1 — runtime: [XNNCompiler.cpp:1262] Failed to create "
           "StaticConstantPad node 3 with code: xnn_status_invalid_parameter")
C3D = dict(dim=3, in_channels=2, kernel_size=3, input_shape=(1, 2, 5, 5, 5))
C1D = dict(dim=1, in_channels=4, out_channels=8, input_shape=(1, 4, 9))

# id -> (backend lane, case, status, message) showing the bug (corpus files and README) ...
PORTABLE_CONV3D = (
    "Failed to execute method forward, error: 0x12 — runtime: [kernel_ops_util.cpp:394] Check "
    "failed (in.dim() == 3 || in.dim() == 4): Expect input tensor to be 3-D or 4-D, but got, 5. "
    "| [method.cpp:1483] KernelCall failed at instruction 0:0 in operator aten::convolution.out: "
    "0x12")
Q_PER_CHANNEL_ABORT = (
    "worker killed by SIGABRT (signal 6); it printed: [op_quantize.cpp:427] In function "
    "quantize_per_channel_out(), assert failed (scale.scalar_type() == ScalarType::Double): "
    "scale.scalar_type() 6 is not double type")

REPRESENTATIVE = {
    "vulkan-make-ivec2-length-1": (
        "vulkan", case(in_channels=3, out_channels=64, padding="valid",
                       input_shape=(1, 3, 224, 224)), "RUNTIME_ERROR", IVEC2),
    "vulkan-dw-generic-shader-right-edge": ("vulkan", case(**DW7, padding=3), "MISMATCH", MISMATCH,
                                            "right edge 3 cols · all channels · all batches"),
    "vulkan-grouped-conv-channels-per-group-not-x4": (
        "vulkan", case(in_channels=8, out_channels=4, groups=2, padding=1, input_shape=(1, 8, 8, 8)),
        "MISMATCH", MISMATCH),
    "vulkan-q8ta-conv-batch": (
        "vulkan", case(input_shape=(2, 4, 8, 8), quant="int8_per_channel"), "MISMATCH", MISMATCH),
    # the size axis (issue 46): K = 2048 x 6 x 6 = 73728 and 1536 x 7 x 7 = 75264 terms
    "vulkan-conv2d-gemm-weight-texture-limit": (
        "vulkan", case(in_channels=2048, out_channels=128, kernel_size=6,
                       input_shape=(1, 2048, 6, 6)), "RUNTIME_ERROR", GEMM_EXTENT),
    "vulkan-q8ta-conv-large-reduction-crash": (
        "vulkan", case(in_channels=1536, out_channels=16, kernel_size=7, input_shape=(1, 1536, 7, 7),
                       quant="int8_per_channel"), "CRASH", "worker killed by SIGSEGV (signal 11)"),
    "vulkan-q8-per-tensor-weight-scales-assert": (
        "vulkan", case(stride=[2], quant="int8_per_tensor"), "LOWER_ERROR",
        "AssertionError at executorch/backends/vulkan/patterns/quantized_convolution.py:94: "
        "assert self.weight_scales_node is not None"),
    "vulkan-dw-sned-missing-shader": (
        "vulkan", case(groups=4, kernel_size=2, dilation=2), "RUNTIME_ERROR", SNED),
    "vulkan-index-tensor-reflect-replicate": (
        "vulkan", case(padding=1, padding_mode="replicate"), "RUNTIME_ERROR", INDEX),
    "xnnpack-tconv-output-padding-ge-stride": (
        "xnnpack", case(transposed=True, stride=2, dilation=3, output_padding=2,
                        input_shape=(1, 4, 6, 6)), "RUNTIME_ERROR", XNN_0X1),
    "xnnpack-conv2d-length-1-stride-list": (
        "xnnpack", case(stride=[2]), "LOWER_ERROR",
        "Exception: An error occurred when running the 'Conv1dUnsqueezePass' pass after the "
        "following passes: []"),
    "xnnpack-quantized-same-even-kernel": (
        "xnnpack", case(dim=1, kernel_size=4, padding="same", input_shape=(1, 4, 16),
                        quant="int8_per_tensor"), "NOT_DELEGATED",
        "outside the xnnpack delegate: aten.convolution x1"),
    "xnnpack-missing-out-variant-dequantize-per-channel": (
        "xnnpack", case(dim=1, kernel_size=2, dilation=3, padding="same", input_shape=(1, 4, 9),
                        quant="int8_per_channel"), "LOWER_ERROR", OUT_VARIANTS),
    "vulkan-conv1d-pw-groups": (
        "vulkan", case(dim=1, kernel_size=1, groups=2, input_shape=(1, 4, 7)), "RUNTIME_ERROR",
        "conv1d_pw at executorch/backends/vulkan/runtime/graph/ops/impl/Conv1dPW.cpp:220: "
        "(graph.get_int(args[6]) == 1) is false! conv1d_pw only supports groups=1"),
    "vulkan-q8ta-group-channels": (
        "vulkan", case(in_channels=12, out_channels=8, groups=2, input_shape=(1, 12, 8, 8),
                       quant="int8_per_channel"), "RUNTIME_ERROR", Q8TA_306),
    "vulkan-grouped-transposed-conv": (
        "vulkan", case(transposed=True, in_channels=8, out_channels=8, groups=2,
                       input_shape=(1, 8, 6, 6)), "MISMATCH", MISMATCH),
    "vulkan-transposed-conv-dilation": (
        "vulkan", case(transposed=True, out_channels=8, stride=2, padding=1, dilation=2,
                       input_shape=(1, 4, 6, 6)), "RUNTIME_ERROR", TCONV_DILATION),
    "vulkan-q8-depthwise-oc-not-x4": (
        "vulkan", case(in_channels=6, out_channels=6, groups=6, input_shape=(1, 6, 8, 8),
                       quant="int8_per_channel"), "LOWER_ERROR",
        "AssertionError: depthwise conv requires that OC is divisible by 4"),
    # components every lane shares (backend "any", matched on the culprit the message names)
    "portable-conv3d-5d-input": (
        "xnnpack", case(dim=3, in_channels=2, kernel_size=3, input_shape=(1, 2, 5, 5, 5)),
        "RUNTIME_ERROR", PORTABLE_CONV3D),
    "portable-quantize-per-channel-float-scale": (
        "vulkan", case(in_channels=8, out_channels=16, padding=1, input_shape=(1, 8, 12, 12),
                       quant="int8_per_channel", weights="input"), "CRASH", Q_PER_CHANNEL_ABORT),
    "pybindings-5d-channels-last-input": (
        "xnnpack", case(**C3D, memory_format="channels_last_3d"), "RUNTIME_ERROR", PYB),
    "vulkan-q8-conv1d-pattern-unpack": (
        "vulkan", case(**C1D, quant="int8_per_channel"), "LOWER_ERROR",
        FUSE + "ValueError: not enough values to unpack (expected 4, got 3)"),
    "vulkan-q8-conv3d-pattern-unpack": (
        "vulkan", case(**C3D, quant="int8_per_channel"), "LOWER_ERROR",
        FUSE + "ValueError: too many values to unpack (expected 4)"),
    "vulkan-q8-dequantize-per-channel-missing-op": (
        "vulkan", case(in_channels=4, out_channels=8, groups=4, quant="int8_per_channel"), "CRASH", MISSING_DQ),
    "vulkan-conv-runtime-weight": ("vulkan", case(weights="input"), "RUNTIME_ERROR", TOTENSORREF),
    "vulkan-conv1d-pw-stride-padding": ("vulkan", case(**{**C1D, "kernel_size": 1}, stride=2), "MISMATCH", PW_MISMATCH),
    "vulkan-conv-not-delegated-by-design": ("vulkan", case(dtype="bfloat16"), "NOT_DELEGATED", VK_OUT),
    "xnnpack-conv-not-delegated-by-design": ("xnnpack", case(dtype="bfloat16"), "NOT_DELEGATED", XNN_OUT),
    "padding-mode-decomposition-not-delegated": (
        "xnnpack", case(padding=1, padding_mode="reflect"), "NOT_DELEGATED", REFLECT_OUT),
    "portable-conv-dim-order": ("vulkan", case(dtype="bfloat16"), "RUNTIME_ERROR", CONV_DIM_ORDER),
    "portable-index-tensor-dim-order": (
        "xnnpack", case(padding=1, padding_mode="reflect", memory_format="channels_last"),
        "RUNTIME_ERROR", INDEX_DIM_ORDER),
    "portable-slice-copy-dynamic-circular": (
        "xnnpack", case(padding=1, padding_mode="circular"), "RUNTIME_ERROR", SLICE_RESIZE),
    "exir-graph-output-allocated-dynamic-circular": (
        "vulkan", case(padding=1, padding_mode="circular"), "LOWER_ERROR", "AssertionError: graph_output_allocated not set"),
    "vulkan-execute-arg-count-circular": ("vulkan", case(padding=1, padding_mode="circular"), "RUNTIME_ERROR", ARGS),
    "vulkan-batch-norm-3d": ("vulkan", case(**C1D, transposed=True), "RUNTIME_ERROR", BN3D),
    "vulkan-conv1d-dynamic-resize-mismatch": ("vulkan", case(**C1D, padding=1), "MISMATCH", C1D_MISMATCH),
    "exir-dim-order-memory-format-map": ("xnnpack", case(padding=1, padding_mode="replicate"), "LOWER_ERROR", DIM_ORDER_MAP),
    "xnnpack-channels-last-tagged-reshape-assert": ("xnnpack", case(groups=2), "LOWER_ERROR", CL_TAGGED),
    "xnnpack-reshape-two-dynamic-dims": ("xnnpack", case(**C1D), "LOWER_ERROR", RESHAPE2),
    "xnnpack-fuse-batch-norm-grouped-transposed": (
        "xnnpack", case(**C1D, transposed=True, groups=2), "LOWER_ERROR", FUSE_BN),
    "xnnpack-conv2d-channels-last-input-shapes": (
        "xnnpack", case(stride=3, memory_format="channels_last"), "RUNTIME_ERROR", XNN_SHAPES),
    "xnnpack-int8-runtime-weight-portable-mismatch": (
        "xnnpack", case(quant="int8_per_tensor", weights="input"), "MISMATCH", PORTABLE_MISMATCH),
    "xnnpack-channels-last-module-output-resize": (
        "xnnpack", case(quant="int8_per_tensor", module_channels_last=True), "RUNTIME_ERROR", XNN_RESIZE),
    "xnnpack-int8-circular-channels-last-mismatch": (
        "xnnpack", case(padding=1, padding_mode="circular", quant="int8_per_tensor",
                        memory_format="channels_last"), "MISMATCH", XNN_MISMATCH),
    "xnnpack-int8-conv3d-pad-5d": (
        "xnnpack", case(**{**C3D, "kernel_size": 2}, padding="same", quant="int8_per_tensor"), "RUNTIME_ERROR", XNN_PAD),
    "vulkan-channels-last-input-mismatch": (
        "vulkan", case(out_channels=8, padding=1, memory_format="channels_last"), "MISMATCH", VK_CL_MISMATCH),
    "vk-channels-last-input-copies-outside": (
        "vulkan+vk-channels-last-input", case(out_channels=8, padding=1, memory_format="channels_last"),
        "NOT_DELEGATED", CL_COPIES_OUT),
    "vulkan-channels-last-module-output-mismatch": (
        "vulkan", case(out_channels=8, padding=1, module_channels_last=True), "MISMATCH", VK_CLM_MISMATCH),
}

# ... and a control one step away (the same message unless the message is what differs).
CONTROL = {
    "vulkan-make-ivec2-length-1": ("vulkan", case(padding=0), "RUNTIME_ERROR", IVEC2),
    "vulkan-dw-generic-shader-right-edge": ("vulkan", case(**DW7, padding=0), "MISMATCH", MISMATCH),
    "vulkan-grouped-conv-channels-per-group-not-x4": (
        "vulkan", case(in_channels=16, out_channels=16, groups=4, padding=1, input_shape=(1, 16, 8, 8)),
        "MISMATCH", MISMATCH),
    "vulkan-q8ta-conv-batch": ("vulkan", case(quant="int8_per_channel"), "MISMATCH", MISMATCH),
    # the same refusal / death below the size (K = 1024 x 6 x 6 = 36864 terms) is another bug
    "vulkan-conv2d-gemm-weight-texture-limit": (
        "vulkan", case(in_channels=1024, out_channels=128, kernel_size=6,
                       input_shape=(1, 1024, 6, 6)), "RUNTIME_ERROR", GEMM_EXTENT),
    "vulkan-q8ta-conv-large-reduction-crash": (
        "vulkan", case(in_channels=1024, out_channels=16, kernel_size=7, input_shape=(1, 1024, 7, 7),
                       quant="int8_per_channel"), "CRASH", "worker killed by SIGSEGV (signal 11)"),
    "vulkan-q8-per-tensor-weight-scales-assert": (
        "vulkan", case(quant="int8_per_tensor"), "LOWER_ERROR", "AssertionError: something else"),
    "vulkan-dw-sned-missing-shader": ("vulkan", case(groups=4, dilation=2), "RUNTIME_ERROR", SNED),
    "vulkan-index-tensor-reflect-replicate": ("vulkan", case(padding=1), "RUNTIME_ERROR", INDEX),
    "xnnpack-tconv-output-padding-ge-stride": (
        "xnnpack", case(transposed=True, stride=2, dilation=2, output_padding=1,
                        input_shape=(1, 4, 6, 6)), "RUNTIME_ERROR", XNN_0X1),
    "xnnpack-conv2d-length-1-stride-list": (
        "xnnpack", case(dim=1, stride=[2], input_shape=(1, 4, 8)), "LOWER_ERROR",
        "Exception: An error occurred when running the 'Conv1dUnsqueezePass' pass"),
    "xnnpack-quantized-same-even-kernel": (
        "xnnpack", case(dim=1, kernel_size=3, padding="same", input_shape=(1, 4, 16),
                        quant="int8_per_tensor"), "NOT_DELEGATED",
        "outside the xnnpack delegate: aten.convolution x1"),
    "xnnpack-missing-out-variant-dequantize-per-channel": (
        "xnnpack", case(dim=1, kernel_size=4, padding="same", input_shape=(1, 4, 16),
                        quant="int8_per_tensor"), "LOWER_ERROR",
        "RuntimeError: Missing out variants: {'quantized_decomposed::dequantize_per_tensor'}"),
    "vulkan-conv1d-pw-groups": (
        "vulkan", case(dim=1, kernel_size=1, input_shape=(1, 4, 7)), "RUNTIME_ERROR",
        "conv1d_pw at executorch/backends/vulkan/runtime/graph/ops/impl/Conv1dPW.cpp:220"),
    "vulkan-q8ta-group-channels": (
        "vulkan", case(in_channels=8, out_channels=8, groups=2, input_shape=(1, 8, 8, 8),
                       quant="int8_per_channel"), "RUNTIME_ERROR", Q8TA_306),
    "vulkan-grouped-transposed-conv": (
        "vulkan", case(transposed=True, in_channels=8, out_channels=8, input_shape=(1, 8, 6, 6)),
        "MISMATCH", MISMATCH),
    "vulkan-transposed-conv-dilation": (  # the same conv, forward: its dilation is fine
        "vulkan", case(out_channels=8, stride=2, padding=1, dilation=2), "RUNTIME_ERROR",
        TCONV_DILATION),
    "vulkan-q8-depthwise-oc-not-x4": (
        "vulkan", case(in_channels=6, out_channels=6, groups=6, input_shape=(1, 6, 8, 8)),
        "LOWER_ERROR", "AssertionError: depthwise conv requires that OC is divisible by 4"),
    # the same failed kernel call on a 2D conv (another cause), and the same case failing inside
    # a delegate: not the portable kernel's entry
    "portable-conv3d-5d-input": (
        "vulkan", case(dim=3, in_channels=2, kernel_size=3, input_shape=(1, 2, 5, 5, 5)),
        "RUNTIME_ERROR", "Exception raised from add_conv3d at executorch/backends/vulkan/x.cpp:1: "
        "(false) is false!"),
    "portable-quantize-per-channel-float-scale": (
        "xnnpack", case(in_channels=8, out_channels=16, padding=1, input_shape=(1, 8, 12, 12),
                        quant="int8_per_channel", weights="input"), "CRASH",
        "worker killed by SIGABRT (signal 6); it printed: [VulkanBackend.cpp:480] In function "
        "build_graph(), assert failed (VK_HAS_OP(op_name)): Missing operator: "
        "quantized_decomposed.quantize_per_channel.default"),
    # issue 39 (one feature away: the lane, the shape, the dtype or the message)
    "pybindings-5d-channels-last-input": ("xnnpack", case(**C3D), "RUNTIME_ERROR", PYB),
    "vulkan-q8-conv1d-pattern-unpack": (
        "vulkan", case(quant="int8_per_channel"), "LOWER_ERROR",
        FUSE + "ValueError: not enough values to unpack (expected 4, got 3)"),
    "vulkan-q8-conv3d-pattern-unpack": (
        "vulkan", case(**C3D, quant="int8_per_tensor"), "LOWER_ERROR",
        FUSE + "ValueError: too many values to unpack (expected 4)"),
    "vulkan-q8-dequantize-per-channel-missing-op": (
        "xnnpack", case(in_channels=4, out_channels=8, groups=4, quant="int8_per_channel"), "CRASH", MISSING_DQ),
    "vulkan-conv-runtime-weight": ("xnnpack", case(weights="input"), "RUNTIME_ERROR", TOTENSORREF),
    "vulkan-conv1d-pw-stride-padding": ("vulkan", case(**C1D, stride=2), "MISMATCH", PW_MISMATCH),
    "vulkan-conv-not-delegated-by-design": ("vulkan", case(dtype="bfloat16"), "NOT_DELEGATED",
                                            "outside the vulkan delegate: aten.hardtanh x1"),
    "xnnpack-conv-not-delegated-by-design": ("vulkan", case(dtype="bfloat16"), "NOT_DELEGATED", XNN_OUT),
    "padding-mode-decomposition-not-delegated": ("xnnpack", case(padding=1), "NOT_DELEGATED", REFLECT_OUT),
    "portable-conv-dim-order": ("vulkan", case(dtype="bfloat16"), "RUNTIME_ERROR", INDEX_DIM_ORDER),
    "portable-index-tensor-dim-order": (
        "xnnpack", case(padding=1, padding_mode="reflect"), "RUNTIME_ERROR", INDEX_DIM_ORDER),
    "portable-slice-copy-dynamic-circular": ("xnnpack", case(padding=1), "RUNTIME_ERROR", SLICE_RESIZE),
    "exir-graph-output-allocated-dynamic-circular": (
        "xnnpack", case(padding=1, padding_mode="circular"), "LOWER_ERROR", "AssertionError: graph_output_allocated not set"),
    "vulkan-execute-arg-count-circular": ("vulkan", case(padding=1), "RUNTIME_ERROR", ARGS),
    "vulkan-batch-norm-3d": ("vulkan", case(transposed=True), "RUNTIME_ERROR", BN3D),
    "vulkan-conv1d-dynamic-resize-mismatch": ("vulkan", case(padding=1), "MISMATCH", C1D_MISMATCH),
    "exir-dim-order-memory-format-map": ("xnnpack", case(padding=1, padding_mode="replicate"), "LOWER_ERROR",
                                         "AssertionError: something else"),
    "xnnpack-channels-last-tagged-reshape-assert": ("vulkan", case(groups=2), "LOWER_ERROR", CL_TAGGED),
    "xnnpack-reshape-two-dynamic-dims": ("xnnpack", case(), "LOWER_ERROR", RESHAPE2),
    "xnnpack-fuse-batch-norm-grouped-transposed": ("xnnpack", case(**C1D, transposed=True), "LOWER_ERROR", FUSE_BN),
    "xnnpack-conv2d-channels-last-input-shapes": ("xnnpack", case(stride=3), "RUNTIME_ERROR", XNN_SHAPES),
    "xnnpack-int8-runtime-weight-portable-mismatch": (
        "xnnpack", case(quant="int8_per_channel", weights="input"), "MISMATCH", PORTABLE_MISMATCH),
    "xnnpack-channels-last-module-output-resize": (
        "xnnpack", case(quant="int8_per_tensor", memory_format="channels_last"), "RUNTIME_ERROR", XNN_RESIZE),
    "xnnpack-int8-circular-channels-last-mismatch": (
        "xnnpack", case(padding=1, padding_mode="circular", quant="int8_per_tensor"), "MISMATCH", XNN_MISMATCH),
    "xnnpack-int8-conv3d-pad-5d": (
        "xnnpack", case(kernel_size=2, padding="same", quant="int8_per_tensor"), "RUNTIME_ERROR", XNN_PAD),
    # the layout features (issue 39): the same cell with the other memory format
    "vulkan-channels-last-input-mismatch": ("vulkan", case(out_channels=8, padding=1), "MISMATCH", VK_CL_MISMATCH),
    "vk-channels-last-input-copies-outside": (  # the same cell, contiguous: no copies
        "vulkan+vk-channels-last-input", case(out_channels=8, padding=1), "NOT_DELEGATED", CL_COPIES_OUT),
    "vulkan-channels-last-module-output-mismatch": (
        "vulkan", case(out_channels=8, padding=1), "MISMATCH", VK_CLM_MISMATCH),
}


def ids(cell) -> list[str]:
    """(lane, case, status, message[, error pattern]) -> the ids of the entries it matches."""
    return [k.id for k in match(*cell[:4], error_pattern=cell[4] if len(cell) > 4 else "")]


def test_shipped_file_loads_and_every_entry_has_a_representative_and_a_control():
    issues = load()
    assert issues and len({k.id for k in issues}) == len(issues)
    assert {k.id for k in issues} == set(REPRESENTATIVE) == set(CONTROL)


@pytest.mark.parametrize("issue_id", sorted(REPRESENTATIVE))
def test_entry_matches_its_bug(issue_id):
    assert issue_id in ids(REPRESENTATIVE[issue_id])


@pytest.mark.parametrize("issue_id", sorted(CONTROL))
def test_entry_does_not_match_its_control(issue_id):
    assert issue_id not in ids(CONTROL[issue_id])


def test_status_and_backend_decide_too():
    lane, c, status, message = REPRESENTATIVE["vulkan-make-ivec2-length-1"]
    assert ids(("xnnpack", c, status, message)) == []
    assert ids((lane, c, "PASS", message)) == []
    assert "vulkan-make-ivec2-length-1" in ids(("vulkan+vulkan-conv-padding", c, status, message))
    assert "vulkan-make-ivec2-length-1" in ids(("vulkan@h200", c, status, message))
    # the quantized path's symptom of the same cause, and the static check's prediction
    assert "vulkan-make-ivec2-length-1" in ids((lane, c, status, "IndexError: vector::_M_range_check"))
    assert "vulkan-make-ivec2-length-1" in ids((lane, c, "CONTRACT_VIOLATION",
                                                 "[ivec2] aten.convolution.default: padding IntList"))


def test_error_pattern_decides_for_an_entry_that_names_one():
    lane, c, status, message, pattern = REPRESENTATIVE["vulkan-dw-generic-shader-right-edge"]
    assert "vulkan-dw-generic-shader-right-edge" in ids((lane, c, status, message,
                                                         "left edge 1 col & right edge 2 cols"))
    assert "vulkan-dw-generic-shader-right-edge" in ids((lane, c, status, message, "everything"))
    assert ids((lane, c, status, message, "channels of group >= 1 · everything spatial")) == []
    assert ids((lane, c, status, message, "")) == []  # a matrix without the column: unknown
    # an entry without the field matches whatever the pattern
    grouped = REPRESENTATIVE["vulkan-grouped-conv-channels-per-group-not-x4"]
    assert "vulkan-grouped-conv-channels-per-group-not-x4" in ids((*grouped, "everything"))


def test_labels():
    by_id = {k.id: k for k in load()}
    assert by_id["vulkan-make-ivec2-length-1"].label == "known: #22774 (open), #22778 (open)"
    assert by_id["xnnpack-conv2d-length-1-stride-list"].label.endswith(", fixed in 1.5.1")
    assert by_id["vulkan-grouped-conv-channels-per-group-not-x4"].label == "known, not reported upstream"


def test_features():
    f = features(case(groups=4, kernel_size=(7, 3), stride=[2], padding="same"))
    assert (f["depthwise"], f["kernel"], f["list1_args"], f["max_stride"]) == (True, (7, 3), ["stride"], 2)
    assert f["channels_per_group_mod4"] == 1 and f["stride_equals_dilation"] is False
    assert features(case(in_channels=8, out_channels=16, groups=2))["channels_per_group_mod4"] == 0
    assert features(case(dim=1, stride=[2], input_shape=(1, 4, 8)))["list1_args"] == []
    t = features(case(transposed=True, stride=1, dilation=2, output_padding=1))
    assert t["output_padding_ge_stride"] and not t["depthwise"]
    # the layout and dynamic-shape fields, as the case has them (issue 39)
    assert {k: features(case())[k] for k in ("memory_format", "module_channels_last", "dynamic")} == \
        {"memory_format": "contiguous", "module_channels_last": False, "dynamic": "none"}
    cl = features(case(memory_format="channels_last", module_channels_last=True, dynamic="spatial",
                       dynamic_sizes=[(1, 4, 6, 6)]))
    assert (cl["memory_format"], cl["module_channels_last"], cl["dynamic"]) == ("channels_last", True, "spatial")


def write(tmp_path, data, name="k.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def entries():
    return json.loads(KNOWN_ISSUES_FILE.read_text())


def broken(i, mutate):
    data = entries()
    mutate(data[i])
    return data


@pytest.mark.parametrize("i,mutate,field", [
    (1, lambda e: e.update(message="make_ivec2(("), "message"),
    (2, lambda e: e.update(severity="high"), "severity"),
    (0, lambda e: e.pop("note"), "note"),
    (3, lambda e: e.update(statuses="MISMATCH"), "statuses"),
    (3, lambda e: e.update(statuses=["BROKEN"]), "statuses"),
    (4, lambda e: e.update(backend="qnn"), "backend"),
    (5, lambda e: e["when"].update(kernal={"not_in": [3, 5]}), "when.kernal"),
    (5, lambda e: e["when"].update(depthwise="true"), "when.depthwise"),
    (5, lambda e: e["when"].update(groups="two"), "when.groups"),
    (5, lambda e: e["when"].update(padding_mode=">1"), "when.padding_mode"),
    (5, lambda e: e["when"].update(kernel={"in": [3]}), "when.kernel"),
    (5, lambda e: e["when"].update(memory_format="channel_last"), "when.memory_format"),
    (5, lambda e: e["when"].update(dynamic=["batch", "height"]), "when.dynamic"),
    (5, lambda e: e["when"].update(module_channels_last="yes"), "when.module_channels_last"),
    (0, lambda e: e["upstream"][0].update(url="https://github.com/pytorch/executorch/issues/1"),
     "upstream"),
    (0, lambda e: e["upstream"][1].update(state="merged", kind="issue"), "upstream"),
    (6, lambda e: e.update(evidence="https://github.com/x"), "evidence"),
    (7, lambda e: e.update(id="Has Spaces"), "id"),
    (1, lambda e: e.update(error_pattern="right edge(("), "error_pattern"),
    (2, lambda e: e.update(error_pattern=3), "error_pattern"),
])
def test_malformed_entry_is_one_line_naming_file_entry_and_field(tmp_path, i, mutate, field):
    path = write(tmp_path, broken(i, mutate))
    with pytest.raises(ValueError) as e:
        load(path)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: entry #{i}: field {field!r}"), text


def test_duplicate_id_and_non_list_and_bad_json(tmp_path):
    data = entries()
    data.append(copy.deepcopy(data[0]))
    with pytest.raises(ValueError, match=rf"entry #{len(data) - 1}: field 'id': duplicate"):
        load(write(tmp_path, data))
    with pytest.raises(ValueError, match="must be a JSON list"):
        load(write(tmp_path, {"issues": []}, "obj.json"))
    with pytest.raises(ValueError, match="cannot read") as e:
        load(write(tmp_path, "[{", "bad.json"))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"entry #0: field '\*'"):
        load(write(tmp_path, ["not an entry"], "str.json"))


def test_match_with_a_given_list_of_issues(tmp_path):
    one = [e for e in entries() if e["id"] == "vulkan-dw-sned-missing-shader"]
    issues = load(write(tmp_path, one))
    cell = REPRESENTATIVE["vulkan-dw-sned-missing-shader"]
    assert [k.id for k in match(*cell, issues=issues)] == ["vulkan-dw-sned-missing-shader"]
    assert match(*REPRESENTATIVE["vulkan-make-ivec2-length-1"], issues=issues) == []
    assert known_issues.match(*cell, issues=()) == []


# --- findings say which known issue tracks them, or "new" ------------------------------------

def _cells():
    from harness.record import CellResult

    out = []
    for issue_id in ("vulkan-make-ivec2-length-1", "vulkan-dw-generic-shader-right-edge",
                     "vulkan-grouped-conv-channels-per-group-not-x4"):
        lane, c, status, message = REPRESENTATIVE[issue_id][:4]
        out.append(CellResult(case=c, backend=lane, status=status, message=message,
                              error_pattern="right edge 3 cols · all channels · all batches"
                              if "right-edge" in issue_id else
                              "channels of group >= 1 · everything spatial · all batches"
                              if status == "MISMATCH" else ""))
    # a failure nobody tracks
    out.append(CellResult(case=case(dim=1, input_shape=(1, 4, 8)), backend="xnnpack",
                          status="RUNTIME_ERROR", message="Failed to execute: error 0x22"))
    return out


def test_findings_say_known_with_the_upstream_state_or_new(tmp_path):
    from harness.results import findings
    from harness.results import matrix

    cells = _cells()
    found = {f.example["case_id"]: f for f in findings.find(cells)}
    ivec2, edge, grouped, other = (found[c.case_id] for c in cells)
    assert ivec2.known == "known: #22774 (open), #22778 (open)"
    assert [k["id"] for k in ivec2.known_issues] == ["vulkan-make-ivec2-length-1"]
    assert ivec2.known_issues[0]["cells"] == "1/1"
    assert ivec2.known_issues[0]["upstream"][0]["url"].endswith("/issues/22774")
    assert edge.known == grouped.known == "known, not reported upstream"
    assert edge.known_issues[0]["id"] == "vulkan-dw-generic-shader-right-edge"
    assert grouped.known_issues[0]["id"] == "vulkan-grouped-conv-channels-per-group-not-x4"
    assert other.known == "new" and other.known_issues == []
    # in findings.json and findings.md
    matrix.write(matrix.frame([c.to_row() for c in cells]), tmp_path)
    findings.write(tmp_path, cells, list(found.values()))
    data = {f["id"]: f for f in json.loads((tmp_path / "findings.json").read_text())["findings"]}
    assert data[ivec2.id]["known"] == ivec2.known and data[other.id]["known"] == "new"
    md = (tmp_path / "findings.md").read_text()
    assert f"| {ivec2.id} | vulkan | RUNTIME_ERROR | 1 | known: #22774 (open), #22778 (open) |" in md
    assert f"| {other.id} | xnnpack | RUNTIME_ERROR | 1 | new |" in md
    # another list of known issues (``known=``): what it does not list is new
    only = load(write(tmp_path, [e for e in entries() if e["id"] == "vulkan-make-ivec2-length-1"]))
    again = {f.example["case_id"]: f.known for f in findings.find(cells, known=only)}
    assert again[cells[0].case_id].startswith("known: #22774") and again[cells[1].case_id] == "new"


def test_a_finding_whose_cells_show_two_known_issues_lists_both(tmp_path):
    """Two bugs with the same symptom in one finding (e.g. a width-1 output where the depthwise
    edge bug makes everything wrong, beside the grouped transposed bug): both are named, the
    representative's first."""
    from harness.record import CellResult
    from harness.results import findings

    lanes = [REPRESENTATIVE[i] for i in ("vulkan-grouped-transposed-conv",
                                         "vulkan-dw-generic-shader-right-edge")]
    cells = [CellResult(case=c, backend=lane, status=s, message=m, error_pattern="everything")
             for lane, c, s, m, *_ in lanes]
    (f,) = findings.find(cells)
    assert [k["id"] for k in f.known_issues] == ["vulkan-grouped-transposed-conv",
                                                 "vulkan-dw-generic-shader-right-edge"]
    assert [k["cells"] for k in f.known_issues] == ["1/2", "1/2"]


def test_a_malformed_known_issues_file_is_one_line_exit_2_and_nothing_written(tmp_path):
    import os
    import subprocess
    import sys

    from harness.results import matrix

    from harness.runfolder import RunFolder

    run = tmp_path / "run"
    run.mkdir()
    matrix.write(matrix.frame([c.to_row() for c in _cells()]), run)
    RunFolder(run).write_cases([c.case for c in _cells()])
    bad = write(tmp_path, broken(0, lambda e: e.pop("note")), "bad.json")
    env = {**os.environ, known_issues.ENV: str(bad)}
    proc = subprocess.run([sys.executable, "-m", "harness", "report", str(run)], env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"convconf: error: {bad}: entry #0: field 'note'")
    assert not (run / "findings.json").exists() and not (run / "report.html").exists()
    ok = subprocess.run([sys.executable, "-m", "harness", "report", str(run)],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "known: #22774 (open), #22778 (open)" in (run / "report.html").read_text()


@pytest.mark.parametrize("matching, known", [(1, False), (2, True)])
def test_a_known_issue_names_a_finding_only_through_its_representative_or_most_cells(matching,
                                                                                     known):
    """A finding whose representative does not show a known issue, and of whose cells only a
    minority does (they happen to share its features, e.g. a "same" + even kernel case among
    int8 convs with runtime weights), is new: the label says how many cells also match."""
    from harness.record import CellResult
    from harness.results import findings

    spellings = [1] + ["valid"] * matching + [2] * (2 - matching)  # the first is the representative
    cells = [CellResult(case=case(in_channels=3, out_channels=8, padding=p), backend="vulkan",
                        status="RUNTIME_ERROR", message=IVEC2) for p in spellings]
    (f,) = findings.find(cells)
    assert f.example["case_id"] == cells[0].case_id
    assert f.known_issues[0]["id"] == "vulkan-make-ivec2-length-1"
    assert f.known_issues[0]["cells"] == f"{matching}/3"
    if known:
        assert f.known == "known: #22774 (open), #22778 (open)"
    else:
        assert f.known == "new (1/3 cells also match #22774 (open), #22778 (open))"


def test_the_q8ta_batch_guard_refusal_is_the_batch_bug_it_guards():
    """vk-q8ta-conv-batch-guard (a runtime patch) turns the silent batch > 1 MISMATCH into a
    refusal; that refusal is the same known issue, not a new finding (issue 39)."""
    refusal = ("Exception raised from q8ta_conv2d_im2col at executorch/backends/vulkan/runtime/graph/"
               "ops/impl/Q8taConv2dIm2Col.cpp:243: (graph.size_at<int64_t>(-4, packed_int8_input) "
               "== 1) is false!")
    batch3 = case(input_shape=(3, 4, 7, 10), kernel_size=5, quant="int8_per_channel")
    assert ids(("vulkan+vk-q8ta-conv-batch-guard", batch3, "RUNTIME_ERROR", refusal)) == \
        ["vulkan-q8ta-conv-batch"]
    assert ids(("vulkan", case(kernel_size=5, quant="int8_per_channel"), "RUNTIME_ERROR",
                refusal)) == []  # batch 1 is not this bug
    assert "vulkan-q8ta-conv-batch" not in ids(("vulkan", batch3, "RUNTIME_ERROR", IVEC2))


def test_the_dynamic_circular_resize_entry_names_both_portable_kernels():
    """A dynamic circular pad's program is planned static by ExecuTorch's own lowering: the
    first portable op asked to resize refuses, slice_copy or _empty_dim_order (issue 39)."""
    empty = ("at size 1x2x4x7 (worst of 5 sizes: 5 RUNTIME_ERROR): Failed to execute method forward, "
             "error: 0x12 — runtime: [op__empty_dim_order.cpp:71] Check failed (resize_tensor(out, "
             "size) == Error::Ok): Failed to resize output tensor. | [method.cpp:1483] KernelCall failed "
             "at instruction 0:3 in operator dim_order_ops::_empty_dim_order.out: 0x12")
    dynamic = dict(input_shape=(2, 4, 8, 8), dynamic="both",
                   dynamic_sizes=((1, 4, 4, 7), (3, 4, 10, 14), (2, 4, 8, 8)))
    circular = case(padding=1, padding_mode="circular", **dynamic)
    assert "portable-slice-copy-dynamic-circular" in ids(("xnnpack", circular, "RUNTIME_ERROR", empty))
    assert "portable-slice-copy-dynamic-circular" not in ids(
        ("xnnpack", case(padding=1, **dynamic), "RUNTIME_ERROR", empty))
