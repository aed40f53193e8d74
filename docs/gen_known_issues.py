"""Write docs/known-issues.md from cases/upstream/known_issues.json (the curated list of the
delegate bugs findings are matched against: harness/results/known_issues.py).

    python docs/gen_known_issues.py            # rewrite docs/known-issues.md
    python docs/gen_known_issues.py --check    # exit 1 when it is out of date

A plain script: it reads only the JSON file (no harness import), and is tolerant of fields it
does not know and of optional ones that are missing, so an entry may grow fields before this
script shows them. Optional fields it shows when present: ``fixes`` (names of convconf fixes,
``python -m harness fixes``), ``releases`` (the releases affected, a list or a line),
``error_pattern``, ``source`` (the root cause: file and line at the runtime commit, linked, and
why) and ``searched`` (the tracker searches behind "not reported upstream": date, query,
result). tests/test_docs.py regenerates the page and compares it with the committed one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "cases" / "upstream" / "known_issues.json"
TARGET = ROOT / "docs" / "known-issues.md"
SOURCE_NAME = "cases/upstream/known_issues.json"


def _cell(text) -> str:
    """Text for one markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text) -> str:
    text = " ".join(str(text).split())
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _upstream(entry: dict) -> list[dict]:
    return [u for u in _list(entry.get("upstream")) if isinstance(u, dict)]


def _ref(u: dict) -> str:
    number = u.get("number")
    label = f"#{number}" if number is not None else (u.get("title") or "link")
    kind = {"pr": "PR", "issue": "issue"}.get(u.get("kind"), u.get("kind") or "")
    state = u.get("state") or ""
    said = ", ".join(x for x in (kind, state) if x)
    link = f"[{label}]({u['url']})" if u.get("url") else label
    return f"{link} ({said})" if said else link


def lanes(entry: dict) -> str:
    statuses = ", ".join(map(str, _list(entry.get("statuses")))) or "any status"
    return f"{entry.get('backend', '?')}: {statuses}"


def releases(entry: dict) -> str:
    given = entry.get("releases")
    if given:
        return ", ".join(map(str, _list(given)))
    fixed_in = entry.get("fixed_in")
    if fixed_in:
        return f"before {fixed_in} (fixed upstream in {fixed_in})"
    return "not fixed upstream"


def upstream(entry: dict) -> str:
    refs = [_ref(u) for u in _upstream(entry)]
    return ", ".join(refs) if refs else "not reported upstream: file it (`harness bug-report`)"


def fix(entry: dict) -> str:
    ours = [f"`{f}`" for f in _list(entry.get("fixes") or entry.get("fix"))]
    parts = [f"convconf: {', '.join(ours)}"] if ours else []
    if entry.get("fixed_in"):
        parts.append(f"upstream in {entry['fixed_in']}")
    else:
        prs = [u for u in _upstream(entry) if u.get("kind") == "pr" and u.get("state") != "closed"]
        parts += [f"upstream PR #{u.get('number')} ({u.get('state') or '?'})" for u in prs]
    if not parts:
        return "no upstream fix"
    return "; ".join(parts)


REPO_URL = "https://github.com/pytorch/executorch"


def source(entry: dict) -> str:
    """The root cause, one line: the file and line linked at its commit, and why."""
    src = entry.get("source")
    if not isinstance(src, dict) or not src.get("path"):
        return ""
    path, line, commit = src["path"], src.get("line"), str(src.get("commit") or "")
    where = f"{path}:{line}" if line is not None else path
    if commit:
        where = f"[`{where}`]({REPO_URL}/blob/{commit}/{path}" + (f"#L{line}" if line else "") \
                + f") at {commit[:10]}"
    else:
        where = f"`{where}`"
    why = " ".join(str(src.get("why") or "").split())
    return where + (f": {why}" if why else "")


def _found(result: str) -> str:
    result = str(result)
    for kind in ("issues", "pull"):
        head = f"https://github.com/pytorch/executorch/{kind}/"
        if result.startswith(head) and result[len(head):].isdigit():
            return f"[#{result[len(head):]}]({result})"
    return f"<{result}>" if result.startswith("http") else result


def searched(entry: dict) -> str:
    """The tracker searches, compactly: by date, each query and what it found."""
    found = [s for s in _list(entry.get("searched")) if isinstance(s, dict) and s.get("query")]
    by_date: dict = {}
    for s in found:
        by_date.setdefault(str(s.get("date") or "?"), []).append(
            f"{_code(s['query'])} -> {_found(s.get('result') or 'none')}")
    return "; ".join(f"{d}: " + "; ".join(qs) for d, qs in by_date.items())


def _when(value) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k} {_cond(v)}" for k, v in value.items())
    return str(value)


def _cond(v) -> str:
    if isinstance(v, dict) and set(v) == {"not_in"}:
        return "not in " + ", ".join(map(str, _list(v["not_in"])))
    if isinstance(v, list):
        return "in " + ", ".join(map(str, v))
    if isinstance(v, str) and v[:1] in "<>=!":
        return v
    return "= " + json.dumps(v)


def render(entries: list) -> str:
    entries = [e for e in entries if isinstance(e, dict)]
    out = [
        "# Known issues",
        "",
        f"<!-- generated by docs/gen_known_issues.py from {SOURCE_NAME}; do not edit by hand: "
        "python docs/gen_known_issues.py -->",
        "",
        f"The delegate bugs this project knows of, as curated in `{SOURCE_NAME}`. Every",
        "finding of a run is matched against them (backend, status, message, fingerprint and case",
        "features: `harness/results/known_issues.py`) and says `known: #N`, `known, not reported",
        "upstream` or `new` ([findings.md](findings.md)). The fixes are in [fixes.md](fixes.md);",
        "the releases each bug lives in come from the release sweep",
        "([releases-and-bisection.md](releases-and-bisection.md)).",
        "",
        f"{len(entries)} entries; {sum(1 for e in entries if not _upstream(e))} not reported upstream; "
        f"{sum(1 for e in entries if searched(e))} with the tracker searches behind that recorded; "
        f"{sum(1 for e in entries if source(e))} with the root cause's source line.",
        "",
        "| bug | lanes | releases affected | upstream | fix (convconf; upstream) |",
        "|---|---|---|---|---|",
    ]
    for e in entries:
        bug = f"[{_cell(e.get('title') or e.get('id'))}](#{e.get('id', '')})"
        out.append("| " + " | ".join([bug, _cell(lanes(e)), _cell(releases(e)), _cell(upstream(e)),
                                        _cell(fix(e))]) + " |")
    for e in entries:
        out += ["", f"## {e.get('id', '?')}", "", " ".join(str(e.get("title", "")).split()), ""]
        out.append(f"- lanes: {lanes(e)}")
        if e.get("message"):
            out.append(f"- message matches: {_code(e['message'])}")
        if e.get("error_pattern"):
            out.append(f"- where wrong (`error_pattern`) matches: {_code(e['error_pattern'])}")
        if e.get("when"):
            out.append(f"- cases where: {_code(_when(e['when']))}")
        out.append(f"- releases affected: {releases(e)}")
        out.append(f"- upstream: {upstream(e)}")
        for u in _upstream(e):
            if u.get("title"):
                out.append(f"  - #{u.get('number')}: {' '.join(str(u['title']).split())}")
        out.append(f"- fix: {fix(e)}")
        if source(e):
            out.append(f"- root cause: {source(e)}")
        if searched(e):
            out.append(f"- tracker searched: {searched(e)}")
        evidence = [str(x) for x in _list(e.get("evidence"))
                    if not any(x == u.get("url") for u in _upstream(e))]
        if evidence:
            out.append("- evidence: " + ", ".join(f"<{x}>" if x.startswith("http") else x
                                                  for x in evidence))
        if e.get("note"):
            out += ["", " ".join(str(e["note"]).split())]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page is out of date")
    ap.add_argument("--json", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=TARGET)
    args = ap.parse_args(argv)
    text = render(json.loads(args.json.read_text()))
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        if not same:
            print(f"{args.out} is out of date: run python docs/gen_known_issues.py", file=sys.stderr)
        return 0 if same else 1
    args.out.write_text(text)
    print(f"{args.out}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
