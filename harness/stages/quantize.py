"""pt2e static int8 quantization with the backend's own quantizer."""

from __future__ import annotations

import sys
import time

import torch

from harness.stages.backends import Backend, QuantUnsupported
from harness.stages.build import calibration_inputs
from harness.spec import ConvCase


def quantize(case: ConvCase, module: torch.nn.Module, inputs: tuple, backend: Backend):
    """-> (converted GraphModule, seconds). Calibration inputs are seeded from the case id.

    Raises QuantUnsupported when the backend has no config for the scheme; anything the
    quantizer itself raises propagates (-> LOWER_ERROR with its message)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from harness.stages.lowering_memo import quantizer_patterns_once

    quantizer = backend.quantizer(case.quant)
    t0 = time.perf_counter()
    captured = torch.export.export(module, inputs).module()
    with quantizer_patterns_once():
        prepared = prepare_pt2e(captured, quantizer)
    with torch.no_grad():
        for calib in calibration_inputs(case):
            prepared(*calib)
    converted = convert_pt2e(prepared)
    if not any(_is_qdq(n) for n in converted.graph.nodes):
        # The quantizer left the conv unannotated: lowering would silently run it in float.
        raise QuantUnsupported(f"{type(quantizer).__name__} annotated no op of this graph "
                               f"({_supported_ops(quantizer)}); the conv would stay float")
    return converted, time.perf_counter() - t0


def _is_qdq(node) -> bool:
    return node.op == "call_function" and "quantize_per" in str(node.target)


def _supported_ops(quantizer) -> str:
    module = sys.modules.get(type(quantizer).__module__)
    ops = getattr(module, "_SUPPORTED_OPS", None)
    return f"it annotates: {', '.join(ops)}" if ops else "no annotator matched conv"


def output_qparams(converted) -> tuple[float, int] | None:
    """(scale, zero_point) of the dequantize op the graph output comes from, if any: the output
    node itself, or the nearest one upstream through ops left in float (an epilogue the
    quantizer did not annotate, e.g. a clamp after the int8 conv: it only narrows the range,
    so the conv's output step stays the unit of error)."""
    output = next(n for n in converted.graph.nodes if n.op == "output")
    node = output.args[0][0] if isinstance(output.args[0], (list, tuple)) else output.args[0]
    while getattr(node, "op", None) == "call_function":
        if "dequantize" in str(node.target):
            return float(node.args[1]), int(node.args[2])
        if not any(name in str(node.target) for name in _RANGE_ONLY_OPS):
            return None
        node = node.args[0]
    return None


# Unary ops that only clip the range: between the conv's dequantize and the output they change
# no value's rounding.
_RANGE_ONLY_OPS = ("relu", "hardtanh", "clamp")
