"""nox sessions. ``tests``/``matrix``/``nightly`` reuse the current interpreter (torch and
executorch are large and must be the pinned CPU builds); ``releases`` makes one venv per release
but the one installed here (the release sweep; the commit bisect is ``python -m harness bisect``)."""

import json
import os
import sys
import time
from pathlib import Path

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["tests"]



@nox.session
def tests(session):
    """The default, CI-sized test run (fast Hypothesis profile): the fast tier, as .ci/run."""
    session.env["HYPOTHESIS_PROFILE"] = "ci"
    session.run("python", "-m", "pytest", "-n", "auto", "-m", "not slow", *session.posargs)


@nox.session
def slow(session):
    """The tests the fast tier (.ci/run, README command 2) leaves out: those marked slow."""
    session.env["HYPOTHESIS_PROFILE"] = "ci"
    session.run("python", "-m", "pytest", "-n", "auto", "-m", "slow", *session.posargs)


@nox.session
def matrix(session):
    """A small matrix run on both backends, stock and fixed."""
    out = session.posargs[0] if session.posargs else "runs/matrix"
    session.run("python", "-m", "harness", "run", "--out", out, "--fixes", "all", "--overwrite")


def _nightly_pytest(session, junit: str, *pytest_args: str) -> None:
    """The nightly's pytest step: every test (both tiers) at the nightly Hypothesis profile, the
    nightly corpus too. One command for `nox -s nightly` and nightly.yml's `tests` jobs."""
    session.env["HYPOTHESIS_PROFILE"] = "nightly"
    session.env["CONVCONF_CORPUS"] = "nightly"  # cases/nightly/*.json too (test_corpus.py)
    session.run("python", "-m", "pytest", "-n", "auto", f"--junitxml={junit}", *pytest_args)


@nox.session
def nightly_tests(session):
    """The nightly's pytest step alone: `nox -s nightly_tests [-- JUNIT [PYTEST ARGS]]`.
    nightly.yml runs it as jobs beside the shards, one per group of pytest-split
    (`-- JUNIT --splits N --group K`: groups of about equal time by .test_durations; refresh that
    file with `-- JUNIT --store-durations`)."""
    junit, *rest = session.posargs or ["nightly-junit.xml"]
    _nightly_pytest(session, junit, *rest)


@nox.session
def nightly(session):
    """Nightly: the large Hypothesis profile, full matrix + report, JUnit XML for CI."""
    out = session.posargs[0] if session.posargs else "runs/nightly"
    _nightly_pytest(session, f"{out}-pytest-junit.xml")
    # the convs of real models (cases/models, written by `harness cases from-model`; running
    # them needs no transformers), at their real shapes: a report of its own, not gated yet
    session.run("python", "-m", "harness", "run", "--out", f"{out}-models", "--max-examples", "0",
                "--cases", *sorted(map(str, Path("cases/models").glob("*.json"))),
                "--fixes", "all", "--overwrite", "--no-progress")
    # the matrix last: it exits 1 (failing the session) only for findings not in the committed
    # expectations; OUT/junit.xml holds its cells, known ones as xfail. Every finding is shrunk
    # (its tries per minute in shrunk.json, findings.md and the log) and then diagnosed: the
    # minimal case's one-step variants run as real cells, naming what decides it. --steer adds
    # the cases the routing models say reach the reachable paths the 300 leave unreached
    # (steering.NIGHTLY_STEER: measured, every reachable Vulkan shader and XNNPACK path)
    session.run("python", "-m", "harness", "run", "--out", out, "--profile", "nightly",
                "--steer", "45",
                "--fixes", "all", "--overwrite", "--shrink", "120", "--diagnose",
                "--diagnose-budget", "120",
                "--baseline", "cases/expectations/nightly.json",
                # issue 46: a seed per night (none given: the date), the failing cases of every
                # night re-run first and grown, steering toward what no earlier night reached
                "--regression-corpus", "cases/found.json",
                "--coverage-state", "runs/nightly-state.json")


def _env(name: str, old_name: str, default: str) -> str:
    return os.environ.get(name) or os.environ.get(old_name) or default


def _dependencies_besides(*names: str) -> list[str]:
    """pyproject.toml's [project] dependencies without ``names`` (read, not repeated here)."""
    import re
    import tomllib

    deps = tomllib.loads(Path("pyproject.toml").read_text())["project"]["dependencies"]
    return [d for d in deps if re.split(r"[\s<>=!~\[;]", d, maxsplit=1)[0] not in names]


def _installed_pair() -> tuple[str, str]:
    """(executorch, torch without its local +cpu tag) installed in this interpreter."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("executorch"), version("torch").split("+")[0]
    except PackageNotFoundError:
        return "", ""


def _sweep_cache() -> Path:
    """The release sweep's lowered-program cache: $RELEASES_CACHE, else convconf-releases
    beside the convconf cache (its own folder: a run keeps the convconf cache under 2 GB, which
    a sweep's lowerings outgrow, and would push out the plug-ins' build trees)."""
    from harness.versions import cache_home

    home = cache_home()
    return Path(os.environ.get("RELEASES_CACHE") or home.with_name(home.name + "-releases"))


@nox.session
def releases(session):
    """The release sweep: the seed corpus against several executorch releases, then diffs
    between neighbours (which release moved a cell). Not the commit bisect: for the commit that
    moved it, ``python -m harness bisect`` (README).

    nox -s releases -- 1.5.1 1.4.1   (oldest last or first: diffs follow the order given)
    RELEASES_FIXES=all (default: each), RELEASES_EXAMPLES=20 (generated cases beside the
    corpus), RELEASES_JOBS (default: the cores); the former BISECT_FIXES / BISECT_EXAMPLES are
    still read. The release installed here (executorch and its paired torch) runs in this
    environment, no venv. The sweep's lowerings are kept in their own cache, $RELEASES_CACHE
    (default: beside the convconf cache, ``convconf-releases``), bounded by
    $RELEASES_CACHE_MAX (default 12GB) instead of the 2 GB a run keeps: the next sweep of a
    release serves them (keys: versions and the stages' digest)"""
    releases = session.posargs or ["1.5.1", "1.4.1"]
    root = Path("runs/releases")
    runs = []
    from harness.runtimes.pairing import torch_for  # the wheel's Requires-Dist + what was measured

    pairs = {}
    for release in releases:  # all checked before anything is installed
        try:
            pairs[release], spec = torch_for(release)
        except ValueError as e:
            session.error(str(e))
        session.log(f"executorch {release}: torch {pairs[release]} (its wheel: {spec or 'any'})")
    lowered = _sweep_cache()
    run_env = {"CONVCONF_CACHE_MAX": os.environ.get("RELEASES_CACHE_MAX") or "12GB"}
    jobs = ["-j", os.environ["RELEASES_JOBS"]] if os.environ.get("RELEASES_JOBS") else []
    for release in releases:
        venv = root / f"venv-{release}"
        here = _installed_pair() == (release, pairs[release])
        python = sys.executable if here else str(venv / "bin" / "python")
        if here:
            session.log(f"executorch {release} with torch {pairs[release]} is installed here: "
                        f"its leg runs in this environment (no venv)")
        else:
            _make_venv(session, release, pairs[release])
        said = _release_runtime(session, python, release)
        lines = [ln for ln in said.splitlines() if ln.strip()]
        session.log(f"executorch {release} Vulkan runtime: {lines[-1] if lines else '?'}")
        out = root / release
        session.run(python, "-m", "harness", "run", "--out", str(out), "--overwrite",
                    "--cases", *sorted(map(str, Path("cases").glob("*.json"))),
                    "--max-examples", _env("RELEASES_EXAMPLES", "BISECT_EXAMPLES", "20"),
                    # each fix alone and all together: the releases view shows what every fix
                    # (graph rewrite or runtime patch, on that release's own plug-in) changes there
                    "--fixes", _env("RELEASES_FIXES", "BISECT_FIXES", "each"),
                    "--no-progress", "--cache", str(lowered), *jobs, env=run_env)
        # The corpus' expected statuses for this release (expect_by_release): a moved cell is
        # printed, not fatal here; the releases view below is what a bisect reads.
        session.run(python, "-m", "harness", "corpus", str(out), success_codes=[0, 1])
        runs.append(out)
    # The releases view (oldest first as given): counts per lane and release, and every cell
    # that changed between consecutive releases -> runs/releases/releases.html
    session.run("python", "-m", "harness", "diff", *map(str, runs), "--releases", "--out",
                str(root), success_codes=[0, 1])


@nox.session
def premerge(session):
    """Before merging an ExecuTorch branch: the corpus at the developer's tree (uncommitted changes
    included) vs at its merge base, the cells that flipped, and for a committed branch the commit
    that flipped each (harness bisect --run-diff). One report: OUT/tree/report.html.

    nox -s premerge -- DIR [--base REF] [--out OUT] [harness run options, e.g. --backends xnnpack]
    (base: git merge-base HEAD origin/main, else main; cases: cases/*.json, $PREMERGE_CASES)"""
    import subprocess

    args = list(session.posargs)
    if not args or args[0].startswith("-"):
        session.error("premerge: name the ExecuTorch checkout: nox -s premerge -- DIR")
    tree = args.pop(0)

    def option(name, default):
        if name in args:
            i = args.index(name)
            value = args[i + 1]
            del args[i:i + 2]
            return value
        return default

    out = Path(option("--out", "runs/premerge"))
    base = option("--base", "")
    if not base:
        for upstream in ("origin/main", "main"):
            done = subprocess.run(["git", "-C", tree, "merge-base", "HEAD", upstream],
                                  capture_output=True, text=True)
            if done.returncode == 0:
                base = done.stdout.strip()
                break
        else:
            session.error(f"premerge: no merge base of {tree} with origin/main or main: --base REF")
    cases = os.environ.get("PREMERGE_CASES", "") or " ".join(
        sorted(map(str, Path("cases").glob("*.json"))))
    common = ["--cases", *cases.split(), "--max-examples", "0", "--overwrite", "--no-progress",
              *args]
    session.run("python", "-m", "harness", "run", "--executorch", base, "--source", tree,
                "--out", str(out / "base"), *common)
    session.run("python", "-m", "harness", "run", "--executorch-tree", tree,
                "--out", str(out / "tree"), *common)
    session.run("python", "-m", "harness", "diff", str(out / "base"), str(out / "tree"),
                "--out", str(out / "flips.csv"), success_codes=[0, 1])
    head = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = json.loads((out / "tree" / "run.json").read_text())["executorch_tree"]["dirty"]
    if not dirty and head != base:  # committed: which of the branch's commits flipped each
        session.run("python", "-m", "harness", "bisect", "--run-diff", str(out / "base"),
                    str(out / "tree"), "--source", tree, "--out", str(out / "bisect"))
        session.run("python", "-m", "harness", "report", str(out / "tree"))
    elif dirty:
        session.log("premerge: the tree has uncommitted changes: the flips above are theirs "
                    "(commit them to have each flip named by its commit)")


def _make_venv(session, release: str, torch: str) -> str:
    """runs/releases/venv-RELEASE with that release's torch and executorch and convconf
    (editable) with its other dependencies, made once (kept) -> its python."""
    venv = Path("runs/releases") / f"venv-{release}"
    python = str(venv / "bin" / "python")
    if not venv.exists():
        started = time.monotonic()
        session.run("python", "-m", "venv", str(venv))
        session.run(python, "-m", "pip", "install", "-q", f"torch=={torch}")
        session.run(python, "-m", "pip", "install", "-q", f"executorch=={release}")
        session.run(python, "-m", "pip", "install", "-q", "--no-deps", "-e", ".")
        # the project's other dependencies, as pyproject.toml names them (matplotlib too: the
        # findings' pictures), torch and executorch being this release's pair above
        session.run(python, "-m", "pip", "install", "-q", *_dependencies_besides(
            "torch", "executorch"))
        seconds = round(time.monotonic() - started, 1)
        (venv / "convconf-install.json").write_text(json.dumps(
            {"executorch": release, "torch": torch, "install_s": seconds}))
        session.log(f"venv for executorch {release}: installed in {seconds} s")
    return python


def _release_runtime(session, python: str, release: str) -> str:
    """The release's Vulkan plug-in (a cache hit after the first time) -> what the build said,
    kept in runs/releases/RELEASE-vulkan-runtime.txt. Where it cannot be built the lane is
    NO_RUNTIME in that release's run; the reason is kept there."""
    said = session.run(python, "-m", "harness", "runtime", "build", "vulkan", silent=True,
                       success_codes=[0, 1, 2]) or ""
    (Path("runs/releases") / f"{release}-vulkan-runtime.txt").write_text(said)
    return said


def _release_venv(session, release: str, torch: str) -> str:
    """runs/releases/venv-RELEASE as the ``releases`` session makes it (kept: made once), and the
    release's Vulkan plug-in (a cache hit after the first time); -> its python."""
    python = _make_venv(session, release, torch)
    _release_runtime(session, python, release)
    return python


@nox.session
def fidelity(session):
    """The overlay's fidelity, measured: the corpus on a release's own wheel (its venv, as
    ``releases`` makes it) and as a run at that release's tag over the installed wheel
    (``harness run --executorch vX --source GITDIR``), then ``harness fidelity``: every cell where
    the two differ, with its reason -> runs/fidelity/X/fidelity.{md,csv,json}.

    nox -s fidelity -- 1.4.1 [1.3.1] --source GITDIR   (or $EXECUTORCH_SOURCE: an ExecuTorch git
    repository, a bare one too; FIDELITY_JOBS=2; cases: cases/*.json, $FIDELITY_CASES)"""
    from harness.runtimes.pairing import torch_for

    args = list(session.posargs)
    source = os.environ.get("EXECUTORCH_SOURCE", "")
    if "--source" in args:
        i = args.index("--source")
        source = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
    if not args or not source:
        session.error("fidelity: nox -s fidelity -- RELEASE [RELEASE ...] --source GITDIR")
    pairs = {}
    for release in args:  # all checked before anything is installed or run
        try:
            pairs[release] = torch_for(release)[0]
        except ValueError as e:
            session.error(str(e))
    cases = os.environ.get("FIDELITY_CASES", "") or " ".join(
        sorted(map(str, Path("cases").glob("*.json"))))
    common = ["--cases", *cases.split(), "--max-examples", "0", "--no-progress", "--overwrite",
              "-j", os.environ.get("FIDELITY_JOBS", "2")]
    root = Path("runs/fidelity")
    for release in args:
        python = _release_venv(session, release, pairs[release])
        wheel, tree = root / release / "wheel", root / release / "tree"
        session.run(python, "-m", "harness", "run", "--out", str(wheel), *common)
        session.run("python", "-m", "harness", "run", "--executorch", f"v{release}", "--source",
                    source, "--out", str(tree), *common)
        session.run("python", "-m", "harness", "fidelity", str(wheel), str(tree), "--out",
                    str(root / release), success_codes=[0, 1])


@nox.session
def etsuite(session):
    """ExecuTorch's own conv operator tests (from the installed wheel, our Vulkan plug-in loaded)
    beside ours, per configuration and flow: OUT/etsuite.{csv,json,md} (agree / disagree with a
    reason class; every unexplained disagreement listed); the configurations with our statuses as
    OUT/etsuite_conv.json (copy to cases/nightly/ to update the corpus). ~1 h on 2 busy cores.

    nox -s etsuite -- [OUT] [--files test_conv2d ...] [--flows vulkan ...] [--tests NAME ...]
    nox -s etsuite -- OUT --table-only     (the side-by-side again from a finished OUT)"""
    args = list(session.posargs)
    out = args.pop(0) if args and not args[0].startswith("-") else "runs/etsuite"
    session.run("python", "-m", "harness.run.etsuite", "--out", out,
                "--cases-out", f"{out}/etsuite_conv.json", *args)
