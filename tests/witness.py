"""What really happens to a lowered program, found without the harness's execute/compare code:
the tests use it to check that a cell's status is honest, whatever the delegate does.

Only the case -> module/inputs definition (harness.stages.build, pinned by test_dtypes), the
lowering (what is under test) and the tolerance policy's per-element bound (issue #48:
``build.error_bound``, docs/concepts.md "Tolerance policy", the way the constant 1e-4 was copied
here before) are shared with the harness; running the program, the float64 reference and the
element-wise judgement are written here again.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Witnessed:
    raised: str | None  # the runtime's own error text, when loading/executing raised
    within: bool | None  # executed: every element within its error bound of the float64 module


def execute_and_judge(pte: bytes, case) -> Witnessed:
    """Run ``pte`` through ExecuTorch's pybindings on the case's inputs, judge each element
    against the case's module computed in float64, within the policy's error bound (fp32 cases
    only). A dynamic case: one loaded method run at each
    of its sizes (``dynamic_sizes``), as the harness runs it; the first size that raised is
    the witness's error, and it ran right only if every size did."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from harness.stages.build import build_module, error_bound, make_inputs, size_inputs

    assert case.dtype == "float32" and case.quant is None, "fp32 cases only"
    module = build_module(case)
    sized = [size_inputs(case, tuple(shape)) for shape in case.dynamic_sizes]
    all_inputs = sized or [make_inputs(case)]
    program = _load_for_executorch_from_buffer(pte)
    within = True
    for inputs in all_inputs:
        with torch.no_grad():
            ref = copy.deepcopy(module).double()(*(x.double() for x in inputs))
        allowed = error_bound(case, module, inputs).allowed()
        try:
            out = program.forward(list(inputs))[0]
        except Exception as e:  # the runtime's error arrives as a Python exception
            return Witnessed(raised=str(e).strip().splitlines()[0], within=None)
        within = within and out.shape == ref.shape and bool(
            ((out.double() - ref).abs() <= allowed).all())
    return Witnessed(raised=None, within=within)


# The int lists each conv reads as an ivec2 when its input is 4-D (README: the Vulkan contract):
# stride, padding, dilation of aten.convolution (+ output_padding when transposed), but only
# stride and padding for a 1x1 weight that is not depthwise (Conv2dPW.cpp, grouped ones too);
# every IntList of an et_vk.* conv op.
ATEN_IVEC2 = (3, 4, 5)
ATEN_WEIGHT, ATEN_DILATION, ATEN_TRANSPOSED, ATEN_OUTPUT_PADDING, ATEN_GROUPS = 1, 5, 6, 7, 8


def vulkan_short_ivec2_lists(pte: bytes) -> list[str]:
    """Every 2D-conv int list of length != 2 in the serialized Vulkan payload of ``pte``."""
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        extract_vk_flatbuffer, flatbuffer_to_vk_graph)
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(pte).program
    short = []
    for blob in program.backend_delegate_data:
        graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(blob.data))
        for op in graph.chain:
            if "conv" not in op.name:
                continue
            values = [graph.values[a].value for a in op.args]
            tensors = [v for v in values if type(v).__name__ == "VkTensor"]
            if not tensors or len(tensors[0].dims) != 4:
                continue
            if op.name.startswith("aten.convolution"):
                read = list(ATEN_IVEC2)
                transposed = getattr(values[ATEN_TRANSPOSED], "bool_val", False)
                weight = list(values[ATEN_WEIGHT].dims)
                groups = getattr(values[ATEN_GROUPS], "int_val", 1)
                if not transposed and weight[2:] == [1, 1] and not (
                        weight[0] == groups and weight[1] == 1):
                    read.remove(ATEN_DILATION)
                if transposed:
                    read.append(ATEN_OUTPUT_PADDING)
            else:
                read = range(len(values))
            short += [f"{op.name} #{i} {list(values[i].items)}" for i in read
                      if type(values[i]).__name__ == "IntList" and len(values[i].items) != 2]
    return short


def lowering_raises(case, backend_name: str) -> BaseException | None:
    """Quantize (the harness's quantizer choice, shared), export and lower ``case`` with the
    delegate's stock ExecuTorch partitioner, without the harness's lowering code: the exception
    that raised, or None when a program came out."""
    from executorch.exir import to_edge_transform_and_lower

    from harness.stages.backends import get
    from harness.stages.build import build_module, make_inputs
    from harness.stages.quantize import quantize

    if backend_name == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import (
            VulkanPartitioner as Partitioner)
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner as Partitioner)
    try:
        import executorch.kernels.quantized  # noqa: F401 - the quantized out variants

        module, inputs = build_module(case), make_inputs(case)
        if case.quant:
            module, _ = quantize(case, module, inputs, get(backend_name))
        exported = torch.export.export(module, inputs)
        to_edge_transform_and_lower(exported, partitioner=[Partitioner()]).to_executorch()
    except Exception as e:  # noqa: BLE001 - what raised is the observation
        return e
    return None
