"""Fix registry: every module in this package that calls ``register`` adds an opt-in fix."""

from __future__ import annotations

from harness.registry import Registry
from harness.stages.fixes.base import Fix

_registry = Registry(__name__, __path__, "fix")
register, names, get = _registry.register, _registry.names, _registry.get


def parse(spec: str | None) -> list[str]:
    """``--fixes`` value -> validated fix names; "all" means every registered fix that the
    installed ExecuTorch can run (``unavailable``). KeyError (one line) for an unknown name or a
    named fix that cannot run here."""
    if not spec:
        return []
    if spec.strip() == "all":
        return [n for n in names() if n not in unavailable()]
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    for n in chosen:
        get(n)
        if n in unavailable():
            raise KeyError(f"fix {n} cannot run here: {unavailable()[n]}")
    return sorted(set(chosen))


def unavailable() -> dict[str, str]:
    """The registered fixes the installed ExecuTorch cannot run -> why (one line each)."""
    return {n: why for n in names() if (why := get(n).unavailable())}


def for_backend(fix_names: list[str], backend: str) -> list[str]:
    """The subset of a fix set that applies to a backend (the ``fixes`` column of its row)."""
    return [n for n in fix_names if backend in get(n).backends]


def all_for(backend: str) -> tuple[str, ...]:
    """What ``--fixes all`` gives ``backend``'s lane (its short name ``BACKEND+fixes``): every
    registered fix that applies to it and that the installed ExecuTorch can run."""
    return tuple(sorted(for_backend(parse("all"), backend)))


__all__ = ["Fix", "all_for", "for_backend", "get", "names", "parse", "register", "unavailable"]
