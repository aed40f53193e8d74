"""Backend registry: every module in this package that calls ``register`` adds a delegate lane."""

from __future__ import annotations

import importlib
import pkgutil

from .base import Backend, QuantUnsupported

_REGISTRY: dict[str, Backend] = {}


def register(cls: type[Backend]) -> type[Backend]:
    _REGISTRY[cls.name] = cls()
    return cls


def _load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")


def names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> Backend:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


__all__ = ["Backend", "QuantUnsupported", "get", "names", "register"]
