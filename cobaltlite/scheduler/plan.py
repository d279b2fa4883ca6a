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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cobaltlite.machine.flat import FlatMachine, FlatPlanner, returns
from cobaltlite.scheduler.interfaces import SchedulableJob

NEVER = float("inf")
"""The start recorded for a job the plan holds nothing for: no place of its size is in service,
or no place of the machine fits it."""


class Planned(NamedTuple):
    """One job's part of the plan: reserved from `start` (now: it started, or its start was
    refused) for `wall` seconds on `size` nodes; `where` is what the planner named."""

    jobid: int
    size: int
    wall: float
    start: float
    where: str


class KeptPlan:
    """The last conservative pass's plan: its planner (every reservation in it), the jobs in
    rank order with their reservations, and when the running jobs give their nodes back."""

    def __init__(self, machine: FlatMachine, planner: FlatPlanner, now: float) -> None:
        self.machine = machine
        self.planner = planner
        self.jobs: list[Planned] = []
        self._out = machine._out
        self._returns = returns(machine, now)

    def resume(self, machine: FlatMachine, now: float, jobs: Sequence[SchedulableJob]
               ) -> list[SchedulableJob] | None:
        """Bring the plan to `now` for `jobs` (the pass's top job and waiting jobs, in rank
        order): return the jobs whose kept reservation starts now, to be started in that order;
        `self.jobs` then holds the reservations that stay, and every job after them is to be
        reserved. None when the profile may differ: plan afresh."""
        if machine is not self.machine or machine._out != self._out:
            return None
        queued = {job.jobid for job in jobs}
        held = machine._held
        expected = {when: count for when, count in self._returns.items() if when > now}
        stay: list[Planned] = []
        for planned in self.jobs:
            if planned.jobid in queued:
                stay.append(planned)
                continue
            end = planned.start + planned.wall
            holding = held.get(planned.jobid)
            if holding is not None and holding[1] == planned.size and holding[2] == end:
                expected[end] = expected.get(end, 0) + planned.size  # started as planned
            elif holding is not None or end > now:
                return None  # left the queue another way while its reservation still counts
        current = returns(machine, now)
        if current != expected:
            return None  # an early end, an overdue job, a start nobody planned
        self._returns = current
        planner = self.planner
        same = 0
        for planned, job in zip(stay, jobs, strict=False):
            if (planned.jobid != job.jobid or planned.size != job.size
                    or planned.wall != job.wall_time or planned.start < now):
                break
            same += 1
        for planned in stay[same:]:
            if planned.start != NEVER:
                planner.unreserve(planned.start, planned.wall, planned.size)
        del stay[same:]
        self.jobs = stay
        planner.advance(now)
        return [job for job, planned in zip(jobs, stay, strict=False) if planned.start == now]
