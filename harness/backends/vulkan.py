from __future__ import annotations

from . import register
from .base import Backend, QuantUnsupported
from .vulkan_contract import check_graph


def vk_graphs(edge_manager):
    """The VkGraph of every Vulkan delegate in a lowered program."""
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        extract_vk_flatbuffer, flatbuffer_to_vk_graph)
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    gm = edge_manager.exported_program().graph_module
    return [flatbuffer_to_vk_graph(extract_vk_flatbuffer(lm.processed_bytes))
            for _, lm, _ in get_lowered_submodules(gm) if lm.backend_id == "VulkanBackend"]


@register
class Vulkan(Backend):
    name = "vulkan"
    runtime_name = "VulkanBackend"

    def partitioners(self) -> list:
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        return [VulkanPartitioner()]

    def quantizer(self, scheme: str):
        # VulkanQuantizer's static config is 8-bit symmetric per-channel weights with per-tensor
        # activations; it has no per-tensor weight config.
        if scheme != "int8_per_channel":
            raise QuantUnsupported(
                f"VulkanQuantizer has no {scheme} config (only per-channel symmetric int8 weights)")
        from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
            VulkanQuantizer, get_symmetric_quantization_config)

        return VulkanQuantizer().set_global(get_symmetric_quantization_config(is_dynamic=False))

    def contract_violations(self, edge_manager) -> list[str]:
        return [str(v) for g in vk_graphs(edge_manager) for v in check_graph(g)]
