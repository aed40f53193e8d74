"""What the nightly carries from one night to the next: the night's seed and the coverage state.

**The seed of a night.** ``harness run --profile nightly`` without ``--seed`` draws one:
``$GITHUB_RUN_ID`` when it is set (a number, the same in every job and re-run of one workflow
run, so every shard of a night draws the same cases), else the UTC date as ``YYYYMMDD`` (one
seed per day on a machine without CI). ``--seed N`` reproduces any night exactly; the ci profile
and a run without a profile stay at seed 0.

**The coverage state** (``--coverage-state FILE``): a small JSON file of what every earlier night
reached -- the Vulkan shaders and XNNPACK paths its cells dispatched (``CellResult.reached``) and
the case-space cells its cases ran (``space_cell``: dim, padding spelling, kernel parity,
stride > 1, dilation > 1, groups kind, dtype or quantization, layout, dynamic sizes, reduction
size class) -- and which nights those were. A missing file is a first night; a file that is not
one (corrupt, another schema version, another ExecuTorch release) is one line
(``StateError``) and the night runs as a first night. ``learn`` adds a night's cells to the state
and says what it reached for the first time (``Tonight``, the run folder's
``first_reached.json``); the state is written atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

from harness.lane import Lane
from harness.runfolder import atomic_write
from harness.spec import ConvCase

SCHEMA_VERSION = 1
TONIGHT_FILE = "first_reached.json"  # in the run folder: what the night reached first
SEED_ENV = "GITHUB_RUN_ID"

# (upper bound, label) of the reduction length: input channels per group x kernel volume
SIZE_CLASSES = ((1_000, "r<1k"), (10_000, "r<10k"), (100_000, "r<100k"))


class StateError(ValueError):
    """One line: why a file is not a coverage state this convconf can carry on from."""


def night_seed(env=None, today: date | None = None) -> tuple[int, str]:
    """The seed of tonight's nightly and where it came from (module docstring)."""
    env = os.environ if env is None else env
    run_id = str(env.get(SEED_ENV) or "").strip()
    if run_id.isdigit():
        return int(run_id), f"${SEED_ENV} {run_id}"
    day = today or datetime.now(timezone.utc).date()
    return int(day.strftime("%Y%m%d")), f"the date {day.isoformat()} (UTC)"


def run_seed(seed: int | None, profile: str, env=None, today: date | None = None
             ) -> tuple[int, str]:
    """``harness run``'s seed: ``--seed`` when given, a fresh one per night for the nightly
    profile, else 0 (the ci profile and README command 1 stay deterministic)."""
    if seed is not None:
        return seed, "--seed"
    if profile == "nightly":
        return night_seed(env, today)
    return 0, "the default"


# --- the case space ------------------------------------------------------------------------------
def size_class(case: ConvCase) -> str:
    r = case.reduction_length()
    return next((label for bound, label in SIZE_CLASSES if r < bound), "r>=100k")


def groups_kind(case: ConvCase) -> str:
    if case.groups == 1:
        return "g1"
    return "depthwise" if case.groups == case.in_channels else "grouped"


def layout(case: ConvCase) -> str:
    parts = (["cl-input"] if case.memory_format != "contiguous" else []) + \
        (["cl-module"] if case.module_channels_last else [])
    return "+".join(parts) or "contiguous"


def space_cell(case: ConvCase) -> str:
    """The case-space combination a case runs, e.g.
    ``2d|same|even-k|stride>1|dil=1|depthwise|int8_per_tensor|contiguous|static|r<1k``."""
    return "|".join((
        ("T" if case.transposed else "") + f"{case.dim}d",
        case.padding_spelling,
        f"{case.kernel_parity}-k",
        "stride>1" if max(case.spatial("stride")) > 1 else "stride=1",
        "dil>1" if max(case.spatial("dilation")) > 1 else "dil=1",
        groups_kind(case),
        case.quant or case.dtype,
        layout(case),
        "static" if case.dynamic == "none" else f"dynamic-{case.dynamic}",
        size_class(case)))


# --- the state -----------------------------------------------------------------------------------
@dataclass
class Night:
    """One night the state has seen."""
    seed: int | None = None
    run_id: str = ""
    started: str = ""
    cases: int = 0


@dataclass
class NightState:
    """What every earlier night reached (module docstring)."""
    schema_version: int = SCHEMA_VERSION
    executorch: str = ""
    nights: list = field(default_factory=list)    # [Night], oldest first
    reached: dict = field(default_factory=dict)   # backend -> sorted path names
    cells: list = field(default_factory=list)     # sorted space_cell labels

    @property
    def paths(self) -> set[str]:
        """Every reached path as steering names it: ``backend:name``."""
        return {f"{b}:{n}" for b, names in self.reached.items() for n in names}

    def merged(self, other: NightState) -> NightState:
        """Both states' nights, paths and cells (the union; ``other``'s release if set)."""
        reached = {b: sorted(set(self.reached.get(b, [])) | set(other.reached.get(b, [])))
                   for b in sorted(set(self.reached) | set(other.reached))}
        ids = {n.run_id for n in self.nights if n.run_id}  # a run learnt twice is one night
        nights = [*self.nights, *(n for n in other.nights if not n.run_id or n.run_id not in ids)]
        return NightState(SCHEMA_VERSION, other.executorch or self.executorch, nights, reached,
                          sorted(set(self.cells) | set(other.cells)))

    def to_dict(self) -> dict:
        return {"schema_version": self.schema_version, "executorch": self.executorch,
                "nights": [asdict(n) for n in self.nights], "reached": self.reached,
                "cells": self.cells}

    @classmethod
    def from_dict(cls, data, where: str = "coverage state") -> NightState:
        """A parsed state file -> NightState; StateError (one line) when it is not one."""
        if not isinstance(data, dict):
            raise StateError(f"{where}: not a coverage state (a JSON object)")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise StateError(f"{where}: schema_version {version!r}, this convconf carries on "
                             f"from {SCHEMA_VERSION} only")
        reached, cells, nights = data.get("reached"), data.get("cells"), data.get("nights")
        if not (isinstance(reached, dict) and all(
                isinstance(v, list) and all(isinstance(n, str) for n in v)
                for v in reached.values())):
            raise StateError(f"{where}: 'reached' is not backend -> [path names]")
        if not (isinstance(cells, list) and all(isinstance(c, str) for c in cells)):
            raise StateError(f"{where}: 'cells' is not a list of case-space cells")
        if not (isinstance(nights, list) and all(isinstance(n, dict) for n in nights)):
            raise StateError(f"{where}: 'nights' is not a list of nights")
        known = set(Night.__dataclass_fields__)
        try:
            parsed = [Night(**{k: v for k, v in n.items() if k in known}) for n in nights]
        except TypeError as e:
            raise StateError(f"{where}: a night is not one ({e})") from None
        return cls(SCHEMA_VERSION, str(data.get("executorch") or ""), parsed,
                   {b: sorted(v) for b, v in reached.items()}, sorted(cells))


def read(path: str | os.PathLike, executorch: str = "") -> NightState:
    """The state in ``path``: empty when there is no such file; StateError (one line) when it
    is not a state, or one for another ExecuTorch release than ``executorch`` (when given)."""
    path = Path(path)
    if not path.exists():
        return NightState(executorch=executorch)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StateError(f"{path}: not a coverage state ({str(e).splitlines()[0]})") from None
    state = NightState.from_dict(data, str(path))
    if executorch and state.executorch and state.executorch != executorch:
        raise StateError(f"{path}: a coverage state of executorch {state.executorch}, this "
                         f"night runs {executorch}")
    return state


def read_or_first(path: str | os.PathLike, executorch: str = "") -> tuple[NightState, str]:
    """(the state, "") or, when ``path`` holds no usable state, (an empty one, the one line
    saying why: the night runs as a first night)."""
    try:
        return read(path, executorch), ""
    except StateError as e:
        return NightState(executorch=executorch), f"{e}; this night runs as a first night"


def write(path: str | os.PathLike, state: NightState) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(state.to_dict(), indent=1, sort_keys=True) + "\n")


# --- a night -------------------------------------------------------------------------------------
@dataclass
class Tonight:
    """What one night reached for the first time (no earlier night of its state had)."""
    night: Night = field(default_factory=Night)
    earlier_nights: int = 0
    paths: dict = field(default_factory=dict)  # backend -> path names reached first tonight
    cells: list = field(default_factory=list)  # case-space cells run first tonight
    cells_run: int = 0                         # distinct case-space cells tonight ran
    corpus_cases: int = 0                      # regression-corpus cases re-run
    corpus_added: int = 0                      # new failing cases added to it
    problem: str = ""                          # why the night ran as a first night

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Tonight:
        data = dict(data)
        data["night"] = Night(**data.get("night") or {})
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def lines(self) -> list[str]:
        """What the console says."""
        first = sum(len(v) for v in self.paths.values())
        per = "; ".join(f"{b} {len(v)}: {', '.join(v[:4])}{', ...' if len(v) > 4 else ''}"
                        for b, v in sorted(self.paths.items()) if v)
        after = f"after {self.earlier_nights} earlier night(s)" if self.earlier_nights \
            else "a first night"
        out = [f"tonight ({after}): {first} path(s) reached for the first time"
               + (f" ({per})" if per else "")
               + f"; {len(self.cells)} of {self.cells_run} case-space cell(s) run for the "
               "first time"]
        return out  # the problem, if any, is said once, when the state is read


def observed(cells) -> tuple[dict, list]:
    """(backend -> reached path names, case-space cells) of a run's CellResults."""
    reached: dict[str, set] = {}
    for c in cells:
        if c.reached:
            reached.setdefault(Lane.of(c.backend, c.fixes).backend, set()).update(c.reached)
    spaces = {space_cell(c.case) for c in cells if c.case is not None}
    return {b: sorted(v) for b, v in sorted(reached.items())}, sorted(spaces)


def learn(state: NightState, cells, night: Night) -> tuple[NightState, Tonight]:
    """The state with tonight's cells added, and what tonight reached for the first time."""
    reached, spaces = observed(cells)
    before = state.reached
    first = {b: sorted(set(names) - set(before.get(b, []))) for b, names in reached.items()}
    tonight = Tonight(night, len(state.nights), {b: v for b, v in first.items() if v},
                      sorted(set(spaces) - set(state.cells)), len(spaces))
    return state.merged(NightState(SCHEMA_VERSION, state.executorch, [night], reached,
                                   spaces)), tonight


def write_tonight(run_dir: str | os.PathLike, tonight: Tonight) -> None:
    atomic_write(Path(run_dir) / TONIGHT_FILE, json.dumps(tonight.to_dict(), indent=1) + "\n")


def read_tonight(run_dir: str | os.PathLike) -> Tonight | None:
    """The run folder's first_reached.json, or None (a run without --coverage-state)."""
    path = Path(run_dir) / TONIGHT_FILE
    try:
        return Tonight.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
