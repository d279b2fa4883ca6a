"""Qsim leaves out a pass when every queued job is larger than the idle nodes, and without
backfilling under a fixed order when the first job is (issue 13): such a pass starts nothing, and
under every scheme but slack it leaves nothing a later pass reads. A user must not be able to
tell: over random workloads, on flat machines and Blue Gene/P, with
scored and fixed-order policies, allocation windows, dependencies and failures that requeue
jobs, the replay gives exactly the outcomes, capacity samples and pass count of the replay that
runs every pass (`skip_futile_passes = False`).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_scheduler_properties import (
    BGP,
    FLAT4,
    FLAT8,
    SCHEMES,
    SETTINGS,
    with_dependencies_and_failures,
    workloads,
)

from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob


def replay(jobs, kind, scheme, policy, window, failures, skip):
    qsim = Qsim(jobs, kind.build(), builtin_policy(policy), Backfill(scheme), window=window,
                failures=failures, repair_time=7.0)
    qsim.skip_futile_passes = skip
    return qsim.run()


@SETTINGS
@given(data=st.data())
def test_leaving_out_futile_passes_changes_no_replay(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, BGP]))
    scheme = data.draw(st.sampled_from(SCHEMES))
    policy = data.draw(st.sampled_from(["fcfs", "wfp3", "unicef"]))
    window = data.draw(st.sampled_from([1, 1, 2]))
    jobs = data.draw(workloads(kind, max_jobs=14))
    failures = with_dependencies_and_failures(data, kind, jobs)
    got = replay(jobs, kind, scheme, policy, window, failures, skip=True)
    want = replay(jobs, kind, scheme, policy, window, failures, skip=False)
    assert repr(got.outcomes) == repr(want.outcomes), f"{policy} {scheme} W={window}"
    assert got.passes == want.passes
    assert got.samples == want.samples
    assert got.skipped == want.skipped


def passes_run(jobs, backfill=Backfill.EASY, window=1):
    """(the event times the scheduler was called at, the replay's result) on flat:4, fcfs."""
    qsim = Qsim(jobs, build_machine(load_description("flat:4")), builtin_policy("fcfs"),
                backfill, window=window)
    ran = []
    iterate = qsim._run_pass

    def counted():
        ran.append(qsim.clock.now())
        return iterate()
    qsim._run_pass = counted
    return ran, qsim.run()


def trace(*jobs):
    return [TraceJob(jobid=i, submit_time=t, run_time=r, requested_time=r, nodes=n)
            for i, (t, r, n) in enumerate(jobs, 1)]


def test_a_pass_with_every_queued_job_too_large_is_not_run():
    # Job 1 holds 3 of 4 nodes from 0 to 100; jobs 2 (2 nodes) and 3 (4 nodes) arrive while
    # one node is idle: neither event time's pass could start anything.
    ran, result = passes_run(trace((0, 100, 3), (10, 100, 2), (20, 100, 4)))
    assert ran == [0.0, 100.0, 200.0]
    assert result.passes == 5  # the two left out count: each was answered without the scheduler
    assert [(o.jobid, o.start_time) for o in result.outcomes] == [(1, 0.0), (2, 100.0),
                                                                   (3, 200.0)]


def test_without_backfilling_a_pass_behind_a_first_job_too_large_is_not_run():
    # Job 3 (1 node) would fit the idle node at 20, but without backfilling it waits for job 2
    # (4 nodes): the pass at 20 could start nothing. With an allocation window of 2 it could:
    # the window step starts job 3 behind job 2, so that pass runs.
    jobs = trace((0, 100, 3), (10, 100, 4), (20, 10, 1))
    ran, result = passes_run(jobs, Backfill.NONE)
    assert ran == [0.0, 100.0, 200.0]
    assert result.passes == 5
    assert [(o.jobid, o.start_time) for o in result.outcomes] == [(1, 0), (2, 100), (3, 200)]
    ran, result = passes_run(jobs, Backfill.NONE, window=2)
    assert ran == [0.0, 20.0, 100.0]  # at 10 job 2 alone waits: larger than the idle node
    assert [(o.jobid, o.start_time) for o in result.outcomes] == [(3, 20), (1, 0), (2, 100)]
