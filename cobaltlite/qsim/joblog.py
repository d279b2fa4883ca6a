"""Qsim's job log: Q, S, A and E records in Cobalt's accounting format, with the fields the live
queue manager writes (cobaltlite.jobs.records), readable back as a trace.

Under failures (docs/fault-aware.md) it also holds, at each failure, one FAIL record whose id is
the failed component (`failed_at=` the exact time, `repaired=` when it returns, `killed=` the job
ids, `:`-joined; `qsim --failure-log` replays them), and for
each job it killed an A record (`reason=failure component= lost_runtime= lost_exec_host=`) and
an R record (the job is queued again, keeping its first `qtime`). A job's last S and E records
describe its successful run, so reading the log back as a trace replays each job once.
"""

from __future__ import annotations

from pathlib import Path

from cobaltlite.accounting import FAILURE_RECORD, AccountingLog
from cobaltlite.jobs.records import JobFacts, end_fields, queued_fields, start_fields
from cobaltlite.qsim.engine import ReplayObserver, SimJob


def _facts(job: SimJob) -> JobFacts:
    return JobFacts(jobid=job.jobid, user=job.user_name, queue=job.queue, project=job.project,
                    nodes=job.size, walltime=job.wall_time, submittime=job.submit_time,
                    dependencies=list(job.dependencies),
                    starttime=job.start_time if job.start_time >= 0 else None,
                    location=job.location)


class AccountingObserver(ReplayObserver):
    def __init__(self, path: Path) -> None:
        self._log = AccountingLog(path)

    def submitted(self, job: SimJob, now: float) -> None:
        self._log.write(now, "Q", job.jobid, queued_fields(_facts(job)))

    def started(self, job: SimJob, now: float) -> None:
        self._log.write(now, "S", job.jobid, start_fields(_facts(job), now))

    def ended(self, job: SimJob, now: float, killed: bool) -> None:
        if killed:
            # Cobalt writes an A (abort) record when the wall-time limit kills a job.
            self._log.write(now, "A", job.jobid, {"reason": "time_limit"})
        self._log.write(now, "E", job.jobid, end_fields(_facts(job), now, job.exit_status))

    def failed(self, component: str, now: float, repaired_at: float, jobids: list[int]) -> None:
        fields: dict[str, object] = {"failed_at": repr(now), "repaired": int(repaired_at)}
        if jobids:
            fields["killed"] = jobids
        self._log.write(now, FAILURE_RECORD, component, fields)

    def killed_by_failure(self, job: SimJob, now: float, component: str) -> None:
        self._log.write(now, "A", job.jobid, {
            "reason": "failure", "component": component,
            "lost_runtime": int(now - job.start_time), "lost_exec_host": job.location,
        })
        self._log.write(now, "R", job.jobid, queued_fields(_facts(job)))

    def close(self) -> None:
        self._log.close()
