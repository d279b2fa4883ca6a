"""Fair start time and unfair jobs (seed 000 §4.2, after Sabin et al.), from a replay's records.

A job's fair start time (FST) is the start it would get under the policy in force at its
submission if no job arrived after it. Two ways to compute it (docs/metric-aware.md, "Fair start
time"); every table says which one it used:

* ``replay`` (the definition): fork the replay at the job's submission (the jobs running then
  keep their places and end when they really ended; the jobs queued then, the job included, wait)
  and run the real `Scheduler` with that instant's policy, backfilling and window, with no
  arrivals, until the job starts. A job that really started before the next arrival (with the
  same settings still in force) needs no fork: up to that arrival the fork and the replay are the
  same run, so its FST is its start.
  Under FCFS, W = 1, EASY or no backfilling, whole times and a flat machine, one fork serves
  consecutive jobs (`_SharedFork`; docs/metric-aware.md, D000-5, "Shared forks").
* ``estimate`` (cheaper): one plan at the submission instant. The running jobs end at their
  requested times; the queued jobs, in the policy's rank order at that instant, each start now if
  they fit or reserve their earliest place (conservative backfilling's plan); the job's place in
  that plan is its FST. It ignores the window and the real run times.

A job is unfair when it started more than `TOLERANCE` seconds after its FST. Queued and running
are read from the outcomes with Qsim's event order: at one instant, ends come first, then
submissions in (submit, jobid) order, then the pass; so at job j's submission the running jobs
are those with start < t < end, the queued ones those submitted no later than j (in that order)
with start >= t.

This module serves any study that needs the FST (seed 001 later): it needs only the outcomes, an
empty machine of the replay's kind and the settings in force over time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import Machine
from cobaltlite.policy.utility import PassInputs, UtilityFunction, fcfs
from cobaltlite.qsim.engine import Qsim, SimJob
from cobaltlite.qsim.fork import ForkedReplay
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import Backfill

FairStartMethod = Literal["replay", "estimate"]
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Settings:
    """What decided the schedule at one instant."""

    policy: UtilityFunction
    window: int


SettingsAt = Callable[[float], Settings]


@dataclass
class _Handover:
    """A shared fork's state handed on to a fork of its own (`_SharedFork.start_job`): jobs
    running (with their start and place) and waiting at `now`, the jobs it serves, and where the
    submissions it reads resume (None: no job joins it)."""

    now: float
    running: list[SimJob]
    queued: list[SimJob]
    serving: list[int]
    next_submission: int | None


class _SharedFork(ForkedReplay):
    """One forked replay serving consecutive jobs (docs/metric-aware.md, D000-5, "Shared forks").

    Used only where `fixed_order` holds (FCFS, whole times) on a flat machine. It starts as the
    fork of its first job (the head); each later job joins at its submission, last in the queue,
    while the fork is open. A joined job j is tried last in every pass, so until it starts it
    changes no other job's start: the fork is the fork of j as well. When j can start, that
    instant is its FST; j really starts (and the fork goes on as the fork of j, for the jobs
    after it) only if every job served before j has started. Otherwise the forks of the earlier
    jobs must not hold j and those of the later ones must hold it started: j leaves this fork,
    which serves only the earlier jobs from then on and takes no new job, and the later jobs are
    handed on (`handed_on`) to a fork of their own that starts from this instant with j started.
    """

    fixed_order = True

    def __init__(self, machine: Machine, settings: Settings, backfill: Backfill,
                 fair: dict[int, float], submissions: Sequence[JobOutcome],
                 next_submission: int | None) -> None:
        super().__init__([], machine, settings.policy, backfill, window=settings.window)
        self.settings = settings
        self.fair = fair
        self.serving: dict[int, None] = {}
        """The jobs whose FST this fork seeks and has not found yet, in submission order."""
        self.submissions = submissions
        self.next_submission = next_submission
        """Index in `submissions` of the next job to join; None once the fork is closed."""
        self.handed_on: list[_Handover] = []

    def start_job(self, jobid: int, location: str) -> bool:
        serving = self.serving
        if jobid not in serving:
            return Qsim.start_job(self, jobid, location)
        now = self.clock.now()
        self.fair[jobid] = now
        if next(iter(serving)) == jobid:
            del serving[jobid]
            return Qsim.start_job(self, jobid, location)
        order = list(serving)
        later = order[order.index(jobid) + 1:]
        job = self._queue.pop(jobid)
        for other in (jobid, *later):
            del serving[other]
        running = [_copy(j, j.start_time, j.location) for j in self._running.values()]
        running.append(_copy(job, now, location))
        # Later jobs leave too: they wait in the handed-on fork (the queue keeps its order).
        queued = [_copy(j) for j in self._queue.values()]
        for other in later:
            del self._queue[other]
        self.handed_on.append(_Handover(now, running, queued, later, self.next_submission))
        self.next_submission = None
        return False

    def run_serving(self, settings_at: SettingsAt) -> None:
        """Until every job served has its FST: `ForkedReplay.run_to_target` with the later
        submissions joining as events, after the ends of their instant and before its pass, as
        in Qsim. A job joins only while the fork is open and the settings in force at its
        submission are the fork's; the first pass is at the fork's own instant."""
        ends, queue, running = self._ends, self._queue, self._running
        machine, clock, iterate = self._machine, self.clock, self.scheduler.iterate
        pop, release = heapq.heappop, machine.release
        submissions, settings = self.submissions, self.settings
        inf = float("inf")
        t = clock.now()
        while True:
            i = self.next_submission
            while i is not None and i < len(submissions) and submissions[i].submit_time == t:
                if settings_at(t) != settings:
                    i = None
                    break
                o = submissions[i]
                queue[o.jobid] = _waiting(o)
                self.serving[o.jobid] = None
                i += 1
            self.next_submission = i
            if queue and machine.has_free_capacity():
                iterate()
            if not self.serving:
                return
            i = self.next_submission
            t = min(ends[0][0] if ends else inf,
                    submissions[i].submit_time if i is not None and i < len(submissions) else inf)
            if t == inf:
                raise AssertionError(f"jobs {list(self.serving)} never started in their fork")
            clock.advance_to(t)
            while ends and ends[0][0] == t:
                jobid = pop(ends)[1]
                del running[jobid]
                release(jobid)


def fair_start_times(
    outcomes: Sequence[JobOutcome],
    machine: Machine,
    backfill: Backfill,
    settings_at: SettingsAt,
    method: FairStartMethod = "replay",
    share_forks: bool = True,
) -> dict[int, float]:
    """{jobid: fair start time} for every outcome. `machine` must hold nothing; it is reused
    for every fork and left empty. `share_forks=False` gives every job a fork of its own even
    where one fork can serve consecutive jobs (the results are the same; tests compare them)."""
    fair: dict[int, float] = {}
    by_submit = sorted(outcomes, key=lambda o: (o.submit_time, o.jobid))
    n = len(by_submit)
    whole_times = method == "replay" and _whole_times(outcomes, machine)
    flat = isinstance(machine, FlatMachine)
    for i, (target, t, running, queued) in enumerate(_states_at_submission(outcomes)):
        if target.jobid in fair:
            continue  # a shared fork found it
        settings = settings_at(t)
        next_arrival = by_submit[i + 1].submit_time if i + 1 < n else float("inf")
        if (method == "replay" and target.start_time < next_arrival
                and settings_at(target.start_time) is settings):
            # Until the next arrival the fork and the replay are the same run (same state, same
            # events, same settings), so a job that started before it started at its FST.
            fair[target.jobid] = target.start_time
            continue
        try:
            if method == "estimate":
                fair[target.jobid] = _planned_start(target, t, running, queued, machine,
                                                    settings.policy)
            elif share_forks and flat and _ranks_by_submission(settings, backfill, whole_times):
                start = _Handover(t, [_sim_job(o) for o in running],
                                  [_waiting(o) for o in queued], [target.jobid], i + 1)
                _serve(start, machine, settings, backfill, fair, by_submit, settings_at)
            else:
                fair[target.jobid] = _forked_start(target, t, running, queued, machine,
                                                   backfill, settings, whole_times)
        finally:
            _empty(machine)
    return fair


def _serve(start: _Handover, machine: Machine, settings: Settings, backfill: Backfill,
           fair: dict[int, float], submissions: Sequence[JobOutcome],
           settings_at: SettingsAt) -> None:
    """Run the shared fork `start` describes, then every fork handed on from it, one at a time
    on `machine`, until each job they serve has its FST."""
    pending = [start]
    while pending:
        state = pending.pop()
        fork = _SharedFork(machine, settings, backfill, fair, submissions, state.next_submission)
        try:
            fork.resume(state.now, state.running, state.queued)
            fork.serving = dict.fromkeys(state.serving)
            fork.run_serving(settings_at)
        finally:
            _empty(machine)
        pending.extend(fork.handed_on)


def _empty(machine: Machine) -> None:
    for jobid in list(machine.held_by()):
        machine.release(jobid)


def unfair_jobs(outcomes: Sequence[JobOutcome], fair: dict[int, float]) -> int:
    """How many jobs started later than their fair start time."""
    return sum(1 for o in outcomes if o.start_time > fair[o.jobid] + TOLERANCE)


def _states_at_submission(
    outcomes: Sequence[JobOutcome],
) -> Iterator[tuple[JobOutcome, float, list[JobOutcome], list[JobOutcome]]]:
    """(job, its submit time, running then, queued then incl. the job) in submission order."""
    by_submit = sorted(outcomes, key=lambda o: (o.submit_time, o.jobid))
    by_start = sorted(outcomes, key=lambda o: (o.start_time, o.jobid))
    running: dict[int, JobOutcome] = {}
    ends: list[tuple[float, int]] = []
    queued: dict[int, JobOutcome] = {}
    started_i = 0
    for job in by_submit:
        t = job.submit_time
        queued[job.jobid] = job
        while started_i < len(by_start) and by_start[started_i].start_time < t:
            done = by_start[started_i]
            started_i += 1
            queued.pop(done.jobid, None)
            running[done.jobid] = done
            heapq.heappush(ends, (done.end_time, done.jobid))
        while ends and ends[0][0] <= t:
            running.pop(heapq.heappop(ends)[1], None)
        yield job, t, list(running.values()), list(queued.values())


def _sim_job(o: JobOutcome) -> SimJob:
    return SimJob(jobid=o.jobid, size=o.nodes, wall_time=o.requested_time, run_time=o.run_time,
                  submit_time=o.submit_time, user_name=o.user, project=o.project, queue=o.queue,
                  start_time=o.start_time, location=o.location)


def _forked_start(target: JobOutcome, t: float, running: list[JobOutcome],
                  queued: list[JobOutcome], machine: Machine, backfill: Backfill,
                  settings: Settings, whole_times: bool) -> float:
    fork = ForkedReplay([], machine, settings.policy, backfill, window=settings.window)
    fork.target = target.jobid
    fork.fixed_order = _ranks_by_submission(settings, backfill, whole_times)
    _resume(fork, t, running, queued)
    return fork.run_to_target()


def _ranks_by_submission(settings: Settings, backfill: Backfill, whole_times: bool) -> bool:
    """Under FCFS with whole times the rank order is the queue's order at every pass (the queued
    jobs come in (submission, jobid) order from _states_at_submission); W = 1 and EASY or no
    backfilling make the jobs that cannot fit irrelevant (`ForkedReplay.schedulable_jobs`)."""
    return (whole_times and settings.window == 1 and settings.policy.function is fcfs
            and backfill in (Backfill.EASY, Backfill.NONE))


def _resume(fork: ForkedReplay, t: float, running: list[JobOutcome],
            queued: list[JobOutcome]) -> None:
    """Fork the replay at `t`: `running` keep their places, `queued` wait."""
    fork.resume(t, [_sim_job(o) for o in running], [_waiting(o) for o in queued])


def _waiting(o: JobOutcome) -> SimJob:
    """`o` as a job not started yet (SimJob's defaults for start and place)."""
    return SimJob(o.jobid, o.nodes, o.requested_time, o.run_time, o.submit_time, o.user,
                  o.project, o.queue)


def _copy(job: SimJob, start_time: float = -1.0, location: str = "") -> SimJob:
    """A fork's job for another fork (a fork changes its jobs as they start): not started, or
    started at `start_time` on `location`."""
    return SimJob(job.jobid, job.size, job.wall_time, job.run_time, job.submit_time,
                  job.user_name, job.project, job.queue, start_time=start_time,
                  location=location)


def _whole_times(outcomes: Sequence[JobOutcome], machine: Machine) -> bool:
    """True when every job is placeable and every time of the outcomes (submission, start, end,
    requested time) is a whole number of seconds below 2**52: then every time a fork computes
    (ends, queued times) is exact, so FCFS ranks the queue by (submission, jobid) at every pass.
    Checked once for all the forks."""
    limit = 2.0 ** 52
    for o in outcomes:
        for x in (o.submit_time, o.start_time, o.end_time, o.requested_time):
            x = float(x)
            if not (x.is_integer() and -limit < x < limit):
                return False
    return all(machine.allocation_size(n) is not None for n in {o.nodes for o in outcomes})


def _planned_start(target: JobOutcome, t: float, running: list[JobOutcome],
                   queued: list[JobOutcome], machine: Machine, policy: UtilityFunction) -> float:
    for o in running:
        machine.allocate(o.location, o.jobid, o.start_time + o.requested_time)
    jobs = [_sim_job(o) for o in queued]
    for job in jobs:
        job.queued_time = t - job.submit_time
    policy.score_jobs(jobs, PassInputs(now=t, machine_size=machine.total_nodes,
                                       n_s=machine.min_block_size))
    jobs.sort(key=lambda j: j.jobid)
    jobs.sort(key=lambda j: j.score, reverse=True)
    planner = machine.planner(t)
    for job in jobs:
        if planner.plan_now(job.size, job.wall_time):
            start = t
        else:
            start = planner.reserve_earliest(job.size, job.wall_time)[0]
        if job.jobid == target.jobid:
            return start
    raise AssertionError(f"job {target.jobid} is not in its own queue")
