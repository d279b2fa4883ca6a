"""What a new queue layout would have done: the site's own accounting log replayed by Qsim under
the active layout and under a candidate, side by side (`partadm --layout FILE --dry-run`).

The what-if of `schedctl --try`, for queues. Each replay is a plain `replay()` with
`queue_layout` set (or none, when no layout is active), so it reads the log, routes the jobs by
the layout's classes and schedules them exactly as `qsim --queue-layout` would. Nothing here
talks to a daemon: the caller passes the layouts, the machine and the policy.

Per queue (cobaltlite/qsim/queue_metrics.py, as `qsim --queue-layout` reports it): its jobs,
mean and maximum wait, mean bounded slowdown, its partition's nodes and their utilization, and
how many of its jobs ran on the common pool. Without a layout every queue has the whole machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.machine.runtime import build_machine
from cobaltlite.moments import parse_moment
from cobaltlite.policy.utility import UtilityFunction
from cobaltlite.qsim.queue_metrics import queue_metrics
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
class LayoutRun:
    label: str
    metrics: dict[str, Any]
    """The replay's metrics; `by_queue` (cobaltlite/qsim/queue_metrics.py) always set."""
    skipped: tuple[str, ...]
    """Why each job of the log that never ran did not (too large for its partition, say)."""


def replay_layouts(log: Path, machine: str, policy: UtilityFunction, backfill: Backfill,
                   since: float | None,
                   layouts: Sequence[tuple[str, Path | None]]) -> list[LayoutRun]:
    """One replay of `log` (jobs submitted from `since` on) per (label, layout file or None);
    InputError naming the configuration whose replay failed (a job no queue of it takes)."""
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
        outcomes = report.result.outcomes
        if not outcomes:
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(since or 0))
            raise InputError(f"--log {log}: no job submitted since {when} UTC to replay")
        metrics = report.metrics
        if "by_queue" not in metrics:  # no layout: every queue has the whole machine
            whole = QueuePartitions.whole_machine(sorted({o.queue for o in outcomes}),
                                                  build_machine(load_description(machine)))
            metrics["by_queue"] = queue_metrics(outcomes, whole, settings.slowdown_bound)
        runs.append(LayoutRun(label, metrics, tuple(report.result.skipped)))
    return runs
