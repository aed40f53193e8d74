"""The throughput shortcuts change nothing a cell produces: the same .pte bytes, byte for byte.

Three shortcuts are checked together against the stock path (each lane prepared alone, ExecuTorch's
Vulkan pattern graphs rebuilt on every lowering): the per-process pattern-graph memo
(lowering_memo.py), the per-case sharing of quantization and export across lanes (prepare.py)
and lowering once per distinct program (a lane whose fix passes change nothing in the case's
graph reuses the program another lane lowered: its bytes must be those lowering it gives).
"""

import pytest

from harness.stages import fixes, lowering_memo
from harness.lane import Lane
from harness.stages.cell import prepare
from harness.stages.prepare import prepare_case
from harness.spec import ConvCase

# stock, one graph fix, one runtime fix (its program is the stock one by construction), the two
# fixes whose partitioner rule (Fix.patch) declines nodes none of these cases has (their lanes
# reuse the program without the rule) and every fix of the backend together (--fixes all)
LANES = [Lane("vulkan"), Lane("vulkan", ("vulkan-conv-padding",)),
         Lane("vulkan", ("vk-conv-int-list-broadcast",)), Lane("vulkan", ("vk-tconv-dilation",)),
         Lane("vulkan", ("vk-channels-last-input",)),
         Lane("vulkan", tuple(fixes.for_backend(fixes.names(), "vulkan"))), Lane("xnnpack"),
         Lane("xnnpack", ("xnnpack-conv1d-same-even",)),
         Lane("xnnpack", tuple(fixes.for_backend(fixes.names(), "xnnpack")))]

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


# the two fp32 kinds in the fast tier (.ci/run); the int8 ones (~90 s each: pt2e quantization)
# nightly (slow)
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow if k.startswith("int8")
                                               else ()) for k in sorted(KINDS)])
def test_shared_and_memoized_lowering_gives_identical_pte(kind):
    """Each lane lowered alone (no memo, no sharing, no reuse: ``prepare`` of one lane never
    reuses) against the lanes prepared together: the same verdict and the same bytes, also for
    every lane that took another lane's program instead of lowering its own."""
    case = KINDS[kind]
    with lowering_memo.disabled():
        stock = {lane: prepare(case, lane) for lane in LANES}
    shared = prepare_case(case, LANES)
    assert lowering_memo.built() > 0  # the memo was really used (the Vulkan lane lowered)
    assert all(not p.reused_from for p in stock.values())
    compared = 0
    for lane, entry in stock.items():
        assert shared[lane].status == entry.status, lane
        assert shared[lane].message == entry.message, lane
        assert shared[lane].contract_violations == entry.contract_violations, lane
        assert shared[lane].delegated_ops == entry.delegated_ops, lane
        assert (shared[lane].pte is None) == (entry.pte is None), lane
        if entry.pte is not None:
            assert shared[lane].pte == entry.pte, (
                f"{kind} {lane}: .pte bytes differ (reused from {shared[lane].reused_from!r})")
            compared += 1
    assert compared >= 2, f"{kind}: fewer than two lanes produced a program to compare"
    reused = {lane: p.reused_from for lane, p in shared.items() if p.reused_from}
    # the runtime fix never changes the graph: its lane is always the stock program (or the
    # stock lane's lowering error), so reuse is really exercised in every kind
    assert reused.get(Lane("vulkan", ("vk-conv-int-list-broadcast",))) == "stock", reused
    for lane, source in reused.items():  # a lane reuses a lowered lane, never a reused one
        source_lane = Lane.of(lane.backend, "" if source == "stock" else source[1:])
        assert source_lane in shared and not shared[source_lane].reused_from, (lane, source)
        assert shared[lane].pte == shared[source_lane].pte, lane


def test_reuse_is_named_where_the_fix_changes_nothing_and_not_where_it_does():
    """fp32 Conv2d(padding="valid"): vulkan-conv-padding rewrites the graph (lowered anew, other
    bytes); padding=1: it changes nothing (the stock program, byte for byte, not lowered)."""
    fixed = Lane("vulkan", ("vulkan-conv-padding",))
    valid = prepare_case(KINDS["fp32-2d-valid"], [Lane("vulkan"), fixed])
    assert valid[fixed].reused_from == "" and valid[fixed].pte != valid[Lane("vulkan")].pte
    plain = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding=1,
                     input_shape=(1, 3, 12, 12))
    same = prepare_case(plain, [fixed, Lane("vulkan")])  # stock is lowered first, whatever order
    assert same[fixed].reused_from == "stock" and same[Lane("vulkan")].reused_from == ""
    assert same[fixed].pte == same[Lane("vulkan")].pte
    assert list(same) == [fixed, Lane("vulkan")]  # the lanes in the order asked


def test_the_probe_sees_what_the_partitioner_of_a_full_lowering_is_handed():
    """probe_identity (the fix passes applied to a copy of to_edge's output, as the lowering
    applies them) equals the identity a full lowering of that lane records at its partitioner:
    for a fix that rewrites the graph and for one that does not."""
    import copy

    import torch

    from harness.stages import backends
    from harness.stages.build import build_module, make_inputs
    from harness.stages.lower import Watch, lower, probe_identity

    backend = backends.get("vulkan")
    case = KINDS["fp32-2d-valid"]
    exported = torch.export.export(build_module(case), make_inputs(case))
    stock = Watch()
    lower(copy.deepcopy(exported), backend, [], stock)
    assert stock.base is not None and stock.identity
    assert probe_identity(stock.base, backend, []) == stock.identity
    for names in (["vulkan-conv-padding"], ["vk-grouped-split"]):
        full = Watch(keep_base=False)
        lower(copy.deepcopy(exported), backend, names, full)
        assert full.base is None and full.identity
        assert probe_identity(stock.base, backend, names) == full.identity, names
    assert probe_identity(stock.base, backend, ["vulkan-conv-padding"]) != stock.identity
    assert probe_identity(stock.base, backend, ["vk-grouped-split"]) == stock.identity


def test_a_partitioner_rule_reuses_only_where_no_node_is_one_it_declines():
    """vk-tconv-dilation's rule (the partitioner declines a transposed conv with dilation > 1):
    on a dilated transposed conv it acts (lowered anew: the conv stays outside the delegate, other
    bytes); on a transposed conv without dilation no node is one it declines, so the lane is the
    stock program, byte for byte, not lowered again."""
    fixed = Lane("vulkan", ("vk-tconv-dilation",))
    dilated = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, dilation=2,
                       transposed=True, input_shape=(1, 4, 6, 6))
    acts = prepare_case(dilated, [Lane("vulkan"), fixed])
    assert acts[fixed].reused_from == "" and acts[fixed].pte is not None
    assert acts[fixed].pte != acts[Lane("vulkan")].pte
    assert acts[fixed].undelegated_ops.get("aten.convolution") == 1, acts[fixed].undelegated_ops
    plain = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, transposed=True,
                     input_shape=(1, 4, 6, 6))
    alike = prepare_case(plain, [Lane("vulkan"), fixed])
    assert alike[fixed].reused_from == "stock"
    assert alike[fixed].pte == alike[Lane("vulkan")].pte


def test_memo_is_scoped_and_restores_the_registry():
    from executorch.backends.vulkan.patterns import fusable_patterns

    before = {n: e.get_graphs_fn for n, e in fusable_patterns.items()}
    with lowering_memo.vulkan_patterns_once():
        inside = {n: e.get_graphs_fn for n, e in fusable_patterns.items()}
        graphs = [e.get_graphs_fn for e in fusable_patterns.values() if e.get_graphs_fn]
        assert graphs and all(g() is g() for g in graphs)  # built once, then served
    assert {n: e.get_graphs_fn for n, e in fusable_patterns.items()} == before
    assert any(inside[n] is not before[n] for n in before if before[n] is not None)
