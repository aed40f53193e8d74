"""vk-channels-last-input's graph: every fake value it (re)computes is made under the graph's own
FakeTensorMode, from the existing fake values (a dynamic program's SymInts carry through).

Two nightly failures of the fix (issue 39): a reflect-padded conv (its index ``arange`` nodes read
no tensor) got real tensors as fake values, so ExecuTorch's FuseBatchNormPass saw two fake modes
(LOWER_ERROR); and a dynamic-batch program's copies must keep the symbolic batch, else their
outputs are planned static and the portable ``_to_dim_order_copy`` cannot resize them."""

from __future__ import annotations

import copy

import pytest
import torch

from harness.stages.fixes.vk_channels_last_input import ADDED, ChannelsLastInputToContiguousPass
from harness.stages.fixes.vk_util import graph_fake_mode


def edge_program(module, x, dynamic_shapes=None):
    from executorch.exir import to_edge

    ep = torch.export.export(module.eval(), x, dynamic_shapes=dynamic_shapes)
    return to_edge(copy.deepcopy(ep)).exported_program()


def fixed(ep):
    result = ChannelsLastInputToContiguousPass()(ep)
    assert result.modified
    return result.exported_program if hasattr(result, "exported_program") else ep


def tensor_values(ep):
    return [(n, v) for n in ep.graph_module.graph.nodes
            for v in torch.utils._pytree.tree_leaves(n.meta.get("val"))
            if isinstance(v, torch.Tensor)]


def channels_last(*shape):
    return (torch.randn(*shape).to(memory_format=torch.channels_last),)


REFLECT = [  # the nightly's two LOWER_ERROR shapes, reduced: reflect padding, a channels-last input
    pytest.param(lambda: torch.nn.Conv2d(12, 3, 2, padding="same", groups=3, bias=False,
                                         padding_mode="reflect"), (1, 12, 7, 5), id="reflect-same"),
    pytest.param(lambda: torch.nn.Conv2d(4, 1, 1, padding=1, padding_mode="reflect"),
                 (1, 4, 3, 3), id="reflect-1x1"),
    pytest.param(lambda: torch.nn.Conv2d(4, 8, 3, padding=1), (1, 4, 8, 8), id="plain"),
]


@pytest.mark.parametrize("factory, shape", REFLECT)
def test_every_fake_value_has_the_graphs_fake_mode(factory, shape):
    from torch._subclasses.fake_tensor import FakeTensor

    torch.manual_seed(0)
    ep = edge_program(factory(), channels_last(*shape))
    mode = graph_fake_mode(ep.graph_module.graph)
    ep = fixed(ep)
    values = tensor_values(ep)
    assert any(n.meta.get(ADDED) for n, _ in values)
    not_fake = [n.name for n, v in values if not isinstance(v, FakeTensor)]
    assert not not_fake, f"real tensors as fake values: {not_fake}"
    other = [n.name for n, v in values if v.fake_mode is not mode]
    assert not other, f"fake values of another mode: {other}"


@pytest.mark.parametrize("factory, shape", REFLECT[:2])
def test_the_vulkan_lowering_accepts_the_fixed_graph(factory, shape):
    """vulkan_preprocess (FuseBatchNormPass and the passes around it) re-runs the graph on its
    fake values and asserts they share one mode: the nightly's LOWER_ERROR. Lowering only (no
    runtime needed); the copies stay outside the delegate."""
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from harness.stages import fixes

    fix = fixes.get("vk-channels-last-input")
    torch.manual_seed(0)
    ep = torch.export.export(factory().eval(), channels_last(*shape))
    with fix.patch():
        edge = to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()],
                                           transform_passes=fix.transform_passes())
    outside = [str(n.target) for n in edge.exported_program().graph_module.graph.nodes
               if n.op == "call_function" and "_to_dim_order_copy" in str(n.target)]
    assert outside, "the dim-order copies run outside the delegate"


def test_dynamic_batch_keeps_a_symbolic_batch_in_the_copies():
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=4)
    ep = edge_program(torch.nn.Conv2d(4, 8, 2, stride=3, padding=2, groups=4),
                      channels_last(2, 4, 2, 2), dynamic_shapes=({0: batch},))
    graph = ep.graph_module.graph
    mode = graph_fake_mode(graph)
    shape_env = mode.shape_env
    x = next(n for n in graph.nodes if n.op == "placeholder" and n.name.startswith("input"))
    symbol = x.meta["val"].shape[0]
    assert isinstance(symbol, torch.SymInt)
    guards, replacements = len(shape_env.guards), dict(shape_env.replacements)
    ep = fixed(ep)
    copies = [n for n in ep.graph_module.graph.nodes if n.meta.get(ADDED)]
    assert len(copies) == 2  # the input's copy to contiguous and the output's back
    for node in copies + [n for n in ep.graph_module.graph.nodes
                          if n.op == "call_function" and "convolution" in str(n.target)]:
        batch_size = node.meta["val"].shape[0]
        assert isinstance(batch_size, torch.SymInt), f"{node.name}: batch {batch_size!r}"
        assert batch_size.node.expr == symbol.node.expr
        assert node.meta["val"].fake_mode is mode
    assert tuple(copies[0].meta["val"].dim_order()) == (0, 1, 2, 3)
    assert tuple(copies[1].meta["val"].dim_order()) == (0, 2, 3, 1)
    # nothing guarded or specialized in the program's ShapeEnv (it is shared by its deep copies)
    assert len(shape_env.guards) == guards and dict(shape_env.replacements) == replacements


def channels_last_module():
    """The nightly's made-worse cell, static: a channels-last module whose transposed conv the
    Vulkan partitioner leaves to the portable kernel, fed a channels-last input."""
    torch.manual_seed(0)
    module = torch.nn.ConvTranspose2d(16, 8, (1, 3), stride=2, dilation=3, output_padding=2,
                                      groups=4)
    return module.to(memory_format=torch.channels_last), channels_last(2, 16, 3, 6)


def reads_two_dim_orders(ep) -> list[str]:
    """Calls that read a contiguous and a non-contiguous tensor (a bias has one dim: no order)."""
    return [n.name for n in ep.graph_module.graph.nodes if n.op == "call_function"
            and len({tuple(a.meta["val"].dim_order()) == tuple(range(a.meta["val"].dim()))
                     for a in n.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)
                     and a.meta["val"].dim() > 1}) > 1]


def test_a_channels_last_module_alone_is_left_to_the_weight_fix():
    """Alone, the input fix would hand the transposed conv a contiguous input beside its
    channels-last weight ("2 input tensors have different dim orders": NOT_DELEGATED ->
    RUNTIME_ERROR, issue 39): it leaves such a program alone. After the weight fix, which a lane
    with both runs first, it rewrites it and no node reads two dim orders."""
    from harness.stages import fixes
    from harness.stages.fixes.vk_channels_last_input import mixed_dim_orders
    from harness.stages.fixes.vk_channels_last_weight import ChannelsLastWeightToContiguousPass

    module, x = channels_last_module()
    ep = edge_program(module, x)
    assert not reads_two_dim_orders(ep)
    result = ChannelsLastInputToContiguousPass()(ep)
    assert not result.modified
    assert not any(n.meta.get(ADDED) for n in ep.graph_module.graph.nodes)

    assert ChannelsLastWeightToContiguousPass()(ep).modified
    ep = fixed(ep)
    assert not reads_two_dim_orders(ep)
    assert any(n.meta.get(ADDED) for n in ep.graph_module.graph.nodes)
    from harness.stages.fixes.vk_channels_last_input import channels_last_inputs
    assert mixed_dim_orders(ep, channels_last_inputs(ep)) is None

    lane = fixes.ordered(["vulkan-conv-padding", "vk-channels-last-input",
                          "vk-channels-last-weight"])
    assert lane == ["vk-channels-last-weight", "vk-channels-last-input", "vulkan-conv-padding"]


def test_every_fix_runs_after_the_fixes_it_names():
    from harness.stages import fixes

    names = fixes.names()
    order = fixes.ordered(names)
    assert sorted(order) == sorted(names)
    for name in names:
        for before in fixes.get(name).runs_after:
            assert before in names, f"{name}.runs_after names no fix: {before}"
            assert order.index(before) < order.index(name)


def test_a_5d_channels_last_input_is_left_alone():
    """exir maps no 5-D non-contiguous dim order to a memory format, so a copy back to a
    channels_last_3d output would fail lowering ("Failed to map a given dim_order"): with the
    weight fix run first on a channels_last_3d module (the nightly's two LOWER_ERRORs), the
    input fix leaves the program as it is."""
    from harness.stages.fixes.vk_channels_last_weight import ChannelsLastWeightToContiguousPass

    torch.manual_seed(0)
    module = torch.nn.ConvTranspose3d(2, 4, (1, 1, 2), stride=3, padding=1, dilation=2, groups=2)
    module = module.to(memory_format=torch.channels_last_3d)
    x = (torch.randn(1, 2, 3, 2, 2).to(memory_format=torch.channels_last_3d),)
    ep = edge_program(module, x)
    ChannelsLastWeightToContiguousPass()(ep)
    result = ChannelsLastInputToContiguousPass()(ep)
    assert not result.modified
    assert not any(n.meta.get(ADDED) for n in ep.graph_module.graph.nodes)


def test_an_output_whose_dim_order_only_moves_a_size_1_dim_gets_no_copy_back():
    """A channels-last module with one output channel fed a channels-last input (the nightly's
    bf16 Conv2d(2, 1, (4, 3)) cell): its output's dim order only renames the contiguous layout
    (C = 1). With both fixes the input is copied to contiguous and the output is left as it is:
    a copy back to that dim order is a no-op the portable kernel refused ('out_dim_order[i] ==
    dim_order_ref[i]'), and the values are the module's."""
    from harness.stages.fixes.vk_channels_last_input import same_layout
    from harness.stages.fixes.vk_channels_last_weight import ChannelsLastWeightToContiguousPass

    torch.manual_seed(0)
    module = torch.nn.Conv2d(2, 1, (4, 3), padding=(0, 2), dilation=(1, 3))
    module = module.to(memory_format=torch.channels_last).eval()
    x = channels_last(1, 2, 8, 10)
    ep = edge_program(module, x)
    assert ChannelsLastWeightToContiguousPass()(ep).modified
    ep = fixed(ep)
    copies = [n for n in ep.graph_module.graph.nodes if n.meta.get(ADDED)]
    assert len(copies) == 1 and copies[0].args[0].op == "placeholder"  # the input's only
    with torch.no_grad():
        assert torch.allclose(ep.module()(*x), module(*x), atol=1e-5)
    assert same_layout((0, 2, 1, 3), (0, 1, 2, 3), torch.empty(1, 1, 4, 5))
    assert not same_layout((0, 2, 3, 1), (0, 1, 2, 3), torch.empty(1, 2, 4, 5))
