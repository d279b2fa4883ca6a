"""schedctl: control the scheduler and its utility functions.

--start/--stop pause and resume scheduling; --reread-policy checks and activates the utility
file; --check validates a file without activating it; --try replays a job log with a candidate
function and with the current policy and prints both side by side; --score and --inherit set
jobs' scores and the fraction of their score a dependent job inherits; --set/--unset pin and
release a tunable (BF, W) and --tuning runs a new tuning scheme (seed 000). Starting, stopping,
rereading, --score, --inherit, --set, --unset and --tuning need root or the admin group;
--status, --check and --try are open to everyone (--check and --try run in this process, so no
untested code ever runs in a daemon).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import Pyro5.errors

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_queue_manager,
    connect_system,
    read_input,
    report_results,
    run_command,
)
from cobaltlite.config import load_config
from cobaltlite.errors import CobaltliteError
from cobaltlite.policy.loader import SampleJob, compile_file, load_and_validate
from cobaltlite.policy.utility import PassInputs, PolicyError, UtilityFunction, builtin_policy
from cobaltlite.rpc.client import connect

PROG = "schedctl"


def build_parser() -> CommandParser:
    parser = CommandParser(prog=PROG, description=__doc__.splitlines()[0], add_help=False)
    add_help_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--start", action="store_true", help="resume scheduling passes (admin)")
    action.add_argument("--stop", action="store_true",
                        help="stop starting jobs; running jobs go on, queued jobs wait (admin)")
    action.add_argument("--status", action="store_true",
                        help="scheduling on or off, the active utility file, and any function "
                        "that failed since the last reload")
    action.add_argument("--set", dest="set_tunable", metavar="NAME=VALUE",
                        help="pin a tunable of the scheduler, e.g. w=3: tuning rules no longer "
                        "move it until --unset (admin)")
    action.add_argument("--unset", dest="unset_tunable", metavar="NAME",
                        help="release a pinned tunable: its tuning rule sets it again (admin)")
    action.add_argument("--tuning", metavar="FILE", type=Path,
                        help="run the tuning scheme in FILE (YAML, as the tuning: section of "
                        "cobaltlite.yaml) from the next check on; a scheme that fails a check "
                        "is refused and the previous one stays active (admin; lasts until the "
                        "scheduler restarts)")
    action.add_argument("--reread-policy", action="store_true",
                        help="check the configured utility file and activate it if it passes; "
                        "the previous functions stay active otherwise (admin)")
    action.add_argument("--check", metavar="FILE", type=Path,
                        help="run every check of a reload on FILE (ownership and mode, "
                        "compilation, every function on the current queued jobs within the "
                        "time budget) without activating anything")
    action.add_argument("--try", dest="try_file", metavar="FILE", type=Path,
                        help="replay a job log with a function from FILE and with the current "
                        "policy, and print their metrics side by side (needs --policy, --against)")
    action.add_argument("--score", metavar="[+|-]N",
                        help="set the jobs' scores to N, or raise (+N) or lower (-N) them (admin)")
    action.add_argument("--inherit", metavar="F", type=float,
                        help="the jobs pass F times their score to jobs that depend on them "
                        "when they end (0 <= F <= 1; admin)")
    parser.add_argument("jobids", nargs="*", metavar="jobid", help="with --score or --inherit")
    parser.add_argument("--policy", metavar="NAME", help="with --try: the function in FILE")
    parser.add_argument("--against", metavar="LOG", type=Path,
                        help="with --try: the job log to replay (the production accounting log "
                        "or any trace qsim reads)")
    parser.add_argument("--queue", default="default",
                        help="with --try: compare with this queue's current policy "
                        "(default: default)")
    parser.add_argument("--current", metavar="NAME",
                        help="with --try: compare with this policy instead of asking the queue "
                        "manager")
    parser.add_argument("--machine", metavar="SPEC",
                        help="with --try: the machine to replay on (default: the instance's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    if args.score is not None or args.inherit is not None:
        return _job_scores(args)
    if args.jobids:
        raise CommandError("No arguments needed")
    if args.try_file is not None:
        return _try(args)
    if args.check is not None:
        return _check(args.check)
    if args.reread_policy:
        with connect_queue_manager() as qm:
            outcome = qm.reread_policy()
        print(f"activated {outcome['file']} (sha256 {outcome['sha256'][:12]}): "
              f"{', '.join(outcome['functions'])}")
        return 0
    return _scheduler(args)


def parse_score(text: str) -> str:
    """--score's `N`, `+N` or `-N` (N a number), passed on as written: the sign says absolute
    or relative, which the queue manager applies."""
    try:
        value = float(text)
    except ValueError:
        raise CommandError(f"--score must be a number, optionally signed: {text}") from None
    if not math.isfinite(value):
        raise CommandError(f"--score must be a finite number: {text}")
    return text


def _job_scores(args: Any) -> int:
    if not args.jobids:
        raise CommandError("At least one jobid must be supplied")
    jobids = [_jobid(text) for text in args.jobids]
    score = parse_score(args.score) if args.score is not None else None
    if score is None and not 0.0 <= args.inherit <= 1.0:
        raise CommandError(f"--inherit must be between 0 and 1: {args.inherit:g}")
    with connect_queue_manager() as qm:
        if score is not None:
            results = qm.adjust_scores(jobids, score)
        else:
            results = qm.set_dep_frac(jobids, args.inherit)
    return report_results(PROG, results)


def _jobid(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"jobid must be an integer, found '{text}'") from None


def _scheduler(args: Any) -> int:
    try:
        config = load_config()
    except CobaltliteError as exc:
        raise CommandError(str(exc)) from None
    scheduler = connect(f"PYRO:scheduler-control@./u:{config.admin_socket}")
    try:
        if args.start:
            scheduler.start()
            print("Job Scheduling: ENABLED")
        elif args.stop:
            scheduler.stop()
            print("Job Scheduling: DISABLED")
        elif args.set_tunable is not None:
            name, value = _tunable_setting(args.set_tunable)
            _print_tuning(scheduler.set_tunable(name, value))
        elif args.unset_tunable is not None:
            _print_tuning(scheduler.unset_tunable(args.unset_tunable))
        elif args.tuning is not None:
            _print_tuning(scheduler.load_tuning(
                read_input(args.tuning, f"{args.tuning}: cannot read the tuning scheme"),
                str(args.tuning)))
        else:
            status = scheduler.status()
            print(f"Job Scheduling: {'ENABLED' if status['active'] else 'DISABLED'}")
            took = status.get("last_pass_seconds")
            last = f", the last took {took * 1000:.0f} ms" if took is not None else ""
            print(f"passes: {status['passes']}{last}, every {status['interval']:g} s, "
                  f"backfilling: {status['backfill']}")
            if status.get("slack"):
                print("slack: " + ", ".join(f"{name} {value}"
                                            for name, value in status["slack"].items()))
            if status["last_error"]:
                print(f"last pass failed: {status['last_error']}")
            _print_tuning(status["tuning"])
            with connect_queue_manager() as qm:
                _print_policy_status(qm.policy_status())
            _print_failure_status()
    except (PermissionError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    except BrokenPipeError:
        raise  # stdout's reader left (`schedctl --status | head -1`): run_command exits quietly
    except (Pyro5.errors.CommunicationError, OSError) as exc:
        raise CommandError(f"cannot reach the scheduler at {config.admin_socket}: {exc} "
                           "(is `cobaltlite up` running?)") from None
    return 0


def _tunable_setting(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if sep and name:
            return name.strip().lower(), float(value)
    except ValueError:
        pass
    raise CommandError(f"--set {text!r}: expected NAME=NUMBER, e.g. w=3")


def _print_tuning(tuning: dict[str, Any]) -> None:
    values = tuning["values"]
    pins = tuning["pins"]
    shown = ", ".join(f"{name.upper()} = {values[name]:g}" + (" (pinned)" if name in pins else "")
                      for name in ("bf", "w"))
    print(f"tunables: {shown}; tuning: {tuning['scheme'] or 'off'}")
    last = tuning["last_change"]
    if last is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["time"]))
        print(f"last change: {last['tunable'].upper()} {last['old']:g} -> {last['new']:g} at "
              f"{when}: {last['reason']}")


def _print_policy_status(status: dict[str, Any]) -> None:
    if status["utility_file"]:
        functions = ", ".join(status["site_functions"]) or "none active"
        print(f"utility file: {status['utility_file']} ({functions})")
        last = status["last_reload"]
        if last:
            print(f"last reload: {last['outcome']}, asked by {last['requested_by']}"
                  + (f": {last['error']}" if last.get("error") else ""))
    else:
        print("utility file: none configured (builtin policies only)")
    for name, error in sorted(status["errors"].items()):
        suspended = " [suspended until the next reload]" if name in status["suspended"] else ""
        print(f"policy {name} failing: {error}{suspended}")


def _print_failure_status() -> None:
    """The failed components and the failure forecast the allocation cost reads P_f from."""
    try:
        with connect_system() as system:
            status = system.failure_status()
    except CommandError as exc:
        print(f"failures: unknown ({exc})")
        return
    print(f"failed components: {' '.join(status['failed']) or 'none'}")
    forecast = status["forecast"]
    print(f"failure forecast: {forecast['source']}, {forecast['entries']} entries"
          + (" (partlist shows each block's P_f)" if forecast["entries"] else ""))
    if forecast["last_error"]:
        print(f"failure forecast refused: {forecast['last_error']}")


def _sample_inputs() -> tuple[list[Any], PassInputs]:
    """The current queue and machine when the queue manager answers, else a sample."""
    try:
        with connect_queue_manager() as qm:
            limits = qm.limits()
            rows = [r for r in qm.jobs() if r["state"] == "queued"]
    except CommandError:
        return [], PassInputs(0.0, 1024, 1)
    now = time.time()
    jobs = [SampleJob(r["jobid"], now - r["submittime"], float(r["walltime"]), r["nodes"],
                      r["user"], r["project"], r["queue"]) for r in rows]
    return jobs, PassInputs(now, limits["machine_nodes"], limits["min_block_size"])


def _check(path: Path) -> int:
    jobs, inputs = _sample_inputs()
    try:
        loaded = load_and_validate(path, jobs, inputs)
    except PolicyError as exc:
        raise CommandError(str(exc)) from None
    against = f"{len(jobs)} queued jobs" if jobs else "the built-in sample jobs"
    print(f"{path}: OK, {len(loaded.functions)} function(s) checked against {against}: "
          f"{', '.join(loaded.functions)}")
    return 0


def current_policy(queue: str, name: str | None = None) -> UtilityFunction:
    """The utility function `name`, else the one `queue` ranks by now (asked of the queue
    manager): a builtin or a function of the configured utility file."""
    if name is None:
        with connect_queue_manager() as qm:
            queues = {q["name"]: q for q in qm.queues()}
        if queue not in queues:
            raise CommandError(f"queue {queue!r} does not exist")
        name = queues[queue]["policy"]
    try:
        return builtin_policy(name)
    except PolicyError:
        pass
    config = load_config()
    if not config.utility_file:
        raise CommandError(f"policy {name!r} is neither builtin nor in a utility file")
    try:
        site = compile_file(Path(config.utility_file)).functions
    except PolicyError as exc:
        raise CommandError(f"the current utility file: {exc}") from None
    if name not in site:
        raise CommandError(f"policy {name!r} is not in {config.utility_file}")
    return site[name]


def _try(args: Any) -> int:
    from cobaltlite.qsim.metrics import print_comparison
    from cobaltlite.qsim.replay import ReplaySettings, replay

    if not args.policy or not args.against:
        raise CommandError("--try FILE needs --policy NAME and --against LOG")
    if not args.against.is_file():
        # replay() would name its own option, --trace, which schedctl does not have.
        what = "is a directory, not a job log" if args.against.is_dir() else "no such file"
        raise CommandError(f"--against {args.against}: {what}")
    try:
        candidates = compile_file(args.try_file).functions
    except PolicyError as exc:
        raise CommandError(str(exc)) from None
    if args.policy not in candidates:
        raise CommandError(f"{args.try_file} has no function {args.policy!r} "
                           f"(it has: {', '.join(candidates)})")
    current = current_policy(args.queue, args.current)
    machine = args.machine or load_config().machine
    runs = []
    for label, policy in ((f"{current.name} (current)", current),
                          (f"{args.policy} (candidate)", candidates[args.policy])):
        try:
            report = replay(ReplaySettings(trace=args.against, machine=machine, policy=policy))
        except (CobaltliteError, PolicyError) as exc:
            raise CommandError(f"replay with {policy.name}: {exc}") from None
        runs.append((label, report.metrics))
    print_comparison(runs)
    print(f"{args.against}: {runs[0][1]['jobs']} jobs replayed on {machine}; "
          "nothing was activated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
