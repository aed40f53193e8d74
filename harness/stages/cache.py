"""On-disk cache of prepared lanes: .pte bytes, the static verdicts and the eager references.

Key = (case id, backend, fix set, executorch, torch, convconf versions, the stages' digest): a version change is a
different key, so a stale program is never reused. Entries are written to a temporary folder and
renamed into place, so a killed writer leaves no half entry behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from harness import versions


def default_dir() -> Path:
    return versions.cache_home()


def key(case_id: str, lane, stack: dict | None = None) -> str:
    """The cache key of a cell: case, lane (backend + fix set), versions and the stages' digest."""
    stack = stack or versions.stack()
    material = json.dumps([case_id, lane.backend, list(lane.fixes), stack], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:24]


class Cache:
    """Prepared lanes on disk (an optimisation: a run hands what it prepared to execution
    directly; the cache only spares the next run the lowering)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def _path(self, case_id: str, lane) -> Path:
        k = key(case_id, lane)
        return self.root / k[:2] / k

    def has(self, case_id: str, lane) -> bool:
        return (self._path(case_id, lane) / "meta.json").exists()

    def load(self, case_id: str, lane):
        """The cached Prepared of a cell, or None (absent or unreadable: prepared again)."""
        import torch  # here, not at import: `runtime build` must not pay for torch

        from harness.stages.prepare import Prepared, References

        path = self._path(case_id, lane)
        try:
            meta = json.loads((path / "meta.json").read_text())
            pte = path / "program.pte"
            refs = path / "refs.pt"
            loaded = torch.load(io.BytesIO(refs.read_bytes())) if refs.exists() else None
            return Prepared.from_meta(lane, meta, pte.read_bytes() if pte.exists() else None,
                                      References(**loaded) if loaded else None)
        except (OSError, ValueError, RuntimeError, TypeError):
            return None

    def store(self, case_id: str, prepared) -> None:
        import torch

        final = self._path(case_id, prepared.lane)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-"))
        try:
            if prepared.pte is not None:
                (tmp / "program.pte").write_bytes(prepared.pte)
            if prepared.refs is not None:
                buf = io.BytesIO()
                torch.save(vars(prepared.refs), buf)
                (tmp / "refs.pt").write_bytes(buf.getvalue())
            (tmp / "meta.json").write_text(json.dumps(prepared.to_meta()))
            try:
                os.rename(tmp, final)
            except OSError:  # another worker stored the same cell first: theirs is as good
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
