"""Code-path coverage: every executed cell records the delegate code it reached (Vulkan: the
shaders the real plug-in dispatched; XNNPACK: the conv nodes of the payload), a run writes
coverage.json and the report's Coverage section, a cached cell keeps its coverage, and the
routing model's predictions are put beside what was dispatched."""

import json

import pytest
from hypothesis import given, strategies as st

from harness.cli.common import write_report
from harness.record import CellResult
from harness.results import coverage, matrix
from harness.run import runner
from harness.runtimes import shaders
from harness.spec import ConvCase
from harness.stages.cache import Cache
from harness.lane import Lane
from harness.stages.cell import prepare, run_cell
from harness.generation import steering
from harness.stages.backends import vulkan_routing, xnnpack_paths

DW_RELU = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, groups=4,
                   input_shape=(1, 4, 8, 8), epilogue=("relu",))
INT8 = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 8, 8),
                quant="int8_per_channel")
CONV1D = ConvCase(dim=1, in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 8))
CASES = [DW_RELU, INT8, CONV1D]


def _run(out, vulkan_runtime, cache):
    config = runner.RunConfig(backends=["xnnpack", "vulkan"], fixes=[], profile="ci",
                              max_examples=0, seed=0, jobs=2, cache_dir=str(cache),
                              vulkan_runtime=vulkan_runtime.library)
    runner.start(out, config, CASES)
    df = runner.execute(out, config, CASES, progress=False)
    write_report(out)
    return {(r["case_id"], r["backend"]): CellResult.from_row(r)
            for r in matrix.read(out).to_dict(orient="records")}, df


@pytest.fixture(scope="module")
def runs(vulkan_runtime, tmp_path_factory):
    root = tmp_path_factory.mktemp("coverage")
    first, _ = _run(root / "first", vulkan_runtime, root / "cache")
    return root, first


def test_vulkan_cell_records_the_shaders_the_plugin_dispatched(runs):
    root, cells = runs
    cell = cells[(DW_RELU.case_id, "vulkan")]
    assert cell.status in ("PASS", "MISMATCH"), cell.message  # executed
    # relu fuses into the conv (conv_with_clamp): the 3x3 depthwise tile shader, clamp variant
    assert "conv2d_dw_output_tile_3x3_clamp_float" in cell.reached
    header = json.loads((root / "first" / "run.json").read_text())
    known = shaders.ShaderUniverse.from_dict(header["vulkan"]["conv_shaders"]).known
    int8 = cells[(INT8.case_id, "vulkan")]
    assert {n for n in int8.reached if n.startswith("q8ta_conv")} <= set(known)
    assert any(n.startswith("q8ta_conv2d") for n in int8.reached), int8.reached


def test_xnnpack_cell_records_its_conv_nodes(runs):
    _, cells = runs
    assert cells[(DW_RELU.case_id, "xnnpack")].reached == ["XNNDepthwiseConv2d:fp32/fp32:relu"]
    assert cells[(INT8.case_id, "xnnpack")].reached == ["XNNConv2d:qint8/qcint8:none"]
    assert cells[(CONV1D.case_id, "xnnpack")].reached == ["XNNConv2d:fp32/fp32:none"]


def test_coverage_json_has_known_and_reached_per_backend(runs):
    root, cells = runs
    data = json.loads((root / "first" / "coverage.json").read_text())
    for backend in ("vulkan", "xnnpack"):
        c = data[backend]
        assert set(c) >= {"known", "reached", "unreached", "families"}
        assert set(c["reached"]) <= set(c["known"])
        assert sorted(set(c["known"]) - set(c["reached"])) == c["unreached"]
        seen = {p for cell in cells.values() if cell.backend == backend for p in cell.reached}
        assert set(c["reached"]) == seen & set(c["known"])
        assert sum(f["known"] for f in c["families"].values()) == len(c["known"])
        assert set(c["reachable"]) <= set(c["known"])  # reachable: routing_grid.py
        assert c["unreached_reachable"] == sorted(set(c["reachable"]) - set(c["reached"]))
    assert len(data["xnnpack"]["known"]) == len(xnnpack_paths.KNOWN)
    model = data["routing_model"]
    executed = [c for c in cells.values() if c.backend == "vulkan" and c.reached]
    assert model["agree"] + model["disagree"] + model["no_prediction"] == len(executed)


@pytest.mark.parametrize("backend", ["vulkan", "xnnpack"])
def test_a_cached_cell_keeps_its_coverage(vulkan_runtime, tmp_path, backend):
    cache = Cache(tmp_path)
    fresh = run_cell(DW_RELU, backend, cache=cache)
    again = run_cell(DW_RELU, backend, cache=cache)  # its lowered program from the cache
    assert not fresh.cached and again.cached
    assert fresh.reached and again.reached == fresh.reached


def test_reached_survives_the_journal_round_trip():
    cell = CellResult(case=CONV1D, backend="vulkan", reached=["conv1d_float"])
    assert CellResult.from_row(cell.to_row()).reached == ["conv1d_float"]
    assert CellResult.from_row({k: v for k, v in cell.to_row().items() if k != "reached"}
                               ).reached == []  # a matrix from before the column


def test_a_routing_disagreement_is_listed():
    header = {"vulkan": {"conv_shaders": {"families": {"conv1d": ["conv1d_float"],
                                                       "conv2d": ["conv2d_float"]}}}}
    wrong = CellResult(case=CONV1D, backend="vulkan", status="PASS", reached=["conv2d_float"])
    cov = coverage.compute([wrong], header)
    assert cov.routing_counts() == {"agree": 0, "disagree": 1, "no_prediction": 0}
    assert any(line.startswith("routing finding:") and CONV1D.case_id in line
               for line in coverage.summary_lines(cov))
    assert cov.backends["vulkan"].families[1].reached == ["conv2d_float"]


def test_shader_universe_from_the_source_matches_the_generator_naming():
    text = """
t:
  parameter_names_with_default_values: {DTYPE: float, STORAGE: texture3d}
  generate_variant_forall:
    STORAGE: [{VALUE: texture3d}, {VALUE: buffer}]
    DTYPE: [{VALUE: half}, {VALUE: float}]
  shader_variants:
    - NAME: t
    - NAME: t_fixed
      STORAGE: buffer
"""
    assert sorted(shaders.expand(text)["t"]) == sorted(
        ["t_texture3d_half", "t_texture3d_float", "t_buffer_half", "t_buffer_float",
         "t_fixed_half", "t_fixed_float"])


@pytest.mark.parametrize("quant", ["int8_per_tensor", "int8_per_channel"])
def test_xnnpack_int8_conv_fuses_relu_only(quant):
    """The path model against a real lowering: an int8 conv followed by relu6 serializes with
    no bounds (XNNPACKQuantizer has conv_relu, no conv_hardtanh); followed by relu, fused."""
    for epilogue, act in ((("relu6",), "none"), (("relu",), "relu")):
        case = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, quant=quant,
                        input_shape=(1, 4, 8, 8), epilogue=epilogue)
        entry = prepare(case, Lane("xnnpack"))
        assert entry.code_path == [xnnpack_paths.predict(case)], entry.message
        assert entry.code_path[0].endswith(f":{act}")


def test_routing_model_pointwise_never_reads_dilation():
    """R1 for the float pointwise path: Conv2dPW.cpp reads stride and padding, not dilation, so a
    length-1 dilation runs there (a grouped 1x1 conv with dilation [3] dispatched
    conv2d_pw_tiled_float where the model had said make_ivec2); a length-1 stride does not."""
    grouped = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=1, groups=4,
                       padding="same", dilation=(3,), input_shape=(1, 4, 2, 4))
    route = vulkan_routing.predict(grouped)
    assert route.rule == "F5" and not route.refused
    assert route.dispatched == ("conv2d_pw_tiled_float",)
    strided = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=1, stride=(2,),
                       input_shape=(1, 4, 4, 4))
    assert vulkan_routing.predict(strided).refused.startswith("R1")
    sliding = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, dilation=(3,),
                       input_shape=(1, 4, 8, 8))
    assert vulkan_routing.predict(sliding).refused.startswith("R1")


@given(st.sampled_from(["float32", "float16"]), st.integers(1, 3), st.booleans())
def test_routing_model_names_dtype_variants(dtype, k, relu):
    case = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=k, dtype=dtype,
                    input_shape=(1, 4, 8, 8), epilogue=("relu",) if relu else ())
    route = vulkan_routing.predict(case)
    suffix = "_float" if dtype == "float32" else "_half"
    assert route is not None and all(s.endswith(suffix) for s in route.shaders)
    assert ("_clamp" in route.shaders[0]) == (relu and k != 1)  # pointwise has no clamp variant


@pytest.mark.browser
def test_report_coverage_section_renders_in_chromium(runs, chromium):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    root, _ = runs
    data = json.loads((root / "first" / "coverage.json").read_text())
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.goto((root / "first" / "report.html").as_uri())
        assert page.locator("#coverage-title").is_visible()
        totals = page.locator("#coverage h3.coverage-backend .coverage-total").all_inner_texts()
        assert totals == [f"{len(data[b]['reached'])}/{len(data[b]['known'])}"
                          for b in ("vulkan", "xnnpack")]
        reachable = page.locator("#coverage h3.coverage-backend .coverage-reachable")
        assert reachable.all_inner_texts() == [
            f"{len(data[b]['reached'])}/{len(data[b]['reachable'])}" for b in ("vulkan", "xnnpack")]
        unreached = page.locator('p.coverage-unreached-reachable[data-backend="vulkan"]')
        assert "conv2d_dw_output_tile_5x5_float" in unreached.inner_text()
        row = page.locator('table[data-backend="vulkan"] tr[data-family="conv2d_dw_output_tile"]')
        assert row.locator("td.ratio").inner_text().startswith("1/")
        assert "conv2d_dw_output_tile_5x5_float" in row.locator("td.unreached").inner_text()
        assert page.locator("#routing-model").is_visible()
        browser.close()


def test_steering_adds_only_cases_that_reach_a_new_predicted_path():
    base = [CONV1D, DW_RELU]
    picked = steering.steer(base, 6, seed=3, rounds=2)
    assert picked == steering.steer(base, 6, seed=3, rounds=2)  # reproducible by seed
    assert len(picked) <= 6 and not {c.case_id for c in picked} & {c.case_id for c in base}
    covered = set().union(*(steering.buckets(c) for c in base))
    for case in picked:
        assert steering.buckets(case) - covered, case.case_id
        covered |= steering.buckets(case)


@given(steering.routed_cases())
def test_routed_cases_are_valid_and_predicted(case):
    import torch

    from harness.stages.build import build_module, make_inputs

    with torch.no_grad():  # eager PyTorch accepts it
        build_module(case)(*make_inputs(case))
    assert vulkan_routing.predict(case) is not None
