"""The patterns that must not come back into tests/ (issue #36), read from the test sources:

- a timing assert (``assert elapsed < 5``): speed is benchmarks/' business, shared CI cores
  make it flaky;
- ``time.sleep(`` to wait for something: poll for the condition with a bounded deadline or wait
  on an event; only code that runs as the simulated slow child (a string handed to another
  interpreter, or a worker task that simulates a hang) may sleep;
- a delegate's status pinned outside the corpus: ``assert row.status == "RUNTIME_ERROR"`` on a
  cell the delegate produced. A delegate outcome is a corpus entry (cases/*.json, per
  executorch release); a test asserts the harness's invariant (tests/honest.py). A status the
  harness itself imposes (a cell killed at the run's own timeout is CRASH) says so on its line:
  ``# harness-made: <why>``;
- a test whose checks all sit inside ``for``/``if`` bodies: it passes when the loop is empty
  or the branch is not taken.

Each check runs on the live tests and on a sample of the code it forbids (it must fail there).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# what a delegate earns on a case; INVALID / CONTRACT_VIOLATION / NO_RUNTIME are the harness's
# own verdicts (eager legality, the static contract model, no runtime present)
DELEGATE_STATUSES = {"PASS", "MISMATCH", "RUNTIME_ERROR", "CRASH", "NOT_DELEGATED", "LOWER_ERROR"}
# a status the harness itself imposes (a cell killed at the run's own timeout is CRASH) says so
# on its line: "# harness-made: <why>"
HARNESS_MADE = "# harness-made:"
TIMING_WORDS = ("elapsed", "seconds", "wall", "duration", "took")
# where a test may build cells by hand: a hand-made row with a status is a fixture, not a pin.
# The check below looks at what the status is compared *to*: a cell a delegate produced is
# reached through these calls / names.
PRODUCED_BY = {"run_cell", "execute", "prepare", "prepare_case", "read", "read_csv", "harness", "run",
               "_run", "matrix"}


def sources():
    return sorted(p for p in TESTS.glob("*.py") if p.name != "test_layout.py")


def _functions(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _is_sleep(node) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "sleep" and isinstance(f.value, ast.Name)
            and f.value.id == "time") or (isinstance(f, ast.Name) and f.id == "sleep")


def sleeps(text: str) -> list[int]:
    """Lines that call time.sleep in test code. Code in a string literal (a child's source) is
    not test code; a sleep inside a branch that simulates a hang (``if kind == "hang":``) is
    the process under test."""
    tree = ast.parse(text)
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_sleep(node)):
            continue
        up, simulated = node, False
        while up in parents:
            up = parents[up]
            if isinstance(up, ast.If) and "hang" in ast.unparse(up.test):
                simulated = True
        if not simulated:
            out.append(node.lineno)
    return out


def timing_asserts(text: str) -> list[int]:
    """``assert`` statements that compare a measured time with a bound."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            if not any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in cmp.ops):
                continue
            names = {n.id for n in ast.walk(cmp) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(cmp) if isinstance(n, ast.Attribute)}
            timing = [w for w in names if any(t in w.lower() for t in TIMING_WORDS)]
            numbers = [n for n in ast.walk(cmp) if isinstance(n, ast.Constant)
                       and isinstance(n.value, (int, float)) and n.value > 0]
            if timing and numbers:
                out.append(node.lineno)
    return out


def _status_side(node, names=frozenset()) -> bool:
    """An expression that reads a cell's status: ``x.status``, ``x["status"]``, ``x.status[0]``,
    or a local the test filled with statuses (``got = {k: r.status ...}; got[k]``)."""
    if isinstance(node, ast.Attribute) and node.attr == "status":
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and key.value == "status":
            return True
        return _status_side(node.value, names)
    if isinstance(node, (ast.SetComp, ast.ListComp, ast.Call)):
        return "status" in ast.unparse(node)
    return False


def _status_names(fn) -> frozenset:
    """Locals assigned from an expression that reads statuses."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and "status" in ast.unparse(node.value):
            for t in node.targets:
                base = t
                while isinstance(base, ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    out.add(base.id)
    return frozenset(out)


def _delegate_literal(node) -> str | None:
    if isinstance(node, ast.Constant) and node.value in DELEGATE_STATUSES:
        return node.value
    if (isinstance(node, ast.Attribute) and node.attr in DELEGATE_STATUSES
            and isinstance(node.value, ast.Name) and node.value.id == "Status"):
        return node.attr
    return None


def _guarded(node, parents, params) -> bool:
    """Inside an ``if`` on something the test observed (e.g. the witness: ``if seen.raised:
    assert row.status == "RUNTIME_ERROR"``). A branch on a parameter (``if flagged:``) only
    picks which pinned status to expect: not a guard."""
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.If, ast.IfExp)):
            used = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            if used - params:
                return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
    return False


def _root(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _hand_made(fn) -> set:
    """Locals the test built by hand (``row = CellResult(status="PASS")``): fixtures, whose
    status the test chose."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(
                isinstance(n, ast.Call) and getattr(n.func, "id", "") == "CellResult"
                for n in ast.walk(node.value)):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def _claims(test) -> list:
    """The comparisons an assert claims outright: its test, or the operands of a top-level
    ``and``; not one nested in another expression (``(row.status == X) == bool(raised)``
    checks the status against an observation, ``sum(r.status == X ...)`` counts)."""
    if isinstance(test, ast.Compare):
        return [test]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [c for v in test.values for c in _claims(v)]
    return []


def pinned_statuses(text: str, with_names: bool = False) -> list:
    """Unconditional asserts that a cell's status equals a delegate status literal, in a test
    that produced the cell for real (it calls run_cell / prepare / a run / reads a run's
    matrix). Hand-made rows (CellResult(status="PASS")) are fixtures and not matched."""
    tree = ast.parse(text)
    lines = text.splitlines()
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out = []
    for fn in _functions(tree):
        called = {(n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", ""))
                  for n in ast.walk(fn) if isinstance(n, ast.Call)}
        fixtures = {a.arg for a in fn.args.args}
        if not (called & PRODUCED_BY or fixtures & {"vk_run", "ingested", "runs", "run_dir"}):
            continue
        hand_made = _hand_made(fn)
        params = {a.arg for a in fn.args.args}
        names = _status_names(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert) or _guarded(node, parents, params):
                continue
            if HARNESS_MADE in lines[node.lineno - 1]:
                continue
            for cmp in _claims(node.test):
                sides = [cmp.left, *cmp.comparators]
                if not any(isinstance(op, (ast.Eq, ast.Is)) for op in cmp.ops):
                    continue
                literal = any(_delegate_literal(s) for s in sides) or any(
                    _delegate_literal(v) for s in sides if isinstance(s, ast.Dict)
                    for v in s.values) or any(
                    _delegate_literal(e) for s in sides
                    if isinstance(s, (ast.Set, ast.List, ast.Tuple)) for e in s.elts)
                if any(_root(s) in hand_made for s in sides):
                    continue
                if literal and (any(_status_side(s, names) for s in sides)
                                or "status" in ast.unparse(cmp)):
                    out.append((fn.name, node.lineno) if with_names else node.lineno)
    return sorted(set(out))


def _checks(node, helpers=frozenset()) -> bool:
    """A statement that can fail the test: assert, pytest.raises/fail, an assert_* helper or a
    helper of the module that asserts."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name.startswith("assert") or name in ("raises", "fail", "warns", "skip") or \
            name in helpers
    return False


def _never_empty(iterable) -> bool:
    """A loop over a non-empty literal (``for padding in ("valid", 0)``) always runs."""
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return bool(iterable.elts)
    if isinstance(iterable, ast.Call) and getattr(iterable.func, "id", "") in (
            "enumerate", "zip", "sorted", "reversed") and iterable.args:
        return all(_never_empty(a) for a in iterable.args)
    return False


def checks_only_when_lucky(text: str) -> list[str]:
    """Test functions whose every check sits inside a for/while/if body: with an empty loop or
    an untaken branch they pass having checked nothing. A loop over a literal list or a
    parametrize-like constant is still a loop: say ``assert rows`` before it."""
    tree = ast.parse(text)
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out = []
    helpers = frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                        and not n.name.startswith("test_")
                        and any(isinstance(a, ast.Assert) for a in ast.walk(n)))
    for fn in _functions(tree):
        if not fn.name.startswith("test_"):
            continue
        checks = [n for n in ast.walk(fn) if _checks(n, helpers)]
        if not checks:
            continue

        def inside_body(node):
            while node in parents and node is not fn:
                parent = parents[node]
                if isinstance(parent, (ast.For, ast.AsyncFor)) and node in parent.body:
                    if not _never_empty(parent.iter):
                        return True
                if isinstance(parent, ast.While) and node in parent.body:
                    return True
                if isinstance(parent, ast.If) and (node in parent.body or node in parent.orelse):
                    return True
                if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    return parent is not fn  # a nested helper: its own business
                node = parent
            return False

        if all(inside_body(c) for c in checks):
            out.append(f"{fn.name} (line {fn.lineno})")
    return out


def _report(fn):
    found = {p.name: fn(p.read_text()) for p in sources()}
    return {k: v for k, v in found.items() if v}


def test_no_timing_assert_in_tests():
    assert _report(timing_asserts) == {}


def test_no_sleep_to_wait_in_tests():
    assert _report(sleeps) == {}


# Tests that landed with a pin while #36 was being done (other issues' work, 2026-12): each
# still to be moved to the corpus by its owner. Listed by name so that the list cannot go
# stale: an entry that no longer pins anything fails below and must be removed.
PENDING: dict = {}


def test_no_delegate_status_pinned_outside_the_corpus():
    found = {(p.name, fn): line for p in sources()
             for fn, line in pinned_statuses(p.read_text(), with_names=True)}
    assert {k: v for k, v in found.items() if k not in PENDING} == {}
    assert set(PENDING) <= set(found), f"no longer pinning, drop from PENDING: {set(PENDING) - set(found)}"


def test_no_test_checks_only_inside_a_loop_or_branch():
    assert _report(checks_only_when_lucky) == {}


# The checks catch what they are for (each sample is the shape of code issue #36 removed).
OLD = {
    timing_asserts: '''
def test_quick(tmp_path):
    start = time.perf_counter()
    render()
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0
''',
    sleeps: '''
def test_resume():
    while time.time() < deadline and not journal.exists():
        time.sleep(0.2)
    assert journal.exists()
''',
    pinned_statuses: '''
def test_valid_fails(vk_run):
    _, cells = vk_run
    stock = cells[("seed-valid", "")]
    assert stock.status == "RUNTIME_ERROR", stock.message

def test_fp16():
    row = run_cell(case, "xnnpack", [])
    assert row.status == "PASS", row.message

def test_bundle(ingested):
    assert dict(zip(device.fixes, device.status)) == {"": "RUNTIME_ERROR", PATCH: "PASS"}
''',
    checks_only_when_lucky: '''
def test_every_row(rows):
    for r in rows:
        if r.isolation:
            assert r.isolation == "re-run alone"
''',
}
FINE = {
    timing_asserts: "def test_t(row):\n    assert row.run_time_s > 0\n",
    sleeps: ('def test_child():\n    run("import time; time.sleep(3)")\n'
             'def _cell(kind):\n    if kind == "hang":\n        time.sleep(60)\n'),
    pinned_statuses: ('def test_f():\n    row = CellResult(case=c, backend="v", status="PASS")\n'
                      '    assert row.status == "PASS"\n'
                      'def test_g(case):\n    row = run_cell(case, "xnnpack", [])\n'
                      '    if seen.raised:\n        assert row.status == "RUNTIME_ERROR"\n'
                      '    assert row.status == other.status\n'),
    checks_only_when_lucky: ('def test_rows(rows):\n    assert rows\n    for r in rows:\n'
                             '        assert r.ok\n'),
}


@pytest.mark.parametrize("check", list(OLD), ids=lambda f: f.__name__)
def test_each_check_fails_on_the_old_code_and_passes_the_new(check):
    assert check(OLD[check]), f"{check.__name__} misses the pattern it forbids"
    assert not check(FINE[check]), f"{check.__name__} flags code that is fine"
