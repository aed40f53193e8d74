"""Command line: ``python -m harness COMMAND``; ``--help`` lists every command (``build_parser``
names them from the subparsers, so the list cannot drift from the commands there are).

Bad input (malformed case file, unknown backend/fix, unreadable results) ends in one line on
stderr, ``convconf: error: ...``, exit 2, before anything in the output folder is touched.
"""

from __future__ import annotations

import logging
import sys

from harness.cli import bisect
from harness.cli import cache
from harness.cli import cases
from harness.cli import fidelity
from harness.cli import fixes
from harness.cli import native
from harness.cli import results
from harness.cli import run
from harness.cli import upstream
from harness.chatter import hide_lowering_chatter
from harness.cli.common import EXIT_USAGE, Parser, UsageError


def build_parser() -> Parser:
    p = Parser(prog="harness")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for commands in (run, results, native, cases, fixes, bisect, cache, upstream, fidelity):
        commands.add_parsers(sub)
    p.description = ("Command line: python -m harness COMMAND, where COMMAND is one of: "
                     + ", ".join(sub.choices) + ".")
    return p


def main(argv: list[str] | None = None) -> int:
    hide_lowering_chatter()
    logging.disable(logging.WARNING)
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # as given (run --executorch)
        return args.func(args)
    except UsageError as e:
        print(f"convconf: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("convconf: interrupted; finished cells are in the journal (resume with --resume)",
              file=sys.stderr)
        return 130
