"""Qsim's job log: Q, S and E records in Cobalt's accounting format, readable back as a trace.

Under failures (docs/fault-aware.md) it also holds, at each failure, one FAIL record whose id is
the failed component (`repaired=` when it returns, `killed=` the job ids, `:`-joined), and for
each job it killed an A record (`reason=failure component= lost_runtime= lost_exec_host=`) and
an R record (the job is queued again, keeping its first `qtime`). A job's last S and E records
describe its successful run, so reading the log back as a trace replays each job once.
"""

from __future__ import annotations

from pathlib import Path

from cobaltlite.accounting import FAILURE_RECORD, AccountingLog
from cobaltlite.qsim.engine import ReplayObserver, SimJob
from cobaltlite.timefmt import format_hms


class AccountingObserver(ReplayObserver):
    def __init__(self, path: Path) -> None:
        self._log = AccountingLog(path)

    def _common(self, job: SimJob) -> dict[str, object]:
        return {
            "queue": job.queue,
            "user": job.user_name,
            "account": job.project,
            "qtime": int(job.submit_time),
            "Resource_List.nodect": job.size,
            "Resource_List.walltime": format_hms(job.wall_time),
        }

    def submitted(self, job: SimJob, now: float) -> None:
        self._log.write(now, "Q", job.jobid, self._common(job))

    def started(self, job: SimJob, now: float) -> None:
        fields = self._common(job)
        fields.update(start=int(now), exec_host=job.location)
        self._log.write(now, "S", job.jobid, fields)

    def ended(self, job: SimJob, now: float, killed: bool) -> None:
        fields = self._common(job)
        fields.update(
            start=int(job.start_time),
            end=int(now),
            exec_host=job.location,
            runtime=int(now - job.start_time),
            Exit_status=-1 if killed else 0,
        )
        if killed:
            # Cobalt writes an A (abort) record when the wall-time limit kills a job.
            self._log.write(now, "A", job.jobid, {"reason": "time_limit"})
        self._log.write(now, "E", job.jobid, fields)

    def failed(self, component: str, now: float, repaired_at: float, jobids: list[int]) -> None:
        fields: dict[str, object] = {"repaired": int(repaired_at)}
        if jobids:
            fields["killed"] = jobids
        self._log.write(now, FAILURE_RECORD, component, fields)

    def killed_by_failure(self, job: SimJob, now: float, component: str) -> None:
        self._log.write(now, "A", job.jobid, {
            "reason": "failure", "component": component,
            "lost_runtime": int(now - job.start_time), "lost_exec_host": job.location,
        })
        self._log.write(now, "R", job.jobid, self._common(job))

    def close(self) -> None:
        self._log.close()
