"""The Vulkan lane executing for real: the plug-in built from ExecuTorch's sources, loaded into
the wheel's runtime, running on the machine's Vulkan device (Mesa lavapipe without a GPU)."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from harness.results import matrix
from harness.run import runner
from harness.runtimes import vulkan
from harness.spec import ConvCase
from honest import assert_executed

SEED = dict(dim=2, in_channels=3, out_channels=64, kernel_size=3, input_shape=(1, 3, 224, 224))
SIGLIP = dict(dim=2, in_channels=3, out_channels=64, kernel_size=14, stride=14,
              input_shape=(1, 3, 224, 224))
CASES = {
    "seed-0": ConvCase(padding=0, **SEED),
    "seed-valid": ConvCase(padding="valid", **SEED),
    "siglip-valid": ConvCase(padding="valid", **SIGLIP),
    "int8-pc": ConvCase(dim=2, in_channels=8, out_channels=8, kernel_size=3, padding=1,
                        input_shape=(1, 8, 12, 12), quant="int8_per_channel"),
}
MAKE_IVEC2 = ("make_ivec2", "(ints.size() == 2) is false")


def harness(*args, env=None):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True,
                          text=True, timeout=900, env=env)


@pytest.fixture(scope="module")
def vk_run(vulkan_runtime, tmp_path_factory):
    out = tmp_path_factory.mktemp("vk")
    config = runner.RunConfig(backends=["vulkan"], fixes=["vulkan-conv-padding"], profile="ci",
                              max_examples=0, seed=0, jobs=2, cache_dir=str(out / "cache"),
                              vulkan_runtime=vulkan_runtime.library)
    cases = list(CASES.values())
    runner.start(out, config, cases)
    df = runner.execute(out, config, cases, progress=False)
    return out, {(name, r.fixes): r for name, case in CASES.items()
                 for r in df[df.case_id == case.case_id].itertuples()}


def test_every_cell_executed_and_its_status_is_honest(vk_run):
    """Each case on each lane ran on the plug-in (or says which stage stopped it) and its row is
    consistent with what happened; which status each earns is the corpus's (cases/seed.json,
    cases/vulkan_runtime_patches.json)."""
    _, cells = vk_run
    assert len(cells) == 2 * len(CASES)  # stock and fixed, every case
    for (name, fixes), row in cells.items():
        assert fixes in ("", "vulkan-conv-padding"), row
        status = assert_executed(row)
        assert row.predicted in ("clean", "CONTRACT_VIOLATION"), row  # the static check ran
        if status in ("PASS", "MISMATCH"):
            assert row.run_time_s > 0 and row.max_abs_error is not None, row


@pytest.mark.parametrize("name", ["seed-valid", "siglip-valid"])
def test_the_prediction_is_the_payload_and_the_fix_normalises_it(vk_run, name):
    """The static check flags the stock lane exactly when its lists are short (the harness's
    model of make_ivec2), and the fix's own transformation leaves no short list: the fixed lane
    is predicted clean. What the runtime then does with either is the corpus's."""
    _, cells = vk_run
    stock, fixed = cells[(name, "")], cells[(name, "vulkan-conv-padding")]
    short = [v for v in stock.contract_violations if v.startswith("[ivec2]")]
    assert (stock.predicted == "CONTRACT_VIOLATION") == bool(stock.contract_violations)
    assert all("make_ivec2" in v for v in short), short
    assert fixed.predicted == "clean" and not fixed.contract_violations, fixed.contract_violations
    for row in (stock, fixed):
        if row.status in ("RUNTIME_ERROR", "CRASH"):  # the runtime's own words, not a code
            assert row.message and not row.message.startswith("error 0x"), row.message


def test_int8_per_channel_conv2d_is_judged_in_output_steps(vk_run):
    _, cells = vk_run
    row = cells[("int8-pc", "")]
    status = assert_executed(row)
    if status in ("PASS", "MISMATCH"):  # measured in output steps, never silently in float
        assert row.error_steps is not None and (row.error_steps <= 1 + 1e-5) == (status == "PASS")
    # a quantized cell never silently ran in float: a PASS had its q/dq inside the delegate
    assert status != "PASS" or any("quantize_per" in op for op in row.delegated_ops), row


def test_run_header_names_runtime_source_and_device(vk_run, vulkan_runtime):
    out, _ = vk_run
    header = json.loads((out / "run.json").read_text())["vulkan"]
    assert header["library"] == vulkan_runtime.library
    assert header["source_commit"] == vulkan_runtime.source_commit
    assert header["devices"] and header["devices"][0]["deviceName"]
    if not vulkan_runtime.source_exact:  # the skew is said, not hidden
        assert "not the wheel's own commit" in header["skew_note"]


def test_agreement_table_counts_predictions_against_the_runtime(vk_run):
    """The table counts, per lane, what the rows say: written again here from the rows."""
    out, cells = vk_run
    table = matrix.agreement(matrix.read(out)).set_index("lane")
    assert set(table.index) <= {"vulkan", "vulkan+vulkan-conv-padding"}, table
    for label, fixes in (("vulkan", ""), ("vulkan+vulkan-conv-padding", "vulkan-conv-padding")):
        ran = [r for (_, f), r in cells.items() if f == fixes and (
            r.status in ("PASS", "MISMATCH", "RUNTIME_ERROR", "CRASH")
            or (r.status == "NOT_DELEGATED" and r.run_time_s is not None))]
        flagged = [r.predicted == "CONTRACT_VIOLATION" for r in ran]
        passed = [r.status in ("PASS", "NOT_DELEGATED") for r in ran]
        want = {"predicted_and_failed": sum(f and not p for f, p in zip(flagged, passed)),
                "predicted_but_passed": sum(f and p for f, p in zip(flagged, passed)),
                "unpredicted_failures": sum(not f and not p for f, p in zip(flagged, passed)),
                "clean_and_passed": sum(not f and p for f, p in zip(flagged, passed)),
                "executed": len(ran)}
        got = ({k: int(table.loc[label][k]) for k in want} if label in table.index
               else dict.fromkeys(want, 0))
        assert got == want, (label, got, want)


def test_runtime_errors_from_reused_workers_are_rerun_alone(vk_run):
    out, cells = vk_run
    rows = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert len(rows) == len(cells)  # one journal line per cell
    failed = [r for r in rows if r["status"] == "RUNTIME_ERROR"]
    assert len(failed) == sum(r.status == "RUNTIME_ERROR" for r in cells.values())
    if not failed:
        pytest.skip("no RUNTIME_ERROR cell on this executorch to re-run alone (the corpus, "
                    "cases/seed.json, says which cells fail where)")
    rerun = [r for r in failed if r["isolation"]]
    # alone: the same error (the runtime's own, not left-over state)
    assert [r["isolation"] for r in rerun] == ["re-run alone: same RUNTIME_ERROR"] * len(rerun)
    alone = list((out / "logs" / "alone").glob("worker-*.log"))
    assert len(alone) == len(rerun)  # one fresh process each


def test_repro_script_loads_the_plugin_and_observes_what_the_cell_saw(vk_run):
    out, cells = vk_run
    row = cells[("seed-valid", "")]
    script = out / "repro" / f"{CASES['seed-valid'].case_id}__vulkan.py"
    made = harness("repro", CASES["seed-valid"].case_id, "--backend", "vulkan", "--dir", out)
    assert made.returncode == 0, made.stderr
    assert script.name == made.stdout.strip().split("/")[-1]
    proc = subprocess.run([sys.executable, made.stdout.strip()], capture_output=True, text=True,
                          timeout=600)
    said = [ln for ln in proc.stdout.splitlines() if ln.startswith(("STATUS", "PREDICTED"))]
    predicted = [ln for ln in said if ln.startswith("PREDICTED")]
    assert bool(predicted) == (row.predicted == "CONTRACT_VIOLATION"), proc.stdout
    if row.status == "CRASH":  # a native crash ends the script before it says a status
        assert proc.returncode != 0 and not said[len(predicted):], proc.stdout + proc.stderr
    else:
        assert said and said[-1].startswith(f"STATUS: {row.status}"), (row.status, proc.stdout
                                                                       + proc.stderr)


def test_second_build_is_a_cache_hit(vulkan_runtime):
    again = harness("runtime", "build", "vulkan")
    assert again.returncode == 0, again.stderr
    assert "cache hit" in again.stdout and vulkan_runtime.library in again.stdout


def test_build_with_a_missing_source_is_one_line_exit_2(tmp_path):
    proc = harness("runtime", "build", "vulkan", "--source", tmp_path / "nowhere",
                   "--cache", tmp_path / "cache")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("convconf: error: ")
    assert "nowhere: no such file or folder" in proc.stderr
    assert not (tmp_path / "cache").exists()  # nothing built, nothing written


def test_source_folder_without_a_pairing_tarball_names_what_it_found(tmp_path):
    """A folder holding only a 1.3.1 source (made here: ET_COMMIT, version.txt and the Vulkan
    runtime folder, as the shipped tarballs lay it out) pairs with no 1.5.1 wheel."""
    import io
    import tarfile

    only_old = tmp_path / "src"
    only_old.mkdir()
    with tarfile.open(only_old / "executorch-src-v1.3.1-e2f18eb23c45.tar.gz", "w:gz") as tf:
        for name, data in (("ET_COMMIT", b"e2f18eb23c45bd22ca332b0b8b49a81de304b472\n"),
                           ("version.txt", b"1.3.1\n"),
                           ("backends/vulkan/runtime/README", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    proc = harness("runtime", "build", "vulkan", "--source", only_old, "--cache", tmp_path / "c")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "no source pairs with executorch" in proc.stderr and "1.3.1" in proc.stderr


def test_status_names_plugin_and_device(vulkan_runtime):
    proc = harness("runtime", "status")
    assert proc.returncode == 0, proc.stderr
    assert vulkan_runtime.library in proc.stdout
    assert "VulkanBackend registered" in proc.stdout
    assert "vulkan device 0:" in proc.stdout


def test_vulkan_runtime_none_keeps_the_static_verdicts(vulkan_runtime, tmp_path):
    """--vulkan-runtime none: the lane behaves as without a runtime, even in a process that has
    the plug-in loaded; a predicted violation stays CONTRACT_VIOLATION, never PASS."""
    cases = tmp_path / "c.json"
    cases.write_text(json.dumps([CASES["seed-valid"].to_dict()]))
    proc = harness("run", "--out", tmp_path / "r", "--backends", "vulkan", "--cases", cases,
                   "--max-examples", "0", "--no-cache", "-j", "1", "--vulkan-runtime", "none",
                   "--no-progress", "--no-report")
    assert proc.returncode == 0, proc.stderr
    [row] = list(matrix.read(tmp_path / "r").itertuples())
    assert row.status != "PASS" and pd.isna(row.run_time_s)  # never executed
    # the static verdict: the prediction where the payload breaks the contract, else NO_RUNTIME
    # (NOT_DELEGATED when the conv stayed outside, LOWER_ERROR when lowering raised)
    static = {"CONTRACT_VIOLATION": "CONTRACT_VIOLATION", "clean": "NO_RUNTIME"}
    assert row.status in ("LOWER_ERROR", "NOT_DELEGATED") or row.status == static[row.predicted]
    assert json.loads((tmp_path / "r" / "run.json").read_text())["vulkan"]["library"] is None
    assert vulkan.installed() is not None


def test_build_tree_configures_a_copy_of_the_recipe_not_the_checkout(tmp_path):
    """CMake pins a build tree to its source path; CI's clone and a developer's share the cache,
    so the tree is configured from a copy beside it, and a tree configured elsewhere is reset."""
    build_dir = tmp_path / "cmake"
    build_dir.mkdir()
    (build_dir / "CMakeCache.txt").write_text("CMAKE_HOME_DIRECTORY:INTERNAL=/elsewhere/native\n")
    (build_dir / "kept.o").write_text("object")
    recipe = vulkan._stage_recipe(tmp_path / "native", build_dir)
    assert sorted(p.name for p in recipe.iterdir()) == sorted(
        p.name for p in vulkan.NATIVE.iterdir() if p.is_file())
    assert (recipe / "CMakeLists.txt").read_bytes() == (vulkan.NATIVE / "CMakeLists.txt").read_bytes()
    assert not (build_dir / "CMakeCache.txt").exists() and (build_dir / "kept.o").exists()
    (build_dir / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={recipe}\n")
    vulkan._stage_recipe(recipe, build_dir)
    assert (build_dir / "CMakeCache.txt").exists()  # configured from the copy: left alone
