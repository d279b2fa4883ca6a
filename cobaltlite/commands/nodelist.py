"""nodelist: the nodes of a flat cluster (Cobalt's cluster_system nodelist).

Columns Host, Queue, State, Job: Host is the node number; Queue the queues that may run there
(nodeadm --queue; a node listing none serves every queue listed nowhere); State `idle`,
`allocated`, `busy`, `cleanup` (a job's phase), `down` (nodeadm --down) or `failed`
(partadm --fail); Job the job holding it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import CommandError, format_table, run_listing
from cobaltlite.commands.places import places_with_queues

PROG = "nodelist"


def main(argv: Sequence[str] | None = None) -> int:
    return run_listing(PROG, "List the nodes of a flat cluster: Host, Queue, State, Job. On a "
                       "Blue Gene/P machine use partlist.", argv,
                       lambda: node_table(places_with_queues()))


def require_nodes(rows: Sequence[dict[str, Any]], instead: str) -> None:
    """CommandError, saying what to use `instead`, when `rows` are blocks (Blue Gene/P)."""
    if any(not str(r["name"]).isdigit() for r in rows):
        raise CommandError(f"this machine has blocks, not nodes: {instead}")


def node_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The nodes in number order; CommandError on a machine of blocks."""
    require_nodes(rows, "partlist lists them")
    rows = sorted(rows, key=lambda r: int(r["name"]))
    return format_table(["Host", "Queue", "State", "Job"],
                        [[r["name"], r["queue"], r["state"],
                          r["jobid"] if r["jobid"] is not None else "-"] for r in rows])


if __name__ == "__main__":
    sys.exit(main())
