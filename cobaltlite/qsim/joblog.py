"""Qsim's job log: Q, S and E records in Cobalt's accounting format, readable back as a trace."""

from __future__ import annotations

from pathlib import Path

from cobaltlite.accounting import AccountingLog
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

    def close(self) -> None:
        self._log.close()
