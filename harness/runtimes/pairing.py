"""Which torch an executorch release runs with (``nox -s bisect``), from two sources:

- the wheel's own ``Requires-Dist`` on the package index, read through ``pip install --dry-run
  --report`` (only the metadata is fetched: PEP 658), e.g. 1.3.1 -> ``torch>=2.12.0a0``;
- what was measured here to install and run (``MEASURED``), which must satisfy that requirement.

A release with no measured pairing, or whose measured torch its wheel rejects, is one error
line; a release the index does not have is too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

# executorch -> the torch it was installed and run with on this project's machines. 2.13.0 is
# the CPU wheel on disk; 2.12.1 comes from the index as the CUDA build (~3.5 GB with its nvidia
# packages, about 5 minutes; it runs on CPU), measured 2026-12-02.
MEASURED = {"1.5.1": "2.13.0", "1.4.1": "2.13.0", "1.4.0": "2.13.0", "1.3.1": "2.12.1"}


def requires_dist(release: str) -> list[str]:
    """The wheel's Requires-Dist; ValueError when the index has no such release."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                               "--ignore-installed", "-q", "--report", str(report),
                               f"executorch=={release}"], capture_output=True, text=True)
        if proc.returncode != 0 or not report.exists():
            said = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
            raise ValueError(f"executorch {release} is not on the package index "
                             f"({said[-1] if said else 'pip failed'})")
        install = json.loads(report.read_text())["install"]
    return install[0]["metadata"].get("requires_dist") or []


def torch_requirement(release: str) -> str | None:
    """e.g. 'torch>=2.12.0a0', or None when the wheel does not name torch."""
    from packaging.requirements import Requirement

    for line in requires_dist(release):
        req = Requirement(line)
        if req.name == "torch" and not req.marker:
            return str(req)
    return None


def torch_for(release: str) -> tuple[str, str | None]:
    """-> (torch version to install, the wheel's torch requirement); ValueError, one line."""
    from packaging.requirements import Requirement

    spec = torch_requirement(release)
    if release not in MEASURED:
        raise ValueError(f"no measured torch pairing for executorch {release} (its wheel requires "
                         f"{spec or 'no particular torch'}): install it once by hand and add "
                         f"the torch that worked to harness/runtimes/pairing.py MEASURED")
    torch = MEASURED[release]
    if spec and not Requirement(spec).specifier.contains(torch, prereleases=True):
        raise ValueError(f"executorch {release} requires {spec}, but the measured pairing is "
                         f"torch {torch}: fix harness/runtimes/pairing.py MEASURED")
    return torch, spec
