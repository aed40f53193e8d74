"""``harness bug-report RUN_DIR FINDING_ID``: one finding as GitHub-flavoured markdown that an
upstream maintainer can paste into an issue.

Sections: title; environment (executorch / torch / Python, the Vulkan runtime's source commit and
the skew note when it is not the wheel's own commit, device and driver); the known upstream issue
that already tracks it, if any; the minimal case (the shrunk case when ``--shrink`` found one,
else the finding's representative) as a self-contained script that needs torch and executorch
only (results/repro.py's, for the stock lane: no convconf import); expected vs actual, with the
fingerprint and the picture of |out - ref| for a MISMATCH; what decides it (the deciding
parameters ``--diagnose`` found by running one-step variants, each with its outcome; the
correlational rule with its counts as supporting evidence, marked data-limited below
MIN_RULE_CELLS cells); the releases affected when
bisect runs (one run folder per release) are given; the fixes whose lanes clear it.

Everything comes from the run folder (run.json, matrix.json, findings as findings.find computes
them, evidence/, pictures/); nothing is executed here.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.header import RunHeader
from harness.lane import Lane
from harness.record import CellResult, cell_key
from harness.results import findings as findings_mod
from harness.results import lanes
from harness.runfolder import RunFolder
from harness.spec import ConvCase
from harness.status import Status

MIN_RULE_CELLS = findings_mod.MIN_RULE_CELLS
BACKEND_TAGS = {"vulkan": "[ET-VK]", "xnnpack": "[XNNPACK]"}
WHAT = {Status.MISMATCH: "wrong output values", Status.RUNTIME_ERROR: "the runtime raises",
        Status.CRASH: "the process dies", Status.LOWER_ERROR: "lowering fails",
        Status.NOT_DELEGATED: "the conv is not delegated",
        Status.CONTRACT_VIOLATION: "the serialized graph breaks a runtime argument contract",
        Status.INVALID: "eager PyTorch rejects it"}


class BugReportError(ValueError):
    """One line: why no report can be written (unknown finding, a run without findings)."""


def module_call(case: ConvCase) -> str:
    """``Conv2d(4, 4, 7, padding=3, groups=4)`` for a case (its build.py module, spelled as in
    PyTorch), with the input shape and dtype/quantization beside it."""
    from harness.stages.build import module_class, module_kwargs

    kw = module_kwargs(case)
    head = [repr(kw.pop(k)) for k in ("in_channels", "out_channels", "kernel_size") if k in kw]
    defaults = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": True,
                "padding_mode": "zeros", "output_padding": 0}
    rest = [f"{k}={v!r}" for k, v in kw.items() if defaults.get(k, object()) != v]
    extra = "" if case.dtype == "float32" else f", {case.dtype}"
    extra += f", {case.quant}" if case.quant else ""
    return (f"{module_class(case).__name__}({', '.join(head + rest)}) on input "
            f"{'x'.join(map(str, case.input_shape))}{extra}")


def _stock_cell(f: findings_mod.Finding, cells: list[CellResult]) -> CellResult:
    """The cell the report is about: the finding's representative when it is a stock lane's,
    else a stock cell of the finding, else the representative (whose script then needs the
    fix it ran with)."""
    mine = findings_mod.cells_of(f, cells)
    ex = next(c for c in mine if c.key ==
              cell_key(f.example["case_id"], f.example["backend"], f.example["fixes"]))
    if not ex.fixes:
        return ex
    return next((c for c in mine if not c.fixes), ex)


def _culprit(f: findings_mod.Finding, cell: CellResult) -> list[str]:
    """Which code failed (stages/culprit.py), the runtime's own decisive line(s) and its log's
    last lines; a finding across lanes lists each lane's cells."""
    out = []
    if f.component:
        out.append(f"- culprit: **`{f.component}`**"
                   + (" — code every lane runs (not a delegate): one finding across lanes"
                      if "," in f.backend else ""))
    if f.cells_by_lane:
        for lane, ids in f.cells_by_lane.items():
            out.append(f"  - {lane}: {len(ids)} cell(s): " + ", ".join(f"`{i}`" for i in ids[:5])
                       + (" ..." if len(ids) > 5 else ""))
    if f.runtime_line:
        out.append(f"- the runtime said: `{f.runtime_line}`")
    if cell.runtime_log:
        out += ["", "<details><summary>runtime log (last lines)</summary>", "", "```",
                cell.runtime_log.rstrip(), "```", "</details>"]
    return out


def title(f: findings_mod.Finding, cell: CellResult, case: ConvCase) -> str:
    if "," in f.backend:  # a component the lanes share (a portable kernel, an exir pass)
        tag = f"[{(f.component or 'shared').split(':')[0]}]"
    else:
        tag = BACKEND_TAGS.get(f.backend, f"[{f.backend}]")
    if f.status == Status.MISMATCH.value:
        what = f"wrong values ({cell.error_pattern})" if cell.error_pattern else WHAT[f.status]
    else:  # the cell's own words (the signature has its numbers taken out)
        said = (cell.message or f.signature).strip().splitlines()[0]
        said = said.removeprefix("Exception raised from ")
        what = f"{WHAT.get(f.status, f.status)}: {said[:160]}"
    return f"{tag} {module_call(case)}: {what}"


def environment(header: RunHeader, cell: CellResult) -> list[str]:
    v = header.versions
    lines = [f"- executorch {v.get('executorch', '?')}, torch {v.get('torch', '?')}, "
             f"Python {header.python or '?'}"
             + (f"; registered runtime backends: {', '.join(header.registered_backends)}"
                if header.registered_backends else "")]
    tree = header.executorch_tree  # a run at an ExecuTorch commit or tree (run --executorch)
    if tree:
        lines.append(f"- **ExecuTorch {tree.get('label', '?')}**"
                     + (f" ({tree['subject']})" if tree.get("subject") else "")
                     + f": its Python side (exir/, backends/) over the executorch "
                     f"{v.get('executorch', '?')} wheel"
                     + (f"; uncommitted changes in {', '.join(tree['changed'][:8])}"
                        if tree.get("changed") else "")
                     + (f"; this cell's verdict rests on: {cell.rests_on}" if cell.rests_on
                        else ""))
    lane = Lane.of(cell.backend, cell.fixes)
    device = header.devices.get(cell.backend) if lane.device else None
    vk = header.vulkan or {}
    if lane.backend == "vulkan" and vk:
        commit = vk.get("source_commit") or "?"
        exact = vk.get("source_exact")
        lines.append(f"- Vulkan runtime: built from ExecuTorch source commit `{commit}`"
                     + (" (the wheel's own commit)" if exact else "")
                     + " and plugged into the executorch wheel's runtime")
        if vk.get("skew_note"):
            lines.append(f"- **Source skew:** {vk['skew_note']}. The wheel's Python side (partitioner,"
                         f" serialization) is {v.get('executorch', '?')}'s; the runtime is that "
                         "commit's.")
        devs = (device or {}).get("devices") or vk.get("devices") or []
        for d in devs:
            lines.append(f"- Vulkan device: {d.get('deviceName', '?')} ({d.get('deviceType', '?')});"
                         f" driver {d.get('driverName', '?')} {d.get('driverInfo', '')}; "
                         f"Vulkan {d.get('apiVersion', '?')}")
        if not devs:
            lines.append(f"- Vulkan device: not reported {vk.get('device_problem', '')}".rstrip())
    elif device:
        lines.append(f"- device: {'; '.join(device.get('described', [])) or device.get('name')}")
    return lines


def _picture_link(run_dir: Path, f: findings_mod.Finding, out_file: Path | None) -> str:
    if not f.picture:
        return ""
    path = run_dir / f.picture
    if out_file is None:
        return str(path)
    return Path(os.path.relpath(path.resolve(), out_file.resolve().parent)).as_posix()


def values_table(ev: dict | None, cell: CellResult) -> list[str]:
    """A few expected vs actual values of the output row holding the worst element (small
    outputs only; the verdict itself is the cell's, by its per-element bound)."""
    if not ev or "out" not in ev or "ref" not in ev:
        return []
    import numpy as np

    out, ref = ev["out"], ev["ref"]
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    if not diff.size or not np.nanmax(diff) > 0:
        return []
    worst = np.unravel_index(int(np.nanargmax(diff)), diff.shape)
    idx = tuple(worst[:-1])  # the row (all but the last dim) of the worst element
    row_out, row_ref = out[idx], ref[idx]
    cols = range(min(len(row_ref), 12))
    where = ", ".join(str(int(i)) for i in idx)
    return ["", f"The worst row, output[{where}, :] (first {len(cols)} of {len(row_ref)}):", "",
            "| index | " + " | ".join(str(i) for i in cols) + " |",
            "|---|" + "---|" * len(cols),
            "| expected | " + " | ".join(f"{row_ref[i]:.4g}" for i in cols) + " |",
            "| actual | " + " | ".join(f"{row_out[i]:.4g}" for i in cols) + " |"]


def _releases(f: findings_mod.Finding, runs: list[Path]) -> list[str]:
    """Per bisect run (one run folder per release, oldest first): whether the finding is there."""
    lines = ["| executorch | torch | this finding | cells of its cases there |", "|---|---|---|---|"]
    for d in runs:
        folder = RunFolder(d)
        header = folder.header()  # RunFolderError (ValueError): one line
        cells = folder.cells()
        v = header.versions
        hit = [c for c in cells if findings_mod.lands_in(findings_mod.cell_finding_id(c), f,
                                                         c.component)]
        mine = [c for c in cells if c.case_id in set(f.case_ids)
                and findings_mod.family(c.backend) in f.backend.split(",")]
        statuses = sorted({c.status for c in mine})
        lines.append(f"| {v.get('executorch', '?')} | {v.get('torch', '?')} | "
                     f"{f'present ({len(hit)} cells)' if hit else 'absent'} | "
                     f"{', '.join(statuses) or 'not run'} |")
    return lines


def _deciding(f: findings_mod.Finding) -> list[str]:
    """The deciding parameters, by experiment (``--diagnose``): each one-step variant of the
    representative that ran, and what its cell did."""
    if not f.diagnosis:
        return ["- deciding parameters: not diagnosed in this run (`harness diagnose RUN_DIR` runs "
                "the representative's one-step variants as real cells)"]
    lines = [f"- deciding parameters (one-step variants of the representative, each run as a "
             f"real cell in the same lane; {f.diagnosis}): "
             f"**{', '.join(f.deciding) or 'none found'}**"]
    if f.variants:
        lines += ["", "  | variant | field | outcome |", "  |---|---|---|"]
        lines += [f"  | {v.change} | {v.field} | "
                  f"{'still fails (same finding)' if v.keeps else v.outcome} |" for v in f.variants]
        lines.append("")
    return lines


def _fixes(f: findings_mod.Finding) -> list[str]:
    from harness.stages import fixes as fix_registry

    if not f.fixed_by:
        return ["None of this run's fix lanes clears it (or the run had none: `--fixes`)."]
    lines = []
    for lane_fixes, share in f.fixed_by.items():
        names = lane_fixes.split(",")
        lines.append(f"- lane `{f.backend}+{lane_fixes}`: {share} of the finding's stock cells PASS"
                     + ("" if len(names) == 1 else f" ({len(names)} fixes together; run with "
                        "`--fixes each` to attribute)"))
        if len(names) == 1:
            try:
                fix = fix_registry.get(names[0])
            except KeyError:
                continue
            lines.append(f"  - `{fix.name}` [{fix.kind}]: {fix.summary}"
                         + (f" (patch `{fix.runtime_patch}`)" if fix.runtime_patch else ""))
    return lines


def render(run_dir: str | os.PathLike, finding_id: str, out_file: Path | None = None,
           releases: list[Path] | None = None) -> str:
    """The markdown (see the module doc). BugReportError (one line) for an unknown finding id
    or a run without findings; RunFolderError for a folder that is not a run."""
    from harness.results import repro

    folder = RunFolder(run_dir)
    run_dir = folder.path
    header = folder.header()
    cells = folder.cells()
    found = findings_mod.find(cells, run_dir)
    if not found:
        raise BugReportError(f"{run_dir}: the run has no findings (every cell is PASS or "
                             "NO_RUNTIME)")
    f = next((x for x in found if x.id == finding_id), None)
    if f is None:
        raise BugReportError(f"{run_dir}: no finding {finding_id!r} (its findings: "
                             f"{', '.join(x.id for x in found)})")
    findings_mod.draw_pictures(run_dir, [f])
    cell = _stock_cell(f, cells)
    minimal = f.minimal if f.minimal and f.minimal.get("case") else None
    if minimal and lanes.parse(minimal.get("lane", cell.backend)).fixes == ():
        case, case_note = ConvCase.from_dict(minimal["case"]), (
            f"the smallest case `--shrink` found in the same finding ({minimal.get('tries', '?')}"
            f" tries; shrunk from `{cell.case_id}`)")
    else:
        case, case_note = cell.case, "the finding's representative (no shrunk case in this run)"
    lane = Lane.of(cell.backend, cell.fixes)
    if cell.fixes:  # a finding only a fix lane shows: the full script, with the fix
        script = repro.script(case, lane.backend, cell.fixes, cell.status, cell.message,
                              repro.run_runtime_library(run_dir))
    else:  # the minimal reproducer (issue 47): only what this bug needs, no local path
        last = cell.message.strip().splitlines()[-1] if cell.message.strip() else ""
        script = repro.minimal_script(case, lane.backend, cell.status, repro.scrub(last),
                                      repro.scrub(title(f, cell, case)))
    picture = _picture_link(run_dir, f, out_file)
    ev = folder.evidence(cell.case_id, cell.backend, cell.fixes) if case == cell.case else None

    md = [f"# {title(f, cell, case)}", "",
          f"*Found by convconf (finding `{f.id}`: {f.count} cell(s) of lane(s) "
          f"{', '.join(f.lanes)}; run `{folder.run_id}`, started {header.started or '?'}"
          + (f", seed {header.seed}: `{repro.found_by(header)}` draws its generated cases again"
             if header.seed is not None else "") + ").*",
          "", "## Environment", "", *environment(header, cell), "",
          "## Upstream", ""]
    if f.known_issues:
        for k in f.known_issues:
            refs = ", ".join(f"[{u['repo']}#{u['number']}]({u['url']}) ({u['kind']}, {u['state']})"
                             for u in k["upstream"]) or "not reported upstream yet"
            md.append(f"- {k['label']} — {k['title']} ({k['cells']} cells): {refs}"
                      + (f"; fixed in {k['fixed_in']}" if k.get("fixed_in") else ""))
    else:
        md.append("- new: no known upstream issue matches (cases/upstream/known_issues.json)")
    md += ["", "## Minimal case", "",
           f"`{module_call(case)}` — {case_note}. Weights and inputs are drawn from fixed seeds "
           "(uniform in [-1, 1) / standard normal), so the numbers below are reproducible.",
           "", "Self-contained: needs torch and executorch only"
           + (" (and convconf's fix, which this lane ran with)" if cell.fixes else "")
           + ". It prints `STATUS: <status>`" + ("" if cell.fixes else
                                                   ", after expected vs actual at the worst element")
           + "." + ((" For Vulkan it needs a runtime with VulkanBackend registered (PyPI's wheel "
                     "has none): it loads the plug-in named by `CONVCONF_VULKAN_RUNTIME` (default:"
                     " the one this run used)." if cell.fixes else
                     " For Vulkan it needs a runtime with VulkanBackend registered (PyPI's wheel "
                     "has none): `VULKAN_RUNTIME=/path/to/libexecutorch_backend_vulkan.so python "
                     "repro.py` loads that plug-in into the wheel's runtime.")
                    if lane.backend == "vulkan" else ""),
           "", "```python", script.rstrip("\n"), "```", "",
           "## Expected vs actual", "",
           "- expected: PASS (the eager PyTorch module's output, within convconf's tolerance: "
           "float: each element within an error bound from the computation, about "
           "`2 x 8 sqrt(K) u sum|w x|` for a K-term sum (Higham's inner-product bound, "
           "docs/concepts.md), int8 one output step)",
           f"- actual: **{cell.status}**" + (f": `{cell.message[:500]}`" if cell.message else "")]
    md += _culprit(f, cell)
    if f.status == Status.MISMATCH.value:
        if cell.max_abs_error is not None:
            md.append(f"- max |out - ref| = {cell.max_abs_error:.4g}"
                      + (f" ({cell.bound_ratio:.3g}x its error bound, {cell.tolerance:.3g} at the "
                         "worst element)" if cell.bound_ratio is not None
                         and cell.tolerance else
                         f" (tolerance {cell.tolerance:.3g})" if cell.tolerance else ""))
        md.append(f"- where the output is wrong (fingerprint): **{cell.error_pattern or '-'}**")
        md += values_table(ev, cell)
        if picture:
            md += ["", f"![|out - ref| of {cell.case_id}]({picture})", "",
                   f"(`{picture}`: |out - ref| per output channel tile, rows = height, "
                   "columns = width; black is right)"]
    md += ["", "## What decides it", "", *_deciding(f),
           f"- correlational rule over this run's cells (supporting evidence): **{f.rule}**"
           + (f" ({f.rule_in}, {f.rule_out})" if f.rule_in else "")
           + (f" — data-limited: the finding has {f.count} cell(s) (< {MIN_RULE_CELLS})"
              if f.data_limited else ""),
           f"- cases of this finding: {', '.join(f'`{c}`' for c in f.case_ids[:12])}"
           + (f" and {len(f.case_ids) - 12} more" if len(f.case_ids) > 12 else "")]
    if releases:
        md += ["", "## Releases affected", "", *_releases(f, releases)]
    md += ["", "## A fix", "", *_fixes(f), ""]
    return "\n".join(md)
