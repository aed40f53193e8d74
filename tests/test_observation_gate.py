"""Observing what a delegate dispatched (ETDump) never changes a verdict: a runtime whose event
tracer aborts a delegate's run (ExecuTorch before 1.5) runs unobserved; the run's processes key
their cache entries by the digest the run started with."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness import versions
from harness.stages import execute


@pytest.mark.parametrize("installed, observed", [("1.4.1", False), ("1.3.1", False),
                                                 ("1.5.1", True), ("1.6.0.dev20261201", True),
                                                 ("2.0.0", True), ("absent", True)])
def test_etdump_only_where_the_runtime_survives_it(monkeypatch, installed, observed):
    monkeypatch.setattr(versions, "stack", lambda: {"executorch": installed})
    assert execute.etdump_works() is observed


def test_workers_key_by_the_digest_the_run_started_with(tmp_path):
    """A process started by the run reads the run's digest from the environment, whatever its
    own code's digest is (an edit in the checkout while the run goes on)."""
    env = {**os.environ, versions.DIGEST_ENV: "abcdef012345"}
    said = subprocess.run([sys.executable, "-c", "from harness import versions; "
                           "print(versions.pipeline_digest())"], env=env, capture_output=True,
                          text=True, check=True)
    assert said.stdout.strip() == "abcdef012345"
    ours = versions.pipeline_digest()  # this process: computed (or handed down), then handed on
    assert os.environ[versions.DIGEST_ENV] == ours
    assert len(ours) == 12
