"""qdel: delete jobs (Cobalt's qdel, reference §3.3).

Queued jobs are removed at once; running ones are signalled (SIGTERM, then SIGKILL after the
grace period) and listed as deleted too. Unlike Cobalt, which was silent about ids it could not
delete (§10 item 10), every such id gets a line on stderr and the exit status is 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cobaltlite.commands.common import (
    CommandParser,
    Row,
    add_help_option,
    connect_queue_manager,
    format_table,
    parse_jobids,
    print_error,
    print_lines,
    run_command,
)

PROG = "qdel"
DELETED = frozenset({"deleted", "killing"})
# The job is already on its way out (killing or exiting): what the user asked for is happening.
ALREADY_ENDING = "ending"


def report(results: Sequence[Row], prog: str = PROG) -> int:
    """Print the deleted jobs as Cobalt did and a line on stderr for every other id (cqadm
    --kill reports the same way, under its own name)."""
    deleted = [r for r in results if r["result"] in DELETED]
    if deleted:
        print("      Deleted Jobs")
        print_lines(format_table(("JobID", "User"),
                                 [(str(r["jobid"]), r.get("user", "-")) for r in deleted]))
    failed = False
    for result in results:
        if result["result"] in DELETED:
            continue
        print_error(prog, result.get("message") or f"job {result['jobid']}: {result['result']}")
        failed = failed or result["result"] != ALREADY_ENDING
    return 1 if failed else 0


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG,
        usage="%(prog)s <jobid> [<jobid> ...]",
        description="Delete jobs: queued jobs are removed, running jobs are killed (SIGTERM, "
                    "then SIGKILL after the grace period). You may delete your own jobs and "
                    "jobs whose user list (qsub --run_users) names you.",
        epilog="Exit status: 0 every job deleted (or already ending), 1 some id was not found, "
               "not yours or not an integer, 2 bad command line.",
        add_help=False,
    )
    add_help_option(parser)
    parser.add_argument("jobids", nargs="*", metavar="jobid", help="ids of the jobs to delete")
    return parser


def _main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    jobids = parse_jobids(args.jobids)
    with connect_queue_manager() as qm:
        return report(qm.delete(jobids))


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _main(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
