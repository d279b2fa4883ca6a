"""Conservative start estimates on Blue Gene/P: one plan of the queue, followed forward.

On a flat machine one conservative plan made after the fork's first instant is the schedule
(qsim/fork.py, `plan_is_the_schedule`). On Blue Gene/P it is not quite: the plan reserves the
first block (in name order) free earliest, while a job whose time has come starts on the cheapest
block free then (Allocation_Cost, seed 003 §IV-B), which may be another one. `follow_the_plan`
replays only what can differ from the plan: it walks the reservations in time order and starts
each job whose reservation begins, in rank order at each instant, where the scheduler's pass
would start it; when that is not the block it had reserved, it re-plans the jobs ranked after
it, as the pass at that instant does. docs/architecture.md ("Estimated start times") has the
argument that this gives the forward replay's very starts.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from cobaltlite.machine.bgp import INF, BGPMachine, BGPPlanner
from cobaltlite.machine.model import PlaceSet
from cobaltlite.qsim.engine import SimJob
from cobaltlite.scheduler.plan import block_a_pass_starts


def follow_the_plan(machine: BGPMachine, now: float, ranked: Sequence[SimJob],
                    ends: Sequence[tuple[float, int]],
                    allowed: Callable[[SimJob], PlaceSet | None]) -> dict[int, float]:
    """{jobid: start} for the queued jobs `ranked` (in rank order, each of positive wall time)
    on `machine` as the fork's passes at `now` left it, holding the running jobs whose
    (end, jobid) are `ends`; `allowed(job)`: the places of its queue (None: anywhere). Jobs
    that never start are left out. The machine holds the jobs started here when it returns
    (the caller empties it)."""
    jobs = [job for job in ranked if machine.allocation_size(job.size) is not None]
    count = len(jobs)
    starts = [INF] * count  # the reservation's start, or the start once started
    blocks = [-1] * count  # the reservation's block (an index of machine.names)
    started = [False] * count
    walls = [job.wall_time for job in jobs]
    conflict, index, names = machine.conflict, machine.index, machine.names
    ending = list(ends)
    heapq.heapify(ending)
    due: list[tuple[float, int]] = []  # (reservation start, rank); stale once re-planned
    found: dict[int, float] = {}

    def start(rank: int, at: float, location: str) -> None:
        job = jobs[rank]
        machine.allocate(location, job.jobid, at + job.wall_time)
        heapq.heappush(ending, (at + job.wall_time, job.jobid))
        started[rank], starts[rank] = True, at
        found[job.jobid] = at

    def plan(first: int, at: float, freed: int = -1, added: int = 0) -> None:
        """The pass at `at` from rank `first` on: each job starts now if that delays no
        reservation ranked before it, else is reserved at its earliest. With `freed` (not -1),
        a re-plan: only the blocks of `freed` may have lost reserved time since each job's
        reservation was made, and only those of `added` gained some (besides what lower-ranked
        jobs took around it), so a job's kept reservation is checked on those blocks alone."""
        planner = machine.planner(at)
        for rank in range(first):
            if not started[rank] and starts[rank] < INF:  # all after `at`: those due began
                planner.hold(blocks[rank], starts[rank], walls[rank])
        for rank in range(first, count):
            if started[rank]:
                continue
            job = jobs[rank]
            was_t, was_b = starts[rank], blocks[rank]
            if freed >= 0:
                if was_b < 0:
                    continue  # no block of its size in service: none comes back in a fork
                best_t, best_b = kept_or_better(planner, job, was_t, was_b, freed, added)
                if best_t > at:
                    if best_b != was_b or best_t != was_t:
                        freed |= conflict[was_b]
                        added |= conflict[best_b]
                        starts[rank], blocks[rank] = best_t, best_b
                        heapq.heappush(due, (best_t, rank))
                    planner.hold(best_b, best_t, job.wall_time)
                    continue
            places = allowed(job)
            location = planner.location_now(job.size, job.wall_time, places)
            if location is not None:
                if freed >= 0 and (was_t != at or index[location] != was_b):
                    freed |= conflict[was_b]
                    added |= conflict[index[location]]
                start(rank, at, location)
                planner.commit(location, job.wall_time)
            elif freed >= 0:
                raise AssertionError(f"job {job.jobid}: earliest at {at}, yet no block free")
            else:
                starts[rank], where = planner.reserve_earliest(job.size, job.wall_time, places)
                if where:
                    blocks[rank] = index[where]
                    heapq.heappush(due, (starts[rank], rank))

    def kept_or_better(planner: BGPPlanner, job: SimJob, was_t: float, was_b: int,
                       freed: int, added: int) -> tuple[float, int]:
        """The job's earliest (start, block) in a re-plan, when it was reserved at `was_t` on
        block `was_b`: every block outside `freed` can start it no earlier than before (only
        time was added there), so the old reservation stands unless a block of `freed` now
        does better, or its own block lost the slot (then every block is looked at again)."""
        if ((freed | added) >> was_b) & 1 and planner.earliest_on(
                1 << was_b, job.wall_time)[0] != was_t:
            return planner.earliest_on(machine.of_size(job.size, allowed(job)), job.wall_time)
        best_t, best_b = was_t, was_b
        others = machine.of_size(job.size, allowed(job)) & freed & ~(1 << was_b)
        if others:
            t, b = planner.earliest_on(others, job.wall_time)
            if b >= 0 and (t < best_t or (t == best_t and b < best_b)):
                best_t, best_b = t, b
        return best_t, best_b

    plan(0, now)
    waiting = 0
    while due:
        at, rank = heapq.heappop(due)
        if started[rank] or starts[rank] != at:
            continue  # re-planned since
        while ending and ending[0][0] <= at:  # the jobs ended by now give their blocks back
            machine.release(heapq.heappop(ending)[1])
        job = jobs[rank]
        # The pass places this job around the reservations of the jobs ranked before it.
        while started[waiting]:  # the first job in rank order still waiting
            waiting += 1
        where = block_a_pass_starts(machine, job, allowed(job), at, [
            (starts[other], starts[other] + walls[other], conflict[blocks[other]])
            for other in range(waiting, rank) if not started[other] and blocks[other] >= 0])
        if where is None:
            raise AssertionError(f"job {job.jobid}: its reserved block "
                                 f"{names[blocks[rank]]} is not free at {at}")
        start(rank, at, where)
        chosen = index[where]
        if chosen != blocks[rank]:  # the jobs ranked after it may be placed otherwise now
            plan(rank + 1, at, conflict[blocks[rank]], conflict[chosen])
    return found
