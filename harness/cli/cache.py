"""``harness cache``: what the convconf cache holds and keeps (``info``), and making it smaller
(``prune``), as ``ccache -s`` / ``ccache -M`` do for ccache.

The cache (``$CONVCONF_CACHE`` or ``~/.cache/convconf``) holds lowered programs (``<2 hex>/<key>/``,
stages/cache.py) and their references (``refs/<2 hex>/<sha256>.pt``: one per case, whatever its
number of lanes; info's own line, removed with the last program naming it), Vulkan plug-ins per wheel and source (``runtimes/<version>-<commit12>[-p..]/``)
with their build trees (``runtimes/build/``) and fetched sources (``runtimes/sources/``), the
bisect's per-commit plug-ins and build tree (``bisect/``) and the build toolchains
(``toolchains/``). ``prune`` removes the cheapest to make again first (lowered programs, then
bisect plug-ins, sources, build trees, plug-ins), least recently used first within a kind (a
served lowered program or plug-in has its folder's mtime set to now), and never: the plug-in the
installed wheel pairs with (and its build tree), the current toolchain, anything a build holds
the lock of.

After every ``harness run`` with a cache, ``after_run`` records the run's hit/miss counts in the
cache (``last-run.json``, shown by ``info``) and prunes the cache to its maximum size:
``$CONVCONF_CACHE_MAX`` (e.g. ``500MB``, ``2GB``; ``0`` or ``none``: no bound), else
DEFAULT_MAX. 2 GB: the stock plug-in with its build tree and toolchain (~170 MB), the plug-ins
of every fix's patch set with their parked trees (~0.8 GB for nine), and about a thousand lowered
programs of this machine's mix (median 10 KB; the references of large cases up to 63 MB) fit;
five such caches fit GitHub's 10 GB per repository.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.cli.common import EXIT_OK, UsageError, say, shown

DEFAULT_MAX = 2 * 1000 ** 3
MAX_ENV = "CONVCONF_CACHE_MAX"
LAST_RUN = "last-run.json"
STALE_TEMP_S = 3600  # a writer's temporary folder older than this was left by a killed writer

LOWERED, REFERENCES, PLUGINS, BUILD_TREES, SOURCES, BISECT, TOOLCHAINS, OTHER = (
    "lowered programs", "eager references", "plug-ins", "plug-in build trees", "plug-in sources",
    "bisect plug-ins", "toolchains", "other")
KINDS = (LOWERED, REFERENCES, PLUGINS, BUILD_TREES, SOURCES, BISECT, TOOLCHAINS, OTHER)
# The size bound removes the cheapest to make again first, least recently used first within a
# kind: a lowered program is seconds of lowering, a plug-in or its build tree minutes of
# compiling. (A plain LRU over everything once let one run's 1.4 GB of fresh lowered programs
# push out five patched plug-ins and their build trees.) --older-than takes any kind.
# References (stages/cache.py: one blob per case's content, named by the lowered programs of its
# lanes) are no kind of their own here: a blob goes with the last lowered program naming it (its
# bytes freed then, once), and one no program names (an orphan) goes whatever the bound once it
# is older than STALE_TEMP_S (younger, a writer may be storing the entry that will name it).
REBUILD_COST = (OTHER, LOWERED, REFERENCES, BISECT, SOURCES, BUILD_TREES, PLUGINS, TOOLCHAINS)


@dataclass(frozen=True)
class Item:
    """One thing in the cache prune can remove as a whole (or must keep: ``keep`` says why)."""
    kind: str
    group: str        # plug-ins: the source commit they were built from; else ""
    path: Path
    bytes: int
    last_used: float  # epoch seconds
    keep: str = ""    # why prune never removes it ("": it may)
    refs: Path | None = None  # a lowered program: the references blob it names (if any)


@dataclass
class LastRun:
    """What the last run with this cache got from it (``last-run.json``)."""
    run: str
    finished: str
    cells: int
    hits: int
    misses: int
    replaced: int  # corrupt entries found, set aside and lowered again

    @classmethod
    def read(cls, root: Path) -> "LastRun | None":
        try:
            data = json.loads((root / LAST_RUN).read_text())
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except (OSError, ValueError, KeyError, TypeError):
            return None


@dataclass
class Pruned:
    before: int
    after: int
    removed: list = field(default_factory=list)  # Items

    @property
    def freed(self) -> int:
        return self.before - self.after


def parse_size(text: str) -> int | None:
    """'2GB', '500M', '1.5GiB', '123' (bytes) -> bytes; '0' or 'none' -> None (no bound)."""
    t = str(text).strip().lower()
    if t in ("0", "none", "off", "unlimited"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?", t)
    if not m:
        raise UsageError(f"cache: size {text!r} is not a size (e.g. 500MB, 2GB, 0 for none)")
    unit = (m.group(2) or "b").rstrip("b") or "b"
    scale = {"b": 1, "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3, "t": 1000 ** 4,
             "ki": 1024, "mi": 1024 ** 2, "gi": 1024 ** 3, "ti": 1024 ** 4}[unit]
    return int(float(m.group(1)) * scale)


def configured_max() -> tuple[int | None, str]:
    """The maximum size after a run and where it comes from."""
    if os.environ.get(MAX_ENV, "").strip():
        return parse_size(os.environ[MAX_ENV]), f"${MAX_ENV}"
    return DEFAULT_MAX, "default"


def human(n: int | None) -> str:
    if n is None:
        return "no bound"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    from harness.stages.cache import folder_bytes

    if path.is_dir() and not path.is_symlink():
        return folder_bytes(path)
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _locked(lock: Path) -> bool:
    """Whether a build holds ``lock`` now (taken and released at once when free)."""
    if not lock.exists():
        return False
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def inventory(root: Path) -> list[Item]:
    """Everything in the cache ``root``, one Item per removable whole."""
    from harness.runtimes import toolchain, vulkan
    from harness.stages import cache as programs

    root = Path(root)
    lowered = programs.entries(root)
    items = [Item(LOWERED, "", e.path, e.bytes, e.last_used, refs=e.refs) for e in lowered]
    named = {e.refs for e in lowered}
    now = time.time()
    for blob in programs.blobs(root):
        when = _mtime(blob)
        young = blob not in named and now - when <= STALE_TEMP_S
        items.append(Item(REFERENCES, "", blob, _size(blob), when,
                          "being written (no lowered program names it yet)" if young else ""))
    refs = programs.REFS_DIR
    for temp in [*root.glob("[0-9a-f][0-9a-f]/.tmp-*"), *root.glob("[0-9a-f][0-9a-f]/.gone-*"),
                 *root.glob(f"{refs}/[0-9a-f][0-9a-f]/.tmp-*"),
                 *root.glob(f"{refs}/[0-9a-f][0-9a-f]/.gone-*")]:
        old = now - _mtime(temp) > STALE_TEMP_S  # a live writer's is kept
        items.append(Item(OTHER, "", temp, _size(temp), _mtime(temp),
                          "" if old else "being written"))
    items += _runtime_items(root, vulkan)
    bisect = root / "bisect"
    bisect_busy = any(_locked(lock) for lock in bisect.glob("vulkan/*/.lock"))
    for so in sorted(bisect.glob("vulkan/*/plugins/*.so")):
        items.append(Item(BISECT, so.parent.parent.name, so, _size(so) + _size(so.with_suffix(
            ".json")), _mtime(so), "a bisect is building" if bisect_busy else ""))
    for tree in sorted(bisect.glob("vulkan/*/tree")):
        items.append(Item(BISECT, tree.parent.name, tree, _size(tree), _mtime(tree),
                          "a bisect is building" if bisect_busy else ""))
    current = f"{toolchain.NEXT_SUITE}-v{toolchain.TOOLCHAIN_VERSION}"
    for tc in sorted((root / "toolchains").glob("*")):
        items.append(Item(TOOLCHAINS, tc.name, tc, _size(tc), _mtime(tc),
                          "the current toolchain" if tc.name == current else ""))
    for f in (root / programs.REPLACED_LOG, root / LAST_RUN):
        if f.exists():
            items.append(Item(OTHER, "", f, _size(f), _mtime(f), "the cache's own record"))
    return items


def _runtime_items(root: Path, vulkan) -> list[Item]:
    runtimes = root / "runtimes"
    busy = "a plug-in build holds the lock" if _locked(runtimes / ".build.lock") else ""
    mine = vulkan.installed(str(root))
    paired = mine.folder.name if mine else None
    items = []
    for manifest in sorted(runtimes.glob("*/manifest.json")):
        folder = manifest.parent
        if folder.name in ("build", "sources"):
            continue
        m = vulkan.Manifest.read(manifest)
        source = f"source {m.source_commit[:12]}" if m else "unreadable manifest"
        keep = "the plug-in the installed wheel pairs with" if folder.name == paired else busy
        items.append(Item(PLUGINS, source, folder, _size(folder), _mtime(folder), keep))
    for tree in sorted((runtimes / "build").glob("*")):
        if not tree.is_dir():
            continue
        stock = tree.name == paired  # the tree the paired plug-in's patched siblings build in
        items.append(Item(BUILD_TREES, "", tree, _size(tree), _mtime(tree),
                          "the installed plug-in's build tree" if stock else busy))
    for src in sorted((runtimes / "sources").glob("*")):
        items.append(Item(SOURCES, "", src, _size(src), _mtime(src), busy))
    return items


def prune(root: Path, max_bytes: int | None = None, older_than_days: float | None = None,
          items: list[Item] | None = None) -> Pruned:
    """Remove what was not used for ``older_than_days``, then, until the cache is at most
    ``max_bytes``, the cheapest kind to make again first (REBUILD_COST), least recently used
    first within it (what prune must keep counts, and may leave it above). A references blob
    is counted once and removed with the last lowered program naming it; one no program names
    goes as a killed writer's leftovers do (inventory keeps a young one)."""
    from harness.stages.cache import remove, remove_blob

    items = inventory(root) if items is None else items
    total = sum(i.bytes for i in items)
    result = Pruned(before=total, after=total)
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    blobs = {i.path: i for i in items if i.kind == REFERENCES}
    users: dict[Path, int] = {}
    for i in items:
        if i.kind == LOWERED and i.refs in blobs:
            users[i.refs] = users.get(i.refs, 0) + 1
    order = sorted((i for i in items if not i.keep and (i.kind != REFERENCES or not users.get(
        i.path))), key=lambda i: (REBUILD_COST.index(i.kind), i.last_used, str(i.path)))
    for item in order:
        old = cutoff is not None and item.last_used < cutoff
        over = max_bytes is not None and result.after > max_bytes
        # a killed writer's leftovers, references no lowered program names: whatever the bound
        stale = item.kind in (OTHER, REFERENCES)
        if not (old or over or stale):
            continue
        if item.kind == LOWERED:
            gone = remove(item.path)
        elif item.kind == REFERENCES:
            gone = remove_blob(item.path)
        else:
            gone = _remove_path(item.path)
            if item.kind == BISECT and item.path.suffix == ".so":
                _remove_path(item.path.with_suffix(".json"))
        if gone:
            result.removed.append(item)
            result.after -= item.bytes
        if gone and item.kind == LOWERED and item.refs in users:
            users[item.refs] -= 1
            blob = blobs[item.refs]
            # its last user gone: the blob goes too, unless a writer refreshed it since the
            # inventory (storing an entry that names it now)
            if not users[item.refs] and _mtime(blob.path) <= blob.last_used \
                    and remove_blob(blob.path):
                result.removed.append(blob)
                result.after -= blob.bytes
    return result


def _remove_path(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():
            aside = path.with_name(f".gone-{path.name}-{os.getpid()}")
            os.rename(path, aside)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    return True


def after_run(cache_dir: str | None, df, out: Path) -> Pruned | None:
    """After a run with a cache: record its hit/miss counts in the cache (``last-run.json``)
    and prune it to the configured maximum, saying one line when that removed something."""
    if not cache_dir:
        return None
    from harness.runfolder import RunFolder, atomic_write
    from harness.stages.cache import REPLACED_LOG

    root = Path(cache_dir)
    header = RunFolder(out).header_or_empty()
    started = _epoch(getattr(header, "started", "") or "")
    replaced = 0
    try:
        for line in (root / REPLACED_LOG).read_text().splitlines():
            try:
                replaced += json.loads(line).get("time", 0) >= started
            except ValueError:
                continue
    except OSError:
        pass
    lowered = df[df["status"] != "INVALID"] if "status" in df else df
    hits = int(lowered["cached"].astype(bool).sum()) if "cached" in lowered else 0
    record = LastRun(run=getattr(header, "run_id", "") or Path(out).name,
                     finished=time.strftime("%Y-%m-%d %H:%M:%S"), cells=len(df), hits=hits,
                     misses=len(lowered) - hits, replaced=replaced)
    try:
        root.mkdir(parents=True, exist_ok=True)
        atomic_write(root / LAST_RUN, json.dumps(asdict(record)) + "\n")
    except OSError as e:
        print(f"convconf: warning: cache {shown(root)}: cannot record the run's counts "
              f"({e.strerror})", file=sys.stderr)
    _say_unstored(root, lowered)
    try:
        limit, where = configured_max()
    except UsageError as e:  # checked here, after the run: a warning, never a lost run
        print(f"convconf: warning: {e}; the cache was not pruned", file=sys.stderr)
        return None
    if limit is None:
        return None
    done = prune(root, limit)
    if done.removed:
        say(f"cache: pruned {len(done.removed)} entries ({human(done.freed)}) to stay under "
            f"{human(limit)} ({where}): {human(done.after)} now")
    return done


def _say_unstored(root: Path, lowered) -> int:
    """One line when cells this run lowered are not in the cache (its workers could not store
    them: a full disk); their verdicts stand, only the next run lowers them again."""
    import tempfile

    from harness.lane import Lane
    from harness.stages.cache import Cache

    if not {"case_id", "backend", "fixes", "cached"} <= set(lowered.columns):
        return 0
    store = Cache(root)
    fresh = lowered[~lowered["cached"].astype(bool)]
    unstored = sum(not store.has(r.case_id, Lane.of(r.backend, r.fixes if isinstance(
        r.fixes, str) else "")) for r in fresh.itertuples())
    if unstored:
        try:  # why: the disk as it is now
            with tempfile.TemporaryFile(dir=root) as fh:
                fh.write(b"\0" * 65536)
                fh.flush()
            why = "missing after the run; see the lowering workers' logs"
        except OSError as e:
            why = e.strerror
        say(f"cache: {unstored} of {len(fresh)} lowered cells could not be stored ({why}); "
            f"their verdicts stand, the next run lowers them again")
    return unstored


def _epoch(started: str) -> float:
    try:
        return time.mktime(time.strptime(started, "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return 0.0


def info_lines(root: Path) -> list[str]:
    """``cache info``: sizes by kind (plug-ins by source), what prune keeps, the last run."""
    items = inventory(root)
    limit, where = configured_max()
    total = sum(i.bytes for i in items)
    lines = [f"cache: {human(total)} (max {human(limit)}, {where})", f"  in {shown(root)}"]
    for kind in KINDS:
        mine = [i for i in items if i.kind == kind]
        if not mine and kind in (OTHER,):
            continue
        kept = sum(i.bytes for i in mine if i.keep)
        lines.append(f"  {kind:<20} {len(mine):>6}  {human(sum(i.bytes for i in mine)):>9}"
                     + (f"  (kept: {human(kept)})" if kept else ""))
        if kind in (PLUGINS, BISECT):
            groups = sorted({i.group for i in mine})
            for g in groups:
                these = [i for i in mine if i.group == g]
                lines.append(f"    {g:<22} {len(these):>4}  {human(sum(i.bytes for i in these)):>9}")
    last = LastRun.read(Path(root))
    if last:
        rate = f"{100 * last.hits / (last.hits + last.misses):.0f}%" \
            if last.hits + last.misses else "-"
        lines.append(f"last run {last.run} ({last.finished}): {last.cells} cells")
        lines.append(f"  {last.hits} hits, {last.misses} misses ({rate} hit), {last.replaced} "
                     f"corrupt entr{'y' if last.replaced == 1 else 'ies'} replaced")
    else:
        lines.append("last run: none recorded")
    return lines


def add_parsers(sub) -> None:
    c = sub.add_parser("cache", help="what the cache holds (info) and making it smaller (prune)")
    csub = c.add_subparsers(dest="cache_command", required=True, parser_class=type(c))
    for name, helptext in (("info", "sizes by kind, what prune keeps, the last run's hits"),
                           ("prune", "remove the cheapest to make again and least recently used first")):
        p = csub.add_parser(name, help=helptext)
        p.add_argument("--cache", dest="cache_dir",
                       help="cache folder (default: $CONVCONF_CACHE or ~/.cache/convconf)")
        if name == "prune":
            p.add_argument("--max-size", metavar="SIZE", help="e.g. 500MB, 2GB (default: "
                           f"${MAX_ENV}, else {human(DEFAULT_MAX)})")
            p.add_argument("--older-than", type=float, metavar="DAYS",
                           help="remove what was not used for DAYS days")
        p.set_defaults(func=cmd_cache)


def cmd_cache(args) -> int:
    from harness.stages.cache import default_dir

    root = Path(args.cache_dir or default_dir())
    if args.cache_dir and not root.is_dir():
        raise UsageError(f"cache: {args.cache_dir} is not a folder")
    if args.cache_command == "info":
        for line in info_lines(root):
            say(line)
        return EXIT_OK
    if args.older_than is not None and args.older_than < 0:
        raise UsageError("cache prune: --older-than must be >= 0")
    limit = parse_size(args.max_size) if args.max_size else configured_max()[0]
    if not root.is_dir():
        say("cache: empty")
        return EXIT_OK
    done = prune(root, limit, args.older_than)
    by_kind = {}
    for item in done.removed:
        by_kind[item.kind] = by_kind.get(item.kind, 0) + 1
    what = ", ".join(f"{n} {k}" for k, n in by_kind.items()) or "nothing"
    say(f"cache: removed {what}; {human(done.before)} -> {human(done.after)} "
        f"(max {human(limit)})")
    return EXIT_OK
