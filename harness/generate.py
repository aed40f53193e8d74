"""Draw a deterministic list of cases from the strategies (for ``harness run``).

Tests use ``@given`` directly (and so get shrinking and the example database); a run wants a
fixed, reproducible list instead: the same seed and count give the same cases on any machine.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from .spec import ConvCase
from .strategies import mixed_cases

PROFILES = {"ci": 12, "nightly": 300}  # default --max-examples per profile


def generate(max_examples: int, seed: int, strategy=None) -> list[ConvCase]:
    drawn: list[ConvCase] = []
    if max_examples <= 0:
        return drawn

    @hyp_seed(seed)
    @settings(max_examples=max_examples, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy if strategy is not None else mixed_cases())
    def collect(case: ConvCase) -> None:
        drawn.append(case)

    collect()
    unique: dict[str, ConvCase] = {}
    for case in drawn:
        unique.setdefault(case.case_id, case)
    return list(unique.values())
