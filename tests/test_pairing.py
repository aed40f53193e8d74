"""The bisect session's torch pairing: the wheel's Requires-Dist from the index + what was measured."""

import pytest

from harness.runtimes import pairing


def test_pairing_reads_the_wheels_requirement_and_checks_the_measured_torch():
    assert pairing.torch_for("1.3.1") == ("2.12.1", "torch>=2.12.0a0")
    assert pairing.torch_for("1.4.1") == ("2.13.0", "torch>=2.13.0a0")
    assert pairing.torch_for("1.5.1") == ("2.13.0", None)  # its wheel does not name torch


def test_unknown_pairing_and_unknown_release_are_one_line_each():
    with pytest.raises(ValueError, match=r"^no measured torch pairing for executorch 1\.0\.0"):
        pairing.torch_for("1.0.0")
    with pytest.raises(ValueError, match=r"^executorch 9\.9\.9 is not on the package index"):
        pairing.torch_for("9.9.9")


def test_a_measured_torch_the_wheel_rejects_is_refused(monkeypatch):
    monkeypatch.setitem(pairing.MEASURED, "1.4.1", "2.12.1")
    with pytest.raises(ValueError, match=r"requires torch>=2\.13\.0a0, but the measured"):
        pairing.torch_for("1.4.1")
