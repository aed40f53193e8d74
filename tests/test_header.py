"""The run header: one typed record (harness/header.py), one reader and one writer of run.json,
a schema version, old folders still readable, a newer or malformed one refused in one line."""

import json

import pytest

from harness.cli import main
from harness.header import SCHEMA_VERSION, RunHeader
from harness.runfolder import RunFolder, RunFolderError

# A run.json as convconf wrote it before the header had a schema version (flat, every key).
LEGACY = {"run_id": "0123456789abcdef", "versions": {"executorch": "1.5.1", "torch": "2.13.0"},
          "registered_backends": ["XnnpackBackend"], "fixes_unavailable": {}, "python": "3.11.9",
          "started": "2026-08-01 10:00:00", "argv": ["run", "--out", "r"], "cases": 3,
          "backends": ["xnnpack"], "fixes": [], "profile": "quick", "max_examples": 3, "seed": 0,
          "case_files": [], "timeout": 300.0, "jobs": 2, "cache_dir": None,
          "vulkan_runtime": None, "shard": None, "lane_names": [], "fixes_each": False,
          "vulkan_patched": {}, "duration_s": 12.5, "cells": 3}


def _folder(tmp_path, header: dict) -> RunFolder:
    (tmp_path / "run.json").write_text(json.dumps(header))
    return RunFolder(tmp_path)


def test_a_folder_without_a_schema_version_reads_as_version_1(tmp_path):
    h = _folder(tmp_path, LEGACY).header()
    assert isinstance(h, RunHeader) and h.schema_version == 1 == SCHEMA_VERSION
    assert (h.run_id, h.seed, h.executorch, h.duration_s, h.vulkan) == \
        ("0123456789abcdef", 0, "1.5.1", 12.5, None)


def test_written_and_read_back_the_same_and_the_json_stays_flat(tmp_path):
    folder = _folder(tmp_path, LEGACY)
    h = folder.header()
    folder.write_header(h)
    on_disk = json.loads(folder.header_path.read_text())
    assert on_disk == {**LEGACY, "schema_version": SCHEMA_VERSION, "devices": {},
                       "merged_from": None, "shards": None, "vulkan": None,
                       "executorch_tree": None}
    assert folder.header() == h


def test_unknown_keys_are_kept_and_written_back(tmp_path):
    folder = _folder(tmp_path, {**LEGACY, "something_new": {"a": 1}})
    h = folder.update_header(duration_s=1.0, another=2)
    assert h.extra == {"something_new": {"a": 1}, "another": 2} and h.duration_s == 1.0
    on_disk = json.loads(folder.header_path.read_text())
    assert on_disk["something_new"] == {"a": 1} and on_disk["another"] == 2


def test_a_newer_schema_version_is_one_line_naming_the_file(tmp_path):
    folder = _folder(tmp_path, {**LEGACY, "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(RunFolderError) as e:
        folder.header()
    said = str(e.value)
    assert "\n" not in said and "run.json" in said and f"schema_version {SCHEMA_VERSION + 1}" in said
    with pytest.raises(RunFolderError):  # outputs that can do without a header still refuse it
        folder.header_or_empty()


@pytest.mark.parametrize("bad", [{"seed": "zero"}, {"backends": "xnnpack"}, {"schema_version": "1"},
                                 {"schema_version": 0}])
def test_fields_that_do_not_fit_are_refused(tmp_path, bad):
    with pytest.raises(RunFolderError, match=f"run.json: .*{next(iter(bad))}"):
        _folder(tmp_path, {**LEGACY, **bad}).header()


def test_not_an_object(tmp_path):
    (tmp_path / "run.json").write_text("[1, 2]")
    with pytest.raises(RunFolderError, match="not a run header"):
        RunFolder(tmp_path).header()


def test_no_header_is_an_empty_one_for_outputs_and_an_error_for_readers(tmp_path):
    assert RunFolder(tmp_path).header_or_empty() == RunHeader()
    with pytest.raises(RunFolderError, match="no run.json"):
        RunFolder(tmp_path).header()


def test_a_legacy_run_id_is_its_start_and_argv(tmp_path):
    legacy = {k: v for k, v in LEGACY.items() if k != "run_id"}
    assert _folder(tmp_path, legacy).run_id == "legacy-2026-08-01 10:00:00-['run', '--out', 'r']"


def test_write_assigns_a_run_id_and_takes_a_dict(tmp_path):
    h = RunFolder(tmp_path).write_header({"vulkan_runtime": "/stock.so"})
    assert h.run_id and RunFolder(tmp_path).header().vulkan_runtime == "/stock.so"


def test_the_cli_turns_a_too_new_header_into_exit_2(tmp_path, capsys):
    (tmp_path / "cases.json").write_text("[]")
    _folder(tmp_path, {**LEGACY, "schema_version": 99})
    assert main(["run", "--resume", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("convconf: error:") and "schema_version 99" in err and "\n" not in err
