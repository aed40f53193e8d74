"""``harness run ... --executorch REF --source GITDIR`` / ``--executorch-tree DIR``: the whole
run at an ExecuTorch commit or working tree.

The run itself is the ordinary ``harness run``, started in a subprocess whose environment makes
the tree's Python side the ``executorch`` every process imports (its lowering workers' forkserver
included): ``PYTHONPATH`` begins with the overlay (``git_source.overlay_from_dir``: the tree's
``exir/`` and ``backends/`` over the installed wheel), and ``$CONVCONF_EXECUTORCH_TREE`` names the
tree's record (``runtimes/tree.py``), from which every cell takes what its verdict rests on and
the run header its commit. Before it starts, in this process:

1. the tree is read (a checkout: HEAD and its uncommitted changes; a ref: exported from the
   repository, a bare one too, into ``<cache>/trees/commits/<commit12>``) and compared with the
   wheel (schemas, the native runtime and kernels, with git against the wheel's own commit);
2. the overlay is laid out (``<cache>/trees/overlays/<python digest>``, kept) and imported in a
   subprocess against the wheel: a tree whose Python does not import is one line, exit 2;
3. the Vulkan plug-in is built from the tree (``git_source.build_vulkan_from_dir``: the bisect's
   incremental build tree, the library kept per source digest); one that does not build leaves
   the Vulkan lane NO_RUNTIME with that reason.

Lowered programs go to ``<cache>/trees/lowered/<python digest>``: two trees whose Python sides are
the same share them (a commit that changed only C++ lowers nothing again), and none is ever
served to a tree whose Python differs. Every check runs before the run folder is touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.run.bisect_step import lowered_dir, overlay_dir
from harness.runtimes import RuntimeBuildError, cache_root, git_source, tree as tree_mod
from harness.runtimes.tree import EtTree, TreeError

OPTIONS = ("--executorch", "--source", "--executorch-tree")  # each takes one value
RECORD = "executorch-tree.json"  # in the run folder: the tree's record
IMPORT_FAILED = 3
REPO_ROOT = Path(__file__).resolve().parents[2]


def inner_argv(argv: list[str]) -> list[str]:
    """``argv`` without the tree options (``--opt VALUE`` and ``--opt=VALUE``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in OPTIONS:
            skip = True
        elif not a.startswith(tuple(o + "=" for o in OPTIONS)):
            out.append(a)
    return out


def read_tree(executorch: str | None, source: str | None, tree_dir: str | None,
              cache: str | None = None) -> EtTree:
    """The tree the options name, compared with the installed wheel. TreeError: one line."""
    from harness.runtimes import wheel as wheel_mod

    if executorch and tree_dir:
        raise TreeError("--executorch REF and --executorch-tree DIR exclude each other")
    if executorch:
        if not source:
            raise TreeError("--executorch REF needs --source GITDIR (an ExecuTorch git repository)")
        tree = tree_mod.from_ref(Path(source), executorch,
                                 cache_root(cache) / "trees" / "commits")
    else:
        if source:
            raise TreeError("--source names the repository of --executorch REF; a checkout "
                            "given with --executorch-tree is its own")
        tree = tree_mod.from_checkout(Path(tree_dir))
    wheel = wheel_mod.installed()
    return tree_mod.compare_with_wheel(tree, wheel.root, wheel.git_version, wheel.version)


def overlay_for(tree: EtTree, cache: str | None = None) -> Path:
    """The tree's Python over the wheel, kept per Python digest."""
    dest = overlay_dir(tree.python_digest, cache)
    if not (dest / "OVERLAY.json").is_file():
        try:
            git_source.overlay_from_dir(Path(tree.path), dest.with_name(dest.name + ".tmp"),
                                        meta={"commit": tree.commit, "label": tree.label})
        except git_source.GitError as e:
            raise TreeError(str(e)) from None
        import shutil

        shutil.rmtree(dest, ignore_errors=True)
        os.rename(dest.with_name(dest.name + ".tmp"), dest)
    return dest


def environment(overlay: Path, record: Path | None = None) -> dict:
    """The environment of a process that runs at the tree."""
    path = [str(overlay), str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    if record is not None:
        env[tree_mod.ENV] = str(record)
    return env


def check_imports(overlay: Path, backends: list[str]) -> str:
    """'' when the tree's Python imports against the wheel and gives every backend's
    partitioners; else the one-line reason."""
    done = subprocess.run([sys.executable, "-m", "harness.run.at_tree", "--check-imports",
                           *backends], env=environment(overlay), capture_output=True, text=True)
    if done.returncode == 0:
        return ""
    lines = [ln.strip() for ln in (done.stderr or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else f"exit {done.returncode}"


def build_plugin(tree: EtTree, cache: str | None, jobs: int | None) -> EtTree:
    """The Vulkan plug-in from the tree (or why not) into the record."""
    try:
        built = git_source.build_vulkan_from_dir(
            Path(tree.path), tree.commit, cache, jobs,
            log=lambda s: print(s, file=sys.stderr), date=tree.date)
    except (RuntimeBuildError, git_source.GitError) as e:
        tree.vulkan_problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"run: Vulkan plug-in from {tree.label} does not build: {tree.vulkan_problem}",
              file=sys.stderr)
        return tree
    tree.vulkan_plugin = built.library
    how = ("kept from an earlier build" if built.tree == "cached" else
           f"built in {built.seconds:g} s, {built.files_changed} files changed, tree {built.tree}")
    print(f"run: Vulkan plug-in from {tree.label}: {built.library} ({how})", file=sys.stderr)
    return tree


def prepare(args) -> tuple[EtTree, Path]:
    """Everything a run at a tree needs before its run folder is touched -> (tree, overlay).
    TreeError (one line) for bad input."""
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    tree = read_tree(args.executorch, args.source, args.executorch_tree, args.cache_dir)
    overlay = overlay_for(tree, args.cache_dir)
    why = check_imports(overlay, backends)
    if why:
        raise TreeError(f"the Python side of {tree.label} does not import against the installed "
                        f"{tree.wheel}: {why}")
    if "vulkan" in backends and args.vulkan_runtime != "none":
        build_plugin(tree, args.cache_dir, args.jobs)
    return tree, overlay


def lowering_cache(tree: EtTree, cache: str | None = None) -> Path:
    """Where a run at ``tree`` keeps its lowered programs: one folder per Python digest."""
    return lowered_dir(tree.python_digest, cache)


def run(args, argv: list[str]) -> int:
    """The run at the tree (see the module doc) -> its exit code."""
    if args.resume:
        raise TreeError("--resume DIR continues a run at a tree by itself: leave out "
                        "--executorch / --executorch-tree")
    if not args.out:
        raise TreeError("run: --out DIR is required")
    if args.out.exists() and (args.out / "journal.jsonl").exists() and not args.overwrite:
        raise TreeError(f"{args.out} already holds a run; use --overwrite to replace it")
    tree, overlay = prepare(args)
    args.out.mkdir(parents=True, exist_ok=True)
    record = tree.save(args.out / RECORD)
    print(f"run: at {tree.label} ({tree.subject or tree.path}); Python over {tree.wheel}",
          file=sys.stderr)
    cmd = [sys.executable, "-m", "harness", *inner_argv(argv),
           "--vulkan-runtime", tree.vulkan_plugin or "none"]
    if not args.no_cache:
        cmd += ["--cache", str(lowering_cache(tree, args.cache_dir))]
    return subprocess.run(cmd, env=environment(overlay, record.resolve())).returncode


def resume(args, argv: list[str]) -> int | None:
    """``harness run --resume DIR`` of a run at a tree, from a process that is not at it: the
    resumed run in a subprocess at the same tree (its overlay, its record) -> its exit code;
    None for a run on the wheel (resumed here). TreeError when the tree's overlay is gone."""
    import json

    if os.environ.get(tree_mod.ENV):
        return None  # already at the tree: this is the resumed run itself
    record = Path(args.resume) / RECORD
    if not record.is_file():
        return None
    tree = EtTree.from_dict(json.loads(record.read_text()))
    overlay = overlay_dir(tree.python_digest, args.cache_dir)
    if not (overlay / "OVERLAY.json").is_file():
        raise TreeError(f"--resume {args.resume}: the overlay of {tree.label} ({overlay}) is "
                        f"gone: run it again")
    print(f"run: resuming at {tree.label}", file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "harness", *argv],
                          env=environment(overlay, record.resolve())).returncode


# --- inside the overlay -----------------------------------------------------------------------

def _check_main(backends: list[str]) -> int:
    from harness.chatter import hide_lowering_chatter

    hide_lowering_chatter()
    import logging

    logging.disable(logging.WARNING)
    overlay = Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]).resolve()
    try:
        import executorch.backends
        import executorch.exir

        from harness.stages import backends as registry

        for mod in (executorch.exir, executorch.backends):  # the tree's, not the wheel's
            if not str(Path(mod.__file__).resolve()).startswith(str(overlay)):
                raise ImportError(f"{mod.__name__} came from {mod.__file__}, not the overlay")
        for name in backends:
            registry.get(name).partitioners()
    except Exception as e:  # noqa: BLE001
        print(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        return IMPORT_FAILED
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-imports"]:
        sys.exit(_check_main(sys.argv[2:]))
    sys.exit(2)
