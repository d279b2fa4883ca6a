"""Qsim under failures (seed 003 §V, §VI-A3): kills, repairs, resubmission, records, JFR/SULR."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobaltlite.accounting import read_accounting_log
from cobaltlite.faults.predictor import WindowPredictor
from cobaltlite.faults.sources import FailureEvent
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import Machine
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim, ReplayObserver, SimJob
from cobaltlite.qsim.joblog import AccountingObserver
from cobaltlite.qsim.metrics import compute_metrics
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.traces.model import TraceJob

FCFS = builtin_policy("fcfs")


def job(jobid: int, nodes: int, run: int, submit: int = 0, wall: int | None = None) -> TraceJob:
    return TraceJob(jobid=jobid, submit_time=submit, run_time=run,
                    requested_time=wall if wall is not None else run, nodes=nodes)


def two_racks() -> Machine:
    return build_machine(load_description("bgp-2rack"))


def by_id(outcomes: list[JobOutcome]) -> dict[int, JobOutcome]:
    return {o.jobid: o for o in outcomes}


def test_a_failure_kills_exactly_the_jobs_over_it_and_its_repair_time_is_honoured() -> None:
    # Four 512-node jobs fill the four midplanes of the 2-rack machine. R00-M0 fails at t=100
    # for 300 s: only the job on it is killed, and with every other midplane busy it can only
    # start again when R00-M0 is back, at t=400, and then runs its whole 1000 s again.
    jobs = [job(i, 512, 1000) for i in range(1, 5)]
    qsim = Qsim(jobs, two_racks(), FCFS, failures=[FailureEvent(100.0, "R00-M0")],
                repair_time=300.0)
    result = qsim.run()
    out = by_id(result.outcomes)
    assert result.failure_events == 1
    victim = next(o for o in out.values() if o.failed_runs)
    assert victim.location == "ANL-R00-M0-512"
    assert (victim.start_time, victim.end_time) == (400.0, 1400.0)
    assert victim.lost_node_seconds == 512 * 100
    others = [o for o in out.values() if o is not victim]
    assert [(o.start_time, o.end_time, o.failed_runs) for o in others] == [(0.0, 1000.0, 0)] * 3


def test_a_killed_job_restarts_at_once_where_a_place_is_free() -> None:
    jobs = [job(1, 512, 1000), job(2, 512, 1000)]
    qsim = Qsim(jobs, two_racks(), FCFS, failures=[FailureEvent(250.0, "R00-M0")])
    out = by_id(qsim.run().outcomes)
    assert out[1].location != "ANL-R00-M0-512"
    assert (out[1].start_time, out[1].end_time, out[1].failed_runs) == (250.0, 1250.0, 1)


def test_a_resubmitted_job_keeps_its_first_submission_time_in_the_metrics() -> None:
    jobs = [job(1, 512, 1000, submit=50), job(2, 2048, 100, submit=60)]
    qsim = Qsim(jobs, two_racks(), FCFS, failures=[FailureEvent(300.0, "R00-M0")],
                repair_time=1200.0)
    result = qsim.run()
    out = by_id(result.outcomes)
    assert out[1].submit_time == 50
    assert out[1].response == out[1].end_time - 50
    metrics = compute_metrics(result.outcomes, result.samples, result.machine_nodes,
                              failure_events=result.failure_events)
    failures = metrics["failures"]
    assert failures["events"] == 1 and failures["jobs_hit"] == 1 and failures["failed_runs"] == 1
    assert failures["jfr"] == 0.5
    lost = 512 * 250
    delivered = 512 * 1000 + 2048 * 100
    assert failures["lost_node_seconds"] == lost
    assert failures["sulr"] == round(lost / (lost + delivered), 6)
    # Ranked first by its first submission (FCFS), it restarts at once on another midplane and
    # the whole-machine job waits for R00-M0's repair (t = 1500).
    assert (out[1].start_time, out[2].start_time) == (300.0, 1500.0)
    span = 1600.0 - 50
    assert failures["sulr_capacity"] == round(lost / (2048 * span), 6)
    assert metrics["response"]["max"] == max(o.end_time - o.submit_time for o in out.values())


def test_a_failure_on_an_idle_component_kills_nothing_but_keeps_it_out_of_service() -> None:
    # R00-M0 fails at t=0 for 1200 s: the 2048-node job needs the whole machine and waits.
    jobs = [job(1, 2048, 100, submit=10)]
    result = Qsim(jobs, two_racks(), FCFS, failures=[FailureEvent(0.0, "R00-M0")]).run()
    [only] = result.outcomes
    assert (only.start_time, only.failed_runs) == (1200.0, 0)
    assert result.failure_events == 1


def test_without_a_failure_source_nothing_changes_and_no_failure_metrics_appear() -> None:
    jobs = [job(i, 512 * (i % 3 + 1), 100 + 37 * i, submit=13 * i) for i in range(1, 30)]
    plain = Qsim(jobs, two_racks(), FCFS).run()
    empty = Qsim(jobs, two_racks(), FCFS, failures=[]).run()
    assert plain.outcomes == empty.outcomes
    assert plain.failure_events is None and empty.failure_events == 0
    assert "failures" not in compute_metrics(plain.outcomes, plain.samples, 2048)


def test_failures_and_kills_are_in_the_accounting_log_and_it_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "accounting.log"
    observer = AccountingObserver(path)
    jobs = [job(1, 512, 1000, submit=1_231_000_000), job(2, 512, 500, submit=1_231_000_000)]
    failure = FailureEvent(1_231_000_100.0, "R00-M0")
    result = Qsim(jobs, two_racks(), FCFS, observer=observer, failures=[failure]).run()
    observer.close()
    text = path.read_text()
    [fail_line] = [line for line in text.splitlines() if ";FAIL;" in line]
    assert fail_line.split(";")[2] == "R00-M0"
    assert "killed=1" in fail_line and "repaired=1231001300" in fail_line
    assert ";A;1;" in text and "reason=failure" in text and "lost_runtime=100" in text
    assert ";R;1;" in text
    back = {j.jobid: j for j in read_accounting_log(path).jobs}
    assert back[1].submit_time == 1_231_000_000  # the first submission, not the restart
    assert back[1].run_time == 1000
    assert by_id(result.outcomes)[1].failed_runs == 1


# ---- invariants over random workloads and failures (hypothesis) ------------------------------


class NoRunOnFailed(ReplayObserver):
    """Checks, at each start, that the job's place includes no failed component."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.starts = 0

    def started(self, job: SimJob, now: float) -> None:
        self.starts += 1
        flat = isinstance(self.machine, FlatMachine)
        for component in self.machine.failed_components():
            if component in _nodes(job.location) if flat else (
                    job.location in self.machine.places_over(component)):
                raise AssertionError(f"job {job.jobid} started on {job.location} at {now} "
                                     f"while {component} was failed")


def _nodes(ranges: str) -> set[str]:
    nodes: set[str] = set()
    for part in ranges.split(","):
        lo, _, hi = part.partition("-")
        nodes.update(str(n) for n in range(int(lo), int(hi or lo) + 1))
    return nodes


MACHINES = {
    "bgp-2rack": lambda: build_machine(load_description("bgp-2rack")),
    "flat:16": lambda: build_machine(FlatDescription("flat16", 16)),
}


@st.composite
def workloads(draw: st.DrawFn) -> tuple[str, list[TraceJob], list[FailureEvent], float]:
    kind = draw(st.sampled_from(sorted(MACHINES)))
    sizes = [512, 1024, 2048] if kind == "bgp-2rack" else list(range(1, 17))
    n = draw(st.integers(1, 25))
    jobs = [
        job(i, draw(st.sampled_from(sizes)), draw(st.integers(0, 3000)),
            submit=draw(st.integers(0, 4000)), wall=draw(st.integers(1, 3500)))
        for i in range(1, n + 1)
    ]
    machine = MACHINES[kind]()
    units = machine.failure_units()
    failures = sorted(
        FailureEvent(float(draw(st.integers(0, 8000))), draw(st.sampled_from(units)))
        for _ in range(draw(st.integers(0, 15)))
    )
    return kind, jobs, failures, float(draw(st.sampled_from([0, 60, 1200])))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=workloads(), fault_aware=st.booleans())
def test_no_job_runs_on_a_failed_component_and_every_job_ends_once_failures_stop(
    case: tuple[str, list[TraceJob], list[FailureEvent], float], fault_aware: bool
) -> None:
    kind, jobs, failures, repair = case
    machine = MACHINES[kind]()
    if fault_aware:
        machine.failures = WindowPredictor(failures, machine)
    observer = NoRunOnFailed(machine)
    result = Qsim(jobs, machine, FCFS, observer=observer, failures=failures,
                  repair_time=repair).run()
    # The failure list is finite: after its last failure every job ends successfully, once.
    assert sorted(o.jobid for o in result.outcomes) == sorted(j.jobid for j in jobs)
    for outcome, trace_job in zip(sorted(result.outcomes, key=lambda o: o.jobid),
                                  sorted(jobs, key=lambda j: j.jobid), strict=True):
        assert outcome.submit_time == trace_job.submit_time
        assert outcome.run_time == min(trace_job.run_time, trace_job.requested_time)
    assert observer.starts == len(jobs) + sum(o.failed_runs for o in result.outcomes)
    assert machine.held_by() == {}
    # Failures after the last job's end strike nothing and are not part of the replay.
    last_end = max(o.end_time for o in result.outcomes)
    assert result.failure_events == sum(1 for f in failures if f.time <= last_end)


@pytest.mark.parametrize("kind", sorted(MACHINES))
def test_the_machine_is_whole_again_after_the_last_repair(kind: str) -> None:
    machine = MACHINES[kind]()
    unit = machine.failure_units()[0]
    jobs = [job(1, 512 if kind == "bgp-2rack" else 4, 100, submit=5000)]
    Qsim(jobs, machine, FCFS, failures=[FailureEvent(10.0, unit), FailureEvent(20.0, unit)],
         repair_time=100.0).run()
    assert machine.failed_components() == []
