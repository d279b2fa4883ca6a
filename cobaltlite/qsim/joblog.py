"""Qsim's job log: Q, S, A and E records in Cobalt's accounting format, with the fields the live
queue manager writes (cobaltlite.jobs.records), readable back as a trace.

Under failures (docs/fault-aware.md) it also holds, at each failure, one FAIL record whose id is
the failed component (`failed_at=` the exact time, `repaired=` when it returns, `killed=` the job
ids, `:`-joined; `qsim --failure-log` replays them), and for
each job it killed an A record (`reason=failure component= lost_runtime= lost_exec_host=`) and
an R record (the job is queued again, keeping its first `qtime`). A job's last S and E records
describe its successful run, so reading the log back as a trace replays each job once.

Speed (docs/benchmarks.md, issue 13): a replay writes three records per job, and building each
from a field dictionary (records.py, then format_record's flatten, sort and quote) cost more than
the scheduling. So the Q, S and E records are written from parts formatted once per job (its
quoted user, queue and account, its size, wall time and submit time) in the sorted field order
format_record gives records.py's fields; tests/test_joblog.py checks byte for byte, on random
jobs, that both write the same lines. The rare records (A, R, FAIL) take the general path.
Records are gathered in memory and written in blocks.
"""

from __future__ import annotations

from pathlib import Path

from cobaltlite.accounting import (
    FAILURE_RECORD,
    AccountingLog,
    format_record,
    quote_value,
    record_stamp,
)
from cobaltlite.jobs.records import JobFacts, queued_fields
from cobaltlite.qsim.engine import ReplayObserver, SimJob
from cobaltlite.timefmt import format_hms

_BLOCK = 2000
"""Records gathered before a write: a few hundred kilobytes."""


def _facts(job: SimJob) -> JobFacts:
    return JobFacts(jobid=job.jobid, user=job.user_name, queue=job.queue, project=job.project,
                    nodes=job.size, walltime=job.wall_time, submittime=job.submit_time,
                    dependencies=list(job.dependencies),
                    starttime=job.start_time if job.start_time >= 0 else None,
                    location=job.location)


def _quoted(known: dict[str, str], name: str) -> str:
    """`name` as a record writes it, remembered in `known`."""
    text = known.get(name)
    if text is None:
        text = known[name] = quote_value(name)
    return text


class _JobParts:
    """The formatted values of a job's fields that its Q, S and E records share."""

    __slots__ = ("ask", "host", "nodes", "qtime", "queue", "user")

    def __init__(self, job: SimJob, quoted: dict[str, str], walls: dict[float, str]) -> None:
        """`quoted`: names already quoted (a trace has a few hundred users, groups, queues);
        `walls`: wall times already formatted (a few hundred distinct ones too)."""
        self.nodes = str(job.size)
        wall = walls.get(job.wall_time)
        if wall is None:
            wall = walls[job.wall_time] = format_hms(job.wall_time)
        # Resource_List.nodect, Resource_List.walltime and account sort next to each other.
        self.ask = (f"Resource_List.nodect={self.nodes} Resource_List.walltime={wall} "
                    f"account={_quoted(quoted, job.project)}")
        self.qtime = str(int(job.submit_time))
        self.queue = _quoted(quoted, job.queue)
        self.user = _quoted(quoted, job.user_name)
        self.host = ""  # exec_host of the current run, set at its start


class AccountingObserver(ReplayObserver):
    def __init__(self, path: Path) -> None:
        self._log = AccountingLog(path)
        self._lines: list[str] = []
        self._parts: dict[int, _JobParts] = {}  # jobs submitted and not yet ended
        self._quoted: dict[str, str] = {}
        self._walls: dict[float, str] = {}
        self._stamp_of = (float("nan"), "")  # the last record time and its stamp

    def _stamp(self, now: float) -> str:
        when, stamp = self._stamp_of
        if now != when:  # records come in time order, many at one instant
            stamp = record_stamp(now)
            self._stamp_of = (now, stamp)
        return stamp

    def _write(self, now: float, kind: str, ident: object, fields: dict[str, object]) -> None:
        self._lines.append(format_record(now, kind, ident, fields) + "\n")

    def submitted(self, job: SimJob, now: float) -> None:
        p = self._parts[job.jobid] = _JobParts(job, self._quoted, self._walls)
        deps = job.dependencies
        depends = f"dependencies={':'.join(map(str, deps))} " if deps else ""
        self._lines.append(f"{self._stamp(now)};Q;{job.jobid};{p.ask} ctime={p.qtime} "
                           f"{depends}jobname=N/A qtime={p.qtime} queue={p.queue} "
                           f"user={p.user}\n")

    def started(self, job: SimJob, now: float) -> None:
        p = self._parts[job.jobid]
        p.host = quote_value(job.location)
        self._lines.append(f"{self._stamp(now)};S;{job.jobid};Resource_List.ncpus=0 {p.ask} "
                           f"args= ctime={p.qtime} cwd= etime={p.qtime} exe= "
                           f"exec_host={p.host} jobname=N/A mode= qtime={p.qtime} "
                           f"queue={p.queue} start={int(now)} user={p.user}\n")

    def ended(self, job: SimJob, now: float, killed: bool) -> None:
        if killed:
            # Cobalt writes an A (abort) record when the wall-time limit kills a job.
            self._write(now, "A", job.jobid, {"reason": "time_limit"})
        p = self._parts.pop(job.jobid)
        start = int(job.start_time if job.start_time >= 0 else now)
        end = int(now)
        runtime = max(0, end - start)
        lines = self._lines
        lines.append(f"{self._stamp(now)};E;{job.jobid};Exit_status={job.exit_status} "
                     f"Resource_List.ncpus=0 {p.ask} args= ctime={p.qtime} cwd= end={end} "
                     f"etime={p.qtime} exe= exec_host={p.host} jobname=N/A mode= "
                     f"qtime={p.qtime} queue={p.queue} resources_used.nodect={p.nodes} "
                     f"resources_used.walltime={format_hms(runtime)} runtime={runtime} "
                     f"start={start} user={p.user}\n")
        if len(lines) >= _BLOCK:  # checked at a job's last record: blocks of about _BLOCK
            self._log.write_formatted("".join(lines))
            lines.clear()

    def failed(self, component: str, now: float, repaired_at: float, jobids: list[int]) -> None:
        fields: dict[str, object] = {"failed_at": repr(now), "repaired": int(repaired_at)}
        if jobids:
            fields["killed"] = jobids
        self._write(now, FAILURE_RECORD, component, fields)

    def killed_by_failure(self, job: SimJob, now: float, component: str) -> None:
        self._write(now, "A", job.jobid, {
            "reason": "failure", "component": component,
            "lost_runtime": int(now - job.start_time), "lost_exec_host": job.location,
        })
        self._write(now, "R", job.jobid, queued_fields(_facts(job)))

    def close(self) -> None:
        self._log.write_formatted("".join(self._lines))
        self._lines.clear()
        self._log.close()
