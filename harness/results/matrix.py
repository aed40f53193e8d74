"""Rows -> the pass/fail matrix (pandas) -> matrix.csv + matrix.json, and the summaries."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from harness.results import lanes
from harness.runfolder import atomic_write
from harness.spec import FIELDS
from harness.status import ORDER, Status

LEAD = ["case_id", "backend", "fixes", "status", "max_abs_error", "message"]
STATUS_ORDER = [s.value for s in ORDER]


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=LEAD + list(FIELDS))
    rest = [c for c in df.columns if c not in LEAD and c not in FIELDS]
    return df[LEAD + list(FIELDS) + rest].reset_index(drop=True)


def write(df: pd.DataFrame, out_dir: str | os.PathLike) -> None:
    out = Path(out_dir)
    flat = df.copy()
    for col in flat.columns:  # lists and dicts as JSON text, so the CSV stays one value a cell
        if flat[col].map(lambda v: isinstance(v, (list, dict, tuple))).any():
            flat[col] = flat[col].map(lambda v: json.dumps(v) if isinstance(v, (list, dict, tuple)) else v)
    atomic_write(out / "matrix.csv", flat.to_csv(index=False))
    # not DataFrame.to_json: it keeps 10 decimal *places* (1.6689300537e-06 -> 1.6689e-06, and
    # below 5e-11 -> 0), so a folder rewritten from its matrix.json (ingest, merge) lost digits
    records = [{k: _jsonable(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
    atomic_write(out / "matrix.json", json.dumps(records, indent=1, allow_nan=False, default=str))


def _jsonable(v):
    """A cell's value as exact JSON: floats as Python writes them (round-trip exact), NaN and
    infinities as null (as pandas wrote them), numpy scalars as Python ones."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def read(path: str | os.PathLike) -> pd.DataFrame:
    """A run folder's matrix (or a matrix file); ValueError with the reason if unreadable."""
    path = Path(path)
    if path.is_dir():
        path = path / "matrix.json"
    try:
        df = pd.read_json(path, orient="records", dtype=False, precise_float=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read matrix ({str(e).splitlines()[0]})") from None
    missing = {"case_id", "backend", "fixes", "status"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: not a convconf matrix (no {', '.join(sorted(missing))} column)")
    df["fixes"] = df["fixes"].fillna("")
    return df


def status_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Status counts per (backend, fixes); columns in pipeline order."""
    table = pd.crosstab(lane_names(df), df["status"])
    return table.reindex(columns=[s for s in STATUS_ORDER if s in table.columns])


def fix_effects(df: pd.DataFrame) -> pd.DataFrame:
    """Per fix set: how many cells it changed, and from which stock status to which."""
    stock = df[df["fixes"] == ""][["case_id", "backend", "status"]]
    fixed = df[df["fixes"] != ""][["case_id", "backend", "fixes", "status"]]
    pairs = fixed.merge(stock, on=["case_id", "backend"], suffixes=("_fixed", "_stock"))
    if pairs.empty:
        return pd.DataFrame(columns=["fixes", "backend", "from", "to", "cells"])
    pairs["from"], pairs["to"] = pairs["status_stock"], pairs["status_fixed"]
    out = (pairs.groupby(["fixes", "backend", "from", "to"]).size().rename("cells").reset_index())
    return out


def made_worse(stock: str, fixed: str) -> bool:
    """Whether a fix made a cell worse: it passed (or ran right outside the delegate) and now
    fails, or it failed loudly and now computes wrong values (a silent MISMATCH is worse for a
    user than an error, though it got further down the pipeline)."""
    ok = (Status.PASS.value, Status.NOT_DELEGATED.value, Status.NO_RUNTIME.value)
    if stock == fixed:
        return False
    if stock in ok:
        return fixed not in ok
    return fixed == Status.MISMATCH.value


def fix_summary_lines(df: pd.DataFrame) -> list[str]:
    """Per fixed lane (its short name), what its fixes changed against stock: the moves, the
    cells turned PASS and the cells made worse (``made_worse``)."""
    effects = fix_effects(df)
    lines = []
    for (fixes, backend), group in effects.groupby(["fixes", "backend"]):
        changed = group[group["from"] != group["to"]]
        total = int(group["cells"].sum())
        name = lanes.short(backend, fixes)
        if changed.empty:
            lines.append(f"{name}: no-op here ({total} cells, none changed status)")
            continue
        moves = ", ".join(f"{r['from']}->{r['to']} x{r['cells']}" for _, r in changed.iterrows())
        passed = int(changed.loc[changed["to"] == Status.PASS.value, "cells"].sum())
        worse = int(sum(r["cells"] for _, r in changed.iterrows()
                        if made_worse(r["from"], r["to"])))
        lines.append(f"{name}: changed {int(changed['cells'].sum())}/{total} cells: {moves} "
                     f"(turned PASS {passed}, made worse {worse})")
    return lines


def agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Per lane, the static contract check against what the runtime did, executed cells only:
    a predicted-but-passed or an unpredicted failure is a finding about the contract model."""
    from harness.status import EXECUTED, Status

    cols = ["lane", "predicted_and_failed", "predicted_but_passed", "unpredicted_failures",
            "clean_and_passed", "executed"]
    if "predicted" not in df.columns:
        return pd.DataFrame(columns=cols)
    # a NOT_DELEGATED program that executed (it has a run time) ran right: it is a pass here
    ran_right = (df["status"] == Status.NOT_DELEGATED.value) & df.get(
        "run_time_s", pd.Series(index=df.index, dtype=float)).notna()
    ran = df[(df["status"].isin([s.value for s in EXECUTED]) | ran_right) & df["predicted"].notna()]
    rows = []
    for lane_name, sub in ran.groupby(lane_names(ran)):
        flagged = sub["predicted"] == Status.CONTRACT_VIOLATION.value
        passed = sub["status"].isin([Status.PASS.value, Status.NOT_DELEGATED.value])
        rows.append({"lane": lane_name, "predicted_and_failed": int((flagged & ~passed).sum()),
                     "predicted_but_passed": int((flagged & passed).sum()),
                     "unpredicted_failures": int((~flagged & ~passed).sum()),
                     "clean_and_passed": int((~flagged & passed).sum()), "executed": len(sub)})
    return pd.DataFrame(rows, columns=cols)


def lane_names(df: pd.DataFrame) -> pd.Series:
    """Each row's short lane name (``vulkan+fixes``; results/lanes.py), for tables."""
    return pd.Series([lanes.short(b, f) for b, f in zip(df["backend"], df["fixes"], strict=True)],
                     index=df.index, name="lane", dtype=object)


def program_note(reused_from) -> str:
    """A row's ``reused_from`` as the report says it: "same program as stock" ("" when the lane's
    program was lowered for it, and in a matrix from before the column)."""
    return f"same program as {reused_from}" if isinstance(reused_from, str) and reused_from else ""


def isolation_lines(df: pd.DataFrame) -> list[str]:
    """Cells whose outcome in a reused worker differed from their outcome alone."""
    if "isolation" not in df.columns:
        return []
    odd = df[df["isolation"].fillna("").str.startswith("DIFFERS")]
    return [f"{r.case_id} on {lanes.short(r.backend, r.fixes)}: {r.isolation}"
            for r in odd.itertuples()]
