"""The regression corpus in cases/: case files whose entries carry the expected status per lane.

An entry is ``{"case": {...ConvCase...}, "expect": {"vulkan": "CONTRACT_VIOLATION",
"vulkan+vulkan-conv-padding": "NO_RUNTIME", ...}, "note": "..."}``; a lane is the backend, plus
``+fix,fix`` for a fix set. ``harness run --save-failures FILE`` grows a file with every failing
case a run found and the statuses it had then, so the next run that differs is a test failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import versions
from .spec import ConvCase, load_cases
from .status import OK


def lane(backend: str, fixes: str) -> str:
    return backend + (f"+{fixes}" if fixes else "")


def split_lane(name: str) -> tuple[str, list[str]]:
    backend, _, fixes = name.partition("+")
    return backend, [f for f in fixes.split(",") if f]


def entries(path: str | os.PathLike) -> list[dict]:
    load_cases(str(path))  # validates, with precise errors
    raw = json.loads(Path(path).read_text())
    return [e if isinstance(e, dict) and "case" in e else {"case": e} for e in raw]


def save_failures(df, cases: list[ConvCase], path: str | os.PathLike,
                  shrunk: dict | None = None) -> int:
    """Add every case with a cell outside OK, with all its lanes' statuses; -> new cases.
    With shrink results (``harness run --shrink``), a case whose failures all belong to shrunk
    findings is saved as those findings' minimal cases instead (expecting their one lane)."""
    from .findings import finding_id

    path = Path(path)
    existing = entries(path) if path.exists() else []
    known = {ConvCase.from_dict(e["case"]).case_id for e in existing}
    by_id = {c.case_id: c for c in cases}
    minimal = {k: v for k, v in (shrunk or {}).items() if v.get("case")}
    bad = df[~df["status"].isin([s.value for s in OK])]
    note = f"found by convconf on executorch {versions.stack()['executorch']}"
    new = []
    for case_id, rows in bad.groupby("case_id", sort=False):
        ids = {finding_id(r.backend, r.status, r.message or "") for r in rows.itertuples()}
        if minimal and ids <= set(minimal):
            for fid in sorted(ids):
                small = ConvCase.from_dict(minimal[fid]["case"])
                if small.case_id not in known:
                    known.add(small.case_id)
                    status = rows[[finding_id(r.backend, r.status, r.message or "") == fid
                                   for r in rows.itertuples()]].iloc[0]["status"]
                    new.append({"case": small.to_dict(), "expect": {minimal[fid]["lane"]: status},
                                "note": f"{note}; finding {fid}, shrunk from {case_id}"})
            continue
        if case_id in known or case_id not in by_id:
            continue
        everything = df[df["case_id"] == case_id]
        expect = {lane(r.backend, r.fixes): r.status for r in everything.itertuples()}
        known.add(case_id)
        new.append({"case": by_id[case_id].to_dict(), "expect": expect, "note": note})
    if new:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(existing + new, indent=1) + "\n")
        os.replace(tmp, path)
    return len(new)
