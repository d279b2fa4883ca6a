"""What every runtime machine model offers: the present (allocate, release, find a free place)
and a per-pass planner for the future (reservations for draining and backfilling).

Two implementations sit behind these protocols: `bgp.BGPMachine` (partitions over node cards) and
`flat.FlatMachine` (a pool of interchangeable nodes). The scheduler only ever sees the protocols.
"""

from __future__ import annotations

from typing import Protocol

from cobaltlite.machine.description import BGPDescription, FlatDescription

OVERDUE_GRACE = 1.0
"""A running job past its expected end (a kill in flight) is planned to end this many seconds
from now: it still holds its place at this instant, so it cannot count as free now."""


class FailureChance(Protocol):
    """Pluggable source of P_f (seed 003 §IV-B): chance that `location` fails in [start, end)."""

    def chance(self, location: str, start: float, end: float) -> float: ...


class NoFailures:
    """The default source: nothing ever fails, so P_f = 0 and BLK_f = BLK."""

    def chance(self, location: str, start: float, end: float) -> float:
        return 0.0


class Planner(Protocol):
    """A plan of the near future, made fresh for one scheduling pass.

    It starts from the running jobs' expected ends and collects reservations. It never changes the
    machine: starting a job is the queue manager's business, and the scheduler tells the planner
    about each start with `commit`.
    """

    def location_now(self, nodes: int, duration: float) -> str | None:
        """The lowest-cost place free now that delays no reservation over [now, now+duration)."""
        ...

    def reserve_earliest(self, nodes: int, duration: float) -> tuple[float, str]:
        """Reserve the earliest place and time a job of this size can run; return (start, where)."""
        ...

    def commit(self, location: str, duration: float) -> None:
        """Record a job started now at `location` for at most `duration` seconds."""
        ...

    def copy(self) -> Planner:
        """An independent planner with the same plan so far (what-ifs from a common start)."""
        ...

    def plan_now(self, nodes: int, duration: float) -> bool:
        """What-if (the allocation window trying orders): if a job of this size could start now
        on its lowest-cost place without delaying a reservation, plan it there as running for
        `duration` seconds, although it has NOT started, and return True; else False."""
        ...


class Machine(Protocol):
    name: str
    total_nodes: int
    min_block_size: int
    """n_s of seed 003 Table II: the smallest allocation unit jobs are placed on."""

    @property
    def description(self) -> BGPDescription | FlatDescription:
        """What it was built from (sent to a scheduler that builds a replica)."""
        ...

    def allocation_size(self, nodes: int) -> int | None:
        """Nodes a job of this size would hold, or None when no place on the machine fits it."""
        ...

    def has_free_capacity(self) -> bool:
        """False when nothing at all could start now, so a scheduling pass can be skipped."""
        ...

    def idle_nodes(self) -> int: ...

    def find_location(self, nodes: int, duration: float, now: float) -> str | None:
        """The lowest-cost free place for a job running [now, now+duration), or None.

        The cost is seed 003's Allocation_Cost; `now` and `duration` feed the failure chance.
        """
        ...

    def allocate(self, location: str, jobid: int, expected_end: float) -> int:
        """Give `location` to `jobid` until about `expected_end`; return the nodes it holds.

        Raises MachineError when any part of it is already held: nothing is ever shared.
        """
        ...

    def release(self, jobid: int) -> None: ...

    def planner(self, now: float) -> Planner: ...

    def block_states(self) -> list[dict[str, object]]:
        """Every place with its live state (idle, busy, blocked, ...) and holder."""
        ...

    def held_by(self) -> dict[int, str]:
        """Job id -> location, for every job holding resources."""
        ...
