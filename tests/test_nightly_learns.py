"""Issue 46: the nightly learns every night. A seed per night (recorded in run.json), the coverage
state carried between nights (harness/nights.py: read, merge, write; a file that is not one is one
line and a first night), steering toward what no earlier night reached, and (slow) two tiny
nights run one after the other on one state file and one regression corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from harness import nights
from harness.generation import steering
from harness.generation.strategies import conv_cases
from harness.record import CellResult
from harness.runfolder import RunFolder
from harness.spec import ConvCase

ROOT = Path(__file__).resolve().parents[1]


def _harness(*args, cwd, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


# --- the seed of a night ------------------------------------------------------------------------
def test_a_night_draws_its_seed_from_the_run_id_else_the_date():
    assert nights.night_seed({"GITHUB_RUN_ID": "9876543210"}) == (9876543210,
                                                                  "$GITHUB_RUN_ID 9876543210")
    seed, origin = nights.night_seed({}, date(2026, 12, 7))
    assert (seed, origin) == (20261207, "the date 2026-12-07 (UTC)")
    # a run id that is not a number is not a seed: the date is
    assert nights.night_seed({"GITHUB_RUN_ID": "abc"}, date(2026, 1, 2))[0] == 20260102


def test_only_the_nightly_profile_without_a_seed_draws_one():
    env = {"GITHUB_RUN_ID": "4242"}
    assert nights.run_seed(None, "nightly", env) == (4242, "$GITHUB_RUN_ID 4242")
    assert nights.run_seed(None, "ci", env) == (0, "the default")  # README command 1: seed 0
    assert nights.run_seed(7, "nightly", env) == (7, "--seed")     # --seed N reproduces a night
    assert nights.run_seed(0, "nightly", env) == (0, "--seed")


def test_run_leaves_the_seed_to_the_profile_unless_given():
    from harness.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["run", "--out", "x", "--profile", "nightly"]).seed is None  # drawn per night
    assert parse(["run", "--out", "x", "--profile", "nightly", "--seed", "11"]).seed == 11
    assert parse(["run", "--out", "x"]).seed is None  # ci: run_seed makes it 0


def test_a_repro_script_names_the_seed_and_the_command_that_draws_the_run_again():
    from harness.header import RunHeader
    from harness.results import repro

    header = RunHeader(seed=31337, profile="nightly", max_examples=6)
    command = "python -m harness run --profile nightly --seed 31337 --max-examples 6"
    assert repro.found_by(header) == command
    assert repro.found_by(RunHeader()) == ""  # a header without a seed names none
    case = ConvCase(dim=2, in_channels=2, out_channels=2, kernel_size=3, input_shape=(1, 2, 5, 5))
    text = repro.script(case, "xnnpack", "", "MISMATCH", "", None, command)
    assert f"Found by a run of seed 31337: `{command}`" in text
    assert "Found by a run" not in repro.script(case, "xnnpack", "", "MISMATCH")
    compile(text, "repro.py", "exec")


# --- the state ----------------------------------------------------------------------------------
def _cell(case: ConvCase, backend: str, reached: list, status: str = "PASS") -> CellResult:
    return CellResult(case=case, backend=backend, status=status, reached=reached,
                      executorch_version="1.5.1")


@settings(max_examples=20, deadline=None)
@given(st.lists(conv_cases(context=False), min_size=1, max_size=4))
def test_every_case_has_one_case_space_cell_of_ten_fields(cases):
    cells = [nights.space_cell(c) for c in cases]
    assert all(len(cell.split("|")) == 10 for cell in cells)
    assert [nights.space_cell(ConvCase.from_dict(c.to_dict())) for c in cases] == cells


def test_a_missing_state_is_a_first_night_and_a_written_one_reads_back(tmp_path):
    path = tmp_path / "deep" / "state.json"
    empty = nights.read(path, "1.5.1")
    assert (empty.nights, empty.reached, empty.cells) == ([], {}, [])
    a = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, input_shape=(1, 4, 8, 8))
    b = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=2, groups=2, padding="same",
                 input_shape=(1, 2, 9))
    night = nights.Night(seed=1, run_id="r1", started="s", cases=2)
    state, tonight = nights.learn(empty, [_cell(a, "xnnpack", ["XNNConv2d:fp32/fp32:none"]),
                                          _cell(b, "vulkan", ["conv1d_dw"]),
                                          _cell(b, "vulkan", ["conv1d_dw"], "MISMATCH")], night)
    assert tonight.earlier_nights == 0 and tonight.cells_run == 2
    assert tonight.paths == {"vulkan": ["conv1d_dw"], "xnnpack": ["XNNConv2d:fp32/fp32:none"]}
    nights.write(path, state)
    assert not list(path.parent.glob("*.tmp"))  # written atomically
    back = nights.read(path, "1.5.1")
    assert back == state and back.paths == {"vulkan:conv1d_dw", "xnnpack:XNNConv2d:fp32/fp32:none"}


def test_a_second_night_reports_only_what_the_first_did_not_reach():
    a = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, input_shape=(1, 4, 8, 8))
    b = ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, stride=2,
                 input_shape=(1, 4, 8, 8))
    first, _ = nights.learn(nights.NightState(executorch="1.5.1"),
                            [_cell(a, "xnnpack", ["p1"])], nights.Night(seed=1))
    second, tonight = nights.learn(first, [_cell(a, "xnnpack", ["p1"]),
                                           _cell(b, "xnnpack", ["p1", "p2"])],
                                   nights.Night(seed=2))
    assert tonight.earlier_nights == 1
    assert tonight.paths == {"xnnpack": ["p2"]}
    assert tonight.cells == [nights.space_cell(b)] and tonight.cells_run == 2
    assert [n.seed for n in second.nights] == [1, 2]
    again, _ = nights.learn(second, [_cell(b, "xnnpack", ["p2"])], nights.Night(seed=3))
    assert len(again.nights) == 3
    same = nights.Night(seed=9, run_id="r9")
    once, _ = nights.learn(first, [], same)
    assert len(nights.learn(once, [], same)[0].nights) == len(once.nights)  # learnt twice: one
    assert second.reached == {"xnnpack": ["p1", "p2"]}
    # merging is a union, whichever way round
    assert set(first.merged(second).cells) == set(second.merged(first).cells) == set(second.cells)
    assert any("1 path(s) reached for the first time" in line for line in tonight.lines())


@pytest.mark.parametrize("text, why", [
    ("{not json", "not a coverage state"),
    ("[1, 2]", "not a coverage state (a JSON object)"),
    (json.dumps({"schema_version": 99, "reached": {}, "cells": [], "nights": []}),
     "schema_version 99"),
    (json.dumps({"schema_version": 1, "reached": {"xnnpack": "p1"}, "cells": [], "nights": []}),
     "'reached' is not backend"),
    (json.dumps({"schema_version": 1, "executorch": "1.4.1", "reached": {}, "cells": [],
                 "nights": []}), "a coverage state of executorch 1.4.1, this night runs 1.5.1"),
])
def test_a_state_that_is_not_one_is_one_line_and_a_first_night(tmp_path, text, why):
    path = tmp_path / "state.json"
    path.write_text(text)
    with pytest.raises(nights.StateError) as e:
        nights.read(path, "1.5.1")
    assert why in str(e.value) and "\n" not in str(e.value)
    state, problem = nights.read_or_first(path, "1.5.1")
    assert (state.nights, state.cells, state.reached) == ([], [], {})
    assert why in problem and problem.endswith("this night runs as a first night")


def test_learn_refuses_a_folder_that_is_not_a_run_in_one_line(tmp_path):
    state = tmp_path / "state.json"
    done = _harness("learn", tmp_path / "nothing", "--coverage-state", state, cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not state.exists()


# --- steering across nights ---------------------------------------------------------------------
def test_steering_aims_at_paths_no_earlier_night_reached():
    every = sorted(steering.reachable())
    left = [p for p in every if p.startswith("vulkan:")][:1]
    reached: dict = {}
    for p in every:
        if p not in left:
            backend, name = p.split(":", 1)
            reached.setdefault(backend, []).append(name)
    earlier = nights.NightState(reached=reached)
    picked = steering.aim(set(), set(), 3, seed=5, done=earlier.paths)
    assert picked, "no case aimed at the one path no night reached"
    assert set(left) <= set().union(*(steering.buckets(c) for c in picked))
    # every path reached by an earlier night: nothing left to aim at
    assert steering.aim(set(), set(), 3, seed=5, done=set(every)) == []


def test_unexplored_draws_only_case_space_cells_no_night_ran():
    first = steering.unexplored([], set(), set(), 6, seed=3, rounds=2)
    assert len(first) == 6
    ran = {nights.space_cell(c) for c in first}
    assert len(ran) == 6  # one case per cell
    second = steering.unexplored([], ran, set(), 6, seed=3, rounds=2)
    assert second and not ({nights.space_cell(c) for c in second} & ran)


# --- two nights, end to end ---------------------------------------------------------------------
@pytest.mark.slow
def test_two_tiny_nights_share_a_state_and_grow_a_corpus(tmp_path):
    state, corpus = tmp_path / "state.json", tmp_path / "corpus.json"
    # the corpus starts with one shipped case: every night re-runs it first
    shipped = json.loads((ROOT / "cases" / "xnnpack_conv1d_same_even.json").read_text())[0]
    corpus.write_text(json.dumps([shipped]))
    shipped_id = ConvCase.from_dict(shipped["case"]).case_id
    runs = []
    for n, seed in enumerate((101, 202), start=1):
        out = tmp_path / f"night{n}"
        # night 1 draws its seed as the workflow's would ($GITHUB_RUN_ID); night 2 is --seed
        given = ["--seed", seed] if n == 2 else []
        done = _harness("run", "--out", out, "--profile", "nightly", *given,
                        "--max-examples", "3", "--steer", "2", "--backends", "xnnpack", "-j", "1",
                        "--coverage-state", state, "--regression-corpus", corpus,
                        "--no-progress", "--no-report", cwd=tmp_path, timeout=1200,
                        env={"GITHUB_RUN_ID": "101"})
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append((out, done.stdout))
    assert "seed 101 (this night's, from $GITHUB_RUN_ID 101; --seed 101" in runs[0][1]
    assert [json.loads((out / "run.json").read_text())["seed"] for out, _ in runs] == [101, 202]
    carried = nights.read(state)
    assert [n.seed for n in carried.nights] == [101, 202]
    report = _harness("report", runs[1][0], cwd=tmp_path, timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    assert 'id="first-reached"' in (runs[1][0] / "report.html").read_text()
    first = [nights.Tonight.from_dict(json.loads((out / nights.TONIGHT_FILE).read_text()))
             for out, _ in runs]
    assert first[0].earlier_nights == 0 and first[1].earlier_nights == 1
    # night 2 reports as new only what night 1 did not reach
    for backend, names in first[1].paths.items():
        assert not set(names) & set(first[0].paths.get(backend, []))
    assert not set(first[1].cells) & set(first[0].cells)
    assert set(carried.cells) == set(first[0].cells) | set(first[1].cells)
    # the corpus' cases ran first in both nights, and every failing case of a night is in it after
    after = {ConvCase.from_dict(e["case"]).case_id for e in json.loads(corpus.read_text())}
    for out, stdout in runs:
        assert shipped_id in {c.case_id for c in RunFolder(out).cases()}
        assert str(corpus) in json.loads((out / "run.json").read_text())["case_files"]
        assert "reached for the first time" in stdout
        rows = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
        failing = {r["case_id"] for r in rows if r["status"] not in ("PASS", "NO_RUNTIME")}
        assert failing <= after
        assert first[runs.index((out, stdout))].corpus_cases >= 1
