"""Reachable code paths and steering toward them, without a delegate: the routes the routing
models give over the case grid (stages/backends/routing_grid.py) are the reachable part of the
known universe, every other known path says why it is unreachable, coverage.json carries
reached / reachable / known, and --steer fills the reachable set, the same on every machine."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from harness.generation import steering
from harness.generation.generate import PROFILES, generate
from harness.record import CellResult
from harness.results import coverage
from harness.runtimes import shaders
from harness.spec import ConvCase
from harness.stages.backends import routing_grid, vulkan_routing, xnnpack_paths

ROOT = Path(__file__).resolve().parents[1]
# What executed cells dispatched in earlier runs (lavapipe; coverage.json of the test and README
# runs): the model must count each as reachable.
OBSERVED_VULKAN = {
    "conv1d_float", "conv2d_clamp_float", "conv2d_dw_float",
    "conv2d_dw_output_tile_3x3_clamp_float", "conv2d_dw_output_tile_3x3_float",
    "conv2d_dw_output_tile_5x5_float", "conv2d_dw_sned_output_tile_3x3_float",
    "conv2d_dw_sned_output_tile_5x5_float", "conv2d_float", "conv2d_pw_tiled_float",
    "conv_transpose2d_float", "q8ta_conv2d_dw_float", "q8ta_conv2d_float",
    "q8ta_conv2d_pw_float", "q8ta_im2col"}
OBSERVED_XNNPACK = {
    "XNNConv2d:fp32/fp32:none", "XNNConv2d:fp32/fp32:relu6", "XNNConv2d:qint8/qcint8:none",
    "XNNConv2d:qint8/qint8:none", "XNNDepthwiseConv2d:fp32/fp32:none",
    "XNNDepthwiseConv2d:fp32/fp32:relu", "XNNDepthwiseConv2d:qint8/qcint8:none"}
# From an empty list at most two new shaders come per case (the im2col + GEMM pairs), so 90%
# of the 50 reachable needs 42 cases at least; measured: 45 give 48/50.
FROM_EMPTY = 45


@pytest.fixture(scope="module")
def universe():
    """The conv shader universe of the installed plug-in's source (no delegate executes)."""
    from harness.runtimes import vulkan

    manifest = vulkan.installed()
    found = manifest.shader_universe() if manifest else None
    if not found or found.problem or not found.known:
        pytest.skip("no Vulkan plug-in source to read the shader universe from")
    return found


def test_every_leaf_is_a_case_the_model_answers_as_explored():
    """A leaf stands for every completion of its point: its realized case is a valid ConvCase
    and each model answers it as the exploration recorded, on every device."""
    vulkan_leaves, xnnpack_leaves = routing_grid.vulkan_leaves(), routing_grid.xnnpack_leaves()
    assert vulkan_leaves and xnnpack_leaves
    for leaf in vulkan_leaves:
        case = leaf.case()
        why, routes = leaf.answer
        assert routing_grid.generated(case) == why
        for (mali, dot), route in routes.items():
            assert vulkan_routing.predict(case, mali=mali, int8_dot=dot) == route, leaf.point
    for leaf in xnnpack_leaves:
        assert xnnpack_paths.predict(leaf.case()) == leaf.answer[1], leaf.point


@given(st.fixed_dictionaries({a: st.sampled_from(v) for a, v in routing_grid.AXES.items()}),
       st.sampled_from(list(routing_grid.AXES)), st.data())
def test_a_field_depends_only_on_the_axes_it_declares(point, axis, data):
    """What explore relies on: changing an axis a field does not declare leaves it unchanged."""
    other = {**point, axis: data.draw(st.sampled_from(routing_grid.AXES[axis]))}
    a = routing_grid.realize(point)
    b = routing_grid.realize(other)
    kept = [name for name, axes in routing_grid.FIELD_AXES.items()
            if axis not in axes and "[" not in name]
    assert {n: getattr(a, n) for n in kept} == {n: getattr(b, n) for n in kept}, axis
    assert axis in routing_grid.FIELD_AXES["input_shape[2:]"] or \
        a.input_shape[2:] == b.input_shape[2:]


def test_every_name_the_model_routes_to_is_of_a_routed_template():
    """Without the source: each predicted shader is a variant of a template the conv ops
    dispatch (runtimes/shaders.ROUTED), so a misspelt family shows up here."""
    names = set()
    for mali, dot in routing_grid.DEVICES:
        here, not_drawn, absent, refused = routing_grid.vulkan_names(mali, dot)
        names |= set(here) | set(not_drawn) | set(absent) | set(refused)
    templates = sorted(shaders.ROUTED, key=len, reverse=True)
    assert names and templates
    for name in names:
        assert any(name.startswith(t) for t in templates), name


def test_reachable_shaders_are_known_and_include_the_observed(universe):
    known = set(universe.known)
    reach = routing_grid.vulkan(known)  # lavapipe / H200: no Mali, int8 dot products
    assert set(reach.reachable) <= known
    assert set(reach.reachable) | set(reach.unreachable) == known
    assert not set(reach.reachable) & set(reach.unreachable)
    assert OBSERVED_VULKAN <= set(reach.reachable)
    # the model names no shader the source lacks, except the ones it marks itself (the runtime
    # asks for conv2d_dw_sned_<dtype> and throws: vulkan_contract.py's rule)
    assert reach.absent and set(reach.absent).isdisjoint(known)
    assert all(re.fullmatch(r"conv2d_dw_sned(_clamp)?_(float|half)", n) for n in reach.absent)
    assert all(why == "F4" for why in reach.absent.values()), reach.absent
    assert set(reach.unreachable.values()) <= set(routing_grid.REASONS.values())
    for name, why in reach.unreachable.items():
        if "_b1x1" in name:
            assert why == "Mali only"
        elif "_fallback" in name and "transposed" not in name:
            assert why == "no int8 dot product only"
    assert reach.unreachable["q8ta_conv2d_transposed_float"] == "not generated"


def test_device_facts_move_shaders_between_reachable_and_not(universe):
    known = universe.known
    mali = routing_grid.vulkan(known, mali=True)
    assert any("_b1x1" in n for n in mali.reachable)
    assert "conv2d_dw_output_tile_3x3_float" in mali.unreachable  # b1x1 instead on Mali
    assert mali.unreachable["conv2d_dw_output_tile_3x3_float"] == "not on Mali"
    no_dot = routing_grid.vulkan(known, int8_dot=False)
    assert "q8ta_conv2d_fallback_float" in no_dot.reachable
    assert no_dot.unreachable["q8ta_conv2d_float"] == "int8 dot product only"


def test_xnnpack_reachable_paths():
    reach = routing_grid.xnnpack()
    assert set(reach.reachable) | set(reach.unreachable) == set(xnnpack_paths.KNOWN)
    assert not reach.absent
    assert OBSERVED_XNNPACK <= set(reach.reachable)
    assert {xnnpack_paths.family(p) for p in reach.reachable} == set(xnnpack_paths.KINDS)
    # no quantizer annotates a transposed conv: its int8 paths are not generated; an int8 conv
    # fuses relu only (conv_relu is the quantizer's one activation pattern): the other int8
    # paths with relu6 / clamp bounds are never serialized
    assert reach.unreachable
    for p, why in reach.unreachable.items():
        if p.split(":")[1].startswith("qint8") and p.endswith((":relu6", ":clamp")):
            assert why == "int8 fuses relu only", (p, why)
        else:
            assert p.startswith("XNNConvTranspose2d:qint8") and why == "not generated", (p, why)
    assert len(reach.reachable) == 32, len(reach.reachable)  # of 48 known


def _header(universe) -> dict:
    return {"vulkan": {"conv_shaders": universe.to_dict(),
                       "devices": [{"deviceName": "llvmpipe (LLVM 15.0.6, 256 bits)"}]}}


def test_coverage_json_has_reached_reachable_known(universe, tmp_path):
    dw = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, groups=4,
                  input_shape=(1, 4, 8, 8), epilogue=("relu",))
    cells = [CellResult(case=dw, backend="vulkan", status="PASS",
                        reached=["conv2d_dw_output_tile_3x3_clamp_float"]),
             CellResult(case=dw, backend="xnnpack", status="PASS",
                        reached=["XNNDepthwiseConv2d:fp32/fp32:relu"])]
    coverage.write(tmp_path, cells, _header(universe))
    data = json.loads((tmp_path / coverage.FILE).read_text())
    for backend in ("vulkan", "xnnpack"):
        c = data[backend]
        assert set(c) >= {"known", "reached", "unreached", "families", "other_reached",
                          "source", "problem", "reachable", "unreached_reachable",
                          "unreachable", "reasons", "device", "predicted_absent"}
        known, reachable = set(c["known"]), set(c["reachable"])
        assert set(c["reached"]) <= reachable <= known
        assert c["unreached_reachable"] == sorted(reachable - set(c["reached"]))
        assert set(c["unreachable"]) == known - reachable
        assert set(c["unreachable"].values()) == set(c["reasons"])
        assert all(c["reasons"].values())
        for f in c["families"].values():
            assert set(f["reachable"]) >= set(f["reached"])
            assert f["unreached_reachable"] == sorted(set(f["reachable"]) - set(f["reached"]))
        assert sorted(n for f in c["families"].values() for n in f["reachable"]) == c["reachable"]
    assert data["vulkan"]["device"]["mali"] is False and data["vulkan"]["device"]["int8_dot"]
    assert data["vulkan"]["predicted_absent"]
    lines = coverage.summary_lines(coverage.compute(cells, _header(universe)))
    vk = next(line for line in lines if line.startswith("coverage vulkan:"))
    assert f"1/{len(data['vulkan']['reachable'])} reachable ({len(data['vulkan']['known'])} known)" in vk


def test_without_a_shader_universe_nothing_is_reachable():
    cell = CellResult(case=ConvCase(dim=1, in_channels=1, out_channels=1, kernel_size=1,
                                    input_shape=(1, 1, 4)), backend="vulkan", status="PASS",
                      reached=["conv1d_pw_bias_texture3d_texture2d_float"])
    data = coverage.compute([cell], {"vulkan": {}}).to_dict()["vulkan"]
    assert data["reachable"] == [] and data["known"] == [] and data["predicted_absent"] == {}


def _covered(cases) -> tuple[set, set]:
    found = set().union(*(steering.buckets(c) for c in cases))
    reach = steering.reachable()
    return ({b for b in found & reach if b.startswith("vulkan:")},
            {b for b in found & reach if b.startswith("xnnpack:")})


def test_steering_aims_at_the_reachable_set_from_an_empty_list():
    reach = steering.reachable()
    vulkan = {b for b in reach if b.startswith("vulkan:")}
    picked = steering.steer([], FROM_EMPTY, seed=0)
    assert len(picked) == FROM_EMPTY
    vk, xnn = _covered(picked)
    assert len(vk) >= 0.9 * len(vulkan), (len(vk), len(vulkan))
    assert {b.split(":")[1] for b in xnn} == set(xnnpack_paths.KINDS)
    for case in picked[:8]:  # eager PyTorch takes them (a sample: each is a module build)
        from harness.stages.build import eager_check

        assert eager_check(case) is None, case.case_id


def test_steering_the_nightly_profile_reaches_every_reachable_path():
    """The nightly's measured --steer: its 300 generated cases plus the steered ones are
    predicted to reach every reachable Vulkan shader and XNNPACK path (seed 0, the nightly's)."""
    cases = generate(PROFILES["nightly"], 0)
    before = _covered(cases)
    extra = steering.steer(cases, steering.NIGHTLY_STEER, 0)
    vk, xnn = _covered(cases + extra)
    reach = steering.reachable()
    assert vk | xnn == reach, sorted(reach - vk - xnn)
    assert len(before[0]) < 0.9 * len({b for b in reach if b.startswith("vulkan:")})


def test_the_nightly_session_and_its_shards_steer_the_same():
    nox = (ROOT / "noxfile.py").read_text()
    workflow = (ROOT / ".github" / "workflows" / "nightly.yml").read_text()
    in_nox = re.findall(r'"--steer",\s*"(\d+)"', nox)
    in_workflow = re.findall(r"--profile nightly --steer (\d+)", workflow)
    assert in_nox == [str(steering.NIGHTLY_STEER)], in_nox
    assert in_workflow == [str(steering.NIGHTLY_STEER)], in_workflow


def test_steering_is_the_same_in_every_process():
    """Shards each steer on their own machine: the picks depend on the seed and the case list
    only (not on string hashing, the order of sets, or the device)."""
    code = ("from harness.generation import steering; from harness.spec import ConvCase\n"
            "base = [ConvCase(dim=1, in_channels=4, out_channels=8, kernel_size=3,"
            " input_shape=(1, 4, 8))]\n"
            "print(' '.join(c.case_id for c in steering.steer(base, 12, seed=5)))\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": str(h)}, check=True
                           ).stdout.split() for h in (1, 2)]
    assert runs[0] == runs[1] and len(runs[0]) == 12


@pytest.mark.parametrize("case, rule", [
    (ConvCase(dim=1, in_channels=4, out_channels=8, kernel_size=1, groups=2,
              input_shape=(1, 4, 6)), "R4"),
    (ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 8, 8),
              quant="int8_per_tensor"), "R5"),
    (ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, padding="valid",
              input_shape=(1, 4, 8, 8)), "R1"),
    (ConvCase(dim=2, in_channels=8, out_channels=12, kernel_size=3, groups=2,
              input_shape=(1, 8, 8, 8), quant="int8_per_channel"), "R6"),
])
def test_a_refused_case_reaches_no_vulkan_path(case, rule):
    """The routing model says when the lowering or the runtime stops before dispatching: such a
    case is predicted to dispatch nothing, and steering counts no Vulkan path for it."""
    route = vulkan_routing.predict(case)
    assert route.shaders and route.refused.startswith(rule) and route.dispatched == ()
    assert not any(b.startswith("vulkan:") for b in steering.buckets(case))
