"""Forked replays: the real `Scheduler` run forward from a state on a virtual clock, no arrivals.

Two users: the fair start time (qsim/fairness.py forks at a job's submission and runs until that
job starts) and the estimated start times `qstat -f` and `showstart` show (`estimate_start_times`:
fork from the present and run until every queued job has started). In both, a fork's only events
are job ends, each followed by a scheduling pass, as in Qsim.run; the running jobs end at the
times the caller gives them (the estimate: their requested wall times). An estimate may take
shortcuts that give the same starts (docs/architecture.md, "Estimated start times"): passes that
see only the jobs that matter (`WaitingColumns`), and under conservative backfilling one plan
after the first instant instead of the passes after it (`plan_is_the_schedule`): the schedule
itself on a flat machine, followed forward on Blue Gene/P (qsim/followed_plan.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any

from cobaltlite.jobs import lifecycle
from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.policy.utility import (
    ARRAY_FUNCTIONS,
    JOB_INPUTS,
    PassInputs,
    UtilityFunction,
    balanced,
    default,
    fcfs,
    high_prio,
)
from cobaltlite.qsim.engine import Qsim, SimJob
from cobaltlite.qsim.followed_plan import follow_the_plan
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.plan import LastReservations
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.scheduler.slack import SlackState

_by_jobid = attrgetter("jobid")
_by_score = attrgetter("score")
FIXED_RANK_FUNCTIONS = (fcfs, default, high_prio)
"""Builtins whose rank order never changes while jobs wait: FCFS's scores all grow alike (exactly
so when times are whole seconds, see fairness.py's `_whole_times`); the others ignore time.
`balanced` with balance factor 1 ranks as FCFS does too (`ranks_in_one_order`)."""


class TargetStarted(Exception):
    """Raised inside a forked replay the moment its target job starts."""


class ForkedReplay(Qsim):
    target = -1
    """The job whose start ends `run_to_target`."""
    fixed_order = False
    """Set when the queue's rank order is the same at every pass and the queue is resumed in
    that order (`ranks_in_one_order`, `_pruning_holds`): passes then see only the jobs that
    can matter (`schedulable_jobs`)."""
    columns: WaitingColumns | None = None
    """Set (by `estimate_start_times`, after `resume`) when a pass may see only the jobs that
    can matter, found and ranked with array operations (`WaitingColumns.ranked_that_matter`);
    the queue takes no job after it is set."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starts: dict[int, float] = {}
        """Every job the fork started, with its start time."""

    def ranked_jobs(self) -> list[SimJob] | None:
        """With `columns`, the jobs that matter to this pass in rank order (their policy gives
        bare scores, so the pass needs no score); else None: a fork changes its queue itself
        (fairness hands jobs on between forks), and under `fixed_order` `schedulable_jobs` keeps
        only the jobs that matter."""
        if self.columns is None:
            return None
        return self.columns.ranked_that_matter(self._machine.idle_nodes(), self.clock.now(),
                                               self._inputs)

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
        (estimate_start_times scores them), and `balanced`'s, which only scale with time, still
        rank them as the full queue's would (bare scores: no job passes the top one)."""
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

    def run_forward(self, until: float = float("inf")) -> None:
        """A pass now, then Qsim.run's loop for a fork until the queue is empty or nothing can
        change any more: a fork has no arrivals, failures or hooks, so its events are the job
        ends and the reservation periods' starts and ends (as Qsim.run gives up on them: once
        only they are left and each has ended or gone round once), each followed by the pass;
        an end only frees the job's place (no outcome, sample or load is kept for a fork).
        Events after `until` are left to come."""
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
            if min(t, next_window) > until:
                return
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

    def running_ends(self) -> list[tuple[float, int]]:
        """(end, jobid) of every running job."""
        return list(self._ends)

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
            if self.columns is not None:
                self.columns.started(jobid)
            if jobid == self.target:
                raise TargetStarted
        return started


SCORE_BAND = 1e-9
"""Relative width of the band below the best array score whose jobs are scored again one by one:
far wider than the few units in the last place by which numpy's loops and Python's float
operations can differ, so the job the exact scores rank first is always among them."""


class WaitingColumns:
    """An estimate's queued jobs as numpy columns, for passes that see only the jobs that matter.

    Under W = 1 and EASY or no backfilling a pass depends only on the jobs that fit the idle
    nodes and on the best-ranked job of the others (it may be the top job): the argument of
    `ForkedReplay.schedulable_jobs`, which holds for any rank order. (Asking the machine for a
    free place of each size and place set instead, per pass, cost more than it saved on
    Intrepid.) Finding and ranking the jobs by a loop over the queue costs Python work for every
    queued job at every pass; here it is a few array operations, and the pass is handed the jobs
    kept already ranked (`ForkedReplay.ranked_jobs`), as Qsim hands a fixed-order queue: the
    policy gives bare scores, so the pass reads no score.

    `fixed`: `jobs` come in rank order, which every pass keeps (`ranks_in_one_order`). Otherwise
    (`scores_in_one_go`) every pass scores all the jobs in one call of the policy's function
    on the columns. numpy's floating point may differ from Python's in the last bits, which can
    only swap jobs whose array scores lie within SCORE_BAND of each other: those jobs are scored
    again exactly, one by one as a full pass scores them, and ranked by those scores (then by
    job id). A non-finite array score (a zero wall time) sends every job to the exact scoring,
    which then fails as a full pass would. A policy scored per user (`fairshare`,
    `UtilityFunction.scores_per_user`) is scored exactly instead: one call per user at each
    pass (usage changes as the fork starts jobs, continuously in time, so once per instant
    suffices, as in a full pass), ranked by score and then job id with no near tie to settle.

    `reserving` (conservative backfilling on Blue Gene/P, scored): a pass depends on every job
    ranked up to the last one that fits the idle nodes, which it is handed
    (`_ranked_to_the_last_that_fits`).
    """

    def __init__(self, jobs: Sequence[SimJob], machine: Machine, policy: UtilityFunction,
                 fixed: bool, reserving: bool = False) -> None:
        import numpy as np

        self._np = np
        # Scored jobs are kept in job id order, so a stable sort on scores ranks ties by id.
        self._jobs = list(jobs) if fixed else sorted(jobs, key=_by_jobid)
        self._objects = np.empty(len(self._jobs), dtype=object)
        self._objects[:] = self._jobs  # jobs picked by an index array in one step
        self._index = {job.jobid: i for i, job in enumerate(self._jobs)}
        self._policy = policy
        self._fixed = fixed
        self._reserving = reserving
        self._size = np.array([job.size for job in self._jobs], dtype=np.int64)
        # A job no place can hold is never the top job (the pass passes over it): leave it out.
        self._waiting = np.array([machine.allocation_size(job.size) is not None
                                  for job in self._jobs], dtype=bool)
        self._submit = np.array([job.submit_time for job in self._jobs], dtype=np.float64)
        self._columns = {} if fixed else {
            name: np.array([getattr(job, name) for job in self._jobs])
            for name in policy.parameters if name in JOB_INPUTS and name != "queued_time"}
        self._queue_stats: tuple[float, float, float] | None = None
        """For a policy reading queue statistics: the earliest submission and the longest and
        shortest wall times of the jobs not started, kept until a job holding one starts."""
        self._order = np.flatnonzero(self._waiting)
        """Scored: the waiting jobs (positions) in the last pass's order by array score."""
        self._exact = policy.scores_per_user
        """The array scores are the exact ones (`_scores_per_user`): no near tie to settle."""
        users: dict[str, SimJob] = {}
        if self._exact:
            for job in self._jobs:
                users.setdefault(job.user_name, job)
        self._one_per_user = list(users.values())
        """With `_exact`: a job of each user; `_user`, each job's user as a position in it."""
        numbers = {user: k for k, user in enumerate(users)}
        self._user = np.array([numbers[job.user_name] for job in self._jobs] if users else [],
                              dtype=np.int64)
        self._least: int | None = None
        """`reserving`: the least size of the waiting jobs (None: to be found again), kept
        until a job of that size starts, so that a pass no job fits costs no array work."""
        self._queued = np.ones(len(self._jobs), dtype=bool)
        """The jobs not started, those no place can hold included: a full pass scores them
        all, so the queue statistics some policies read (`balanced`) are taken over them."""

    def started(self, jobid: int) -> None:
        i = self._index[jobid]
        self._waiting[i] = self._queued[i] = False
        if self._size[i] == self._least:
            self._least = None  # it may have been the only one of that size
        stats = self._queue_stats
        if stats is not None and (self._submit[i] == stats[0]
                                  or self._columns["wall_time"][i] in stats[1:]):
            self._queue_stats = None  # it may have been the one they came from

    def ranked_that_matter(self, idle: int, now: float, inputs: PassInputs) -> list[SimJob]:
        """The jobs a pass at `now` with `idle` idle nodes must see, in rank order; [] when no
        job fits (the pass would start nothing)."""
        np = self._np
        waiting = self._waiting
        if self._reserving:
            least = self._least
            if least is None:
                if not waiting.any():
                    return []
                least = self._least = int(self._size[waiting].min())
            if idle < least:
                return []
            return self._ranked_to_the_last_that_fits(idle, now, inputs)
        kept = waiting & (self._size <= idle)
        if not kept.any():
            return []
        jobs = self._jobs
        if self._fixed:
            others = np.flatnonzero(waiting & ~kept)
            if others.size:
                kept[others[0]] = True
            return list(self._objects[kept])
        scores = self._array_scores(now, inputs)
        if scores is None:
            return self._waiting_ranked_exactly(now, inputs)
        order = self._by_array_score(scores)
        fits, close = kept[order], scores[order]
        first = int(fits.argmin())  # the best by array score of the jobs that do not fit
        if not fits[first]:
            if self._exact:  # exact scores: it is the best, then the lowest job id
                fits[first] = True
            else:
                # Those scoring within the band below it may rank first exactly; the order is
                # by score, so they come before the first job scoring below the band.
                low = close[first] - SCORE_BAND * abs(close[first])
                end = first + 1
                while end < len(close) and close[end] >= low:
                    end += 1
                contenders = [k for k in range(first, end) if not fits[k]]
                if len(contenders) > 1:
                    best_job = self._ranked_exactly(
                        [jobs[order[k]] for k in contenders], now, inputs)[0]
                    best = self._index[best_job.jobid]
                    first = next(k for k in contenders if order[k] == best)
                fits[first] = True
        return self._in_exact_order(order[fits], close[fits], None, now, inputs)

    def _by_array_score(self, scores: Any) -> Any:
        """The waiting jobs' positions by array score, highest first. The sort starts from the
        last pass's order, which changes little from pass to pass (a stable sort of a nearly
        sorted array is far cheaper); so equal array scores keep that order, not job id
        order, but equal scores are near ties, which `_in_exact_order` ranks exactly."""
        if self._exact:  # from job id order, which a stable sort keeps between equal scores
            order = self._np.flatnonzero(self._waiting)
            return order[self._np.argsort(-scores[order], kind="stable")]
        order = self._order
        order = order[self._waiting[order]]
        order = self._order = order[self._np.argsort(-scores[order], kind="stable")]
        return order

    def _ranked_to_the_last_that_fits(self, idle: int, now: float, inputs: PassInputs
                                      ) -> list[SimJob]:
        """Conservative backfilling (`reserving`): the waiting jobs in rank order up to the
        last one that fits the idle nodes. Every job ranked before it may matter (its
        reservation may keep a later job from starting now); the jobs after it cannot start
        in this pass, and their reservations come after every job that could."""
        np = self._np
        scores = self._array_scores(now, inputs)
        if scores is None:
            return self._waiting_ranked_exactly(now, inputs)
        chosen = self._by_array_score(scores)
        cut = len(chosen)
        # Most often the job ranked last fits (small jobs rank low under most policies), and
        # every job is handed.
        if self._size[chosen[-1]] > idle:
            cut = int(np.flatnonzero(self._size[chosen] <= idle)[-1]) + 1
        if self._exact:
            return self._objects[chosen[:cut]].tolist()
        close = scores[chosen]
        ties = self._near_ties(close)
        if cut < len(chosen):
            # Past the jobs whose array scores nearly tie with the last that fits: the exact
            # order may put any of them before it.
            beyond = np.flatnonzero(~ties[cut - 1:])
            cut += int(beyond[0]) if beyond.size else len(chosen) - cut
        return self._in_exact_order(chosen[:cut], close[:cut], ties[:cut - 1], now, inputs)

    def _in_exact_order(self, chosen: Any, close: Any, gaps: Any, now: float,
                        inputs: PassInputs) -> list[SimJob]:
        """The jobs of the index array `chosen`, in order of their array scores `close`
        (highest first), in the exact rank order: near ties (`gaps`, `_near_ties` of `close`
        when the caller has it, else None) scored again one by one."""
        np = self._np
        ranked: list[SimJob] = self._objects[chosen].tolist()
        if self._exact:
            return ranked
        if gaps is None:
            gaps = self._near_ties(close)
        if not gaps.any():
            return ranked
        # Near ties: score them exactly; every other pair is far enough apart to keep its
        # order, so one sort on the mixed scores gives the exact rank order.
        near = np.zeros(len(ranked), dtype=bool)
        near[1:] |= gaps
        near[:-1] |= gaps
        for job, score in zip(ranked, close.tolist(), strict=True):
            job.score = score
        self._ranked_exactly([ranked[i] for i in np.flatnonzero(near).tolist()], now, inputs)
        ranked.sort(key=_rank)
        return ranked

    def _array_scores(self, now: float, inputs: PassInputs) -> Any:
        """Every job's array score at `now`, or None when a waiting job's is not finite (the
        pass then ranks by exact scores, failing where a full pass fails)."""
        np = self._np
        inputs.now = now
        scores = self._scores(now, inputs)
        if np.isfinite(scores).all() or np.isfinite(scores[self._waiting]).all():
            return scores
        return None

    def _waiting_ranked_exactly(self, now: float, inputs: PassInputs) -> list[SimJob]:
        jobs = self._jobs
        return self._ranked_exactly(
            [jobs[i] for i in self._np.flatnonzero(self._waiting).tolist()], now, inputs)

    def _near_ties(self, close: Any) -> Any:
        """For each neighbouring pair of the array scores `close` (highest first), whether the
        two lie within SCORE_BAND of each other, where the exact scores may rank them apart
        the other way round; or a few more pairs: when no score is below 0 (the last, the
        lowest), a + b <= 2a for neighbours a >= b, a bound one array operation cheaper, and
        a pair scored exactly that did not need it changes no rank (`_in_exact_order`)."""
        if close.size and close[-1] >= 0:
            return close[:-1] - close[1:] <= (2 * SCORE_BAND) * close[:-1]
        size = self._np.abs(close)
        return close[:-1] - close[1:] <= SCORE_BAND * (size[:-1] + size[1:])

    def _ranked_exactly(self, jobs: list[SimJob], now: float, inputs: PassInputs
                        ) -> list[SimJob]:
        """`jobs` scored one by one (PolicyError as a full pass raises it), in rank order.
        A policy reading queue statistics scores the whole queue, as a full pass does, so
        that they are the full pass's."""
        scored = jobs
        if self._policy.needs_queue_stats:
            scored = [self._jobs[i] for i in self._np.flatnonzero(self._queued).tolist()]
        for job in scored:
            job.queued_time = now - job.submit_time
        self._policy.score_jobs(scored, inputs)
        return sorted(jobs, key=_rank)

    def _scores(self, now: float, inputs: PassInputs) -> Any:
        """Every job's score at `now`, from one call of the policy's function on the columns.
        Queue statistics are those of the jobs not started: the longest queued time is now
        less the earliest submission (a subtraction rounds monotonically), and the longest
        and shortest wall times are exact."""
        policy = self._policy
        if self._exact:
            return self._scores_per_user(inputs)
        if policy.needs_queue_stats:
            stats = self._queue_stats
            if stats is None:
                queued = self._queued
                walls = self._columns["wall_time"][queued]
                stats = self._queue_stats = (float(self._submit[queued].min()),
                                             walls.max().item(), walls.min().item())
            submitted, inputs.max_wall_time, inputs.min_wall_time = stats
            inputs.max_queued_time = now - submitted
        args = {name: (now - self._submit if name == "queued_time" else
                       self._columns[name] if name in self._columns else getattr(inputs, name))
                for name in policy.parameters}
        np = self._np
        with np.errstate(all="ignore"):
            scores = np.asarray(ARRAY_FUNCTIONS[policy.function](**args), dtype=np.float64)
        # One number for every job (`balanced` when no job waited or every wall time is equal).
        return np.full(len(self._jobs), scores) if scores.ndim == 0 else scores

    def _scores_per_user(self, inputs: PassInputs) -> Any:
        """Every job's exact score, from one call per user (`UtilityFunction.scores_per_user`):
        a user's job scored as a full pass scores it. A failure gives every job a NaN, which
        sends the pass to the exact scoring of every job, failing as a full pass does."""
        np = self._np
        one_per_user = self._one_per_user
        if self._policy.score_jobs_keeping(one_per_user, inputs):
            return np.full(len(self._jobs), np.nan)
        return np.array([job.score for job in one_per_user])[self._user]


def _rank(job: SimJob) -> tuple[float, int]:
    """A pass's rank order as a key: higher score first, then lower job id."""
    return (-job.score, job.jobid)


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
    prune: bool = True,
    reuse_plan: bool = True,
    partitions: QueuePartitions | None = None,
    slack: SlackState | None = None,
) -> dict[int, float]:
    """{jobid: estimated start} for the `queued` jobs that can start: a fork from `now` in
    which each running job ends at its start plus its requested `wall_time` (at `now` if that
    is past) and each queued job runs for its requested time.

    `machine` must hold nothing (a what-if copy of the real one, failed components and all); it
    is left empty. The jobs given are copied, never changed. `queue_config` and `policies` are
    Qsim's (per-queue policies and running limits); without them every job is scored by
    `policy`. `queue_places` maps queues to the places their jobs may use (partadm --queue);
    `reservations` (setres) are held over their periods as in Qsim. A job missing from the
    answer never starts in the fork (no place can hold it). `prune=False`: every pass sees the
    whole queue, scored (the same answer, slower; tests compare the two); `reuse_plan=False`:
    a conservative pass on Blue Gene/P plans afresh instead of taking up the last pass's
    reservations (`LastReservations`; the same answer, slower). `partitions`: the
    live queue layout's (seed 002; the system's `queue_partitions`): the fork schedules region
    by region as the scheduler does, each job by its own queue's name (no routing by class).
    `slack`: the scheduler's slack settings and memory (`Scheduler.slack_state`), which
    `Backfill.SLACK`'s deadlines depend on; the fork starts from them, for the queued jobs
    (None: Table 3's settings, nothing remembered).
    """
    fork = ForkedReplay([], machine, policy, backfill, queue_config=queue_config,
                        policies=policies, window=window, reservations=reservations)
    fork.partitions = partitions
    if slack is not None:
        fork.scheduler.resume_slack(slack.for_jobs({job.jobid for job in queued}))
    # The pruning's argument knows nothing of reservations, nor of regions (a job that fits
    # the idle nodes may not fit its region's; each region has a top job of its own): with
    # either, every pass sees all.
    prune = prune and not reservations and partitions is None
    one_order = ranks_in_one_order(policy, now, queued)
    fork.fixed_order = prune and one_order and _pruning_holds(policy, backfill, window,
                                                              queue_config, policies)
    in_one_go = prune and scores_in_one_go(policy, backfill, window, queue_config, policies)
    reserving = prune and scored_conservative_in_one_go(machine, policy, backfill, window,
                                                        queue_config, policies)
    fork.queue_places = dict(queue_places or {})
    planned = prune and one_order and plan_is_the_schedule(
        machine, policy, backfill, window, queue_config, policies, fork.queue_places, queued)
    # Fresh copies (a new job's status), as fairness.py's forks build theirs.
    ending = [replace(job, run_time=max(job.wall_time, now - job.start_time),
                      status=lifecycle.NEW) for job in running]
    waiting = [replace(job, run_time=job.wall_time, status=lifecycle.NEW, start_time=-1.0,
                       location="", queued_time=now - job.submit_time) for job in queued]
    if fork.fixed_order or planned:  # resumed in rank order, which every later pass keeps
        policy.score_jobs(waiting, PassInputs(now, machine.total_nodes, machine.min_block_size))
        waiting.sort(key=_by_jobid)
        waiting.sort(key=_by_score, reverse=True)
    try:
        fork.resume(now, ending, waiting)
        if planned:
            fork.run_forward(until=now)
            if isinstance(machine, BGPMachine):
                still = {job.jobid for job in fork.queued_jobs()}
                places = fork.queue_places
                fork.starts.update(follow_the_plan(
                    machine, now, [job for job in waiting if job.jobid in still],
                    fork.running_ends(), lambda job: places.get(job.queue)))
            else:
                _plan_the_rest(fork, machine, now, waiting)
            return fork.starts
        if fork.fixed_order or in_one_go or reserving:
            fork.columns = WaitingColumns(waiting, machine, policy, fork.fixed_order, reserving)
        if reuse_plan and reserving and isinstance(machine, BGPMachine) and all(
                job.wall_time > 0 for job in waiting):
            # The conditions `LastReservations` rests on: those of `reserving` (W = 1, no
            # running limit, no reservation period, no region), a fork's, and no job ending
            # as it starts.
            fork.scheduler.last_reservations = LastReservations(machine, now)
        fork.run_forward()
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)
    return fork.starts


def _plan_the_rest(fork: ForkedReplay, machine: Machine, now: float,
                   ranked: Sequence[SimJob]) -> None:
    """After the passes at `now`: the start of every job still queued, from one conservative
    plan of the queue in rank order (`plan_is_the_schedule`), added to `fork.starts`."""
    planner = machine.planner(now)
    waiting = fork.queued_jobs()
    still = {job.jobid for job in waiting}
    for job in ranked:
        if job.jobid in still and machine.allocation_size(job.size) is not None:
            start = planner.reserve_earliest(job.size, job.wall_time)[0]
            if start < float("inf"):
                fork.starts[job.jobid] = start


def plan_is_the_schedule(machine: Machine, policy: UtilityFunction, backfill: Backfill,
                         window: int, queue_config: Sequence[Mapping[str, Any]] | None,
                         policies: Mapping[str, UtilityFunction] | None,
                         queue_places: Mapping[str, PlaceSet], queued: Sequence[SimJob]) -> bool:
    """True, for a policy ranking the queue in one order at every pass (`ranks_in_one_order`:
    the caller checks it), when after the passes at the fork's first instant one conservative
    plan of the queue gives every later start, so no later pass need run (docs/architecture.md,
    "Estimated start times", the proofs): conservative backfilling with W = 1 and the rank
    conditions (`_rank_holds`), and no reservation (the caller checks that); on a
    flat machine (its planner counts free nodes, so which nodes a job gets changes no later
    start) with no queue mapped to places, or on Blue Gene/P, where the plan is followed and
    re-planned where a job starts on another block than reserved (`follow_the_plan`), when
    every queued job asks for some time (a job of none ends at its start, which takes the
    fork one more pass at that instant)."""
    if not (backfill is Backfill.CONSERVATIVE
            and _rank_holds(policy, window, queue_config, policies)):
        return False
    if isinstance(machine, FlatMachine):
        return not queue_places
    return isinstance(machine, BGPMachine) and all(job.wall_time > 0 for job in queued)


def ranks_in_one_order(policy: UtilityFunction, now: float, queued: Sequence[SimJob]) -> bool:
    """True when `policy` ranks the `queued` jobs in one order at every pass of a fork from
    `now` (with `_rank_holds`' conditions): one of FIXED_RANK_FUNCTIONS, or `balanced` with
    balance factor 1 (seed 000's FCFS): its score 100·q/q_max is S_w exactly (S_r weighs 0),
    which grows with the queued time q (products and quotients round monotonically) over a
    q_max common to every job, so it ranks by queued time and then job id as FCFS does (with
    whole times below 2**45, distinct queued times keep distinct scores), when no job was
    submitted after `now` (else every q may be at most 0 at first, all scores 0: job id order,
    which FCFS does not give)."""
    if policy.function in FIXED_RANK_FUNCTIONS:
        return True
    return (policy.function is balanced and policy.options.get("balance_factor", 1.0) == 1
            and all(job.submit_time <= now for job in queued))


def scores_in_one_go(policy: UtilityFunction, backfill: Backfill, window: int,
                     queue_config: Sequence[Mapping[str, Any]] | None = None,
                     policies: Mapping[str, UtilityFunction] | None = None) -> bool:
    """True when an estimate's passes may find the jobs that matter from array scores
    (`WaitingColumns`): the pruning holds and `policy` scores arrays or per user."""
    return (policy.scores_arrays or policy.scores_per_user) and _pruning_holds(
        policy, backfill, window, queue_config, policies)


def scored_conservative_in_one_go(
        machine: Machine, policy: UtilityFunction, backfill: Backfill, window: int,
        queue_config: Sequence[Mapping[str, Any]] | None = None,
        policies: Mapping[str, UtilityFunction] | None = None) -> bool:
    """True when an estimate's conservative passes may be handed their jobs ranked from array
    scores (`WaitingColumns` with `reserving`): W = 1 and the rank conditions, `policy` scores
    arrays or per user, and the machine is Blue Gene/P, whose conservative pass keeps no plan
    between passes (a flat machine's kept plan would see a pass the fork skips)."""
    return (backfill is Backfill.CONSERVATIVE
            and (policy.scores_arrays or policy.scores_per_user)
            and isinstance(machine, BGPMachine)
            and _rank_holds(policy, window, queue_config, policies))


def _pruning_holds(policy: UtilityFunction, backfill: Backfill, window: int,
                   queue_config: Sequence[Mapping[str, Any]] | None,
                   policies: Mapping[str, UtilityFunction] | None) -> bool:
    """EASY or no backfilling (the pruning's argument) and `_rank_holds`."""
    return backfill in (Backfill.EASY, Backfill.NONE) and _rank_holds(
        policy, window, queue_config, policies)


def _rank_holds(policy: UtilityFunction, window: int,
                queue_config: Sequence[Mapping[str, Any]] | None,
                policies: Mapping[str, UtilityFunction] | None) -> bool:
    """W = 1, no running limits (they hold jobs back pass by pass), and every queue scored as
    `policy` scores."""
    if window != 1:
        return False
    for queue in queue_config or ():
        if queue["restrictions"]:
            return False
        # Two policies rank against each other differently as time goes (FCFS's scores grow,
        # default's do not): every queue must use this one, with the same settings.
        other = (policies or {}).get(queue["policy"], policy) if queue["policy"] else policy
        if other.function is not policy.function or other.options != policy.options:
            return False
    return True
