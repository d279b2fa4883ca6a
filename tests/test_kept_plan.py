"""Conservative backfilling resumes the last pass's plan (scheduler/plan.py, issue 13). A user
must not be able to tell: over random workloads on flat machines (early and exact ends, arrivals
with ties, jobs too large, failures and repairs, queue place sets, a running limit that refuses
starts, fixed and scored orders), every pass starts the same jobs on the same nodes and drains
the same top job at the same time as a pass that plans afresh, and the replays end alike.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scheduler_properties import FLAT4, FLAT8, FLAT13, SETTINGS, workloads

from cobaltlite.faults.sources import FailureEvent
from cobaltlite.jobs.queues import load_queue_config
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill


def queue_config(maxrunning: int) -> list[dict[str, object]]:
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "queues.yaml"
        path.write_text(f"queues:\n  default:\n    maxrunning: {maxrunning}\n")
        return load_queue_config(path)


def replay(jobs, kind, policy, failures, places, limit, keep, slack=None):
    """Every pass (`run_recording`) and the outcome, under conservative backfilling, or under
    slack backfilling with `slack` (a SlackBackfill) as the scheme."""
    qsim = Qsim([dataclasses.replace(j) for j in jobs], kind.build(), builtin_policy(policy),
                Backfill.CONSERVATIVE if slack is None else Backfill.SLACK,
                slack=None if slack is None else slack.settings, failures=failures,
                repair_time=7.0, queue_config=None if limit is None else queue_config(limit))
    qsim.queue_places = places
    qsim.scheduler.keep_plan = keep
    if slack is not None:
        qsim.scheduler.slack = slack
    return run_recording(qsim)


def run_recording(qsim: Qsim):
    """Run `qsim`; return each pass's (time, starts, drain, window reservations) and the
    result."""
    scheduler = qsim.scheduler
    passes = []

    def recording_pass():
        report = scheduler.iterate()
        passes.append((qsim.clock.now(), report.started, report.drain, report.reserved))
        return report

    qsim._run_pass = recording_pass
    return passes, qsim.run()


@SETTINGS
@given(data=st.data())
def test_a_kept_plan_passes_exactly_as_planning_afresh(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, FLAT13]))
    jobs = data.draw(workloads(kind, exact=data.draw(st.booleans()), max_jobs=16, span=30))
    assert_kept_passes_as_afresh(data, kind, jobs)


def assert_kept_passes_as_afresh(data, kind, jobs, slack=None):
    """Replay `jobs` with the plan kept and afresh, under a drawn policy, failures, place set
    and running limit (`slack`: a function making the slack scheme for one replay); every
    pass and the outcome must be the same."""
    policy = data.draw(st.sampled_from(["fcfs", "fcfs", "wfp3"]))
    units = kind.build().failure_units()
    failures = sorted(data.draw(st.lists(
        st.builds(FailureEvent, st.integers(0, 60), st.sampled_from(units)), max_size=2)),
        key=lambda f: (f.time, f.component))
    places = data.draw(st.sampled_from(
        [{}, {}, {}, {"default": frozenset(units[: kind.nodes // 2 + 1])}]))
    limit = data.draw(st.sampled_from([None, None, None, 2]))
    got, want = (replay(jobs, kind, policy, failures, places, limit, keep,
                        None if slack is None else slack()) for keep in (True, False))
    for g, w in zip(got[0], want[0], strict=True):
        assert g == w, f"pass at {w[0]}: kept plan {g}, afresh {w}"
    assert repr(got[1].outcomes) == repr(want[1].outcomes)
    assert got[1].skipped == want[1].skipped


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_planner_after_giving_back_reservations_finds_the_starts_of_one_never_given_them(data):
    """FlatPlanner.unreserve and advance (what a kept plan does to its planner between passes):
    with enough reservations given back to join segments (more than 64), a job's earliest
    start is the one a planner made with only the reservations kept finds."""
    from cobaltlite.machine.description import FlatDescription
    from cobaltlite.machine.runtime import build_machine

    machine = build_machine(FlatDescription("flat16", 16))
    for jobid, (size, end) in enumerate(data.draw(st.lists(
            st.tuples(st.integers(1, 4), st.integers(1, 50)), max_size=4)), start=1):
        where = machine.find_location(size, end)
        if where is not None:
            machine.allocate(where, jobid, float(end))
    drawn = data.draw(st.lists(st.tuples(st.integers(1, 16), st.integers(1, 40),
                                         st.integers(0, 7)), min_size=80, max_size=90))
    jobs = [(size, wall) for size, wall, _ in drawn]
    keep = [one_in_eight == 0 for _, _, one_in_eight in drawn]
    kept_plan = machine.planner(0.0)
    made = [kept_plan.reserve_earliest(size, float(wall))[0] for size, wall in jobs]
    for (size, wall), start, kept in zip(jobs, made, keep, strict=True):
        if not kept:
            kept_plan.unreserve(start, float(wall), size)
    later = float(data.draw(st.integers(0, 10)))
    if all(end > later for _, _, end in machine._held.values()):
        kept_plan.advance(later)
        afresh = machine.planner(later)
        for (size, wall), start, kept in zip(jobs, made, keep, strict=True):
            if kept and start + wall > later:  # as the plan holds it from `later` on
                afresh._take(max(start, later), start + wall, size)
        probe = data.draw(st.tuples(st.integers(1, 16), st.integers(1, 60)))
        assert kept_plan.reserve_earliest(probe[0], float(probe[1])) == \
            afresh.reserve_earliest(probe[0], float(probe[1]))
