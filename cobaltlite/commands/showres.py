"""showres: list the reservations (Cobalt's showres, reference §3.4); anyone may.

Columns as Cobalt's showres.py:81-90: Reservation, Queue, User, Start, Duration, Passthrough,
Partitions, Remaining, T-Minus; `-l` adds End Time and Cycle Time, `-x` adds Project, ResID and
CycleID. Times are local, as Cobalt printed them; Remaining and T-Minus are HH:MM ("-" when not
applicable).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandParser,
    add_help_option,
    connect_queue_manager,
    format_table,
    print_lines,
    run_command,
)
from cobaltlite.reservations.model import queue_name

PROG = "showres"
TIME_FORMAT = "%a %b %d %H:%M:%S %Y"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, usage="%(prog)s [-l] [-x]",
        description="List the reservations: where, when, for whom.",
        epilog="Example: showres -l\nExit status: 0, 1 when the queue manager cannot be "
               "reached, 2 bad command line.",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    add_help_option(parser)
    parser.add_argument("-l", dest="long", action="store_true",
                        help="also the end time and cycle time")
    parser.add_argument("-x", dest="extra", action="store_true",
                        help="also the project, res_id and cycle_id")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _hhmm(seconds: float) -> str:
    minutes = int(seconds) // 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def table(rows: Sequence[dict[str, Any]], now: float, long: bool = False,
          extra: bool = False) -> list[str]:
    header = ["Reservation", "Queue", "User", "Start", "Duration"]
    if long:
        header += ["End Time", "Cycle Time"]
    header += ["Passthrough", "Partitions", "Remaining", "T-Minus"]
    if extra:
        header += ["Project", "ResID", "CycleID"]
    lines = []
    for res in rows:
        start, duration = res["start"], res["duration"]
        cells = [res["name"], queue_name(res["name"], res["queue"]),
                 "*" if res["users"] is None else ":".join(res["users"]),
                 time.strftime(TIME_FORMAT, time.localtime(start)), _hhmm(duration)]
        if long:
            cells += [time.strftime(TIME_FORMAT, time.localtime(start + duration)),
                      _hhmm(res["cycle"]) if res["cycle"] else "-"]
        cells += ["Blocked" if res["block_passthrough"] else "Allowed",
                  ":".join(res["places"]),
                  _hhmm(start + duration - now) if start <= now else "-",
                  _hhmm(start - now) if start > now else "-"]
        if extra:
            cells += [res["project"] or "-", res["res_id"], res["cycle_id"] or "-"]
        lines.append(cells)
    return format_table(header, lines)


def _run(args: argparse.Namespace) -> int:
    with connect_queue_manager() as qm:
        rows = qm.reservations()
    if rows:
        print_lines(table(rows, time.time(), args.long, args.extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
