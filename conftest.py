"""Hypothesis profiles and pytest hooks shared by tests/ and cases/.

HYPOTHESIS_PROFILE=ci (default) keeps the default run well inside CI's budget;
HYPOTHESIS_PROFILE=nightly runs hundreds of examples per property.
"""

import logging
import os
import shutil
from harness.chatter import hide_lowering_chatter

import pytest

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=25, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=400, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

hide_lowering_chatter()  # the stack under test's chatter; a warning of ours still shows
logging.getLogger().setLevel(logging.WARNING)


def lowering_examples() -> int:
    """Examples for properties that lower real programs (seconds each): a fraction of the profile."""
    return max(3, settings().max_examples // 8)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 5:  # no tests collected: a failure, said out loud
        print("\nconvconf: pytest collected no tests; that is a failure, not a pass")
        session.exitstatus = 1


@pytest.fixture(scope="session")
def vulkan_runtime():
    """The Vulkan runtime plug-in, built for the installed wheel (or taken from the cache: one
    xdist worker builds, the others wait on its lock) and loaded into this process. In CI a
    failure to build fails the tests that need it; elsewhere they skip, saying why."""
    from harness.runtimes import RuntimeBuildError, load, vulkan

    try:
        manifest = vulkan.build(log=lambda line: print(f"vulkan runtime: {line}"))
    except RuntimeBuildError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the Vulkan runtime must build in CI: {e}")
        pytest.skip(f"no Vulkan runtime: {e}")
    assert load.load(manifest.library), "the plug-in loaded but VulkanBackend is not registered"
    return manifest


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium for the report's browser test, installed through apt when missing."""
    from harness.runtimes import RuntimeBuildError, toolchain

    if not shutil.which("chromium"):
        try:
            toolchain.ensure_packages(["chromium"])
        except RuntimeBuildError as e:
            pytest.fail(f"the browser test needs Debian's chromium: {e}")
    return shutil.which("chromium")
