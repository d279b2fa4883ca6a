"""Forked replays: the real `Scheduler` run forward from a state on a virtual clock, no arrivals.

Two users: the fair start time (qsim/fairness.py forks at a job's submission and runs until that
job starts) and the estimated start times `qstat -f` and `showstart` show (`estimate_start_times`:
fork from the present and run until every queued job has started). In both, a fork's only events
are job ends, each followed by a scheduling pass, as in Qsim.run; the running jobs end at the
times the caller gives them (the estimate: their requested wall times).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any

from cobaltlite.jobs import lifecycle
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.policy.utility import PassInputs, UtilityFunction, default, fcfs, high_prio
from cobaltlite.qsim.engine import Qsim, SimJob
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.scheduler import Backfill

_by_jobid = attrgetter("jobid")
_by_score = attrgetter("score")
FIXED_RANK_FUNCTIONS = (fcfs, default, high_prio)
"""Builtins whose rank order never changes while jobs wait: FCFS's scores all grow alike (exactly
so when times are whole seconds, see fairness.py's `_whole_times`); the others ignore time."""


class TargetStarted(Exception):
    """Raised inside a forked replay the moment its target job starts."""


class ForkedReplay(Qsim):
    target = -1
    """The job whose start ends `run_to_target`."""
    fixed_order = False
    """Set when the queue's rank order is the same at every pass and the queue is resumed in
    that order (`rank_is_fixed`): passes then see only the jobs that can matter
    (`schedulable_jobs`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starts: dict[int, float] = {}
        """Every job the fork started, with its start time."""

    def ranked_jobs(self) -> None:
        """None: a fork changes its queue itself (fairness hands jobs on between forks), and
        under `fixed_order` `schedulable_jobs` keeps only the jobs that matter."""
        return None

    def schedulable_jobs(self) -> list[SimJob]:
        """The queue, scored; under `fixed_order`, only the jobs that can matter to this pass.

        Under `fixed_order` the queue is kept in rank order (the caller resumes it so, and a
        job joining later ranks last), which holds at every pass. A job needs at least its size
        in idle nodes to start, and idle nodes only shrink during a pass. So when no queued job
        fits, the pass starts nothing and is skipped (a fork has no arrivals; a pass changes
        nothing but by starting jobs). Otherwise, of the jobs that do not fit, only the first in
        rank order can be the pass's top job (the one EASY protects); the others are tried only
        by the cut and the backfill, which cannot place them, and W = 1 reserves nothing for
        them. Dropping them changes no start; the jobs kept are scored as the full queue would
        score them: FCFS's score and threshold, the queued time, are set here directly; the
        other FIXED_RANK_FUNCTIONS ignore time, so the scores the jobs were resumed with stand
        (estimate_start_times scores them)."""
        if not self.fixed_order:
            return super().schedulable_jobs()
        idle = self._machine.idle_nodes()
        kept: list[SimJob] = []
        blocked = False
        for job in self._queue.values():
            if job.size <= idle:
                kept.append(job)
            elif not blocked:
                blocked = True
                kept.append(job)
        if len(kept) == blocked:
            return []
        if self.policy.function is fcfs:
            now = self.clock.now()
            for job in kept:
                job.queued_time = job.score = job.threshold = now - job.submit_time
        return kept

    def run_forward(self) -> None:
        """A pass now, then Qsim.run's loop for a fork until the queue is empty or nothing can
        change any more: a fork has no arrivals, failures or hooks, so its events are the job
        ends and the reservation periods' starts and ends (as Qsim.run gives up on them: once
        only they are left and each has ended or gone round once), each followed by the pass;
        an end only frees the job's place (no outcome, sample or load is kept for a fork)."""
        ends, queue, running = self._ends, self._queue, self._running
        machine, clock, iterate = self._machine, self.clock, self.scheduler.iterate
        pop, release = heapq.heappop, machine.release
        inf = float("inf")
        reserved = bool(self._reservations)
        next_window = self._next_boundary(clock.now()) if reserved else inf
        give_up = inf
        if queue:
            iterate()
        while queue and (ends or next_window < inf):
            t = ends[0][0] if ends else inf
            if reserved:
                if next_window <= t:
                    t = next_window
                give_up = self._reservations_give_up(t, bool(ends), give_up)
                if t > give_up:
                    return
                next_window = self._next_boundary(t)
                self._close_ended_reservations(t)
            clock.advance_to(t)
            while ends and ends[0][0] == t:
                jobid = pop(ends)[1]
                del running[jobid]
                release(jobid)
            if queue and machine.has_free_capacity():
                iterate()

    def run_to_target(self) -> float:
        """Run forward until `target` starts; return its start time."""
        try:
            self.run_forward()
        except TargetStarted:
            return self.clock.now()
        raise AssertionError(f"job {self.target} never started in its forked replay")

    def start_job(self, jobid: int, location: str) -> bool:
        started = super().start_job(jobid, location)
        if started:
            self.starts[jobid] = self.clock.now()
            if jobid == self.target:
                raise TargetStarted
        return started


def estimate_start_times(
    machine: Machine,
    now: float,
    running: Sequence[SimJob],
    queued: Sequence[SimJob],
    policy: UtilityFunction,
    backfill: Backfill,
    window: int = 1,
    queue_config: Sequence[Mapping[str, Any]] | None = None,
    policies: Mapping[str, UtilityFunction] | None = None,
    queue_places: Mapping[str, PlaceSet] | None = None,
    reservations: Sequence[Reservation] = (),
) -> dict[int, float]:
    """{jobid: estimated start} for the `queued` jobs that can start: a fork from `now` in
    which each running job ends at its start plus its requested `wall_time` (at `now` if that
    is past) and each queued job runs for its requested time.

    `machine` must hold nothing (a what-if copy of the real one, failed components and all); it
    is left empty. The jobs given are copied, never changed. `queue_config` and `policies` are
    Qsim's (per-queue policies and running limits); without them every job is scored by
    `policy`. `queue_places` maps queues to the places their jobs may use (partadm --queue);
    `reservations` (setres) are held over their periods as in Qsim. A job missing from the
    answer never starts in the fork (no place can hold it).
    """
    fork = ForkedReplay([], machine, policy, backfill, queue_config=queue_config,
                        policies=policies, window=window, reservations=reservations)
    # The pruning's argument knows nothing of reservations: with one, every pass sees all.
    fork.fixed_order = not reservations and rank_is_fixed(policy, backfill, window,
                                                          queue_config, policies)
    fork.queue_places = dict(queue_places or {})
    # Fresh copies (a new job's status), as fairness.py's forks build theirs.
    ending = [replace(job, run_time=max(job.wall_time, now - job.start_time),
                      status=lifecycle.NEW) for job in running]
    waiting = [replace(job, run_time=job.wall_time, status=lifecycle.NEW, start_time=-1.0,
                       location="", queued_time=now - job.submit_time) for job in queued]
    if fork.fixed_order:  # resumed in rank order, which every later pass keeps
        policy.score_jobs(waiting, PassInputs(now, machine.total_nodes, machine.min_block_size))
        waiting.sort(key=_by_jobid)
        waiting.sort(key=_by_score, reverse=True)
    try:
        fork.resume(now, ending, waiting)
        fork.run_forward()
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)
    return fork.starts


def rank_is_fixed(policy: UtilityFunction, backfill: Backfill, window: int,
                  queue_config: Sequence[Mapping[str, Any]] | None = None,
                  policies: Mapping[str, UtilityFunction] | None = None) -> bool:
    """True when a fork may use `fixed_order`: W = 1, EASY or no backfilling (the pruning's
    argument), no running limits (they hold jobs back pass by pass), and every queue scored by
    `policy`, one of FIXED_RANK_FUNCTIONS."""
    if (window != 1 or backfill not in (Backfill.EASY, Backfill.NONE)
            or policy.function not in FIXED_RANK_FUNCTIONS):
        return False
    for queue in queue_config or ():
        if queue["restrictions"]:
            return False
        # Two policies rank against each other differently as time goes (FCFS's scores grow,
        # default's do not): every queue must use this one.
        if queue["policy"] is not None and \
                (policies or {}).get(queue["policy"], policy).function is not policy.function:
            return False
    return True
