"""Seed 000 eqs. 1-3, the balanced priority S_p = BF·S_w + (1-BF)·S_r, as the scheduler sees it.

The scores are computed through the real scoring path (`UtilityFunction.score_jobs` with the
queue-wide maxima and minima of one pass), and the order is checked through a real replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import PassInputs, PolicyError, builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob


@dataclass
class Queued:
    jobid: int
    queued_time: float
    wall_time: float
    size: int = 1
    user_name: str = "u"
    project: str = "p"
    queue: str = "default"
    queue_priority: int = 0
    score: float = 0.0
    threshold: float = 0.0


def scores(jobs: list[Queued], bf: float) -> dict[int, float]:
    policy = builtin_policy("balanced", {"balance_factor": bf})
    policy.score_jobs(jobs, PassInputs(now=0.0, machine_size=64, n_s=1))
    return {j.jobid: j.score for j in jobs}


def test_three_jobs_worked_by_hand():
    # wait_max = 100, wt_max = 7200, wt_min = 1800 (spread 5400).
    # job 1: S_w = 100, S_r = 0            -> BF .5: 50
    # job 2: S_w = 50,  S_r = 100          -> BF .5: 75
    # job 3: S_w = 0,   S_r = 100·3600/5400 = 66.67 -> BF .5: 33.33
    jobs = [Queued(1, 100, 7200), Queued(2, 50, 1800), Queued(3, 0, 3600)]
    got = scores(jobs, 0.5)
    assert got[1] == pytest.approx(50.0)
    assert got[2] == pytest.approx(75.0)
    assert got[3] == pytest.approx(100 / 3)
    # BF = 1 is the wait score alone, BF = 0 the run-time score alone.
    assert scores(jobs, 1.0) == pytest.approx({1: 100.0, 2: 50.0, 3: 0.0})
    assert scores(jobs, 0.0) == pytest.approx({1: 0.0, 2: 100.0, 3: 200 / 3})


def test_one_job_has_full_wait_score_and_no_run_time_score():
    # wait_max = its own wait and wt_max = wt_min: S_w = 100, S_r = 0 by eq. 2's guard.
    assert scores([Queued(1, 30, 600)], 0.5) == {1: 50.0}
    assert scores([Queued(1, 30, 600)], 0.0) == {1: 0.0}
    # A new job in an empty queue (wait_max = 0) scores 0 whatever BF is.
    assert scores([Queued(1, 0, 600)], 0.5) == {1: 0.0}


def test_equal_wall_times_leave_only_the_wait_score():
    jobs = [Queued(1, 40, 600), Queued(2, 20, 600)]
    assert scores(jobs, 0.25) == pytest.approx({1: 25.0, 2: 12.5})


def test_zero_waits_leave_only_the_run_time_score():
    # A burst submitted at one instant: wait_max = 0, so S_w = 0 (no division by zero).
    jobs = [Queued(1, 0, 600), Queued(2, 0, 1200)]
    assert scores(jobs, 0.75) == pytest.approx({1: 25.0, 2: 0.0})


def test_a_balance_factor_is_a_tunable_and_nothing_else_is():
    with pytest.raises(PolicyError, match="no tunable parameter bogus"):
        builtin_policy("balanced", {"bogus": 1.0})


@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.floats(1, 1e5)), min_size=1, max_size=12),
    st.floats(0, 1),
)
def test_scores_stay_in_0_100_and_mix_linearly(pairs, bf):
    jobs = [Queued(i, q, t) for i, (q, t) in enumerate(pairs, start=1)]
    mixed = scores(jobs, bf)
    waits = scores([Queued(j.jobid, j.queued_time, j.wall_time) for j in jobs], 1.0)
    runs = scores([Queued(j.jobid, j.queued_time, j.wall_time) for j in jobs], 0.0)
    for jobid, value in mixed.items():
        assert -1e-9 <= value <= 100 + 1e-9
        assert value == pytest.approx(bf * waits[jobid] + (1 - bf) * runs[jobid], abs=1e-6)


def test_bf_zero_runs_the_shortest_waiting_job_first_and_bf_one_the_oldest():
    # flat:2. J1 holds both nodes until t=100. J2 (long, 1000 s) and J3 (short, 10 s) wait.
    # At t=100 BF = 1 starts the older J2 first; BF = 0 the shorter J3 first.
    jobs = [TraceJob(1, 0, 100, 100, 2), TraceJob(2, 1, 1000, 1000, 2), TraceJob(3, 2, 10, 10, 2)]
    for bf, first in ((1.0, 2), (0.0, 3)):
        machine = build_machine(FlatDescription("flat2", 2))
        policy = builtin_policy("balanced", {"balance_factor": bf})
        result = Qsim(jobs, machine, policy, Backfill.EASY).run()
        starts = {o.jobid: o.start_time for o in result.outcomes}
        assert starts[first] == 100, (bf, starts)
