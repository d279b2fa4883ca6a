"""`qsim`: replay a job trace through the cobaltlite scheduler and report the metrics."""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# Only what the parser needs is imported here, so `qsim --help` and a bad option stay quick
# (issue 13: start-up <= 0.12 s); the replay machinery is imported by main() after parsing.
from cobaltlite.argtypes import moment, non_negative_float, positive_float, positive_int, rate
from cobaltlite.choices import (
    BUILTIN_POLICIES,
    EXAMPLE_SCHEMES,
    FAIR_START_METHODS,
    MAX_WINDOW,
    MONTHLY_METHODS,
    PAPER_SENSITIVITY,
    PAPER_SPECIFICITY,
    PREDICTORS,
    TRACE_FORMATS,
    Backfill,
)
from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.policy.usage import DEFAULT_HALF_LIFE, check_half_life

if TYPE_CHECKING:
    from rich.progress import Progress

    from cobaltlite.policy.utility import UtilityFunction
    from cobaltlite.tuning.scheme import TuningScheme

EPILOG = """\
subcommands (given first, instead of --trace):
  qsim sweep FILE [--out DIR] [--scheduler ADDRESS]   run an experiment file's grid of replays
  qsim report DIR                                     HTML page + PNG figures of a replay or sweep
  qsim configure-queues --trace FILE --machine flat:N  queue partitions from a history (seed 002)
  qsim eet TRACE --machine flat:N [--out DIR]         score a trace's recorded schedule by EETs
  (qsim sweep --help, qsim report --help say more; docs/experiments.md describes the files)

examples:
  qsim --trace lublin_256.swf.gz --machine flat:256 --policy fcfs --backfill easy
  qsim --trace intrepid-2009-first3000.6col.txt.gz --machine intrepid --policy wfp3 --out out/
  qsim --trace out/accounting.log --machine intrepid --policy fcfs   # replay a job log back

failures (seed 003 §VI; docs/fault-aware.md):
  qsim --trace intrepid-2009-first3000.6col.txt.gz --machine intrepid --schedulable all \\
       --policy wfp3 --mtbf 4 --failure-seed 7            # fault-aware (window predictor 0.6/0.6)
  ... --mtbf 4 --failure-seed 7 --predictor none --beta 0  # ordinary allocation, same failures
  ... --failure-log failures.txt                           # replay a failure log (TIME COMPONENT)

fairness (seed 001 slack backfilling, seed 004 EETs and fairshare; docs/fairness.md):
  qsim --trace lublin_256.swf.gz --machine flat:256 --backfill slack \\
       --slack-param goal=utilization --slack-param lookahead=30 --unfairness
  qsim --trace METACENTRUM-2009-2.swf.gz --machine flat:806 --policy fcfs,fairshare --eet

outputs (with --out DIR): DIR/accounting.log (Q, S, E records in Cobalt's format, readable
again by qsim) and DIR/summary.json (settings and metrics); with several policies,
DIR/POLICY/accounting.log and DIR/POLICY/summary.json for each. The metrics table goes to
stdout. qsim exits 1 when no job was replayed.
"""


def _window(text: str) -> int:
    from cobaltlite.scheduler.scheduler import check_window

    try:
        return check_window(int(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _tuning(spec: str | None) -> TuningScheme | None:
    """A shipped scheme by name, else a YAML file."""
    if spec is None:
        return None
    from cobaltlite.tuning.scheme import example_scheme, load_scheme_file

    if spec in EXAMPLE_SCHEMES:
        return example_scheme(spec)
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"--tuning {spec}: neither a file nor a shipped scheme "
                         f"({', '.join(EXAMPLE_SCHEMES)})")
    return load_scheme_file(path)
def _half_life_hours(text: str) -> float:
    try:
        return check_half_life(float(text) * 3600.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    except InputError:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of hours > 0") from None


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _queue_places(text: str) -> tuple[str, list[str]]:
    queue, _, places = text.partition("=")
    names = [name for name in places.split(":") if name]
    if not queue or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: give QUEUE=PLACES, e.g. short=0-63")
    return queue, names


def _policy_param(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. balance_factor=0.5)")
    try:
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number") from None


def _slack_param(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. lookahead=20)")
    from cobaltlite.scheduler.slack import SlackSettings

    try:
        return name, getattr(SlackSettings.from_mapping({name: value}), name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim",
        description="Replay a job trace through the cobaltlite scheduler on a virtual clock "
        "and report wait, response, slowdown, utilization and loss of capacity.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--trace",
        required=True,
        type=Path,
        metavar="FILE",
        help="the job log to replay: SWF (.swf or .swf.gz), a cobaltlite/Cobalt "
        "accounting log, or the Intrepid reduced list",
    )
    parser.add_argument(
        "--format",
        dest="trace_format",
        default="auto",
        choices=TRACE_FORMATS,
        help="trace format (default: detected from the file's first line)",
    )
    parser.add_argument(
        "--machine",
        required=True,
        metavar="intrepid|flat:N[:PPN]|FILE",
        help="the machine: the shipped Intrepid BG/P table, a flat cluster of N "
        "nodes (PPN processors per node), or a partition table (.xml or .yaml)",
    )
    parser.add_argument(
        "--schedulable",
        metavar="all|FILE",
        help="BG/P only: which blocks take jobs, 'all' or a file of block names "
        "one per line (default: the description's own list)",
    )
    parser.add_argument(
        "--policy",
        default="fcfs",
        metavar="NAME[,NAME...]",
        help=f"utility function ranking the queue: {', '.join(BUILTIN_POLICIES)} "
        "(default: fcfs); several names separated by commas replay the trace once per policy "
        "and print the runs side by side",
    )
    parser.add_argument(
        "--utility-file", type=Path, metavar="FILE",
        help="a Python file of utility functions (as in etc/utility-functions.py); --policy "
        "may then name its functions as well as the builtins",
    )
    parser.add_argument(
        "--policy-param",
        action="append",
        default=[],
        type=_policy_param,
        metavar="NAME=VALUE",
        help="set a tunable of the policy, e.g. balance_factor=0.5 for balanced (repeatable)",
    )
    parser.add_argument(
        "--queues", type=Path, metavar="FILE",
        help="a queue configuration (YAML: queues with state, policy, priority and the "
        "restrictions of cqadm --setq, see docs/operator-guide.md); jobs go to the queue "
        "their trace names and meet the live queue manager's rules (default: every queue "
        "of the trace, unrestricted, ranked by --policy)",
    )
    parser.add_argument(
        "--backfill",
        default="easy",
        choices=[b.value for b in Backfill],
        help="backfilling: easy (nothing delays the top job), conservative (no "
        "queued job is delayed), slack (seed 001: a branch and bound over the first L waiting "
        "jobs may delay others within their slack; see --slack-param) or none (default: easy)",
    )
    parser.add_argument(
        "--slack-param", action="append", default=[], type=_slack_param, metavar="NAME=VALUE",
        help="a setting of --backfill slack (seed 001 Table 3 defaults; repeatable): "
        "lookahead=L (1-64, default 20), goal=fairness|utilization (G1/G2), slack_up=1.5, "
        "slack_down=1.2, slack_min=1.1 (factors, >= 1), k1=-0.5, k2=0.4, time_unit=10000 "
        "(seconds per unit of T_wait in eq. 5), max_ou_range=1.1, max_su_range=1.1, "
        "min_u_range=1.0, max_nodes=256 (search nodes per pass); docs/fairness.md",
    )
    parser.add_argument(
        "--unfairness", action="store_true",
        help="add seed 001's metrics: OverallUnfairness and SkipUnfairness against the thesis's "
        "fair start times, late and early jobs, high-load phases and their utilization, "
        "relative response time per job class (costs a plan per submission)",
    )
    parser.add_argument(
        "--window", type=_window, default=1, metavar="W",
        help=f"allocation window (seed 000 §3.3): permute the top W jobs and keep the order "
        f"that ends first, 1 to {MAX_WINDOW} (default: 1, no reordering)",
    )
    parser.add_argument(
        "--tuning", metavar="FILE|NAME",
        help="adaptive tuning scheme (seed 000 §3.4): a YAML file (a `tuning:` section, see "
        f"cobaltlite/tuning/scheme.py) or a shipped scheme: {', '.join(EXAMPLE_SCHEMES)}",
    )
    parser.add_argument(
        "--fair-start", default="none", choices=["none", *FAIR_START_METHODS],
        help="count unfair jobs (seed 000 §4.2): 'replay' forks the replay at each submission "
        "(the definition), 'estimate' plans each submission instant once (cheaper); "
        "default: none",
    )
    parser.add_argument(
        "--procs-per-node",
        type=positive_int,
        metavar="N",
        help="SWF processors per node (default: the flat machine's PPN, 4 on Blue Gene/P)",
    )
    parser.add_argument(
        "--estimate",
        default="requested",
        choices=["requested", "runtime"],
        help="requested-time model when the trace has none (-1): 'requested' "
        "uses the trace's requested time, else the run time; 'runtime' always "
        "uses the run time (perfect estimates)",
    )
    parser.add_argument(
        "--start",
        type=moment,
        metavar="DATE",
        help="replay only jobs submitted at or after DATE (epoch or ISO, UTC)",
    )
    parser.add_argument(
        "--end", type=moment, metavar="DATE", help="replay only jobs submitted before DATE"
    )
    parser.add_argument(
        "--arrival-scale",
        type=positive_float,
        default=1.0,
        metavar="F",
        help="multiply the gaps between arrivals by F (<1 = heavier load)",
    )
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="skip and count malformed trace lines instead of stopping",
    )
    parser.add_argument(
        "--reservations",
        type=Path,
        metavar="FILE",
        help="hold reservations during the replay (maintenance windows, dedicated runs): YAML "
             "or setres lines, times in UTC; docs/operator-guide.md, 'Reservations in Qsim'",
    )
    parser.add_argument(
        "--queue-places", action="append", default=[], type=_queue_places,
        metavar="QUEUE=PLACES",
        help="run QUEUE's jobs only on PLACES, as partadm --queue does live: node ranges "
             "(0-63) or block names, several joined by ':' (repeatable; queues not named run "
             "anywhere; docs/administration.md)",
    )
    parser.add_argument(
        "--queue-layout", type=Path, metavar="FILE",
        help="queue partitions and a common pool (seed 002): each job goes to the layout queue "
             "whose job classes take it and runs on its partition, or on the pool once its "
             "priority factor exceeds tau_pf (while a queue has a job waiting past its "
             "starvation_time, only that queue's); per-queue figures in summary.json (by_queue); "
             "a job no queue takes stops the replay (docs/hybrid-queues.md)",
    )
    seed002 = parser.add_argument_group(
        "monthly queue reconfiguration (seed 002 §IV-A; docs/hybrid-queues.md)")
    seed002.add_argument(
        "--reconfigure", choices=["none", "monthly"], default="none",
        help="monthly: configure each month of --start..--end from the trace's previous month "
             "with --method, starting from --queue-layout's queues, switch the layout at each "
             "month boundary, and report per month and per queue (default: none)")
    seed002.add_argument(
        "--method", default="dqr", choices=MONTHLY_METHODS,
        help="with --reconfigure monthly: whole (non-partitioned), static (the first month's "
             "pp kept), pp, nlp, dqr or hybrid (default: dqr)")
    seed002.add_argument(
        "--workers", type=positive_int, default=1, metavar="N",
        help="with --reconfigure monthly: months configured in parallel on N processes")
    seed002.add_argument(
        "--samples", type=positive_int, default=100, metavar="N",
        help="with --reconfigure monthly: nlp/dqr/hybrid partition vectors per month (default 100)")
    seed002.add_argument(
        "--epochs", type=positive_int, default=3, metavar="N",
        help="with --reconfigure monthly: nlp epochs of a month, weighted 1/N..N/N (default 3)")
    parser.add_argument(
        "--slowdown-bound",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="run-time bound of bounded slowdown (default: 10)",
    )
    faults = parser.add_argument_group(
        "failures and fault-aware allocation (seed 003 §IV-B, §VI-A3; docs/fault-aware.md)")
    faults.add_argument(
        "--alpha", type=non_negative_float, default=1.0, metavar="W",
        help="weight of BLK_f (blocked partitions) in the allocation cost (default: 1)")
    faults.add_argument(
        "--beta", type=non_negative_float, default=1.0, metavar="W",
        help="weight of P_f (failure chance) in the allocation cost (default: 1)")
    source = faults.add_mutually_exclusive_group()
    source.add_argument(
        "--mtbf", dest="mtbf_hours", type=positive_float, metavar="HOURS",
        help="Weibull failures per failure unit (BG/P midplane, flat node) giving this system "
        "MTBF; the paper's range is 4 to 20")
    source.add_argument(
        "--weibull-scale", type=positive_float, metavar="SECONDS",
        help="Weibull failures with this per-unit scale λ (paper: 1e6 to 6e6)")
    source.add_argument(
        "--failure-log", type=Path, metavar="FILE",
        help="replay the failures of FILE: lines 'TIME COMPONENT' (docs/fault-aware.md)")
    faults.add_argument(
        "--weibull-shape", type=positive_float, default=1.0, metavar="K",
        help="Weibull shape k (default: 1, the paper's; exponential gaps)")
    faults.add_argument(
        "--failure-seed", type=_whole_number, default=1, metavar="N",
        help="seed of the generated failures (default: 1)")
    faults.add_argument(
        "--repair-time", type=non_negative_float, default=1200.0, metavar="SECONDS",
        help="time a failed component is out of service (default: 1200, the paper's reboot)")
    faults.add_argument(
        "--predictor", choices=PREDICTORS, default="window",
        help="what the allocation cost learns of failures: window (P_f = sensitivity if a "
        "failure falls in the job's run, else 1 - specificity), perfect, or none (ordinary "
        "allocation); default: window")
    faults.add_argument("--sensitivity", type=rate, default=PAPER_SENSITIVITY, metavar="P",
                        help="predictor sensitivity (default: 0.6)")
    faults.add_argument("--specificity", type=rate, default=PAPER_SPECIFICITY, metavar="P",
                        help="predictor specificity (default: 0.6)")
    fairness = parser.add_argument_group(
        "user-aware metrics and fairshare (seed 004; docs/fairness.md)")
    fairness.add_argument(
        "--eet", action="store_true",
        help="score the replay by expected end times: per-user violated EETs, tardiness and "
        "weighted tardiness (table, summary.json; with --out, box plots and a heatmap)")
    fairness.add_argument(
        "--eet-shares", type=Path, metavar="FILE",
        help="expected share per user for --eet (implies it): lines 'USER NODES' summing to "
        "the machine (default: the machine divided equally among the users with jobs in the "
        "replay)")
    fairness.add_argument(
        "--usage-half-life", type=_half_life_hours, default=DEFAULT_HALF_LIFE, metavar="HOURS",
        help="half-life of the per-user usage that fairshare policies read (user_usage; "
        f"default: {DEFAULT_HALF_LIFE / 3600:g})")
    parser.add_argument(
        "--out", type=Path, metavar="DIR",
        help="write DIR/accounting.log and DIR/summary.json (DIR/POLICY/... with several policies)"
    )
    parser.add_argument(
        "--markdown", action="store_true",
        help="print the metrics as a Markdown table (for reports and docs)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no timing line"
    )
    return parser


def _progress_factory() -> tuple[Progress, Callable[[int], Callable[[int], None]]]:
    """A progress bar on stderr (a terminal): rich is imported only for it and the metrics
    table, after the replay's start-up."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )

    def factory(total: int) -> Callable[[int], None]:
        task = progress.add_task("replay", total=total)
        return lambda done: progress.update(task, completed=done)

    return progress, factory


def _policy(name: str, args: argparse.Namespace) -> UtilityFunction:
    from cobaltlite.qsim.replay import policy_named

    return policy_named(name, dict(args.policy_param), args.utility_file)


SUBCOMMANDS = ("sweep", "report", "configure-queues", "eet")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "configure-queues":
        from cobaltlite.partitioning import command

        return command.main(argv[1:])
    if argv and argv[0] == "eet":
        from cobaltlite.qsim import eet_command

        return eet_command.main(argv[1:])
    if argv and argv[0] in SUBCOMMANDS:
        # Imported only here: a plain replay never loads Dask, pyarrow or matplotlib.
        from cobaltlite.experiments import commands

        run = commands.sweep_main if argv[0] == "sweep" else commands.report_main
        return run(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    # Imported after parsing: --help and a bad option never load the replay machinery.
    from cobaltlite.jobs.queues import load_queue_config
    from cobaltlite.qsim.metrics import (
        metrics_markdown,
        output_console,
        print_comparison,
        print_metrics,
    )
    from cobaltlite.qsim.queue_metrics import queue_table
    from cobaltlite.qsim.replay import ReplaySettings, replay

    names = [name.strip() for name in args.policy.split(",") if name.strip()]
    if not names:
        parser.error("--policy needs at least one policy name")
    if args.slack_param and args.backfill != Backfill.SLACK:
        parser.error("--slack-param applies only with --backfill slack")
    slack = None  # only slack backfilling reads seed 001's settings (and loads their module)
    if args.backfill == Backfill.SLACK:
        from cobaltlite.scheduler.slack import SlackSettings

        slack = SlackSettings(**dict(args.slack_param))
    if args.queue_layout is not None and (args.queue_places or args.fair_start != "none"):
        parser.error("--queue-layout places every queue itself: give neither --queue-places "
                     "nor --fair-start with it")
    if args.queue_places and args.fair_start != "none":
        parser.error("--fair-start does not yet follow --queue-places: give one or the other")
    monthly = args.reconfigure == "monthly"
    if monthly and (len(names) > 1 or args.tuning or args.queue_places
                    or args.fair_start != "none"):
        parser.error("--reconfigure monthly replays one policy (fcfs) with EASY and no "
                     "--tuning, --queue-places or --fair-start")
    # An --out directory qsim makes is taken away again if bad input stops it before it writes.
    made_out = args.out is not None and not args.out.exists()
    problem = _check_paths(args.trace, args.out, several=len(names) > 1)
    if problem:
        _say(f"qsim: error: {problem}")
        return 1
    if monthly:
        from rich.console import Console

        from cobaltlite.partitioning.monthly import run_command

        try:
            return run_command(args, Console(stderr=True, soft_wrap=True))
        except CobaltliteError as exc:
            return _stopped(exc, args.out if made_out else None)
    reports = []
    try:
        tuning = _tuning(args.tuning)
        eet_model = None
        if args.eet or args.eet_shares:
            from cobaltlite.qsim.eet_command import share_model

            eet_model = share_model(args.eet_shares)
        policies = [_policy(name, args) for name in names]
        queue_config = None if args.queues is None else load_queue_config(args.queues)
        queue_policies = {q["policy"]: _policy(q["policy"], args)
                          for q in queue_config or () if q["policy"] is not None}
        for policy in policies:
            out = args.out / policy.name if args.out and len(policies) > 1 else args.out
            settings = ReplaySettings(
                trace=args.trace, machine=args.machine, policy=policy,
                backfill=Backfill(args.backfill), trace_format=args.trace_format,
                schedulable=args.schedulable, processors_per_node=args.procs_per_node,
                estimate=args.estimate, start=args.start, end=args.end,
                arrival_scale=args.arrival_scale, lenient=args.lenient,
                slowdown_bound=args.slowdown_bound, out=out, window=args.window,
                slack=slack, unfairness=args.unfairness, tuning=tuning, fair_start=args.fair_start,
                queue_config=queue_config, queue_policies=queue_policies,
                alpha=args.alpha, beta=args.beta, failure_log=args.failure_log,
                mtbf_hours=args.mtbf_hours, weibull_scale=args.weibull_scale,
                weibull_shape=args.weibull_shape, failure_seed=args.failure_seed,
                repair_time=args.repair_time, predictor=args.predictor,
                sensitivity=args.sensitivity, specificity=args.specificity,
                eet=eet_model, usage_half_life=args.usage_half_life,
                reservations=args.reservations, queue_places=dict(args.queue_places),
                queue_layout=args.queue_layout,
            )
            began = time.perf_counter()
            if args.quiet or not sys.stderr.isatty():
                report = replay(settings)
            else:
                progress, factory = _progress_factory()
                with progress:
                    report = replay(settings, factory)
            reports.append((report, time.perf_counter() - began))
    except CobaltliteError as exc:
        return _stopped(exc, args.out if made_out else None)
    # What the replays made (a JobOutcome per job, which the collector never untracks) lives
    # until qsim exits: frozen, it is not walked again by the full collection that importing
    # rich and drawing the tables sets off (0.17 s of SDSC-BLUE's first half, 116,000 jobs).
    # Not unfrozen after printing: the collection at exit would walk them instead (0.1 s). A
    # caller in the same process (the tests) keeps only those objects out of later collections.
    gc.freeze()
    first = reports[0][0]
    for label, items in (("trace lines skipped", first.trace_skipped),
                         ("jobs that fit nowhere", first.result.skipped)):
        if items:
            _say(f"qsim: {len(items)} {label}; first: {items[0]}")
    named = [(r.settings.policy.name, r.metrics) for r, _ in reports]
    title = (f"{args.trace.name} on {args.machine}, {args.backfill} backfilling, W={args.window}"
             + (f", tuning {tuning.name}" if tuning else ""))
    if args.markdown:
        print(metrics_markdown(named))
    elif len(reports) > 1:
        print_comparison(named)
    else:
        print_metrics(first.metrics, title=f"{title}, {first.settings.policy.name}")
        if "by_queue" in first.metrics:
            output_console().print(queue_table(first.metrics["by_queue"]))
    if eet_model is not None:
        from cobaltlite.qsim.eet import eet_markdown, print_eet

        eet_named = [(r.settings.policy.name, r.metrics["eet"]) for r, _ in reports]
        if args.markdown:
            print("\n" + eet_markdown(eet_named))
        else:
            print_eet(eet_named)
    if not args.quiet:
        from cobaltlite.compiled import STATUS

        for report, elapsed in reports:
            jobs = len(report.result.outcomes)
            _say(f"qsim: {report.settings.policy.name}: {jobs} jobs in {elapsed:.2f} s "
                 f"({jobs / max(elapsed, 1e-9):,.0f} jobs/s; compiled parts: {STATUS})")
    empty = [report.settings.policy.name for report, _ in reports if not report.result.outcomes]
    if empty:
        # A window after the trace's end, or every job too big: metrics of nothing mean nothing.
        _say(f"qsim: warning: no job was replayed ({', '.join(empty)}); check --start/--end "
             "against the trace's dates and --machine against the jobs' sizes")
        return 1
    return 0


def _stopped(error: CobaltliteError, made_out: Path | None) -> int:
    """Report `error` and take away the --out directory qsim made (`made_out`) if nothing was
    written into it: bad input leaves no trace."""
    _say(f"qsim: error: {error}")
    if made_out is not None and made_out.is_dir() and not any(made_out.iterdir()):
        made_out.rmdir()
    return 1


def _say(message: str) -> None:
    """A line on stderr (errors, warnings, the timing line)."""
    print(message, file=sys.stderr)


def _check_paths(trace: Path, out: Path | None, several: bool) -> str | None:
    """Why --trace or --out cannot be used (None if they can), before any replay starts."""
    if trace.is_dir():
        return f"--trace {trace}: is a directory; name a trace file in it"
    if out is None:
        return None
    if out.exists() and not out.is_dir():
        return f"--out {out}: exists and is not a directory"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--out {out}: cannot create the directory: {exc.strerror or exc}"
    return None


if __name__ == "__main__":
    sys.exit(main())
