"""One step of ``harness bisect``: the cell's outcome at one ExecuTorch commit, and the exit code
``git bisect run`` reads (0: the --good end's outcome, 1: the --bad end's, 125: skip).

A developer runs the same step by hand at any commit::

    python -m harness bisect-step --cases F.json [--case ID] --backend xnnpack \\
        --source ET_GIT --commit SHA [--old-outcome X --new-outcome Y] [--stage lowering]

How a commit is evaluated (``CellEvaluator``): the commit's Python side (``exir/``,
``backends/``) is laid over the installed wheel (``git_source.overlay``) and the cell runs in a
subprocess with that overlay first on PYTHONPATH. The outcome is read at a *stage*:

- ``lowering``: what lowering decides (INVALID, LOWER_ERROR, NOT_DELEGATED, CONTRACT_VIOLATION,
  DELEGATED); nothing executes, so the verdict rests on the commit's Python alone (with the
  installed torch and the wheel's AOT op libraries). The driver picks it when the two ends
  already differ there.
- ``execution``: the cell's final status; the program runs on the wheel's native runtime
  (XNNPACK: the wheel's delegate; Vulkan: a plug-in built from the commit's own source). Where
  the native side the cell uses differs between the commit and the wheel's own commit, or the
  serialized schemas moved, or the plug-in does not build, the step is a skip with that reason.

A ``ProbeEvaluator`` (``--probe CMD``) runs a command in the commit's exported tree instead
(its last stdout line is the outcome, a failing command a skip): any outcome, and the driver's
tests on a small repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from harness.runtimes import RuntimeBuildError, cache_root, git_source
from harness.runtimes.git_source import GitError, Repo
from harness.status import Status

OLD, NEW, SKIP = 0, 1, 125
ABORT = 128  # git bisect run stops: a harness failure, not the commit's outcome
STAGES = ("lowering", "execution")  # a ProbeEvaluator has one stage of its own, "probe"
INNER_IMPORT_FAILED = 3
# the lowering stage's outcome when the conv lowered into the delegate (the others are Statuses)
DELEGATED = "DELEGATED"


@dataclass
class Step:
    commit: str
    outcome: str | None = None   # None: not evaluated (skip)
    status: str | None = None    # the cell's status as far as the stage took it
    message: str = ""
    verdict: str = ""            # old / new / skip (the driver's terms: good/bad or broken/fixed)
    skip_reason: str = ""
    seconds: float = 0.0
    stage: str = ""
    rests_on: dict = field(default_factory=dict)  # what the verdict rests on (Python, native)
    row: dict | None = None      # the cell's row at this commit
    subject: str = ""
    python_digest: str = ""      # of what a lowering reads (a run at a tree's python_digest)
    # "served" (lowered earlier at this Python digest: <cache>/trees/lowered/<digest>, by a run at
    # a tree or an earlier step), "lowered" (here, and kept there), "" (not reached)
    lowering: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def exit_code(self) -> int:
        return {"old": OLD, "new": NEW}.get(self.verdict, SKIP)


def classify(step: Step, old: str | None, new: str | None) -> Step:
    """The verdict from the outcome: the --good end's (old), the --bad end's (new), else skip
    (an outcome neither end has is not a guess either way)."""
    if step.outcome is None:
        step.verdict = "skip"
    elif old is None and new is None:
        step.verdict = ""
    elif step.outcome == old:
        step.verdict = "old"
    elif step.outcome == new:
        step.verdict = "new"
    else:
        step.verdict = "skip"
        step.skip_reason = (f"outcome {step.outcome} is neither end's ({old} at --good, {new} "
                            f"at --bad)")
    return step


def lowering_outcome(row: dict) -> str:
    status = row.get("lowering_status", row.get("status"))
    if status in (Status.INVALID, Status.LOWER_ERROR, Status.NOT_DELEGATED):
        return status
    if row.get("contract_violations"):
        return Status.CONTRACT_VIOLATION.value
    return DELEGATED


# --- the conv cell ---------------------------------------------------------------------------

@dataclass
class CellSpec:
    cases: str
    case_id: str
    backend: str
    fixes: tuple = ()

    def argv(self) -> list[str]:
        out = ["--cases", str(Path(self.cases).resolve()), "--case", self.case_id,
               "--backend", self.backend]
        return out + (["--fixes", *self.fixes] if self.fixes else [])

    @property
    def lane(self):
        from harness.lane import Lane

        return Lane(self.backend, tuple(self.fixes))


def pick_case(cases: str, case_id: str | None):
    """The case ``case_id`` of the file (or its only case). ValueError: one line."""
    from harness.spec import CaseError, load_cases

    try:
        found = load_cases(cases)
    except CaseError as e:
        raise ValueError(str(e)) from None
    if case_id is None:
        if len(found) != 1:
            raise ValueError(f"{cases} holds {len(found)} cases: name one with --case "
                             f"({', '.join(c.case_id for c in found[:6])}"
                             f"{', ...' if len(found) > 6 else ''})")
        return found[0]
    for c in found:
        if c.case_id == case_id or c.case_id.startswith(case_id):
            return c
    raise ValueError(f"no case {case_id!r} in {cases}")


def check_lane(spec: CellSpec, case) -> None:
    """ValueError (one line) when the cell is not in the lane: unknown backend or fix, a case
    the backend's lane does not take."""
    from harness.stages import backends, fixes

    if spec.backend not in backends.names():
        raise ValueError(f"unknown backend {spec.backend!r} (lanes: {', '.join(backends.names())})")
    for f in spec.fixes:
        if f not in fixes.names():
            raise ValueError(f"unknown fix {f!r} (fixes: {', '.join(fixes.names())})")
        if spec.backend not in fixes.get(f).backends:
            raise ValueError(f"fix {f} is not in the {spec.backend} lane (it applies to "
                             f"{', '.join(fixes.get(f).backends)})")


class CellEvaluator:
    """The conv cell at a commit: overlay + subprocess (see the module doc)."""

    def __init__(self, spec: CellSpec, repo: Repo, work: Path, cache: str | None = None,
                 timeout: float = 900):
        self.spec, self.repo, self.work, self.cache, self.timeout = spec, repo, work, cache, timeout
        self.seen: dict[tuple[str, str], Step] = {}  # (commit, stage) -> its step, this process

    origin: dict | None = None  # where the cell was named: {run, finding, case_id} (--run)

    def describe(self) -> dict:
        out = {"kind": "cell", "cases": str(Path(self.spec.cases).resolve()),
               "case": self.spec.case_id, "backend": self.spec.backend,
               "fixes": list(self.spec.fixes)}
        if self.origin:
            out["from"] = self.origin
        return out

    def step_argv(self) -> list[str]:
        return self.spec.argv() + (["--cache", str(self.cache)] if self.cache else [])

    def evaluate(self, commit: str, stage: str) -> Step:
        """The cell at ``commit`` (each (commit, stage) once per evaluator: the ends, the merge
        base and a first commit's parent are asked for more than once)."""
        if (commit, stage) not in self.seen:
            self.seen[commit, stage] = self._evaluate(commit, stage)
        return replace(self.seen[commit, stage])

    def _evaluate(self, commit: str, stage: str) -> Step:
        from harness.runtimes import wheel as wheel_mod

        t0 = time.perf_counter()
        step = Step(commit, stage=stage)
        wheel = wheel_mod.installed()
        step.rests_on = {"python": f"{commit[:12]} (exir/, backends/)",
                         "wheel": f"executorch {wheel.version} ({wheel.git_version[:12]})",
                         "torch": _torch_version()}
        try:
            step.subject = self.repo.info(commit).subject
            ov, step.python_digest = overlay_and_digest(self.repo, commit, self.work / "overlay",
                                                        wheel.root, self.cache)
        except GitError as e:
            return _skip(step, f"cannot export the commit's Python side: {e}", t0)
        plugin = None
        if stage == "execution":
            if self.spec.backend == "vulkan":
                try:
                    built = vulkan_plugin(self.repo, commit, self.work / "vulkan-src",
                                          self.cache, log=lambda s: print(s, file=sys.stderr))
                except (RuntimeBuildError, GitError) as e:
                    return _skip(step, f"the Vulkan plug-in does not build at this commit: {e}", t0)
                plugin = built.library
                how = ("built earlier, kept per commit" if built.tree == "cached" else
                       f"{built.seconds:g} s, {built.files_changed} files changed, tree "
                       f"{built.tree}")
                step.rests_on["native"] = (f"Vulkan plug-in built from {commit[:12]} ({how}); "
                                           f"runtime core from the wheel")
            moved = git_source.schema_moved(self.repo, commit, self.spec.backend, wheel.root)
            if moved:
                return _skip(step, f"serialized schema moved vs the wheel's: {', '.join(moved)}", t0)
            paths = git_source.NATIVE_PATHS.get(self.spec.backend, ())
            if paths:
                if not self.repo.has(wheel.git_version):
                    return _skip(step, f"the wheel's own commit {wheel.git_version[:12]} is not in "
                                       f"{self.repo.path}: cannot tell whether the native side "
                                       f"({', '.join(paths)}) moved", t0)
                differ = self.repo.native_moved(commit, wheel.git_version, paths)
                if differ:
                    return _skip(step, f"native side differs from the wheel's "
                                       f"({wheel.git_version[:12]}): {len(differ)} files, e.g. "
                                       f"{differ[0]}", t0)
                step.rests_on["native"] = (f"the wheel's {self.spec.backend} runtime, identical "
                                           f"to {commit[:12]}'s ({', '.join(paths)})")
        else:
            step.rests_on["native"] = "none (lowering only; nothing executed)"
        row, why = self._inner(ov, stage, plugin, lowered_dir(step.python_digest, self.cache))
        if row is None:
            return _skip(step, why, t0)
        step.row = row
        step.lowering = "served" if row.get("cached") else "lowered"
        step.status = row.get("status")
        step.message = (row.get("message") or "")[:500]
        step.outcome = lowering_outcome(row) if stage == "lowering" else step.status
        if stage == "execution" and row.get("undelegated_ops"):
            moved = self._kernels_moved(commit, wheel, row.get("undelegated_ops") or {})
            if moved:
                return _skip(step, moved, t0)
        step.seconds = round(time.perf_counter() - t0, 1)
        return step

    def _kernels_moved(self, commit, wheel, ops: dict) -> str:
        """The portable/quantized kernels of the ops run outside the delegate: the wheel's; a
        verdict resting on them needs them unchanged."""
        if not self.repo.has(wheel.git_version):
            return (f"ops outside the delegate ({', '.join(sorted(ops))}) run the wheel's kernels "
                    f"and its commit {wheel.git_version[:12]} is not in {self.repo.path}")
        from harness.runtimes.tree import kernel_paths  # the same rule as a run at a tree

        differ = self.repo.native_moved(commit, wheel.git_version, kernel_paths(ops))
        return (f"kernels of ops outside the delegate differ from the wheel's: {', '.join(differ)}"
                if differ else "")

    def _inner(self, ov: Path, stage: str, plugin: str | None,
               lowered: Path) -> tuple[dict | None, str]:
        out = self.work / "row.json"
        out.unlink(missing_ok=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ov), str(Path(__file__).resolve().parents[2])]))
        env["CONVCONF_CACHE"] = str(self.work / "cache")  # no lowering from another commit
        cmd = [sys.executable, "-m", "harness.run.bisect_step", *self.spec.argv(),
               "--stage", stage, "--row-out", str(out), "--lowered", str(lowered)] + (
            ["--plugin", plugin] if plugin else [])
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=self.timeout)
        except subprocess.TimeoutExpired:
            if stage == "execution":
                return {"status": Status.CRASH.value,
                        "message": f"timed out after {self.timeout:g} s"}, ""
            return None, f"lowering timed out after {self.timeout:g} s"
        said = _last_line(done.stderr)
        if done.returncode == INNER_IMPORT_FAILED:
            return None, f"the overlay does not import against the wheel: {said}"
        if done.returncode < 0 and stage == "execution":
            return {"status": Status.CRASH.value,
                    "message": f"killed by signal {-done.returncode}: {said}"}, ""
        if done.returncode or not out.exists():
            return None, f"the step's process failed (exit {done.returncode}): {said}"
        return json.loads(out.read_text()), ""


def overlay_and_digest(repo: Repo, commit: str, dest: Path, wheel: Path,
                       cache: str | None = None) -> tuple[Path, str]:
    """The commit's Python side over the wheel (``git_source.overlay``) and its Python digest,
    the one a run at a tree names (``EtTree.python_digest``: the same files, the same hash). A
    run at a tree's overlay of that digest (``<cache>/trees/overlays/<digest>``) is used as it
    is. -> (the folder to put first on PYTHONPATH, the digest)."""
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest / ".export"
    n = git_source.export(repo, commit, [*git_source.OVERLAID, *git_source.PROGRAM_SCHEMAS],
                          tmp, keep=lambda name: name.endswith(git_source.DATA_SUFFIXES))
    digest = git_source.files_digest(tmp, git_source.python_files(tmp))[:16]
    shared = overlay_dir(digest, cache)
    if (shared / "OVERLAY.json").is_file():
        shutil.rmtree(dest, ignore_errors=True)
        return shared, digest
    return git_source.lay_over(tmp, dest, wheel, {"commit": commit, "files": n},
                               commit[:12]), digest


def vulkan_source(repo: Repo, commit: str, dest: Path) -> Path:
    """The commit's files the Vulkan plug-in build compiles (``git_source.vulkan_files``: the
    runtime, its schema, version.txt; LICENSE) exported into ``dest``."""
    git_source.export(repo, commit, [*git_source.VULKAN_PATHS, "version.txt", "LICENSE"], dest)
    return dest


def vulkan_plugin(repo: Repo, commit: str, dest: Path, cache: str | None = None, log=print):
    """The Vulkan plug-in from the commit's source, kept per digest of what the build compiles
    (``plugins/src-<digest>.so``, as a run at a tree keeps it): a commit whose Vulkan runtime
    equals one built before, by a step or by a run at a tree, builds nothing (most commits of a
    range change no Vulkan source). -> ``git_source.PluginBuild``."""
    return git_source.build_vulkan_from_dir(vulkan_source(repo, commit, dest), commit, cache,
                                            log=log, date=repo.info(commit).date)


def overlay_dir(python_digest: str, cache: str | None = None) -> Path:
    """Where the overlay of a Python side with this digest is kept: runs at trees, bisect steps
    and upstream validation share it."""
    return cache_root(cache) / "trees" / "overlays" / python_digest


def lowered_dir(python_digest: str, cache: str | None = None) -> Path:
    """Where the lowerings of one Python side are kept, for runs at trees (``at_tree.
    lowering_cache``) and bisect steps alike: a step at a digest lowered before is served."""
    return cache_root(cache) / "trees" / "lowered" / python_digest


def _torch_version() -> str:
    from importlib.metadata import version

    try:
        return version("torch")
    except Exception:  # noqa: BLE001
        return "?"


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _skip(step: Step, reason: str, t0: float) -> Step:
    step.outcome, step.verdict, step.skip_reason = None, "skip", reason
    step.seconds = round(time.perf_counter() - t0, 1)
    return step


# --- a probe command (any outcome; the driver's tests) --------------------------------------

class ProbeEvaluator:
    """``--probe CMD``: CMD runs (sh -c) in the commit's tree (``git archive`` of it); its last
    stdout line is the outcome; a non-zero exit is a skip whose reason is its last stderr line."""

    stages = ("probe",)  # one outcome: no lowering/execution split

    def __init__(self, probe: str, repo: Repo, work: Path, timeout: float = 600):
        self.probe, self.repo, self.work, self.timeout = probe, repo, work, timeout

    def describe(self) -> dict:
        return {"kind": "probe", "probe": self.probe}

    def step_argv(self) -> list[str]:
        return ["--probe", self.probe]

    def evaluate(self, commit: str, stage: str) -> Step:
        t0 = time.perf_counter()
        step = Step(commit, stage=stage, rests_on={"tree": commit[:12]})
        step.subject = self.repo.info(commit).subject
        tree = self.work / "tree"
        done_tar = self.repo.git("archive", "--format=tar", commit, text=False)
        import io
        import shutil
        import tarfile

        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(done_tar.stdout)) as tf:
            tf.extractall(tree, filter="data")
        try:
            done = subprocess.run(["sh", "-c", self.probe], cwd=tree, capture_output=True,
                                  text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return _skip(step, f"probe timed out after {self.timeout:g} s", t0)
        if done.returncode:
            return _skip(step, f"probe exit {done.returncode}: {_last_line(done.stderr)}", t0)
        step.outcome = step.status = _last_line(done.stdout) or "(no output)"
        step.row = {"outcome": step.outcome}
        step.seconds = round(time.perf_counter() - t0, 1)
        return step


def evaluator_for(args, repo: Repo, work: Path):
    if getattr(args, "probe", None):
        return ProbeEvaluator(args.probe, repo, work)
    case = pick_case(args.cases, args.case)
    spec = CellSpec(args.cases, case.case_id, args.backend, tuple(args.fixes or ()))
    check_lane(spec, case)
    ev = CellEvaluator(spec, repo, work, getattr(args, "cache_dir", None))
    ev.origin = getattr(args, "cell_from", None)
    return ev


def run_step(args) -> int:
    """``harness bisect-step``: evaluate one commit, record it, print one line, exit 0/1/125."""
    repo = Repo(args.source)
    commit = repo.rev(args.commit)
    record = Path(args.record) if args.record else None
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="convconf-step-"))
    step = evaluator_for(args, repo, work).evaluate(commit, args.stage)
    classify(step, args.old_outcome, args.new_outcome)
    if record:
        record.mkdir(parents=True, exist_ok=True)
        n = len(list(record.glob("*.json")))
        (record / f"{n:03d}-{commit[:12]}.json").write_text(json.dumps(step.to_dict(), indent=1))
    said = step.outcome if step.outcome is not None else f"skip: {step.skip_reason}"
    print(f"bisect-step {commit[:12]} [{step.stage}]: {said} -> {step.verdict or '?'} "
          f"({step.seconds:g} s; {step.subject[:60]})", file=sys.stderr)
    return step.exit_code if step.verdict else (OLD if step.outcome else SKIP)


# --- inside the overlay: the cell itself -----------------------------------------------------

def OVERLAY_ROOT() -> Path:  # noqa: N802 -- the first PYTHONPATH entry (set by _inner)
    return Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]).resolve()


def _inner_main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--cases", required=True)
    p.add_argument("--case", required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--fixes", nargs="*", default=[])
    p.add_argument("--stage", choices=STAGES, default="lowering")
    p.add_argument("--row-out", required=True)
    p.add_argument("--plugin")
    p.add_argument("--lowered", help="lowerings kept per Python digest (served when there)")
    a = p.parse_args(argv)
    from harness.chatter import hide_lowering_chatter

    hide_lowering_chatter()
    import logging

    logging.disable(logging.WARNING)
    try:  # the overlay's Python side against the wheel: does it import?
        import executorch.backends
        import executorch.exir

        from harness.stages import backends

        for mod in (executorch.exir, executorch.backends):  # the commit's, not the wheel's
            if not str(Path(mod.__file__).resolve()).startswith(str(OVERLAY_ROOT())):
                raise ImportError(f"{mod.__name__} came from {mod.__file__}, not the overlay")

        backends.get(a.backend).partitioners()
    except Exception as e:  # noqa: BLE001
        print(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        return INNER_IMPORT_FAILED
    from harness.lane import Lane
    from harness.stages import cell

    case = pick_case(a.cases, a.case)
    lane = Lane(a.backend, tuple(a.fixes))
    if a.plugin:
        from harness.runtimes import load

        load.load(a.plugin)
    elif a.backend == "vulkan":
        from harness.runtimes import load

        load.load(None)  # never the cached plug-in of another source
    if a.lowered:
        from harness.stages.cache import Cache

        prepared, cached = cell.prepared_or_cached(case, lane, Cache(a.lowered))
    else:
        prepared, cached = cell.prepare(case, lane), False
    row, final = cell.static_result(case, prepared)
    if a.stage == "execution" and not final:
        row = cell.execute(case, prepared)
    out = row.to_row()
    out["cached"] = cached  # the lowering was served (lowered earlier at this Python digest)
    out["lowering_status"] = prepared.status  # what lowering alone said (None: delegated)
    out["stage"] = a.stage
    Path(a.row_out).write_text(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_inner_main(sys.argv[1:]))
