"""The ExecuTorch tree a run uses (``harness run --executorch REF --source GITDIR`` or
``--executorch-tree DIR``): which commit, whether it has uncommitted changes ("dirty"), and what
each cell's verdict rests on.

A run at a tree lowers with the tree's Python side (``exir/``, ``backends/``) laid over the
installed wheel (``git_source.overlay_from_dir``) and executes Vulkan programs on a plug-in built
from the tree's own ``backends/vulkan`` runtime; everything else native (the XNNPACK delegate,
the portable and quantized kernels of ops left outside a delegate, the program loader) is the
wheel's build. A verdict that executes is the tree's only where the tree's copy of that native
code equals the wheel's (``native`` below, compared with git against the wheel's own commit) and
the program schemas match; otherwise the cell is NO_RUNTIME with that reason
(``unfaithful``), never a silent guess. Lowering-stage verdicts (INVALID, LOWER_ERROR) rest on
the tree's Python alone.

The record is written once by the process that prepares the run (``harness/run/at_tree.py``) as
JSON and named to the run's processes by ``$CONVCONF_EXECUTORCH_TREE`` (``current()``).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from harness.runtimes import git_source
from harness.runtimes.git_source import GitError, Repo

ENV = "CONVCONF_EXECUTORCH_TREE"
# what a tree must hold to be ExecuTorch: its Python packages and the files the build reads
MARKERS = ("exir/__init__.py", "backends/__init__.py", "version.txt")
KERNEL_DIRS = ("kernels/portable/cpu", "kernels/quantized/cpu")
# what a ref run exports of its commit (a scratch tree; no work tree of the repository needed)
EXPORTED = (*git_source.OVERLAID, *git_source.PROGRAM_SCHEMAS, *git_source.VULKAN_PATHS,
            *KERNEL_DIRS, "version.txt", "LICENSE")
for _paths in git_source.NATIVE_PATHS.values():
    EXPORTED += tuple(p for p in _paths if p not in EXPORTED)


class TreeError(ValueError):
    """Bad input: not an ExecuTorch tree, an unknown ref. One line."""


@dataclass
class EtTree:
    path: str                       # the tree on disk (a checkout, or the commit exported)
    commit: str = ""                # its HEAD / the ref's commit ("" when not known)
    dirty: bool | None = False      # uncommitted changes (None: not a git checkout, unknown)
    changed: list = field(default_factory=list)  # the uncommitted files (at most 50)
    ref: str = ""                   # the ref asked for (--executorch), "" for a checkout
    source: str = ""                # the git repository it came from
    subject: str = ""
    date: str = ""
    version: str = ""               # version.txt
    python_digest: str = ""         # of what a lowering reads (git_source.python_files)
    vulkan_digest: str = ""         # of what the plug-in build compiles
    wheel: str = ""                 # "executorch 1.5.1 (3b6068392324)"
    # backend -> "" (the tree's copy of the wheel's native runtime is the same) or why a verdict
    # that executes on it is not the tree's
    native: dict = field(default_factory=dict)
    # kernel sources (kernels/portable|quantized/cpu) that differ from the wheel's commit;
    # None: the wheel's commit is not in the repository (cannot tell)
    kernels_moved: list | None = None
    schema_moved: list = field(default_factory=list)  # program schemas that differ from the wheel's
    vulkan_plugin: str = ""         # the plug-in built from the tree
    vulkan_problem: str = ""        # why there is none

    @property
    def label(self) -> str:
        """'cff6f4dd32e6' / 'cff6f4dd32e6 (dirty)' / 'tree DIR (no git: changes unknown)'."""
        head = self.commit[:12] if self.commit else f"tree {self.path}"
        if self.dirty is None:
            return f"{head} (not a git checkout: changes unknown)"
        return head + (" (dirty)" if self.dirty else "")

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}

    @classmethod
    def from_dict(cls, data: dict) -> EtTree:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    # --- what a cell rests on -------------------------------------------------------------
    def unfaithful(self, backend: str, undelegated_ops=(), patched: bool = False) -> str:
        """Why an executed verdict of this lane would not be the tree's ("" when it would)."""
        base = backend.split("@")[0]
        if "@" in backend:
            return ""  # a device lane: ingested results, judged where they ran
        if self.schema_moved:
            return (f"the program schema of {self.label} differs from the wheel's "
                    f"({', '.join(self.schema_moved)}): the wheel's runtime may not read it right")
        if base == "vulkan":
            if patched:
                return (f"runtime patches are built on the wheel's paired source, not on "
                        f"{self.label}")
            if not self.vulkan_plugin:
                return (f"no Vulkan plug-in built from {self.label}: "
                        f"{self.vulkan_problem or 'not built'}")
        why = self.native.get(base, "")
        if why:
            return why
        return self.kernels_unfaithful(undelegated_ops)

    def kernels_unfaithful(self, ops) -> str:
        """Ops run outside the delegate execute the wheel's kernels: the tree's must be the same."""
        ops = sorted(ops or ())
        if not ops:
            return ""
        if self.kernels_moved is None:
            return (f"ops outside the delegate ({', '.join(ops)}) run the wheel's kernels "
                    f"({self.wheel}), whose commit is not in {self.source or self.path}: cannot "
                    f"tell whether {self.label}'s are the same")
        differ = sorted(set(kernel_paths(ops)) & set(self.kernels_moved))
        return (f"kernels of ops outside the delegate differ from the wheel's: {', '.join(differ)}"
                if differ else "")

    def rests_on(self, backend: str) -> str:
        """One line: what this lane's verdicts rest on at the tree."""
        base = backend.split("@")[0]
        python = f"Python {self.label}"
        if base == "vulkan":
            native = (f"Vulkan plug-in from {self.label}" if self.vulkan_plugin else
                      f"no Vulkan plug-in ({self.vulkan_problem or 'not built'})")
        else:
            why = self.native.get(base, "")
            native = (f"{self.wheel} {base} runtime" +
                      (" (unverified)" if why else f", = {self.label}'s"))
        return f"{python}; {native}"


def kernel_paths(ops) -> list[str]:
    """The portable / quantized kernel sources of edge ops (``aten.slice_copy.Tensor`` ->
    kernels/portable/cpu/op_slice_copy.cpp, ...): what an op run outside a delegate executes."""
    paths = []
    for op in ops:
        name = op.split(".")[1] if "." in op else op
        for base in (name, name.split("_per_")[0]):
            paths += [f"kernels/portable/cpu/op_{base}.cpp", f"kernels/quantized/cpu/op_{base}.cpp"]
    return sorted(set(paths))


@functools.lru_cache(maxsize=1)
def current() -> EtTree | None:
    """The tree this process's run uses ($CONVCONF_EXECUTORCH_TREE), or None (the wheel)."""
    path = os.environ.get(ENV)
    if not path:
        return None
    return EtTree.from_dict(json.loads(Path(path).read_text()))


# --- reading a tree ---------------------------------------------------------------------------

def check_executorch(path: Path) -> None:
    if not path.is_dir():
        raise TreeError(f"{path}: no such folder")
    missing = [m for m in MARKERS if not (path / m).is_file()]
    if missing:
        raise TreeError(f"{path} is not an ExecuTorch source tree (no {', '.join(missing)})")


def _git(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True)


def from_checkout(path: Path) -> EtTree:
    """A developer's tree: its HEAD and uncommitted changes (none known without git)."""
    path = Path(path).resolve()
    check_executorch(path)
    tree = EtTree(str(path), version=(path / "version.txt").read_text().strip())
    top = _git(path, "rev-parse", "--show-toplevel")
    if top.returncode or Path(top.stdout.strip()).resolve() != path:
        commit_file = path / "ET_COMMIT"
        tree.commit = commit_file.read_text().strip() if commit_file.is_file() else ""
        tree.dirty = None
        return tree
    repo = Repo(path)
    tree.source = str(path)
    tree.commit = repo.rev("HEAD")
    info = repo.info(tree.commit)
    tree.subject, tree.date = info.subject, info.date
    status = _git(path, "status", "--porcelain", "--", *git_source.OVERLAID, "schema",
                  "kernels", "version.txt")
    tree.changed = [ln[3:] for ln in status.stdout.splitlines() if ln.strip()][:50]
    tree.dirty = bool(tree.changed)
    return tree


def from_ref(source: Path, ref: str, scratch: Path) -> EtTree:
    """Commit ``ref`` of the repository ``source`` (a bare one too), exported into
    ``scratch/<commit12>`` (kept: a second run at it exports nothing)."""
    try:
        repo = Repo(source)
        commit = repo.rev(ref)
    except GitError as e:
        raise TreeError(str(e)) from None
    dest = Path(scratch) / commit[:12]
    if not (dest / ".exported").is_file():
        staging = dest.with_name(dest.name + ".tmp")
        try:
            git_source.export(repo, commit, EXPORTED, staging)
        except GitError as e:
            shutil.rmtree(staging, ignore_errors=True)
            raise TreeError(str(e)) from None
        (staging / "ET_COMMIT").write_text(commit + "\n")
        (staging / ".exported").write_text(commit + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(staging, dest)
    check_executorch(dest)
    info = repo.info(commit)
    return EtTree(str(dest), commit=commit, ref=ref, source=str(Path(source).resolve()),
                  subject=info.subject, date=info.date,
                  version=(dest / "version.txt").read_text().strip())


def compare_with_wheel(tree: EtTree, wheel_root: Path, git_version: str,
                       version: str) -> EtTree:
    """Fill in the digests and what the tree's native code is against the wheel's build."""
    path = Path(tree.path)
    tree.wheel = f"executorch {version} ({git_version[:12]})"
    tree.python_digest = git_source.files_digest(path, git_source.python_files(path))[:16]
    tree.vulkan_digest = git_source.files_digest(path, git_source.vulkan_files(path))[:16]
    moved = []
    for src, in_wheel in git_source.SCHEMAS[""].items():
        ours, theirs = path / src, Path(wheel_root) / in_wheel
        if ours.is_file() and theirs.is_file() and (git_source.schema_text(ours.read_bytes())
                                                    != git_source.schema_text(theirs.read_bytes())):
            moved.append(src)
    tree.schema_moved = moved
    repo = None
    if tree.source:
        try:
            repo = Repo(tree.source)
        except GitError:
            repo = None
    known = repo is not None and repo.has(git_version)
    for backend, paths in git_source.NATIVE_PATHS.items():
        if not paths:
            continue
        if not known:
            tree.native[backend] = (
                f"the verdict would rest on the wheel's {backend} runtime ({tree.wheel}), whose "
                f"commit is not in {tree.source or 'any repository of this tree'}: cannot tell "
                f"whether {tree.label}'s {paths[0]} is the same")
            continue
        differ = _moved(repo, tree, git_version, paths)
        tree.native[backend] = (f"{tree.label}'s {backend} runtime differs from the wheel's "
                                f"({len(differ)} files, e.g. {differ[0]})" if differ else "")
    tree.kernels_moved = _moved(repo, tree, git_version, KERNEL_DIRS) if known else None
    return tree


def _moved(repo: Repo, tree: EtTree, other: str, paths) -> list[str]:
    """Files under ``paths`` that differ between the tree and commit ``other`` (a checkout: its
    working files, uncommitted changes included; an exported ref: its commit)."""
    if tree.ref:
        return repo.native_moved(tree.commit, other, paths)
    done = _git(Path(tree.path), "diff", "--name-only", other, "--", *paths,
                *git_source.NOT_NATIVE)
    return done.stdout.split()
