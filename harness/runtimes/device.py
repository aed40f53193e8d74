"""The Vulkan device a run executes on (``vulkaninfo --summary``, from Debian's vulkan-tools).

Results depend on it (lavapipe computes in fp32 on the CPU; a GPU may use fp16 paths), so the
run header and the report name it: device name, type, driver, driver info, API version."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

FIELDS = ("deviceName", "deviceType", "driverName", "driverInfo", "apiVersion", "driverID")


def parse_summary(text: str) -> list[dict]:
    """One dict per physical device in ``vulkaninfo --summary`` output."""
    devices, current = [], None
    for line in text.splitlines():
        if re.match(r"^GPU\d+:", line.strip()):
            current = {}
            devices.append(current)
            continue
        m = re.match(r"^\s*(\w+)\s*=\s*(.*)$", line)
        if current is not None and m and m.group(1) in FIELDS:
            current[m.group(1)] = m.group(2).strip()
    return devices


@functools.lru_cache(maxsize=1)
def vulkan_devices() -> tuple[list[dict], str]:
    """(devices, problem): the devices the Vulkan loader sees, or why none could be listed."""
    tool = shutil.which("vulkaninfo")
    if not tool:
        return [], "vulkaninfo not installed (Debian package vulkan-tools)"
    try:
        done = subprocess.run([tool, "--summary"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return [], "vulkaninfo --summary timed out"
    devices = parse_summary(done.stdout)
    if not devices:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return [], f"no Vulkan device: {last[:200]}"
    return devices, ""


def describe(dev: dict) -> str:
    return (f"{dev.get('deviceName', '?')} ({dev.get('deviceType', '?')}; driver "
            f"{dev.get('driverName', '?')} {dev.get('driverInfo', '')}; Vulkan "
            f"{dev.get('apiVersion', '?')})").replace(" ;", ";")
