"""On-disk cache of lowered cells: .pte bytes, the static verdicts and the eager references.

Key = (case id, backend, fix set, executorch, torch, convconf versions): a version change is a
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

from . import versions


def default_dir() -> Path:
    base = os.environ.get("CONVCONF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "convconf")
    return Path(base)


def key(case_id: str, backend: str, fixes: list[str], stack: dict | None = None) -> str:
    stack = stack or versions.stack()
    material = json.dumps([case_id, backend, sorted(fixes), stack], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:24]


class Cache:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def _path(self, k: str) -> Path:
        return self.root / k[:2] / k

    def load(self, k: str) -> dict | None:
        import torch  # here, not at import: `runtime build` must not pay for torch

        path = self._path(k)
        try:
            entry = json.loads((path / "meta.json").read_text())
            pte = path / "program.pte"
            entry["pte"] = pte.read_bytes() if pte.exists() else None
            refs = path / "refs.pt"
            entry["refs"] = torch.load(io.BytesIO(refs.read_bytes())) if refs.exists() else None
        except (OSError, ValueError, RuntimeError):
            return None
        return entry

    def load_meta(self, k: str) -> dict | None:
        try:
            return json.loads((self._path(k) / "meta.json").read_text())
        except (OSError, ValueError):
            return None

    def store(self, k: str, entry: dict) -> None:
        import torch

        final = self._path(k)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-"))
        try:
            meta = {n: v for n, v in entry.items() if n not in ("pte", "refs")}
            if entry.get("pte") is not None:
                (tmp / "program.pte").write_bytes(entry["pte"])
            if entry.get("refs") is not None:
                buf = io.BytesIO()
                torch.save(entry["refs"], buf)
                (tmp / "refs.pt").write_bytes(buf.getvalue())
            (tmp / "meta.json").write_text(json.dumps(meta))
            try:
                os.rename(tmp, final)
            except OSError:  # another worker stored the same cell first: theirs is as good
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
