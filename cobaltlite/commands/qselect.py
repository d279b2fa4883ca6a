"""qselect: list the ids of the unfinished jobs that match every filter given (Cobalt's qselect,
reference §3.4), e.g. to feed qhold or qdel: `qdel $(qselect -q debug -h queued | tail -n +2)`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    QueueManagerAPI,
    Row,
    add_help_option,
    connect_queue_manager,
    parse_time,
    print_error,
    run_command,
)

PROG = "qselect"
FIELDS = ["jobid", "user", "queue", "display_state", "short_state", "nodes", "walltime",
          "project", "mode"]


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, usage="%(prog)s [options]",
        description="List the ids of the unfinished jobs that match every filter given.",
        epilog="Exit status: 0 some job matched, 1 none matched (or a server error), 2 bad "
               "command line.",
        add_help=False)
    add = parser.add_argument
    # -h is the state filter, as in Cobalt: help is --help alone.
    add("-h", "--held", dest="state", metavar="STATE",
        help="state as qstat shows it (queued, user_hold, running, ...) or its one-letter code")
    add("-n", "--nodecount", type=int, metavar="N", help="node count")
    add("-A", "--project", help="project")
    add("-t", "--time", metavar="TIME", help="wall time (M, HH:MM, HH:MM:SS or DD:HH:MM:SS)")
    add("-q", "--queue", help="queue")
    add("--mode", help="mode")
    add("-u", "--user", metavar="USER[:USER]", help="owner")
    add_help_option(parser, short=False)
    add("unexpected", nargs="*", help=argparse.SUPPRESS)
    return parser


def matches(row: Row, args: argparse.Namespace, walltime: int | None) -> bool:
    wanted: list[tuple[Any, Any]] = [
        (args.nodecount, row["nodes"]), (args.project, row["project"]),
        (walltime, row["walltime"]), (args.queue, row["queue"]), (args.mode, row["mode"]),
    ]
    if any(want is not None and want != have for want, have in wanted):
        return False
    if args.state is not None and args.state not in (row["display_state"], row["short_state"]):
        return False
    return args.user is None or row["user"] in args.user.split(":")


def select(qm: QueueManagerAPI, args: argparse.Namespace) -> list[int]:
    walltime = parse_time(args.time) if args.time is not None else None
    return sorted(row["jobid"] for row in qm.jobs(None, FIELDS) if matches(row, args, walltime))


def _main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.unexpected:
        raise CommandError("qselect takes no arguments")
    with connect_queue_manager() as qm:
        jobids = select(qm, args)
    if not jobids:
        print_error(PROG, "Failed to match any jobs")
        return 1
    print("   The following jobs matched your query:")
    for jobid in jobids:
        print(f"      {jobid}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _main(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
