"""nodeadm: administer the nodes of a flat cluster (Cobalt's cluster_system nodeadm).

`--down NODE...` takes nodes out of scheduling (a job running there goes on; no new job is
placed there), `--up NODE...` brings them back, `--queue Q1:Q2 NODE...` sets the queues the
nodes serve (a queue listed on some nodes runs only there; queues listed nowhere run on nodes
listing none; partadm --appq/--rmq also take node numbers), `-l` lists the nodes as nodelist
does. Changes need root or the admin group (checked by the system component)
and survive a restart of the system; a list with an unknown node is refused whole.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    print_lines,
    run_command,
)
from cobaltlite.commands.nodelist import node_table, require_nodes
from cobaltlite.commands.places import administer, places_with_queues, queue_names

PROG = "nodeadm"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, add_help=False,
        usage="nodeadm --down|--up NODE ... | nodeadm --queue Q1:Q2 [-f] NODE ... | nodeadm -l",
        description="Administer the nodes of a flat cluster. Changes need root or the admin "
                    "group and survive a restart of the system component.",
        epilog="A list with an unknown node is refused whole, nothing changed. A queue listed "
               "on some nodes runs its jobs only there. See docs/operator-guide.md, 'Machine "
               "administration'.")
    add_help_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--down", dest="action", action="store_const", const="disable",
                        help="place no new job on the nodes (running jobs go on)")
    action.add_argument("--up", dest="action", action="store_const", const="enable",
                        help="let the scheduler place jobs on the nodes again")
    action.add_argument("--queue", metavar="Q1:Q2",
                        help="the nodes serve exactly these queues")
    action.add_argument("-l", dest="action", action="store_const", const="list",
                        help="list the nodes: Host, Queue, State, Job")
    parser.add_argument("-f", "--force", action="store_true",
                        help="with --queue: even if a queue with waiting jobs is left no node")
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="a node number")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    if args.action == "list":
        if args.nodes:
            raise CommandError("-l takes no node names")
        print_lines(node_table(places_with_queues()))
        return 0
    if not args.nodes:
        raise CommandError("At least one node must be supplied")
    # Said before the change, which on blocks would only name an unknown block.
    require_nodes(places_with_queues(), "partadm administers them (--disable, --enable, --queue)")
    if args.queue is not None:
        return administer("queue", args.nodes, queue_names(args.queue, "--queue"), args.force)
    return administer(args.action, args.nodes, done="down" if args.action == "disable" else "up")


if __name__ == "__main__":
    sys.exit(main())
