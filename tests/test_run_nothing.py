"""``harness run`` with nothing to run (--max-examples 0 and no case listed) is bad input: one
line "nothing to run", exit 2, before anything is written (an existing folder untouched)."""

import pytest

from harness.cli import main


@pytest.mark.parametrize("listed", [False, True])
def test_nothing_to_run_is_one_line_and_writes_nothing(tmp_path, capsys, listed):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    extra = []
    if listed:
        (tmp_path / "empty.json").write_text("[]\n")
        extra = ["--cases", str(tmp_path / "empty.json")]
    code = main(["run", "--max-examples", "0", "--backends", "xnnpack", "-j", "1",
                 "--out", str(out), *extra])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2
    assert len(err) == 1 and err[0].startswith("convconf: error: run: nothing to run: "), err
    assert ("hold(s) no case" in err[0]) == listed and ("no --cases" in err[0]) != listed
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
