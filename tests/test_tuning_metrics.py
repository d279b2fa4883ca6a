"""Seed 000 §4.2 metrics: fair start time and unfair jobs, queue depth, rolling utilization."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_golden_schedules import flat, job
from test_scheduler_properties import FLAT8, workloads

from cobaltlite.metrics_monitor.series import StepSeries, monitored_values
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim import metrics
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.fairness import Settings, fair_start_times, unfair_jobs
from cobaltlite.qsim.metrics import compute_metrics, time_series
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import Backfill

# flat:4, FCFS, EASY.
#   t=0 J1 (3 nodes, 10 s) starts.  t=1 J2 (2n, 10 s): 1 node idle -> reserved at 10.
#   t=2 J3 (4n, 10 s) waits. Its fair start (nothing arrives after it): J2 runs [10, 20),
#       J3 [20, 30) -> FST 20.
#   t=3 J4 (1n, 100 s): EASY protects only J2 (2 of 4 nodes over [10, 20)): J4 starts at once
#       on the idle node and holds it until 103, so J3 (all 4 nodes) starts at 103 > 20: unfair.
#   J4's own FST: the replay fork at t=3 does what the real run did (3). The planner estimate
#   puts J3's reservation [20, 30) in J4's way and says 30: J4 started early, not unfair.
TRACE = [job(1, 0, 10, 3), job(2, 1, 10, 2), job(3, 2, 10, 4), job(4, 3, 100, 1)]


def replayed():
    policy = builtin_policy("fcfs")
    result = Qsim(TRACE, flat(4), policy, Backfill.EASY).run()
    return result.outcomes, (lambda _t: Settings(policy, 1))


def test_hand_worked_trace():
    outcomes, at = replayed()
    assert {o.jobid: o.start_time for o in outcomes} == {1: 0, 2: 10, 3: 103, 4: 3}
    fair = fair_start_times(outcomes, flat(4), Backfill.EASY, at, "replay")
    assert fair == {1: 0, 2: 10, 3: 20, 4: 3}
    assert unfair_jobs(outcomes, fair) == 1
    estimate = fair_start_times(outcomes, flat(4), Backfill.EASY, at, "estimate")
    assert estimate == {1: 0, 2: 10, 3: 20, 4: 30}
    assert unfair_jobs(outcomes, estimate) == 1
    metrics = compute_metrics(outcomes, [], 4, fair_start=fair, fair_start_method="replay")
    assert (metrics["unfair_jobs"], metrics["fair_start_method"]) == (1, "replay")


def test_machine_is_left_empty_for_reuse():
    outcomes, at = replayed()
    machine = flat(4)
    fair_start_times(outcomes, machine, Backfill.EASY, at, "replay")
    assert machine.idle_nodes() == 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["easy", "conservative"]))
def test_conservative_fcfs_is_never_unfair(data, backfill):
    # With exact run times (requested = run), conservative FCFS gives every job the start its
    # reservation promised when it arrived; later jobs can only fill holes. So no job starts
    # after its fair start time. Under EASY the count may be positive; every FST is a real time.
    jobs = data.draw(workloads(FLAT8, exact=True, max_jobs=8, oversize=False))
    jobs = [j for j in jobs if j.run_time <= j.requested_time]
    policy = builtin_policy("fcfs")
    result = Qsim(jobs, FLAT8.build(), policy, Backfill(backfill)).run()
    fair = fair_start_times(result.outcomes, FLAT8.build(), Backfill(backfill),
                            lambda _t: Settings(policy, 1), "replay")
    assert all(fair[o.jobid] >= o.submit_time for o in result.outcomes)
    if backfill == "conservative":
        assert unfair_jobs(result.outcomes, fair) == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["easy", "conservative"]), st.integers(1, 3))
def test_jobs_started_before_the_next_arrival_get_the_fork_result(data, backfill, window):
    # A settings_at that returns a new object at every call defeats the shortcut (it needs the
    # same settings at submission and start), so every job is forked: the results must agree.
    jobs = data.draw(workloads(FLAT8, max_jobs=10, oversize=False))
    policy = builtin_policy("fcfs")
    result = Qsim(jobs, FLAT8.build(), policy, Backfill(backfill), window=window).run()
    fixed = Settings(policy, window)
    shortcut = fair_start_times(result.outcomes, FLAT8.build(), Backfill(backfill),
                                lambda _t: fixed, "replay")
    forked = fair_start_times(result.outcomes, FLAT8.build(), Backfill(backfill),
                              lambda _t: Settings(policy, window), "replay")
    assert shortcut == forked


def outcome(jobid, submit, start, end, nodes):
    return JobOutcome(jobid, submit, start, end, nodes, nodes, end - start, "x", False)


def test_queue_depth_and_rolling_utilization_by_hand():
    # 4 nodes. A: 2 nodes [0, 7200). B: submitted at 0, waits, 2 nodes [3600, 7200).
    # Samples every 30 min at 0, 1800, 3600, 5400, 7200:
    #   queue depth (min): 0, 30, 0, 0, 0 -> mean 6, peak 30
    #   instant: .5 .5 1 1 0;  1 h: at 3600 .5, at 5400 (.5·1800 + 1·1800)/3600 = .75,
    #   at 7200 1;  10 h at 7200 (history from 0): (.5·3600 + 1·3600)/7200 = .75.
    series = time_series([outcome(1, 0, 0, 7200, 2), outcome(2, 0, 3600, 7200, 2)], 4)
    assert series["hours"] == [0, 0.5, 1, 1.5, 2]
    assert series["queue_depth"] == [0, 30, 0, 0, 0]
    assert (series["queue_depth_mean"], series["queue_depth_peak"]) == (6, 30)
    assert series["utilization"] == [0.5, 0.5, 1, 1, 0]
    assert series["utilization_1h"][2:] == [0.5, 0.75, 1.0]
    assert series["utilization_10h"][-1] == 0.75
    assert series["utilization_24h"][-1] == 0.75


def test_step_series_and_monitored_values():
    s = StepSeries()
    s.record(0, 0.0)
    s.record(3600, 1.0)
    s.record(3600, 0.5)   # same instant: the later value wins
    assert s.value_at(1800) == 0.0 and s.value_at(4000) == 0.5
    assert s.average(7200, 3600) == 0.5
    assert s.average(7200, 36000) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="backwards"):
        s.record(10, 1.0)
    values = monitored_values(7200, s, queue_depth_seconds=600, queued_jobs=3)
    assert values["queue_depth"] == 10 and values["queued_jobs"] == 3
    assert values["utilization_1h"] == 0.5 and values["utilization_24h"] == pytest.approx(0.25)


def series_event_by_event(outcomes, machine_nodes, step=1800.0):
    """The series as the replay's events happen, one event at a time: the running queue sums in
    event order and the utilization through StepSeries, read at each sample (the arithmetic
    `time_series` must reproduce to the bit, over whole columns)."""
    by_submit = sorted(outcomes, key=lambda o: o.submit_time)
    by_start = sorted(outcomes, key=lambda o: o.submit_time, reverse=True)
    by_start.sort(key=lambda o: o.start_time)
    events = sorted([(o.start_time, 0, -o.submit_time, -1) for o in by_start]
                    + [(o.submit_time, 1, o.submit_time, 1) for o in by_submit],
                    key=lambda e: (e[0], e[1]))  # stable: equal starts keep their order
    busy = StepSeries()
    held = 0
    for when in sorted({o.start_time for o in outcomes} | {o.end_time for o in outcomes}):
        held += sum(o.allocated_nodes for o in outcomes if o.start_time == when)
        held -= sum(o.allocated_nodes for o in outcomes if o.end_time == when)
        busy.record(when, held / machine_nodes)
    first, last = by_submit[0].submit_time, max(o.end_time for o in outcomes)
    columns: dict[str, list[float]] = {"hours": [], "queue_depth": [], "utilization": [],
                                       "utilization_1h": [], "utilization_10h": [],
                                       "utilization_24h": []}
    count, submits, done = 0, 0.0, 0
    t = first
    while t <= last:
        while done < len(events) and events[done][0] <= t:
            submits += events[done][2]
            count += events[done][3]
            done += 1
        columns["hours"].append(round((t - first) / 3600.0, 6))
        columns["queue_depth"].append(round(max(0.0, count * t - submits) / 60.0, 6) or 0.0)
        started = busy.value_at(t) if t >= min(o.start_time for o in outcomes) else None
        columns["utilization"].append(0.0 if started is None else round(started, 6) or 0.0)
        for name, span in (("utilization_1h", 3600.0), ("utilization_10h", 36000.0),
                           ("utilization_24h", 86400.0)):
            columns[name].append(0.0 if started is None
                                 else round(busy.average(t, span), 6) or 0.0)
        t += step
    return columns


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.lists(st.tuples(
    st.integers(0, 40) | st.floats(0, 40, allow_nan=False),  # submit, in 30-min steps
    st.integers(0, 30) | st.floats(0, 30, allow_nan=False),  # wait
    st.integers(0, 50) | st.floats(0, 50, allow_nan=False),  # run
    st.integers(1, 64)), min_size=1, max_size=25), st.sampled_from((1, 2, 5, None)),
    st.sampled_from((1800 / 7, 12600 / 11)))
def test_series_columns_equal_the_event_by_event_series(machine, raw, dropped, scale):
    # time_series (sorted columns, a pointer per event kind, a bisection per rolling window)
    # must give the figures of walking the events one by one, bit for bit: ties of starts,
    # submissions and ends at one instant, jobs that never wait, zero-length runs, fractional
    # times.
    # `scale` is not a divisor of the step (samples fall between events); at the larger, a
    # trace spans up to 38 hours, past the longest rolling window (24 h).
    outcomes = [outcome(k, s * scale, (s + w) * scale, (s + w + r) * scale, min(n, machine))
                for k, (s, w, r, n) in enumerate(raw)]
    # Passed steps are dropped in blocks of thousands: a few here, so that it happens.
    # Both ways: in Python and, where cobaltlite._speedups is built, in C.
    with patch.object(metrics, "_STEPS_DROPPED", dropped or metrics._STEPS_DROPPED):
        series = metrics.python_time_series(outcomes, machine, metrics.SERIES_STEP)
        compiled = (metrics.compiled_time_series(outcomes, machine, metrics.SERIES_STEP)
                    if metrics.COMPILED else series)
    expected = series_event_by_event(outcomes, machine)
    assert {name: series[name] for name in expected} == expected
    assert compiled == series
