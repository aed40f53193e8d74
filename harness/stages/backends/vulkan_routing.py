"""Routing model: which conv compute shaders the stock Vulkan runtime dispatches for a case.

Like the contract model (vulkan_contract.py) it is read from the source, here the shader
selection: the partitioner and graph passes of the installed wheel (``executorch/backends/...``,
1.5.1) decide which op reaches the runtime, and the runtime's C++ (main cff6f4dd32,
``backends/vulkan/runtime/graph/ops/impl/``) picks the shader. It predicts from the case alone,
so generation can ask it too; what a cell really dispatched is its ``reached`` (execute.py), and
a cell where the two differ is a finding about this model (results/coverage.py).

Device facts the picks depend on are parameters: ``mali`` (never on lavapipe or NVIDIA) and
``int8_dot`` (``supports_int8_dot_product``: lavapipe and the H200 have it). Storage choices
that depend on device texture limits assume a small case fits a 2D texture.

Rules, in the order the code applies them (file:line):
  F1 bf16 (the conv op takes FP_T: fp32/fp16), 3D, float batch > 1 in 2D (op_registry.py:845),
     transposed 1D (op_registry.py:851): the conv is not delegated, no conv shader (an empty
     route). Weights as a runtime input, int8 1D: no prediction (None).
  F2 relu / hardtanh (relu6 is hardtanh(0, 6)) right after the conv, after batch-norm folding,
     fuse into et_vk.conv_with_clamp (transforms/fuse_conv_with_clamp.py:25, run after
     FuseBatchNormPass in vulkan_preprocess.py:189-193): the ``_clamp`` shader variant.
  F3 2D transposed -> conv_transpose2d[_clamp] (Convolution.cpp:290-292, :167).
  F4 2D depthwise (C_out == groups, C_in / groups == 1; Convolution.cpp:287) ->
     conv2d_dw[_sned when stride != dilation][_output_tile_3x3|_5x5][_b1x1 on Mali, 3x3,
     stride == dilation][_clamp] (Conv2dDW.cpp:67-98). A depthwise channel multiplier > 1 is
     not depthwise here: it is a grouped sliding-window conv. Stride != dilation with a kernel
     neither 3x3 nor 5x5 asks for conv2d_dw_sned_<dtype>, which no yaml generates
     (conv2d_dw_sned_output_tile.yaml has the tiled variants only): the runtime throws
     ("Could not find ShaderInfo"), so the route names it in ``absent`` (vulkan_contract.py's
     rule for the same cases).
  F5 2D 1x1 kernel -> conv2d_pw_tiled, no _clamp variant (Convolution.cpp:483, Conv2dPW.cpp:63).
  F6 2D sliding window, groups 1, dilation 1, C_out >= 128 (or Mali) -> conv2d_im2col +
     conv2d_gemm, texture2d storage (Convolution.cpp:317-332, :528; Conv2dGemm.cpp:425-437).
  F7 other 2D -> conv2d[_clamp] (Convolution.cpp:164).
  F8 1D with K == 1, or depthwise (groups == C_in == C_out): height-packed (op_registry.py:
     878-879), then K == 1 -> conv1d_pw[_bias]_texture3d_texture2d, else conv1d_dw[_bias]_
     texture3d (Convolution.cpp:751-789, Conv1dPW.cpp:120, Conv1dDW.cpp:120); no _clamp.
  F9 other 1D -> conv1d[_clamp] (Convolution.cpp:676).
  Q1 int8 2D (q -> conv -> dq fused, patterns/quantized_convolution.py:300-316): transposed ->
     q8ta_conv2d_transposed; depthwise -> q8ta_conv2d_dw; 1x1 with stride 1, dilation 1,
     padding 0 -> q8ta_conv2d_pw; else q8ta_conv2d, which takes the im2col route (q8ta_im2col +
     q8ta_conv2d_pw) when C_in per group % 4 == 0, groups 1 and (C_in >= 32 or H_out * W_out
     <= 4096) (Q8taConv2d.cpp:482-498); ``_fallback`` without int8 dot products (:337-339,
     Q8taConv2dPW.cpp:306). int8 1D: no prediction.
The dtype suffix is ``_float`` (fp32) or ``_half`` (fp16); the int8 shaders end ``_float``
(their scales' dtype), q8ta_im2col has none.

Refused (``Route.refused``, the route's shaders then not dispatched: the lowering or the runtime
stops first; vulkan_contract.py checks the same rules on the serialized graph):
  R1 2D with a length-1 stride / padding / dilation (/ output_padding) list or "valid":
     make_ivec2 asserts two values (VecUtils.h; Conv2dPW.cpp and Q8taConv2d.cpp read at(1)).
     The float pointwise path (F5: any 1x1 conv that is not depthwise, grouped ones too,
     Convolution.cpp:288-296) reads stride and padding only (Conv2dPW.cpp:33-34, :167-168): a
     length-1 dilation is never read there and is no refusal.
  R2 reflect / replicate padding_mode: the pad's index ops fail in the runtime.
  R3 transposed with dilation > 1 (the runtime's documented limit, check_conv2d_params).
  R4 K == 1 conv1d with groups > 1: Conv1dPW.cpp checks groups == 1.
  R5 int8 per-tensor: quantized_convolution.py:91-94 asserts on a per-tensor weight.
  R6 int8 grouped (1 < groups < C_out) with C_out / groups % 4 != 0: the q8ta pattern does not
     match (quantized_convolution.py:110-113) and the unfused int8 conv has no runtime op.
  R7 int8 depthwise with C_out % 4 != 0: quantized_convolution.py:233 asserts.
  R8 q8ta_conv2d / _transposed with groups > 1 and C_in per group % 4 != 0
     (Q8taConv2d.cpp:305-307, Q8taConv2dTransposed.cpp:147-149).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.spec import ConvCase

_DTYPE = {"float32": "float", "float16": "half"}
_CLAMPING = ("relu", "relu6", "hardtanh")
_FOLDED = ("batchnorm",)


@dataclass(frozen=True)
class Route:
    shaders: tuple  # the conv shaders predicted to be dispatched, sorted
    rule: str       # which rule of the module docstring decided it
    absent: tuple = ()  # of those, the ones the runtime asks for but its source lacks (F4)
    refused: str = ""   # why the lowering or runtime stops before dispatching (R1-R8)

    @property
    def dispatched(self) -> tuple:
        """The shaders a cell of this case is predicted to report dispatching."""
        return () if self.refused else tuple(s for s in self.shaders if s not in self.absent)


def _op(entry) -> str:
    return entry if isinstance(entry, str) else str(entry[0])


def _spatial(value, dim: int) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(value) * dim if len(value) == 1 else tuple(value)
    return (value,) * dim


def clamp_fused(case: ConvCase) -> bool:
    """F2: the first op after the conv, once batch norms are folded into it, is a relu or a
    hardtanh."""
    ops = [_op(e) for e in (case.epilogue or ())]
    while ops and ops[0] in _FOLDED:
        ops.pop(0)
    return bool(ops) and ops[0] in _CLAMPING


def _out_hw(case: ConvCase, k: tuple, s: tuple, d: tuple) -> int:
    """H_out * W_out of a 2D conv (what the q8ta im2col rule reads)."""
    size = list(case.input_shape[2:])
    pad = case.padding
    if pad == "same":
        return size[0] * size[1]
    p = (0, 0) if pad == "valid" else _spatial(pad, 2)
    if case.prologue:  # an explicit pad in front: the input the conv sees is larger
        pads = list(case.prologue[1]) + [0, 0, 0, 0]  # F.pad order: (left, right, top, bottom)
        size = [size[0] + pads[2] + pads[3], size[1] + pads[0] + pads[1]]
    out = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    return max(out[0], 0) * max(out[1], 0)


def _short_list(case, *, dilation_read: bool = True) -> bool:
    """R1: a 2D int-list argument the runtime reads of length 1, or "valid" (spec.
    has_short_int_list, reading only the fields it needs). The pointwise path (F5, Conv2dPW.cpp)
    never reads dilation: ``dilation_read=False`` there."""
    if case.padding_mode != "zeros":
        names = ("stride", "dilation")
    elif case.padding == "valid":
        return True
    else:
        names = ("stride", "dilation", "padding")
    if not dilation_read:
        names = tuple(n for n in names if n != "dilation")
    if case.transposed:
        names += ("output_padding",)
    return any(isinstance(getattr(case, n), tuple) and len(getattr(case, n)) == 1
               for n in names)


def predict(case: ConvCase, *, mali: bool = False, int8_dot: bool = True) -> Route | None:
    """The conv shaders the stock runtime picks for ``case`` (none: F1; ``refused``: it stops
    before dispatching them); None where the model makes no prediction. A field is read only
    where a rule needs it (routing_grid.py enumerates the routes by the fields read)."""
    route = _route(case, mali, int8_dot)
    if not route or not route.shaders:
        return route
    why = _refusal(case, route)
    return Route(route.shaders, route.rule, route.absent, why) if why else route


def _refusal(case, route: Route) -> str:
    """R1-R8 for a delegated case and its route ("" when none applies)."""
    if case.padding_mode in ("reflect", "replicate"):
        return "R2 reflect/replicate padding: the pad's index ops fail in the runtime"
    dim = case.dim
    rule = route.rule
    if dim == 2 and _short_list(case, dilation_read=rule != "F5"):
        return "R1 make_ivec2: a length-1 int list or \"valid\" in 2D"
    if rule == "F3" and _spatial(case.dilation, 2) != (1, 1):
        return "R3 transposed conv with dilation > 1"
    if rule == "F8 pointwise" and case.groups != 1:
        return "R4 Conv1dPW.cpp: conv1d_pw needs groups == 1"
    if not rule.startswith("Q1"):
        return ""
    if case.quant == "int8_per_tensor":
        return "R5 quantized_convolution.py:91-94 asserts on a per-tensor weight"
    g, c_out = case.groups, case.out_channels
    if 1 < g < c_out and (c_out // g) % 4:
        return "R6 q8ta pattern not matched (C_out per group % 4): no op for the int8 conv"
    if rule == "Q1 depthwise":
        return "R7 quantized_convolution.py:233: depthwise needs C_out % 4 == 0" if c_out % 4 \
            else ""
    if rule in ("Q1 general", "Q1 transposed") and g > 1 and (case.in_channels // g) % 4:
        return "R8 Q8taConv2d.cpp:305-307: groups > 1 needs C_in per group % 4 == 0"
    return ""


def _route(case: ConvCase, mali: bool, int8_dot: bool) -> Route | None:
    dim = case.dim
    if getattr(case, "weights", "constant") == "input" or (case.quant and dim != 2):
        return None
    if dim == 2 and getattr(case, "dynamic", "none") in ("batch", "both"):
        # Measured (1.5.1, issue 39): the partitioner leaves a conv2d whose input batch is a
        # torch.export.Dim outside the delegate (NOT_DELEGATED; its batch-1 rule, F1 below, read
        # at the upper bound); a conv1d with a dynamic batch is delegated (conv1d_float), and a
        # dynamic spatial size dispatches the static case's shaders.
        return Route((), "F1 not delegated as a conv (dynamic batch)")
    if (case.dtype not in _DTYPE or dim not in (1, 2) or (dim == 1 and case.transposed)
            or (dim == 2 and case.input_shape[0] != 1 and not case.quant)):
        return Route((), "F1 not delegated as a conv")

    def k():
        return _spatial(case.kernel_size, dim)

    def s():
        return _spatial(case.stride, dim)

    def d():
        return _spatial(case.dilation, dim)

    def depthwise():
        g = case.groups
        return case.out_channels == g and case.in_channels == g

    if case.quant:  # the q8ta ops have no batch check (op_registry.py:955-990)
        fb = "" if int8_dot else "_fallback"
        if case.transposed:
            return Route((f"q8ta_conv2d_transposed{fb}_float",), "Q1 transposed")
        if depthwise():
            return Route(("q8ta_conv2d_dw_float",), "Q1 depthwise")
        if (k() == (1, 1) and s() == (1, 1) and d() == (1, 1)
                and (case.padding in (0, "valid") or _spatial(case.padding, 2) == (0, 0))):
            return Route((f"q8ta_conv2d_pw{fb}_float",), "Q1 pointwise")
        g = case.groups
        per_group = case.in_channels // g
        if per_group % 4 == 0 and (mali or (g == 1 and (per_group >= 32
                                                       or _out_hw(case, k(), s(), d()) <= 4096))):
            return Route(tuple(sorted(("q8ta_im2col", f"q8ta_conv2d_pw{fb}_float"))),
                         "Q1 general, im2col route")
        return Route((f"q8ta_conv2d{fb}_float",), "Q1 general")
    dt = _DTYPE[case.dtype]

    def clamp():
        return "_clamp" if clamp_fused(case) else ""

    if dim == 1:
        if k() == (1,) or depthwise():
            bias = "_bias" if case.bias else ""
            if k() == (1,):
                return Route((f"conv1d_pw{bias}_texture3d_texture2d_{dt}",), "F8 pointwise")
            return Route((f"conv1d_dw{bias}_texture3d_{dt}",), "F8 depthwise")
        return Route((f"conv1d{clamp()}_{dt}",), "F9")
    if case.transposed:
        return Route((f"conv_transpose2d{clamp()}_{dt}",), "F3")
    if depthwise():
        sned = s() != d()
        name = "conv2d_dw" + ("_sned" if sned else "")
        kernel = k()
        if kernel in ((3, 3), (5, 5)):
            name += f"_output_tile_{kernel[0]}x{kernel[1]}"
            if kernel == (3, 3) and not sned and mali:
                name += "_b1x1"
        shader = f"{name}{clamp()}_{dt}"
        return Route((shader,), "F4", (shader,) if sned and kernel not in ((3, 3), (5, 5)) else ())
    if k() == (1, 1):
        return Route((f"conv2d_pw_tiled_{dt}",), "F5")
    if case.groups == 1 and d() == (1, 1) and (mali or case.out_channels >= 128):
        return Route((f"conv2d_gemm_texture2d_{dt}", f"conv2d_im2col_texture2d_{dt}"), "F6")
    return Route((f"conv2d{clamp()}_{dt}",), "F7")
