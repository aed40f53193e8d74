"""Code-path coverage of a run, observed and predicted: ``coverage.json`` and the report's
Coverage section, from the cell records.

Observed: each executed cell's ``reached`` (execute.py): the compute shaders the Vulkan runtime
dispatched, the conv nodes of the XNNPACK payload. Known: the universe they are drawn from --
the conv shader variants of the Vulkan plug-in's source (runtimes/shaders.py, recorded in the
run header as ``vulkan.conv_shaders``) and XNNPACK's conv node kinds x datatypes x fused
activation (stages/backends/xnnpack_paths.py). Reachable: the known paths the routing models
route a generated case to on this device (stages/backends/routing_grid.py enumerates the
models' routes over a grid of the case fields they read); every other known path is listed
with why it is unreachable (Mali only, no int8 dot product only, not generated, not routed by
the model). Per family: reached / reachable / known, the unreached reachable paths first. A
green matrix over unreached code is no evidence; this says which code it is.

The device facts the Vulkan routes depend on: Mali when the run header's first Vulkan device is
named Mali; int8 dot products assumed (lavapipe and the NVIDIA H200 have them; vulkaninfo's
summary does not say).

Predicted: the routing model (stages/backends/vulkan_routing.py) names the conv shaders a case
reaches on the stock runtime; for every executed stock Vulkan cell that reported dispatches
the prediction is compared with what was dispatched. A disagreement is a finding about the
model (or about the runtime the model was read from).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.lane import Lane
from harness.header import RunHeader
from harness.record import CellResult
from harness.runfolder import atomic_write
from harness.stages.backends import routing_grid, vulkan_routing, xnnpack_paths

FILE = "coverage.json"


@dataclass
class Family:
    name: str
    known: list
    reached: list
    reachable: list = field(default_factory=list)  # of known: reachable on this device
    unreachable: dict = field(default_factory=dict)  # known name -> why it is not

    @property
    def unreached(self) -> list:
        return sorted(set(self.known) - set(self.reached))

    @property
    def unreached_reachable(self) -> list:
        return sorted(set(self.reachable) - set(self.reached))


@dataclass
class BackendCoverage:
    backend: str
    families: list = field(default_factory=list)   # [Family]
    other_reached: list = field(default_factory=list)  # reached, outside the known universe
    source: str = ""  # where the known universe was read from
    problem: str = ""  # why it is empty or partial
    device: dict = field(default_factory=dict)  # the device facts reachability assumed
    absent: dict = field(default_factory=dict)  # named by the model, not in the source: rule

    @property
    def known(self) -> list:
        return sorted(n for f in self.families for n in f.known)

    @property
    def reached(self) -> list:
        return sorted(n for f in self.families for n in f.reached)

    @property
    def unreached(self) -> list:
        return sorted(n for f in self.families for n in f.unreached)

    @property
    def reachable(self) -> list:
        return sorted(n for f in self.families for n in f.reachable)

    @property
    def unreached_reachable(self) -> list:
        return sorted(n for f in self.families for n in f.unreached_reachable)

    @property
    def unreachable(self) -> dict:
        return dict(sorted((n, why) for f in self.families for n, why in f.unreachable.items()))

    def unreachable_by_reason(self) -> dict:
        """reason -> [names], the reasons in REASONS order."""
        out: dict = {}
        for name, why in self.unreachable.items():
            out.setdefault(why, []).append(name)
        order = list(routing_grid.REASONS.values())
        return dict(sorted(out.items(), key=lambda kv: (order.index(kv[0])
                                                        if kv[0] in order else len(order))))

    @property
    def notes(self) -> dict:
        """reason -> what it means, for the reasons this backend's unreachable paths give."""
        return {why: routing_grid.NOTES.get(why, "") for why in self.unreachable_by_reason()}

    def to_dict(self) -> dict:
        return {"known": self.known, "reached": self.reached, "unreached": self.unreached,
                "reachable": self.reachable, "unreached_reachable": self.unreached_reachable,
                "unreachable": self.unreachable,
                "families": {f.name: {"known": len(f.known), "reached": f.reached,
                                      "unreached": f.unreached, "reachable": f.reachable,
                                      "unreached_reachable": f.unreached_reachable}
                             for f in self.families},
                "other_reached": self.other_reached, "source": self.source,
                "problem": self.problem, "device": self.device,
                "reasons": self.notes,
                "predicted_absent": self.absent}


@dataclass
class RoutingCheck:
    """One executed stock Vulkan cell: the routing model's conv shaders against the ones the
    runtime dispatched."""
    case_id: str
    lane: str
    predicted: list | None  # None: the model makes no prediction for this case
    observed: list
    rule: str = ""

    @property
    def agrees(self) -> bool | None:
        return None if self.predicted is None else sorted(self.predicted) == sorted(self.observed)

    def to_dict(self) -> dict:
        return {"case_id": self.case_id, "lane": self.lane, "predicted": self.predicted,
                "observed": self.observed, "rule": self.rule, "agrees": self.agrees}


@dataclass
class Coverage:
    backends: dict = field(default_factory=dict)  # backend -> BackendCoverage
    routing: list = field(default_factory=list)   # [RoutingCheck]

    @property
    def disagreements(self) -> list:
        return [r for r in self.routing if r.agrees is False]

    def routing_counts(self) -> dict:
        return {"agree": sum(r.agrees is True for r in self.routing),
                "disagree": len(self.disagreements),
                "no_prediction": sum(r.agrees is None for r in self.routing)}

    def to_dict(self) -> dict:
        out = {b: c.to_dict() for b, c in sorted(self.backends.items())}
        out["routing_model"] = {**self.routing_counts(),
                                "disagreements": [r.to_dict() for r in self.disagreements]}
        return out


def _by_family(known_families: dict, reached: set, reach: routing_grid.Reachability
               ) -> tuple[list, list]:
    families = [Family(name, sorted(names), sorted(reached & set(names)),
                       sorted(set(names) & set(reach.reachable)),
                       {n: reach.unreachable[n] for n in sorted(names) if n in reach.unreachable})
                for name, names in sorted(known_families.items())]
    known = {n for names in known_families.values() for n in names}
    return families, sorted(reached - known)


def device_facts(header: RunHeader) -> dict:
    """The device facts the Vulkan routes are enumerated for (module docstring)."""
    devices = (header.vulkan or {}).get("devices") or []
    name = str((devices[0] or {}).get("deviceName", "")) if devices else ""
    return {"mali": "mali" in name.lower(), "int8_dot": True,
            "device": name or "unknown",
            "note": "int8_dot assumed (lavapipe and the H200 have it); mali from the device name"}


def compute(cells: list[CellResult], header: RunHeader | dict | None = None) -> Coverage:
    """Coverage of a run's cells; ``header`` (the run header) names the Vulkan universe."""
    header = RunHeader.coerce(header)
    reached: dict[str, set] = {}
    for c in cells:
        reached.setdefault(Lane.of(c.backend, c.fixes).backend, set()).update(c.reached or [])
    out = Coverage()
    backends = set(reached) | ({"vulkan"} if header.vulkan is not None else set())
    for backend in sorted(backends):
        seen = reached.get(backend, set())
        if backend == "vulkan":
            universe = (header.vulkan or {}).get("conv_shaders") or {}
            names = universe.get("families") or {}
            facts = device_facts(header)
            reach = routing_grid.vulkan([n for v in names.values() for n in v],
                                        mali=facts["mali"], int8_dot=facts["int8_dot"])
            families, other = _by_family(names, seen, reach)
            problem = universe.get("problem", "") if universe else \
                "the run header names no Vulkan shader universe (no plug-in manifest)"
            out.backends[backend] = BackendCoverage(backend, families, other,
                                                    universe.get("source", ""), problem, facts,
                                                    reach.absent)
        elif backend == "xnnpack":
            known: dict[str, list] = {}
            for path in xnnpack_paths.KNOWN:
                known.setdefault(xnnpack_paths.family(path), []).append(path)
            reach = routing_grid.xnnpack()
            families, other = _by_family(known, seen, reach)
            out.backends[backend] = BackendCoverage(
                backend, families, other, "stages/backends/xnnpack_paths.py (schema.fbs node "
                "kinds x datatypes x fused activation)", absent=reach.absent)
        else:
            out.backends[backend] = BackendCoverage(backend, [], sorted(seen), "",
                                                    "no known universe for this backend")
    vk = out.backends.get("vulkan")
    conv_names = set(vk.known) if vk else set()
    for c in cells:
        lane = Lane.of(c.backend, c.fixes)
        if lane.backend != "vulkan" or lane.fixes or not c.reached:
            continue  # the model is of the stock runtime; a runtime fix may route differently
        route = vulkan_routing.predict(c.case, mali=bool(vk and vk.device.get("mali")))
        observed = sorted(n for n in c.reached if n in conv_names or _conv_like(n))
        out.routing.append(RoutingCheck(c.case_id, lane.name,
                                        list(route.dispatched) if route else None, observed,
                                        (route.rule + (f"; {route.refused}" if route.refused
                                                       else "")) if route else ""))
    return out


def _conv_like(name: str) -> bool:
    """A dispatched shader outside the known universe that still looks like a conv's (so a
    universe that misses one shows up as a disagreement, not as silence)."""
    return name.startswith(("conv", "q8ta_conv", "q8ta_im2col"))


def write(out_dir: str | os.PathLike, cells: list[CellResult], header: RunHeader | dict | None = None
          ) -> Coverage:
    cov = compute(cells, header)
    atomic_write(Path(out_dir) / FILE, json.dumps(cov.to_dict(), indent=1) + "\n")
    return cov


def summary_lines(cov: Coverage) -> list[str]:
    """What ``harness run`` prints: reached / known per backend, the routing model's
    agreement, each disagreement."""
    lines = []
    for backend, c in sorted(cov.backends.items()):
        per = ", ".join(f"{f.name} {len(f.reached)}/{len(f.reachable)}/{len(f.known)}"
                        for f in c.families if f.reached)
        why = ", ".join(f"{len(names)} {reason}"
                        for reason, names in c.unreachable_by_reason().items())
        lines.append(f"coverage {backend}: {len(c.reached)}/{len(c.reachable)} reachable "
                     f"({len(c.known)} known) paths reached"
                     + (f" (reached/reachable/known: {per})" if per else "")
                     + (f"; unreachable here: {why}" if why else "")
                     + (f"; {c.problem}" if c.problem else ""))
        if c.unreached_reachable:  # a few by name; all of them in coverage.json and the report
            some = c.unreached_reachable[:3]
            lines.append(f"coverage {backend}: {len(c.unreached_reachable)} reachable, unreached: "
                         f"{', '.join(some)}"
                         + (", ... (all in coverage.json)" if len(c.unreached_reachable) > 3 else ""))
    if cov.routing:
        n = cov.routing_counts()
        lines.append(f"routing model vs dispatched (stock Vulkan, executed): {n['agree']} agree, "
                     f"{n['disagree']} disagree, {n['no_prediction']} not predicted")
        for r in cov.disagreements:
            lines.append(f"routing finding: {r.case_id} ({r.rule}): predicted "
                         f"{', '.join(r.predicted) or '-'}; dispatched "
                         f"{', '.join(r.observed) or 'no conv shader'}")
    return lines
