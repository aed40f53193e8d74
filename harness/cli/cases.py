"""``harness cases from-model``: the convolutions a real model runs, as a case file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.cli.common import EXIT_OK, Parser, UsageError


def add_parsers(sub) -> None:
    c = sub.add_parser("cases", help="make case files")
    cs = c.add_subparsers(dest="action", required=True, parser_class=Parser)
    fm = cs.add_parser("from-model", help="every conv one forward of a model runs, de-duplicated, "
                       "as a case file for run --cases")
    fm.add_argument("factory", metavar="MODULE:FACTORY",
                    help="a callable that returns the model (an nn.Module), e.g. "
                    "cases.models.zoo:siglip_so400m_patch14_224")
    given = fm.add_mutually_exclusive_group()
    given.add_argument("--input-shape", metavar="N,C,...",
                       help="a random input of this shape (default: the factory's input_shape)")
    given.add_argument("--input-factory", metavar="MODULE:FN",
                       help="a callable returning the forward's input: a tensor, a tuple of "
                       "positional arguments or a dict of keyword arguments")
    fm.add_argument("--max-spatial", type=int, metavar="N",
                    help="shrink each case's spatial input sizes to at most N (kernel, stride, "
                    "dilation, padding and groups kept; noted in the entry's source)")
    fm.add_argument("--no-context", action="store_true",
                    help="the lone convs: no prologue/epilogue read from the exported graph")
    fm.add_argument("--out", type=Path, required=True, metavar="FILE.json")
    fm.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    fm.set_defaults(func=cmd_from_model)


def cmd_from_model(args) -> int:
    from harness.generation.from_model import FromModelError, from_model, parse_shape
    from harness.runfolder import atomic_write

    if args.out.exists() and not args.overwrite:
        raise UsageError(f"{args.out} already exists; use --overwrite to replace it")
    try:
        shape = parse_shape(args.input_shape) if args.input_shape else None
        entries, result = from_model(args.factory, shape, args.input_factory, args.max_spatial,
                                     context=not args.no_context)
    except FromModelError as e:
        raise UsageError(f"cases from-model: {e}") from None
    for why in result.skipped:  # a conv this ConvCase cannot spell yet; the others still count
        print(f"convconf: skipped {why}", file=sys.stderr)
    if result.no_context:  # the convs are written, each alone
        print(f"convconf: no context recorded: {result.no_context}", file=sys.stderr)
    if result.unmatched:
        print(f"convconf: no context for {len(result.unmatched)} conv call(s) the exported graph "
              f"has no node for (recorded alone): {', '.join(result.unmatched[:3])}",
              file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, json.dumps(entries, indent=1) + "\n")
    in_context = sum(1 for e in result.entries if e.case.has_context)
    print(f"{args.out}: {len(entries)} distinct conv case(s) from {result.calls} conv call(s)"
          + (f", {len(result.skipped)} skipped" if result.skipped else "")
          + f"; {in_context} with a prologue or epilogue")
    return EXIT_OK
