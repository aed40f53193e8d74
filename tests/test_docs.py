"""The README and docs/ cannot go stale silently (issue 40).

- every repository path they name (in code spans, code blocks or links) exists: a path under
  harness/, cases/, tests/, benchmarks/, reports/, docs/, .ci/ or .github/, with ``*`` globs and
  upper-case placeholders (``NAME.diff``) matching at least one file, ``file.py::test_name``
  naming a test defined there, and every relative link (and its ``#anchor``) resolving;
- every ``python -m harness SUB [SUBSUB]`` / ``harness SUB`` they name is a real subcommand
  whose ``--help`` exits 0;
- every ``nox -s NAME`` names a session of noxfile.py;
- docs/known-issues.md is what docs/gen_known_issues.py makes of cases/upstream/known_issues.json.

Paths that runs produce rather than the repository holds are listed in PRODUCED.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Written by runs or by tests, not checked in: what a doc may name without the tree holding it.
PRODUCED = {
    "docs/screenshots/summary.png",    # the report's summary, shot by the browser test's run
    "cases/found.json",                 # nox -s nightly's --save-failures
}

PREFIXES = ("harness", "cases", "tests", "benchmarks", "reports", "docs", ".ci", ".github")
PATH = re.compile(r"(?<![\w./~$<>-])((?:%s)/[\w./*@<>${}:-]*)" % "|".join(map(re.escape, PREFIXES)))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
HARNESS = re.compile(r"(?:^|[\s(;&|`])(?:python\s+-m\s+)?harness\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?")
NOX = re.compile(r"\bnox\s+-s\s+([A-Za-z_][\w-]*)")
PLACEHOLDER = re.compile(r"<[^>/]*>|\$\{?\w+\}?|\b[A-Z][A-Z0-9_]*\b")


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


@functools.cache
def code_of(doc: Path) -> list[str]:
    """The doc's code: fenced blocks (comments dropped) and inline code spans."""
    text = doc.read_text()
    blocks = [re.sub(r"(^|\s)#.*$", "", b, flags=re.M) for b in FENCE.findall(text)]
    prose = FENCE.sub("", text)
    spans = [" ".join(m.group(2).split()) for m in SPAN.finditer(prose)]
    return blocks + spans


def links_of(doc: Path) -> list[str]:
    prose = SPAN.sub("", FENCE.sub("", doc.read_text()))
    return [a or b for a, b in LINK.findall(prose)]


def _paths():
    for doc in DOCS:
        for code in code_of(doc):
            for m in PATH.finditer(code):
                path = m.group(1).rstrip(".,:;)")
                yield pytest.param(_rel(doc), path, id=f"{_rel(doc)}:{path}")


def _links():
    for doc in DOCS:
        for target in links_of(doc):
            if re.match(r"[a-z][\w+.-]*:", target):  # http:, https:, mailto:
                continue
            yield pytest.param(_rel(doc), target, id=f"{_rel(doc)}:{target}")


def _harness_commands():
    found = set()
    for doc in DOCS:
        for code in code_of(doc):
            for m in HARNESS.finditer(code):
                found.add((m.group(1), m.group(2)))
    return sorted(found, key=lambda c: (c[0], c[1] or ""))


def _nox_sessions():
    return sorted({(_rel(doc), m.group(1)) for doc in DOCS
                   for text in [doc.read_text()] for m in NOX.finditer(text)})


def _exists(path: str) -> bool:
    path, _, test = path.partition("::")
    if path in PRODUCED:
        return True
    pattern = PLACEHOLDER.sub("*", path)
    pattern = re.sub(r"\{[^}]*\}", "*", pattern)  # OUT/etsuite.{csv,json}
    matches = [p for p in ROOT.glob(pattern.rstrip("/") or ".")] if any(
        c in pattern for c in "*?[") else [ROOT / pattern.rstrip("/")]
    matches = [p for p in matches if p.exists()]
    if not matches:
        return False
    if test:
        name = test.split("[")[0]
        return any(re.search(rf"^\s*(async\s+)?def {re.escape(name)}\(", p.read_text(), re.M)
                   for p in matches if p.is_file())
    return True


def test_the_docs_are_there():
    names = {d.name for d in DOCS}
    assert "README.md" in names and "known-issues.md" in names
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("doc,path", list(_paths()))
def test_named_path_exists(doc, path):
    assert _exists(path), f"{doc} names {path}, which is not in the tree (nor in PRODUCED)"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(h) for h in re.findall(r"^#{1,6}\s+(.*)$", text, re.M)}


@pytest.mark.parametrize("doc,target", list(_links()))
def test_relative_link_resolves(doc, target):
    file, _, anchor = target.partition("#")
    dest = (ROOT / doc).parent / file if file else ROOT / doc
    rel = _rel(dest.resolve()) if dest.resolve().is_relative_to(ROOT) else str(dest)
    assert dest.exists() or rel in PRODUCED, f"{doc} links to {target}: {rel} is not there"
    if anchor and dest.suffix == ".md" and dest.exists():
        assert anchor in anchors_of(dest), f"{doc} links to {target}: no such heading in {rel}"


@functools.cache
def _help(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _choices(said: str) -> list[str]:
    """The subcommands a --help lists (``{a,b,c}`` opening its positional arguments), or []."""
    m = re.search(r"^positional arguments:\n\s+\{([\w,-]+)\}", said, re.M)
    return m.group(1).split(",") if m else []


@pytest.mark.parametrize("sub,subsub", _harness_commands(),
                         ids=lambda v: v or "-")
def test_named_harness_command_runs(sub, subsub):
    top = _help()
    assert top.returncode == 0, top.stderr
    assert sub in _choices(top.stdout), (
        f"the docs name `harness {sub}`, which is not a subcommand ({_choices(top.stdout)})")
    said = _help(sub)
    assert said.returncode == 0, f"harness {sub} --help: exit {said.returncode}: {said.stderr}"
    inner = _choices(said.stdout)
    if inner and subsub and subsub in inner:
        deeper = _help(sub, subsub)
        assert deeper.returncode == 0, f"harness {sub} {subsub} --help: {deeper.stderr}"
    elif inner and subsub:
        pytest.fail(f"the docs name `harness {sub} {subsub}`; {sub}'s subcommands are {inner}")


@functools.cache
def nox_sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    names = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            target = call.func if call else deco
            if ast.unparse(target) in ("nox.session", "session"):
                name = node.name
                for kw in call.keywords if call else []:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        name = kw.value.value
                names.add(name)
    return names


@pytest.mark.parametrize("doc,session", _nox_sessions())
def test_named_nox_session_exists(doc, session):
    assert session in nox_sessions(), (
        f"{doc} names `nox -s {session}`; noxfile.py has {sorted(nox_sessions())}")


def test_the_path_checks_would_catch_a_stale_path():
    """The checks themselves: a moved module, a placeholder, a glob and a test name."""
    assert not _exists("harness/compare.py")  # moved to harness/stages/ long ago
    assert _exists("harness/stages/compare.py")
    assert _exists("harness/runtimes/patches/NAME.diff") and _exists("cases/models/*.json")
    assert _exists("tests/test_docs.py::test_the_path_checks_would_catch_a_stale_path")
    assert not _exists("tests/test_docs.py::no_such_test")
    spans = [m.group(1) for m in PATH.finditer("see `harness/stages/compare.py`, and docs/x.md.")]
    assert spans == ["harness/stages/compare.py", "docs/x.md."]
    cmd = HARNESS.search("`python -m harness runtime build vulkan`")
    assert cmd and cmd.groups() == ("runtime", "build")
    assert _choices(_help("runtime").stdout) == ["build", "patches", "status"]
    assert _choices(_help("bundle").stdout) == []  # --lane {vulkan} is an option, not a subcommand
    assert _slug("Tolerance policy (`harness/stages/compare.py`)") == \
        "tolerance-policy-harnessstagescomparepy"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_known_issues",
                                                  ROOT / "docs" / "gen_known_issues.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_known_issues_page_is_generated_from_the_json():
    """docs/known-issues.md is in sync with cases/upstream/known_issues.json: regenerate with
    ``python docs/gen_known_issues.py`` after editing the JSON."""
    import json

    gen = _generator()
    entries = json.loads(gen.SOURCE.read_text())
    page = gen.render(entries)
    committed = gen.TARGET.read_text()
    assert committed == page, ("docs/known-issues.md is out of date with "
                               "cases/upstream/known_issues.json: run python docs/gen_known_issues.py")
    for e in entries:  # every entry has its row and its section
        assert f"(#{e['id']})" in page and f"\n## {e['id']}\n" in page


def test_known_issues_generator_takes_optional_fields():
    """An entry with fields the generator does not know, or without the optional ones, renders;
    ``fixes`` and ``releases`` show when an entry has them."""
    gen = _generator()
    page = gen.render([
        {"id": "a-bug", "backend": "vulkan", "title": "a | b", "statuses": ["MISMATCH"],
         "upstream": None, "fixed_in": None, "something_new": {"x": 1}},
        {"id": "b-bug", "backend": "xnnpack", "title": "t", "statuses": ["LOWER_ERROR"],
         "fixes": ["xnnpack-conv1d-same-even"], "releases": ["1.3.1"], "fixed_in": "1.4.0",
         "upstream": [{"repo": "pytorch/executorch", "number": 1, "kind": "pr", "state": "merged",
                       "title": "x", "url": "https://github.com/pytorch/executorch/pull/1"}]},
    ])
    row_a = next(ln for ln in page.splitlines() if ln.startswith("| [a \\| b](#a-bug)"))
    assert "not reported upstream" in row_a and row_a.count(" | ") == 4
    row_b = next(ln for ln in page.splitlines() if "(#b-bug)" in ln)
    assert "`xnnpack-conv1d-same-even`" in row_b and "1.3.1" in row_b and "upstream in 1.4.0" in row_b
