"""The throughput shortcuts change nothing a cell produces: the same .pte bytes, byte for byte.

Two shortcuts are checked together against the stock path (each lane prepared alone, ExecuTorch's
Vulkan pattern graphs rebuilt on every lowering): the per-process pattern-graph memo
(lowering_memo.py) and the per-case sharing of quantization and export across lanes (prepare.py).
"""

import pytest

from harness.stages import lowering_memo
from harness.lane import Lane
from harness.stages.cell import prepare
from harness.stages.prepare import prepare_case
from harness.spec import ConvCase

LANES = [Lane("vulkan"), Lane("vulkan", ("vulkan-conv-padding",)), Lane("xnnpack"),
         Lane("xnnpack", ("xnnpack-conv1d-same-even",))]

# Every kind in four cases: fp32 and int8 (per-tensor, per-channel), 1d and 2d, depthwise,
# transposed; both fixes are active in at least one of them.
KINDS = {
    "fp32-2d-valid": ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3,
                              padding="valid", input_shape=(1, 3, 12, 12)),
    "int8-per-tensor-1d-same-even": ConvCase(dim=1, in_channels=4, out_channels=4,
                                             kernel_size=4, padding="same",
                                             input_shape=(1, 4, 16), quant="int8_per_tensor"),
    "int8-per-channel-depthwise-2d": ConvCase(dim=2, in_channels=8, out_channels=8,
                                              kernel_size=3, groups=8, padding=(1, 1),
                                              input_shape=(1, 8, 9, 9),
                                              quant="int8_per_channel"),
    "fp32-transposed-1d": ConvCase(dim=1, in_channels=4, out_channels=6, kernel_size=2,
                                   stride=2, transposed=True, input_shape=(1, 4, 5)),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_shared_and_memoized_lowering_gives_identical_pte(kind):
    case = KINDS[kind]
    with lowering_memo.disabled():
        stock = {lane: prepare(case, lane) for lane in LANES}
    shared = prepare_case(case, LANES)
    assert lowering_memo.built() > 0  # the memo was really used (the Vulkan lane lowered)
    compared = 0
    for lane, entry in stock.items():
        assert shared[lane].status == entry.status, lane
        assert shared[lane].message == entry.message, lane
        assert (shared[lane].pte is None) == (entry.pte is None), lane
        if entry.pte is not None:
            assert shared[lane].pte == entry.pte, f"{kind} {lane}: .pte bytes differ"
            compared += 1
    assert compared >= 2, f"{kind}: fewer than two lanes produced a program to compare"


def test_memo_is_scoped_and_restores_the_registry():
    from executorch.backends.vulkan.patterns import fusable_patterns

    before = {n: e.get_graphs_fn for n, e in fusable_patterns.items()}
    with lowering_memo.vulkan_patterns_once():
        inside = {n: e.get_graphs_fn for n, e in fusable_patterns.items()}
        graphs = [e.get_graphs_fn for e in fusable_patterns.values() if e.get_graphs_fn]
        assert graphs and all(g() is g() for g in graphs)  # built once, then served
    assert {n: e.get_graphs_fn for n, e in fusable_patterns.items()} == before
    assert any(inside[n] is not before[n] for n in before if before[n] is not None)
