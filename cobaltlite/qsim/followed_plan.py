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

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.model import PlaceSet
from cobaltlite.qsim.engine import SimJob

INF = float("inf")


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

    def plan(first: int, at: float) -> None:
        """The pass at `at` from rank `first` on: each job starts now if that delays no
        reservation ranked before it, else is reserved at its earliest."""
        planner = machine.planner(at)
        for rank in range(first):
            if not started[rank] and starts[rank] < INF:  # all after `at`: those due began
                planner.book(frozenset({names[blocks[rank]]}), starts[rank],
                             starts[rank] + walls[rank])
        for rank in range(first, count):
            if started[rank]:
                continue
            job = jobs[rank]
            places = allowed(job)
            location = planner.location_now(job.size, job.wall_time, places)
            if location is not None:
                start(rank, at, location)
                planner.commit(location, job.wall_time)
                continue
            starts[rank], where = planner.reserve_earliest(job.size, job.wall_time, places)
            if where:
                blocks[rank] = index[where]
                heapq.heappush(due, (starts[rank], rank))

    plan(0, now)
    while due:
        at, rank = heapq.heappop(due)
        if started[rank] or starts[rank] != at:
            continue  # re-planned since
        while ending and ending[0][0] <= at:  # the jobs ended by now give their blocks back
            machine.release(heapq.heappop(ending)[1])
        job = jobs[rank]
        # The pass places this job around the reservations of the jobs ranked before it.
        end = at + job.wall_time
        held = 0
        for other in range(rank):
            if not started[other] and starts[other] < end:
                held |= conflict[blocks[other]]
        candidates = machine.available_of_size(job.size, allowed(job)) & ~held
        if not candidates:
            raise AssertionError(f"job {job.jobid}: its reserved block "
                                 f"{names[blocks[rank]]} is not free at {at}")
        chosen = machine.cheapest(candidates, at, end)
        start(rank, at, names[chosen])
        if chosen != blocks[rank]:  # the jobs ranked after it may be placed otherwise now
            plan(rank + 1, at)
    return found
