"""Runtime fixes: one Fix per source patch of the Vulkan runtime (``harness/runtimes/patches``).

Such a fix leaves lowering alone (no pass, no builder patch: the program is the stock one,
byte for byte); what changes is where the cell executes. A cell whose fix set names one or more
of them runs on the plug-in built with exactly those patches (``harness run`` builds it once
before the run, the run header names it; ``harness/run/runner.py``), in-process in the workers,
in bundles and on the GPU alike; a patch's ``Needs:`` come with it (``patching.resolve``). The
fix's name is the patch's name; ``summary``, ``bug`` and ``verified`` come from the patch's own
header, so a patch and its fix never disagree.
"""

from __future__ import annotations

import re

from harness.runtimes import patching
from harness.stages.fixes import register
from harness.stages.fixes.base import Fix

CORPUS = "cases/vulkan_runtime_patches.json"


def _paragraph(header: str, starts: str) -> str:
    """The header paragraph whose first line starts with ``starts``, as one line."""
    for block in re.split(r"\n\s*\n", header):
        if block.lstrip().startswith(starts):
            return " ".join(block.split())
    return ""


def _bug(patch: patching.Patch) -> str:
    symptom = _paragraph(patch.header, "Symptom")
    symptom = symptom.split(":", 1)[1].strip() if ":" in symptom else symptom
    return symptom[:300]


def _verified(patch: patching.Patch) -> str:
    said = _paragraph(patch.header, "Verified")
    needs = f"runs with {', '.join(patch.needs)} (its Needs:); " if patch.needs else ""
    return f"{said[:300]}; {needs}corpus: {CORPUS}" if said else f"{needs}corpus: {CORPUS}"


class RuntimePatchFix(Fix):
    """A fix that is a patch to the runtime's sources (graph unchanged)."""

    backends = ("vulkan",)


def _register(patch: patching.Patch) -> None:
    attrs = {"name": patch.name, "summary": patch.summary, "bug": _bug(patch),
             "verified": _verified(patch), "runtime_patch": patch.name,
             "trees": patch.trees, "__doc__": patch.summary}
    register(type(f"RuntimePatch_{patch.name.replace('-', '_')}", (RuntimePatchFix,), attrs))


for _patch in patching.list_patches():
    _register(_patch)
