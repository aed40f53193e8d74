from __future__ import annotations

from harness.stages.backends import register
from harness.stages.backends.base import Backend

_SCHEMES = {"int8_per_tensor": False, "int8_per_channel": True}


@register
class Xnnpack(Backend):
    name = "xnnpack"
    runtime_name = "XnnpackBackend"

    def partitioners(self) -> list:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]

    def quantizer(self, scheme: str):
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer, get_symmetric_quantization_config)

        return XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=_SCHEMES[scheme]))

    def code_path(self, edge_manager) -> list[str]:
        from harness.stages.backends.xnnpack_paths import conv_paths

        return conv_paths(edge_manager)
