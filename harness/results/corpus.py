"""The regression corpus in cases/: case files whose entries carry the expected status per lane.

An entry is ``{"case": {...ConvCase...}, "expect": {"vulkan": "CONTRACT_VIOLATION",
"vulkan+vulkan-conv-padding": "NO_RUNTIME", ...}, "note": "..."}``; a lane is the backend, plus
``+fix,fix`` for a fix set. ``"expect"`` is what the project's pinned executorch (pyproject.toml)
does, and any release not named otherwise. A bug that lives in some releases only adds
``"expect_by_release": {"1.3.1": {"xnnpack": "NOT_DELEGATED"}}``: on that executorch version those
lanes expect that instead (lanes it does not name keep ``"expect"``; a lane mapped to ``null`` is
not expected at all there). ``harness run --save-failures FILE`` grows a file with every failing
case a run found and the statuses it had then, so the next run that differs is a test failure;
``harness corpus RUN_DIR`` checks a finished run (any release, e.g. each of ``nox -s bisect``'s)
against the expectations for its executorch version.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness import versions
from harness.lane import Lane
from harness.results import lanes
from harness.runfolder import atomic_write
from harness.spec import ConvCase, load_entries
from harness.status import OK


class CorpusError(ValueError):
    """A corpus entry whose expectations are not lane -> status maps."""


def expectations(entry: dict, release: str) -> dict:
    """lane -> expected status on executorch ``release`` (see the module docstring)."""
    expect = dict(entry.get("expect") or {})
    for lane_name, status in (entry.get("expect_by_release") or {}).get(release, {}).items():
        if status is None:
            expect.pop(lane_name, None)
        else:
            expect[lane_name] = status
    return expect


def _check_entry(path, i: int, entry: dict) -> None:
    from harness.status import Status

    known = {s.value for s in Status}
    by_release = entry.get("expect_by_release") or {}
    maps = [("expect", entry.get("expect") or {})]
    if not isinstance(by_release, dict):
        raise CorpusError(f"{path}: entry #{i}: expect_by_release must map release -> {{lane: status}}")
    maps += [(f"expect_by_release[{r!r}]", m) for r, m in by_release.items()]
    for where, mapping in maps:
        if not isinstance(mapping, dict):
            raise CorpusError(f"{path}: entry #{i}: {where} must map lane -> status")
        for lane_name, status in mapping.items():
            if status is not None and status not in known:
                raise CorpusError(f"{path}: entry #{i}: {where}: lane {lane_name!r} expects "
                                  f"unknown status {status!r}")


def read(path: str | os.PathLike) -> list[tuple[ConvCase, dict]]:
    """(case, entry) per entry of a corpus file, cases and expectations validated."""
    found = load_entries(str(path))
    for i, (_, entry) in enumerate(found):
        _check_entry(path, i, entry)
    return found


def entries(path: str | os.PathLike) -> list[dict]:
    return [entry for _, entry in read(path)]


def check(df, paths, release: str) -> tuple[int, list[str], int]:
    """A finished run's matrix against the corpus files' expectations for ``release``:
    (cells as expected, one line per cell that moved, expected cells the run does not have)."""
    got = {(r.case_id, Lane.of(r.backend, r.fixes)): r for r in df.itertuples()}
    same, moved, absent = 0, [], 0
    for path in paths:
        for case, entry in read(path):
            case_id = case.case_id
            for lane_name, expected in expectations(entry, release).items():
                row = got.get((case_id, lanes.parse(lane_name)))
                if row is None:
                    absent += 1
                elif row.status == expected:
                    same += 1
                else:
                    moved.append(f"{Path(path).name}: {case_id} {lane_name}: expected {expected} "
                                 f"on executorch {release}, got {row.status} "
                                 f"({(row.message or '')[:160]})")
    return same, moved, absent


def save_failures(df, cases: list[ConvCase], path: str | os.PathLike,
                  shrunk: dict | None = None) -> int:
    """Add every case with a cell outside OK, with all its lanes' statuses; -> new cases.
    With shrink results (``harness run --shrink``), a case whose failures all belong to shrunk
    findings is saved as those findings' minimal cases instead (expecting their one lane)."""
    return len(grow(df, cases, path, shrunk))


def grow(df, cases: list[ConvCase], path: str | os.PathLike,
         shrunk: dict | None = None) -> list[dict]:
    """``save_failures``, -> the entries it added (``harness run --regression-corpus``: the
    night's new failing cases, also published as the run folder's new_failures.json). A missing
    file is an empty corpus; a file without new entries is left as it was."""
    path = Path(path)
    found = read(path) if path.exists() else []
    existing = [entry for _, entry in found]
    new = new_entries(df, cases, {case.case_id for case, _ in found}, shrunk)
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(existing + new, indent=1) + "\n")
    return new


def new_entries(df, cases: list[ConvCase], known: set, shrunk: dict | None = None) -> list[dict]:
    """The corpus entries of the run's failing cases whose ids ``known`` does not hold (see
    ``save_failures``)."""
    from harness.results.findings import cell_finding_id

    known = set(known)
    by_id = {c.case_id: c for c in cases}
    minimal = {k: v for k, v in (shrunk or {}).items() if v.get("case")}
    bad = df[~df["status"].isin([s.value for s in OK])]
    note = f"found by convconf on executorch {versions.stack()['executorch']}"
    new = []
    for case_id, rows in bad.groupby("case_id", sort=False):
        ids = {cell_finding_id(r) for r in rows.itertuples()}
        if minimal and ids <= set(minimal):
            for fid in sorted(ids):
                small = ConvCase.from_dict(minimal[fid]["case"])
                if small.case_id not in known:
                    known.add(small.case_id)
                    status = rows[[cell_finding_id(r) == fid
                                   for r in rows.itertuples()]].iloc[0]["status"]
                    new.append({"case": small.to_dict(), "expect": {minimal[fid]["lane"]: status},
                                "note": f"{note}; finding {fid}, shrunk from {case_id}"})
            continue
        if case_id in known or case_id not in by_id:
            continue
        everything = df[df["case_id"] == case_id]
        expect = {Lane.of(r.backend, r.fixes).name: r.status for r in everything.itertuples()}
        known.add(case_id)
        new.append({"case": by_id[case_id].to_dict(), "expect": expect, "note": note})
    return new
