"""Estimated start times (qstat -f Est_Start_Time, showstart) equal the real starts when nothing
new arrives and every job runs for its requested time: in Qsim, and with the live daemons."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from live import Instance, until
from shared_paths import TRACES
from test_live_jobs import script
from test_scheduler_properties import BGP_BLOCKS, BGP_SIZES, bgp_machine

from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.model import Machine
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import ARRAY_FUNCTIONS, PassInputs, builtin_policy
from cobaltlite.qsim.engine import JobOutcome, Qsim, SimJob
from cobaltlite.qsim.fork import WaitingColumns, estimate_start_times
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.intrepid_list import read_intrepid_list
from cobaltlite.traces.model import TraceJob

MACHINE = "flat:8"


MAPPED = {"mapped": frozenset({"0", "1", "2", "3"})}
"""Queue `mapped` may use nodes 0-3 only (partadm --queue); queue `default` goes anywhere."""


class _EstimateAfterLastArrival:
    """A Qsim pass hook: at the last submission's pass, estimate every queued job's start."""

    def __init__(self, qsim: Qsim, last_arrival: float, policy: str, backfill: Backfill,
                 window: int, reservations: list[Reservation],
                 empty: Callable[[], Machine] = lambda: build_machine(load_description(MACHINE))
                 ) -> None:
        self.qsim, self.last_arrival, self.reservations = qsim, last_arrival, reservations
        self.settings = (builtin_policy(policy), backfill, window)
        self.empty = empty
        self.estimates: dict[int, float] | None = None

    def before_pass(self, now: float) -> None:
        pass

    def after_pass(self, now: float) -> None:
        if now == self.last_arrival:
            policy, backfill, window = self.settings
            self.estimates = estimate_start_times(
                self.empty(), now, self.qsim.running_jobs(), self.qsim.queued_jobs(), policy,
                backfill, window, queue_places=self.qsim.queue_places,
                reservations=self.reservations, slack=self.qsim.scheduler.slack_state())


jobs_strategy = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 8), st.integers(1, 40), st.booleans()),
    min_size=1, max_size=14)


MAINTENANCE = Reservation("maint", start=30, duration=40, places=tuple(map(str, range(8))))
"""The whole machine reserved over [30, 70): no job may overlap it."""


@settings(max_examples=60, deadline=None)
@given(jobs=jobs_strategy, policy=st.sampled_from(["fcfs", "wfp3", "default", "unicef"]),
       backfill=st.sampled_from(list(Backfill)), window=st.integers(1, 3),
       maintenance=st.booleans())
# Without the scheduler's slack memory the fork estimated {1: 59, 2: 36} for starts {1: 29, 2: 54}.
@example(jobs=[(20, 1, 25, False), (15, 4, 23, False), (7, 4, 30, False), (9, 1, 27, False),
               (17, 2, 12, False), (20, 5, 8, False), (10, 7, 33, False), (6, 5, 19, False)],
         policy="wfp3", backfill=Backfill.SLACK, window=1, maintenance=False)
# The window pass started job 3 and left job 4 (no backfill), which a pass at the same instant
# takes into its window and starts: the fork estimated {4: 0}, the replay started it at 1.
@example(jobs=[(0, 1, 1, False), (0, 4, 1, True), (0, 1, 1, False), (0, 1, 1, False)],
         policy="fcfs", backfill=Backfill.NONE, window=2, maintenance=False)
def test_qsim_estimates_equal_the_starts_when_nothing_new_arrives(
        jobs: list[tuple[int, int, int, bool]], policy: str, backfill: Backfill,
        window: int, maintenance: bool) -> None:
    trace = [TraceJob(i + 1, submit, wall, wall, min(nodes, 4) if mapped else nodes,
                      queue="mapped" if mapped else "default")
             for i, (submit, nodes, wall, mapped) in enumerate(jobs)]
    reservations = [MAINTENANCE] if maintenance else []
    qsim = Qsim(trace, build_machine(load_description(MACHINE)), builtin_policy(policy),
                backfill, window=window, reservations=reservations)
    qsim.queue_places = dict(MAPPED)
    outcomes = _run_checking_the_estimates(
        qsim, _EstimateAfterLastArrival(qsim, max(j.submit_time for j in trace), policy,
                                        backfill, window, reservations))
    assert all(int(node) < 4 for o in outcomes if o.queue == "mapped"
               for node in _nodes(o.location))


def _run_checking_the_estimates(qsim: Qsim, hook: _EstimateAfterLastArrival
                                ) -> list[JobOutcome]:
    """Run `qsim` with `hook`; check that its estimates are the starts after the last
    arrival; return the outcomes."""
    qsim.pass_hook = hook
    result = qsim.run()
    assert hook.estimates is not None
    started_later = {o.jobid: o.start_time for o in result.outcomes
                     if o.start_time > hook.last_arrival}
    assert hook.estimates == started_later
    return result.outcomes


_MACHINES: dict[str, Machine] = {
    spec: build_machine(load_description(spec)) for spec in ("flat:8", "bgp-2rack", "intrepid")}
_MACHINES["fig1+"] = bgp_machine()
"""Empty machines the pruning test reuses (an estimate leaves its machine empty)."""
_MAPPED_PLACES = {"flat:8": MAPPED["mapped"],
                  "bgp-2rack": frozenset({"ANL-R00-M0-512", "ANL-R00-M1-512", "ANL-R00-1024"})}


def _running_on(machine, now: float, running: list[tuple[int, int, str]]) -> list[SimJob]:
    """Jobs running at `now` as (size in smallest blocks, seconds left, user), placed where the
    machine would place them and released again: the fork holds them from the list."""
    unit = machine.min_block_size
    ending = []
    for k, (size, left, user) in enumerate(running):
        where = machine.find_location(size * unit, 60.0, now)
        if where is None:
            continue
        machine.allocate(where, 1000 + k, 0.0)
        ending.append(SimJob(1000 + k, size * unit, 60.0, 60.0, now - 100, user, "p", "default",
                             start_time=now - 60 + left, location=where))
    for jobid in list(machine.held_by()):
        machine.release(jobid)
    return ending


def _assert_pruned_equals_full(machine, now: float, ending: list[SimJob], waiting: list[SimJob],
                               policy: str, backfill: Backfill, spec: str) -> None:
    places = {"mapped": _MAPPED_PLACES[spec]}
    chosen = builtin_policy(policy)
    pruned = estimate_start_times(machine, now, ending, waiting, chosen, backfill,
                                  queue_places=places)
    full = estimate_start_times(machine, now, ending, waiting, chosen, backfill,
                                queue_places=places, prune=False)
    assert pruned == full


@settings(max_examples=80, deadline=None)
@given(spec=st.sampled_from(sorted(_MAPPED_PLACES)),
       policy=st.sampled_from(["fcfs", "default", "high_prio", "wfp3", "wfp1", "fat", "fcsj",
                                 "unicef", "balanced"]),
       backfill=st.sampled_from([Backfill.EASY, Backfill.NONE, Backfill.CONSERVATIVE]),
       running=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 60)), max_size=4),
       queued=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 60), st.integers(0, 100),
                                 st.booleans(), st.integers(0, 2)), min_size=1, max_size=25))
def test_passes_seeing_only_the_jobs_that_matter_estimate_as_passes_seeing_all(
        spec: str, policy: str, backfill: Backfill, running: list[tuple[int, int]],
        queued: list[tuple[int, int, int, bool, int]]) -> None:
    """The pruned forks (fixed rank orders, and scores computed as arrays for the time-varying
    builtins; under conservative on Blue Gene/P, the queue ranked from array scores up to the
    last job that fits) give the very starts of forks whose every pass ranks the whole queue:
    on a flat machine and on Blue Gene/P blocks, with a queue mapped to some places, equal
    scores (equal submissions and requests), queue priorities, and on Blue Gene/P jobs no
    block holds (they count in `balanced`'s queue statistics)."""
    machine = _MACHINES[spec]
    unit = machine.min_block_size  # sizes in blocks of the smallest size, so jobs fit
    now = 1000.0
    ending = _running_on(machine, now, [(size, left, "u") for size, left in running])
    waiting = [SimJob(i + 1, size * unit, float(wall), float(wall), now - 10 * age, "u", "p",
                      "mapped" if mapped else "default", queue_priority=priority)
               for i, (size, wall, age, mapped, priority) in enumerate(queued)]
    _assert_pruned_equals_full(machine, now, ending, waiting, policy, backfill, spec)


@settings(max_examples=200, deadline=None)
@given(function=st.sampled_from(sorted(ARRAY_FUNCTIONS, key=lambda f: f.__name__)),
       queued=st.floats(0.0, 1e7), wall=st.floats(1.0, 1e6), size=st.integers(1, 163840),
       n_s=st.sampled_from([1, 64, 512]), longest=st.floats(0.0, 1e7),
       walls=st.tuples(st.floats(1.0, 1e6), st.floats(1.0, 1e6)))
def test_the_array_functions_score_as_the_builtins_well_inside_the_band(
        function: Callable[..., float], queued: float, wall: float, size: int, n_s: int,
        longest: float, walls: tuple[float, float]) -> None:
    """Each builtin's function on arrays (the estimates' ranking, qsim/fork.py) gives a job's
    score to a few units in the last place, far inside the band within which the estimate
    scores near ties again exactly."""
    import inspect

    import numpy as np

    inputs = {"queued_time": queued, "wall_time": wall, "size": size, "n_s": n_s,
              "max_queued_time": max(queued, longest), "max_wall_time": max(wall, *walls),
              "min_wall_time": min(wall, *walls)}
    names = inspect.signature(function).parameters
    args = {name: inputs[name] for name in names if name in inputs}
    exact = function(**args)
    on_arrays = ARRAY_FUNCTIONS[function](**{
        name: np.array([value]) if name in ("queued_time", "wall_time", "size") else value
        for name, value in args.items()})
    assert abs(float(np.asarray(on_arrays).ravel()[0]) - exact) <= 1e-13 * abs(exact)


@settings(max_examples=60, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([10.0, 20.0, 30.0, 45.0]),
                               st.sampled_from([0.0, 10.0, 20.0, 50.0])),
                     min_size=1, max_size=20),
       starts=st.lists(st.integers(0, 19), max_size=20))
def test_the_queue_statistics_kept_between_starts_are_those_of_the_jobs_not_started(
        jobs: list[tuple[int, float, float]], starts: list[int]) -> None:
    """`balanced`'s queue statistics, kept by the estimate's ranking until a job holding one
    starts, give every pass the scores computed from the jobs not yet started (ties on the
    earliest submission and on the longest and shortest wall times included)."""
    machine = _MACHINES["fig1+"]
    policy = builtin_policy("balanced")
    waiting = [SimJob(i + 1, size * machine.min_block_size, wall, wall, submit, "u", "p",
                      "default") for i, (size, wall, submit) in enumerate(jobs)]
    kept = WaitingColumns(waiting, machine, policy, fixed=False, reserving=True)
    begun: list[int] = []
    for now, k in enumerate(starts, start=100):
        jobid = waiting[k % len(waiting)].jobid
        if jobid in begun or len(begun) == len(waiting) - 1:
            continue
        kept.started(jobid)
        begun.append(jobid)
        afresh = WaitingColumns(waiting, machine, policy, fixed=False, reserving=True)
        for started in begun:
            afresh.started(started)
        inputs = [PassInputs(now=0.0, machine_size=machine.total_nodes,
                             n_s=machine.min_block_size) for _ in range(2)]
        assert (kept._scores(float(now), inputs[0]).tolist()
                == afresh._scores(float(now), inputs[1]).tolist())
        assert inputs[0] == inputs[1]


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(sorted(_MAPPED_PLACES)),
       backfill=st.sampled_from([Backfill.EASY, Backfill.NONE, Backfill.CONSERVATIVE]),
       running=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 60), st.integers(0, 2)),
                        max_size=4),
       queued=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 60), st.integers(0, 100),
                                 st.booleans(), st.integers(0, 2)), min_size=1, max_size=25))
def test_fairshare_ranked_per_user_estimates_as_passes_scoring_every_job(
        spec: str, backfill: Backfill, running: list[tuple[int, int, int]],
        queued: list[tuple[int, int, int, bool, int]]) -> None:
    """Under `fairshare` the pruned forks score one job per user at each pass (a user's jobs
    score alike) and rank by those exact scores: the very starts of forks whose every pass
    scores the whole queue, with several users whose usage changes as the fork starts their
    jobs, users tied on usage (equal scores: job id order) and a queue mapped to some places."""
    machine = _MACHINES[spec]
    unit = machine.min_block_size
    now = 1000.0
    ending = _running_on(machine, now, [(size, left, f"u{user}") for size, left, user in running])
    waiting = [SimJob(i + 1, size * unit, float(wall), float(wall), now - 10 * age, f"u{user}",
                      "p", "mapped" if mapped else "default")
               for i, (size, wall, age, mapped, user) in enumerate(queued)]
    _assert_pruned_equals_full(machine, now, ending, waiting, "fairshare", backfill, spec)


@settings(max_examples=100, deadline=None)
@given(nodes=st.integers(4, 16), failed=st.lists(st.integers(0, 15), max_size=3),
       policy=st.sampled_from(["fcfs", "default", "high_prio", "balanced"]),
       running=st.lists(st.tuples(st.integers(1, 6), st.integers(-20, 60)), max_size=5),
       queued=st.lists(st.tuples(st.integers(1, 16), st.integers(1, 60), st.integers(-2, 3),
                                 st.integers(0, 2)), min_size=1, max_size=30))
# balanced with every queued time at most 0 at the fork's start (a job submitted after it)
# scores every job 0 then (job id order), and ranks by queued time later: not one order.
@example(nodes=4, failed=[], policy="balanced", running=[(1, 1)],
         queued=[(4, 1, -1, 0), (1, 2, 0, 0)])
def test_one_conservative_plan_gives_every_start_of_the_forward_replay(
        nodes: int, failed: list[int], policy: str, running: list[tuple[int, int]],
        queued: list[tuple[int, int, int, int]]) -> None:
    """Conservative backfilling, a fixed rank order (`balanced` with its default factor
    ranks as FCFS), a flat machine: after the passes at the fork's first instant, the
    reservations of one plan of the queue are the starts the forward replay finds pass after
    pass (overdue running jobs, failed nodes, equal submissions and queue priorities, jobs
    submitted after the fork's start included; jobs larger than the nodes in service never
    start)."""
    machine = build_machine(load_description(f"flat:{nodes}"))
    for node in failed:
        if node < nodes:
            machine.fail(str(node))
    now = 1000.0
    ending = []
    for k, (size, left) in enumerate(running):
        where = machine.find_location(size, 60.0, now)
        if where is None:
            continue
        machine.allocate(where, 1000 + k, 0.0)
        ending.append(SimJob(1000 + k, size, 60.0, 60.0, now - 100, "u", "p", "default",
                             start_time=now - 60 + left, location=where))
    for jobid in list(machine.held_by()):
        machine.release(jobid)
    waiting = [SimJob(i + 1, min(size, nodes), float(wall), float(wall), now - 10 * age, "u",
                      "p", "default", queue_priority=priority)
               for i, (size, wall, age, priority) in enumerate(queued)]
    chosen = builtin_policy(policy)
    planned = estimate_start_times(machine, now, ending, waiting, chosen, Backfill.CONSERVATIVE)
    replayed = estimate_start_times(machine, now, ending, waiting, chosen,
                                    Backfill.CONSERVATIVE, prune=False)
    assert planned == replayed


def test_the_followed_plan_gives_the_forward_replays_starts_on_an_intrepid_queue() -> None:
    """Intrepid's own jobs (from the trace's 1,500th): the running ones fill three quarters
    of the machine, the next 700 wait. Long queues re-plan again and again, and a
    re-planned job that moves frees time a later one may take: the case the random workloads
    above rarely reach."""
    machine = _MACHINES["intrepid"]
    trace = read_intrepid_list(TRACES / "intrepid-2009-first3000.6col.txt.gz").jobs[1500:]
    now = 10_000_000.0
    ending, k = [], 0
    for k, j in enumerate(trace):  # k: where the queue starts
        if machine.idle_nodes() <= machine.total_nodes // 4:
            break
        where = machine.find_location(j.nodes, j.requested_time, now)
        if where:
            machine.allocate(where, -1 - k, now + 600.0 + 60 * k)
            ending.append(SimJob(-1 - k, j.nodes, 600.0 + 60 * k, 600.0 + 60 * k, now - 100,
                                 "u", "p", "default", start_time=now, location=where))
    for jobid in list(machine.held_by()):
        machine.release(jobid)
    waiting = [SimJob(i, j.nodes, float(j.requested_time), float(j.requested_time),
                      now - 60 * (700 - i), "u", "p", "default")
               for i, j in enumerate(trace[k:k + 700])]
    fcfs = builtin_policy("fcfs")
    planned = estimate_start_times(machine, now, ending, waiting, fcfs, Backfill.CONSERVATIVE)
    replayed = estimate_start_times(machine, now, ending, waiting, fcfs,
                                    Backfill.CONSERVATIVE, prune=False)
    assert planned == replayed and len(planned) == 700


_FIG1_MAPPED = {"mapped": frozenset({"A", "A-0", "A-1", "A-01", "B", "AB", "E"})}
"""On the test machine with sub-midplane blocks (test_scheduler_properties.py): queue `mapped`
may use a few blocks of midplanes A, B and E only."""


@settings(max_examples=100, deadline=None)
@given(intrepid=st.sampled_from([False, False, True]), failed=st.lists(st.integers(0, 40),
                                                                        max_size=2),
       policy=st.sampled_from(["fcfs", "default", "high_prio", "balanced"]),
       mapped=st.booleans(),
       running=st.lists(st.tuples(st.integers(0, 6), st.integers(-20, 60)), max_size=6),
       queued=st.lists(st.tuples(st.integers(0, 6), st.integers(1, 60), st.integers(-1, 3),
                                 st.integers(0, 2), st.booleans()), min_size=1, max_size=30))
def test_the_followed_plan_gives_every_start_of_the_forward_replay_on_blue_gene(
        intrepid: bool, failed: list[int], policy: str, mapped: bool,
        running: list[tuple[int, int]], queued: list[tuple[int, int, int, int, bool]]) -> None:
    """Conservative backfilling, a fixed rank order (`balanced` ranks as FCFS), Blue Gene/P:
    one plan after the fork's first instant, followed forward and re-planned where a job
    starts on a cheaper block than it had reserved (qsim/followed_plan.py), gives the starts
    the forward replay finds pass after pass. On blocks inside blocks (128 to 4096 nodes, so
    the cheapest block is often not the first free one) and on Intrepid, with overdue running
    jobs, failed midplanes, a queue mapped to some blocks, equal submissions and queue
    priorities, jobs submitted after the fork's start."""
    machine = _MACHINES["intrepid"] if intrepid else _MACHINES["fig1+"]
    sizes = sorted(machine.size_mask) if intrepid else BGP_SIZES
    components = machine.failure_units()
    for k in failed:
        machine.fail(components[k % len(components)])
    now = 1000.0
    try:
        ending = _running_jobs(machine, sizes, [(size, left, "u") for size, left in running],
                               now)
        waiting = [SimJob(i + 1, sizes[size % len(sizes)] - 1, float(wall), float(wall),
                          now - 10 * age, "u", "p", "mapped" if in_mapped else "default",
                          queue_priority=priority)
                   for i, (size, wall, age, priority, in_mapped) in enumerate(queued)]
        places = (_FIG1_MAPPED if not intrepid else
                  {"mapped": frozenset(machine.names[:40])}) if mapped else {}
        chosen = builtin_policy(policy)
        planned = estimate_start_times(machine, now, ending, waiting, chosen,
                                       Backfill.CONSERVATIVE, queue_places=places)
        replayed = estimate_start_times(machine, now, ending, waiting, chosen,
                                        Backfill.CONSERVATIVE, queue_places=places,
                                        prune=False)
        assert planned == replayed
    finally:
        for component in machine.failed_components():
            machine.unfail(component)


@settings(max_examples=80, deadline=None)
@given(spec=st.sampled_from(["fig1+", "fig1+", "bgp-2rack", "intrepid", "flat:8"]),
       policy=st.sampled_from(["wfp3", "wfp1", "fat", "fcsj", "unicef", "balanced",
                                 "fairshare"]),
       failed=st.lists(st.integers(0, 40), max_size=2), mapped=st.booleans(),
       running=st.lists(st.tuples(st.integers(0, 6), st.integers(-20, 80), st.integers(0, 2)),
                        max_size=8),
       queued=st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 1, 2, 3, 4, 5, 6]),
                                 st.sampled_from([1, 5, 30, 60, 200, 600]),
                                 st.integers(0, 300), st.integers(0, 2), st.booleans()),
                       min_size=6, max_size=40))
# A job ranked first filled the machine at a pass that then planned nothing: its block was
# reserved for another job later, which a pass holding the last plan again kept.
@example(spec="bgp-2rack", policy="fairshare", failed=[], mapped=False, running=[],
         queued=[(0, 60, 11, 1, False), (1, 30, 6, 0, False), (2, 200, 90, 0, False),
                 (0, 600, 156, 1, False), (0, 600, 48, 2, False), (0, 60, 170, 1, False),
                 (0, 30, 30, 2, False), (1, 600, 118, 1, False), (0, 30, 186, 0, False),
                 (1, 30, 131, 0, False), (1, 60, 163, 2, False), (0, 60, 11, 0, False)])
# A job whose reservation began started on a cheaper block than the one it had reserved:
# the plan ends with it (fig1+'s 128-node blocks, two midplanes failed).
@example(spec="fig1+", policy="wfp3", failed=[2, 4], mapped=False, running=[],
         queued=[(0, 1, 0, 0, False)] * 19 + [
             (0, 5, 3, 0, False), (0, 30, 15, 0, False), (3, 5, 2, 0, False),
             (3, 30, 8, 0, False), (4, 1, 0, 0, False)])
# A running job overdue at the fork's first instant held its blocks a grace beyond it in the
# first pass, and the reservations made around it no longer hold once it has ended.
@example(spec="intrepid", policy="wfp3", failed=[0, 8], mapped=False,
         running=[(4, 0, 0), (6, 1, 0)],
         queued=[(0, 1, 0, 0, False)] * 19 + [(3, 1, 1, 0, False), (5, 1, 1, 0, False)])
# A job ranked first whose reservation began started ahead of the top job on a cheaper block
# than the one it had reserved: the plan is dropped (`LastReservations.take_off`).
@example(spec="intrepid", policy="wfp3", failed=[0], mapped=False, running=[],
         queued=[(0, 1, 0, 0, False)] * 11 + [
             (3, 5, 1, 0, False), (4, 1, 1, 0, False), (4, 1, 1, 0, False), (4, 5, 0, 0, False),
             (5, 1, 0, 0, False), (6, 1, 1, 0, False)])
def test_conservative_passes_holding_the_last_plan_again_estimate_as_planning_afresh(
        spec: str, policy: str, failed: list[int], mapped: bool,
        running: list[tuple[int, int, int]], queued: list[tuple[int, int, int, int, bool]]
) -> None:
    """Conservative backfilling with a rank order that changes as jobs wait: the fork's passes
    on Blue Gene/P that take up the last pass's reservations of the jobs still ranked first
    (scheduler/plan.py, `LastReservations`; those due now started where the pass starts them)
    give the very starts of passes planning afresh, and of the forward replay whose every pass
    ranks the whole queue. On blocks inside blocks, on two racks, on Intrepid and on a flat
    machine (no reuse there), with overdue running jobs (the fork's first instant), failed
    components, a queue mapped to some places, several users (their usage moves fairshare's
    order) and equal scores."""
    machine = _MACHINES[spec]
    sizes = sorted(machine.size_mask) if hasattr(machine, "size_mask") else list(range(1, 9))
    components = machine.failure_units()
    for k in failed:
        machine.fail(components[k % len(components)])
    now = 1000.0
    try:
        ending = _running_jobs(machine, sizes,
                               [(size, left, f"u{user}") for size, left, user in running], now)
        waiting = [SimJob(i + 1, max(sizes[size % len(sizes)] - 1, 1), float(wall), float(wall),
                          now - 10 * age, f"u{user}", "p", "mapped" if in_mapped else "default")
                   for i, (size, wall, age, user, in_mapped) in enumerate(queued)]
        places = {"mapped": _FIG1_MAPPED["mapped"] if spec == "fig1+" else
                  frozenset(machine.names[:40]) if spec == "intrepid" else _MAPPED_PLACES[spec]
                  } if mapped else {}
        chosen = builtin_policy(policy)
        reused, afresh, replayed = (
            estimate_start_times(machine, now, ending, waiting, chosen, Backfill.CONSERVATIVE,
                                 queue_places=places, reuse_plan=reuse, prune=prune)
            for reuse, prune in ((True, True), (False, True), (False, False)))
        assert reused == afresh == replayed
    finally:
        for component in machine.failed_components():
            machine.unfail(component)



def _running_jobs(machine: Machine, sizes: list[int], running: list[tuple[int, int, str]],
                  now: float) -> list[SimJob]:
    """The 60-second jobs of `running` (size index, seconds from `now` to its end, negative when
    overdue, user) that find a place on `machine`, placed in order; `machine` is left empty, as
    the fork places them itself."""
    ending = []
    for k, (size, left, user) in enumerate(running):
        where = machine.find_location(sizes[size % len(sizes)], 60.0, now)
        if where is None:
            continue
        machine.allocate(where, 1000 + k, 0.0)
        ending.append(SimJob(1000 + k, sizes[size % len(sizes)], 60.0, 60.0, now - 100, user,
                             "p", "default", start_time=now - 60 + left, location=where))
    for jobid in list(machine.held_by()):
        machine.release(jobid)
    return ending


@settings(max_examples=40, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(0, 50), st.sampled_from(BGP_SIZES),
                               st.integers(1, 40), st.booleans()), min_size=1, max_size=16),
       policy=st.sampled_from(["fcfs", "wfp3", "default"]))
def test_qsim_estimates_equal_the_starts_on_blue_gene_under_conservative(
        jobs: list[tuple[int, int, int, bool]], policy: str) -> None:
    """Qsim on blocks inside blocks with conservative backfilling: the estimates made after
    the last arrival are the starts (FCFS and `default` through the followed plan, wfp3
    through the forward replay), a queue mapped to some blocks included."""
    trace = [TraceJob(i + 1, submit, wall, wall, min(nodes, 1024) if mapped else nodes,
                      queue="mapped" if mapped else "default")
             for i, (submit, nodes, wall, mapped) in enumerate(jobs)]
    qsim = Qsim(trace, bgp_machine(), builtin_policy(policy), Backfill.CONSERVATIVE)
    qsim.queue_places = dict(_FIG1_MAPPED)
    outcomes = _run_checking_the_estimates(
        qsim, _EstimateAfterLastArrival(qsim, max(j.submit_time for j in trace), policy,
                                        Backfill.CONSERVATIVE, 1, [], bgp_machine))
    assert all(o.location in _FIG1_MAPPED["mapped"] for o in outcomes if o.queue == "mapped")
    assert set(BGP_BLOCKS) >= {o.location for o in outcomes if o.location}


def _nodes(location: str) -> list[str]:
    """The node numbers of a flat location such as "0-2,5"."""
    nodes: list[str] = []
    for part in location.split(","):
        first, _, last = part.partition("-")
        nodes += [str(n) for n in range(int(first), int(last or first) + 1)]
    return nodes


# ---- live ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    yield running
    running.stop()


def _estimate(instance: Instance, jobid: int) -> float | None:
    shown = instance.long_listing(jobid)["Est_Start_Time"]
    return None if shown == "-" else datetime.strptime(shown, "%Y-%m-%d %H:%M:%S").timestamp()


def estimates_of(instance: Instance, jobids: list[int]) -> list[float]:
    """The queued jobs' estimates once every one has one (a pass or two after the qsub)."""
    return until(lambda: (lambda found: found if None not in found else None)(
        [_estimate(instance, j) for j in jobids]), 20, "start estimates of the queued jobs")


def assert_starts_follow(instance: Instance, jobids: list[int], estimates: list[float],
                         links: tuple[int, ...]) -> None:
    """Each job starts at its estimate to within the daemons' polling: 3 s per job that must
    end before it starts, its `links` (a loaded machine has shown 3.04 s for a chain of two)."""
    for chain, jobid, estimate in zip(links, jobids, estimates, strict=True):
        started = instance.wait_for(jobid, {"running", "exiting", "done"}, timeout=60)
        assert abs(started["starttime"] - estimate) <= 3.0 * chain, (jobid, started, estimate)


def test_live_estimates_equal_the_starts_and_showstart_prints_them(instance: Instance) -> None:
    """Jobs that outlive their wall time are ended at it: each runs for its requested time.
    The starts then follow the estimates to within the daemons' polling (a second or two)."""
    sleeper = script(instance.jobs_dir, "outlive.sh", "sleep 60")
    first = instance.qsub("-n", "4", "-t", "00:00:06", str(sleeper))
    instance.wait_for(first, {"running"})
    queued = [instance.qsub("-n", str(n), "-t", "00:00:05", str(sleeper)) for n in (4, 2, 2)]
    estimates = estimates_of(instance, queued)
    assert estimates[0] <= estimates[1] <= estimates[2] + 1  # the 2-node jobs after the 4-node one

    shown = instance.command("showstart", str(queued[1]))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"job {queued[1]} requires 2 nodes for 00:00:05"
    assert re.fullmatch(r"Estimated start in \d\d:\d\d:\d\d on \w{3} \w{3} [ \d]\d "
                        r"\d\d:\d\d:\d\d \d{4}", lines[1]), lines[1]
    assert lines[2].startswith("Estimated end in ")
    table = instance.command("qstat", "-f", str(queued[0]))
    assert table.stdout.splitlines()[0].rstrip().endswith("Est_Start_Time")

    assert_starts_follow(instance, queued, estimates, (1, 2, 2))
    for jobid in (first, *queued):
        instance.wait_for(jobid, {"done"}, timeout=60)
    running = instance.command("showstart", str(first))
    assert running.returncode == 0 and running.stdout.splitlines()[1].startswith("Started ")


def test_showstart_refuses_what_it_cannot_estimate(instance: Instance) -> None:
    missing = instance.command("showstart", "99999")
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        1, "", "showstart: job 99999 not found\n")
    bad = instance.command("showstart", "twelve")
    assert bad.returncode == 1 and bad.stderr == "showstart: jobid must be an integer: twelve\n"
    held = instance.qsub("-h", "-n", "1", "-t", "5", "/bin/true")
    time.sleep(1.5)  # a pass or two
    shown = instance.command("showstart", str(held))
    assert shown.returncode == 1
    assert shown.stderr.startswith(f"showstart: job {held} has no start estimate (it is "
                                   "user_hold")
    instance.command("qdel", str(held))
    # A reservation's job longer than the reservation never starts: the message says why.
    assert instance.command("setres", "-n", "short", "-s", "now", "-d", "5", "-p", "0"
                            ).returncode == 0
    too_long = instance.qsub("-q", "R.short", "-n", "1", "-t", "10", "/bin/true")
    # A whole-machine job behind the reservation: once it has an estimate, an estimate pass
    # has seen the reservation's job too, and gave it none.
    behind = instance.qsub("-n", "4", "-t", "5", "/bin/true")
    until(lambda: instance.command("showstart", str(behind)).returncode == 0, 30,
          "an estimate of the job behind the reservation")
    shown = instance.command("showstart", str(too_long))
    assert shown.returncode == 1
    assert "a reservation's job longer than what is left of the reservation" in shown.stderr
    instance.command("qdel", str(too_long), str(behind))
    instance.command("releaseres", "short")


def test_live_conservative_on_blue_gene_backfills_and_estimates_the_starts() -> None:
    """The daemons on bgp-2rack under conservative backfilling (the planner's reservations on
    blocks, the followed plan in the queue manager's estimates): with a 1024-node block busy
    for 12 s, the 2048-node job waits for it while the 512-node jobs that end before it
    backfill at once, and it starts when its estimate said, within the daemons' polling."""
    bgp = Instance(machine="bgp-2rack", settings={"backfill": "conservative"}).start_retrying()
    try:
        sleeper = script(bgp.jobs_dir, "outlive.sh", "sleep 60")
        first = bgp.qsub("-n", "1024", "-t", "00:00:12", str(sleeper))
        bgp.wait_for(first, {"running"})
        whole = bgp.qsub("-n", "2048", "-t", "00:00:05", str(sleeper))
        small = [bgp.qsub("-n", "512", "-t", "00:00:04", str(sleeper)) for _ in range(2)]
        # Read while it waits: a running job shows no estimate.
        estimate = until(lambda: _estimate(bgp, whole), 10, "the 2048-node job's estimate")
        for jobid in small:
            bgp.wait_for(jobid, {"running", "exiting", "done"}, timeout=20)
        assert bgp.wait_for(whole, {"queued"})["state"] == "queued"
        started = bgp.wait_for(whole, {"running", "exiting", "done"}, timeout=60)
        assert abs(started["starttime"] - estimate) <= 3.0, (started, estimate)
        assert started["location"] == "ANL-R00-R01-2048"
    finally:
        bgp.stop()
