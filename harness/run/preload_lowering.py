"""The forkserver's preload for a pool that lowers programs (see preload.py)."""

from harness.run.preload import quiet

with quiet():
    import executorch.exir  # noqa: F401
    from executorch.backends.vulkan.partitioner import vulkan_partitioner  # noqa: F401
    from executorch.backends.xnnpack.partition import xnnpack_partitioner  # noqa: F401
    from torchao.quantization.pt2e import quantize_pt2e  # noqa: F401
