"""Backend registry: every module in this package that calls ``register`` adds a delegate lane."""

from __future__ import annotations

from harness.registry import Registry
from harness.stages.backends.base import Backend, QuantUnsupported

_registry = Registry(__name__, __path__, "backend")
register, names = _registry.register, _registry.names


def get(name: str) -> Backend:
    """The backend of a lane name; ``vulkan@h200`` (a device lane, see ingest.py) is vulkan."""
    return _registry.get(name.split("@", 1)[0])


__all__ = ["Backend", "QuantUnsupported", "get", "names", "register"]
