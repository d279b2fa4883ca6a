"""The fields of a job's accounting records (reference §2.9), for the live queue manager and Qsim.

Both build a `JobFacts` of a job and write the same fields, so a replay's log and a daemon's log
compare record by record and either reads back as a trace (cobaltlite.accounting).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cobaltlite.timefmt import format_hms


@dataclass(slots=True)
class JobFacts:
    """What the accounting records say of one job, whichever program writes them."""

    jobid: int
    user: str
    queue: str
    project: str
    nodes: int
    walltime: float  # seconds
    submittime: float
    jobname: str = "N/A"
    group: str = ""
    procs: int = 0
    mode: str = ""
    cwd: str = ""
    command: str = ""
    args: list[str] = field(default_factory=list)
    dependencies: list[int] = field(default_factory=list)
    starttime: float | None = None
    location: str = ""
    requested_queue: str = ""
    """The queue the job was submitted to when a queue layout routed it to `queue` (live
    only); the log's readers replay it from there (cobaltlite.accounting)."""


def queued_fields(job: JobFacts) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "queue": job.queue, "user": job.user, "account": job.project, "jobname": job.jobname,
        "qtime": int(job.submittime), "ctime": int(job.submittime),
        "Resource_List.nodect": job.nodes,
        "Resource_List.walltime": format_hms(job.walltime),
    }
    if job.dependencies:
        fields["dependencies"] = job.dependencies
    if job.requested_queue:
        fields["requested_queue"] = job.requested_queue
    return fields


def start_fields(job: JobFacts, now: float) -> dict[str, Any]:
    """The S record: who, what, where, and the times Cobalt logged (ctime/qtime submit, etime
    eligible: here the submit time, since holds are logged by their own HA/HR records)."""
    fields = {
        "queue": job.queue, "user": job.user, "account": job.project, "jobname": job.jobname,
        "mode": job.mode, "cwd": job.cwd, "exe": job.command, "args": " ".join(job.args),
        "ctime": int(job.submittime), "qtime": int(job.submittime),
        "etime": int(job.submittime), "start": int(now), "exec_host": job.location,
        "Resource_List.ncpus": job.procs, "Resource_List.nodect": job.nodes,
        "Resource_List.walltime": format_hms(job.walltime),
    }
    if job.group:
        fields["group"] = job.group
    return fields


def end_fields(job: JobFacts, now: float, exit_status: int | None) -> dict[str, Any]:
    """The E record: the S fields, the end, the run time and what was used."""
    start = job.starttime if job.starttime is not None else now
    fields = start_fields(job, start)
    runtime = max(0, int(now) - int(start))
    fields.update({
        "end": int(now), "runtime": runtime,
        "Exit_status": -1 if exit_status is None else exit_status,
        "resources_used.walltime": format_hms(runtime),
        "resources_used.nodect": job.nodes,
    })
    return fields
