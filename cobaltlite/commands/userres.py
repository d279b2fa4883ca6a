"""userres: a reservation's user gives it back (Cobalt's userres, reference §3.4).

A user listed in the reservation (setres -u) ends a non-cyclic reservation, or moves a cyclic
one on to its next period. Unlike Cobalt, whose check was in the client, the queue manager
checks that the caller is listed (or an admin).
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

PROG = "userres"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, usage="%(prog)s NAME",
        description="Release a reservation you are a user of: a one-off one ends now, a "
                    "cyclic one skips to its next period.",
        epilog="Example: userres dedicated\nExit status: 0 done, 1 refused (not a user of it) "
               "or no such reservation, 2 bad command line.",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    add_help_option(parser)
    parser.add_argument("name", metavar="NAME", help="the reservation")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: argparse.Namespace) -> int:
    with connect_queue_manager() as qm:
        print_lines(qm.user_release_reservation(args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
