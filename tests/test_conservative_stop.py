"""The conservative pass's stop (issue 16) changes no schedule: over random workloads on Blue
Gene/P and flat machines (early and exact ends, ties, jobs too large, failures and repairs, queue
place sets, reservation periods, a running limit that refuses starts, fixed and scored orders,
allocation windows of 1 and 2, conservative and slack backfilling), every pass starts the same
jobs on the same places and drains the same top job at the same place and time as a pass that
asks the planner about every waiting job and reserves every one
(`Scheduler.conservative_stop = False`), and the replays end alike.

The stop, in a pass whose plan is not kept (Blue Gene/P; a flat machine with place sets,
reservation periods or a window): a job whose size and place set the planner refused, in the
same pass, for a run no longer than its own is not asked about, and once no later job can start
now the pass reserves no more.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st
from test_easy_shortcuts import queue_config
from test_kept_plan import run_recording
from test_reservations import reserved
from test_scheduler_properties import BGP, FLAT8, SETTINGS, workloads

from cobaltlite.faults.sources import FailureEvent
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill


def replay(jobs, kind, policy, failures, places, limit, reservations, window, backfill, stop):
    utility = builtin_policy(policy)
    qsim = Qsim([dataclasses.replace(j) for j in jobs], kind.build(), utility,
                backfill, failures=failures, repair_time=7.0,
                queue_config=None if limit is None else queue_config(limit),
                policies={utility.name: utility}, reservations=reservations, window=window)
    qsim.queue_places = places
    qsim.scheduler.conservative_stop = stop
    return run_recording(qsim)


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([BGP, BGP, BGP, FLAT8]))
def test_the_conservative_stop_passes_exactly_as_reserving_every_job(data, kind):
    jobs = data.draw(workloads(kind, exact=data.draw(st.booleans()), max_jobs=40, span=20))
    policy = data.draw(st.sampled_from(["fcfs", "wfp3", "wfp3"]))
    rare = st.sampled_from([True, False, False])
    machine = kind.build()
    units = machine.failure_units()
    failures = sorted(data.draw(st.lists(
        st.builds(FailureEvent, st.integers(0, 60), st.sampled_from(units)), max_size=2)),
        key=lambda f: (f.time, f.component)) if data.draw(rare) else []
    # Place sets name nodes on a flat machine and blocks on Blue Gene/P; some jobs go to a
    # second queue, mapped elsewhere or nowhere. A flat machine without place sets, periods
    # or a window keeps its plan, which the stop leaves alone: give it a place set mostly.
    names = units if kind.is_flat else sorted(machine.names)
    for job in jobs:
        if data.draw(st.booleans()):
            job.queue = "other"
    places = {}
    if kind.is_flat or data.draw(rare):
        places = {"default": frozenset(names[: len(names) // 2 + 1])}
        if data.draw(st.booleans()):
            places["other"] = frozenset(names[len(names) // 3:])
    limit = 2 if data.draw(rare) else None
    reservations = data.draw(reserved(kind)) if data.draw(rare) else None
    window = 2 if data.draw(rare) else 1
    # Slack backfilling ends its pass with conservative planning, in two parts at times.
    backfill = Backfill.SLACK if data.draw(rare) else Backfill.CONSERVATIVE
    got = replay(jobs, kind, policy, failures, places, limit, reservations, window, backfill,
                 True)
    want = replay(jobs, kind, policy, failures, places, limit, reservations, window, backfill,
                  False)
    for g, w in zip(got[0], want[0], strict=True):
        assert g == w, f"pass at {w[0]}: with the stop {g}, reserving every job {w}"
    assert repr(got[1].outcomes) == repr(want[1].outcomes)
    assert got[1].skipped == want[1].skipped
