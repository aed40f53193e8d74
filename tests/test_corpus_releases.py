"""Per-release corpus expectations: the same case file states what each executorch release does,
and `harness corpus RUN_DIR` checks a finished run against its own release's expectations."""

import json

import pytest

from harness import versions
from harness.results.corpus import expectations
from harness.spec import ConvCase
from test_cli import harness, one_error_line

CASE = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=4, padding="same",
                input_shape=(1, 2, 9))
HERE = versions.stack()["executorch"]


def test_a_release_overrides_only_the_lanes_it_names():
    entry = {"case": CASE.to_dict(),
             "expect": {"xnnpack": "PASS", "xnnpack+xnnpack-conv1d-same-even": "PASS",
                        "vulkan": "CRASH"},
             "expect_by_release": {"1.3.1": {"xnnpack": "NOT_DELEGATED", "vulkan": None}}}
    assert expectations(entry, "1.3.1") == {"xnnpack": "NOT_DELEGATED",
                                            "xnnpack+xnnpack-conv1d-same-even": "PASS"}
    assert expectations(entry, "1.5.1") == entry["expect"]
    assert expectations({"case": CASE.to_dict()}, "1.5.1") == {}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    cases = tmp / "cases.json"
    cases.write_text(json.dumps([CASE.to_dict()]))
    out = tmp / "run"
    # the same file twice (corpus files overlap): one case, its cells once
    proc = harness("run", "--out", out, "--cases", cases, cases, "--max-examples", 0,
                   "--no-cache", "--backends", "xnnpack", "--fixes", "xnnpack-conv1d-same-even",
                   "--no-progress",
                   "-j", 1)
    assert proc.returncode == 0, proc.stderr
    assert "2 cells ->" in proc.stdout
    return out


def corpus_file(path, by_release):
    path.write_text(json.dumps([{
        "case": CASE.to_dict(), "expect": {"xnnpack": "PASS", "xnnpack+xnnpack-conv1d-same-even": "PASS"},
        "expect_by_release": by_release}]))
    return path


@pytest.mark.slow
def test_a_run_is_checked_against_its_own_release(run_dir, tmp_path):
    other = corpus_file(tmp_path / "other.json", {"0.0.1": {"xnnpack": "LOWER_ERROR"}})
    proc = harness("corpus", run_dir, "--cases", other)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"corpus on executorch {HERE}: 2 cells as expected, 0 moved" in proc.stdout

    this = corpus_file(tmp_path / "this.json", {HERE: {"xnnpack": "NOT_DELEGATED"}})
    proc = harness("corpus", run_dir, "--cases", this)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 cells as expected, 1 moved" in proc.stdout
    assert (f"this.json: {CASE.case_id} xnnpack: expected NOT_DELEGATED on executorch {HERE}, "
            "got PASS") in proc.stdout

    bad = corpus_file(tmp_path / "bad.json", {HERE: {"xnnpack": "FINE"}})
    line = one_error_line(harness("corpus", run_dir, "--cases", bad))
    assert "bad.json: entry #0" in line and "unknown status 'FINE'" in line
    line = one_error_line(harness("corpus", tmp_path / "nothing"))
    assert "nothing" in line
