"""The GitHub Actions workflows (.github/workflows): actionlint finds nothing in them, and every
`python -m harness ...` they run names a subcommand and options the installed CLI really has (read
from its own --help in a subprocess), so a CLI change that breaks a workflow fails here, not at
night. actionlint comes with the test extra: when it is missing these tests fail, they never skip.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ")", "(", ">", ">>", "2>", "<"}


def _actionlint() -> str:
    # pip puts the binary beside the interpreter; PATH may not name that folder (a venv that is
    # not activated), so look there first.
    beside = Path(sys.executable).parent / "actionlint"
    exe = str(beside) if beside.is_file() else shutil.which("actionlint")
    assert exe, ("actionlint is not installed: it comes with the test extra "
                 "(pip install -e '.[test]'); these tests fail without it, they do not skip")
    return exe


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path.name}: not a mapping"
    if True in doc:  # YAML 1.1 reads the key `on` as the boolean true
        doc["on"] = doc.pop(True)
    return doc


def _workflow(name: str) -> dict:
    path = WORKFLOWS / name
    assert path.is_file(), f"{path} is missing"
    return _load(path)


def _steps():
    """(file name, job id, job, step) for every step of every workflow."""
    for path in FILES:
        for job_id, job in _load(path)["jobs"].items():
            for step in job.get("steps", []):
                yield path.name, job_id, job, step


def _scripts():
    for name, job_id, _job, step in _steps():
        if "run" in step:
            yield name, job_id, step["run"]


def _harness_commands(script: str):
    """Token lists after `python -m harness` in a shell script: continuation lines joined,
    comments dropped, cut at the first shell operator."""
    script = re.sub(r"\\\n\s*", " ", script)
    for line in script.splitlines():
        if line.lstrip().startswith("#") or "python -m harness" not in line:
            continue
        for part in line.split("python -m harness")[1:]:
            tokens = []
            for tok in shlex.split(part, comments=True):
                if tok in SHELL_OPERATORS or tok.endswith(";"):
                    break
                tokens.append(tok)
            yield tokens


@cache
def _help(*path: str) -> str:
    done = subprocess.run([sys.executable, "-m", "harness", *path, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (f"python -m harness {' '.join(path)} --help: exit "
                                  f"{done.returncode}\n{done.stdout}{done.stderr}")
    return done.stdout


def _choices(help_text: str) -> set[str]:
    """The choices of the first positional a --help lists ({a,b,c}: subcommands, or a
    positional's choices); empty when none."""
    section = help_text.split("positional arguments:", 1)[-1] if "positional arguments:" in \
        help_text else ""
    found = re.search(r"^\s+\{([\w,-]+)\}", section, re.M)
    return set(found.group(1).split(",")) if found else set()


def test_the_three_workflows_are_there():
    names = {p.name for p in FILES}
    assert {"ci.yml", "nightly.yml", "releases.yml"} <= names, names
    assert "bisect.yml" not in names  # the release sweep is not the commit bisect


def test_actionlint_finds_nothing_in_any_workflow():
    exe = _actionlint()
    done = subprocess.run([exe, "-no-color", *map(str, FILES)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    said = (done.stdout + done.stderr).strip()
    assert done.returncode == 0 and said == "", f"actionlint exit {done.returncode}:\n{said}"


def test_actionlint_is_the_real_checker(tmp_path):
    # A clean pass above means something only if the same binary rejects a broken workflow.
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: no-such-job\n"
                   "    steps:\n      - run: echo ${{ no_such_context.x }}\n")
    done = subprocess.run([_actionlint(), "-no-color", str(bad)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 1, f"exit {done.returncode}: {said}"
    assert "no-such-job" in said and "no_such_context" in said, said


def test_every_harness_command_in_the_workflows_exists_in_the_cli():
    subcommands = _choices(_help())
    assert {"run", "merge"} <= subcommands, f"`python -m harness --help` lists {subcommands}"
    seen = set()
    for name, job_id, script in _scripts():
        for tokens in _harness_commands(script):
            where = f"{name} job {job_id}: python -m harness {' '.join(tokens)}"
            if tokens and tokens[0] in ("-h", "--help"):  # the install steps' smoke check
                continue
            assert tokens and tokens[0] in subcommands, (
                f"{where}: no such subcommand (the CLI has {sorted(subcommands)})")
            path = [tokens[0]]
            # descend into nested subcommands (`runtime build`), not into a positional's choices
            # (`vulkan` of `runtime build vulkan`: its --help is its parent's)
            while (choices := _choices(_help(*path))) and \
                    _help(*path, min(choices)) != _help(*path):
                nested = tokens[len(path)] if len(tokens) > len(path) else None
                assert nested in choices, (f"{where}: `harness {' '.join(path)}` has no "
                                           f"subcommand {nested!r} (it has {sorted(choices)})")
                path.append(nested)
            text = _help(*path)
            # a positional with choices right after the subcommand (`runtime build vulkan`)
            choices = _choices(text)
            if choices and len(tokens) > len(path) and not tokens[len(path)].startswith("-"):
                assert tokens[len(path)] in choices, (
                    f"{where}: `harness {' '.join(path)}` takes one of {sorted(choices)}")
            for i, tok in enumerate(tokens):
                if tok.startswith("--"):
                    flag = tok.split("=", 1)[0]
                    assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), (
                        f"{where}: `harness {' '.join(path)}` has no option {flag}")
                    if flag in ("--baseline", "--cases") and i + 1 < len(tokens) \
                            and "$" not in tokens[i + 1]:
                        assert (ROOT / tokens[i + 1]).exists(), f"{where}: {tokens[i + 1]} is missing"
            seen.add(" ".join(path))
    # what the nightly is for: shards, their merge, the GPU lane (bundle, ingest), the plug-in
    assert {"run", "merge", "bundle", "ingest", "runtime build", "diff"} <= seen, seen


def test_ci_runs_the_projects_entry_point():
    ci = _workflow("ci.yml")
    assert "pull_request" in ci["on"]
    assert "main" in ci["on"]["push"]["branches"]
    assert (ROOT / ".ci" / "run").is_file()
    runs = [step["run"].strip() for job in ci["jobs"].values() for step in job["steps"]
            if "run" in step]
    assert "bash .ci/run" in runs, runs
    for job_id, job in ci["jobs"].items():
        assert job["container"] == "python:3.11-bookworm", job_id


def test_releases_runs_the_nox_session_with_the_releases_from_the_environment():
    wf = _workflow("releases.yml")
    releases = wf["on"]["workflow_dispatch"]["inputs"]["releases"]
    assert releases["default"] == "1.5.1 1.4.1 1.3.1"
    (job,) = wf["jobs"].values()
    assert job["env"]["RELEASES"] == "${{ inputs.releases }}"
    assert any('nox -s releases -- "${releases[@]}"' in step.get("run", "")
               for step in job["steps"])
    done = subprocess.run([sys.executable, "-m", "nox", "--list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\W*releases\b", done.stdout, re.M), done.stdout
    # the release sweep and the commit bisect have different names (issue 38)
    assert not re.search(r"^\W*bisect\b", done.stdout, re.M), done.stdout


def test_no_input_or_event_text_is_interpolated_into_a_script():
    # script injection: such values reach run: scripts only through env
    scripts = list(_scripts())
    assert scripts, "no run: script found in the workflows"
    for name, job_id, script in scripts:
        assert not re.search(r"\$\{\{\s*(inputs\.|github\.event\.|github\.head_ref)", script), (
            f"{name} job {job_id}: interpolates an input into a run script; pass it via env")


def test_least_privilege_concurrency_and_timeouts():
    assert FILES, "no workflow files"
    for path in FILES:
        wf = _load(path)
        assert wf["permissions"] == {"contents": "read"}, path.name
        assert wf["concurrency"]["group"], path.name
        for job_id, job in wf["jobs"].items():
            minutes = job.get("timeout-minutes")
            assert isinstance(minutes, int) and 0 < minutes <= 360, f"{path.name} {job_id}"
            publishes = any("action-junit-report" in step.get("uses", "")
                            for step in job.get("steps", []))
            writes_checks = (job.get("permissions") or {}).get("checks") == "write"
            assert publishes == writes_checks, f"{path.name} {job_id}: checks: write iff JUnit"


def test_nightly_shards_merge_and_an_opt_in_gpu_lane():
    jobs = _workflow("nightly.yml")["jobs"]
    assert jobs["shard"]["strategy"]["matrix"]["shard"] == \
        "${{ fromJSON(needs.setup.outputs.shard_list) }}"
    assert "always()" in jobs["merge"]["if"] or "!cancelled()" in jobs["merge"]["if"]
    download = next(s for s in jobs["merge"]["steps"]
                    if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "run-shard-*"
    assert download["with"]["merge-multiple"] is False
    self_hosted = [j for j, job in jobs.items() if "self-hosted" in job["runs-on"]]
    assert self_hosted == ["gpu"], self_hosted
    for job_id in ("gpu-bundle", "gpu", "gpu-ingest"):
        assert "vars.CONVCONF_GPU_RUNNER == 'true'" in jobs[job_id]["if"], job_id


def _collected(*args: str) -> list[str]:
    said = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                           "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CONVCONF_CORPUS": "nightly"})
    assert said.returncode == 0, said.stdout[-2000:] + said.stderr[-2000:]
    return [line for line in said.stdout.splitlines() if "::" in line]


def test_the_nightly_tests_job_runs_every_test_once_in_groups_of_pytest_split():
    job = _workflow("nightly.yml")["jobs"]["tests"]
    assert job["strategy"]["matrix"]["group"] == "${{ fromJSON(needs.setup.outputs.group_list) }}"
    run = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'nox -s nightly_tests -- "nightly-junit-$GROUP.xml" --splits "$TEST_GROUPS" --group ' \
           '"$GROUP"' in run
    durations = json.loads((ROOT / ".test_durations").read_text())
    assert durations and all(v >= 0 for v in durations.values())
    whole = _collected()
    groups = [_collected("--splits", "3", "--group", str(k)) for k in (1, 2, 3)]
    assert all(groups), [len(g) for g in groups]
    together = [t for g in groups for t in g]
    assert sorted(together) == sorted(whole)  # every test once: none lost, none run twice


def test_one_seed_per_night_reaches_every_shard_and_the_state_travels_between_jobs():
    # Issue 46: the setup job draws the night's seed once (the run id, or the seed input to
    # replay a night); every shard runs with that one seed, and the state of earlier nights
    # (coverage state + regression corpus) goes setup -> shards and merge as an artifact; the
    # merge job carries the night over (harness learn) and publishes it, never commits.
    wf = _workflow("nightly.yml")
    jobs = wf["jobs"]
    assert "seed" in wf["on"]["workflow_dispatch"]["inputs"]
    assert jobs["setup"]["outputs"]["seed"] == "${{ steps.args.outputs.seed }}"
    args = next(s for s in jobs["setup"]["steps"] if s.get("id") == "args")
    assert args["env"]["SEED"] == "${{ inputs.seed || github.run_id }}"
    assert 'echo "seed=$SEED"' in args["run"]
    assert jobs["shard"]["env"]["SEED"] == "${{ needs.setup.outputs.seed }}"
    shard_runs = [t for s in jobs["shard"]["steps"] if "run" in s
                  for t in _harness_commands(s["run"]) if t and t[0] == "run"]
    assert len(shard_runs) == 1
    run = shard_runs[0]
    assert run[run.index("--seed") + 1] == "$SEED" and "--profile" in run
    assert run[run.index("--coverage-state") + 1] == "nightly-state/coverage.json"
    assert run[run.index("--regression-corpus") + 1] == "nightly-state/corpus.json"

    def uses(job, action):
        return [s for s in jobs[job]["steps"] if s.get("uses", "").startswith(action)]

    up = [s for s in uses("setup", "actions/upload-artifact") if s["with"]["name"] ==
          "nightly-state-in"]
    assert up and up[0]["with"]["path"] == "nightly-state"
    assert uses("setup", "actions/cache/restore")[0]["with"]["path"] == "nightly-state"
    for job in ("shard", "merge"):
        got = [s for s in uses(job, "actions/download-artifact")
               if s["with"].get("name") == "nightly-state-in"]
        assert got and got[0]["with"]["path"] == "nightly-state", job
    merge_cmds = [t for s in jobs["merge"]["steps"] if "run" in s
                  for t in _harness_commands(s["run"])]
    learn = next(t for t in merge_cmds if t[0] == "learn")
    assert learn[1] == "run" and "--coverage-state" in learn and "--regression-corpus" in learn
    assert ["expect", "run", "--out", "nightly-learned/nightly.json"] in merge_cmds
    saved = [s for s in uses("merge", "actions/cache/save")
             if s["with"]["path"] == "nightly-state"]
    assert len(saved) == 1
    assert saved[0]["with"]["key"].startswith(
        "convconf-nightly-state-et-${{ needs.setup.outputs.executorch }}-")
    assert any(s["with"]["name"] == "nightly-learned" for s in uses("merge",
                                                                    "actions/upload-artifact"))
    assert wf["permissions"] == {"contents": "read"}  # the nightly never writes the repository


def test_the_scheduled_night_follows_executorch_main_and_can_judge_every_lane_there():
    """The nightly's default is ExecuTorch main (issue 50; a release night is a dispatch input):
    the shards' checkout of main carries its history and tags (blobless), so the wheel's own
    commit is there to tell whether main's XNNPACK / kernel code equals the wheel's (else every
    such cell is NO_RUNTIME); the merge job outlives the bisect it runs, with the shards'
    plug-ins and a Vulkan device for the steps."""
    wf = _workflow("nightly.yml")
    assert wf["on"]["workflow_dispatch"]["inputs"]["executorch"]["default"] == "main"
    setup = wf["jobs"]["setup"]
    args = next(s for s in setup["steps"] if s.get("id") == "args")
    assert args["env"]["EXECUTORCH"] == "${{ inputs.executorch || 'main' }}"
    main = next(s for s in wf["jobs"]["shard"]["steps"] if s.get("name") == "ExecuTorch main")
    assert main["with"]["fetch-depth"] == 0 and main["with"]["filter"] == "blob:none"
    merge = wf["jobs"]["merge"]
    bisect = next(s["run"] for s in merge["steps"] if "bisect --run-diff" in s.get("run", ""))
    minutes = int(re.search(r"timeout (\d+)m python -m harness bisect", bisect).group(1))
    assert merge["timeout-minutes"] >= minutes + 30, (merge["timeout-minutes"], minutes)
    names = [s.get("name", "") for s in merge["steps"]]
    steps = {s.get("name", ""): s for s in merge["steps"]}
    flips = names.index("Flips since the last main night, each bisected to its commit")
    for needed in ("The shards' Vulkan plug-ins and build tree (main night)",
                   "Vulkan device packages (main night)"):
        assert names.index(needed) < flips, needed
        assert steps[needed]["if"] == "${{ env.EXECUTORCH == 'main' }}"
