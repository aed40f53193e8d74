"""``harness upstream --run-repros``: each draft's repro.py run alone, as a maintainer would run
it: a fresh Python (``-I``: no convconf, no user site), its own empty folder, only torch and
executorch importable, the run's Vulkan plug-in named by $VULKAN_RUNTIME. What it printed and
its STATUS go into the draft (issue.md, repro.log, validation.log)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.lane import Lane
from harness.results import repro, upstream
from harness.runfolder import RunFolder
from harness.spec import ConvCase

TIMEOUT_S = 600


def run_one(script: str, library: str | None, timeout: float = TIMEOUT_S,
            python: str | None = None) -> tuple[str, str]:
    """(status, output): the STATUS line's status ("CRASH" for a process that died or hung,
    "?" for one that printed none) and its stdout with the stderr's last lines. ``python``: the
    interpreter (a fresh venv with only torch and executorch, as a maintainer has; default this
    one, isolated with -I)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CONVCONF_KNOWN_ISSUES", "VULKAN_RUNTIME")}
    if library:
        env["VULKAN_RUNTIME"] = library
    with tempfile.TemporaryDirectory(prefix="repro-") as where:
        path = Path(where) / "repro.py"
        path.write_text(script)
        try:
            proc = subprocess.run([python or sys.executable, "-I", str(path)], capture_output=True,
                                  text=True, timeout=timeout, cwd=where, env=env)
        except subprocess.TimeoutExpired:
            return "CRASH", f"(no result in {timeout:.0f} s)"
    out = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    said = [ln for ln in out if ln.startswith("STATUS:")]
    status = said[-1].split()[1] if said else ("CRASH" if proc.returncode < 0 else "?")
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Warning" not in ln][-6:]
    text = "\n".join(out + ([f"(exit {proc.returncode}; stderr, last lines:)"] + tail
                            if proc.returncode else []))
    return status, text


def run_repros(run_dir: Path, drafts: list, log=print, python: str | None = None) -> None:
    """Run every draft's repro.py alone and record what it printed (upstream.render again)."""
    header = RunFolder(run_dir).header()
    for d in drafts:
        lane = Lane.of(d.cell.backend, "")
        library = repro.run_runtime_library(run_dir, lane) if lane.backend == "vulkan" else None
        d.repro_status, d.repro_output = run_one(d.repro, library, python=python)
        upstream.render(d, header)
        log(f"  {d.folder}: repro.py printed STATUS: {d.repro_status} (stated {d.stated})")


# --- patch.diff at an ExecuTorch tree (``harness upstream --validate-at``) ----------------------

def patched_copy(tree_dir: Path, patch: str, dest: Path) -> None:
    """A copy of the checkout ``tree_dir`` (its .git too) with ``patch`` applied, uncommitted.
    TreeError (one line) when it does not apply."""
    import shutil

    from harness.runtimes.tree import TreeError

    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(tree_dir, dest, symlinks=True)
    (dest / "convconf.patch").write_text(patch)
    try:
        done = subprocess.run(["git", "-C", str(dest), "apply", "convconf.patch"],
                              capture_output=True, text=True)
    finally:
        (dest / "convconf.patch").unlink()
    if done.returncode:
        why = done.stderr.strip().splitlines()
        raise TreeError(f"git apply in {dest}: {why[-1] if why else done.returncode}")


def patched_tree(source: Path, ref: str, patch: str, dest: Path, cache: str | None = None):
    """A checkout of commit ``ref`` of ``source`` with ``patch`` applied and left uncommitted
    (the tree reads as "<commit> (dirty)"): the commit's exported files (``tree.from_ref``, kept
    in the cache) copied to ``dest`` and made a git work tree of that commit whose objects are
    ``source``'s (alternates: nothing is written to ``source``). -> the clean tree's EtTree.
    TreeError (one line) for a ref that is not there or a patch that does not apply."""
    import shutil

    from harness.runtimes import cache_root, git_source, tree as tree_mod

    clean = tree_mod.from_ref(Path(source), ref, cache_root(cache) / "trees" / "commits")
    repo = git_source.Repo(source)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(clean.path, dest, symlinks=True,
                    ignore=shutil.ignore_patterns(".exported"))

    def git(*args, **kw):
        done = subprocess.run(["git", "-C", str(dest), *args], capture_output=True, text=True,
                              **kw)
        if done.returncode:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise tree_mod.TreeError(f"git {args[0]} in {dest}: {why[-1] if why else done.returncode}")
        return done.stdout

    git("init", "-q")
    (dest / ".git" / "objects" / "info" / "alternates").write_text(
        str((repo.git_dir / "objects").resolve()) + "\n")
    git("config", "core.fileMode", "false")  # an export does not keep the executable bit
    git("update-ref", "HEAD", clean.commit)
    git("read-tree", "HEAD")
    # the commit's files outside what a tree run reads (and submodules) were never exported
    missing = git("ls-files", "-d", "-z")
    if missing:
        git("update-index", "--skip-worktree", "-z", "--stdin", input=missing)
    git("update-index", "-q", "--refresh")
    (dest / "convconf.patch").write_text(patch)
    try:
        git("apply", "--check", "convconf.patch")
        git("apply", "convconf.patch")
    finally:
        (dest / "convconf.patch").unlink()
    return clean


def run_at(tree_args: list[str], cases: Path, backend: str, out: Path, jobs: int = 1,
           log=print) -> int:
    """``harness run`` of ``cases`` on ``backend`` at a tree (``--executorch REF --source G`` or
    ``--executorch-tree DIR``: harness/run/at_tree.py does the rest) -> its exit code."""
    cmd = [sys.executable, "-m", "harness", "run", *tree_args, "--cases", str(cases),
           "--max-examples", "0", "-j", str(jobs), "--backends", backend, "--out", str(out),
           "--overwrite", "--no-progress"]
    log(f"  $ {' '.join(cmd[2:])}")
    with open(out.with_suffix(".log"), "w") as fh:
        return subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode


def values_on_wheel(work: Path, case_ids: list[str], backend: str, log=print) -> dict:
    """The cells the patched tree only lowered (NOT_DELEGATED: a declined conv runs on the
    portable kernels, which at a tree are the wheel's, commit unknown, so not executed there),
    executed with the patched tree's Python over the wheel and its kernels, as a bisect step
    does (the overlay first on PYTHONPATH, no tree record; the tree's plug-in): case id ->
    status there. ``work``: validate_fix's folder (its cases.json and patched run)."""
    import json

    from harness.run import at_tree
    from harness.run.bisect_step import overlay_dir
    from harness.runtimes.tree import EtTree

    tree = EtTree.from_dict(json.loads((work / "patched" / "executorch-tree.json").read_text()))
    overlay = overlay_dir(tree.python_digest)
    entries = [e for e in json.loads((work / "cases.json").read_text())
               if ConvCase.from_dict(e["case"]).case_id in case_ids]
    cases = work / "wheel-cases.json"
    cases.write_text(json.dumps(entries, indent=1))
    out = work / "wheel"
    cmd = [sys.executable, "-m", "harness", "run", "--cases", str(cases), "--max-examples", "0",
           "-j", "1", "--backends", backend, "--out", str(out), "--overwrite", "--no-progress",
           "--no-cache", "--vulkan-runtime", tree.vulkan_plugin or "none"]
    log(f"  $ PYTHONPATH={overlay} {' '.join(cmd[2:])}")
    with open(out.with_suffix(".log"), "w") as fh:
        subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=at_tree.environment(overlay))
    try:
        return {c.case_id: c.status for c in RunFolder(out).cells() if not c.fixes}
    except ValueError:
        return {}


def run_et_tests(record: Path, tests: list[tuple[str, str]], timeout: float = TIMEOUT_S,
                 memo: Path | None = None) -> list:
    """ExecuTorch's test files beside the patched code, from the tree's overlay (its Python over
    the wheel, as a run at the tree imports it; the Vulkan plug-in of the run loaded by the
    etsuite pytest plug-in) -> [EtTests]. A file that cannot run says why. ``memo``: a folder
    keeping each result per (Python digest, plug-in, file, -k), so the clean tree's tests run
    once for every diff validated against it."""
    import json
    import re

    from harness.run import at_tree, etsuite
    from harness.run.bisect_step import overlay_dir
    from harness.runtimes.tree import EtTree

    tree = EtTree.from_dict(json.loads(record.read_text()))
    overlay = overlay_dir(tree.python_digest)
    out = []
    for path, select in tests:
        key = None
        if memo is not None:
            import hashlib

            key = memo / ("ettests-" + hashlib.sha1(json.dumps(
                [tree.python_digest, tree.vulkan_plugin, path, select]).encode()).hexdigest()[:16]
                + ".json")
            if key.is_file():
                out.append(upstream.EtTests(**{**json.loads(key.read_text()), "failures": tuple(
                    json.loads(key.read_text())["failures"])}))
                continue
        test = overlay / "executorch" / path
        if not test.is_file():
            out.append(upstream.EtTests(path, select, why_not=f"not in {tree.label}'s Python side"))
            continue
        env = at_tree.environment(overlay)
        if tree.vulkan_plugin:
            env[etsuite.ENV_VULKAN] = tree.vulkan_plugin
        cmd = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
               "-p", "harness.run.etsuite", "-q", "-rf", str(test)] + (["-k", select] if select
                                                                       else [])
        with tempfile.TemporaryDirectory(prefix="ettests-") as where:
            try:
                done = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                out.append(upstream.EtTests(path, select, why_not=f"no result in {timeout:.0f} s"))
                continue
        text = done.stdout + done.stderr
        counts = {k: int(n) for n, k in re.findall(
            r"(\d+) (passed|failed|skipped|error|errors)\b", text.splitlines()[-1] if text.strip()
            else "")}
        failures = tuple(ln.split(" - ")[0].split("::", 1)[-1] for ln in text.splitlines()
                         if ln.startswith("FAILED "))[:8]
        if not counts:
            tail = [ln for ln in text.splitlines() if ln.strip()][-1:] or [f"exit {done.returncode}"]
            out.append(upstream.EtTests(path, select, why_not=upstream.scrub(tail[0])[:200]))
            continue
        out.append(upstream.EtTests(path, select, counts.get("passed", 0), counts.get("failed", 0),
                                    counts.get("skipped", 0),
                                    counts.get("errors", 0) + counts.get("error", 0),
                                    failures=failures))
        if key is not None:
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_text(json.dumps(dataclasses.asdict(out[-1])))
    return out


def validate_fix(fix: str, backend: str, ref: str, source: Path | None, work: Path,
                 finding_cases=(), et_tests: bool = True, log=print):
    """Run the upstream diff of ``fix`` (cases/upstream/patches/FIX.diff) at commit ``ref`` of
    ``source`` (``source`` None: ``ref`` is a checkout) and at the same tree with the diff applied, on the finding's cases and the
    fix's corpus cases (results/upstream.fix_cases) -> TreeValidation. Everything goes under
    ``work`` (the case file, the two runs and their logs, the patched tree)."""
    import json

    from harness.runfolder import RunFolder
    from harness.runtimes.tree import TreeError

    patch_path = upstream.UPSTREAM_PATCHES / f"{fix}.diff"
    if not patch_path.is_file():
        return upstream.TreeValidation(fix, backend, ref, ref,
                                       problem=f"no upstream diff {patch_path.name}")
    patch = patch_path.read_text()
    work.mkdir(parents=True, exist_ok=True)
    roles: dict[str, str] = {}
    entries = []
    for case in finding_cases:
        if case.case_id not in roles:
            roles[case.case_id] = "finding"
            entries.append({"case": case.to_dict(), "note": "the finding's cell"})
    for case, entry, bug in upstream.fix_cases(fix):
        if case.case_id not in roles:
            roles[case.case_id] = "bug" if bug else "control"
            entries.append({"case": case.to_dict(), "note": entry.get("note", "")})
    cases = work / "cases.json"
    # the same diff, cases and tree as a finished earlier validation in ``work``: its two runs
    # are taken as they are (an interrupted --validate-at goes on where it stopped)
    stamp = json.dumps({"patch": patch, "cases": entries, "ref": str(ref),
                        "source": str(source)}, sort_keys=True)
    done = (work / "done.json").is_file() and (work / "done.json").read_text() == stamp
    cases.write_text(json.dumps(entries, indent=1))
    if done:
        log("  the clean and patched runs of an earlier validation with the same diff and cases")
    try:
        if done:
            pass
        elif source is None:  # ref is a checkout
            patched_copy(Path(ref), patch, work / "tree")
        else:
            patched_tree(source, ref, patch, work / "tree", None)
    except TreeError as e:
        return upstream.TreeValidation(fix, backend, ref, ref, problem=str(e))
    runs = {"clean": (["--executorch", ref, "--source", str(source)] if source is not None
                      else ["--executorch-tree", str(ref)]),
            "patched": ["--executorch-tree", str(work / "tree")]}
    found = {}
    for name, args in runs.items():
        rc = 0 if done else run_at(args, cases, backend, work / name, log=log)
        if rc not in (0, 1):
            tail = (work / f"{name}.log").read_text().strip().splitlines()[-1:] or ["?"]
            return upstream.TreeValidation(fix, backend, ref, ref, problem=(
                f"the {name} run exited {rc}: {upstream.scrub(tail[0])[:200]}"))
        found[name] = {c.case_id: c for c in RunFolder(work / name).cells() if not c.fixes}
    (work / "done.json").write_text(stamp)
    labels = {n: json.loads((work / n / "executorch-tree.json").read_text()).get("label", "?")
              for n in runs}
    cells = tuple(upstream.TreeCell(cid, role, found["clean"][cid].status,
                                    found["patched"][cid].status,
                                    upstream.executed(found["patched"][cid]))
                  for cid, role in roles.items() if cid in found["clean"]
                  and cid in found["patched"])
    lowered_only = [c.case_id for c in cells if c.patched in upstream.RIGHT and not c.executed]
    if lowered_only:
        wheel = values_on_wheel(work, lowered_only, backend, log)
        cells = tuple(dataclasses.replace(c, on_wheel=wheel.get(c.case_id, "?"))
                      if c.case_id in lowered_only else c for c in cells)
    plugin = ""
    patched_log = (work / "patched.log").read_text()
    for line in patched_log.splitlines():
        if "Vulkan plug-in from" in line:
            plugin = upstream.scrub(line.split(": ", 2)[-1])
    tests, base = (), ()
    beside = upstream.tests_beside(upstream.diff_paths(patch))
    if et_tests and beside:
        log(f"  ExecuTorch's tests beside {', '.join(upstream.diff_paths(patch))}: "
            f"{len(beside)} file(s), at the patched and the clean tree")
        tests = tuple(run_et_tests(work / "patched" / "executorch-tree.json", beside,
                                   memo=work.parent))
        base = tuple(run_et_tests(work / "clean" / "executorch-tree.json", beside,
                                  memo=work.parent))
    return upstream.TreeValidation(fix, backend, labels["clean"], labels["patched"], cells,
                                   tests, base, plugin=plugin)


def validate_drafts(run_dir: Path, drafts: list, ref: str, source: Path, work: Path,
                    et_tests: bool = True, log=print) -> None:
    """``--validate-at``: each draft whose patch is a graph fix's upstream diff, run at the tree
    (validate_fix) with the finding's stock cells; the result into its validation.log."""
    from harness.results.findings import cells_of

    folder = RunFolder(run_dir)
    header, cells = folder.header(), folder.cells()
    for d in drafts:
        effect = next((e for e in d.effects if e.fix == d.patch_from), None)
        if effect is None or effect.kind != "graph":
            continue  # no diff, or a runtime patch (its plug-in is built on the wheel's source)
        backend = Lane.of(d.cell.backend, "").backend
        finding_cases = [c.case for c in cells_of(d.finding, cells) if not c.fixes]
        log(f"  {d.folder}: {d.patch_from}.diff at {ref}, clean and patched")
        d.at_tree = validate_fix(d.patch_from, backend, ref, source, work / d.folder,
                                 finding_cases, et_tests, log)
        log(f"    {d.at_tree.summary()}")
        upstream.render(d, header)
