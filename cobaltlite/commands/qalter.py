"""qalter: change queued jobs (Cobalt's qalter, reference §3.4).

The changes are sent as one request; the queue manager applies them to each job all or nothing,
re-checks the queue's restrictions, refuses jobs that have started, and answers per job with
Cobalt's "<field> changed from X to Y" lines or the reason it refused.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_queue_manager,
    parse_jobids,
    parse_time,
    report_results,
    run_command,
)
from cobaltlite.commands.qsub import (
    VALID_MODES,
    parse_attrs,
    parse_dependencies,
    parse_geometry,
    parse_user_list,
)

PROG = "qalter"
TIME_OPTIONS = ("-t", "--time")

EPILOG = """\
time: [+|-]TIME where TIME is M, HH:MM, HH:MM:SS or DD:HH:MM:SS; +TIME adds to the job's
wall time, -TIME takes it off (-t -10 or --time=-00:10:00), TIME alone replaces it.

Exit status: 0 every job changed, 1 some job was not found, not yours, running, or the change
broke a queue restriction (that job is left as it was), 2 bad command line."""


def parse_walltime_change(text: str) -> tuple[str, int]:
    """qalter -t: ("walltime_delta", ±seconds) for `+T`/`-T`, ("walltime", seconds) for `T`."""
    sign = text[:1]
    if sign in ("+", "-"):
        seconds = parse_time(text[1:])
        return "walltime_delta", -seconds if sign == "-" else seconds
    return "walltime", parse_time(text)


def join_negative_times(argv: Sequence[str]) -> list[str]:
    """`-t -10` as `-t-10`: argparse would read `-10:00` as an unknown option, not a value."""
    joined: list[str] = []
    arguments = iter(argv)
    for arg in arguments:
        if arg in TIME_OPTIONS:
            value = next(arguments, None)
            if value is not None and value.startswith("-"):
                joined.append(f"{arg}={value}" if arg.startswith("--") else f"{arg}{value}")
                continue
            joined.append(arg)
            if value is not None:
                joined.append(value)
        else:
            joined.append(arg)
    return joined


def build_parser() -> CommandParser:
    parser = CommandParser(prog=PROG, usage="%(prog)s [options] <jobid> [<jobid> ...]",
                           description="Change queued jobs.", epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    add = parser.add_argument
    add("-t", "--time", metavar="[+|-]TIME", help="new wall time, or +/- a change to it")
    add("-n", "--nodecount", type=int, metavar="N", help="new node count")
    add("--proccount", type=int, metavar="N", help="new process count")
    add("-A", "--project", help="new project")
    add("--mode", help=f"new mode, one of {', '.join(VALID_MODES)}")
    add("-M", "--notify", metavar="EMAIL", help="new e-mail address for notices")
    add("-o", "--output", metavar="FILE", help="new file for the job's stdout")
    add("-e", "--error", metavar="FILE", help="new file for the job's stderr")
    add("--run_users", "--user_list", dest="user_list", metavar="USER[:USER]",
        help="new list of users who may control the job (you stay on it)")
    add("--dependencies", metavar="ID[:ID]|none",
        help="new dependencies; 'none' removes them all")
    add("--attrs", action="append", default=[], metavar="K=V[:FLAG]",
        help="attributes to set (merged into the job's)")
    add("--geometry", metavar="AxBxCxD[xE]", help="new geometry, e.g. 4x4x4x2")
    add("--defer", action="store_true", help="drop the jobs' scores to 0 (let others go first)")
    add_help_option(parser)
    add("jobids", nargs="*", metavar="jobid", help="ids of the jobs to change")
    return parser


def build_changes(args: argparse.Namespace, cwd: str) -> dict[str, Any]:
    """The `alter` request's changes, checked as far as the client can check them."""
    changes: dict[str, Any] = {}
    if args.time is not None:
        key, seconds = parse_walltime_change(args.time)
        changes[key] = seconds
    for option, key in (("nodecount", "nodes"), ("proccount", "procs")):
        value = getattr(args, option)
        if value is not None:
            if value <= 0:
                raise CommandError(f"{option} is {value} which is <= zero")
            changes[key] = value
    if args.mode is not None:
        if args.mode not in VALID_MODES:
            raise CommandError(f"Specified mode '{args.mode}' not valid, valid modes are: "
                               f"{', '.join(VALID_MODES)}")
        changes["mode"] = args.mode
    for option in ("project", "notify"):
        value = getattr(args, option)
        if value is not None:
            changes[option] = value
    if args.geometry is not None:
        changes["geometry"] = parse_geometry(args.geometry)
    for option, key in (("output", "outputpath"), ("error", "errorpath")):
        value = getattr(args, option)
        if value is not None:
            path = os.path.abspath(os.path.join(cwd, value))
            if not os.path.isdir(os.path.dirname(path)):
                raise CommandError(f"directory {os.path.dirname(path)} does not exist")
            changes[key] = path
    if args.user_list is not None:
        changes["user_list"] = parse_user_list(args.user_list)
    if args.dependencies is not None:
        changes["dependencies"] = ([] if args.dependencies.lower() == "none"
                                   else parse_dependencies(args.dependencies))
    if args.attrs:
        changes["attrs"] = parse_attrs(args.attrs)
    if args.defer:
        changes["defer"] = True
    if not changes:
        raise CommandError("no change given (see qalter --help)")
    return changes


def _main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(join_negative_times(argv))
    changes = build_changes(args, os.getcwd())
    jobids = parse_jobids(args.jobids)
    with connect_queue_manager() as qm:
        return report_results(PROG, qm.alter(jobids, changes))


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _main(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
