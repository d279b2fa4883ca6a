"""qmove: move queued jobs to another queue (Cobalt's qmove, reference §3.4).

The target queue's restrictions are checked for each job as at submission; a dead or draining
queue, or a job that has started, is refused with the reason, and that job stays where it was.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_queue_manager,
    parse_jobids,
    report_results,
    run_command,
)

PROG = "qmove"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, usage="%(prog)s <queue> <jobid> [<jobid> ...]",
        description="Move queued jobs to another queue.",
        epilog="Exit status: 0 every job moved, 1 the queue does not take a job (unknown, dead "
               "or draining queue, a restriction) or a job was not found, not yours or "
               "running, 2 bad command line.",
        add_help=False)
    add_help_option(parser)
    parser.add_argument("arguments", nargs="*", metavar="queue jobid",
                        help="the target queue, then the ids of the jobs to move")
    return parser


def _main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if len(args.arguments) < 2:
        # Cobalt: fewer than two arguments is a usage error with exit status 1.
        sys.stderr.write(parser.format_usage())
        raise CommandError("need a queue and at least one job id")
    queue, *ids = args.arguments
    jobids = parse_jobids(ids)
    with connect_queue_manager() as qm:
        return report_results(PROG, qm.move(jobids, queue))


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _main(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
