"""Qsim leaves out a pass when every queued job is larger than the idle nodes (issue 13): such a
pass starts nothing, and under every scheme but slack it leaves nothing a later pass reads. A
user must not be able to tell: over random workloads, on flat machines and Blue Gene/P, with
scored and fixed-order policies, allocation windows, dependencies and failures that requeue
jobs, the replay gives exactly the outcomes, capacity samples and pass count of the replay that
runs every pass (`skip_futile_passes = False`).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_scheduler_properties import BGP, FLAT4, FLAT8, SCHEMES, SETTINGS, workloads

from cobaltlite.faults.sources import FailureEvent
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
    ids = [j.jobid for j in jobs]
    for job in jobs:  # some jobs wait for others (a missing parent leaves them held)
        job.dependencies = tuple(data.draw(st.lists(st.sampled_from([*ids, 999]), max_size=1)))
    units = kind.build().failure_units()
    failures = sorted(data.draw(st.lists(
        st.builds(FailureEvent, st.integers(0, 60), st.sampled_from(units)), max_size=3)),
        key=lambda f: (f.time, f.component))
    got = replay(jobs, kind, scheme, policy, window, failures, skip=True)
    want = replay(jobs, kind, scheme, policy, window, failures, skip=False)
    assert repr(got.outcomes) == repr(want.outcomes), f"{policy} {scheme} W={window}"
    assert got.passes == want.passes
    assert got.samples == want.samples
    assert got.skipped == want.skipped


def test_a_pass_with_every_queued_job_too_large_is_not_run():
    # Job 1 holds 3 of 4 nodes from 0 to 100; jobs 2 (2 nodes) and 3 (4 nodes) arrive while
    # one node is idle: neither event time's pass could start anything.
    jobs = [TraceJob(jobid=i, submit_time=t, run_time=100, requested_time=100, nodes=n)
            for i, t, n in ((1, 0, 3), (2, 10, 2), (3, 20, 4))]
    qsim = Qsim(jobs, build_machine(load_description("flat:4")), builtin_policy("fcfs"))
    ran = []
    iterate = qsim._run_pass

    def counted():
        ran.append(qsim.clock.now())
        return iterate()
    qsim._run_pass = counted
    result = qsim.run()
    assert ran == [0.0, 100.0, 200.0]
    assert result.passes == 5  # the two left out count: each was answered without the scheduler
    assert [(o.jobid, o.start_time) for o in result.outcomes] == [(1, 0.0), (2, 100.0),
                                                                   (3, 200.0)]
