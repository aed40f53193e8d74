"""Draw a deterministic list of cases from the strategies (for ``harness run``).

Tests use ``@given`` directly (and so get shrinking and the example database); a run wants a
fixed, reproducible list instead: the same seed and count give the same cases on any machine.

Cases are drawn CHUNK at a time, as one list per Hypothesis example. Example by example,
Hypothesis starts near the simplest input and then mutates earlier examples, so 60 examples in a
row share most of their choices (a whole run without one reflect pad); the cases of one list are
drawn independently. The first list is Hypothesis's simplest example: the simplest conv, once.

A run starts with its strata (strata.STRATA: each padding spelling in 1d and 2d, float and both
int8 schemes, and every known finding family), one case each, drawn by Hypothesis from the same
seed: a random example, not the simplest (that would be twelve 1x1 convs). Then the free draws
above fill the run. With a ``large_rate`` (the nightly profile's LARGE_RATE) the size strata
(strata.SIZE_STRATA: a reduction past 100k terms, a tensor past a texture limit) come after the
strata, and that share of the free draws comes from the size axis (strategies.large_cases).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, strategies as st

from harness.spec import ConvCase
from harness.generation.strata import SIZE_STRATA, STRATA, stratum
from harness.generation.strategies import mixed_cases

PROFILES = {"ci": 17, "nightly": 300}  # default --max-examples per profile
# the share of free draws from the size axis per profile (the ci profile draws none: README
# command 1 stays what it was)
LARGE_RATE = {"ci": 0.0, "nightly": 0.1}
CHUNK = 16  # cases per Hypothesis example (a few hundred choices, far below its buffer limit)


def generate(max_examples: int, seed: int, strategy=None,
             large_rate: float = 0.0) -> list[ConvCase]:
    unique: dict[str, ConvCase] = {}
    if max_examples <= 0:
        return []
    cases = strategy if strategy is not None else mixed_cases(large_rate)

    def collect(chunk: list[ConvCase]) -> None:
        for case in chunk:
            if len(unique) < max_examples:
                unique.setdefault(case.case_id, case)

    if strategy is None:
        for case in stratified(min(max_examples, len(STRATA)), seed):
            unique.setdefault(case.case_id, case)
        if large_rate > 0:
            left = min(max_examples - len(unique), len(SIZE_STRATA))
            for case in stratified(left, seed, SIZE_STRATA, "sizes"):
                unique.setdefault(case.case_id, case)
    # Later examples repeat cases of earlier ones (mutation): rounds of fresh seeds until full.
    for round_ in range(10):
        if len(unique) >= max_examples:
            break
        examples = 2 * ((max_examples - len(unique)) // CHUNK) + 3
        run = settings(max_examples=examples, database=None, phases=[Phase.generate],
                       deadline=None, suppress_health_check=list(HealthCheck))(
            given(st.lists(cases, min_size=CHUNK, max_size=CHUNK))(collect))
        hyp_seed(seed if round_ == 0 else f"{seed}:{round_}")(run)()
    return list(unique.values())


def stratified(n: int, seed: int, rows=STRATA, tag: str = "strata") -> list[ConvCase]:
    """The first ``n`` strata (of ``rows``), one case each, from one Hypothesis example of the
    given seed (its second example: the first is the all-simplest one)."""
    if n <= 0:
        return []
    drawn: list = []
    run = settings(max_examples=2, database=None, phases=[Phase.generate], deadline=None,
                   suppress_health_check=list(HealthCheck))(
        given(st.tuples(*[stratum(s) for s in rows[:n]]))(lambda cases: drawn.append(cases)))
    hyp_seed(f"{seed}:{tag}")(run)()
    return list(drawn[-1])
