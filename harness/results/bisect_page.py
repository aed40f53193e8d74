"""A finished bisect (``bisect.json``) -> ``bisect.html``: the ends, the direction, the first
commit with its PR and files (or the range skips leave), and every step with its verdict,
outcome, seconds, what it rests on and why it was skipped. Reads the JSON only (no run
machinery)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.results.templates import environment

PR_URL = "https://github.com/pytorch/executorch/pull/{}"
COMMIT_URL = "https://github.com/pytorch/executorch/commit/{}"


def write(out: Path, result: dict | None = None) -> Path:
    result = result if result is not None else json.loads((out / "bisect.json").read_text())
    terms = result["terms"]
    steps = []
    for s in result["steps"]:
        steps.append({**s, "term": terms.get(s.get("verdict"), s.get("verdict") or "skip"),
                      "short": s["commit"][:12]})
    page = environment().get_template("bisect.html.j2").render(
        r=result, steps=steps, terms=terms, pr_url=PR_URL, commit_url=COMMIT_URL)
    path = out / "bisect.html"
    path.write_text(page)
    return path


def found_in(run_dir: Path) -> list[Path]:
    """Bisect folders inside a run folder (``RUN/<dir>/bisect.json``, one or two levels down)."""
    run_dir = Path(run_dir)
    return sorted({p.parent for pattern in ("*/bisect.json", "*/*/bisect.json")
                   for p in run_dir.glob(pattern)})


def summary_line(result: dict) -> str:
    """'first fixed commit 10d3009521 (#20734), cell ... on xnnpack, 6 steps' for a link."""
    word = result.get("terms", {}).get("new", "bad")
    first = result.get("first_commit")
    cell = result.get("cell", {})
    what = (f"{cell.get('case', '?')} on {cell.get('backend', '?')}"
            f"{'+' + ','.join(cell['fixes']) if cell.get('fixes') else ''}"
            if cell.get("kind") == "cell" else cell.get("probe", "probe"))
    if first:
        said = f"first {word} commit {first['commit'][:10]}" + (
            f" (#{first['pr']})" if first.get("pr") else "")
    elif result.get("range"):
        said = f"first {word} commit one of {len(result['range'])}"
    else:
        said = f"no first {word} commit"
    return (f"{said}; {what}; {result.get('good', {}).get('ref', '?')}.."
            f"{result.get('bad', {}).get('ref', '?')}, {result.get('evaluated_steps', '?')} steps "
            f"at the {result.get('stage', '?')} stage")


def links_html(run_dir: Path) -> str:
    """A 'Commit bisects' section linking each bisect page inside the run folder ('' if none),
    for the run report."""
    import html

    items = []
    for folder in found_in(run_dir):
        try:
            result = json.loads((folder / "bisect.json").read_text())
            line = summary_line(result)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not (folder / "bisect.html").exists():
            try:
                write(folder, result)
            except Exception:  # noqa: BLE001 -- a bisect folder never breaks the run report
                continue
        rel = folder.relative_to(run_dir).as_posix()
        items.append(f'<li><a href="{html.escape(rel)}/bisect.html">{html.escape(rel)}</a>: '
                     f"{html.escape(line)}</li>")
    if not items:
        return ""
    return ('<section id="bisects"><h2>Commit bisects</h2><ul>\n' + "\n".join(items)
            + "\n</ul></section>\n")


def read_flips(run_dir: Path) -> dict | None:
    """The run's flips.json (``harness bisect --run-diff OLD THIS_RUN``: every flip since OLD
    and its first commit), for the report's top; None when there is none or it is unreadable."""
    path = Path(run_dir) / "flips.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except ValueError:
        return None
