"""showstart: when one job is expected to start and end (Moab's showstart, for Cobalt users).

The estimate is the one `qstat -f` shows as Est_Start_Time: after each scheduling pass the queue
manager replays the queue forward with the real scheduler, the running jobs ending at their
requested wall times and no new jobs arriving (queue_manager/estimates.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_queue_manager,
    parse_jobids,
    run_command,
)
from cobaltlite.timefmt import format_hms

PROG = "showstart"
FIELDS = ["jobid", "nodes", "walltime", "state", "display_state", "starttime", "est_start"]
TIME_FORMAT = "%a %b %d %H:%M:%S %Y"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, add_help=False, usage="%(prog)s [-h] JOBID",
        description="Print when a queued job is expected to start and end: the scheduler's "
                    "replay of the current queue forward, with every job running for its "
                    "requested wall time and no new submissions (the Est_Start_Time of "
                    "qstat -f).",
        epilog="Exit status: 0 an estimate or a start time printed; 1 no such job, a JOBID "
               "that is not an integer, or no estimate for it (held, in a stopped queue, "
               "finished, never starting, or not yet estimated); 2 bad command line (no JOBID, "
               "an unknown option).")
    add_help_option(parser)
    parser.add_argument("jobid", help="the job's id")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    jobid = parse_jobids([args.jobid], "Jobid")[0]
    with connect_queue_manager() as qm:
        rows = qm.jobs([jobid], FIELDS)
    if not rows:
        raise CommandError(f"job {jobid} not found")
    sys.stdout.write("".join(f"{line}\n" for line in describe(rows[0], time.time())))
    return 0


def describe(job: dict[str, Any], now: float) -> list[str]:
    """showstart's lines for one job row; CommandError when there is no estimate to show."""
    jobid, walltime = job["jobid"], float(job["walltime"])
    lines = [f"job {jobid} requires {job['nodes']} nodes for {format_hms(walltime)}"]
    if job["starttime"] is not None:
        start = float(job["starttime"])
        end = start + walltime
        lines.append(f"Started {format_hms(max(0.0, now - start))} ago on {_when(start)}")
        if job["state"] != "done":
            lines.append(f"Expected end in {format_hms(max(0.0, end - now))} on {_when(end)}")
        return lines
    if job["est_start"] is None:
        raise CommandError(f"job {jobid} has no start estimate (it is {job['display_state']}: "
                           "held jobs, jobs of stopped queues, finished jobs and jobs that never "
                           "start, such as a reservation's job longer than what is left of the "
                           "reservation (showres), have none; a new job gets one after the next "
                           "scheduling pass)")
    start = max(float(job["est_start"]), now)
    lines.append(f"Estimated start in {format_hms(start - now)} on {_when(start)}")
    lines.append(f"Estimated end in {format_hms(start + walltime - now)} on "
                 f"{_when(start + walltime)}")
    return lines


def _when(t: float) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(t))


if __name__ == "__main__":
    sys.exit(main())
