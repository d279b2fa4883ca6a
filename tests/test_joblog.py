"""Qsim's job log writes its Q, S and E records from parts formatted once per job: the lines
must be byte for byte what the general writer (format_record over records.py's fields, as the
live queue manager writes them) gives, whatever the names, times, dependencies and ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobaltlite.accounting import AccountingLog, read_accounting_log
from cobaltlite.jobs.records import JobFacts, end_fields, queued_fields, start_fields
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim, ReplayObserver, SimJob
from cobaltlite.qsim.joblog import AccountingObserver, PureAccountingObserver
from cobaltlite.traces.model import TraceJob


class GeneralWriter(ReplayObserver):
    """Each record through records.py and format_record: the reference."""

    def __init__(self, path: Path) -> None:
        self.log = AccountingLog(path)

    @staticmethod
    def facts(job: SimJob) -> JobFacts:
        return JobFacts(jobid=job.jobid, user=job.user_name, queue=job.queue,
                        project=job.project, nodes=job.size, walltime=job.wall_time,
                        submittime=job.submit_time, dependencies=list(job.dependencies),
                        starttime=job.start_time if job.start_time >= 0 else None,
                        location=job.location)

    def submitted(self, job: SimJob, now: float) -> None:
        self.log.write(now, "Q", job.jobid, queued_fields(self.facts(job)))

    def started(self, job: SimJob, now: float) -> None:
        self.log.write(now, "S", job.jobid, start_fields(self.facts(job), now))

    def ended(self, job: SimJob, now: float, killed: bool) -> None:
        if killed:
            self.log.write(now, "A", job.jobid, {"reason": "time_limit"})
        self.log.write(now, "E", job.jobid, end_fields(self.facts(job), now, job.exit_status))

    def close(self) -> None:
        self.log.close()


NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
# Whole and fractional seconds (a trace read from an accounting log may have either).
TIMES: st.SearchStrategy[Any] = st.one_of(
    st.integers(0, 10**6), st.floats(0, 10**6, allow_nan=False).map(lambda t: round(t, 3)))


@st.composite
def workloads(draw: st.DrawFn) -> list[TraceJob]:
    count = draw(st.integers(1, 12))
    jobs = []
    for jobid in range(1, count + 1):
        run: Any = draw(st.one_of(st.integers(1, 5000),
                                  st.floats(0.5, 5000).map(lambda t: round(t, 2))))
        jobs.append(TraceJob(
            jobid=jobid, submit_time=draw(TIMES), run_time=run,
            requested_time=draw(st.sampled_from([run, run * 2, max(1, int(run) // 2)])),
            nodes=draw(st.integers(1, 8)), user=draw(NAMES), project=draw(NAMES),
            queue=draw(NAMES),
            dependencies=tuple(draw(st.lists(st.integers(1, jobid), max_size=2, unique=True))
                               [: jobid - 1]),
            extra={"Exit_status": str(draw(st.integers(-1, 3)))}))
    return jobs


def replay_log(jobs: list[TraceJob], observer: PureAccountingObserver | GeneralWriter) -> None:
    try:
        Qsim(jobs, build_machine(load_description("flat:8")), builtin_policy("fcfs"),
             observer=observer).run()
    finally:
        observer.close()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=workloads())
def test_job_log_is_what_the_general_writer_writes(tmp_path: Path, jobs: list[TraceJob]) -> None:
    fast, general = tmp_path / "fast.log", tmp_path / "general.log"
    replay_log(jobs, AccountingObserver(fast))
    replay_log([TraceJob(**{k: getattr(j, k) for k in TraceJob.__slots__}) for j in jobs],
               GeneralWriter(general))
    assert fast.read_text(encoding="utf-8") == general.read_text(encoding="utf-8")


def test_a_long_log_reads_back_as_its_trace(tmp_path: Path) -> None:
    """More records than one written block: every job is in the log, in order, readable."""
    jobs = [TraceJob(jobid=i, submit_time=10 * i, run_time=50, requested_time=60, nodes=1 + i % 4,
                     user="a b", project="p,q", queue="default") for i in range(1, 1501)]
    path = tmp_path / "accounting.log"
    observer = AccountingObserver(path)
    replay_log(jobs, observer)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 * len(jobs)
    back = read_accounting_log(path).jobs
    assert [(j.jobid, j.submit_time, j.run_time, j.nodes, j.user, j.project) for j in back] == \
        [(j.jobid, j.submit_time, j.run_time, j.nodes, j.user, j.project) for j in jobs]
