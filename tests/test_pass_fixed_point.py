"""A pass leaves nothing for a second pass at the same instant (the pass's fixed point).

The scheduler's module docstring promises that a pass starts everything that can start at its
instant. Three callers rely on it: a Qsim replay passes only at its next event, the live
scheduler passes again a few seconds later, and a start estimate's fork begins with a pass of a
scheduler of its own. If a pass left a job that a second pass at the same instant would start,
the three would disagree (the two bugs this found indirectly: docs/metric-aware.md D000-1 and
docs/hybrid-queues.md D002-9).

So at every pass of a replay over a random small workload, right after the pass, with its
starts applied by Qsim's own queue manager (queue, machine, running limits, usage) as in any
replay, two more passes run at the same instant and must start nothing: one by the same
scheduler (as the live scheduler's next pass: its kept plan and slack memory included) and one
by a scheduler made afresh with the same settings and slack memory (as a fork's first pass).
A slack pass gets there by repeating its step while it starts a job (docs/fairness.md D001-5).

"Nothing changed" means the second passes see the queue as the pass saw it: its jobs less
those it started, with the scores it ranked them by. Two things a start changes at the same
instant belong to the queue manager's rules, not to the pass, and would otherwise let a second
pass start a job: the balanced policy's queue-wide maxima and minima are taken over the jobs
scored at the pass (docs/architecture.md, "Balanced priority"), so with the started jobs gone
the order may change (found: flat:13, none, BF 0.5); and a start that brings its user to a
queue's maxrunning takes that user's other jobs out of the runnable ones (maxrun_hold,
docs/operator-guide.md), after the pass drained for one of them (found: Blue Gene/P, EASY,
maxrunning 2: without that top job a second pass backfills the job its drain held back). The
live scheduler rescores at its next pass, a replay at its next event.

Drawn: flat machines and a small Blue Gene/P table; backfill none, EASY, conservative and
slack; allocation windows W = 1..3 and adaptive tuning of W and BF; fixed-order (fcfs) and
scored policies (wfp3, balanced, fairshare); failures, disabled places, a queue mapped to
places (partadm --queue), a running limit that refuses starts, reservations with jobs of their
own queue and others; queue layouts with and without a pool, flat and Blue Gene/P.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bgp_layouts import TWO_RACKS
from test_layout_estimates import HYBRID
from test_reservations import reserved
from test_scheduler_properties import BGP, FLAT4, FLAT8, FLAT13, MachineKind, workloads

from cobaltlite.faults.sources import FailureEvent
from cobaltlite.jobs.queues import default_queue
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.partitioning.layout import parse_layout
from cobaltlite.policy.utility import UtilityFunction, builtin_policy
from cobaltlite.qsim.engine import Qsim, ReplayResult, SimJob
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.scheduler import Backfill, PassReport, Scheduler
from cobaltlite.scheduler.slack import Goal, SlackSettings
from cobaltlite.traces.model import TraceJob
from cobaltlite.tuning.qsim import QsimTuning
from cobaltlite.tuning.scheme import parse_scheme

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMES = list(Backfill)
USERS = ("ann", "bob", "cy")


# ---- the property -------------------------------------------------------------------------


def replay_checking_fixed_point(qsim: Qsim, label: str) -> ReplayResult:
    """Replay `qsim`, checking after each pass that a pass at the same instant, by the same
    scheduler and by a fresh one, on the queue as the pass saw it, starts nothing."""
    scheduler = qsim.scheduler
    score = qsim.schedulable_jobs
    seen: list[SimJob] = []  # the jobs the pass scored, with the scores it ranked them by
    checking = False

    def schedulable_jobs() -> list[SimJob]:
        if not checking:
            seen[:] = score()
            return seen[:]
        queued = {job.jobid for job in qsim.queued_jobs()}
        return [job for job in seen if job.jobid in queued]

    def pass_and_check() -> PassReport:
        nonlocal checking
        seen.clear()
        report = scheduler.iterate()
        now = qsim.clock.now()
        checking = True
        for who, again in (("the same scheduler", scheduler), ("a fresh scheduler",
                                                                fresh_like(scheduler, qsim))):
            second = again.iterate()
            assert not second.started, (
                f"[{label}] at t={now} the pass started {report.started} (drain "
                f"{report.drain}, window {report.reserved}); a second pass by {who} at the "
                f"same instant started {second.started}")
        checking = False
        return report

    qsim.schedulable_jobs = schedulable_jobs
    qsim._run_pass = pass_and_check
    return qsim.run()


def fresh_like(scheduler: Scheduler, qsim: Qsim) -> Scheduler:
    """A scheduler with `scheduler`'s settings and slack memory and no kept plan: what a
    forked replay schedules with (qsim/fork.py)."""
    fresh = Scheduler(qsim, qsim, qsim.clock, scheduler.backfill, scheduler.window,
                      scheduler.reservations, slack=scheduler.slack.settings)
    if scheduler.backfill is Backfill.SLACK:
        fresh.resume_slack(scheduler.slack_state())
    return fresh


def test_a_slack_pass_starts_what_the_search_chooses_once_its_starts_are_made() -> None:
    """flat:4, fcfs, Table 3's settings (G1). Job 1 (2 nodes, 5 s requested, ends at 4) runs
    from 0; job 2 (3 nodes) waits, expected at 5. At 3 jobs 3 and 4 (1 node, 3 s each) come:
    the conservative plan starts job 3 now (on the node job 2 leaves free at 5) and reserves
    job 4 at 6. The candidates are {3} (the conservative outcome: OU 0) and {4} (job 4 now
    beside job 3, job 2 pushed to 6, within its slack: OU 1/3); G1 anchors on the least OU and
    refuses {4} (OU ratio beyond max_ou_range). Once job 3 started, the search over the jobs
    left has the single candidate {4} (the conservative outcome now starts nothing: no
    candidate, D001-5), so the pass repeats its step and starts job 4 at 3 too, as a pass
    again at 3 would (before, a replay started it at 4, when job 1 ended, beside job 2)."""
    jobs = [TraceJob(1, 0, 4, 5, 2), TraceJob(2, 0, 1, 1, 3), TraceJob(3, 3, 1, 3, 1),
            TraceJob(4, 3, 1, 3, 1)]
    qsim = Qsim(jobs, build_machine(load_description("flat:4")), builtin_policy("fcfs"),
                Backfill.SLACK)
    result = replay_checking_fixed_point(qsim, "flat:4 slack")
    assert {o.jobid: o.start_time for o in result.outcomes} == {1: 0, 2: 4, 3: 3, 4: 3}


@pytest.mark.parametrize("backfill", [Backfill.EASY, Backfill.CONSERVATIVE, Backfill.SLACK])
def test_a_mapped_job_is_not_drained_onto_its_booked_node(backfill: Backfill) -> None:
    """flat:4; node 1 is booked over [1, 2) and queue `mapped` runs only there. Job 2 (mapped,
    2 s) cannot start at 0; its drain was made at 0, the flat planner counting node 1 free
    then though booked from 1, which held a node of the count back from now: job 5 waited, and
    a pass again at 0, with node 1 taken by job 3 until 1, drained job 2 at 1 and started job
    5. The drain is at 2, after the booking, and every job but job 2 starts at 0."""
    jobs = [TraceJob(1, 0, 1, 1, 1), TraceJob(2, 0, 2, 2, 1, queue="mapped"),
            *(TraceJob(i, 0, 1, 1, 1) for i in (3, 4, 5))]
    qsim = Qsim(jobs, build_machine(load_description("flat:4")), builtin_policy("fcfs"),
                backfill, reservations=[Reservation("r", start=1, duration=1, places=("1",))])
    qsim.queue_places = {"mapped": frozenset({"1"})}
    result = replay_checking_fixed_point(qsim, f"flat:4 booked node {backfill}")
    assert {o.jobid: o.start_time for o in result.outcomes} == {1: 0, 2: 2, 3: 0, 4: 0, 5: 0}


# ---- drawn settings ------------------------------------------------------------------------


@st.composite
def policies(draw) -> UtilityFunction:
    name = draw(st.sampled_from(["fcfs", "wfp3", "balanced", "fairshare"]))
    if name == "balanced":
        return builtin_policy(name, {"balance_factor": draw(st.sampled_from([0.0, 0.5, 1.0]))})
    return builtin_policy(name)


def owned(draw, jobs: list[TraceJob]) -> list[TraceJob]:
    """`jobs` with drawn owners (fairshare ranks by the owner's usage)."""
    return [dataclasses.replace(j, user=draw(st.sampled_from(USERS))) for j in jobs]


def tune(draw, qsim: Qsim) -> None:
    """Maybe tune W and BF during the replay (seed 000 §3.4): checks every few seconds, so
    the settings change between passes."""
    rules = [r for r in ("w-utilization-trend", "bf-queue-depth")
             if r != "bf-queue-depth" or "balance_factor" in qsim.policy.options]
    chosen = draw(st.lists(st.sampled_from(rules), unique=True, max_size=2))
    if chosen:
        scheme = parse_scheme({"check_interval": draw(st.integers(1, 10)),
                               "rules": [{"example": r, "threshold": 0.1}
                                         if r == "bf-queue-depth" else r for r in chosen]},
                              "drawn")
        QsimTuning(qsim, scheme)


def failures_of(draw, units: list[str]) -> list[FailureEvent]:
    """Up to two failures of the machine's failure units (nodes, midplanes) in the first 60 s."""
    return sorted(draw(st.lists(st.builds(FailureEvent, st.integers(0, 60),
                                          st.sampled_from(units)), max_size=2)),
                  key=lambda f: (f.time, f.component))


# ---- flat and Blue Gene/P, every feature but layouts ---------------------------------------


@SETTINGS
@given(data=st.data())
@pytest.mark.parametrize("backfill", SCHEMES)
def test_no_second_pass_starts_anything(data, backfill: Backfill) -> None:
    kind: MachineKind = data.draw(st.sampled_from([FLAT4, FLAT8, FLAT13, BGP]))
    window = data.draw(st.integers(1, 3))
    policy = data.draw(policies())
    jobs = owned(data.draw, data.draw(workloads(kind, max_jobs=12, span=30)))
    machine = kind.build()
    names = ([str(n) for n in range(kind.nodes)] if kind.is_flat else machine.names)
    for name in data.draw(st.sets(st.sampled_from(names), max_size=2)):
        machine.set_scheduled(name, False)
    places = {}
    if data.draw(st.booleans()):
        mapped = data.draw(st.sets(st.sampled_from(names), min_size=1, max_size=len(names)))
        places = {"mapped": frozenset(mapped)}
        jobs = [dataclasses.replace(j, queue=data.draw(st.sampled_from(["default", "mapped"])))
                for j in jobs]
    reservations = data.draw(st.one_of(st.just([]), reserved(kind)))
    if reservations:
        members = data.draw(st.sets(st.sampled_from([j.jobid for j in jobs])))
        jobs = [dataclasses.replace(j, queue="R.r0") if j.jobid in members else j for j in jobs]
    limit = data.draw(st.sampled_from([None, None, 2]))
    queue_config = None
    if limit is not None:
        # Every queue, a reservation's too (Qsim would give it the replay's policy by name).
        named = {j.queue for j in jobs} | {r.queue_name for r in reservations}
        queue_config = [{**default_queue(q, None), "restrictions": {"maxrunning": limit}}
                        for q in sorted(named)]
    qsim = Qsim(jobs, machine, policy, backfill, window=window,
                failures=failures_of(data.draw, machine.failure_units()), repair_time=7.0,
                reservations=reservations or None, queue_config=queue_config,
                slack=SlackSettings(goal=data.draw(st.sampled_from(list(Goal)))))
    qsim.queue_places = places
    tune(data.draw, qsim)
    replay_checking_fixed_point(qsim, f"{kind.label} {backfill} W={window} {policy.name}")


# ---- queue layouts (seed 002): partitions, the rest, the common pool -------------------------


@st.composite
def layout_workloads(draw, bgp: bool) -> list[TraceJob]:
    """Jobs every queue of the layout takes: flat:8 HYBRID's (1-4 nodes, routed by size) or
    bgp-2rack TWO_RACKS's (queue a up to a rack, b up to a midplane)."""
    jobs = []
    for jobid in draw(st.permutations(range(1, draw(st.integers(1, 12)) + 1))):
        queue = draw(st.sampled_from(["a", "b"])) if bgp else "default"
        nodes = (draw(st.sampled_from([1, 128, 512, 600, 1024][: 3 if queue == "b" else 5]))
                 if bgp else draw(st.integers(1, 4)))
        # Short runs and close arrivals: jobs queue up and their priority factors (slowdowns)
        # pass τ_pf, so the pool takes some.
        requested = draw(st.one_of(st.integers(1, 4), st.integers(1, 30)))
        jobs.append(TraceJob(jobid, draw(st.integers(0, 12)), draw(st.integers(1, requested)),
                             requested, nodes, user=draw(st.sampled_from(USERS)), queue=queue))
    return jobs


@SETTINGS
@given(data=st.data())
@pytest.mark.parametrize("backfill", SCHEMES)
def test_no_second_pass_starts_anything_under_a_queue_layout(data, backfill: Backfill) -> None:
    bgp = data.draw(st.booleans())
    text = TWO_RACKS if bgp else HYBRID
    if not data.draw(st.booleans()):  # no pool
        text = text.replace("common_pool: 512", "common_pool: 0").replace(
            "common_pool: 2", "common_pool: 0")
    layout, _ = parse_layout(text, "layout.yaml")
    machine = build_machine(load_description("bgp-2rack" if bgp else "flat:8"))
    window = data.draw(st.integers(1, 3))
    policy = data.draw(policies())
    qsim = Qsim(data.draw(layout_workloads(bgp)), machine, policy, backfill, window=window,
                failures=failures_of(data.draw, machine.failure_units()), repair_time=7.0,
                slack=SlackSettings(goal=data.draw(st.sampled_from(list(Goal)))),
                queue_layout=layout)
    replay_checking_fixed_point(
        qsim, f"{'bgp-2rack' if bgp else 'flat:8'} layout {backfill} W={window} {policy.name}")
