"""``harness fixes``: every registered fix, its kind (graph/runtime), backends, bug and evidence."""

from __future__ import annotations

from harness.cli.common import EXIT_OK, UsageError


def add_parsers(sub) -> None:
    f = sub.add_parser("fixes", help="list the fixes: name, kind, backends, bug, where verified")
    f.add_argument("names", nargs="*", metavar="NAME", help="only these fixes (default: all)")
    f.set_defaults(func=cmd_fixes)


def cmd_fixes(args) -> int:
    from harness.stages import fixes as fix_registry

    try:
        chosen = [fix_registry.get(n) for n in (args.names or fix_registry.names())]
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    for fix in chosen:
        print(f"{fix.name}  [{fix.kind}]  backends: {','.join(fix.backends)}"
              + (f"  patch: {fix.runtime_patch}" if fix.runtime_patch else ""))
        print(f"  bug:      {fix.bug or '(not stated)'}")
        print(f"  fix:      {fix.summary}")
        print(f"  verified: {fix.verified or '(not verified)'}")
        if fix.unavailable():
            print(f"  here:     unavailable: {fix.unavailable()}")
    return EXIT_OK
