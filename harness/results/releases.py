"""N runs (e.g. one per executorch release, oldest first) -> the releases view a bisecting
developer reads first: status counts per lane and fix set per release, and every cell that
changed between consecutive releases (fixed / regressed / changed) with the message of each side.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.results import diff as diff_mod
from harness.results import matrix
from harness.header import RunHeader
from harness.runfolder import RunFolder


def label(run_dir: Path, header: RunHeader) -> str:
    """'executorch 1.4.1' (+ the Vulkan runtime's source commit when it was there)."""
    text = header.executorch_label  # at a tree (run --executorch): its commit too
    source = (header.vulkan or {}).get("source_commit")
    return text + (f" (vulkan runtime {source[:10]})" if source else "")


def load(dirs: list[Path]) -> list[tuple[str, pd.DataFrame]]:
    """-> [(label, matrix)]; ValueError naming an unreadable folder. Labels are unique (a
    folder name is added where two runs have the same versions)."""
    runs = []
    for d in dirs:
        df = matrix.read(d)  # ValueError: "cannot read matrix ..."
        header = RunFolder(d).header()  # RunFolderError (a ValueError) names the file
        # the fixes that release could not run: their lanes read "unavailable", not "-"
        df.attrs["fixes_unavailable"] = header.fixes_unavailable
        runs.append((label(d, header), df, d))
    labels = [r[0] for r in runs]
    return [(f"{lab} [{d.name}]" if labels.count(lab) > 1 else lab, df) for lab, df, d in runs]


def counts(runs: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Rows: lane and fix set; columns: release; cells: 'PASS 12, MISMATCH 3' (status order)."""
    order = {s: i for i, s in enumerate(matrix.STATUS_ORDER)}
    table = {}
    for name, df in runs:
        per = df.assign(lane=matrix.lane_names(df)).groupby("lane")["status"].value_counts()
        table[name] = {ln: ", ".join(f"{s} {int(per[ln][s])}" for s in
                                     sorted(per[ln].index, key=lambda s: order.get(s, 99)))
                       for ln in per.index.get_level_values(0).unique()}
    out = pd.DataFrame(table)
    for name, df in runs:  # a lane of a fix that release cannot run: say so, once per fix
        for fix, why in df.attrs.get("fixes_unavailable", {}).items():
            missing = out.index[out[name].isna() & out.index.str.contains(fix, regex=False)]
            out.loc[missing, name] = f"unavailable: {why}"
    return out.fillna("-").sort_index()


def transitions(runs: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Every cell whose status differs between consecutive runs (plus cells added/removed)."""
    parts = []
    for (old_name, old), (new_name, new) in zip(runs, runs[1:], strict=False):
        changed = diff_mod.diff(old, new)
        changed = changed[changed["change"] != "same"]
        parts.append(changed.assign(**{"from": old_name, "to": new_name}))
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True)
    first = ["from", "to", "change", "case_id", "backend", "fixes", "old", "new"]
    return out[first + [c for c in out.columns if c not in first]]


def write(runs: list[tuple[str, pd.DataFrame]], out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """releases.csv (the transitions), releases.json and releases.html into ``out``."""
    from harness.results.templates import environment

    table, moves = counts(runs), transitions(runs)
    out.mkdir(parents=True, exist_ok=True)
    moves.to_csv(out / "releases.csv", index=False)
    data = {"releases": [name for name, _ in runs], "counts": table.to_dict(orient="index"),
            "transitions": json.loads(moves.to_json(orient="records")) if len(moves) else []}
    (out / "releases.json").write_text(json.dumps(data, indent=1))
    page = environment().get_template("releases.html.j2").render(**data)
    (out / "releases.html").write_text(page)
    return table, moves
