"""Backend registry: every module in this package that calls ``register`` adds a delegate lane."""

from __future__ import annotations

from ..registry import Registry
from .base import Backend, QuantUnsupported

_registry = Registry(__name__, __path__, "backend")
register, names, get = _registry.register, _registry.names, _registry.get

__all__ = ["Backend", "QuantUnsupported", "get", "names", "register"]
