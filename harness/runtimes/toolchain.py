"""Build inputs from Debian: system packages via apt, and a newer glslc plus Vulkan headers from
the next Debian release unpacked into a private prefix (never installed over the system).

Why the newer release: bookworm's shaderc (2023.2) rejects ``GL_EXT_integer_dot_product`` and
``GL_KHR_cooperative_matrix`` used by ExecuTorch's q8 shaders; its Vulkan headers (1.3.239) lack
the cooperative-matrix structs ``vk_api`` uses, and it has no VulkanMemoryAllocator package.
The mirror is the one this machine's own apt sources name; no host is written down here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.runtimes import RuntimeBuildError

# Build tools and the CPU Vulkan device (Mesa lavapipe) + loader + vulkaninfo.
BUILD_PACKAGES = ("cmake", "ninja-build", "g++", "flatbuffers-compiler", "libflatbuffers-dev",
                  "mesa-vulkan-drivers", "libvulkan1", "vulkan-tools")
NEXT_SUITE = "trixie"
NEXT_PACKAGES = ("glslc", "libshaderc1", "libc6", "libstdc++6", "libgcc-s1", "libvulkan-dev",
                 "libvulkan-volk-dev", "libvulkan-memory-allocator-dev")
TOOLCHAIN_VERSION = "1"  # bump when the prefix's layout changes
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def missing_packages(names) -> list[str]:
    missing = []
    for name in names:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True,
                              text=True)
        if "install ok installed" not in done.stdout:
            missing.append(name)
    return missing


def ensure_packages(names, log: Callable[[str], None] = print) -> list[str]:
    """apt-get install what is missing; -> the packages installed now (said through ``log``)."""
    if not shutil.which("dpkg-query"):
        raise RuntimeBuildError("not a Debian system (no dpkg-query): install "
                                + " ".join(names) + " by hand")
    missing = missing_packages(names)
    if not missing:
        return []
    if os.geteuid() != 0:
        raise RuntimeBuildError("missing Debian packages (run as root or install them): "
                                + " ".join(missing))
    log(f"apt-get install {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    wait = "-oDPkg::Lock::Timeout=900"  # another install (a parallel test worker) may hold it
    for cmd in (["apt-get", wait, "update", "-qq"],
                ["apt-get", wait, "install", "-y", "-qq", "--no-install-recommends", *missing]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise RuntimeBuildError(f"apt-get {cmd[2]} failed: {last}")
    return missing


def debian_mirror() -> str:
    """The first non-security Debian archive URI of this machine's apt sources."""
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            texts.append(path.read_text(errors="replace"))
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            m = re.match(r"^URIs:\s*(\S+)", line) or re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", line)
            if m and "security" not in m.group(1):
                return m.group(1)
    raise RuntimeBuildError("no Debian archive URI in this machine's apt sources")


@dataclass(frozen=True)
class Toolchain:
    root: Path  # the private prefix

    @property
    def glslc(self) -> Path:
        return self.root / "glslc"

    @property
    def third_party(self) -> Path:
        return self.root / "third-party"

    def glslc_version(self) -> str:
        done = subprocess.run([str(self.glslc), "--version"], capture_output=True, text=True)
        return " ".join(done.stdout.split("\n")[0:2]).strip()

    def packages(self) -> list[str]:
        listing = self.root / "debs.txt"
        return listing.read_text().split() if listing.exists() else []


def next_release_tools_ready(cache: Path) -> bool:
    """Whether ``ensure_next_release_tools`` would find its tools in place (fetch nothing)."""
    return (Toolchain(cache / "toolchains" / f"{NEXT_SUITE}-v{TOOLCHAIN_VERSION}").root
            / "ready").exists()


def ensure_next_release_tools(cache: Path, log: Callable[[str], None] = print) -> Toolchain:
    """glslc + Vulkan headers/volk/VMA from the next Debian release, under ``cache``."""
    tc = Toolchain(cache / "toolchains" / f"{NEXT_SUITE}-v{TOOLCHAIN_VERSION}")
    if (tc.root / "ready").exists():
        return tc
    log(f"fetching glslc and Vulkan headers from Debian {NEXT_SUITE} into {tc.root}")
    work = tc.root.with_name(tc.root.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    apt = work / "apt"
    for d in ("state/lists/partial", "cache/archives/partial", "etc/parts", "debs"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    (apt / "etc" / "sources.list").write_text(
        f"deb [signed-by={KEYRING}] {debian_mirror()} {NEXT_SUITE} main\n")
    opts = [f"-oDir::State={apt / 'state'}", f"-oDir::Cache={apt / 'cache'}",
            f"-oDir::Etc::SourceList={apt / 'etc' / 'sources.list'}",
            f"-oDir::Etc::SourceParts={apt / 'etc' / 'parts'}", "-oDir::State::status=/var/lib/dpkg/status",
            "-oAPT::Sandbox::User=root"]
    for cmd, cwd in ((["apt-get", *opts, "update", "-qq"], None),
                     (["apt-get", *opts, "download", "-qq", *(f"{p}/{NEXT_SUITE}" for p in NEXT_PACKAGES)],
                      apt / "debs")):
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise RuntimeBuildError(f"apt-get {cmd[len(opts) + 1]} ({NEXT_SUITE}) failed: {last}")
    sysroot = work / "root"
    debs = sorted((apt / "debs").glob("*.deb"))
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(sysroot)], check=True)
    lib = sysroot / "usr" / "lib" / "x86_64-linux-gnu"
    # glslc runs through the newer release's own loader and libc, leaving the system's alone.
    (work / "glslc").write_text(
        "#!/bin/sh\n# glslc from Debian " + NEXT_SUITE + ", run through its own loader and libc.\n"
        f'R="{tc.root / "root"}"\n'
        'exec "$R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path '
        '"$R/usr/lib/x86_64-linux-gnu" "$R/usr/bin/glslc" "$@"\n')
    (work / "glslc").chmod(0o755)
    inc = sysroot / "usr" / "include"
    tp = work / "third-party"
    (tp / "Vulkan-Headers" / "include").mkdir(parents=True)
    (tp / "volk").mkdir()
    (tp / "VulkanMemoryAllocator" / "include").mkdir(parents=True)
    for d in ("vulkan", "vk_video"):
        shutil.copytree(inc / d, tp / "Vulkan-Headers" / "include" / d)
    for f in ("volk.c", "volk.h"):
        shutil.copy2(inc / f, tp / "volk" / f)
    shutil.copy2(inc / "vk_mem_alloc.h", tp / "VulkanMemoryAllocator" / "include")
    if not (lib / "ld-linux-x86-64.so.2").exists():
        raise RuntimeBuildError(f"{NEXT_SUITE} libc6 did not unpack a loader under {lib}")
    (work / "debs.txt").write_text("\n".join(d.name for d in debs) + "\n")
    shutil.rmtree(apt)
    shutil.rmtree(tc.root, ignore_errors=True)
    os.rename(work, tc.root)
    if subprocess.run([str(tc.glslc), "--version"], capture_output=True).returncode:
        raise RuntimeBuildError(f"{tc.glslc} does not run")
    (tc.root / "ready").write_text(tc.glslc_version() + "\n")
    return tc
