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

References are content-addressed: a case's inputs, eager reference and error bound (``refs.pt``,
99.8% of an entry's bytes) are the same for every lane of the case (23 under ``--fixes each``),
so they are kept once under the root, ``refs/<2 hex>/<sha256>.pt``, named by their sha256; an
entry's meta.json keeps that digest in its ``sha256`` table as before, and a load checks the
blob's bytes against it (a missing or corrupt blob is a corrupt entry, and a corrupt blob is
removed with it). A blob is written atomically (temporary file, then rename) before the entry
that names it; one already there is not written again, only its mtime refreshed (a prune keeps
an unnamed blob younger than STALE_TEMP_S: a writer may be storing the entry that names it).
Entries stored the old way, ``refs.pt`` inside the entry's folder, still load. ``harness cache``
counts a blob once and removes it with the last entry that names it (cli/cache.py).
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

FILES = ("program.pte", "refs.pt")  # besides meta.json, what an entry may hold (refs.pt: old layout)
CHECKS = "sha256"                   # the meta.json key holding the entry's digests
REFS = "refs.pt"                    # the references' name in the digests (and in an old entry)
REFS_DIR = "refs"                   # in the cache root: refs/<2 hex>/<sha256>.pt, one per content
HEX = "0123456789abcdef"
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


class CorruptReferences(CorruptEntry):
    """A references blob whose bytes do not match their name: wrong for every entry naming it."""

    def __init__(self, message: str, blob: Path):
        super().__init__(message)
        self.blob = blob


@dataclass(frozen=True)
class Entry:
    """One stored lane on disk: its folder, its size (its own files: a shared references blob is
    not in it) and when it was last stored or served, and the blob it names (None: none, or
    its references in its own folder, stored the old way)."""
    path: Path
    bytes: int
    last_used: float  # epoch seconds (the folder's mtime)
    refs: Path | None = None


def is_entry_folder(path: Path) -> bool:
    """Whether ``path`` is where a lowered lane is kept: <root>/<2 hex>/<24 hex>."""
    return (len(path.parent.name) == 2 and len(path.name) == 24
            and all(c in HEX for c in path.parent.name + path.name))


def is_digest(text) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in HEX for c in text)


def blob_path(root: str | os.PathLike, digest: str) -> Path:
    """Where references of sha256 ``digest`` are kept in the cache ``root``."""
    return Path(root) / REFS_DIR / digest[:2] / f"{digest}.pt"


def is_blob(path: Path) -> bool:
    """Whether ``path`` is a references blob: <root>/refs/<2 hex>/<64 hex>.pt."""
    digest = path.name[:-3] if path.name.endswith(".pt") else ""
    return (path.parent.parent.name == REFS_DIR and len(digest) == 64
            and path.parent.name == digest[:2] and all(c in HEX for c in digest))


def blobs(root: str | os.PathLike) -> list[Path]:
    """Every references blob under ``root`` (named or not)."""
    return sorted(p for p in Path(root).glob(f"{REFS_DIR}/[0-9a-f][0-9a-f]/*.pt") if is_blob(p))


def named_blob(folder: Path, meta: dict | None = None) -> Path | None:
    """The references blob the entry in ``folder`` names (present or not); None when it has no
    references or keeps them in its own folder (the old layout), or its meta.json is unreadable."""
    if (folder / REFS).exists():
        return None
    if meta is None:
        try:
            meta = json.loads((folder / "meta.json").read_bytes())
        except (OSError, ValueError):
            return None
    sums = meta.get(CHECKS) if isinstance(meta, dict) else None
    digest = sums.get(REFS) if isinstance(sums, dict) else None
    if not is_digest(digest):
        return None
    return blob_path(folder.parent.parent, digest)


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
            found.append(Entry(folder, folder_bytes(folder), folder.stat().st_mtime,
                               named_blob(folder)))
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


def check(folder: Path, blob: bool = True) -> tuple[dict, dict[str, bytes]]:
    """-> (meta, {file: bytes}) of an entry whose content matches its digests, its references
    read from the entry's own refs.pt (the old layout), else from the blob its digest names
    (``blob=False``: not read; the caller takes them by digest, ``read_blob``).
    FileNotFoundError when the entry is absent (or removed meanwhile); CorruptEntry naming the
    file otherwise."""
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
            if name == REFS:  # kept once for every entry naming them, under the root
                if blob:
                    data[name] = read_blob(folder, want)
                continue
            raise CorruptEntry(f"{name} is missing") from None
        if sha256(data[name]) != want:
            raise CorruptEntry(f"{name} ({len(data[name])} bytes) does not match its sha256")
    return meta, data


def read_blob(folder: Path, digest: str) -> bytes:
    """The bytes of the references blob of ``digest`` the entry in ``folder`` names, checked
    against it: CorruptReferences when they do not match, CorruptEntry when it is missing
    (FileNotFoundError when the entry itself went meanwhile: a plain miss)."""
    if not is_digest(digest):  # never a path out of refs/ (the digests are outside meta's own)
        raise CorruptEntry("its references digest is not a sha256")
    path = blob_path(folder.parent.parent, digest)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not (folder / "meta.json").exists():
            raise
        raise CorruptEntry(f"its references {path.name} are missing") from None
    if sha256(data) != digest:
        raise CorruptReferences(f"its references {path.name} ({len(data)} bytes) do not match "
                                f"their sha256", path)
    return data


def remove_blob(path: Path) -> bool:
    """Remove a references blob (renamed aside first, as ``remove`` does an entry)."""
    aside = path.with_name(f".gone-{path.name}-{os.getpid()}")
    try:
        os.rename(path, aside)
    except OSError:
        return False
    try:
        os.unlink(aside)
    except OSError:
        pass
    return True


# The last References objects this process serialized: (the object, its digest, its size).
# A case's lanes share one References object (prepare.py: one per quantizer family), so its 23
# stores serialize it once; the object is held here, so it is never mistaken for another, and
# references are not changed once stored. Two, not more: they would keep earlier cases'
# references (up to 63 MB each) alive in a lowering worker.
SAVED: list = []
SAVED_MAX = 2


class Cache:
    """Prepared lanes on disk (an optimisation: a run hands what it prepared to execution
    directly; the cache only spares the next run the lowering). Counts what it served
    (``hits``), did not have (``misses``) and set aside as corrupt (``replaced``)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.hits = self.misses = self.replaced = 0
        # references read back: digest -> (the blob's (inode, size, mtime) then, References):
        # a case's lanes name one blob, read, checked and unpickled once while it is unchanged
        self.served_refs: dict[str, tuple[tuple, object]] = {}

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
            meta, data = check(path, blob=False)
            digest = meta[CHECKS].get(REFS)
            refs = data.get(REFS)
            if refs is not None or digest is None:  # its own refs.pt (the old layout), or none
                # weights_only=False: the references hold our own records (compare's error
                # bound); the bytes are ours, checked against the sha256 they were stored with
                loaded = torch.load(io.BytesIO(refs), weights_only=False) if refs is not None \
                    else None
                references = References(**loaded) if loaded else None
            else:
                references = self.references(path, digest, References)
            prepared = Prepared.from_meta(lane, meta, data.get("program.pte"), references)
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception as e:  # corrupt, or intact but unreadable here: a miss, never a crash
            if isinstance(e, CorruptReferences) and is_blob(e.blob):  # wrong for every user
                remove_blob(e.blob)
                self.served_refs.pop(e.blob.name[:-3], None)
            self.corrupt(path, f"{case_id} {lane.name}", e)
            self.misses += 1
            return None
        try:
            os.utime(path)  # last use, for the least-recently-used prune
        except OSError:
            pass
        self.hits += 1
        return prepared

    def references(self, folder: Path, digest: str, kind):
        """The References the entry in ``folder`` names by ``digest``: read from its blob and
        checked, or the ones this cache read from that blob before while it is unchanged."""
        import torch

        if not is_digest(digest):
            raise CorruptEntry("its references digest is not a sha256")
        path = blob_path(self.root, digest)
        try:
            st = path.stat()
        except FileNotFoundError:
            read_blob(folder, digest)  # raises: missing (a corrupt entry), or a plain miss
            raise
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        known = self.served_refs.get(digest)
        if known is not None and known[0] == seen:
            return known[1]
        data = read_blob(folder, digest)
        references = kind(**torch.load(io.BytesIO(data), weights_only=False))
        if len(self.served_refs) >= SAVED_MAX:
            self.served_refs.pop(next(iter(self.served_refs)))
        self.served_refs[digest] = (seen, references)
        return references

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
                sums[REFS] = self.store_references(prepared.refs)
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

    def store_references(self, refs) -> str:
        """Keep ``refs`` once under the root, named by its sha256 (-> the digest): written
        atomically when absent; already there (another lane of the case, another run), its
        mtime refreshed only. The same References object stored again in this process (a
        case's lanes share one) is not serialized again."""
        import torch

        known = next((k for k in SAVED if k[0] is refs), None)
        data = None
        if known is None:
            buf = io.BytesIO()
            torch.save(vars(refs), buf)
            data = buf.getvalue()
            known = (refs, sha256(data), len(data))
            SAVED.append(known)
            del SAVED[:-SAVED_MAX]
        _, digest, size = known
        path = blob_path(self.root, digest)
        try:
            if path.stat().st_size == size:
                os.utime(path)  # a prune keeps an unnamed blob this young (its entry is coming)
                return digest
        except FileNotFoundError:
            pass
        if data is None:  # stored before, removed since (a prune): serialized again
            buf = io.BytesIO()
            torch.save(vars(refs), buf)
            data = buf.getvalue()
            if sha256(data) != digest:
                raise ValueError("references changed after they were stored")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)  # a reader sees the whole blob or none
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return digest
