"""Native runtimes and other machines: ``runtime build|status``, ``bundle``, ``ingest``."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.common import EXIT_OK, Parser, UsageError, print_summary, write_report


def add_parsers(sub) -> None:
    bu = sub.add_parser("bundle", help="a run's cells as a folder that runs on another machine")
    bu.add_argument("run_dir", type=Path)
    bu.add_argument("--lane", default="vulkan", choices=["vulkan"])
    bu.add_argument("--out", type=Path, required=True)
    bu.add_argument("--select", nargs="+", metavar="STATUS", help="only cells with these statuses")
    bu.set_defaults(func=cmd_bundle)

    ing = sub.add_parser("ingest", help="add a bundle's device results to the run as a new lane")
    ing.add_argument("run_dir", type=Path)
    ing.add_argument("results", type=Path)
    ing.add_argument("--device-name", required=True)
    ing.set_defaults(func=cmd_ingest)

    rt = sub.add_parser("runtime", help="build or inspect native runtime plug-ins")
    rts = rt.add_subparsers(dest="action", required=True, parser_class=Parser)
    b = rts.add_parser("build", help="build a runtime plug-in for the installed executorch")
    b.add_argument("name", choices=["vulkan", "runner"],
                   help="vulkan: the plug-in; runner: the native runner (built with it)")
    b.add_argument("--source", metavar="DIR|TARBALL", help="ExecuTorch source (default: "
                   "$CONVCONF_EXECUTORCH_SRC, else a git fetch of the wheel's commit)")
    b.add_argument("--jobs", type=int, help="parallel compile jobs (default: cores)")
    b.add_argument("--cache", dest="cache_dir", help="cache folder (default: $CONVCONF_CACHE)")
    b.add_argument("--patch", dest="patches", action="append", default=[], metavar="NAME",
                   help="apply this source patch (a runtime bug fix, see `runtime patches`) "
                        "before building; repeat for several. A patched plug-in is cached apart "
                        "from the stock one")
    b.set_defaults(func=cmd_runtime_build)
    pa = rts.add_parser("patches", help="the source patches `runtime build --patch` can apply")
    pa.set_defaults(func=cmd_runtime_patches)
    st = rts.add_parser("status", help="installed plug-ins, registered backends, Vulkan device")
    st.add_argument("--cache", dest="cache_dir")
    st.set_defaults(func=cmd_runtime_status)


def cmd_bundle(args) -> int:
    from harness.run.bundle import BundleError, write
    from harness.status import Status

    unknown = [s for s in args.select or [] if s not in {x.value for x in Status}]
    if unknown:
        raise UsageError(f"bundle: unknown status {unknown[0]!r}")
    try:
        info = write(args.run_dir, args.out, args.lane, args.select)
    except BundleError as e:
        raise UsageError(str(e)) from None
    print(f"{args.out}: {info['cells']} cells, {info['bytes'] / 2**20:.1f} MiB; on the device: "
          f"sh {args.out}/run.sh RESULTS, then python -m harness ingest {args.run_dir} RESULTS "
          f"--device-name NAME")
    return EXIT_OK


def cmd_ingest(args) -> int:
    from harness.results import matrix
    from harness.run.ingest import IngestError, ingest

    try:
        rows, device = ingest(args.run_dir, args.results, args.device_name)
    except IngestError as e:
        raise UsageError(str(e)) from None
    print(f"{len(rows)} cells ingested as {rows[0].backend if rows else '?'} on "
          f"{'; '.join(device['described']) or 'an unnamed device'}")
    print_summary(matrix.read(args.run_dir), args.run_dir)
    write_report(args.run_dir)
    return EXIT_OK


def cmd_runtime_build(args) -> int:
    from harness.runtimes import RuntimeBuildError, patching, vulkan

    try:
        patching.resolve(args.patches)  # an unknown name: one line, before any work
    except RuntimeBuildError as e:
        raise UsageError(f"runtime build: {e}") from None
    try:
        m = vulkan.build(args.source, args.jobs, args.cache_dir,
                         log=lambda line: print(f"runtime build: {line}", file=sys.stderr),
                         patches=tuple(args.patches))
    except RuntimeBuildError as e:
        raise UsageError(str(e)) from None
    how = "cache hit" if m.cached else f"built in {m.build_seconds:g} s {m.phase_seconds}"
    if args.name == "runner" and not m.runner:
        raise UsageError(f"no native runner for executorch {m.executorch_version}: "
                         f"{m.extra.get('runner_missing', '?')} (the plug-in was built: {m.library})")
    what = m.runner if args.name == "runner" else m.library
    print(f"{what} ({how}; source {m.source_commit[:12]}, sha256 {m.library_sha256[:16]})")
    if m.patches:
        print(f"source {m.describe_patches()}")
    if m.skew_note:
        print(f"note: {m.skew_note}")
    return EXIT_OK


def cmd_runtime_patches(args) -> int:
    from harness.runtimes import patching

    found = patching.list_patches()
    for p in found:
        variants = f"; variants for {', '.join(p.variants)}" if p.variants else ""
        print(f"{p.name}: {p.summary}")
        print(f"  trees: {', '.join(p.trees) or 'not said'}{variants}")
    if not found:
        print(f"no source patches in {patching.PATCH_DIR}")
    return EXIT_OK


def cmd_runtime_status(args) -> int:
    from harness.runtimes.load import status_lines

    print("\n".join(status_lines(args.cache_dir)))
    return EXIT_OK
