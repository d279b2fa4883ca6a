"""What the scheduler sees of its two peers. It imports nothing else of the system.

In the daemon these are Pyro5 proxies' adapters; under Qsim one in-process object implements
both. Either way the scheduler cannot tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from cobaltlite.machine.model import Machine, PlaceSet

if TYPE_CHECKING:  # a queue layout's module, loaded only by a replay that has one
    from cobaltlite.machine.partitions import QueuePartitions


class SchedulableJob(Protocol):
    """A queued, runnable job as the queue manager scored it for this pass. Its jobid, size and
    wall_time do not change while the object is offered to passes (a change comes as a new
    object), and equal jobs (==) have the same three: a kept conservative plan recognises an
    unchanged queue by its objects (scheduler/plan.py)."""

    jobid: int
    size: int          # nodes asked for
    wall_time: float   # requested seconds: what plans and reservations use
    score: float
    threshold: float   # the fallback threshold (seed 003 §IV-A)
    queue: str         # its queue: a queue mapped to places (or a reservation's) runs only there
    queued_time: float  # seconds since submission: read only for the common pool's priority factor


class QueueManagerView(Protocol):
    def schedulable_jobs(self) -> Sequence[SchedulableJob]:
        """Runnable queued jobs with scores computed for the current time, in any order."""
        ...

    def ranked_jobs(self) -> Sequence[SchedulableJob] | None:
        """The runnable queued jobs already in rank order, when the queue's policy has a fixed
        order (`UtilityFunction.rank_key`): the scheduler neither sorts nor reads their scores,
        which such a policy makes bare (no job passes the top one). None: rank
        `schedulable_jobs()` by score."""
        ...

    def start_job(self, jobid: int, location: str) -> bool:
        """Start `jobid` now on `location`; False if it could not (the job or place changed)."""
        ...


class SystemView(Protocol):
    def machine(self) -> Machine:
        """The machine model with its current allocations (never a per-pass copy)."""
        ...

    def place_sets(self) -> Mapping[str, PlaceSet]:
        """Queue name -> the places its jobs may run on, read once per pass after `machine`
        and `schedulable_jobs` (so it may cover just the queues of that pass's jobs); queues
        absent may run anywhere. Empty (no mapping) leaves scheduling unchanged."""
        ...

    def queue_partitions(self) -> QueuePartitions | None:
        """The queue layout's partitions and common pool (seed 002 §III), read once per pass,
        so a change takes effect at the next pass. None: no partitioning, and the pass is the
        one without a layout, unchanged."""
        ...
