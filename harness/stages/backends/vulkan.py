from __future__ import annotations

from harness.stages.backends import register
from harness.stages.backends.base import Backend
from harness.stages.backends.vulkan_contract import check_graph, check_lowering


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
    observes_dispatch = True  # its dispatch profiling names each shader (execute.py)

    def partitioners(self) -> list:
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        class CheckedVulkanPartitioner(VulkanPartitioner):
            """VulkanPartitioner that first reads the contract model's lowering rules
            (vulkan_contract.check_lowering) on the program it is given: after the lane's fix
            passes, before the pattern detection that asserts."""

            def partition(inner, exported_program):
                self.lowering_predictions = [str(v) for v in check_lowering(exported_program)]
                return super().partition(exported_program)

        self.lowering_predictions = []
        return [CheckedVulkanPartitioner()]

    lowering_predictions: list = []  # of the last lowering in this process (partitioners())

    quantizer_family = "xnnpack"  # see quantizer()

    def quantizer(self, scheme: str):
        # VulkanQuantizer (1.5.1) annotates only linear. ExecuTorch quantizes conv for Vulkan with
        # XNNPACKQuantizer (test_vulkan_delegate.py, ..._xnnpack_pt2e_quantized_conv_sequence);
        # the partitioner then fuses q -> conv -> dq into et_vk.q8ta_conv2d. Same here.
        from harness.stages.backends.xnnpack import Xnnpack

        return Xnnpack().quantizer(scheme)

    def lowering_context(self):
        import contextlib

        from harness.stages.lowering_memo import vulkan_patterns_once

        @contextlib.contextmanager
        def context():
            with vulkan_patterns_once():
                try:
                    yield
                except Exception as e:  # the lowering raised: say whether a rule predicted it
                    predicted = self.lowering_predictions
                    e.add_note("convconf contract model (lowering rules): " + (
                        "; ".join(predicted) if predicted else "no rule predicted this"))
                    raise

        return context()

    def runtime_available(self) -> bool:
        from harness.runtimes.load import vulkan_enabled  # registered and not switched off for the run

        return vulkan_enabled()

    def contract_violations(self, edge_manager) -> list[str]:
        return [str(v) for g in vk_graphs(edge_manager) for v in check_graph(g)]
