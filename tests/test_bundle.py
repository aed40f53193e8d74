"""Vulkan cells run elsewhere: bundle -> run.sh (here on lavapipe, in its own processes, no
Python) -> ingest gives the same statuses as the in-process Vulkan lane."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.results import matrix
from harness.runtimes import patching
from harness.spec import ConvCase
from honest import assert_executed

SEED = dict(dim=2, in_channels=3, out_channels=16, kernel_size=3, input_shape=(1, 3, 32, 32))
CASES = [ConvCase(padding=0, **SEED), ConvCase(padding="valid", **SEED),
         ConvCase(dim=2, in_channels=8, out_channels=8, kernel_size=3, padding=1,
                  input_shape=(1, 8, 12, 12), quant="int8_per_channel")]


PATCH = "vk-conv-int-list-broadcast"


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def ingested(vulkan_runtime, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bundle")
    cases = tmp / "cases.json"
    cases.write_text(json.dumps([c.to_dict() for c in CASES]))
    run = tmp / "run"
    # the fixed lane is a runtime patch: its cells run on the patched plug-in, in the bundle too
    proc = harness("run", "--out", run, "--backends", "vulkan", "--fixes", PATCH,
                   "--cases", cases, "--max-examples", 0, "-j", 2, "--cache", tmp / "cache",
                   "--vulkan-runtime", vulkan_runtime.library, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    # everything below works on the run folder moved elsewhere (a CI artifact, another disk):
    # a run is known by its id, not its path
    moved = tmp / "elsewhere" / "run"
    moved.parent.mkdir()
    shutil.move(run, moved)
    run = moved
    local = matrix.read(run)
    made = harness("bundle", run, "--out", tmp / "b")
    assert made.returncode == 0, made.stderr
    # the device side: only the bundle folder, no Python, no harness
    device = subprocess.run(["sh", str(tmp / "b" / "run.sh"), str(tmp / "results")],
                            capture_output=True, text=True, timeout=900, env={"PATH": "/usr/bin:/bin"})
    assert device.returncode == 0, device.stderr
    back = harness("ingest", run, tmp / "results", "--device-name", "lavapipe")
    assert back.returncode == 0, back.stderr
    return tmp, local, matrix.read(run), back.stdout


def test_bundle_is_self_contained(ingested):
    tmp, local, _, _ = ingested
    b = tmp / "b"
    libs = sorted(p.name for p in (b / "lib").iterdir())
    assert "libexecutorch.so" in libs and "libexecutorch_backend_vulkan.so" in libs
    assert len(list((b / "cells").iterdir())) == len(local)  # every lowered Vulkan cell
    needed = subprocess.run(["ldd", str(b / "bin" / "convconf_runner")], capture_output=True,
                            text=True).stdout
    for lib in ("libexecutorch.so", "libexecutorch_backend_vulkan.so"):
        line = next(ln for ln in needed.splitlines() if lib in ln)
        found = Path(line.split("=>")[1].split("(")[0].strip()).resolve()
        assert found.parent == (b / "lib").resolve(), line  # inside the bundle, not the wheel


def test_a_patched_lane_runs_on_its_own_plug_in_in_the_bundle(ingested):
    tmp, local, merged, _ = ingested
    b = tmp / "b"
    cells = json.loads((b / "cells.json").read_text())
    patched = {k for k, v in cells.items() if v["fixes"] == PATCH}
    # the plug-in is built with the patch and what its header says it needs
    built_with = [p.name for p in patching.resolve([PATCH])]
    assert PATCH in built_with
    assert patched and all(v["patches"] == built_with for k, v in cells.items() if k in patched)
    [entry] = json.loads((b / "bundle.json").read_text())["patched"]
    assert entry["patches"] == built_with
    for name in patched:
        assert (b / "cells" / name / "runtime").read_text().strip() == entry["bin"]
    runner = b / entry["bin"] / "convconf_runner"
    needed = subprocess.run(["ldd", str(runner)], capture_output=True, text=True).stdout
    line = next(ln for ln in needed.splitlines() if "libexecutorch_backend_vulkan.so" in ln)
    assert Path(line.split("=>")[1].split("(")[0].strip()).resolve().parent == runner.parent.resolve()
    # every case ran on the "device" on both plug-ins, each row labelled with its lane and
    # with the status the same lane had in process (what those statuses are: the corpus,
    # cases/from_tests.json)
    device = merged[merged.backend == "vulkan@lavapipe"]
    lowered = sorted((r.case_id, r.fixes) for r in local.itertuples()
                     if r.status not in ("LOWER_ERROR", "INVALID"))
    assert len(local) == 2 * len(CASES) and lowered
    assert sorted(zip(device.case_id, device.fixes)) == lowered
    here = {(r.case_id, r.fixes): r.status for r in local.itertuples()}
    assert {(r.case_id, r.fixes): r.status for r in device.itertuples()} == here


def test_device_lane_has_the_in_process_statuses(ingested):
    _, local, merged, stdout = ingested
    device = merged[merged.backend == "vulkan@lavapipe"]
    assert len(device) == len(local)
    here = {(r.case_id, r.fixes): r.status for r in local.itertuples()}
    there = {(r.case_id, r.fixes): r.status for r in device.itertuples()}
    assert there == here
    for row in device.itertuples():  # honest there too: a failure says the runtime's words
        assert_executed(row)
        if row.status in ("RUNTIME_ERROR", "CRASH"):
            assert not row.message.startswith("error 0x"), row.message
    assert "vulkan@lavapipe" in stdout and "llvmpipe" in stdout


def test_diff_between_lanes_pairs_the_device_with_the_local_lane(ingested):
    tmp, local, _, _ = ingested
    run = tmp / "elsewhere" / "run"
    proc = harness("diff", run, run, "--lanes", "vulkan", "vulkan@lavapipe")
    assert proc.returncode == 0, proc.stderr
    assert f"{len(local)} cells in both lanes" in proc.stdout
    assert f"same {len(local)} -> " in proc.stdout  # the same device through two paths
    table = pd.read_csv(run / "diff-vulkan-vs-vulkan@lavapipe.csv")
    assert set(table.backend) == {"vulkan vs vulkan@lavapipe"}
    passed = table[table.new == "PASS"]
    assert len(passed) and (passed.max_abs_error_old == passed.max_abs_error_new).all()
    bad = harness("diff", run, run, "--lanes", "vulkan", "vulkan@nowhere")
    assert bad.returncode == 2 and "no cells of lane 'vulkan@nowhere'" in bad.stderr


def test_report_shows_the_device_lane_and_device(ingested):
    tmp, _, _, _ = ingested
    html = (tmp / "elsewhere" / "run" / "report.html").read_text()
    assert "vulkan@lavapipe" in html and "llvmpipe" in html


def test_cells_without_results_are_no_runtime_and_bad_results_are_one_line(ingested, tmp_path):
    tmp, local, _, _ = ingested
    partial = tmp_path / "partial"
    shutil.copytree(tmp / "results", partial)
    first = sorted(p for p in partial.iterdir() if p.is_dir())[0]
    shutil.rmtree(first)
    run = tmp_path / "run"
    shutil.copytree(tmp / "elsewhere" / "run", run)
    bundle = json.loads((partial / "bundle.json").read_text())
    bundle["run_dir"] = str(run)
    (partial / "bundle.json").write_text(json.dumps(bundle))
    ok = harness("ingest", run, partial, "--device-name", "part")
    assert ok.returncode == 0, ok.stderr
    lane = matrix.read(run).query("backend == 'vulkan@part'")
    missing = lane[lane.status == "NO_RUNTIME"]
    assert len(missing) == 1 and "no result for this cell" in missing.iloc[0].message
    (partial / "cells.json").write_text("{not json")
    bad = harness("ingest", run, partial, "--device-name", "part")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("convconf: error: ") and "cells.json: unreadable" in bad.stderr


def test_a_moved_run_diffs_repros_and_resumes(ingested, tmp_path):
    tmp, local, _, _ = ingested
    run = tmp / "elsewhere" / "run"
    same = harness("diff", run, run)
    assert same.returncode == 0 and "regressed 0" in same.stdout, same.stdout + same.stderr
    cell = local.iloc[0]
    rep = harness("repro", cell.case_id, "--backend", cell.backend, "--dir", run)
    assert rep.returncode == 0 and Path(rep.stdout.strip()).exists(), rep.stderr
    # resume a copy of it with half its journal gone: the missing cells are run again, the
    # finished ones kept, and the matrix is the same
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    lines = (copy / "journal.jsonl").read_text().splitlines(keepends=True)
    (copy / "journal.jsonl").write_text("".join(lines[: len(lines) // 2]))
    resumed = harness("run", "--resume", copy, "--no-progress", "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    again = matrix.read(copy)
    stock = local[~local.backend.str.contains("@")]
    assert list(again.status) == list(stock.status) and list(again.case_id) == list(stock.case_id)


def test_ingest_refuses_the_results_of_another_run(ingested, tmp_path):
    tmp, _, _, _ = ingested
    other = tmp_path / "other"
    shutil.copytree(tmp / "elsewhere" / "run", other)
    header = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**header, "run_id": "another-run"}))
    back = harness("ingest", other, tmp / "results", "--device-name", "again")
    assert back.returncode == 2 and len(back.stderr.strip().splitlines()) == 1, back.stderr
    assert "not of run another-run" in back.stderr
