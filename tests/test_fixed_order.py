"""Fixed-order policies (issue 13): Qsim keeps the queue in rank order for fcfs, default and
high_prio instead of rescoring it at every pass. A user must not be able to tell: over random
workloads, with failures that kill and requeue jobs, dependencies, every backfilling scheme and
allocation windows, the replay gives exactly the outcomes of the same policy scored at every pass
(the same function without its `rank_key`).
"""

from __future__ import annotations

import dataclasses

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

from cobaltlite.faults.sources import FailureEvent
from cobaltlite.policy.utility import FIXED_ORDERS, builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill


def run(jobs, kind, scheme, policy, window, failures):
    qsim = Qsim(jobs, kind.build(), policy, Backfill(scheme), window=window,
                failures=failures, repair_time=7.0)
    return qsim.run()


@SETTINGS
@given(data=st.data())
def test_a_fixed_order_replays_exactly_as_scoring_every_pass(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, BGP]))
    scheme = data.draw(st.sampled_from(SCHEMES))
    name = data.draw(st.sampled_from(sorted(FIXED_ORDERS)))
    window = data.draw(st.sampled_from([1, 1, 2]))
    jobs = data.draw(workloads(kind, max_jobs=14))
    failures = with_dependencies_and_failures(data, kind, jobs)
    fixed = builtin_policy(name)
    assert fixed.rank_key is not None
    scored = dataclasses.replace(fixed, rank_key=None)
    got = run(jobs, kind, scheme, fixed, window, failures)
    want = run([dataclasses.replace(j) for j in jobs], kind, scheme, scored, window, failures)
    assert repr(got.outcomes) == repr(want.outcomes), f"{name} {scheme} W={window}"
    assert got.passes == want.passes
    assert got.skipped == want.skipped


def test_only_policies_whose_order_cannot_change_declare_one():
    assert sorted(FIXED_ORDERS) == ["default", "fcfs", "high_prio"]
    for name in ("wfp3", "fat", "unicef", "balanced", "wfp1", "fcsj"):
        assert builtin_policy(name).rank_key is None, name


class CheckedRankQsim(Qsim):
    """Qsim checking, at every pass, that the rank order it keeps up by insertions and
    removals (arrivals appended, the ends of the list removed by identity) is the queue sorted
    afresh."""

    def ranked_jobs(self):
        ranked = super().ranked_jobs()
        if ranked is not None:
            assert ranked == sorted(self._queue.values(), key=self.policy.rank_key)
        return ranked


@SETTINGS
@given(data=st.data())
def test_the_kept_rank_order_is_the_queue_sorted_at_every_pass(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8]))
    jobs = data.draw(workloads(kind, max_jobs=14))
    units = kind.build().failure_units()
    failures = sorted(data.draw(st.lists(
        st.builds(FailureEvent, st.integers(0, 60), st.sampled_from(units)), max_size=3)),
        key=lambda f: (f.time, f.component))
    policy = builtin_policy(data.draw(st.sampled_from(sorted(FIXED_ORDERS))))
    CheckedRankQsim(jobs, kind.build(), policy, Backfill(data.draw(st.sampled_from(SCHEMES))),
                    failures=failures, repair_time=7.0).run()
