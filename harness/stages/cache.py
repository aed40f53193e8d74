"""On-disk cache of prepared lanes: .pte bytes, the static verdicts and the eager references.

Key = (case id, backend, fix set, executorch, torch, convconf versions, the stages' digest): a version change is a
different key, so a stale program is never reused. Entries are written to a temporary folder and
renamed into place, so a killed writer leaves no half entry behind.

Integrity (as ccache checks what it serves): meta.json carries the sha256 of every file of the entry
and of its own content; a load checks them, and an entry that does not match (a truncated or
bit-flipped program.pte, a torn meta.json) is a miss with one warning line on stderr naming it,
set aside and removed, so the lowering that follows stores a good one in its place. A served entry
has its folder's mtime set to now: ``entries()`` lists them by last use, for ``harness cache
prune`` (least recently used first).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import versions
from harness.status import DISK_FULL

FILES = ("program.pte", "refs.pt")  # besides meta.json, what an entry may hold
CHECKS = "sha256"                   # the meta.json key holding the entry's digests
REPLACED_LOG = "replaced.jsonl"     # in the cache root: one line per corrupt entry set aside
UNWRITABLE = DISK_FULL  # a store that fails so is skipped (status.DISK_FULL)
UNSTORED: set = set()  # cache roots this process could not store in (said once each)


def default_dir() -> Path:
    return versions.cache_home()


def key(case_id: str, lane, stack: dict | None = None) -> str:
    """The cache key of a cell: case, lane (backend + fix set), versions and the stages' digest."""
    stack = stack or versions.stack()
    material = json.dumps([case_id, lane.backend, list(lane.fixes), stack], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:24]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def meta_digest(meta: dict) -> str:
    """The digest of an entry's meta.json content, its own check left out."""
    return sha256(json.dumps({k: v for k, v in meta.items() if k != CHECKS},
                             sort_keys=True).encode())


class CorruptEntry(ValueError):
    """A cache entry whose content does not match the digests it was stored with."""


@dataclass(frozen=True)
class Entry:
    """One stored lane on disk: its folder, its size and when it was last stored or served."""
    path: Path
    bytes: int
    last_used: float  # epoch seconds (the folder's mtime)


def is_entry_folder(path: Path) -> bool:
    """Whether ``path`` is where a lowered lane is kept: <root>/<2 hex>/<24 hex>."""
    return (len(path.parent.name) == 2 and len(path.name) == 24
            and all(c in "0123456789abcdef" for c in path.parent.name + path.name))


def folder_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:  # removed meanwhile (another run pruning)
                pass
    return total


def entries(root: str | os.PathLike) -> list[Entry]:
    """Every complete lowered-lane entry under ``root``, least recently used first."""
    found = []
    for meta in Path(root).glob("[0-9a-f][0-9a-f]/*/meta.json"):
        folder = meta.parent
        if not is_entry_folder(folder):
            continue
        try:
            found.append(Entry(folder, folder_bytes(folder), folder.stat().st_mtime))
        except OSError:
            continue
    return sorted(found, key=lambda e: (e.last_used, e.path.name))


def remove(folder: Path) -> bool:
    """Remove an entry safely while others may read it: renamed aside first (one rename, so a
    reader sees the whole entry or none), then deleted. -> whether this call removed it."""
    aside = folder.with_name(f".gone-{folder.name}-{os.getpid()}")
    try:
        os.rename(folder, aside)
    except OSError:  # gone already (another run, another worker)
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def check(folder: Path) -> tuple[dict, dict[str, bytes]]:
    """-> (meta, {file: bytes}) of an entry whose content matches its digests. FileNotFoundError
    when the entry is absent (or removed meanwhile); CorruptEntry naming the file otherwise."""
    raw = (folder / "meta.json").read_bytes()
    try:
        meta = json.loads(raw)
    except ValueError:
        raise CorruptEntry("meta.json is not readable JSON (torn or flipped)") from None
    sums = meta.get(CHECKS) if isinstance(meta, dict) else None
    if not isinstance(sums, dict):
        raise CorruptEntry("meta.json carries no content digests")
    if sums.get("meta.json") != meta_digest(meta):
        raise CorruptEntry("meta.json does not match its sha256")
    data = {}
    for name in FILES:
        want = sums.get(name)
        path = folder / name
        if want is None:
            if path.exists():
                raise CorruptEntry(f"{name} is there but not in its digests")
            continue
        try:
            data[name] = path.read_bytes()
        except FileNotFoundError:
            if not (folder / "meta.json").exists():
                raise  # the whole entry went (a prune meanwhile): a plain miss
            raise CorruptEntry(f"{name} is missing") from None
        if sha256(data[name]) != want:
            raise CorruptEntry(f"{name} ({len(data[name])} bytes) does not match its sha256")
    return meta, data


class Cache:
    """Prepared lanes on disk (an optimisation: a run hands what it prepared to execution
    directly; the cache only spares the next run the lowering). Counts what it served
    (``hits``), did not have (``misses``) and set aside as corrupt (``replaced``)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.hits = self.misses = self.replaced = 0

    def _path(self, case_id: str, lane) -> Path:
        k = key(case_id, lane)
        return self.root / k[:2] / k

    def path(self, case_id: str, lane) -> Path:
        """The folder of the cell's entry (present or not)."""
        return self._path(case_id, lane)

    def has(self, case_id: str, lane) -> bool:
        return (self._path(case_id, lane) / "meta.json").exists()

    def load(self, case_id: str, lane):
        """The cached Prepared of a cell, or None: absent, or corrupt (one warning line on stderr
        naming the entry; the entry is removed, so the lowering that follows replaces it)."""
        import torch  # here, not at import: `runtime build` must not pay for torch

        from harness.stages.prepare import Prepared, References

        path = self._path(case_id, lane)
        try:
            meta, data = check(path)
            refs = data.get("refs.pt")
            # weights_only=False: the references hold our own records (compare's error bound);
            # the bytes are ours, checked against the sha256 they were stored with just above
            loaded = torch.load(io.BytesIO(refs), weights_only=False) if refs is not None else None
            prepared = Prepared.from_meta(lane, meta, data.get("program.pte"),
                                          References(**loaded) if loaded else None)
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception as e:  # corrupt, or intact but unreadable here: a miss, never a crash
            self.corrupt(path, f"{case_id} {lane.name}", e)
            self.misses += 1
            return None
        try:
            os.utime(path)  # last use, for the least-recently-used prune
        except OSError:
            pass
        self.hits += 1
        return prepared

    def corrupt(self, path: Path, what: str, why: Exception) -> None:
        """Say one line naming the entry, set it aside and log it (``harness cache info``)."""
        print(f"convconf: warning: cache entry {path.name} ({what}) is corrupt: "
              f"{str(why).splitlines()[0] if str(why) else type(why).__name__}; lowering it "
              f"again and replacing the entry", file=sys.stderr, flush=True)
        if remove(path):
            self.replaced += 1
            try:
                with open(self.root / REPLACED_LOG, "a") as fh:
                    fh.write(json.dumps({"entry": path.name, "cell": what, "why": str(why),
                                         "time": time.time()}) + "\n")
            except OSError:
                pass

    def store(self, case_id: str, prepared) -> None:
        import torch

        final = self._path(case_id, prepared.lane)
        tmp = None
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-"))
            sums = {}
            if prepared.pte is not None:
                (tmp / "program.pte").write_bytes(prepared.pte)
                sums["program.pte"] = sha256(prepared.pte)
            if prepared.refs is not None:
                buf = io.BytesIO()
                torch.save(vars(prepared.refs), buf)
                (tmp / "refs.pt").write_bytes(buf.getvalue())
                sums["refs.pt"] = sha256(buf.getvalue())
            meta = prepared.to_meta()
            sums["meta.json"] = meta_digest(meta)
            (tmp / "meta.json").write_text(json.dumps({**meta, CHECKS: sums}))
            try:
                os.rename(tmp, final)
            except OSError:  # another worker stored the same cell first: theirs is as good
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as e:  # a full disk, a file-size limit: the run goes on without the entry
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if e.errno not in UNWRITABLE:
                raise
            if self.root not in UNSTORED:
                UNSTORED.add(self.root)
                print(f"convconf: warning: cache {self.root}: cannot store ({e.strerror}); the "
                      f"run goes on without storing its lowerings", file=sys.stderr, flush=True)
        except BaseException:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
