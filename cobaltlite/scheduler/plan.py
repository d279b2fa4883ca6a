"""Conservative backfilling's plan, kept from one pass to the next (issue 13).

A conservative pass reserves every waiting job, in rank order, at its earliest start on the
free-node profile that the running jobs and the reservations before it leave (scheduler.py,
step 4). Each reservation depends on that profile alone. So when, between two passes, every job
holding nodes either still ends when the last plan said or started where that plan reserved it,
and nothing else changed the machine (no early end, failure or node taken down), the profile
from now on is the last pass's, and each reservation kept is again its job's earliest. The pass
then only

1. starts, in rank order, the kept jobs whose reservation begins now, and
2. gives back the reservations of the kept jobs from the first one whose place in the rank
   order changed (a job ranked ahead arrived, one left the queue, one's start was refused so
   its reservation lies in the past), and reserves every job from there on as a full pass does.

Otherwise the pass plans from scratch, as it always did, and keeps that plan. Only the flat
machine's plan is kept (a count of free nodes over time, so "the same profile" is a comparison
of the running jobs' ends), and only without queue place sets and reservation periods.
tests/test_kept_plan.py compares both ways pass by pass on random workloads.

On Blue Gene/P a pass's plan is kept only inside a forked replay, whose future is known
(`LastReservations`): there the next pass takes up the reservations of the jobs still ranked
first, and the planner holding them, instead of searching for them again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import compress, count
from operator import attrgetter, is_not

from cobaltlite.machine.bgp import BGPMachine, BGPPlanner
from cobaltlite.machine.flat import FlatMachine, FlatPlanner, returns, returns_in_order
from cobaltlite.machine.model import PlaceSet
from cobaltlite.scheduler.interfaces import SchedulableJob

NEVER = float("inf")
"""The start recorded for a job the plan holds nothing for: no place of its size is in service,
or no place of the machine fits it."""

JobKey = tuple[int, int, float]
"""What a reservation was made for: job id, size, wall time."""

job_key = attrgetter("jobid", "size", "wall_time")


class KeptPlan:
    """The last conservative pass's plan: its planner (every reservation in it), the waiting
    jobs in rank order with their reservations (`jobs`, `keys`, `starts`, `wheres`), and when
    the running jobs give their nodes back."""

    def __init__(self, machine: FlatMachine, planner: FlatPlanner, now: float) -> None:
        self.machine = machine
        self.planner = planner
        # The job objects themselves, so that a queue offering the same objects again (Qsim's
        # ranked list) is recognised by identity, without its keys being built and compared.
        self.jobs: list[SchedulableJob] = []
        self.keys: list[JobKey] = []
        self.starts: list[float] = []
        self.wheres: list[str] = []
        self._soonest = NEVER  # the earliest of `starts`
        self._out = machine._out
        self._returns = returns_in_order(self.machine, now)

    def add(self, job: SchedulableJob, start: float, where: str) -> None:
        """`job`, the next in rank order, is reserved from `start` (NEVER: not at all)."""
        self.jobs.append(job)
        self.keys.append((job.jobid, job.size, job.wall_time))
        self.starts.append(start)
        self.wheres.append(where)
        if start < self._soonest:
            self._soonest = start

    def resume(self, machine: FlatMachine, now: float, jobs: list[SchedulableJob]
               ) -> list[int] | None:
        """Bring the plan to `now` for `jobs` (the pass's top job and waiting jobs, in rank
        order): return the indices of the jobs whose kept reservation starts now, to be started
        in that order; the plan then holds the reservations of `jobs[:len(self.keys)]`, and
        every job after them is to be reserved. None when the profile may differ: plan afresh.
        """
        if machine is not self.machine or machine._out != self._out:
            return None
        keys, starts = self.keys, self.starts
        # The jobs a pass starts before its top job come off the front of the queue (in this
        # pass, or in one that started every job or filled the machine and so planned nothing).
        gone = 0
        if keys and jobs and self.jobs[0] is not jobs[0]:
            top = job_key(jobs[0])
            if keys[0] != top:
                try:
                    gone = keys.index(top)
                except ValueError:
                    gone = len(keys)
        times, counts = self._returns
        later = bisect_right(times, now)
        if not gone:  # the same running jobs, each ending as planned: the same lists
            if returns_in_order(machine, now) != (times[later:], counts[later:]):
                return None  # an early end, an overdue job, a start nobody planned
        elif not self._started_as_planned(machine, now, gone, dict(
                zip(times[later:], counts[later:], strict=True))):
            return None
        same = self._same_jobs(gone, jobs)
        if same and self._soonest < now and min(starts[gone:gone + same]) < now:
            # a refused start, its reservation now in the past
            same = next(i for i, s in enumerate(starts[gone:gone + same]) if s < now)
        self._cut(gone, gone + same)
        self.planner.advance(now)
        due: list[int] = []
        if same and self._soonest <= now:  # some start now (none earlier: cut above)
            i = starts.index(now)
            while True:
                due.append(i)
                try:
                    i = starts.index(now, i + 1)
                except ValueError:
                    return due
        return due

    def _started_as_planned(self, machine: FlatMachine, now: float, gone: int,
                            expected: dict[float, int]) -> bool:
        """Whether the plan's first `gone` jobs each started where it reserved them (or have
        ended since, at their planned end), and the running jobs are otherwise those of the
        last pass, ending when they then were to (`expected`: time -> nodes, after now)."""
        held = machine._held
        for (jobid, size, wall), start in zip(self.keys[:gone], self.starts, strict=False):
            end = start + wall
            holding = held.get(jobid)
            if holding is not None and holding[1] == size and holding[2] == end <= now + wall:
                if end > now:
                    expected[end] = expected.get(end, 0) + size
            elif holding is not None or end > now:
                return False  # it left the queue otherwise than by starting as planned
        return returns(machine, now) == expected  # else an early end, an overdue job, ...

    def _same_jobs(self, gone: int, jobs: list[SchedulableJob]) -> int:
        """How many of `jobs`, from the first, are the plan's jobs from index `gone` on: the
        same (or equal) job objects, whose keys are then the same (interfaces.SchedulableJob),
        else jobs of the same keys."""
        both = min(len(self.keys) - gone, len(jobs))
        if self.jobs[gone:gone + both] == jobs[:both]:
            return both  # Qsim: its ranked list holds the same objects from pass to pass
        had, current = self.keys[gone:gone + both], list(map(job_key, jobs[:both]))
        if had == current:
            return both
        return next(i for i, (a, b) in enumerate(zip(had, current, strict=True)) if a != b)

    def _cut(self, first: int, last: int) -> None:
        """Keep only the reservations [first, last): the ones before started, the ones after
        are given back to the planner."""
        planner, keys, starts = self.planner, self.keys, self.starts
        for (_, size, wall), start in zip(keys[last:], starts[last:], strict=True):
            if start != NEVER:
                planner.unreserve(start, wall, size)
        if first or last < len(keys):
            for column in (self.jobs, keys, starts, self.wheres):
                del column[last:]
                del column[:first]
            self._soonest = min(starts, default=NEVER)

    def settle(self, now: float, started: list[int]) -> None:
        """End of the pass: the jobs at indices `started` (of those `resume` returned) began,
        so they leave the plan; the running jobs' ends are taken as they now stand."""
        for i in reversed(started):
            del self.jobs[i], self.keys[i], self.starts[i], self.wheres[i]
        if started:
            self._soonest = min(self.starts, default=NEVER)
        self._returns = returns_in_order(self.machine, now)


class LastReservations:
    """The last conservative pass's reservations on Blue Gene/P, in rank order, and its
    planner, for the next pass of a forked replay (qsim/fork.py, `estimate_start_times`) to
    take up instead of searching for them again. The fork guarantees what this rests on:
    nothing arrives, every job ends exactly at its start plus its wall time (positive), no
    component fails or comes back, W = 1, no running limit, no reservation period, no region;
    and no plan of the fork's first instant is taken up (a running job overdue then holds its
    blocks a grace beyond now, which the next pass, once it has ended, no longer sees).

    Why a reservation holds from a pass at t1 to the next one, at t2 > t1. The t1 pass
    reserved its jobs in rank order, each at its earliest (start, and the first block in name
    order of those free as early) given the blocks held by the running jobs and by the jobs it
    had started so far, and the reservations before it. Take the jobs the t1 pass reserved
    first that the t2 pass ranks first, in the same order, with no job started at t2 ahead of
    them, none reserved before t2 (`resume` stops at the first that is not). No job ended in
    between but at its end as planned; so for the i-th of them the t2 pass's state differs
    from the t1 pass's only by more held time: the jobs the t1 pass started after it (each
    placed where no reservation before it overlapped, so off its block over its reserved
    time), and the present moved from t1 to t2 (not after its reserved start). More held time
    makes no block's earliest start earlier, and none of it overlaps the reserved block over
    the reserved time, so the search finds the same start on the same block (a block as early
    but first in name order would have been found at t1 too).

    So the t2 pass finds no free block for the first of them (a job reserved at t2 would have
    started ahead of it: it is not among them), makes it the top job, and would reserve each
    of them reserved after t2 as the t1 pass did, none starting now; the planner holding
    exactly their reservations, in order, is the one those searches leave (the t1 pass's own
    planner when it holds nothing else, moved to t2 by `BGPPlanner.advance`; else a new one
    holding them again). Each of them reserved at t2 the t2 pass starts at its turn, on the
    cheapest block of its size free and clear of the reservations before it, of which its
    reserved block is one (`_start_due`). Started there, it holds what its reservation held,
    the same blocks over the same time, and the argument goes on past it; started elsewhere,
    the jobs after it may be placed otherwise, and the plan ends with it. The pass then goes
    on from the job after them as always (a pass that would have stopped reserving among them
    starts no later job either: places only go), and the jobs it reserves are added, each
    reserved with the same guarantee for the next pass.

    The jobs a pass starts ahead of its top job (`take_off`) go by the same argument: when
    they are the plan's first jobs, in order, each started on its reserved block at its
    reserved start (now), they hold what their reservations held and the plan stands past
    them, whether the pass then plans (`resume`) or they filled the machine; any other start
    ahead of the top job took no reservation into account, and nothing of the plan is kept.
    tests/test_start_estimates.py compares estimates with and without this.
    """

    def __init__(self, machine: BGPMachine, first_instant: float) -> None:
        self.machine = machine
        self.jobs: list[SchedulableJob] = []
        self.starts: list[float] = []
        self.wheres: list[str] = []  # the block reserved; "" when none (the start is NEVER)
        self._first_instant = first_instant
        self._made_at = first_instant  # the time of the pass whose plan this is
        self._planner: BGPPlanner | None = None
        """That pass's: it holds every one of them, and the reservations of the jobs since
        begun on their reserved blocks at their reserved times (the same held time as those
        jobs, which the machine holds)."""

    def add(self, job: SchedulableJob, start: float, where: str) -> None:
        """`job`, the next in rank order, is reserved (on the planner `resume` gave) from
        `start` on `where` (NEVER, "": not at all)."""
        self.jobs.append(job)
        self.starts.append(start)
        self.wheres.append(where)

    def take_off(self, now: float, begun: Sequence[tuple[int, str]]) -> bool:
        """The pass at `now` started the jobs `begun` ((jobid, block), in order) ahead of its
        top job: when they are the plan's first jobs, each on its reserved block with its
        reservation beginning now, they leave the plan and the rest stands (they hold what
        their reservations held; the planner keeps those reservations, as of the jobs begun
        in `_start_due`); else the plan is dropped. Return whether it stands."""
        ahead = len(begun)
        if ahead:
            jobs, starts, wheres = self.jobs, self.starts, self.wheres
            if ahead > len(jobs) or any(
                    jobs[k].jobid != jobid or starts[k] != now or wheres[k] != where
                    for k, (jobid, where) in enumerate(begun)):
                del jobs[:], starts[:], wheres[:]
                self._planner = None
                return False
            del jobs[:ahead], starts[:ahead], wheres[:ahead]
        return True

    def resume(self, now: float, begun: Sequence[tuple[int, str]],
               jobs: Sequence[SchedulableJob], allowed: Callable[[SchedulableJob], PlaceSet | None],
               start: Callable[[SchedulableJob, str], bool]) -> tuple[BGPPlanner, int]:
        """For the pass at `now`, which started the jobs `begun` ahead of its top job
        (`take_off`): a planner holding the kept reservations of the first jobs of `jobs` (the
        pass's jobs from its top job on, in rank order), and how many of `jobs` the pass has
        thereby planned. Those whose reservation begins now are started with `start` (the
        scheduler's; `allowed`: where it lets a job go) where the pass starts them
        (`_start_due`). The plan keeps the rest alone; the pass plans the jobs after them and
        `add`s each job it reserves."""
        same = 0
        if self.take_off(now, begun) and self._made_at > self._first_instant:
            # The first job ranked otherwise, found in C: the prefix runs to hundreds of jobs.
            kept = self.jobs
            same = next(compress(count(), map(is_not, kept, jobs)), min(len(kept), len(jobs)))
            starts = self.starts
            if same and min(starts[:same]) < now:
                same = next(k for k in range(same) if starts[k] < now)
        self._made_at = now
        planner = self._planner
        if planner is not None and same == len(self.jobs):  # it holds them, and jobs begun
            planner.advance(now)
        else:
            planner = self._afresh(now, same, [])
        if now in self.starts:
            return self._start_due(planner, now, same, allowed, start)
        return planner, same

    def _start_due(self, planner: BGPPlanner, now: float, same: int,
                   allowed: Callable[[SchedulableJob], PlaceSet | None],
                   start: Callable[[SchedulableJob, str], bool]) -> tuple[BGPPlanner, int]:
        """Start the first `same` kept jobs whose reservation begins now (none is the top job:
        it would have started ahead of the planning) where the pass starts each at its turn:
        the block `block_a_pass_starts` picks around the reservations before it, which its
        reserved block is among (free, and clear of them, by the argument above). On that block
        it holds what its reservation held, so the plan stands; on another, the jobs after it
        may be planned otherwise now: the plan ends with it. A refused start ends the plan
        before the job, which the pass then plans. Return the planner and how many jobs are
        planned."""
        machine, index, conflict = self.machine, self.machine.index, self.machine.conflict
        jobs, starts, wheres = self.jobs, self.starts, self.wheres
        begun: list[int] = []
        for k in range(same):
            if starts[k] != now:
                continue
            job = jobs[k]
            where = block_a_pass_starts(machine, job, allowed(job), now, [
                (starts[j], starts[j] + jobs[j].wall_time, conflict[index[wheres[j]]])
                for j in range(k) if wheres[j]])
            if where is None:
                raise AssertionError(f"job {job.jobid}: its reserved block {wheres[k]} "
                                     f"is not free at {now}")
            if not start(job, where):
                return self._afresh(now, k, begun), k
            planner.commit(where, job.wall_time)  # as a pass commits each start
            begun.append(k)
            if where != wheres[k]:
                return self._afresh(now, k + 1, begun), k + 1
        for k in reversed(begun):
            del jobs[k], starts[k], wheres[k]
        return planner, same

    def _afresh(self, now: float, end: int, begun: list[int]) -> BGPPlanner:
        """Keep the reservations before `end`, less those of the jobs `begun` (started on
        their blocks this pass: the machine holds them), on a new planner."""
        for k in reversed(begun):
            del self.jobs[k], self.starts[k], self.wheres[k]
        end -= len(begun)
        del self.jobs[end:], self.starts[end:], self.wheres[end:]
        planner = self._planner = self.machine.planner(now)
        index = self.machine.index
        for job, start, where in zip(self.jobs, self.starts, self.wheres, strict=True):
            if where:
                planner.hold(index[where], start, job.wall_time)
        return planner


def block_a_pass_starts(machine: BGPMachine, job: SchedulableJob, allowed: PlaceSet | None,
                        at: float, before: list[tuple[float, float, int]]) -> str | None:
    """The block a conservative pass at `at` starts `job` on when its turn comes: the one
    `location_now` finds (within `allowed`) on a planner holding the reservations `before`
    (of the jobs ranked before it, as `BGPPlanner.holding` takes them) and nothing else; None
    when none is free and clear of them."""
    return BGPPlanner.holding(machine, at, before).location_now(job.size, job.wall_time,
                                                                allowed)
