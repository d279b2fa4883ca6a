"""Monthly reconfiguration in a replay (seed 002 §IV-A): `qsim --queue-layout START.yaml
--reconfigure monthly --method M`.

The replay window (--start .. --end) is cut at calendar-month boundaries (UTC). Each month's
layout is configured from the *trace's* jobs submitted in the month before it (the previous
month's log, as §IV-A does), so every month's configuration is known before the replay starts
and the months are configured in parallel on a process pool (`workers`). The starting layout
gives the queues (their job classes and priorities) that every month's configuration starts from.

Methods: pp, nlp, dqr, hybrid (configure_layout); static (the paper's Static: the pp layout of the
month before the first, kept for every month); whole (non-partitioned: no layout, the whole
machine for every job; the starting layout only names the queues of the report).

One replay runs over the whole window. A pass hook switches the layout at the first event at or
after each month boundary (the scheduler reads the partitions once per pass, so the new layout
takes effect at that pass): the partitions and pool become the new month's, and every waiting
job is routed again to the new layout's queue that takes it (DQR renames queues as it splits and
merges them). A job submitted in a month is routed by that month's layout; a job its month's
layout cannot hold (wider than its partition and the pool) is skipped with the reason.

The report (summary.json and printed): per month (by submission), mean and maximum wait, mean
bounded slowdown and utilization (node-seconds run inside the month over the machine's), and the
same per queue of the starting layout, so months and methods compare queue by queue whatever a
month's configuration split or merged; plus each month's layout (queues, nodes, pool).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cobaltlite.choices import MONTHLY_METHODS
from cobaltlite.errors import InputError
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.partitioning.configure import (
    METHODS,
    ConfigureSettings,
    configure_layout,
    flat_machine,
)
from cobaltlite.partitioning.layout import QueueLayout, layout_yaml
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.traces.model import TraceJob


def month_starts(start: float, end: float) -> list[float]:
    """The calendar-month boundaries (UTC) from `start`'s month up to `end`: [start, next
    month's first second, ..., end]."""
    if not end > start:
        raise InputError(f"--end {end:g} is not after --start {start:g}")
    bounds = [start]
    day = dt.datetime.fromtimestamp(start, dt.UTC)
    while True:
        year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
        day = dt.datetime(year, month, 1, tzinfo=dt.UTC)
        if day.timestamp() >= end:
            break
        bounds.append(day.timestamp())
    return [*bounds, end]


def previous_month(start: float) -> float:
    """The first second of the calendar month before `start`'s (UTC)."""
    day = dt.datetime.fromtimestamp(start, dt.UTC)
    year, month = (day.year - 1, 12) if day.month == 1 else (day.year, day.month - 1)
    return dt.datetime(year, month, 1, tzinfo=dt.UTC).timestamp()


def month_name(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m")


def _configure_month(args: tuple[list[TraceJob], QueueLayout, int, ConfigureSettings, str]
                     ) -> QueueLayout:
    jobs, layout, total, settings, label = args
    try:
        return configure_layout(jobs, layout, total, settings)[0]
    except InputError as exc:
        raise InputError(f"configuring {label}: {exc}") from None


@dataclass(frozen=True, slots=True)
class MonthPlan:
    """The months of a replay and the layout each runs (None: non-partitioned)."""

    bounds: list[float]
    layouts: list[QueueLayout | None]


def plan_months(history: Sequence[TraceJob], start_layout: QueueLayout, total: int,
                start: float, end: float, method: str, settings: ConfigureSettings,
                workers: int = 1) -> MonthPlan:
    """Each month's layout, configured from `history`'s jobs of the month before it."""
    if method not in MONTHLY_METHODS:
        raise InputError(f"--method {method!r}: choose one of {', '.join(MONTHLY_METHODS)}")
    start_layout.check(total, "--queue-layout")
    bounds = month_starts(start, end)
    months = len(bounds) - 1
    if method == "whole":
        return MonthPlan(bounds, [None] * months)
    sources = [previous_month(bounds[0]), *bounds[:months - 1]]  # month k: sources[k]..bounds[k]
    if method == "static":
        sources = sources[:1]
    tasks = []
    for k in range(len(sources)):
        first, last = sources[k], bounds[k]
        label = (f"{month_name(bounds[k])} from the jobs of {month_name(first)}")
        jobs = [j for j in history if first <= j.submit_time < last]
        if not jobs:
            raise InputError(f"configuring {label}: the trace holds no job submitted in "
                             f"{month_name(first)} (an empty month configures nothing; start "
                             "the replay a month later or give a trace that covers it)")
        month_settings = ConfigureSettings(
            "pp" if method == "static" else method, settings.samples, settings.tolerance,
            settings.epochs, settings.chunk, settings.degradation, 1)
        tasks.append((jobs, start_layout, total, month_settings, label))
    if workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(min(workers, len(tasks))) as pool:
            layouts = list(pool.map(_configure_month, tasks, chunksize=1))
    else:
        layouts = [_configure_month(task) for task in tasks]
    if method == "static":
        layouts = layouts * months
    return MonthPlan(bounds, list(layouts))


class LayoutSwitch:
    """Qsim's pass hook that puts each month's layout in force at its first event."""

    def __init__(self, qsim: Qsim, plan: MonthPlan, partitions: list[QueuePartitions | None],
                 originals: dict[int, TraceJob]) -> None:
        self.qsim = qsim
        self.originals = originals
        self.changes = [(t, parts, layout) for t, parts, layout
                        in zip(plan.bounds[1:], partitions[1:], plan.layouts[1:], strict=False)
                        if parts is not None and layout is not None]
        self.next = 0

    def before_pass(self, now: float) -> None:
        while self.next < len(self.changes) and self.changes[self.next][0] <= now:
            _, partitions, layout = self.changes[self.next]
            self.next += 1
            self.qsim.partitions = partitions
            for job in self.qsim.queued_jobs():
                name = layout.home(self.originals[job.jobid])
                if name is not None and partitions.could_hold(name, job.size):
                    job.queue = name

    def after_pass(self, now: float) -> None:
        pass


@dataclass
class MonthlyResult:
    plan: MonthPlan
    outcomes: list[JobOutcome]
    skipped: list[str]
    report: dict[str, Any]


def replay_monthly(jobs: Sequence[TraceJob], start_layout: QueueLayout, plan: MonthPlan,
                   total: int, observer: Any = None) -> MonthlyResult:
    """Replay `jobs` (submitted in the plan's window) month by month under the plan's layouts,
    FCFS with EASY inside each partition, and report per month and per starting queue."""
    from cobaltlite.machine.description import FlatDescription
    from cobaltlite.policy.utility import builtin_policy
    from cobaltlite.scheduler.scheduler import Backfill

    machine = FlatMachine(FlatDescription("monthly", total))
    bounds = plan.bounds
    originals = {j.jobid: j for j in jobs}
    partitions = [None if layout is None else QueuePartitions.from_layout(layout, machine)
                  for layout in plan.layouts]
    routed: list[TraceJob] = []
    skipped: list[str] = []
    month = 0
    for job in sorted(jobs, key=lambda j: (j.submit_time, j.jobid)):
        if not bounds[0] <= job.submit_time < bounds[-1]:
            continue
        while job.submit_time >= bounds[month + 1]:
            month += 1
        layout, parts = plan.layouts[month], partitions[month]
        if layout is None or parts is None:
            routed.append(job)
            continue
        name = layout.home(job)
        if name is None:
            raise InputError(f"job {job.jobid} ({job.nodes} nodes, queue {job.queue!r}) "
                             "belongs to no queue of the queue layout")
        if not parts.could_hold(name, job.nodes):
            skipped.append(f"job {job.jobid}: {job.nodes} nodes fit neither queue {name}'s "
                           f"partition ({layout.queue(name).nodes} nodes) nor the pool "
                           f"({layout.pool}) of {month_name(bounds[month])}")
            continue
        routed.append(replace(job, queue=name))
    qsim = Qsim(routed, machine, builtin_policy("fcfs"), Backfill.EASY, observer)
    qsim.partitions = partitions[0]
    qsim.pass_hook = LayoutSwitch(qsim, plan, partitions, originals)
    result = qsim.run()
    skipped += result.skipped
    # A waiting job that no later layout could hold stays in a queue the layout no longer
    # names: it never runs, and says so rather than vanish from the figures.
    skipped += [f"job {job.jobid}: never ran (queue {job.queue} is in no later layout)"
                for job in qsim.queued_jobs()]
    return MonthlyResult(plan, result.outcomes, skipped,
                         month_report(result.outcomes, originals, start_layout, plan, total))


def _figures(outcomes: Sequence[JobOutcome], first: float, last: float, nodes: int,
             bound: float = 10.0) -> dict[str, Any]:
    waits = [o.wait for o in outcomes]
    work = sum(max(0.0, min(o.end_time, last) - max(o.start_time, first)) * o.allocated_nodes
               for o in outcomes)
    return {
        "jobs": len(outcomes),
        "mean_wait": sum(waits) / len(waits) if waits else None,
        "max_wait": max(waits, default=None),
        "mean_bounded_slowdown": (sum(max(1.0, o.response / max(o.run_time, bound))
                                      for o in outcomes) / len(outcomes) if outcomes else None),
        "utilization": work / (nodes * (last - first)) if last > first else None,
    }


def month_report(outcomes: Sequence[JobOutcome], originals: dict[int, TraceJob],
                 start_layout: QueueLayout, plan: MonthPlan, total: int) -> dict[str, Any]:
    """Per month (jobs by submission; utilization by what ran inside the month) and per queue
    of the starting layout."""
    bounds = plan.bounds
    queue_of = {o.jobid: start_layout.home(originals[o.jobid]) for o in outcomes}
    months = []
    for k in range(len(bounds) - 1):
        first, last = bounds[k], bounds[k + 1]
        submitted = [o for o in outcomes if first <= o.submit_time < last]
        running = [o for o in outcomes if o.start_time < last and o.end_time > first]
        per_queue = {}
        for q in start_layout.queues:
            figures = _figures([o for o in submitted if queue_of[o.jobid] == q.name], first,
                               last, total)
            figures["utilization"] = _figures([o for o in running if queue_of[o.jobid] == q.name],
                                              first, last, total)["utilization"]
            per_queue[q.name] = figures
        layout = plan.layouts[k]
        months.append({
            "month": month_name(first),
            "start": first,
            "end": last,
            **{key: value for key, value in _figures(submitted, first, last, total).items()
               if key != "utilization"},
            "utilization": _figures(running, first, last, total)["utilization"],
            "queues": per_queue,
            "layout": None if layout is None else {
                "pool": layout.pool, "tau_pf": layout.tau_pf,
                "queues": {q.name: q.nodes for q in layout.queues}},
        })
    return {"months": months, "overall": _figures(outcomes, bounds[0], bounds[-1], total)}


def write_outputs(out: Path, summary: dict[str, Any], plan: MonthPlan, total: int) -> None:
    """DIR/summary.json and each month's layout as DIR/layouts/YYYY-MM.yaml."""
    (out / "layouts").mkdir(parents=True, exist_ok=True)
    for first, layout in zip(plan.bounds, plan.layouts, strict=False):
        if layout is not None:
            (out / "layouts" / f"{month_name(first)}.yaml").write_text(layout_yaml(layout, total))
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    tmp.replace(out / "summary.json")


def hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def report_lines(report: dict[str, Any]) -> list[str]:
    """The per-month, per-queue table the command prints."""
    lines = [f"{'month':8} {'queue':12} {'jobs':>6} {'mean wait h':>11} {'max wait h':>10} "
             f"{'bsld':>7} {'util':>6}"]
    for m in report["months"]:
        rows = [("all", m), *m["queues"].items()]
        for name, f in rows:
            slowdown = f["mean_bounded_slowdown"]
            bsld = "-" if slowdown is None else f"{slowdown:.1f}"
            util = "-" if f["utilization"] is None else f"{f['utilization']:.1%}"
            lines.append(f"{m['month']:8} {name:12} {f['jobs']:>6} {hours(f['mean_wait']):>11} "
                         f"{hours(f['max_wait']):>10} {bsld:>7} {util:>6}")
    return lines



def run_command(args: Any, err: Any) -> int:
    """`qsim ... --reconfigure monthly`: plan, replay, write DIR/summary.json, print the table."""
    from cobaltlite.partitioning.layout import read_layout
    from cobaltlite.policy.utility import builtin_policy
    from cobaltlite.qsim.joblog import AccountingObserver
    from cobaltlite.qsim.replay import ReplaySettings, processors_per_node, read_whole_trace

    if args.queue_layout is None:
        raise InputError("--reconfigure monthly needs --queue-layout START.yaml (the queues "
                         "every month's configuration starts from)")
    if args.start is None or args.end is None:
        raise InputError("--reconfigure monthly needs --start and --end (the months replayed)")
    description = flat_machine(args.machine)
    total = description.nodes
    layout, layout_nodes = read_layout(args.queue_layout)
    if layout_nodes != total:
        raise InputError(f"--queue-layout {args.queue_layout}: machine_nodes {layout_nodes}, "
                         f"but --machine {args.machine} has {total} nodes")
    settings = ReplaySettings(trace=args.trace, machine=args.machine,
                              policy=builtin_policy("fcfs"), trace_format=args.trace_format,
                              processors_per_node=args.procs_per_node, estimate=args.estimate,
                              lenient=args.lenient)
    history = read_whole_trace(settings, processors_per_node(settings, description)).jobs
    configure = ConfigureSettings(args.method if args.method in METHODS else "pp",
                                  samples=args.samples, epochs=args.epochs)
    plan = plan_months(history, layout, total, args.start, args.end, args.method, configure,
                       args.workers)
    observer = None
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        observer = AccountingObserver(args.out / "accounting.log")
    try:
        result = replay_monthly(history, layout, plan, total, observer)
    finally:
        if observer is not None:
            observer.close()
    summary = {"trace": args.trace.name, "machine": args.machine, "machine_nodes": total,
               "queue_layout": args.queue_layout.name, "reconfigure": "monthly",
               "method": args.method, "policy": "fcfs", "backfill": "easy",
               "jobs_replayed": len(result.outcomes), "jobs_skipped": len(result.skipped),
               "skipped": result.skipped[:20], **result.report}
    if args.out is not None:
        write_outputs(args.out, summary, plan, total)
    print(f"{args.trace.name} on {args.machine}, monthly {args.method}, FCFS + EASY")
    for line in report_lines(result.report):
        print(line)
    if result.skipped:
        err.print(f"qsim: {len(result.skipped)} jobs skipped; first: {result.skipped[0]}",
                  markup=False, highlight=False)
    return 0 if result.outcomes else 1
