"""cqadm: queue and job administration (Cobalt's cqadm, reference §3.5).

Queue actions take queue names, job actions take job ids; one action per call. Everything but
--getq needs root or the admin group (the queue manager checks, from the kernel's word on who
calls). Queue changes are all or nothing: when one named queue or one setting is refused,
nothing is changed. `--layout FILE` makes FILE the active queue layout (seed 002), the same
change as `partadm --layout FILE` (cobaltlite/commands/layout.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from cobaltlite.choices import BUILTIN_POLICIES
from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    QueueManagerClient,
    add_help_option,
    connect_queue_manager,
    parse_jobids,
    parse_time,
    print_error,
    print_lines,
    report_results,
    run_command,
)
from cobaltlite.commands.qdel import report as report_deletions
from cobaltlite.commands.qstat import QUEUE_COLUMNS, QUEUE_MISSING, render

PROG = "cqadm"

# Cobalt's --getq columns, without AdminEmail and Cron, which cobaltlite's queues do not have.
GETQ_HEADER = ("Queue", "Users", "Groups", "MinTime", "MaxTime", "MaxRunning", "MaxTotalJobs",
               "MaxQueued", "MaxUserNodes", "MaxNodeHours", "TotalNodes", "State", "Policy",
               "Priority")
GETQ_COLUMNS = {**QUEUE_COLUMNS, "queue": QUEUE_COLUMNS["name"]}

QUEUE_STATES = {"startq": "running", "stopq": "stopped", "drainq": "draining", "killq": "dead"}
# Job actions: option dest -> (method, kind) for the hold and release requests.
HOLD_ACTIONS = {
    "hold": ("hold", "admin"),
    "release": ("release", "admin"),
    "user_hold": ("hold", "user"),
    "user_release": ("release", "user"),
    "admin_hold": ("hold", "admin"),
    "admin_release": ("release", "admin"),
}
QUEUE_ACTIONS = ("getq", "addq", "delq", *QUEUE_STATES, "setq", "unsetq", "policy")
JOB_ACTIONS = (*HOLD_ACTIONS, "kill", "queue", "time", "run")


def parse_setq(text: str) -> dict[str, str]:
    """Cobalt's `--setq "maxtime=60 users=alice:bob"` as {key: value}.

    Only the shape is checked here (each token `key=value`, no key twice); the queue manager
    knows the keys and checks the values, naming the bad one.
    """
    settings: dict[str, str] = {}
    tokens = text.split()
    if not tokens:
        raise CommandError("--setq needs \"key=value ...\", e.g. --setq \"maxtime=60 users=alice\"")
    for token in tokens:
        key, equals, value = token.partition("=")
        if not equals or not key or not value:
            raise CommandError(f"--setq: malformed setting '{token}' in \"{text}\": each "
                               "setting is key=value with no spaces around '='")
        if key in settings:
            raise CommandError(f"--setq: '{key}' is given twice in \"{text}\"")
        settings[key] = value
    return settings


def parse_unsetq(text: str) -> list[str]:
    keys = text.split()
    if not keys:
        raise CommandError("--unsetq needs the names of the settings to remove, e.g. "
                           "--unsetq \"maxtime users\"")
    bad = [key for key in keys if "=" in key]
    if bad:
        raise CommandError(f"--unsetq takes names only, not '{bad[0]}' (use --setq to set)")
    return keys


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, usage="%(prog)s [options] [<queue> ... | <jobid> ...]",
        description="Administer queues and jobs.",
        epilog="Exit status: 0 done, 1 refused (not an admin, an unknown queue, job or setting, "
               "a job in the wrong state) or a server error, 2 bad command line.",
        add_help=False)
    add_help_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    add = action.add_argument
    add("--getq", action="store_true", help="list the queues with their restrictions")
    add("--addq", action="store_true",
        help="create the named queues (state running, the configured default policy)")
    add("--delq", action="store_true",
        help="delete the named queues; refused while jobs are in them unless -f")
    add("--startq", action="store_true", help="queues take and run jobs (state running)")
    add("--stopq", action="store_true", help="queues take jobs but run none (state stopped)")
    add("--drainq", action="store_true",
        help="queues run their jobs but take no new ones (state draining)")
    add("--killq", action="store_true", help="queues take and run nothing (state dead)")
    add("--setq", metavar='"K=V K=V"',
        help="set restrictions or properties, e.g. \"maxtime=01:00:00 users=alice:bob "
             "maxrunning=2 priority=5\"")
    add("--unsetq", metavar='"K K"', help="remove restrictions, e.g. \"maxtime users\"")
    add("--policy", metavar="NAME",
        help="rank the named queues' jobs with utility function NAME: a builtin "
             f"({', '.join(BUILTIN_POLICIES)}) or a function of the active utility file")
    add("--hold", action="store_true", help="place an admin hold on jobs (as --admin-hold)")
    add("--release", action="store_true",
        help="release jobs' admin holds (as --admin-release)")
    add("--user-hold", dest="user_hold", action="store_true", help="place a user hold on jobs")
    add("--user-release", dest="user_release", action="store_true",
        help="release jobs' user holds")
    add("--admin-hold", dest="admin_hold", action="store_true",
        help="place an admin hold on jobs")
    add("--admin-release", dest="admin_release", action="store_true",
        help="release jobs' admin holds")
    add("--kill", action="store_true",
        help="delete jobs; with -f remove them at once, without waiting for their runner")
    add("--queue", metavar="QUEUE", help="move jobs to QUEUE")
    add("--time", metavar="TIME", help="set jobs' wall time (M, HH:MM, HH:MM:SS, DD:HH:MM:SS)")
    add("--run", metavar="LOCATION", help="start jobs now on LOCATION (a partition or nodes)")
    add("-j", "--setjobid", type=int, metavar="N", help="the next job gets id N (N > current)")
    add("--layout", metavar="FILE", type=Path,
        help="make FILE the active queue layout, as partadm --layout FILE does (seed 002; "
             "partadm --layout-show, --layout-clear and --dry-run for the rest)")
    parser.add_argument("-f", "--force", action="store_true",
                        help="with --kill or --delq; with --layout, even if a queue with "
                             "waiting jobs is left no node")
    parser.add_argument("targets", nargs="*", metavar="queue_or_jobid",
                        help="queue names for the queue actions, job ids for the job actions")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _chosen(args: argparse.Namespace, names: Sequence[str]) -> str | None:
    return next((name for name in names
                 if getattr(args, name) not in (None, False)), None)


def _run(args: argparse.Namespace) -> int:
    if args.force and not (args.kill or args.delq or args.layout):
        raise CommandError("-f goes with --kill, --delq or --layout only")
    if args.layout is not None:
        if args.targets:
            raise CommandError("--layout takes no queue or job arguments")
        # Imported here: the layout checks pull in the machine models, which would triple the
        # start-up of every other cqadm call (0.07 s to 0.22 s of CPU).
        from cobaltlite.commands.layout import set_layout

        return set_layout(args.layout, args.force)
    if args.setjobid is not None:
        if args.targets:
            raise CommandError("-j takes no queue or job arguments")
        with connect_queue_manager() as qm:
            qm.set_next_jobid(args.setjobid)
        print(f"next job id: {args.setjobid}")
        return 0
    queue_action = _chosen(args, QUEUE_ACTIONS)
    if queue_action is not None:
        return _queue_action(queue_action, args)
    job_action = _chosen(args, JOB_ACTIONS)
    assert job_action is not None  # argparse requires one action
    jobids = parse_jobids(args.targets)
    walltime = parse_time(args.time) if args.time is not None else None
    return _job_action(job_action, args, jobids, walltime)


QueueChange = Callable[[QueueManagerClient, list[str]], None]


def _queue_change(action: str, args: argparse.Namespace) -> QueueChange:
    """The request a queue action sends. Built before connecting, so a malformed --setq or
    --unsetq string is refused before anything reaches the queue manager."""
    if action == "addq":
        return lambda qm, names: qm.add_queues(names)
    if action == "delq":
        return lambda qm, names: qm.delete_queues(names, args.force)
    if action in QUEUE_STATES:
        return lambda qm, names: qm.set_queue_state(names, QUEUE_STATES[action])
    if action == "setq":
        settings = parse_setq(args.setq)
        return lambda qm, names: qm.set_queue(names, settings)
    if action == "unsetq":
        keys = parse_unsetq(args.unsetq)
        return lambda qm, names: qm.unset_queue(names, keys)

    def set_policy(qm: QueueManagerClient, names: list[str]) -> None:
        for queue in names:
            qm.set_queue_policy(queue, args.policy)
            print(f"queue {queue}: policy {args.policy}")

    return set_policy


def _queue_action(action: str, args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.targets))
    if action == "getq":
        with connect_queue_manager() as qm:
            return _getq(qm, names)
    if not names:
        raise CommandError(f"--{action} needs at least one queue name")
    change = _queue_change(action, args)
    with connect_queue_manager() as qm:
        change(qm, names)
        if action in ("addq", "delq"):
            print("Added Queues" if action == "addq" else "Deleted Queues")
            print_lines([f"    {name}" for name in names])
        elif action != "policy":
            # As Cobalt: the changed queues as they are now.
            _getq(qm, names)
    return 0


def _getq(qm: QueueManagerClient, names: Sequence[str]) -> int:
    queues = qm.queues()
    known = {queue["name"] for queue in queues}
    rows = [queue for queue in queues if not names or queue["name"] in names]
    if rows:
        print_lines(render(rows, GETQ_HEADER, GETQ_COLUMNS, time.time(), missing=QUEUE_MISSING))
    missing = [name for name in names if name not in known]
    for name in missing:
        print_error(PROG, f"queue {name} does not exist")
    return 1 if missing else 0


def _job_action(action: str, args: argparse.Namespace, jobids: list[int],
                walltime: int | None) -> int:
    with connect_queue_manager() as qm:
        if action in HOLD_ACTIONS:
            method, kind = HOLD_ACTIONS[action]
            results = qm.hold(jobids, kind) if method == "hold" else qm.release(jobids, kind)
        elif action == "kill":
            return report_deletions(qm.delete(jobids, args.force), PROG)
        elif action == "queue":
            results = qm.move(jobids, args.queue)
        elif action == "time":
            results = qm.alter(jobids, {"walltime": walltime})
        else:
            results = qm.run(jobids, args.run)
    return report_results(PROG, results)


if __name__ == "__main__":
    sys.exit(main())
