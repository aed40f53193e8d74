"""A plugin registry: every module of a package that calls ``register`` adds one entry."""

from __future__ import annotations

import importlib
import pkgutil


class Registry:
    def __init__(self, package: str, path, kind: str):
        self._package, self._path, self._kind = package, path, kind
        self._entries: dict = {}

    def register(self, cls):
        self._entries[cls.name] = cls()
        return cls

    def _load_all(self) -> None:
        for info in pkgutil.iter_modules(self._path):
            if info.name != "base":
                importlib.import_module(f"{self._package}.{info.name}")

    def names(self) -> list[str]:
        self._load_all()
        return sorted(self._entries)

    def get(self, name: str):
        self._load_all()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise KeyError(f"unknown {self._kind} {name!r} (known: {known})") from None
