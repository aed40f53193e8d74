"""Versions of what is under test; part of every cache key and of the run header."""

from __future__ import annotations

import functools
import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from . import __version__


@functools.lru_cache(maxsize=1)
def stack() -> dict:
    def v(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "absent"

    return {"executorch": v("executorch"), "torch": v("torch"), "convconf": __version__,
            "pipeline": pipeline_digest()}


# The stages whose code decides a cached outcome (the .pte, the references, the static verdicts):
# editing any of them, e.g. teaching the contract model a new rule, must not serve stale entries.
_STAGES = ("spec.py", "build.py", "quantize.py", "lower.py", "pipeline.py", "backends", "fixes")


@functools.lru_cache(maxsize=1)
def pipeline_digest() -> str:
    here = Path(__file__).parent
    h = hashlib.sha256()
    for stage in _STAGES:
        for f in sorted((here / stage).rglob("*.py")) if (here / stage).is_dir() else [here / stage]:
            h.update(f.relative_to(here).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]
