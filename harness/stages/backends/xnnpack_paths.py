"""XNNPACK code paths: the conv nodes of a lowered program's XNNPACK payload, and the universe
of conv paths they are drawn from.

A path reads ``KIND:INPUT/FILTER:ACTIVATION``, e.g. ``XNNConv2d:fp32/fp32:none``,
``XNNDepthwiseConv2d:qint8/qcint8:relu``: the serialized node type (schema.fbs ``XNode``), the
datatypes of its input and filter values (``XNNDatatype`` without ``xnn_datatype_``; ``qcint8``
is a per-channel quantized filter) and the fused activation its ``output_min_max`` encodes
(absent or -inf..inf: none; 0..inf: relu; 0..6: relu6; anything else: clamp), which is what
``backends/xnnpack/_passes/fuse_activation_pass.py`` writes for a conv followed by relu, relu6
or hardtanh.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import tempfile

KINDS = ("XNNConv2d", "XNNDepthwiseConv2d", "XNNConvTranspose2d")
# An fp16 conv keeps an fp32 filter: op_conv2d.py defines the filter with force_fp32=True.
DTYPES = ("fp32/fp32", "fp16/fp32", "qint8/qint8", "qint8/qcint8")
ACTIVATIONS = ("none", "relu", "relu6", "clamp")
KNOWN = tuple(f"{k}:{d}:{a}" for k, d, a in itertools.product(KINDS, DTYPES, ACTIVATIONS))


def family(path: str) -> str:
    """A path's family for coverage tables: its node kind."""
    return path.split(":", 1)[0]


def activation(bounds: dict | None) -> str:
    lo = float((bounds or {}).get("output_min", -math.inf))
    hi = float((bounds or {}).get("output_max", math.inf))
    if lo == -math.inf and hi == math.inf:
        return "none"
    if lo == 0 and hi == math.inf:
        return "relu"
    if lo == 0 and hi == 6:
        return "relu6"
    return "clamp"


def graph_paths(graph: dict) -> list[str]:
    """The conv paths of one XNNGraph (as flatc writes it in JSON), sorted, each once."""
    dtypes = {}
    for v in graph.get("xvalues", []):
        value = v.get("xvalue_union") or {}
        tensor = value.get("tensor_value", value)  # quantized values wrap a tensor value
        if "id_out" in tensor:
            dtypes[tensor["id_out"]] = str(tensor.get("datatype", "")).replace("xnn_datatype_", "")
    found = set()
    for node in graph.get("xnodes", []):
        kind = node.get("xnode_union_type")
        if kind not in KINDS:
            continue
        body = node.get("xnode_union") or {}
        found.add(f"{kind}:{dtypes.get(body.get('input1_id'), '?')}/"
                  f"{dtypes.get(body.get('filter_id'), '?')}:"
                  f"{activation(node.get('output_min_max'))}")
    return sorted(found)


def _json(text: str) -> dict:
    """flatc's JSON spells infinities and NaN bare (inf, -inf, nan); Python's reader wants
    Infinity / NaN."""
    text = re.sub(r'(?<![\w"])(-?)inf\b', r"\1Infinity", text)
    return json.loads(re.sub(r'(?<![\w"])nan\b', "NaN", text))


def payload_graph(processed_bytes: bytes) -> dict:
    """An XNNPACK delegate payload (XNNHeader + flatbuffer + constants) -> its XNNGraph as JSON."""
    import importlib.resources as resources

    import executorch.backends.xnnpack.serialization as package
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader
    from executorch.exir._serialize._flatbuffer import _flatc_decompile

    header = XNNHeader.from_bytes(processed_bytes[:XNNHeader.EXPECTED_LENGTH])
    flatbuffer = processed_bytes[header.flatbuffer_offset:
                                 header.flatbuffer_offset + header.flatbuffer_size]
    with tempfile.TemporaryDirectory(prefix="convconf-xnn-") as d:
        schema = os.path.join(d, "schema.fbs")
        with open(schema, "wb") as fh:
            fh.write(resources.files(package).joinpath("schema.fbs").read_bytes())
        binary = os.path.join(d, "schema.bin")
        with open(binary, "wb") as fh:
            fh.write(flatbuffer)
        _flatc_decompile(d, schema, binary, ["--raw-binary"])
        with open(os.path.join(d, "schema.json")) as fh:
            return _json(fh.read())


def conv_paths(edge_manager) -> list[str]:
    """The conv paths of every XNNPACK delegate in a lowered program, sorted, each once."""
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    gm = edge_manager.exported_program().graph_module
    found = set()
    for _, lowered, _ in get_lowered_submodules(gm):
        if lowered.backend_id == "XnnpackBackend":
            found.update(graph_paths(payload_graph(lowered.processed_bytes)))
    return sorted(found)


def predict(case) -> str | None:
    """The conv path a case's XNNPACK payload is expected to name, from the partitioner's
    rules (a steering guide for generation, not a checked model): node kind (op_conv2d.py:77
    depthwise: one input channel per group, output channels a multiple of it; transposed
    first), datatypes (quantizer scheme; fp16 keeps an fp32 filter) and the activation
    fuse_activation_pass.py:34 fuses (relu; hardtanh, which relu6 becomes) after batch-norm
    folding, for int8 relu only (``never_fused``). None: 3D, bf16, weights as a runtime input
    or a channels-last module (no XNNPACK conv expected)."""
    if case.dim == 3 or case.dtype == "bfloat16" or getattr(case, "weights", "") == "input":
        return None
    if getattr(case, "module_channels_last", False):
        # Measured (1.5.1, issue 39): a channels-last weight fails lowering in
        # ChannelsLastTaggedReshapePass ("Expected p_weight to be NCHW"): no payload, no path.
        # A channels-last input or a dynamic size reaches the static case's node.
        return None
    if case.transposed:
        kind = "XNNConvTranspose2d"
    elif case.in_channels // case.groups == 1 and (case.out_channels // case.groups) >= 1:
        kind = "XNNDepthwiseConv2d"
    else:
        kind = "XNNConv2d"
    dtypes = {None: "fp16/fp32" if case.dtype == "float16" else "fp32/fp32",
              "int8_per_tensor": "qint8/qint8", "int8_per_channel": "qint8/qcint8"}
    ops = [e if isinstance(e, str) else e[0] for e in (case.epilogue or ())]
    while ops and ops[0] == "batchnorm":
        ops.pop(0)
    act = "none"
    if ops and ops[0] == "relu":
        act = "relu"
    elif ops and ops[0] == "relu6":
        act = "relu6"
    elif ops and ops[0] == "hardtanh":
        bounds = case.epilogue[len(case.epilogue) - len(ops)]
        act = activation({"output_min": bounds[1], "output_max": bounds[2]})
    path = f"{kind}:{dtypes[case.quant]}:{act}"
    return f"{kind}:{dtypes[case.quant]}:none" if never_fused(path) else path


def never_fused(path: str) -> bool:
    """An int8 conv fuses relu, never relu6 or hardtanh: XNNPACKQuantizer annotates conv + relu
    as one pattern (xnnpack_quantizer.py:287 ``conv_relu``; there is no conv_hardtanh), so a
    hardtanh keeps its own q/dq and fuse_activation_pass.py finds a dequantize before it, not
    the conv (measured: int8 conv -> relu6 / hardtanh(-1, 1) serializes with no bounds, plain
    and depthwise, per-tensor and per-channel)."""
    _, dtypes, act = path.split(":")
    return dtypes.startswith("qint8") and act in ("relu6", "clamp")
