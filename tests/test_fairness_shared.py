"""Shared forks (docs/metric-aware.md, D000-5, "Shared forks"): one forked replay serves
consecutive jobs under FCFS, W = 1, EASY or no backfilling on a flat machine; every fair start
time must be the one a fork of its own gives (`share_forks=False`), which
tests/test_fairness_reference.py checks in turn against the plain definition."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_golden_schedules import flat, job
from test_scheduler_properties import BGP, FLAT4, FLAT8, workloads

from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.fairness import Settings, fair_start_times
from cobaltlite.scheduler.scheduler import Backfill

FCFS = builtin_policy("fcfs")


def every_job_forked(_t: float) -> Settings:
    """A new Settings at every call: equal ones, so forks are shared, but never the same object,
    so the started-before-the-next-arrival shortcut is off and every job goes through a fork."""
    return Settings(FCFS, 1)


def both_ways(outcomes, machine, backfill):
    shared = fair_start_times(outcomes, machine(), backfill, every_job_forked, "replay")
    alone = fair_start_times(outcomes, machine(), backfill, every_job_forked, "replay",
                             share_forks=False)
    return shared, alone


def test_a_job_that_passes_an_earlier_one_is_started_in_the_forks_after_it():
    # flat:4, FCFS, EASY.
    #   t=0 J1 (3 nodes, 10 s) starts.  t=1 J2 (4 nodes, 10 s) waits, reserved at 10.
    #   t=2 J3 (1 node, 5 s) backfills on the idle node (ends 7 < 10): FST 2, while J2, served
    #       by the same fork, has not started. J2's fork must not hold J3; J4's must hold it.
    #   t=3 J4 (1 node, 4 s): no idle node until J3 ends at 7; then 7 + 4 > 10, so it waits for
    #       J2 [10, 20) and starts at 20. Without J3 it would have backfilled at 3.
    trace = [job(1, 0, 10, 3), job(2, 1, 10, 4), job(3, 2, 5, 1), job(4, 3, 4, 1)]
    outcomes = Qsim(trace, flat(4), FCFS, Backfill.EASY).run().outcomes
    shared, alone = both_ways(outcomes, lambda: flat(4), Backfill.EASY)
    assert shared == alone == {1: 0, 2: 10, 3: 2, 4: 20}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([FLAT4, FLAT8]), st.sampled_from(["easy", "none"]),
       st.lists(st.integers(0, 30), max_size=3))
def test_shared_forks_give_every_job_its_own_forks_result(data, kind, backfill, switches):
    # Up to 25 jobs in 30 s on 4 or 8 nodes: queues form, later jobs backfill past earlier
    # ones, and a run time above the requested time ends the job at its limit. W is 1, or 2
    # after an odd number of `switches` (as a tuner would set it): a job submitted under other
    # settings than a shared fork's must not join it, and W = 2 forks are never shared.
    jobs = data.draw(workloads(kind, max_jobs=25, span=30, oversize=False))
    outcomes = Qsim(jobs, kind.build(), FCFS, Backfill(backfill)).run().outcomes

    def settings_at(t: float) -> Settings:
        return Settings(FCFS, 1 + sum(1 for s in switches if s <= t) % 2)

    shared = fair_start_times(outcomes, kind.build(), Backfill(backfill), settings_at, "replay")
    alone = fair_start_times(outcomes, kind.build(), Backfill(backfill), settings_at, "replay",
                             share_forks=False)
    assert shared == alone


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_blue_gene_forks_are_not_shared_and_agree(data):
    # Sharing needs a flat machine (a pass with nothing new can move a Blue Gene/P drain to
    # another block); on the BG/P table every job keeps a fork of its own.
    jobs = data.draw(workloads(BGP, max_jobs=12, oversize=False))
    outcomes = Qsim(jobs, BGP.build(), FCFS, Backfill.EASY).run().outcomes
    shared, alone = both_ways(outcomes, BGP.build, Backfill.EASY)
    assert shared == alone
