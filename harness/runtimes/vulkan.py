"""Build, find and load the Vulkan runtime plug-in for the installed executorch wheel.

Cached as ``<cache>/runtimes/<executorch version>-<source commit[:12]>/`` holding the library,
``manifest.json`` (source commit and skew, glslc version, build seconds, library sha256, the conv
shader universe of the source, ...) and ``source.tar.gz``, the ExecuTorch source it was built
from (half a megabyte). An entry carries what it needs: nothing in it names a path of the
checkout or the tarball it was built from, so a cache built by a clone that is gone since (or a
cache folder moved elsewhere) serves a new clone whole: coverage's shader list and the patched
plug-ins' builds read the entry's own source copy. Paths in the manifest (library, runner) are
re-anchored to the folder the manifest is read from.
A build whose inputs (wheel, source digest, CMake project, toolchain, source patches) match a
manifest whose library still has its recorded sha256 is a cache hit and compiles nothing.

Source patches (``patching``, ``patches/*.diff``: fixes for runtime bugs) make a separate
plug-in, ``<version>-<commit12>-p<digest8>/``, whose manifest lists them (name, file, sha256).

Build trees: ``<cache>/runtimes/build/<version>-<commit12>/`` is the one place where every patch
set of one (wheel, source) is built: CMake writes absolute paths into every ninja command, so
only a tree at the same path can reuse another's objects. The trees of the other sets are
parked beside it (``...-stock/``, ``...-p<digest8>/``) and swapped in by a rename; a patch
set's first build starts from a copy of the stock tree, so ninja recompiles only the files the
patches touched (the patched files are newer than the objects, the others keep the tarball's
mtimes). ``tree.txt`` in a tree names the set it belongs to. Where the stock tree is gone
(`harness cache prune` drops build trees before plug-ins), a set's first build starts from
another set's tree instead, and the files that set's patches changed (its manifest) are made
newer than their objects so that ninja recompiles them (``seeded-from.txt`` until it built):
a cold patched build was 200-400 s on 2 cores, a seeded one 20-40 s.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from harness.runtimes import (NATIVE, RuntimeBuildError, cache_root, patching,
                              source as source_mod, toolchain, wheel as wheel_mod)

LIBRARY = "libexecutorch_backend_vulkan.so"
RUNNER = "convconf_runner"  # native runner (runner.cpp) for programs run on another machine
BACKEND = "VulkanBackend"
BUILDER_VERSION = "1"  # bump when the build recipe changes in a way the inputs do not show
SOURCE_COPY = "source.tar.gz"  # in a cache entry: the source it was built from


def _keep_source(src, folder: Path) -> None:
    """Put the source ``src`` (a source.Source) into cache entry ``folder`` as SOURCE_COPY:
    the tarball as it is, a tree packed (the parts the build compiles, with ET_COMMIT)."""
    import tarfile

    dest = Path(folder) / SOURCE_COPY
    tmp = dest.with_name(dest.name + ".tmp")
    if src.tarball:
        shutil.copyfile(src.tarball, tmp)
    else:
        with tarfile.open(tmp, "w:gz") as tf:
            for rel in (*source_mod.NEEDED, "version.txt", "ET_COMMIT", "ET_COMMIT_DATE"):
                if (src.tree / rel).exists():
                    tf.add(src.tree / rel, arcname=rel)
            if not (src.tree / "ET_COMMIT").exists():
                data = (src.commit + "\n").encode()
                info = tarfile.TarInfo("ET_COMMIT")
                info.size = len(data)
                import io
                tf.addfile(info, io.BytesIO(data))
    os.replace(tmp, dest)


def _universe_label(m) -> str:
    return f"source {m.source_commit[:12]} ({m.source_origin or 'unnamed'})" + (
        f", patched: {', '.join(m.patch_names)}" if m.patches else "")


@dataclass
class Manifest:
    runtime: str
    library: str                  # absolute path of the cached library
    runner: str                   # the native runner built beside it ("" where it could not be)
    library_sha256: str
    library_bytes: int
    executorch_version: str
    executorch_git_version: str   # the wheel's own commit
    source_commit: str
    source_version_txt: str
    source_commit_date: str
    source_origin: str            # the source's file or folder *name* (provenance, never read)
    source_exact: bool
    skew_note: str
    glslc_version: str
    toolchain_packages: list
    build_seconds: float
    phase_seconds: dict
    jobs: int
    built_at: str
    inputs_key: str
    cached: bool = False          # set on a cache hit (not stored)
    extra: dict = field(default_factory=dict)
    # source patches applied before the build, in order: {"name", "file", "sha256", "files"}
    patches: list = field(default_factory=list)
    source_digest: str = ""       # the source's digest (Source.digest): how a copy is recognised
    # the conv shader universe of the (patched) source (shaders.ShaderUniverse.to_dict())
    conv_shaders: dict = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> "Manifest | None":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
            m = cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
        except (OSError, ValueError, TypeError):
            return None
        # an entry may have been built elsewhere (another cache root) and moved: its files are
        # where its manifest is
        m.library = str(path.parent / LIBRARY)
        if m.runner:
            m.runner = str(path.parent / RUNNER)
        return m

    def write(self, path: Path) -> None:
        data = asdict(self)
        data.pop("cached")
        tmp = Path(path).with_name(Path(path).name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, path)

    @property
    def folder(self) -> Path:
        return Path(self.library).parent

    @property
    def source_copy(self) -> Path:
        """The entry's own copy of the source it was built from."""
        return self.folder / SOURCE_COPY

    def source_path(self) -> str | None:
        """A path of the source this plug-in was built from, to build its patched siblings
        from: the entry's own copy, else one found by commit and digest (an entry cached
        before entries carried their source), copied in. None when neither is there."""
        if self.source_copy.is_file():
            return str(self.source_copy)
        found = source_mod.locate(self.source_commit, self.source_digest,
                                  self.folder.parent / "sources")
        if found is None:
            return None
        _keep_source(found, self.folder)
        return str(self.source_copy)

    def shader_universe(self):
        """The conv shaders this plug-in's source can dispatch (shaders.ShaderUniverse), from
        the manifest, else from the source copy (computed once, then kept in the manifest)."""
        from harness.runtimes import shaders

        if self.conv_shaders.get("families"):
            return shaders.ShaderUniverse.from_dict(self.conv_shaders)
        where = self.source_path()
        if where is None:
            return shaders.ShaderUniverse(
                source=self.source_origin,
                problem=f"runtime source {self.source_commit[:12]} is not in its cache entry "
                        f"{self.folder} and no source with that commit was found (rebuild: "
                        f"python -m harness runtime build vulkan)")
        universe = shaders.conv_shaders(where, label=_universe_label(self))
        if not universe.problem:
            self.conv_shaders = universe.to_dict()
            self.write(self.folder / "manifest.json")
        return universe

    @property
    def patch_names(self) -> list[str]:
        return [p["name"] for p in self.patches]

    def describe_patches(self) -> str:
        """'stock' or 'patched: NAME (sha256 prefix), ...' for headers and logs."""
        if not self.patches:
            return "stock (no source patches)"
        return "patched: " + ", ".join(f"{p['name']} ({p['sha256'][:12]})" for p in self.patches)

    def summary(self) -> dict:
        """What a run header records about the runtime under test."""
        return {"library": self.library, "library_sha256": self.library_sha256[:16],
                "source_commit": self.source_commit, "source_exact": self.source_exact,
                "skew_note": self.skew_note, "executorch_version": self.executorch_version,
                "glslc_version": self.glslc_version,
                "patches": [{"name": p["name"], "file": p.get("file", ""),
                             "sha256": p["sha256"][:16]} for p in self.patches]}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _inputs_key(wheel, src, applied: list | None = None) -> str:
    recipe = b"".join(p.read_bytes() for p in sorted(NATIVE.iterdir()) if p.is_file())
    inputs = [BUILDER_VERSION, wheel.version, wheel.git_version, src.commit, src.digest,
              hashlib.sha256(recipe).hexdigest(), toolchain.TOOLCHAIN_VERSION]
    if applied:  # stock keys stay what they were before patches existed
        inputs.append([[a["name"], a["sha256"]] for a in applied])
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:24]


def dest_name(wheel, src, applied: list | None = None) -> str:
    """The cache folder of the plug-in built from ``src`` (with the ``applied`` patches)."""
    base = f"{wheel.version}-{src.commit[:12]}"
    return f"{base}-p{patching.digest(applied)[:8]}" if applied else base


def runtimes_dir(cache: str | None = None) -> Path:
    return cache_root(cache) / "runtimes"


def build(source: str | None = None, jobs: int | None = None, cache: str | None = None,
          log: Callable[[str], None] = print, patches: tuple[str, ...] = (),
          install: bool = True) -> Manifest:
    """Build (or find in the cache) the plug-in for the installed wheel, with the named source
    ``patches`` (``patching.list_patches()``) applied. ``install=False`` (a run building a
    patched sibling) installs no build tools: missing ones are a RuntimeBuildError naming the
    command that installs them. Concurrent callers (pytest-xdist
    workers, parallel CI jobs) wait for one build and then hit its cache. An unknown patch, or
    one that does not apply to the source, is a RuntimeBuildError before anything is built."""
    chosen = patching.resolve(patches)
    wheel = wheel_mod.installed()
    root = runtimes_dir(cache)
    src = _source_for(source, wheel, root, cache)
    root.mkdir(parents=True, exist_ok=True)
    hit = _cache_hit(wheel, src, root, chosen)  # a hit waits for no other build's lock
    if hit is not None:
        return hit
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(wheel, src, root, jobs, cache, log, chosen, install)


def _cache_hit(wheel, src, root: Path, chosen=()) -> Manifest | None:
    """The cached plug-in for these inputs, when its entry is whole (library sha256 checked);
    else None. Entries appear by rename, so this needs no lock."""
    applied = [p.applied(src.commit) for p in chosen]
    dest = root / dest_name(wheel, src, applied)
    found = Manifest.read(dest / "manifest.json")
    if not (found and found.inputs_key == _inputs_key(wheel, src, applied) and intact(found)
            and found.source_copy.is_file()):
        return None
    found.cached = True
    try:
        os.utime(dest)  # last use, for `harness cache prune` (least recently used first)
    except OSError:
        return None
    return found


def _source_for(source: str | None, wheel, root: Path, cache: str | None):
    """The source to build from: ``source.resolve``'s order, except that where none of its
    local places is there (a clone without shared/executorch-src beside it) the source the
    cached stock plug-in for this wheel carries in its entry comes before a network fetch: the
    build is then the cache hit it should be, offline."""
    if not source and not os.environ.get(source_mod.ENV) \
            and not source_mod.BESIDE_CHECKOUT.is_dir():
        cached = installed(cache)
        if cached is not None and cached.source_copy.is_file():
            return source_mod.from_path(cached.source_copy, wheel)
    return source_mod.resolve(source, wheel, root / "sources" / wheel.git_version[:12])


def check(patches: tuple[str, ...], source: str | None = None, cache: str | None = None) -> str:
    """Whether the named source ``patches`` apply, together, to the source a build for the
    installed wheel would use (a scratch copy; nothing is built or cached). -> that source's
    label. RuntimeBuildError (one line) for an unknown patch or no source; ``patching.PatchError``
    (one line naming the patch, the tree and the first hunk) when one does not apply."""
    import tempfile

    chosen = patching.resolve(patches)
    wheel = wheel_mod.installed()
    root = runtimes_dir(cache)
    src = _source_for(source, wheel, root, cache)
    with tempfile.TemporaryDirectory(prefix="convconf-patch-check-") as tmp:
        tree = src.extract(Path(tmp) / "src") / "executorch"
        for p in chosen:
            patching.apply(p, tree, src.commit, _source_label(src))
    return _source_label(src)


def _source_label(src) -> str:
    return f"{Path(src.origin).name} (commit {src.commit[:12]})"


def _build_locked(wheel, src, root: Path, jobs, cache, log, chosen=(), install=True) -> Manifest:
    t_all = time.perf_counter()
    applied = [p.applied(src.commit) for p in chosen]
    key = _inputs_key(wheel, src, applied)
    dest = root / dest_name(wheel, src, applied)
    found = Manifest.read(dest / "manifest.json")
    if found and found.inputs_key == key and intact(found, warn=True):
        if not found.source_copy.is_file():  # an entry from before entries kept their source
            _keep_source(src, dest)
        found.cached = True
        os.utime(dest)  # last use, for `harness cache prune` (least recently used first)
        return found

    jobs = jobs or len(os.sched_getaffinity(0))
    phases: dict = {}
    # The source first, patched: a patch that does not apply stops here, before apt, the
    # toolchain or any build tree is touched.
    t = time.perf_counter()
    staged_src = root / "build" / f".src-{dest.name}.tmp"
    src.extract(staged_src)
    try:
        applied = [patching.apply(p, staged_src / "executorch", src.commit, _source_label(src))
                   for p in chosen]
    except RuntimeBuildError:
        shutil.rmtree(staged_src, ignore_errors=True)
        raise
    phases["source"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    if install:
        installed = toolchain.ensure_packages(toolchain.BUILD_PACKAGES, log)
    else:  # inside a run: the build tools are `harness runtime build`'s to install
        installed = []
        try:
            require_tools(cache)
        except RuntimeBuildError:
            shutil.rmtree(staged_src, ignore_errors=True)
            raise
    phases["apt"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    tc = toolchain.ensure_next_release_tools(cache_root(cache), log)
    phases["toolchain"] = round(time.perf_counter() - t, 1)

    # per wheel+source(+patch set): a changed recipe or patch rebuilds incrementally
    t = time.perf_counter()
    work, how = _checkout_tree(root / "build", f"{wheel.version}-{src.commit[:12]}", dest.name,
                               log)
    phases["tree"] = round(time.perf_counter() - t, 1)
    shutil.rmtree(work / "src", ignore_errors=True)
    os.rename(staged_src, work / "src")
    touch_seed_files(work, root)
    build_dir = work / "cmake"
    phases.update(compile_plugin(work, wheel, tc, jobs, log))
    (work / SEEDED_FROM).unlink(missing_ok=True)  # built: every object is this set's now
    library_built = build_dir / LIBRARY
    staging = root / f".{dest.name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copy2(library_built, staging / LIBRARY)
    runner_missing = _runner_missing(build_dir)
    if not runner_missing:
        shutil.copy2(build_dir / RUNNER, staging / RUNNER)
    if shutil.which("strip"):  # debug sections are most of its size; symbols stay exported
        subprocess.run(["strip", "--strip-debug", str(staging / LIBRARY)], check=False)
    library = dest / LIBRARY
    manifest = Manifest(
        runtime="vulkan", library=str(library), runner="" if runner_missing else str(dest / RUNNER),
        library_sha256=_sha256(staging / LIBRARY),
        library_bytes=(staging / LIBRARY).stat().st_size, executorch_version=wheel.version,
        executorch_git_version=wheel.git_version, source_commit=src.commit,
        source_version_txt=src.version_txt, source_commit_date=src.commit_date,
        source_origin=Path(src.origin).name, source_exact=src.exact_for(wheel),
        skew_note=src.skew_note(wheel), glslc_version=tc.glslc_version(),
        toolchain_packages=tc.packages(), build_seconds=0.0, phase_seconds=phases, jobs=jobs,
        built_at=time.strftime("%Y-%m-%d %H:%M:%S"), inputs_key=key,
        extra={"apt_installed": installed, "runner_missing": runner_missing, "build_tree": how},
        patches=applied, source_digest=src.digest)
    _keep_source(src, staging)
    from harness.runtimes import shaders
    manifest.conv_shaders = shaders.conv_shaders(
        work / "src" / "executorch", label=_universe_label(manifest)).to_dict()
    check = registers(staging / LIBRARY)
    if check:
        raise RuntimeBuildError(f"built {LIBRARY} but it does not register {BACKEND}: {check}")
    manifest.build_seconds = round(time.perf_counter() - t_all, 1)
    manifest.write(staging / "manifest.json")
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(staging, dest)
    shutil.rmtree(work / "src", ignore_errors=True)  # keep the cmake tree: incremental rebuilds
    _prune_parked(root / "build", f"{wheel.version}-{src.commit[:12]}")
    return manifest


def require_tools(cache: str | None = None) -> None:
    """RuntimeBuildError (one line naming the command that installs them) unless the build
    tools are in place: only `harness runtime build` installs them, never a run or a bisect."""
    missing = toolchain.missing_packages(toolchain.BUILD_PACKAGES)
    if missing or not toolchain.next_release_tools_ready(cache_root(cache)):
        what = ", ".join(missing) or "glslc and the Vulkan headers"
        raise RuntimeBuildError(f"build tools missing ({what}); only `python -m harness runtime "
                                f"build vulkan` installs them: run it first")


def compile_plugin(work: Path, wheel, tc, jobs: int, log: Callable[[str], None] = print,
                   target: str | None = None) -> dict:
    """Configure and build the CMake project (``native/``, staged at ``work/native``) against
    the source at ``work/src/executorch`` in the build tree ``work/cmake`` (incremental; ccache
    when installed). ``target``: one ninja target (default: all). -> seconds per phase."""
    build_dir = work / "cmake"
    recipe = _stage_recipe(work / "native", build_dir)
    configure = ["cmake", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", str(recipe),
                 f"-DET_SRC_PARENT={work / 'src'}", f"-DET_WHEEL_DIR={wheel.root}",
                 f"-DET_RUNTIME_LIB={wheel.runtime_lib}",
                 f"-DET_EXTRA_LIBS={';'.join(map(str, wheel.extra_libs))}",
                 f"-DET_KERNEL_LIBS={';'.join(map(str, wheel.kernel_libs))}",
                 f"-DVK_THIRD_PARTY={tc.third_party}", f"-DGLSLC={tc.glslc}",
                 f"-DFLATC={shutil.which('flatc', path='/usr/bin') or 'flatc'}",
                 f"-DPYTHON_EXECUTABLE={sys.executable}", f"-DSHADER_NTHREADS={jobs}"]
    if shutil.which("ccache"):
        configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    phases = {}
    for phase, cmd in (("configure", configure),
                       ("shaders", ["ninja", f"-j{jobs}", "vulkan_shaders"]),
                       ("compile", ["ninja", f"-j{jobs}", *([target] if target else [])])):
        t = time.perf_counter()
        log(f"{phase}: {' '.join(cmd[:3])} ...")
        _run(cmd, build_dir, build_dir / f"{phase}.log")
        phases[phase] = round(time.perf_counter() - t, 1)
    return phases


TREE_OWNER = "tree.txt"  # in a build tree: the cache folder name of the set it belongs to
KEEP_PARKED = 3  # patched build trees kept beside the slot (~75 MB each), most recently used


def _prune_parked(build_root: Path, stock: str, keep: int = KEEP_PARKED) -> list[str]:
    """Drop all but the ``keep`` most recently used parked patched trees of one wheel+source
    (a changed patch is a new set: its old tree is never used again). Their plug-ins stay;
    a later build of such a set starts again from a copy of the stock tree. -> dropped names."""
    parked = [d for d in build_root.glob(f"{stock}-p*") if d.is_dir()
              and not d.name.endswith(".tmp") and (d / TREE_OWNER).exists()]
    parked.sort(key=lambda d: (d / TREE_OWNER).stat().st_mtime, reverse=True)
    for d in parked[keep:]:
        shutil.rmtree(d, ignore_errors=True)
    return [d.name for d in parked[keep:]]


def _owner(tree: Path, stock: str) -> str | None:
    """Whose build tree ``tree`` is (None: there is none). A tree from before patches existed
    has no tree.txt: it is the stock one."""
    if not tree.is_dir():
        return None
    marker = tree / TREE_OWNER
    return marker.read_text().strip() if marker.exists() else stock


def _copy_tree(src: Path, dest: Path) -> None:
    """Copy a build tree keeping mtimes (ninja compares them) and links; atomic by rename."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True,  # not the sources: each build extracts its own
                    ignore=lambda folder, names: ["src"] if Path(folder) == src else [])
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)


def _checkout_tree(build_root: Path, stock: str, want: str, log=print) -> tuple[Path, str]:
    """Put the build tree of patch set ``want`` (a cache folder name; ``stock`` for no
    patches) at ``build_root/stock`` -- the one path every set of this wheel+source is built
    at -- parking the tree that was there as ``build_root/<its set>`` (the stock one as
    ``<stock>-stock``). A set without a tree of its own starts from a copy of the stock tree.
    -> (the tree, how it was obtained)."""
    slot = build_root / stock

    def park(name: str) -> Path:
        return build_root / (f"{stock}-stock" if name == stock else name)

    have = _owner(slot, stock)
    if have == want:
        (slot / TREE_OWNER).write_text(want + "\n")  # its mtime: when the tree was last used
        return slot, "in place"
    how = ""
    if have is not None:
        if have == stock and want != stock and not park(want).is_dir():
            _copy_tree(slot, park(stock))  # the stock tree stays; the slot keeps its objects
            (slot / TREE_OWNER).write_text(want + "\n")
            log(f"build tree: {want} starts from a copy of the stock tree's objects")
            return slot, "seeded from the stock tree"
        shutil.rmtree(park(have), ignore_errors=True)
        os.rename(slot, park(have))
    if park(want).is_dir():
        os.rename(park(want), slot)
        how = "its own tree"
    elif want != stock and park(stock).is_dir():
        _copy_tree(park(stock), slot)
        os.utime(park(stock))  # a seed is a use (`harness cache prune` drops the least recent)
        log(f"build tree: {want} starts from a copy of the stock tree's objects")
        how = "seeded from the stock tree"
    elif (other := _sibling_tree(build_root, stock, want)) is not None:
        # No stock tree (pruned, or lost to a killed swap): another set's tree holds every
        # object but those of the files its patches changed, which the build then touches
        # (``SEEDED_FROM``, ``touch_seed_files``) so that ninja recompiles exactly them.
        _copy_tree(other, slot)
        owner = _owner(other, stock)
        # a seed that was itself seeded and never finished its build holds that set's objects too
        (slot / SEEDED_FROM).write_text("\n".join([owner, *_seeds(slot)]) + "\n")
        log(f"build tree: {want} starts from a copy of {owner}'s objects (no stock tree)")
        how = f"seeded from {owner}'s tree"
    else:
        slot.mkdir(parents=True, exist_ok=True)
        how = "cold"
    (slot / TREE_OWNER).write_text(want + "\n")
    return slot, how


SEEDED_FROM = "seeded-from.txt"  # in a build tree seeded from another patch set's tree


def _changed_files(runtimes: Path, owner: str) -> list[str] | None:
    """The source files (relative to the ExecuTorch root) the patches of cache entry
    ``owner`` changed, from its manifest; None when it has no readable manifest."""
    m = Manifest.read(runtimes / owner / "manifest.json")
    if m is None:
        return None
    return sorted({f for p in m.patches for f in p.get("files", [])})


def _sibling_tree(build_root: Path, stock: str, want: str) -> Path | None:
    """The most recently used build tree of another patch set of this wheel+source (in the
    slot or parked) whose plug-in manifest says which files its patches changed; None."""
    slot = build_root / stock
    trees = [t for t in [slot, *build_root.glob(f"{stock}-p*")]
             if t.is_dir() and not t.name.endswith(".tmp") and (t / "cmake").is_dir()
             and _owner(t, stock) not in (None, want, stock)
             and _changed_files(build_root.parent, _owner(t, stock)) is not None]
    if not trees:
        return None
    return max(trees, key=lambda t: _mtime(t / TREE_OWNER))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _seeds(tree: Path) -> list[str]:
    """The sets whose objects a seeded tree may still hold (its SEEDED_FROM lines)."""
    marker = tree / SEEDED_FROM
    return [ln.strip() for ln in marker.read_text().splitlines() if ln.strip()] \
        if marker.is_file() else []


def touch_seed_files(work: Path, runtimes: Path) -> list[str]:
    """In a build tree seeded from another set's tree: give the files that set's patches
    changed a new mtime in the freshly extracted ``work/src`` (their objects are that set's,
    not this source's; newer sources make ninja rebuild them, as a patched file is rebuilt in
    a tree seeded from stock). -> the files touched. No-op in any other tree."""
    files = sorted({f for owner in _seeds(work) for f in _changed_files(runtimes, owner) or []})
    touched = []
    for rel in files:
        path = work / "src" / "executorch" / rel
        if path.is_file():
            os.utime(path)  # now: newer than every object of the seed tree
            touched.append(rel)
    return touched


def _runner_missing(build_dir: Path) -> str:
    """Why the CMake project left the native runner out ('' when it built it)."""
    marker = build_dir / "runner-not-built.txt"
    if marker.exists():
        return marker.read_text().strip()
    return "" if (build_dir / RUNNER).exists() else "the build produced no runner"


def _stage_recipe(recipe: Path, build_dir: Path) -> Path:
    """Copy the CMake project next to its build tree. CMake pins a build tree to the path of
    its source; configuring from the checkout would tie the shared cache to one clone (CI's
    checkout and a developer's share ~/.cache), so every clone configures this copy instead."""
    recipe.mkdir(parents=True, exist_ok=True)
    for f in NATIVE.iterdir():
        if f.is_file() and (not (recipe / f.name).exists()
                            or (recipe / f.name).read_bytes() != f.read_bytes()):
            shutil.copy2(f, recipe / f.name)  # unchanged files keep their mtime: ninja stays incremental
    cache_file = build_dir / "CMakeCache.txt"
    if cache_file.exists() and f"CMAKE_HOME_DIRECTORY:INTERNAL={recipe}\n" not in cache_file.read_text():
        cache_file.unlink()  # configured from elsewhere (an older layout); objects stay reusable
    build_dir.mkdir(parents=True, exist_ok=True)
    return recipe


def _run(cmd: list[str], cwd: Path, log_path: Path) -> None:
    with open(log_path, "w") as fh:
        done = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        said = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        raise RuntimeBuildError(f"{' '.join(cmd[:2])} failed (exit {done.returncode}, log "
                                f"{log_path}): {said.strip()[:300]}")


def registers(library: Path) -> str:
    """Load the plug-in in a fresh interpreter; '' when VulkanBackend registers, else why not."""
    code = ("import ctypes,sys\n"
            "from executorch.extension.pybindings.portable_lib import _get_registered_backend_names\n"
            "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
            "print(list(_get_registered_backend_names()))\n")
    done = subprocess.run([sys.executable, "-c", code, str(library)], capture_output=True,
                          text=True, timeout=300)
    if done.returncode:
        return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return "" if BACKEND in done.stdout else f"registered: {done.stdout.strip()}"


def installed(cache: str | None = None, patches=()) -> Manifest | None:
    """The plug-in built for the installed wheel (its own commit preferred, then the newest)
    with exactly the named source ``patches`` and those they need, as ``build`` applies them
    (default: none, the stock plug-in)."""
    try:
        wheel = wheel_mod.installed()
        want = [p.name for p in patching.resolve(patches)]
    except RuntimeBuildError:
        return None
    found = [m for m in built(cache) if m.executorch_version == wheel.version
             and m.executorch_git_version == wheel.git_version and sorted(m.patch_names) == want]
    for m in sorted(found, key=lambda m: (m.source_exact, m.built_at), reverse=True):
        if intact(m, warn=True):  # a corrupt library is a miss, never loaded
            try:
                os.utime(m.folder)  # last use, for `harness cache prune`
            except OSError:
                pass
            return m
    return None


_INTACT: dict = {}  # (library, size, mtime) -> whether its sha256 matched: checked once a process


def intact(m: Manifest, warn: bool = False) -> bool:
    """Whether the entry's library is there with the sha256 its manifest recorded. ``warn``:
    a mismatch says one line on stderr naming the entry (a rebuild replaces it)."""
    lib = Path(m.library)
    try:
        st = lib.stat()
    except OSError:
        return False
    k = (str(lib), st.st_size, st.st_mtime_ns)
    if k not in _INTACT:
        _INTACT[k] = _sha256(lib) == m.library_sha256
        if warn and not _INTACT[k]:
            print(f"convconf: warning: cache entry {m.folder.name} (Vulkan plug-in): {LIBRARY} "
                  f"does not match its sha256; not loaded (python -m harness runtime build vulkan "
                  f"replaces it)", file=sys.stderr, flush=True)
    return _INTACT[k]


def built(cache: str | None = None) -> list[Manifest]:
    """Every plug-in in the cache whose library is there (stock and patched, any wheel)."""
    found = (Manifest.read(p) for p in sorted(runtimes_dir(cache).glob("*/manifest.json")))
    return [m for m in found if m and Path(m.library).exists()]


def for_library(path: Path) -> Manifest | None:
    return Manifest.read(Path(path).parent / "manifest.json")
