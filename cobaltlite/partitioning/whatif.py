"""What a new queue layout would have done: the site's own accounting log replayed by Qsim under
the active layout and under a candidate, side by side (`partadm --layout FILE --dry-run`).

The what-if of `schedctl --try`, for queues. Each replay is a plain `replay()` with
`queue_layout` set (or none, when no layout is active), so it reads the log, routes the jobs by
the layout's classes and schedules them exactly as `qsim --queue-layout` would. Nothing here
talks to a daemon: the caller passes the layouts, the machine and the policy.

Per queue: its jobs, mean and maximum wait, mean bounded slowdown, and utilization: the node
seconds its jobs held over (its nodes x the replay's makespan). A queue's nodes are its
partition's; a queue the layout does not name shares the nodes outside the layout, and without a
layout every queue has the whole machine. Jobs a queue ran on the common pool count for it, so
a queue that used the pool can pass 100 %.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.moments import parse_moment
from cobaltlite.partitioning.layout import QueueLayout
from cobaltlite.policy.utility import UtilityFunction
from cobaltlite.qsim.metrics import compute_metrics, human_duration
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import Backfill

_SPAN = re.compile(r"(\d+(?:\.\d+)?)([dhm])")
_SPAN_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0}


def since_moment(text: str, now: float | None = None) -> float:
    """`--since`: a span back from now (`30d`, `12h`, `90m`) or a moment (epoch seconds or ISO
    8601, as qsim's --start); ValueError naming the text."""
    match = _SPAN.fullmatch(text.strip())
    if match:
        return (time.time() if now is None else now) - float(match[1]) * _SPAN_SECONDS[match[2]]
    try:
        return parse_moment(text)
    except ValueError:
        raise ValueError(f"--since {text!r}: give a span back from now (30d, 12h, 90m) or a "
                         "date (2026-10-01, epoch seconds)") from None


@dataclass(frozen=True, slots=True)
class QueueFigures:
    name: str
    nodes: int
    jobs: int
    mean_wait: float | None
    max_wait: float | None
    mean_bounded_slowdown: float | None
    utilization: float | None


@dataclass(frozen=True, slots=True)
class LayoutRun:
    label: str
    metrics: dict[str, Any]
    queues: tuple[QueueFigures, ...]


def queue_nodes(layout: QueueLayout | None, queue: str, machine_nodes: int) -> int:
    """The nodes a queue's jobs may use under `layout` (pool aside)."""
    if layout is None:
        return machine_nodes
    for q in layout.queues:
        if q.name == queue:
            return q.nodes
    return machine_nodes - layout.nodes


def per_queue(outcomes: Sequence[JobOutcome], layout: QueueLayout | None, machine_nodes: int,
              slowdown_bound: float) -> tuple[QueueFigures, ...]:
    """Each queue's figures, queues in the layout's order, then the others by name."""
    groups: dict[str, list[JobOutcome]] = {}
    for job in outcomes:
        groups.setdefault(job.queue, []).append(job)
    order = [q.name for q in layout.queues] if layout is not None else []
    names = [n for n in order if n in groups] + sorted(n for n in groups if n not in order)
    makespan = (max(j.end_time for j in outcomes) - min(j.submit_time for j in outcomes)
                if outcomes else 0.0)
    figures = []
    for name in names:
        jobs = groups[name]
        nodes = queue_nodes(layout, name, machine_nodes)
        metrics = compute_metrics(jobs, [], max(nodes, 1), slowdown_bound=slowdown_bound)
        held = math.fsum(j.allocated_nodes * j.run_time for j in jobs)
        figures.append(QueueFigures(
            name, nodes, len(jobs), metrics["wait"]["mean"], metrics["wait"]["max"],
            metrics["bounded_slowdown"]["mean"],
            held / (nodes * makespan) if nodes > 0 and makespan > 0 else None))
    return tuple(figures)


def replay_layouts(log: Path, machine: str, policy: UtilityFunction, backfill: Backfill,
                   since: float | None,
                   layouts: Sequence[tuple[str, QueueLayout | None]]) -> list[LayoutRun]:
    """One replay of `log` (jobs submitted from `since` on) per (label, layout); InputError
    naming the layout whose replay failed (a job no queue of it takes, say)."""
    from cobaltlite.qsim.replay import ReplaySettings, replay  # the replay stack: only here

    if not log.is_file():
        what = "is a directory, not a job log" if log.is_dir() else "no such file"
        raise InputError(f"--log {log}: {what}")
    runs = []
    for label, layout in layouts:
        settings = ReplaySettings(trace=log, machine=machine, policy=policy, backfill=backfill,
                                  start=since, queue_layout=layout)
        try:
            report = replay(settings)
        except InputError as exc:
            raise InputError(f"replay under the {label} configuration: {exc}") from None
        if not report.result.outcomes:
            raise InputError(f"--log {log}: no job submitted since "
                             f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(since or 0))} UTC "
                             "to replay")
        runs.append(LayoutRun(label, report.metrics, per_queue(
            report.result.outcomes, layout, report.result.machine_nodes,
            settings.slowdown_bound)))
    return runs


def queue_table(runs: Sequence[LayoutRun]) -> tuple[list[str], list[list[str]]]:
    """The per-queue comparison: a row per queue and configuration, queues as first seen."""
    names = list(dict.fromkeys(q.name for run in runs for q in run.queues))
    rows = []
    for name in names:
        for run in runs:
            found = next((q for q in run.queues if q.name == name), None)
            if found is None:
                rows.append([name, run.label, "-", "0", "-", "-", "-", "-"])
                continue
            rows.append([name, run.label, str(found.nodes), str(found.jobs),
                         _duration(found.mean_wait), _duration(found.max_wait),
                         "-" if found.mean_bounded_slowdown is None
                         else f"{found.mean_bounded_slowdown:.2f}",
                         "-" if found.utilization is None else f"{found.utilization:.1%}"])
    header = ["Queue", "Configuration", "Nodes", "Jobs", "MeanWait", "MaxWait", "MeanBSLD",
              "Utilization"]
    return header, rows


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else human_duration(seconds)
