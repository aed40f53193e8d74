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


# What decides a cached outcome (the .pte, the references, the static verdicts): every module of
# the stages folder (walked, never listed: a new fix module is in at once) and every module of the
# package they import, followed transitively through their imports (ast, top level or not,
# relative or absolute; a package's __init__ runs on import, so it is in too). A module a lowering
# never imports (the report's drawing, the run machinery) is out, so editing it keeps every cached
# lowering; editing one that is in (a contract rule, a fix, the case vocabulary) moves every key.
PACKAGE = Path(__file__).resolve().parent
ROOT_FOLDER = "stages"
DATA_SUFFIXES = (".json", ".yaml")  # data files inside the stages folder, read by its modules


def _module_file(package: Path, dotted: str) -> Path | None:
    """harness.a.b -> package/a/b.py or package/a/b/__init__.py (None: not a harness module)."""
    parts = dotted.split(".")
    if parts[0] != "harness":
        return None
    rel = Path(*parts[1:]) if len(parts) > 1 else Path()
    candidates = [package / rel / "__init__.py"]
    if len(parts) > 1:
        candidates.insert(0, package / rel.with_suffix(".py"))
    return next((c for c in candidates if c.is_file()), None)


def _dotted(package: Path, path: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(("harness", *(p for p in parts if p != "__init__")))


def imported_modules(package: Path, path: Path) -> set[Path]:
    """The files of the package that importing ``path`` runs directly: every module it names in
    an import (and, for ``from X import Y``, Y when it is a module), with the __init__ of each
    package on the way."""
    here = _dotted(package, path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]  # the package the module is in
    found: set[Path] = set()
    for name in _imported_names(path.read_text(), tuple(here)):
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # harness, harness.a, harness.a.b: each __init__ runs
            f = _module_file(package, ".".join(parts[:i]))
            if f is not None:
                found.add(f)
    return found


@functools.lru_cache(maxsize=512)
def _imported_names(text: str, here: tuple) -> frozenset:
    """The dotted names a module's source imports (relative ones anchored at package ``here``)."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..a import b
                anchor = here[:len(here) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
    return frozenset(names)


def digested_sources(package: Path = PACKAGE) -> list[Path]:
    """Every file that decides a cached outcome: the stages folder's modules and data, and the
    package modules their imports reach, transitively."""
    folder = package / ROOT_FOLDER
    walked = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    todo = [p for p in walked if p.suffix == ".py"]
    seen = set(todo)
    while todo:
        for f in imported_modules(package, todo.pop()):
            if f not in seen:
                seen.add(f)
                todo.append(f)
    seen |= {p for p in walked if p.suffix in DATA_SUFFIXES}
    return sorted(seen)


def digest_of(package: Path = PACKAGE) -> str:
    h = hashlib.sha256()
    for f in digested_sources(package):
        h.update(f.relative_to(package).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


# The digest a run started with, handed to every process it starts (lowering and execution
# workers, the run at a tree's subprocess): a worker started later keys its cache entries with the
# run header's digest, not with one of code edited meanwhile (issue 50's fidelity check found a
# run's 302 entries under another digest than its header's, after an edit in a shared checkout).
DIGEST_ENV = "CONVCONF_PIPELINE_DIGEST"


@functools.lru_cache(maxsize=1)
def pipeline_digest() -> str:
    given = os.environ.get(DIGEST_ENV, "")
    if given:
        return given
    digest = digest_of(PACKAGE)
    os.environ[DIGEST_ENV] = digest
    return digest
