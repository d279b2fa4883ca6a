"""The job record every trace reader produces and Qsim consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    # Fields a trace carries that the replay does not need but a user may want echoed back.
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TraceReadResult:
    """The jobs read from a file, and what was skipped on a lenient read (file:line: reason)."""

    jobs: list[TraceJob]
    skipped: list[str] = field(default_factory=list)
    # Seconds since the Unix epoch of the trace's time origin (SWF UnixStartTime), or 0.
    origin: int = 0
