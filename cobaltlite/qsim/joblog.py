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

Where cobaltlite.compiled says so, the Q, S and E records are written in C
(CompiledAccountingObserver, cobaltlite/_speedups.c: a third of the Python writer's time on
SDSC-BLUE, docs/benchmarks.md); tests/test_speedups.py checks both write the same bytes.
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
from cobaltlite.compiled import COMPILED
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
    """`name` as a record writes it, remembered in `known` (callers look there first)."""
    text = known[name] = quote_value(name)
    return text


class PureAccountingObserver(ReplayObserver):
    """The job log in Python: the reference for CompiledAccountingObserver's bytes."""

    def __init__(self, path: Path) -> None:
        self._log = AccountingLog(path)
        self._lines: list[str] = []
        # Jobs submitted and not yet ended -> the texts their S and E records share, made once:
        # [the fields from Resource_List.ncpus to cwd, qtime, queue, user, the fields from
        # etime to queue (set at each start)].
        self._parts: dict[int, list[str]] = {}
        self._quoted: dict[str, str] = {}
        self._walls: dict[float, str] = {}  # a trace has a few hundred distinct wall times
        # The last record time and its stamp: records come in time order, many at one instant.
        self._when = float("nan")
        self._stamp = ""

    def _write(self, now: float, kind: str, ident: object, fields: dict[str, object]) -> None:
        self._append(format_record(now, kind, ident, fields) + "\n")

    def _append(self, record: str) -> None:
        self._lines.append(record)

    def submitted(self, job: SimJob, now: float) -> None:
        if now != self._when:
            self._when = now
            self._stamp = record_stamp(now)
        quoted = self._quoted
        wall = self._walls.get(job.wall_time)
        if wall is None:
            wall = self._walls[job.wall_time] = format_hms(job.wall_time)
        qtime = str(int(job.submit_time))
        queue = quoted.get(job.queue) or _quoted(quoted, job.queue)
        user = quoted.get(job.user_name) or _quoted(quoted, job.user_name)
        account = quoted.get(job.project) or _quoted(quoted, job.project)
        # Resource_List.nodect, Resource_List.walltime and account sort next to each other.
        ask = f"Resource_List.nodect={job.size} Resource_List.walltime={wall} account={account}"
        deps = job.dependencies
        depends = f"dependencies={':'.join(map(str, deps))} " if deps else ""
        self._lines.append(f"{self._stamp};Q;{job.jobid};{ask} ctime={qtime} {depends}"
                           f"jobname=N/A qtime={qtime} queue={queue} user={user}\n")
        self._parts[job.jobid] = [
            f"Resource_List.ncpus=0 {ask} args= ctime={qtime} cwd= ", qtime, queue, user, ""]

    def started(self, job: SimJob, now: float) -> None:
        if now != self._when:
            self._when = now
            self._stamp = record_stamp(now)
        p = self._parts[job.jobid]
        qtime = p[1]
        middle = p[4] = (f"etime={qtime} exe= exec_host={quote_value(job.location)} "
                         f"jobname=N/A mode= qtime={qtime} queue={p[2]} ")
        self._lines.append(f"{self._stamp};S;{job.jobid};{p[0]}{middle}start={int(now)} "
                           f"user={p[3]}\n")

    def ended(self, job: SimJob, now: float, killed: bool) -> None:
        if killed:
            # Cobalt writes an A (abort) record when the wall-time limit kills a job.
            self._write(now, "A", job.jobid, {"reason": "time_limit"})
        if now != self._when:
            self._when = now
            self._stamp = record_stamp(now)
        head, _, _, user, middle = self._parts.pop(job.jobid)
        start = int(job.start_time if job.start_time >= 0 else now)
        end = int(now)
        runtime = end - start if end > start else 0
        lines = self._lines
        lines.append(f"{self._stamp};E;{job.jobid};Exit_status={job.exit_status} {head}"
                     f"end={end} {middle}resources_used.nodect={job.size} "
                     f"resources_used.walltime={format_hms(runtime)} runtime={runtime} "
                     f"start={start} user={user}\n")
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


AccountingObserver: type[PureAccountingObserver] = PureAccountingObserver
"""The job log Qsim writes: CompiledAccountingObserver where cobaltlite.compiled says the
compiled parts run, else PureAccountingObserver (the same bytes)."""

if COMPILED:
    from cobaltlite._speedups import JobLog

    _QUOTED_ASCII = bytes(quote_value(chr(code)) != chr(code) for code in range(128))
    """For each ASCII code, whether quote_value quotes a value holding it: JobLog leaves an
    ASCII value without any of them as it is and passes every other value to quote_value."""

    class CompiledAccountingObserver(JobLog, PureAccountingObserver):
        """PureAccountingObserver's bytes, its Q, S and E records written by JobLog in C
        (first in the method order) and its A, R and FAIL records by its Python methods,
        appended to JobLog's records in order. PureAccountingObserver's own per-job state is
        not made: JobLog keeps its own."""

        def __init__(self, path: Path) -> None:
            self._log = AccountingLog(path)
            JobLog.__init__(self, self._log.write_encoded, record_stamp, quote_value,
                            format_hms, format_record, _QUOTED_ASCII)

        def _append(self, record: str) -> None:
            self.append(record)

        def close(self) -> None:
            self.flush()
            self._log.close()

    AccountingObserver = CompiledAccountingObserver
