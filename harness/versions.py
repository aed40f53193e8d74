"""Versions of what is under test; part of every cache key and of the run header."""

from __future__ import annotations

import functools
import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from harness import __version__


def cache_home() -> Path:
    """Where convconf keeps what it builds on this machine (lowered programs, runtime plug-ins,
    toolchains): $CONVCONF_CACHE, else $XDG_CACHE_HOME/convconf, else ~/.cache/convconf."""
    base = os.environ.get("CONVCONF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "convconf")
    return Path(base)


@functools.lru_cache(maxsize=1)
def stack() -> dict:
    def v(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "absent"

    return {"executorch": v("executorch"), "torch": v("torch"), "convconf": __version__,
            "pipeline": pipeline_digest()}


# What decides a cached outcome (the .pte, the references, the static verdicts): the case
# vocabulary (spec.py, status.py) and every module of the stages folder, found by
# walking it, never listed by hand: a module added there, or any edit of one (a new contract
# rule, a fix), changes the digest and so every cache key.
PACKAGE = Path(__file__).resolve().parent
DIGESTED_FILES = ("spec.py", "status.py")
DIGESTED_FOLDERS = ("stages",)


def digested_sources(package: Path = PACKAGE) -> list[Path]:
    files = [package / f for f in DIGESTED_FILES]
    for folder in DIGESTED_FOLDERS:
        files += sorted(p for p in (package / folder).rglob("*") if p.is_file()
                        and p.suffix in (".py", ".json", ".yaml") and "__pycache__" not in p.parts)
    return files


def digest_of(package: Path = PACKAGE) -> str:
    h = hashlib.sha256()
    for f in digested_sources(package):
        h.update(f.relative_to(package).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def pipeline_digest() -> str:
    return digest_of(PACKAGE)
