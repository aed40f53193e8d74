"""Versions of what is under test; part of every cache key and of the run header."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

from . import __version__


@functools.lru_cache(maxsize=1)
def stack() -> dict:
    def v(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "absent"

    return {"executorch": v("executorch"), "torch": v("torch"), "convconf": __version__}
