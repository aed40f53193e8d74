"""Fix registry: every module in this package that calls ``register`` adds an opt-in fix."""

from __future__ import annotations

import graphlib

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


def ordered(fix_names) -> list[str]:
    """A lane's fixes in the order their passes run: by name, except that a fix waits for the
    fixes of the lane that its ``runs_after`` names (graphlib; at each step the first name
    that is ready, so one set has one order and a fix moves no later than it must)."""
    chosen = sorted(set(fix_names))
    graph = graphlib.TopologicalSorter(
        {n: [d for d in get(n).runs_after if d in chosen] for n in chosen})
    graph.prepare()
    ready: set[str] = set()
    order: list[str] = []
    while graph.is_active():
        ready.update(graph.get_ready())
        order.append(first := min(ready))
        ready.discard(first)
        graph.done(first)
    return order


def all_for(backend: str) -> tuple[str, ...]:
    """What ``--fixes all`` gives ``backend``'s lane (its short name ``BACKEND+fixes``): every
    registered fix that applies to it and that the installed ExecuTorch can run."""
    return tuple(sorted(for_backend(parse("all"), backend)))


__all__ = ["Fix", "all_for", "for_backend", "get", "names", "ordered", "parse", "register", "unavailable"]
