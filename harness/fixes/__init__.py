"""Fix registry: every module in this package that calls ``register`` adds an opt-in fix."""

from __future__ import annotations

import importlib
import pkgutil

from .base import Fix

_REGISTRY: dict[str, Fix] = {}


def register(cls: type[Fix]) -> type[Fix]:
    _REGISTRY[cls.name] = cls()
    return cls


def _load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")


def names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> Fix:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown fix {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


def parse(spec: str | None) -> list[str]:
    """``--fixes`` value -> validated fix names; "all" means every registered fix."""
    if not spec:
        return []
    if spec.strip() == "all":
        return names()
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    for n in chosen:
        get(n)
    return sorted(set(chosen))


def for_backend(fix_names: list[str], backend: str) -> list[str]:
    """The subset of a fix set that applies to a backend (the ``fixes`` column of its row)."""
    return [n for n in fix_names if backend in get(n).backends]


__all__ = ["Fix", "for_backend", "get", "names", "parse", "register"]
