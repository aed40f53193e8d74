"""The run header (a run folder's run.json) as one typed record, with one reader and one writer.

On disk it stays the flat JSON object it always was (tools and older convconf read it as such):
the run's identity and times, the versions under test, the run's configuration (RunConfig's
fields, flat), the runtime and devices it executed on. ``schema_version`` says which layout a
file has; a folder written before versions existed has none and reads as version 1 when its
fields have the types version 1 gives them. A file of a newer version (written by a newer
convconf) is refused in one line rather than half-understood. Keys this version does not name
are kept in ``extra`` and written back as they were.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

SCHEMA_VERSION = 1


class HeaderError(ValueError):
    """One line: why a run.json is not a run header this convconf can read."""


@dataclass
class RunHeader:
    schema_version: int = SCHEMA_VERSION
    run_id: str = ""
    started: str = ""                        # "%Y-%m-%d %H:%M:%S", local time
    argv: list = field(default_factory=list)
    python: str = ""
    versions: dict = field(default_factory=dict)             # versions.stack()
    registered_backends: list = field(default_factory=list)  # the runtime's backends
    # fixes left out of "all"/"each" because this ExecuTorch cannot run them, and why
    fixes_unavailable: dict = field(default_factory=dict)
    # runtimes.load.describe(): the Vulkan plug-in under test, its devices, its patched builds;
    # None when the run had no Vulkan lane
    vulkan: dict | None = None
    cases: int | None = None                 # how many cases the run has
    # the configuration (run/runner.py's RunConfig, flat)
    backends: list = field(default_factory=list)
    fixes: list = field(default_factory=list)
    profile: str | None = None
    max_examples: int | None = None
    seed: int | None = None
    case_files: list = field(default_factory=list)
    timeout: float | None = None
    jobs: int | None = None
    cache_dir: str | None = None
    vulkan_runtime: str | None = None
    shard: str | None = None                 # "K/N", or None for a whole run
    lane_names: list = field(default_factory=list)
    fixes_each: bool = False
    vulkan_patched: dict = field(default_factory=dict)
    # written as the run goes on
    duration_s: float | None = None
    cells: int | None = None
    devices: dict = field(default_factory=dict)  # "vulkan@NAME" -> the device lane (ingest)
    # a merged run: its shards' run ids and, by "K/N", their duration, cells, start
    merged_from: list | None = None
    shards: dict | None = None
    # a run at an ExecuTorch tree (--executorch / --executorch-tree): runtimes/tree.py's EtTree
    # (commit, dirty, label, digests, what each native part rests on); None: the wheel alone
    executorch_tree: dict | None = None
    extra: dict = field(default_factory=dict)    # keys this version does not name, kept

    # --- the one reader -----------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data) -> RunHeader:
        """run.json's object -> RunHeader; HeaderError (one line) when it is not one."""
        if not isinstance(data, dict):
            raise HeaderError("not a run header (a JSON object)")
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise HeaderError(f"schema_version {version!r} is not a number")
        if version > SCHEMA_VERSION:
            raise HeaderError(f"schema_version {version} is newer than this convconf reads "
                              f"({SCHEMA_VERSION}): upgrade convconf to read this run")
        if version < 1:
            raise HeaderError(f"unknown schema_version {version}")
        known, extra = {}, {}
        for key, value in data.items():
            (known if key in _FIELDS and key != "extra" else extra)[key] = value
        for key, value in known.items():
            if not _fits(value, _TYPES[key]):
                raise HeaderError(f"field {key!r} is {type(value).__name__} ({value!r:.60}), "
                                  f"not what schema_version {version} has there")
        known["schema_version"] = SCHEMA_VERSION  # version 1 read as itself
        return cls(**known, extra=extra)

    @classmethod
    def coerce(cls, header) -> RunHeader:
        """A RunHeader, a run.json-like dict (tests, callers with a bare dict), or None (none)."""
        if isinstance(header, cls):
            return header
        return cls.from_dict(header or {})

    # --- the one writer -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The flat JSON object run.json holds (``extra``'s keys back at the top level)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**out, **self.extra}

    def update(self, **values) -> RunHeader:
        """Set fields (a key this version does not name goes to ``extra``); -> self."""
        for key, value in values.items():
            if key in _FIELDS and key != "extra":
                setattr(self, key, value)
            else:
                self.extra[key] = value
        return self

    # --- what readers ask ---------------------------------------------------------------------
    @property
    def executorch(self) -> str:
        """The executorch release under test ('?' when the header does not say)."""
        return self.versions.get("executorch", "?")

    @property
    def executorch_label(self) -> str:
        """'executorch 1.5.1', or at a tree 'executorch cff6f4dd32e6 (dirty) over 1.5.1'."""
        if self.executorch_tree:
            return (f"executorch {self.executorch_tree.get('label', '?')} over "
                    f"{self.executorch}")
        return f"executorch {self.executorch}"

    @property
    def identity(self) -> str:
        """The run's identity. A folder written before ids existed is known by its start time
        and argv (the same in every copy of it)."""
        return self.run_id or f"legacy-{self.started}-{self.argv}"


_FIELDS = {f.name for f in dataclasses.fields(RunHeader)}
_TYPES = typing.get_type_hints(RunHeader)


def _fits(value, hint) -> bool:
    """Is ``value`` (parsed JSON) of the annotated type (int for float too; None where allowed)."""
    args = typing.get_args(hint)
    options = args if args else (hint,)
    for option in options:
        if option is type(None):
            if value is None:
                return True
        elif option is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif option is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return True
        elif isinstance(value, typing.get_origin(option) or option):
            return True
    return False
