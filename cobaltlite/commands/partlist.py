"""partlist: the machine's partitions with their state (Cobalt's partlist, reference §3.5).

As in Cobalt only blocks that are managed, functional and scheduled are listed (partadm -l shows
the others). Columns Name, Queue, State, Backfill as in Cobalt, then Size and the Job holding
the block, and P_f, the failure chance now from the system's failure forecast, when any block
has one. Queue lists the queues that may run there (partadm --queue; a block listing none
serves every queue listed nowhere). Backfill is the drain window of the scheduler's last pass
(`H:MM`, Cobalt's max(0, drain start − now − 90 s)) on the idle blocks sharing node cards with
the block drained for the top job, else `-`. `--agents` lists the compute hosts' node agents
instead (docs/multi-host.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandParser,
    add_help_option,
    connect_system,
    format_table,
    print_lines,
    run_command,
)
from cobaltlite.commands.places import places_with_queues, scheduler_backfill

PROG = "partlist"
BACKFILL_MARGIN = 90.0
"""Cobalt's partlist shows the drain window less 90 s (partlist.py:56-118)."""


def build_parser() -> CommandParser:
    parser = CommandParser(prog=PROG, add_help=False,
                           description="List the machine's schedulable partitions and their "
                           "state: Name, Queue, State, Backfill (the window a backfilled job "
                           "has on a draining block), Size, Job; a P_f column shows the failure "
                           "chance now of blocks the failure forecast gives one.")
    parser.add_argument("--agents", action="store_true",
                        help="list the compute hosts' node agents instead: host, address, node, "
                        "state (up or down) and why an agent is down")
    add_help_option(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    if args.agents:
        with connect_system() as system:
            agents = system.agents()
        if not agents:
            print("no node agents configured: jobs run on the system's own host")
            return 0
        print_lines(format_table(["Host", "Address", "Node", "State", "Reason"],
                                 [[a["host"], a["address"], a["node"] or "-", a["state"],
                                   a["reason"] or "-"] for a in agents]))
        return 0
    rows = [r for r in places_with_queues() if r["managed"] and r["scheduled"]
            and r["functional"]]
    print_lines(partition_table(rows, scheduler_backfill(), time.time()))
    return 0


def partition_table(rows: Sequence[dict[str, Any]], backfill: Mapping[str, float],
                    now: float) -> list[str]:
    """Cobalt's partlist table, largest blocks first; a P_f column when any P_f is non-zero.
    `backfill`: block -> when its drain ends (the scheduler's last pass)."""
    rows = sorted(rows, key=lambda r: (-int(r["size"]), str(r["name"])))
    with_chance = any(r.get("pf") for r in rows)
    header = ["Name", "Queue", "State", "Backfill", "Size", "Job",
              *(["P_f"] if with_chance else [])]
    table = [[r["name"], r["queue"], r["state"], _window(r, backfill, now), r["size"],
              r["jobid"] if r["jobid"] is not None else "-",
              *([f"{r['pf']:.3f}" if r.get("pf") else "-"] if with_chance else [])]
             for r in rows]
    return format_table(header, table)


def _window(row: Mapping[str, Any], backfill: Mapping[str, float], now: float) -> str:
    until = backfill.get(str(row["name"]))
    if until is None or row["state"] != "idle":
        return "-"
    minutes = int(max(0.0, until - now - BACKFILL_MARGIN)) // 60
    return f"{minutes // 60}:{minutes % 60:02d}"


if __name__ == "__main__":
    sys.exit(main())
