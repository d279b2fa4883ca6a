"""partlist: the machine's partitions with their state (Cobalt's partlist, reference §3.5).

Columns Name, Queue, State, Backfill as in Cobalt, plus P_f, the failure chance now from the
system's failure forecast, when any block has one. Every block serves every queue in
cobaltlite, so Queue lists them all. Backfill windows are not pushed back to the system
here, so Backfill is always `-`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_queue_manager,
    connect_system,
    format_table,
    print_lines,
    run_command,
)

PROG = "partlist"


def build_parser() -> CommandParser:
    parser = CommandParser(prog=PROG, add_help=False,
                           description="List the machine's partitions and their state; "
                           "a P_f column shows the failure chance now of blocks the failure "
                           "forecast gives one.")
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
    with connect_system() as system:
        rows = system.partitions()
    try:
        with connect_queue_manager() as qm:
            queues = ":".join(q["name"] for q in qm.queues())
    except CommandError:  # the queue manager is down: the partitions are still worth seeing
        queues = "?"
    print_lines(partition_table(rows, queues))
    return 0


def partition_table(rows: Sequence[dict[str, Any]], queues: str) -> list[str]:
    """Cobalt's partlist table, largest blocks first; a P_f column when any P_f is non-zero."""
    rows = sorted(rows, key=lambda r: (-int(r["size"]), str(r["name"])))
    with_chance = any(r.get("pf") for r in rows)
    header = ["Name", "Queue", "State", "Backfill", *(["P_f"] if with_chance else [])]
    table = [[r["name"], queues, r["state"], "-",
              *([f"{r['pf']:.3f}" if r.get("pf") else "-"] if with_chance else [])]
             for r in rows]
    return format_table(header, table)


if __name__ == "__main__":
    sys.exit(main())
