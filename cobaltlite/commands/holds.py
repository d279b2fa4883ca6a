"""What qhold and qrls share (Cobalt's `hold_release_command`, reference §3.4).

Both take job ids, send one request for all of them, and print the queue manager's answer for
each job: successes on stdout, failures on stderr; the exit status is 1 when any job failed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from cobaltlite.commands.common import (
    CommandParser,
    QueueManagerClient,
    Row,
    add_help_option,
    connect_queue_manager,
    parse_jobids,
    report_results,
    run_command,
)

EPILOG = ("Exit status: 0 done for every job, 1 some job was not found, not yours, or not in a "
          "state that allows it, 2 bad command line.")


def build_parser(prog: str, description: str) -> CommandParser:
    parser = CommandParser(prog=prog, usage="%(prog)s [options] <jobid> [<jobid> ...]",
                           description=description, epilog=EPILOG, add_help=False)
    add_help_option(parser)
    parser.add_argument("jobids", nargs="*", metavar="jobid", help="ids of the jobs")
    return parser


def run_per_job(
    prog: str, parser: CommandParser, argv: Sequence[str] | None,
    request: Callable[[QueueManagerClient, list[int], argparse.Namespace], list[Row]],
) -> int:
    """Parse, call `request(qm, jobids, options)`, report each job's answer."""

    def body() -> int:
        args = parser.parse_args(argv)
        jobids = parse_jobids(args.jobids)
        with connect_queue_manager() as qm:
            return report_results(prog, request(qm, jobids, args))

    return run_command(prog, body)
