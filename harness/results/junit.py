"""The matrix as JUnit XML (DIR/junit.xml), so a CI system shows cells the way it shows tests.

One <testsuite> per lane (backend + fix set), one <testcase> per cell: classname = the lane,
name = the case id. PASS passes; NO_RUNTIME is <skipped> (nothing ran); every other status is a
<failure> whose type is the status and whose message is the cell's message, with the culprit
(``component``), the runtime log's last lines and the repro path.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from harness.lane import Lane
from harness.runfolder import RunFolder
from harness.status import Status


def write(run_dir: Path, df: pd.DataFrame, verdict: pd.Series | None = None) -> Path:
    """``verdict`` (baseline.classify): a known failure is <skipped> ("known: F-..."), not a
    <failure>, so CI goes red only for new ones."""
    root = ET.Element("testsuites", name="convconf")
    from harness.results import lanes as lane_names  # short names: vulkan+fixes

    lanes = df.assign(lane=[lane_names.short(Lane.of(b, f)) for b, f in
                            zip(df["backend"], df["fixes"], strict=True)])
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    known = (verdict.str.startswith("known") if verdict is not None
             else pd.Series(False, index=df.index))
    for name, cells in lanes.groupby("lane", sort=True):
        is_known = known.loc[cells.index]
        finding = cells["status"].map(lambda s: Status(s).is_finding)
        failures = int((finding & ~is_known).sum())
        skipped = int(((cells["status"] == Status.NO_RUNTIME) | is_known).sum())
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(cells)),
                              failures=str(failures), errors="0", skipped=str(skipped),
                              time=f"{cells['cell_time_s'].fillna(0).sum():.3f}")
        for r in cells.itertuples():
            seconds = r.cell_time_s if r.cell_time_s == r.cell_time_s else None  # NaN: not timed
            case = ET.SubElement(suite, "testcase", classname=name, name=r.case_id,
                                 time=f"{seconds or 0:.3f}")
            message = r.message or ""
            if r.status == Status.NO_RUNTIME:
                ET.SubElement(case, "skipped", message=message)
            elif known.loc[r.Index]:
                ET.SubElement(case, "skipped", type="xfail",
                              message=f"{verdict.loc[r.Index]} ({r.status}: {message})"[:1000])
            elif r.status != Status.PASS:
                script = RunFolder(run_dir).repro_path(r.case_id, r.backend, r.fixes)
                failure = ET.SubElement(case, "failure", type=r.status, message=message[:1000])
                delegation = getattr(r, "delegation", "")
                component = getattr(r, "component", "")
                said = getattr(r, "runtime_log", "")
                failure.text = (f"{r.status}: {message}\n"
                                + (f"component: {component}\n" if isinstance(component, str)
                                   and component else "")
                                + (f"runtime log (last lines):\n{said}\n" if isinstance(said, str)
                                   and said else "")
                                + (f"delegation: {delegation}\n" if isinstance(delegation, str)
                                   and delegation else "")
                                + (f"repro: {script}\n" if script.exists() else ""))
        totals["tests"] += len(cells)
        totals["failures"] += failures
        totals["skipped"] += skipped
    root.attrib.update({k: str(v) for k, v in totals.items()})
    out = run_dir / "junit.xml"
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out
