"""ExecuTorch at any commit of a git repository, for ``harness bisect`` (no work tree needed).

- ``Repo``: a checkout or a bare git dir; refs resolved to commits, a commit's subject, date,
  PR number (``(#12345)`` in the subject) and the files it touched.
- ``overlay``: the commit's Python side (``exir/``, ``backends/``: partitioners, passes,
  quantizers, serialization) laid over an installed release wheel: a folder ``ROOT/executorch``
  holding the commit's ``exir`` and ``backends`` (Python and data files only) and, as symlinks,
  every other top-level entry of the wheel (``lib/``, ``extension/`` with the pybindings,
  ``kernels/`` with the AOT libraries, ``data/bin/flatc``, ``version.py``...). ``PYTHONPATH=ROOT``
  in a subprocess makes ``executorch.exir`` / ``executorch.backends.*`` the commit's while every
  compiled library is the wheel's. The wheel's ``executorch`` is a namespace package, so nothing
  of it is shadowed except the two trees.
- ``schema_moved`` / ``native_moved``: what a verdict that executes the program would rest on
  from the wheel, and whether it differs from the commit's (then that verdict is not the
  commit's: the step is a skip).
- ``vulkan_tree`` + ``build_vulkan``: the Vulkan plug-in built from the commit's own
  ``backends/vulkan`` in ONE build tree reused across commits (files whose content did not
  change keep their mtime, so ninja recompiles only what the commit changed; ccache when there).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from harness.runtimes import RuntimeBuildError, cache_root

# the commit's Python side laid over the wheel; what of them the overlay keeps
OVERLAID = ("exir", "backends")
DATA_SUFFIXES = (".py", ".fbs", ".yaml", ".yml", ".json")
# program and scalar-type schemas live in schema/ in the source, in exir/_serialize/ in a wheel
PROGRAM_SCHEMAS = ("schema/program.fbs", "schema/scalar_type.fbs")
# what the Vulkan plug-in build compiles (source.NEEDED + the CMake files upstream keeps beside)
VULKAN_PATHS = ("backends/vulkan/runtime", "backends/vulkan/serialization/schema.fbs")
PR_RE = re.compile(r"\(#(\d+)\)")
# the native side a lane's executed verdict rests on, besides the delegate: a cell that ran
# compares the wheel's build of these with the commit's (tests and build files do not count)
NATIVE_PATHS = {
    "xnnpack": ("backends/xnnpack/runtime", "backends/xnnpack/third-party",
                "backends/xnnpack/serialization/schema.fbs",
                "backends/xnnpack/serialization/runtime_schema.fbs"),
    "vulkan": (),  # the plug-in is built from the commit itself
}
SCHEMAS = {  # serialized formats the wheel's runtime reads (source path -> wheel path)
    "": {"schema/program.fbs": "exir/_serialize/program.fbs",
         "schema/scalar_type.fbs": "exir/_serialize/scalar_type.fbs"},
    "xnnpack": {"backends/xnnpack/serialization/schema.fbs":
                "backends/xnnpack/serialization/schema.fbs"},
    "vulkan": {},  # built from the commit: its own schema on both sides
}
NOT_NATIVE = (":!*/test/*", ":!*/tests/*", ":!*.bzl", ":!*TARGETS", ":!*BUCK", ":!*.md",
              ":!*.py")


class GitError(Exception):
    """Bad git input (not a repository, unknown ref): one line."""


@dataclass
class CommitInfo:
    commit: str
    subject: str
    date: str
    author: str
    pr: int | None
    files: list = field(default_factory=list)  # touched under backends/, exir/, kernels/

    def to_dict(self) -> dict:
        return {"commit": self.commit, "subject": self.subject, "pr": self.pr, "date": self.date,
                "author": self.author, "files": self.files}


def pr_number(subject: str) -> int | None:
    found = PR_RE.findall(subject or "")
    return int(found[-1]) if found else None


class Repo:
    def __init__(self, path: str | Path):
        path = Path(path)
        if not path.exists():
            raise GitError(f"{path}: no such folder")
        if not shutil.which("git"):
            raise GitError("git is not installed")
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "--absolute-git-dir"],
                              capture_output=True, text=True)
        if done.returncode:
            raise GitError(f"{path}: not a git repository")
        self.path = path
        self.git_dir = Path(done.stdout.strip())

    def git(self, *args: str, check: bool = True, text: bool = True, **kw):
        done = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], capture_output=True,
                              text=text, **kw)
        if check and done.returncode:
            err = done.stderr if text else done.stderr.decode(errors="replace")
            raise GitError(f"git {args[0]} failed: {(err.strip().splitlines() or ['?'])[-1]}")
        return done

    def rev(self, ref: str) -> str:
        done = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if done.returncode or not done.stdout.strip():
            raise GitError(f"{ref!r} is not a commit in {self.path}")
        return done.stdout.strip()

    def has(self, commit: str) -> bool:
        return bool(commit) and self.git("cat-file", "-e", f"{commit}^{{commit}}",
                                         check=False).returncode == 0

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.git("merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    def count(self, good: str, bad: str) -> int:
        return int(self.git("rev-list", "--count", f"{good}..{bad}").stdout.strip() or 0)

    def info(self, commit: str, under=("backends/", "exir/", "kernels/")) -> CommitInfo:
        out = self.git("show", "-s", "--format=%H%n%s%n%cI%n%an", commit).stdout.splitlines()
        files = self.git("diff-tree", "--no-commit-id", "-r", "--name-only", "--root",
                         commit).stdout.split()
        return CommitInfo(out[0], out[1], out[2], out[3], pr_number(out[1]),
                          [f for f in files if f.startswith(tuple(under))])

    def read(self, commit: str, path: str) -> bytes | None:
        done = self.git("show", f"{commit}:{path}", check=False, text=False)
        return done.stdout if done.returncode == 0 else None

    def archive(self, commit: str, paths: Iterable[str]) -> tarfile.TarFile:
        """The commit's files under ``paths`` (those that exist) as a tar stream."""
        present = [p for p in paths if self.git("cat-file", "-e", f"{commit}:{p}",
                                                 check=False).returncode == 0]
        if not present:
            raise GitError(f"{commit[:12]} has none of {', '.join(paths)}")
        done = self.git("archive", "--format=tar", commit, "--", *present, text=False)
        return tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r:")

    def native_moved(self, commit: str, other: str, paths: Iterable[str]) -> list[str]:
        """Files under ``paths`` (tests, build files, Python left out) that differ between the
        two commits: where a verdict resting on ``other``'s native build is not ``commit``'s."""
        paths = list(paths)
        if not paths:
            return []
        out = self.git("diff", "--name-only", commit, other, "--", *paths, *NOT_NATIVE).stdout
        return out.split()


def export(repo: Repo, commit: str, paths: Iterable[str], dest: Path,
           keep: Callable[[str], bool] = lambda name: True) -> int:
    """Write the commit's files under ``paths`` (those ``keep`` accepts) into ``dest`` (created,
    emptied first). -> files written."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    n = 0
    with repo.archive(commit, paths) as tf:
        for m in tf:
            if not m.isfile() or not keep(m.name):
                continue
            target = dest / m.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tf.extractfile(m).read())
            n += 1
    return n


def wheel_root() -> Path:
    """The installed executorch wheel's package folder (read, not imported)."""
    from harness.runtimes import wheel

    return wheel.installed().root


def overlay(repo: Repo, commit: str, dest: Path, wheel: Path | None = None) -> Path:
    """The commit's exir/ and backends/ over the wheel at ``wheel`` -> the folder to put first
    on PYTHONPATH (``dest``). Rebuilt from scratch each time (seconds)."""
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest / ".export"
    n = export(repo, commit, [*OVERLAID, *PROGRAM_SCHEMAS], tmp,
               keep=lambda name: name.endswith(DATA_SUFFIXES))
    return lay_over(tmp, dest, wheel, {"commit": commit, "files": n}, commit[:12])


def overlay_from_dir(tree: Path, dest: Path, wheel: Path | None = None,
                     meta: dict | None = None) -> Path:
    """``overlay`` from an ExecuTorch source tree on disk (a checkout with its uncommitted
    changes, or a commit exported earlier) instead of a commit of a repository."""
    tree = Path(tree)
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest / ".export"
    n = 0
    for f in python_files(tree):
        target = tmp / f.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
        n += 1
    return lay_over(tmp, dest, wheel, {**(meta or {}), "tree": str(tree), "files": n}, str(tree))


def python_files(tree: Path) -> list[Path]:
    """What a lowering reads of a source tree (the overlay's content): exir/ and backends/
    Python and data files, and the program schemas; sorted."""
    tree = Path(tree)
    found = []
    for top in OVERLAID:
        found += [p for p in (tree / top).rglob("*") if p.is_file() and p.name.endswith(
            DATA_SUFFIXES) and "__pycache__" not in p.parts]
    found += [tree / s for s in PROGRAM_SCHEMAS if (tree / s).is_file()]
    return sorted(found)


def lay_over(tmp: Path, dest: Path, wheel: Path | None, meta: dict, what: str) -> Path:
    """The exported exir/ and backends/ in ``tmp`` (inside ``dest``) moved into
    ``dest/executorch``, the program schemas where the wheel's serializer reads them, every
    other top-level entry of the wheel linked beside them; OVERLAY.json says what it holds."""
    wheel = Path(wheel or wheel_root())
    pkg = dest / "executorch"
    pkg.mkdir(parents=True, exist_ok=True)
    missing = [top for top in OVERLAID if not (tmp / top / "__init__.py").is_file()]
    if missing:  # else the wheel's own would answer for the commit: never
        shutil.rmtree(dest, ignore_errors=True)
        raise GitError(f"{what} has no Python package {', '.join(m + '/' for m in missing)}"
                       f" to lay over the wheel")
    for top in OVERLAID:
        os.rename(tmp / top, pkg / top)
    for schema in PROGRAM_SCHEMAS:  # where the wheel's serializer reads them
        if (tmp / schema).exists() and (pkg / "exir" / "_serialize").is_dir():
            shutil.copy2(tmp / schema, pkg / "exir" / "_serialize" / Path(schema).name)
    shutil.rmtree(tmp, ignore_errors=True)
    for entry in wheel.iterdir():  # everything else is the wheel's own
        if entry.name not in OVERLAID and entry.name != "__pycache__":
            os.symlink(entry, pkg / entry.name)
    (dest / "OVERLAY.json").write_text(json.dumps(
        {**meta, "wheel": str(wheel), "overlaid": list(OVERLAID)}) + "\n")
    return dest


def schema_moved(repo: Repo, commit: str, backend: str, wheel: Path | None = None) -> list[str]:
    """The serialized-format schemas the wheel's runtime reads whose text differs from the
    commit's (a program written by the commit may not be what the wheel reads)."""
    wheel = Path(wheel or wheel_root())
    moved = []
    for src, in_wheel in {**SCHEMAS[""], **SCHEMAS.get(backend, {})}.items():
        ours = repo.read(commit, src)
        theirs = (wheel / in_wheel).read_bytes() if (wheel / in_wheel).exists() else None
        if ours is not None and theirs is not None and schema_text(ours) != schema_text(theirs):
            moved.append(src)
    return moved


def schema_text(fbs: bytes) -> list[str]:
    """A flatbuffers schema without its comments and blank lines, whitespace collapsed: what
    decides the binary format (a typo fixed in a comment, as #20758 did in program.fbs, moves
    nothing a runtime reads)."""
    out = []
    for line in fbs.decode(errors="replace").splitlines():
        line = " ".join(line.split("//", 1)[0].split())
        if line:
            out.append(line)
    return out


# --- the Vulkan plug-in from the commit's own source, incrementally --------------------------

def _sync(src: Path, dest: Path) -> tuple[int, int]:
    """Make ``dest`` hold exactly ``src``'s files; a file whose bytes did not change is not
    touched (its mtime stays: ninja does not recompile it). -> (written, removed)."""
    written = removed = 0
    want = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    if dest.exists():
        for p in sorted(dest.rglob("*"), reverse=True):
            rel = p.relative_to(dest)
            if p.is_file() and rel not in want:
                p.unlink()
                removed += 1
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    for rel in want:
        a, b = src / rel, dest / rel
        data = a.read_bytes()
        if b.exists() and b.read_bytes() == data:
            continue
        b.parent.mkdir(parents=True, exist_ok=True)
        b.write_bytes(data)
        written += 1
    return written, removed


def vulkan_tree(repo: Repo, commit: str, dest: Path) -> tuple[Path, int]:
    """The commit's Vulkan runtime source laid out as a source tree (``source.from_path`` reads
    it: backends/vulkan/..., ET_COMMIT, ET_COMMIT_DATE, version.txt) at ``dest``, updated in
    place. -> (dest, files written)."""
    staging = dest.with_name(dest.name + ".new")
    export(repo, commit, [*VULKAN_PATHS, "version.txt", "LICENSE"], staging)
    info = repo.info(commit)
    (staging / "ET_COMMIT").write_text(commit + "\n")
    (staging / "ET_COMMIT_DATE").write_text(info.date[:10] + "\n")
    written, _ = _sync(staging, dest)
    shutil.rmtree(staging, ignore_errors=True)
    return dest, written


@dataclass
class PluginBuild:
    library: str
    commit: str
    seconds: float
    files_changed: int
    phases: dict
    tree: str = ""  # how the build tree was obtained (in place, seeded from the stock tree, cold)


def bisect_root(cache: str | None = None) -> Path:
    return cache_root(cache) / "bisect"


# --- the one bisect build tree, and where it is built ------------------------------------------
#
# CMake writes absolute paths into every ninja command (the object files are even named after the
# source's absolute path), so a build tree reuses objects only at the path it was configured at.
# The bisect tree lives at rest in ``<cache>/bisect/vulkan/<version>/tree`` (cmake/, native/,
# src/); ``PINNED`` in it names the path it is built at. Seeded from the stock plug-in's build
# tree, that path is the stock tree's own slot (``<cache>/runtimes/build/<version>-<commit12>``,
# vulkan.py's one build place of that wheel+source): for a build the bisect tree is renamed into
# the slot (the tree that was there renamed aside, and back after), under the runtime cache's
# build lock, so the stock objects compile nothing the commit did not change. Without a stock
# tree the bisect tree is built where it lies (the first build is cold).

PINNED = "pinned.txt"   # in the bisect tree: the absolute path its CMake cache is pinned to
SWAP = "swapped.json"   # in the bisect root while the tree is in a slot: how to put things back


def copy_build_tree(src: Path, dest: Path) -> None:
    """Copy a plug-in build tree keeping mtimes (ninja compares them) and links, without its
    ``src/`` (a build lays out its own sources); atomic by rename."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True,
                    ignore=lambda folder, names: ["src"] if Path(folder) == src else [])
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)


@dataclass
class StockTree:
    slot: Path       # where every build of that wheel+source happens (vulkan.py's slot)
    name: str        # its set name (<version>-<commit12>)
    tree: Path       # where the stock build tree is now (the slot, or parked as <name>-stock)
    source: Path     # the stock entry's source.tar.gz: the sources its objects were built from
    commit: str


def stock_tree(cache: str | None = None) -> StockTree | None:
    """The stock plug-in's build tree for the installed wheel (None: no stock plug-in, or its
    build tree or source copy is gone)."""
    from harness.runtimes import vulkan

    m = vulkan.installed(cache)
    if m is None or not m.source_copy.is_file():
        return None
    name = f"{m.executorch_version}-{m.source_commit[:12]}"
    build_root = vulkan.runtimes_dir(cache) / "build"
    slot = build_root / name
    for tree in (slot, build_root / f"{name}-stock"):
        marker = tree / vulkan.TREE_OWNER
        owner = marker.read_text().strip() if marker.exists() else name
        if (tree / "cmake" / "CMakeCache.txt").is_file() and owner == name:
            return StockTree(slot, name, tree, m.source_copy, m.source_commit)
    return None


def _owner_of(tree: Path, default: str) -> str | None:
    from harness.runtimes import vulkan

    if not tree.is_dir():
        return None
    marker = tree / vulkan.TREE_OWNER
    return marker.read_text().strip() if marker.exists() else default


def _recover(root: Path) -> None:
    """Undo a swap a killed build left behind (the bisect tree in a slot, a tree set aside)."""
    journal = root / SWAP
    if not journal.exists():
        return
    j = json.loads(journal.read_text())
    slot, aside, mine = Path(j["slot"]), Path(j["aside"]) if j["aside"] else None, root / "tree"
    if not mine.exists():
        if _owner_of(slot, "") == j["owner"]:
            os.rename(slot, mine)
        elif (slot.parent / j["owner"]).is_dir():  # vulkan.py parked it under its set name
            os.rename(slot.parent / j["owner"], mine)
    if aside and aside.exists():
        if not slot.exists():
            os.rename(aside, slot)
        else:  # the slot was rebuilt meanwhile: the tree set aside is stale
            shutil.rmtree(aside, ignore_errors=True)
    journal.unlink()


def _seed(root: Path, cache: str | None, wheel, log) -> str:
    """Lay out the bisect tree ``root/tree`` (absent): a copy of the stock build tree with the
    stock sources at their tarball mtimes (older than its objects), pinned to the stock slot;
    else an empty tree pinned where it lies. -> how."""
    from harness.runtimes import source as source_mod, vulkan

    mine = root / "tree"
    stock = stock_tree(cache)
    if stock is None:
        mine.mkdir(parents=True, exist_ok=True)
        (mine / PINNED).write_text(str(mine) + "\n")
        (mine / vulkan.TREE_OWNER).write_text(f"bisect-{wheel.version}\n")
        log("build tree: no stock plug-in build tree to start from: cold")
        return "cold (no stock build tree)"
    copy_build_tree(stock.tree, mine)
    source_mod.from_path(stock.source, wheel).extract(mine / "src")
    (mine / PINNED).write_text(str(stock.slot) + "\n")
    (mine / vulkan.TREE_OWNER).write_text(f"{stock.name}-bisect\n")
    log(f"build tree: seeded from the stock tree {stock.tree} (built at {stock.slot})")
    return f"seeded from the stock build tree ({stock.name})"


def build_vulkan(repo: Repo, commit: str, cache: str | None = None, jobs: int | None = None,
                 log: Callable[[str], None] = print) -> PluginBuild:
    """The Vulkan plug-in for the installed wheel from ``commit``'s own backends/vulkan, in the
    one bisect build tree (``<cache>/bisect/vulkan/<version>/tree``, seeded from the stock
    plug-in's build tree and built at its path, see above): sources synced in place, so an
    incremental ninja run recompiles what the commit changed; the library is kept per commit
    (``plugins/<commit12>.so``: a commit built once is not built again). RuntimeBuildError
    (one line) when it does not build or does not register VulkanBackend."""
    return _build_plugin(commit[:12], commit, lambda dest: vulkan_tree(repo, commit, dest)[1],
                         cache, jobs, log)


def vulkan_files(tree: Path) -> list[Path]:
    """The files of a source tree the Vulkan plug-in build compiles (VULKAN_PATHS, version.txt),
    sorted."""
    tree = Path(tree)
    found = []
    for rel in (*VULKAN_PATHS, "version.txt"):
        p = tree / rel
        found += [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
    return sorted(found)


def files_digest(tree: Path, files: Iterable[Path]) -> str:
    """sha256 of (relative path, bytes) of ``files`` under ``tree``: a source digest."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(tree).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def build_vulkan_from_dir(tree: Path, commit: str, cache: str | None = None,
                          jobs: int | None = None, log: Callable[[str], None] = print,
                          date: str = "") -> PluginBuild:
    """``build_vulkan`` from a source tree on disk (uncommitted changes included); the library is
    kept per digest of the files the build compiles (``plugins/src-<digest16>.so``), so two trees
    whose Vulkan runtime is the same share it. ``commit``: what ET_COMMIT says (the tree's HEAD)."""
    tree = Path(tree)
    files = vulkan_files(tree)
    if not any(f.is_relative_to(tree / VULKAN_PATHS[0]) for f in files):
        raise RuntimeBuildError(f"{tree} has no {VULKAN_PATHS[0]} to build the plug-in from")
    key = "src-" + files_digest(tree, files)[:16]

    def lay(dest: Path) -> int:
        staging = dest.with_name(dest.name + ".new")
        shutil.rmtree(staging, ignore_errors=True)
        for f in files + [tree / "LICENSE"] * (tree / "LICENSE").is_file():
            target = staging / f.relative_to(tree)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
        (staging / "ET_COMMIT").write_text((commit or "0" * 40) + "\n")
        (staging / "ET_COMMIT_DATE").write_text((date[:10] or "1970-01-01") + "\n")
        written, _ = _sync(staging, dest)
        shutil.rmtree(staging, ignore_errors=True)
        return written

    return _build_plugin(key, commit, lay, cache, jobs, log)


def _build_plugin(key: str, commit: str, lay: Callable[[Path], int], cache: str | None,
                  jobs: int | None, log: Callable[[str], None]) -> PluginBuild:
    """The build behind ``build_vulkan``: ``lay(dest)`` puts the sources into the bisect tree's
    ``src/executorch`` (-> files written); the library is kept as ``plugins/<key>.so``."""
    from harness.runtimes import toolchain, vulkan, wheel as wheel_mod

    wheel = wheel_mod.installed()
    root = bisect_root(cache) / "vulkan" / wheel.version
    done = root / "plugins" / f"{key}.so"
    if done.exists():
        return PluginBuild(str(done), commit, 0.0, 0, {"cached": True}, "cached")
    root.mkdir(parents=True, exist_ok=True)
    build_lock = vulkan.runtimes_dir(cache) / ".build.lock"
    build_lock.parent.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    phases: dict = {}
    with open(root / ".lock", "w") as lock, open(build_lock, "w") as shared:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fcntl.flock(shared, fcntl.LOCK_EX)  # vulkan.py's: no stock or patched build meanwhile
        vulkan.require_tools(cache)
        _recover(root)
        mine = root / "tree"
        t = time.perf_counter()
        how = "in place"
        if not (mine / "cmake").is_dir() or not (mine / PINNED).exists():
            shutil.rmtree(mine, ignore_errors=True)
            how = _seed(root, cache, wheel, log)
        phases["tree"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        changed = lay(mine / "src" / "executorch")
        phases["source"] = round(time.perf_counter() - t, 1)
        tc = toolchain.ensure_next_release_tools(cache_root(cache), log)
        jobs = jobs or len(os.sched_getaffinity(0))
        pinned = Path((mine / PINNED).read_text().strip())
        work, aside = mine, None
        if pinned != mine:  # built at the stock slot: swap it in, whatever was there aside
            owner = (mine / vulkan.TREE_OWNER).read_text().strip()
            if pinned.exists():
                aside = pinned.with_name(pinned.name + ".bisect-aside")
                shutil.rmtree(aside, ignore_errors=True)
            (root / SWAP).write_text(json.dumps({"slot": str(pinned), "owner": owner,
                                                 "aside": str(aside) if aside else ""}) + "\n")
            if aside:
                os.rename(pinned, aside)
            os.rename(mine, pinned)
            work = pinned
        try:
            phases.update(vulkan.compile_plugin(
                work, wheel, tc, jobs, lambda line: log(f"plug-in {commit[:12]}: {line}"),
                target=vulkan.LIBRARY))
            done.parent.mkdir(parents=True, exist_ok=True)
            tmp = done.with_suffix(".tmp")
            shutil.copy2(work / "cmake" / vulkan.LIBRARY, tmp)
        finally:
            if work != mine:
                os.rename(work, mine)
                if aside:
                    os.rename(aside, pinned)
                (root / SWAP).unlink(missing_ok=True)
        why = vulkan.registers(tmp)
        if why:
            tmp.unlink()
            raise RuntimeBuildError(f"the plug-in built from {commit[:12]} does not register "
                                    f"{vulkan.BACKEND}: {why}")
        os.rename(tmp, done)
        (root / "plugins" / f"{key}.json").write_text(json.dumps(
            {"commit": commit, "phases": phases, "files_changed": changed, "tree": how,
             "sha256": hashlib.sha256(done.read_bytes()).hexdigest()}) + "\n")
    return PluginBuild(str(done), commit, round(time.perf_counter() - t_all, 1), changed, phases,
                       how)
