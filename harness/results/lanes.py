"""Lane names as people read and type them (lane.py's ``short``), with the fix registry's word on
which fixes are "all" of a backend: ``vulkan+fixes`` is the lane ``--fixes all`` makes. Importing
``parse`` reads both spellings back (``Lane.parse`` alone does not know what ``+fixes`` means).

The full fix lists appear once, in a legend (``legend``): the report, findings.md, the console
footer; matrix.csv's ``fixes`` column keeps them as data.
"""

from __future__ import annotations

import functools

from harness.lane import Lane


@functools.lru_cache(maxsize=None)
def all_fixes(backend: str) -> tuple[str, ...]:
    """What ``--fixes all`` gives the backend's lane (the fix registry's ``all_for``)."""
    from harness.stages import fixes as fix_registry

    return fix_registry.all_for(backend)


def short(lane: Lane | str, fixes: str | tuple | list | None = None) -> str:
    """A lane (or its matrix ``backend``/``fixes`` columns) -> its short name."""
    if not isinstance(lane, Lane):
        lane = Lane.of(lane, fixes)
    return lane.short(all_fixes)


def parse(name: str) -> Lane:
    return Lane.parse(name, all_fixes)


def legend(lanes) -> list[tuple[str, str]]:
    """[(short name, the fixes it stands for, comma-joined)] for every lane whose short name
    does not spell its fixes out (``vulkan+fixes``), in lane order."""
    out = {}
    for lane in sorted(set(lanes)):
        name = short(lane)
        if lane.fixes and name != lane.name:
            out[name] = ", ".join(lane.fixes)
    return list(out.items())


def legend_lines(lanes) -> list[str]:
    return [f"{name} = {fixes}" for name, fixes in legend(lanes)]


def of_frame(df) -> list[Lane]:
    """The lanes of a matrix (its ``backend``/``fixes`` columns)."""
    return sorted({Lane.of(b, f) for b, f in zip(df["backend"], df["fixes"], strict=True)})
