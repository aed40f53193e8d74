"""Hypothesis profiles and pytest hooks shared by tests/ and cases/.

HYPOTHESIS_PROFILE=ci (default) keeps the default run well inside CI's budget;
HYPOTHESIS_PROFILE=nightly runs hundreds of examples per property.
"""

import logging
import os
import warnings

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=25, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=400, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

warnings.filterwarnings("ignore")
logging.getLogger().setLevel(logging.WARNING)


def lowering_examples() -> int:
    """Examples for properties that lower real programs (seconds each): a fraction of the profile."""
    return max(3, settings().max_examples // 8)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 5:  # no tests collected: a failure, said out loud
        print("\nconvconf: pytest collected no tests; that is a failure, not a pass")
        session.exitstatus = 1
