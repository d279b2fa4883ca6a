"""The job record every trace reader produces and Qsim consumes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from cobaltlite.errors import InputError


@dataclass(slots=True)
class TraceJob:
    """One job of a workload trace, in seconds and nodes.

    `submit_time` is absolute (Unix epoch seconds) when the trace knows its start date, otherwise
    relative to the trace's own origin. `run_time` is what the job really ran; `requested_time` is
    the wall time the user asked for (what the scheduler plans with, and where a job is killed).
    """

    jobid: int
    submit_time: int
    run_time: int
    requested_time: int
    nodes: int
    user: str = "unknown"
    project: str = "unknown"
    queue: str = "default"
    # Jobs that must end with exit status 0 before this one may start (Cobalt's dependencies).
    dependencies: tuple[int, ...] = ()
    # Fields a trace carries that the replay does not need but a user may want echoed back.
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TraceReadResult:
    """The jobs read from a file, and what was skipped on a lenient read (file:line: reason)."""

    jobs: list[TraceJob]
    skipped: list[str] = field(default_factory=list)
    # Seconds since the Unix epoch of the trace's time origin (SWF UnixStartTime), or 0.
    origin: int = 0


_BY_ARRIVAL = attrgetter("submit_time", "jobid")


def select_window(
    jobs: list[TraceJob], start: float | None = None, end: float | None = None,
    arrival_scale: float = 1.0,
) -> list[TraceJob]:
    """The jobs submitted in [start, end), in arrival order, with every gap to the first kept
    job's submit time multiplied by `arrival_scale` (<1 compresses: a heavier load) and rounded
    to the second. Every trace reader's jobs go through here, so the options mean the same for
    every format."""
    if not (math.isfinite(arrival_scale) and arrival_scale > 0):
        raise InputError(f"arrival_scale {arrival_scale!r}: must be a finite number > 0")
    if start is not None and end is not None and start >= end:
        raise InputError(f"date window: start {start} is not before end {end}")
    if start is not None or end is not None:
        low = -math.inf if start is None else start
        high = math.inf if end is None else end
        jobs = [job for job in jobs if low <= job.submit_time < high]
    jobs = sorted(jobs, key=_BY_ARRIVAL)
    if arrival_scale != 1.0 and jobs:
        first = jobs[0].submit_time
        for job in jobs:
            job.submit_time = first + round((job.submit_time - first) * arrival_scale)
        # Rounding can make neighbours equal; restore the job-id tie-break.
        jobs.sort(key=_BY_ARRIVAL)
    return jobs
