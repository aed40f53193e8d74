"""``harness bisect``: the first ExecuTorch commit at which a cell's outcome changes from what it
is at ``--good`` to what it is at ``--bad``, found by git's own bisection.

1. Both ends are evaluated (``bisect_step``): first at the lowering stage; where the ends differ
   there, every step compares lowering outcomes (nothing executes: the verdicts rest on each
   commit's Python side alone). Otherwise both ends run to the end (execution stage; native side
   checked per step). Same outcome at both ends, or an end that cannot be evaluated: bad input.
2. Direction: the end whose outcome got further (PASS being furthest) is the better one; a
   --bad end better than --good is a fix (git terms broken/fixed), else a regression
   (good/bad).
3. A scratch bare repository borrows the source's objects (``objects/info/alternates``: the
   source is never written to) and ``git bisect start --no-checkout`` + ``git bisect run`` calls
   ``python -m harness bisect-step ... --commit $(git rev-parse BISECT_HEAD)`` (exit 0 / 1 /
   125) at each step.
4. ``OUT/bisect.json`` (ends, direction, every step, the first commit with its PR and files, or
   the range skips leave), ``OUT/steps/*.json`` (the cell's row at each step), ``OUT/bisect.html``
   and ``OUT/git-bisect.log``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.run.bisect_step import DELEGATED, STAGES, Step, classify
from harness.runtimes.git_source import GitError, Repo
from harness.status import Status

# how far a cell got (status.py's order) and the lowering outcomes, worst first (DELEGATED is a
# lowering outcome, not a Status)
ORDER = (Status.CRASH.value, Status.INVALID.value, Status.LOWER_ERROR.value,
         Status.CONTRACT_VIOLATION.value, Status.NO_RUNTIME.value, Status.RUNTIME_ERROR.value,
         Status.NOT_DELEGATED.value, Status.MISMATCH.value, DELEGATED, Status.PASS.value)


class BisectError(Exception):
    """Bad input or an end that cannot be evaluated: one line, exit 2."""


def _rank(outcome: str) -> int:
    return ORDER.index(outcome) if outcome in ORDER else -1


def direction(old: str, new: str) -> str:
    return "fix" if _rank(new) > _rank(old) else "regression"


def terms(direction_: str) -> tuple[str, str]:
    return ("broken", "fixed") if direction_ == "fix" else ("good", "bad")


def evaluate_ends(ev, good: str, bad: str, stage: str | None, log) -> tuple[str, Step, Step]:
    """-> (stage, good end, bad end): the earliest stage at which the ends differ."""
    for st in ([stage] if stage else getattr(ev, "stages", STAGES)):
        ends = []
        for name, commit in (("--good", good), ("--bad", bad)):
            step = ev.evaluate(commit, st)
            log(f"{name} {commit[:12]} [{st}]: "
                f"{step.outcome if step.outcome else 'skip: ' + step.skip_reason} "
                f"({step.seconds:g} s)")
            if step.outcome is None:
                raise BisectError(f"cannot evaluate the {name} end {commit[:12]} at the {st} "
                                  f"stage: {step.skip_reason}")
            ends.append(step)
        if ends[0].outcome != ends[1].outcome:
            return st, ends[0], ends[1]
    raise BisectError(f"both ends give the same outcome ({ends[0].outcome}"
                      f"{' at the ' + stage + ' stage' if stage else ''}): nothing to bisect")


def _scratch_repo(repo: Repo, where: Path) -> Path:
    """A bare repository that reads the source's objects and writes only its own refs."""
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", str(where)], check=True)
    alternates = [str((repo.git_dir / "objects").resolve())]
    theirs = repo.git_dir / "objects" / "info" / "alternates"
    if theirs.exists():  # the source's own alternates, made absolute
        alternates += [str((repo.git_dir / "objects" / ln.strip()).resolve())
                       for ln in theirs.read_text().splitlines() if ln.strip()]
    (where / "objects" / "info" / "alternates").write_text("\n".join(alternates) + "\n")
    return where


def _detach(scratch: Path, commit: str) -> None:
    (scratch / "HEAD").write_text(commit + "\n")  # a bare repo's unborn branch confuses bisect


def _parse_result(text: str, new_term: str) -> tuple[str | None, list[str]]:
    """git bisect run's verdict -> (first commit, []) or (None, the candidates skips leave)."""
    found = re.search(rf"^([0-9a-f]{{40}}) is the first {new_term} commit", text, re.M)
    if found:
        return found.group(1), []
    if "only 'skip'ped commits left" in text:
        return None, re.findall(r"^([0-9a-f]{40})\b", text.split("could be any of:", 1)[-1], re.M)
    return None, []


def run(ev, repo: Repo, good_ref: str, bad_ref: str, out: Path, stage: str | None = None,
        python: str = sys.executable, log=print, step_timeout: float = 1800) -> dict:
    t_all = time.perf_counter()
    good, bad = repo.rev(good_ref), repo.rev(bad_ref)
    if good == bad:
        raise BisectError(f"--good {good_ref} and --bad {bad_ref} are the same commit")
    if repo.is_ancestor(bad, good):
        raise BisectError(f"--bad {bad_ref} is an ancestor of --good {good_ref}: name the "
                          f"older end --good")
    n = repo.count(good, bad)
    out.mkdir(parents=True, exist_ok=True)
    steps_dir = out / "steps"
    shutil.rmtree(steps_dir, ignore_errors=True)
    work = out / ".work"
    work.mkdir(exist_ok=True)
    log(f"bisect: {n} commits in {good[:12]}..{bad[:12]} "
        f"(at most ceil(log2 {n}) + 2 = {math.ceil(math.log2(max(n, 2))) + 2} evaluated steps)")
    chosen, g_end, b_end = evaluate_ends(ev, good, bad, stage, log)
    way = direction(g_end.outcome, b_end.outcome)
    old_term, new_term = terms(way)
    for end, verdict in ((g_end, "old"), (b_end, "new")):
        end.verdict = verdict
    log(f"bisect: {way} ({g_end.outcome} at --good, {b_end.outcome} at --bad), compared at the "
        f"{chosen} stage")

    scratch = _scratch_repo(repo, work / "git")
    step_cmd = [python, "-m", "harness", "bisect-step", *ev.step_argv(), "--source",
                str(repo.path.resolve()), "--stage", chosen, "--old-outcome", g_end.outcome,
                "--new-outcome", b_end.outcome, "--record", str(steps_dir.resolve()),
                "--work", str((work / "step").resolve())]
    script = work / "step.sh"
    script.write_text("#!/bin/sh\n# one bisect step; git bisect run reads its exit code\n"
                      f"exec {shlex.join(step_cmd)} --commit \"$(git rev-parse BISECT_HEAD)\"\n")
    _detach(scratch, good)
    env = dict(os.environ, GIT_DIR=str(scratch))
    env.pop("GIT_WORK_TREE", None)

    def git(*args, **kw):
        return subprocess.run(["git", *args], env=env, capture_output=True, text=True, **kw)

    started = git("bisect", "start", "--no-checkout", f"--term-old={old_term}",
                  f"--term-new={new_term}", bad, good)
    if started.returncode:
        raise BisectError(f"git bisect start failed: {started.stderr.strip()[:300]}")
    said = started.stdout
    try:
        ran = git("bisect", "run", "sh", str(script.resolve()), timeout=step_timeout * (n + 2))
        said += ran.stdout + ran.stderr
        bisect_log = git("bisect", "log").stdout
    finally:
        git("bisect", "reset")
    (out / "git-bisect.log").write_text(said + "\n# git bisect log\n" + bisect_log)
    first, candidates = _parse_result(said, new_term)
    steps = [json.loads(p.read_text()) for p in sorted(steps_dir.glob("*.json"))]
    evaluated = [s for s in steps if s["outcome"] is not None]
    result = {
        "tool": "harness bisect", "cell": ev.describe(), "source": str(repo.path),
        "good": {"ref": good_ref, "commit": good, "outcome": g_end.outcome,
                 "step": g_end.to_dict()},
        "bad": {"ref": bad_ref, "commit": bad, "outcome": b_end.outcome, "step": b_end.to_dict()},
        "direction": way, "terms": {"old": old_term, "new": new_term}, "stage": chosen,
        "commits": n, "steps": steps, "evaluated_steps": len(evaluated),
        "skipped_steps": len(steps) - len(evaluated),
        "step_budget": math.ceil(math.log2(max(n, 2))) + 2,
        "first_commit": repo.info(first).to_dict() if first else None,
        "range": [repo.info(c).to_dict() for c in candidates],
        "seconds": round(time.perf_counter() - t_all, 1),
    }
    if not first and not candidates:
        result["error"] = (f"git bisect run ended without a verdict: "
                           f"{(said.strip().splitlines() or ['?'])[-1][:300]}")
    (out / "bisect.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    shutil.rmtree(work / "git", ignore_errors=True)
    return result


def console_lines(result: dict) -> list[str]:
    """What a git user expects: ``first bad commit: <sha> <subject> (#PR)`` (``first fixed
    commit`` for a fix), or the range skips leave."""
    word = result["terms"]["new"]
    first = result.get("first_commit")
    if first:
        pr = f" (#{first['pr']})" if first.get("pr") and f"(#{first['pr']})" not in \
            first["subject"] else ""
        return [f"first {word} commit: {first['commit']} {first['subject']}{pr}"]
    if result.get("range"):
        lines = [f"first {word} commit is one of {len(result['range'])} (skipped steps leave a "
                 f"range):"]
        lines += [f"  {c['commit']} {c['subject']}" for c in result["range"]]
        return lines
    return [f"no first {word} commit: {result.get('error', '?')}"]
