"""`cqadm`: queue administration. This release: list queues, and choose a queue's policy."""

from __future__ import annotations

import sys
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

PROG = "cqadm"


def build_parser() -> CommandParser:
    parser = CommandParser(prog=PROG, description="Administer cobaltlite queues.", add_help=False)
    add_help_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--getq", action="store_true",
                        help="list the queues with their state, policy and priority")
    action.add_argument("--policy", metavar="NAME",
                        help="rank the named queues' jobs with utility function NAME (a builtin "
                        "or a function of the active utility file; admin)")
    parser.add_argument("queues", nargs="*", metavar="QUEUE")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    with connect_queue_manager() as qm:
        if args.getq:
            queues = qm.queues()
            rows = [[q["name"], q["state"], q["policy"], str(q["priority"])]
                    for q in queues if not args.queues or q["name"] in args.queues]
            known = {q["name"] for q in queues}
            missing = [name for name in args.queues if name not in known]
            if rows:
                print_lines(format_table(["Queue", "State", "Policy", "Priority"], rows))
            for name in missing:
                print(f"{PROG}: queue {name} does not exist", file=sys.stderr)
            return 1 if missing else 0
        if not args.queues:
            print(f"{PROG}: --policy needs at least one QUEUE", file=sys.stderr)
            return 2
        for queue in args.queues:
            qm.set_queue_policy(queue, args.policy)
            print(f"queue {queue}: policy {args.policy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
