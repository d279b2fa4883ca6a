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

from hypothesis import given
from hypothesis import strategies as st
from test_easy_shortcuts import replay, scenario
from test_scheduler_properties import BGP, FLAT8, SETTINGS

from cobaltlite.scheduler.scheduler import Backfill


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([BGP, BGP, BGP, FLAT8]))
def test_the_conservative_stop_passes_exactly_as_reserving_every_job(data, kind):
    # A flat machine without place sets, periods or a window keeps its plan, which the stop
    # leaves alone: give it place sets always.
    case = scenario(data, kind, ["fcfs", "wfp3", "wfp3"], st.sampled_from([True, False, False]),
                    always_places=kind.is_flat)
    # Slack backfilling ends its pass with conservative planning, in two parts at times.
    rare = st.sampled_from([True, False, False])
    backfill = Backfill.SLACK if data.draw(rare) else Backfill.CONSERVATIVE
    got = replay(case, kind, backfill, conservative_stop=True)
    want = replay(case, kind, backfill, conservative_stop=False)
    for g, w in zip(got[0], want[0], strict=True):
        assert g == w, f"pass at {w[0]}: with the stop {g}, reserving every job {w}"
    assert repr(got[1].outcomes) == repr(want[1].outcomes)
    assert got[1].skipped == want[1].skipped
