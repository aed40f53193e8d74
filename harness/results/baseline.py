"""Known failures: a baseline run folder or a committed expectations file.

With ``harness run --baseline X`` a failing cell is *known* when its finding (findings.py id) is
in the baseline, and *new* otherwise, or when the same cell passed in a baseline run (a
regression, whatever its finding). Known failures are xfail in junit.xml; the exit code is 1
only for new ones. An expectations file is what ``harness expect DIR --out FILE`` writes:
``{"findings": {"F-...": "backend status: signature"}, "first_seen": {"F-...": when},
"minimal": {"F-...": case}}``; the nightly session uses cases/expectations/nightly.json.

``minimal`` is each known finding's minimal case from the run's ``--shrink`` (shrunk.json): a
later ``harness run --baseline X --shrink S`` re-checks that case (one cell) and shrinks a known
finding again only when the case no longer lands in it; every night's shards would otherwise
shrink the same known bugs again (harness/run/shrink.py ``shrink_all``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.record import cell_key
from harness.results import findings
from harness.results import matrix
from harness.status import Status


class BaselineError(ValueError):
    pass


@dataclass
class Baseline:
    source: str
    finding_ids: set = field(default_factory=set)
    passed: set = field(default_factory=set)  # (case_id, backend, fixes) that passed there
    first_seen: dict = field(default_factory=dict)  # finding id -> when it was first seen
    minimal: dict = field(default_factory=dict)  # finding id -> its minimal case (a case dict)


def load(path: Path) -> Baseline:
    if path.is_dir():
        df = matrix.read(path)  # ValueError names the file
        found = findings.find(df, path)
        ids = {a for f in found for a in f.aliases or [f.id]}  # split and merged ones too
        ok = df[df["status"] == Status.PASS]
        when = findings.seen(path) or dict.fromkeys(ids, findings.started_at(path))
        return Baseline(str(path), ids, set(map(cell_key, ok.case_id, ok.backend, ok.fixes)), when,
                        _minimal_of(found))
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BaselineError(f"--baseline {path}: cannot read expectations ({e})") from None
    known = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(known, dict) or not all(str(k).startswith("F-") for k in known):
        raise BaselineError(f"--baseline {path}: expected {{\"findings\": {{\"F-...\": ...}}}}, "
                            "as `harness expect` writes")
    minimal = data.get("minimal") or {}
    if not isinstance(minimal, dict) or not all(isinstance(c, dict) for c in minimal.values()):
        raise BaselineError(f"--baseline {path}: \"minimal\" must map finding ids to cases, "
                            "as `harness expect` writes")
    return Baseline(str(path), set(known), first_seen=data.get("first_seen") or {},
                    minimal={k: v for k, v in minimal.items() if k in known})


def classify(df: pd.DataFrame, base: Baseline) -> pd.Series:
    """Per cell: "" (PASS / NO_RUNTIME), "known: F-..." or "new: F-..." / "regressed: ...".
    The id is the cell's finding's: a part split off a finding the baseline knew is known, and
    so is a finding merged from ones it knew any of; the verdict says which (findings.known_as)."""
    holder = {tuple(k): f for f in findings.find(df) for k in f.cell_keys}

    def one(r) -> str:
        fid = findings.cell_finding_id(r)
        if fid is None:
            return ""
        f = holder.get(cell_key(r.case_id, r.backend, r.fixes))
        if cell_key(r.case_id, r.backend, r.fixes) in base.passed:
            return f"regressed: {f.id if f else fid} (PASS in {base.source})"
        # a baseline from before error patterns knew a MISMATCH by its message alone
        legacy = findings.finding_id(r.backend, r.status, r.message or "")
        known = fid in base.finding_ids or legacy in base.finding_ids
        how = findings.known_as(f, base.finding_ids | ({fid} if known else set())) if f else ""
        if f is None or (f.id == fid and (known or not how)):
            return f"{'known' if known else 'new'}: {fid}"
        return f"known: {f.id} (as {how})" if how else f"new: {f.id}"

    return pd.Series([one(r) for r in df.itertuples()], index=df.index, dtype=object)


def expectations(run_dir: Path, earlier: Baseline | None = None) -> dict:
    """The run's findings as an expectations file; with ``earlier`` (the file it refreshes), a
    finding both know keeps the earlier first-seen date, and its earlier minimal case where this
    run did not shrink it."""
    found = findings.find(matrix.read(run_dir), run_dir)
    when = findings.seen(run_dir)
    first = dict(earlier.first_seen) if earlier else {}
    minimal = {**(earlier.minimal if earlier else {}), **_minimal_of(found)}
    return {"findings": {a: f"{f.backend} {f.status}: {f.signature}" + (f" (in {f.id})" if a != f.id
                                                                     else "")
                         for f in found for a in f.aliases or [f.id]},
            "first_seen": {f.id: min(filter(None, (first.get(f.id), when.get(f.id))))
                           for f in found if first.get(f.id) or when.get(f.id)},
            "minimal": {f.id: minimal[f.id] for f in found if f.id in minimal}}


def _minimal_of(found) -> dict:
    """Finding id -> its minimal case (a case dict), for the findings --shrink shrank."""
    return {f.id: f.minimal["case"] for f in found if f.minimal and f.minimal.get("case")}
