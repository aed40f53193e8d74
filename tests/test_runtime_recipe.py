"""The CMake project builds the native runner only where the wheel ships the headers it needs
(executorch 1.4.x ships only the runtime core's): configured for real with cmake, against a wheel
layout with and without them, the runner target exists or the reason is written for the manifest."""

import subprocess

from harness.runtimes import NATIVE
from harness.runtimes.vulkan import RUNNER, _runner_missing

HEADERS = ("executorch/extension/data_loader/file_data_loader.h",
           "executorch/extension/memory_allocator/malloc_memory_allocator.h")


def configure(tmp, build):
    (tmp / "third" / "volk").mkdir(parents=True, exist_ok=True)
    (tmp / "third" / "volk" / "volk.c").touch()  # the plug-in target needs one real source
    done = subprocess.run(
        ["cmake", "-G", "Ninja", "-S", str(NATIVE), "-B", str(build),
         f"-DET_SRC_PARENT={tmp}", f"-DET_WHEEL_DIR={tmp / 'wheel'}",
         f"-DET_RUNTIME_LIB={tmp / 'libexecutorch.so'}", f"-DVK_THIRD_PARTY={tmp / 'third'}",
         "-DGLSLC=glslc", "-DFLATC=flatc", "-DPYTHON_EXECUTABLE=python"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    targets = subprocess.run(["ninja", "-C", str(build), "-t", "targets", "all"],
                             capture_output=True, text=True, check=True).stdout
    return done.stdout, {line.split(":")[0] for line in targets.splitlines()}


def test_runner_only_where_the_wheel_has_its_headers(tmp_path, vulkan_runtime):
    # vulkan_runtime: the real build ran first, so its toolchain (cmake, ninja) is installed
    (tmp_path / "wheel" / "include").mkdir(parents=True)
    said, targets = configure(tmp_path, tmp_path / "old")
    assert RUNNER not in targets and "libexecutorch_backend_vulkan.so" in targets
    assert "convconf_runner not built: the wheel ships no " + HEADERS[0] in said
    assert _runner_missing(tmp_path / "old") == ("the executorch wheel ships no "
                                                 + ", ".join(HEADERS))

    for header in HEADERS:  # a wheel that ships them (1.5.x)
        (tmp_path / "wheel" / "include" / header).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "wheel" / "include" / header).touch()
    said, targets = configure(tmp_path, tmp_path / "old")  # the same tree, reconfigured
    assert RUNNER in targets
    assert not (tmp_path / "old" / "runner-not-built.txt").exists()
    assert _runner_missing(tmp_path / "old") == "the build produced no runner"  # not built yet
