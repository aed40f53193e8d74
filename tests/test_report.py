"""Report, repro scripts and diff, on a real (small) run."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results import matrix
from harness.results import report
from harness.results import repro
from harness.run import runner
from harness.spec import ConvCase

CASES = [ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3, padding=p,
                  input_shape=(1, 3, 8, 8)) for p in ("valid", 0)]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    config = runner.RunConfig(backends=["xnnpack", "vulkan"], fixes=["vulkan-conv-padding"],
                              profile="ci", max_examples=0, seed=0, jobs=2, cache_dir=None)
    runner.start(out, config, CASES)
    df = runner.execute(out, config, CASES, progress=False)
    repro.write_for_run(out, df)
    report.write(out)
    return out


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def run_script(path):
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)
    return [ln for ln in proc.stdout.splitlines() if ln.startswith("STATUS: ")]


@pytest.mark.slow
def test_repro_reproduces_contract_violation_and_xnnpack_pass(run_dir):
    bad = CASES[0]
    listed = sorted(p.name for p in (run_dir / "repro").iterdir())
    assert f"{bad.case_id}__vulkan.py" in listed  # written for every non-PASS cell
    assert not any("xnnpack" in n for n in listed)  # PASS cells get none by default
    assert run_script(run_dir / "repro" / f"{bad.case_id}__vulkan.py")[0].startswith(
        "STATUS: CONTRACT_VIOLATION")
    made = harness("repro", bad.case_id, "--backend", "xnnpack", "--dir", run_dir)
    assert made.returncode == 0, made.stderr
    assert run_script(made.stdout.strip())[0].startswith("STATUS: PASS")
    source = open(made.stdout.strip()).read()
    assert "import harness" not in source and "from harness" not in source  # standalone


def test_repro_of_unknown_case_is_one_line(run_dir):
    proc = harness("repro", "nope", "--backend", "vulkan", "--dir", run_dir)
    assert proc.returncode == 2 and proc.stderr.startswith("convconf: error: case 'nope'")


def test_diff_flags_regressions_for_bisect(run_dir, tmp_path):
    new = tmp_path / "new"
    shutil.copytree(run_dir, new)
    df = matrix.read(new)
    same = harness("diff", run_dir, new)
    assert same.returncode == 0 and "regressed 0" in same.stdout
    passing = df.index[(df.status == "PASS")]
    df.loc[passing[0], "status"] = "MISMATCH"
    matrix.write(df, new)
    old = tmp_path / "old"  # a cell that failed before and passes now
    shutil.copytree(run_dir, old)
    before = matrix.read(old)
    before.loc[passing[1], "status"] = "MISMATCH"
    matrix.write(before, old)
    proc = harness("diff", old, new)
    assert proc.returncode == 1
    assert "regressed 1, fixed 1" in proc.stdout
    rows = (new / "diff.csv").read_text()
    assert "regressed" in rows and "fixed" in rows
    bad = harness("diff", run_dir, tmp_path / "absent")
    assert bad.returncode == 2 and "cannot read matrix" in bad.stderr


def test_report_is_self_contained(run_dir):
    html = (run_dir / "report.html").read_text()
    assert "http://" not in html and "https://" not in html and "<script src" not in html
    registered = json.loads((run_dir / "run.json").read_text())["registered_backends"]
    assert all(name in html for name in registered)
    assert "CONTRACT_VIOLATION" in html and CASES[0].case_id in html


@pytest.mark.browser
def test_report_renders_filters_and_opens_details_in_chromium(run_dir, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    with sync_api.sync_playwright() as p:
        browser = launch(p, chromium)
        page = browser.new_page()
        page.goto((run_dir / "report.html").as_uri())
        assert page.locator("#heat td.cell").count() >= 2
        rows = page.locator("#cells tr.cellrow")
        assert rows.count() == 6  # 2 cases x (xnnpack, vulkan, vulkan+fix)
        page.select_option("#f-status", "CONTRACT_VIOLATION")
        visible = page.locator("#cells tr.cellrow:visible")
        assert visible.count() == 1
        assert "CONTRACT_VIOLATION" in visible.first.inner_text()
        visible.first.click()
        details = page.locator("#cells tr.details:visible")
        assert details.count() == 1 and "make_ivec2" in details.inner_text()
        assert "python -m harness repro" in details.inner_text()
        page.click("#f-clear")
        page.select_option("#f-backend", "xnnpack")
        assert page.locator("#cells tr.cellrow:visible").count() == 2
        page.click("#f-clear")
        # feature filters (padding spelling, mode, dtype, dim, batch) combine; clear resets them
        assert page.locator("#f-mode option").all_inner_texts() == ["all", "zeros"]
        page.select_option("#f-padding", "valid")
        page.select_option("#f-dim", "2d")
        assert page.locator("#cells tr.cellrow:visible").count() == 3
        page.select_option("#f-dtype", "float32")
        page.select_option("#f-batch", "batch 1")
        assert page.locator("#cells tr.cellrow:visible").count() == 3
        page.click("#f-clear")
        assert page.input_value("#f-padding") == "" and page.locator("#cells tr.cellrow:visible").count() == 6
        page.locator("#heat td.cell").first.click()
        assert 1 <= page.locator("#cells tr.cellrow:visible").count() < 6
        page.click("#f-clear")
        findings = page.locator("#findings tr.finding")  # the one problem: "valid" on Vulkan
        assert findings.count() == 1 and "has a length-1 list" in findings.first.inner_text()
        # its fixed cell is NO_RUNTIME here (no plug-in in this run): not counted as cleared
        assert findings.first.locator("td.fixed").inner_text() == "-"
        findings.first.click()
        listed = page.locator("#cells tr.cellrow:visible")
        assert listed.count() == 1 and CASES[0].case_id in listed.first.inner_text()
        assert page.input_value("#f-finding") == findings.first.get_attribute("data-finding")
        page.screenshot(path=str(tmp_path / "report.png"))  # kept out of git (tmp)
        browser.close()


def test_save_failures_grows_the_corpus_with_expected_statuses(run_dir, tmp_path):
    from harness.results.corpus import entries, save_failures

    df = matrix.read(run_dir)
    target = tmp_path / "found.json"
    assert save_failures(df, CASES, target) == 1  # only the "valid" case has a failing cell
    saved = entries(target)
    assert saved[0]["case"]["padding"] == "valid"
    assert saved[0]["expect"]["vulkan"] == "CONTRACT_VIOLATION"
    assert saved[0]["expect"]["xnnpack"] == "PASS"
    assert save_failures(df, CASES, target) == 0  # idempotent


def test_repro_of_a_quantized_vulkan_cell(tmp_path):
    case = ConvCase(dim=2, in_channels=8, out_channels=8, kernel_size=3, padding="valid",
                    input_shape=(1, 8, 12, 12), quant="int8_per_channel")
    path = tmp_path / "q.py"
    path.write_text(repro.script(case, "vulkan", "", "CONTRACT_VIOLATION"))
    assert run_script(path) == [
        "STATUS: CONTRACT_VIOLATION (et_vk.q8ta_conv2d.default padding IntList [0] has length 1)"]


@pytest.fixture
def release_runs(run_dir, tmp_path):
    """The same run as if made on three releases: a cell fixed in the second, another
    regressed in the third (statuses edited; everything else is the real run)."""
    dirs = []
    for i, release in enumerate(("1.3.1", "1.4.1", "1.5.1")):
        d = tmp_path / release
        shutil.copytree(run_dir, d)
        header = json.loads((d / "run.json").read_text())
        header["versions"] = {**header["versions"], "executorch": release}
        (d / "run.json").write_text(json.dumps(header))
        df = matrix.read(d)
        if i == 0:  # the XNNPACK cell of the "valid" case fails on the oldest release
            hit = (df.case_id == CASES[0].case_id) & (df.backend == "xnnpack")
            df.loc[hit, ["status", "message"]] = ["NOT_DELEGATED", "outside the delegate: x"]
        if i == 2:
            hit = (df.case_id == CASES[1].case_id) & (df.backend == "xnnpack")
            df.loc[hit, ["status", "message"]] = ["MISMATCH", "max|d| 0.5"]
        matrix.write(df, d)
        dirs.append(d)
    return dirs


def test_releases_view_counts_and_transitions(release_runs, tmp_path):
    out = tmp_path / "view"
    proc = harness("diff", *release_runs, "--out", out)
    assert proc.returncode == 1, proc.stderr  # a regression between consecutive releases
    assert "executorch 1.3.1 -> executorch 1.4.1: regressed 0, fixed 1" in proc.stdout
    assert "executorch 1.4.1 -> executorch 1.5.1: regressed 1, fixed 0" in proc.stdout
    data = json.loads((out / "releases.json").read_text())
    assert data["releases"] == ["executorch 1.3.1", "executorch 1.4.1", "executorch 1.5.1"]
    assert data["counts"]["xnnpack"]["executorch 1.3.1"] == "NOT_DELEGATED 1, PASS 1"
    fixed = [t for t in data["transitions"] if t["change"] == "fixed"]
    assert len(fixed) == 1 and fixed[0]["message_old"] == "outside the delegate: x"
    bad = harness("diff", release_runs[0], release_runs[1], tmp_path / "absent", "--out", out)
    assert bad.returncode == 2 and "cannot read matrix" in bad.stderr


@pytest.mark.browser
def test_releases_page_renders_in_chromium(release_runs, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    out = tmp_path / "view"
    assert harness("diff", *release_runs, "--out", out).returncode == 1
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto((out / "releases.html").as_uri())
        header = page.locator("#counts tr").first.inner_text()
        assert "executorch 1.3.1" in header and "executorch 1.5.1" in header
        assert page.locator("#counts tr.lane").count() == 3  # xnnpack, vulkan, vulkan+fix
        assert page.locator("#moves tr.move").count() == 2
        page.select_option("#f-change", "regressed")
        visible = page.locator("#moves tr.move:visible")
        assert visible.count() == 1 and "max|d| 0.5" in visible.first.inner_text()
        shot = tmp_path / "releases.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
        browser.close()


def test_a_cell_executed_on_one_side_only_is_neither_fixed_nor_regressed():
    import pandas as pd

    from harness.results.diff import diff

    def frame(*statuses):
        return pd.DataFrame([{"case_id": f"c{i}", "backend": "vulkan", "fixes": "", "status": s,
                              "message": ""} for i, s in enumerate(statuses)])

    old = frame("NO_RUNTIME", "CONTRACT_VIOLATION", "LOWER_ERROR", "PASS", "CONTRACT_VIOLATION")
    new = frame("PASS", "RUNTIME_ERROR", "PASS", "NO_RUNTIME", "LOWER_ERROR")
    got = dict(zip(diff(old, new)["case_id"], diff(old, new)["change"], strict=True))
    assert got == {"c0": "unexecuted", "c1": "unexecuted", "c2": "fixed", "c3": "unexecuted",
                   "c4": "changed"}


# --- MISMATCH findings with their pictures (a real Vulkan run: two wrong-value bugs) ------------

DW_EDGE = ConvCase(dim=2, in_channels=4, out_channels=4, groups=4, kernel_size=7, padding=3,
                   input_shape=(1, 4, 8, 8))
GROUPED = ConvCase(dim=2, in_channels=8, out_channels=4, groups=2, kernel_size=3, padding=1,
                   input_shape=(1, 8, 8, 8))


@pytest.fixture(scope="module")
def mismatch_run(tmp_path_factory, vulkan_runtime):
    out = tmp_path_factory.mktemp("mismatch") / "run"
    config = runner.RunConfig(backends=["vulkan"], fixes=[], profile="ci", max_examples=0, seed=0,
                              jobs=2, cache_dir=None, vulkan_runtime=vulkan_runtime.library)
    runner.start(out, config, [DW_EDGE, GROUPED])
    runner.execute(out, config, [DW_EDGE, GROUPED], progress=False)
    made = harness("report", out)
    assert made.returncode == 0, made.stderr
    return out


def test_mismatch_findings_have_their_pattern_and_picture_wherever_the_folder_is(mismatch_run,
                                                                                 tmp_path):
    found = json.loads((mismatch_run / "findings.json").read_text())["findings"]
    where = {f["example"]["case_id"]: f for f in found}
    assert set(where) == {DW_EDGE.case_id, GROUPED.case_id}  # two bugs, two findings
    assert where[DW_EDGE.case_id]["error_pattern"] == "right edge 3 cols · all channels · all batches"
    assert where[GROUPED.case_id]["error_pattern"] == \
        "channels of group >= 1 · everything spatial · all batches"
    df = matrix.read(mismatch_run)
    assert set(df["error_pattern"]) == {f["error_pattern"] for f in found}
    md = (mismatch_run / "findings.md").read_text()
    for f in found:
        assert f["picture"] == f"pictures/{f['id']}.png"
        assert (mismatch_run / f["picture"]).stat().st_size > 1000
        assert f"![{f['id']}]({f['picture']})" in md
    html = (mismatch_run / "report.html").read_text()
    assert html.count('<img class="error-picture"') == 2 and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html  # still self-contained
    # a copy of the folder (a CI artifact) draws the same pictures from its own evidence/
    copy = tmp_path / "copy"
    shutil.copytree(mismatch_run, copy)
    shutil.rmtree(copy / "pictures")
    (copy / "report.html").unlink()
    shutil.move(str(mismatch_run), str(tmp_path / "moved"))  # the original is gone
    try:
        assert harness("report", copy).returncode == 0
        assert (copy / "report.html").read_text().count('<img class="error-picture"') == 2
        assert sorted(p.name for p in (copy / "pictures").iterdir()) == sorted(
            f"{f['id']}.png" for f in found)
    finally:
        shutil.move(str(tmp_path / "moved"), str(mismatch_run))


@pytest.mark.browser
def test_findings_section_shows_the_pictures_in_chromium(mismatch_run, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    with sync_api.sync_playwright() as p:
        browser = launch(p, chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto((mismatch_run / "report.html").as_uri())
        rows = page.locator("#findings tr.finding")
        assert rows.count() == 2
        assert all("known, not reported upstream" in t for t in rows.all_inner_texts())
        pictures = page.locator("#findings img.error-picture")
        assert pictures.count() == 2
        for i in range(2):
            img = pictures.nth(i)
            assert img.is_visible()
            # decoded by the browser: a real PNG of a real size, not a broken image
            assert img.evaluate("e => e.complete && e.naturalWidth") > 300
        wheres = page.locator("#findings tr.finding-where").all_inner_texts()
        assert any("right edge 3 cols" in t for t in wheres)
        assert any("channels of group >= 1" in t for t in wheres)
        # a finding's row still lists its cells
        rows.first.click()
        assert page.locator("#cells tr.cellrow:visible").count() == 1
        shot = tmp_path / "findings.png"
        page.locator("#findings").screenshot(path=str(shot))  # kept out of git (tmp)
        assert shot.stat().st_size > 20_000  # the pictures are in it, not an empty table
        browser.close()


# --- issue 40: a real run (every fix, against the nightly baseline) read as a reviewer reads it

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "docs" / "screenshots"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, vulkan_runtime):
    """``harness run`` as README's command 1 runs it (smaller), on a 100-column console, from a
    deep directory: the run folder and the baseline lie at a path longer than the console (a
    clone at a longer path), outside the working directory, so no line may rest on short paths."""
    top = tmp_path_factory.mktemp("real")
    deep = top / ("a-clone-at-a-longer-path-" * 5) / "convconf"
    deep.mkdir(parents=True)
    baseline = deep / "cases" / "expectations" / "nightly.json"
    baseline.parent.mkdir(parents=True)
    shutil.copy(ROOT / "cases" / "expectations" / "nightly.json", baseline)
    assert len(str(baseline)) > 100
    out = deep / "runs" / "run"
    cwd = top / "elsewhere"
    cwd.mkdir()
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--out", str(out), "--max-examples", "6",
         "--seed", "0", "--fixes", "all", "--no-progress", "--vulkan-runtime",
         vulkan_runtime.library, "--baseline", str(baseline)],
        capture_output=True, text=True, timeout=1200, env=env, cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: a finding the baseline lacks
    return out, proc.stdout


def test_every_line_the_run_prints_fits_100_columns(real_run):
    out, stdout = real_run
    lines = stdout.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    # the short table per lane, the findings' titles, the legend of the short names
    assert any(line.startswith("vulkan+fixes ") for line in lines)
    found = json.loads((out / "findings.json").read_text())["findings"]
    assert all(any(f["id"] in line for line in lines) for f in found)
    assert any(line.startswith("lane vulkan+fixes = ") for line in lines)


@pytest.mark.browser
def test_the_report_at_1280_px_has_a_summary_that_matches_the_matrix(real_run, chromium):
    import pandas as pd

    from harness.results import lanes
    from harness.status import Status

    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]'")
    out, _ = real_run
    df = pd.read_csv(out / "matrix.csv", keep_default_na=False)
    want = {}
    for (backend, fixes), sub in df.groupby(["backend", "fixes"]):
        counts = sub["status"].value_counts()
        want[lanes.short(backend, fixes)] = {"cells": len(sub), **{s: int(n) for s, n in counts.items()}}
    html = (out / "report.html").read_text()
    assert str(Path.home()) + "/" not in html  # paths: relative to the run folder or ~
    with sync_api.sync_playwright() as p:
        browser = launch(p, chromium)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto((out / "report.html").as_uri())
        # nothing scrolls sideways
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # the summary comes first, then findings, matrix, coverage, cells
        order = page.evaluate("""['summary-title', 'findings-title', 'matrix-title', 'coverage-title',
            'cells-title'].map(id => document.getElementById(id).getBoundingClientRect().top)""")
        assert order == sorted(order)
        got = page.evaluate("""Array.from(document.querySelectorAll('#summary tr.lane')).map(tr =>
            [tr.dataset.lane, Object.fromEntries(Array.from(tr.querySelectorAll('td[data-status]'))
              .map(td => [td.dataset.status, Number(td.textContent)]))])""")
        assert {lane for lane, _ in got} == set(want) and "vulkan+fixes" in want
        for lane, numbers in got:
            for status, n in numbers.items():
                if status in ("new", "known"):
                    continue
                assert n == want[lane].get(status, 0), (lane, status, n, want[lane])
            assert numbers["new"] + numbers["known"] == sum(
                n for s, n in want[lane].items() if s != "cells" and Status(s).is_finding)
        largest = page.locator("#largest tr.largest")
        assert 1 <= largest.count() <= 5
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for name in ("summary", "findings", "matrix"):
            box = page.locator(f"#{name}-section").bounding_box()
            assert box["x"] + box["width"] <= 1280
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True, clip={
                "x": 0, "y": box["y"] - 8, "width": 1280, "height": min(box["height"] + 16, 1400)})
            assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000
        browser.close()


def launch(playwright, chromium):
    """Debian's chromium, headless, with nothing reaching out of this closed network."""
    return playwright.chromium.launch(executable_path=chromium, args=[
        "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"])
