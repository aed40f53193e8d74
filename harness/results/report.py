"""Run folder -> report.html: one self-contained page (inline CSS/JS, no network).

Templates live in reports/templates (jinja2). Rows of the heatmap are case feature groups
(dim x padding spelling x kernel parity x dilation x stride x quant), columns are lanes
(backend x fix set); every cell of the page's table opens to its case, metrics and repro.
"""

from __future__ import annotations

import base64
import json
import math
import os
from pathlib import Path

import pandas as pd

from harness.header import RunHeader
from harness.nights import read_tonight
from harness.record import CellResult
from harness.results import coverage
from harness.results import findings
from harness.results import lanes
from harness.results import matrix
from harness.results.templates import environment
from harness.lane import Lane
from harness.runfolder import RunFolder
from harness.status import ORDER, Status

COLORS = {Status.INVALID: "#9e9e9e", Status.LOWER_ERROR: "#8e24aa",
          Status.NOT_DELEGATED: "#fb8c00", Status.CONTRACT_VIOLATION: "#e53935",
          Status.NO_RUNTIME: "#90caf9", Status.CRASH: "#000000", Status.RUNTIME_ERROR: "#6d4c41",
          Status.MISMATCH: "#c62828", Status.PASS: "#43a047"}


def max_abs_text(status: str, metrics: dict) -> str:
    """A cell's max|d| as the cells table shows it; a float MISMATCH's with how far outside its
    error bound the worst element is ("0.0123 (23x the bound)", stages/compare.py)."""
    if metrics.get("max_abs_error") is None:
        return ""
    text = f"{metrics['max_abs_error']:.3g}"
    ratio = metrics.get("bound_ratio")
    if status == "MISMATCH" and ratio is not None:
        text += f" ({ratio:.3g}x the bound)" if math.isfinite(ratio) else " (inf x the bound)"
    return text


def feature_group(row) -> str:
    dil = "dil>1" if max(_spatial(row["dilation"])) > 1 else "dil=1"
    stride = "stride>1" if max(_spatial(row["stride"])) > 1 else "stride=1"
    short = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
    quant = row["quant"] if isinstance(row["quant"], str) else short.get(row["dtype"], "fp32")
    kind = ("T" if row["transposed"] else "") + f"{row['dim']}d"
    # Later dimensions only off their default (a matrix from before them has no such column),
    # so the groups of older cases read as before and each new value is a row of its own.
    mode = row.get("padding_mode")
    later = "".join(f" · {v}" for v in (
        mode if isinstance(mode, str) and mode != "zeros" else "",
        "out_pad>0" if max(_spatial(row.get("output_padding") or 0)) > 0 else "",
        "batch>1" if _spatial(row["input_shape"])[0] > 1 else "") if v)
    return (f"{kind} · {row['padding_spelling']} · {row['kernel_parity']} k · {dil} · {stride}"
            f" · {quant}{later}")


def _spatial(v):
    return v if isinstance(v, list) else [v]


def heatmap(df: pd.DataFrame) -> dict:
    groups = sorted(df["group"].unique())
    order = {lanes.short(Lane.of(b, f)): Lane.of(b, f) for b, f in zip(df["backend"], df["fixes"],
                                                                       strict=True)}
    columns = sorted(df["lane"].unique(), key=order.get)
    cells = {}
    for (g, l), sub in df.groupby(["group", "lane"]):
        counts = sub["status"].value_counts().to_dict()
        worst = min(counts, key=lambda s: [x.value for x in ORDER].index(s))
        passed = counts.get(Status.PASS, 0) + counts.get(Status.NO_RUNTIME, 0)
        cells[(g, l)] = {"counts": counts, "worst": worst, "color": COLORS[worst],
                         "text": f"{passed}/{len(sub)}", "title": ", ".join(
                             f"{k} {v}" for k, v in sorted(counts.items()))}
    return {"groups": groups, "lanes": columns, "cells": cells}


def write(run_dir: str | os.PathLike, df: pd.DataFrame | None = None, header: RunHeader | dict | None = None,
          found: list | None = None, covered: coverage.Coverage | None = None,
          verdict: pd.Series | None = None, baseline_ids: set | None = None) -> Path:
    """report.html from the run's matrix, header, findings and coverage (each read or computed
    here when not given: ``harness report DIR`` alone). ``verdict`` (baseline.classify, per
    cell) and ``baseline_ids`` (the baseline's finding ids): the summary's new / known / fixed."""
    folder = RunFolder(run_dir)
    run_dir = folder.path
    df = (matrix.read(run_dir) if df is None else df).copy()
    header = folder.header_or_empty() if header is None else RunHeader.coerce(header)
    if found is None:
        found = findings.find(df, run_dir)
        findings.draw_pictures(run_dir, found)
    if covered is None:
        covered = coverage.compute([CellResult.from_row(r) for r in df.to_dict(orient="records")],
                                   header)
    df["group"] = df.apply(feature_group, axis=1)
    df["lane"] = matrix.lane_names(df)
    cells, holder = [], findings.finding_of(found)  # a cell's finding, split and merged
    for i, r in enumerate(df.to_dict(orient="records")):
        script = folder.repro_path(r["case_id"], r["backend"], r["fixes"])
        metrics = {k: r.get(k) for k in ("predicted", "isolation", "max_abs_error",
                                         "max_rel_error", "mae", "sqnr_db",
                                         "error_steps", "eager_error_steps", "tolerance",
                                         "tolerance_bound", "bound_ratio", "out_shape",
                                         "ref_shape",
                                         "delegated_ops", "undelegated_ops", "pte_size_kb",
                                         "quantize_time_s", "lower_time_s", "run_time_s",
                                         "cell_time_s")
                   if r.get(k) is not None and r.get(k) == r.get(k) and r.get(k) != ""}
        if matrix.program_note(r.get("reused_from")):
            metrics["program"] = matrix.program_note(r.get("reused_from"))
        cells.append({"id": i, "case_id": r["case_id"], "lane": r["lane"], "backend": r["backend"],
                      "program": matrix.program_note(r.get("reused_from")),
                      "fixes": r["fixes"], "status": r["status"], "color": COLORS[r["status"]],
                      "message": r.get("message") or "",
                      "max_abs": max_abs_text(r["status"], metrics), "group": r["group"],
                      "features": cell_features(r), "source": _text(r.get("source")),
                      "finding": holder.get((r["case_id"], r["backend"], r["fixes"]))
                      or findings.cell_finding_id(r) or "",
                      "case": json.dumps({k: r[k] for k in ("dim", "transposed", "in_channels",
                                          "out_channels", "kernel_size", "stride", "padding",
                                          "padding_mode", "dilation", "output_padding", "groups",
                                          "bias", "input_shape", "dtype", "quant") if k in r}),
                      "metrics": json.dumps(metrics, default=str),
                      "repro": f"repro/{script.name}" if script.exists() else "",
                      "repro_cmd": f"python -m harness repro {r['case_id']} --backend "
                                   f"{r['backend']}" + (f" --fixes {r['fixes']}" if r["fixes"] else "")
                                   + f" --dir {shown_path(run_dir)}"})
    from harness.results import bisect_page  # the run's flips (bisect --run-diff), bisect links

    html = environment().get_template("report.html.j2").render(
        header=header, findings=found, pictures=_pictures(folder, found),
        summary=summary(df, found, verdict, baseline_ids), fix_lines=matrix.fix_summary_lines(df),
        path=lambda p: shown_path(p, run_dir), finding_lanes=finding_lanes,
        fix_set_name=findings.fix_set_name, lane_of=lanes.short,
        agreement=matrix.agreement(df), isolation_lines=matrix.isolation_lines(df),
        heat=heatmap(df), cells=cells, colors=COLORS, statuses=[s.value for s in ORDER],
        backends=sorted(df["backend"].unique()), features=feature_filters(cells),
        source_models=source_models(c["source"] for c in cells), coverage=covered,
        tonight=read_tonight(run_dir), flips=bisect_page.read_flips(run_dir))
    html = html.replace("</body>", bisect_page.links_html(run_dir) + "</body>", 1)
    out = run_dir / "report.html"
    out.write_text(html)
    return out


def summary(df: pd.DataFrame, found: list, verdict: pd.Series | None = None,
            baseline_ids: set | None = None, top: int = 5) -> dict:
    """What the report opens with. Per lane (short name, lane order): cells, PASS, each other
    status's count, and against a baseline the cells new (or regressed) and known; the
    baseline's findings no longer seen (fixed); the ``top`` largest findings with their culprit;
    the legend of the short names that stand for a fix list."""
    order = {lanes.short(lane): lane for lane in lanes.of_frame(df)}
    present = [s.value for s in ORDER if s != Status.PASS and (df["status"] == s.value).any()]
    rows = []
    for name, lane in order.items():
        sub = df[(df["backend"] == lane.backend_column) & (df["fixes"] == lane.fixes_column)]
        counts = sub["status"].value_counts()
        row = {"lane": name, "cells": len(sub), "PASS": int(counts.get(Status.PASS.value, 0)),
               "statuses": {s: int(counts.get(s, 0)) for s in present}}
        if verdict is not None:
            v = verdict.reindex(sub.index).fillna("")
            row["new"] = int(v.str.startswith(("new", "regressed")).sum())
            row["known"] = int(v.str.startswith("known").sum())
        rows.append(row)
    largest = sorted(found, key=lambda f: (-f.count, f.id))[:top]
    fixed = sorted(set(baseline_ids or ()) - {a for f in found for a in f.aliases or [f.id]})
    return {"rows": rows, "statuses": present, "baseline": verdict is not None,
            "largest": largest, "fixed": fixed if baseline_ids is not None else None,
            "legend": lanes.legend(order.values()), "findings": len(found),
            "not_pass": int(sum(Status(s).is_finding for s in df["status"]))}


def finding_lanes(f) -> str:
    """A finding's lanes by their short names (with its cells per lane when it spans several)."""
    if f.cells_by_lane:
        return "; ".join(f"{lanes.short(lanes.parse(n))}: {len(ids)}"
                         for n, ids in f.cells_by_lane.items())
    return ", ".join(lanes.short(lanes.parse(n)) for n in f.lanes) or f.backend


def shown_path(path, run_dir=None) -> str:
    """A path as the report shows it: relative to the run folder when inside it, else with
    ``~`` for the home folder."""
    text = str(path or "")
    if not text:
        return text
    if run_dir is not None:
        try:
            return str(Path(text).resolve().relative_to(Path(run_dir).resolve())) or "."
        except ValueError:
            pass
    home = str(Path.home())
    if home != "/" and (text + "/").startswith(home + "/"):
        return "~" + text[len(home):]
    return text


def _pictures(folder: RunFolder, found: list) -> dict:
    """finding id -> its picture as a data: URI (the page stays one self-contained file)."""
    out = {}
    for f in found:
        path = folder.path / f.picture if f.picture else None
        if path is not None and path.is_file():
            out[f.id] = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    return out


# The cell table's feature filters: key -> label. A matrix from before the later fields has no
# padding_mode/output_padding column; those cells read as the defaults.
FEATURE_FILTERS = {"padding": "padding spelling", "mode": "padding mode", "dtype": "dtype",
                   "dim": "dim", "batch": "batch", "delegation": "delegation"}


def cell_features(r: dict) -> dict:
    mode = r.get("padding_mode")
    return {"padding": r["padding_spelling"], "mode": mode if isinstance(mode, str) else "zeros",
            "dtype": r["quant"] if isinstance(r.get("quant"), str) else r["dtype"],
            "dim": f"{r['dim']}d" + (" transposed" if r["transposed"] else ""),
            "batch": "batch 1" if _spatial(r["input_shape"])[0] == 1 else "batch > 1",
            "delegation": _text(r.get("delegation")) or "not lowered"}


def feature_filters(cells: list[dict]) -> dict:
    """key -> (label, the values present), for the filters above the cell table."""
    return {key: (label, sorted({c["features"][key] for c in cells}))
            for key, label in FEATURE_FILTERS.items()}


def _text(value) -> str:
    return value if isinstance(value, str) else ""  # a missing column or NaN: no source


def source_models(sources) -> list[str]:
    """The models that cases came from (`cases from-model` writes "MODEL @ module paths", one
    per file a case was in, joined by " | "), for the report's source filter."""
    return sorted({part.split(" @ ")[0] for s in sources for part in s.split(" | ") if " @ " in part})


