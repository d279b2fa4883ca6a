"""releaseres: remove reservations (Cobalt's releaseres, reference §3.5; admins only).

Their queues (R.<name>) are set dead, as Cobalt did: queued jobs stay, and run nowhere until
moved (qmove) or deleted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cobaltlite.commands.common import (
    CommandParser,
    add_help_option,
    connect_queue_manager,
    print_lines,
    run_command,
)

PROG = "releaseres"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, usage="%(prog)s NAME [NAME ...]",
        description="Remove the named reservations; their R.NAME queues are set dead.",
        epilog="Example: releaseres maint\nExit status: 0 released, 1 refused (not an admin) "
               "or no reservation matched, 2 bad command line.",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    add_help_option(parser)
    parser.add_argument("names", nargs="+", metavar="NAME", help="reservation names")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: argparse.Namespace) -> int:
    with connect_queue_manager() as qm:
        print_lines(qm.release_reservations(list(dict.fromkeys(args.names))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
