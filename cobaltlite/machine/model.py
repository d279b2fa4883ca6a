"""What every runtime machine model offers: the present (allocate, release, find a free place)
and a per-pass planner for the future (reservations for draining and backfilling).

Two implementations sit behind these protocols: `bgp.BGPMachine` (partitions over node cards) and
`flat.FlatMachine` (a pool of interchangeable nodes). The scheduler only ever sees the protocols.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cobaltlite.machine.description import BGPDescription, FlatDescription

PlaceSet = frozenset[str]
"""Where a job may be placed: Blue Gene/P block names (`R00-M0`), flat node numbers (`"17"`).
Every `allowed` argument below takes one; None (the default) means anywhere. On Blue Gene/P a
job may run on a block only when the block itself is in the set (a queue mapped to blocks runs
its jobs on those blocks, as Cobalt's partadm --queue does; docs/administration.md); on a flat
machine, only on nodes of the set."""

OVERDUE_GRACE = 1.0
"""A running job past its expected end (a kill in flight) is planned to end this many seconds
from now: it still holds its place at this instant, so it cannot count as free now."""


class FailureChance(Protocol):
    """Pluggable source of P_f (seed 003 §IV-B): chance that `location` fails in [start, end)."""

    def chance(self, location: str, start: float, end: float) -> float: ...


@runtime_checkable
class TwoLevelChance(Protocol):
    """A P_f source of two values: `hit` for a place with a failure predicted in the window,
    `miss` for every other place. Saying which components are predicted to fail lets a machine
    compute BLK_f for all candidates with bit operations instead of one call per block."""

    hit: float
    miss: float

    def chance(self, location: str, start: float, end: float) -> float: ...

    def failing_components(self, start: float, end: float) -> list[str]:
        """The components with a failure predicted in [start, end): P_f = hit over them."""
        ...


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

    def location_now(
        self, nodes: int, duration: float, allowed: PlaceSet | None = None
    ) -> str | None:
        """The lowest-cost place free now that delays no reservation over [now, now+duration)."""
        ...

    def reserve_earliest(
        self, nodes: int, duration: float, allowed: PlaceSet | None = None
    ) -> tuple[float, str]:
        """Reserve the earliest place and time a job of this size can run; return (start, where).

        Only places in service (and in `allowed`) are considered; with none of this size,
        `NOT_IN_SERVICE`.
        """
        ...

    def commit(self, location: str, duration: float) -> None:
        """Record a job started now at `location` for at most `duration` seconds."""
        ...

    def copy(self) -> Planner:
        """An independent planner with the same plan so far (what-ifs from a common start)."""
        ...

    def plan_now(self, nodes: int, duration: float, allowed: PlaceSet | None = None) -> bool:
        """What-if (the allocation window trying orders): if a job of this size could start now
        on its lowest-cost place without delaying a reservation, plan it there as running for
        `duration` seconds, although it has NOT started, and return True; else False."""
        ...

    def book(self, places: frozenset[str], start: float, end: float,
             wires: bool = True) -> None:
        """Hold `places` over [start, end) for an admin's reservation (setres): every place
        sharing hardware with them is then unavailable to this plan's jobs over that time,
        exactly as if a job held them, so `location_now`, `reserve_earliest` and `plan_now`
        (EASY and conservative alike) plan around it. `wires=False` (Cobalt's
        --allow_passthrough) leaves free the Blue Gene/P blocks that only share a wire."""
        ...


NOT_IN_SERVICE = (float("inf"), "")
"""What `Planner.reserve_earliest` returns when every place of the size asked is out of service
(failed or offline): no reservation is made, so nothing is held back for a job that cannot run
until a repair, whose time the machine does not know."""


class Machine(Protocol):
    """A machine's present: places, who holds them, which components have failed.

    Fault awareness (seed 003 §IV-B, docs/fault-aware.md) is three settable attributes:
    `failures` (the P_f source), `alpha` and `beta` (the weights of Allocation_Cost). They may be
    replaced at any time; the next placement uses the new values.

    Components: a Blue Gene/P machine names a midplane (`R00-M0`), a node card (`R00-M0-N04`) or
    a block (meaning all its node cards); a flat machine names a node by its number (`17`), as
    `block_states` does. A failed component is out of service until `unfail`: while it is,
    `find_location` and every planner never return a place that includes it, and
    `block_states` shows each such place with state `failed`.
    """

    name: str
    total_nodes: int
    min_block_size: int
    """n_s of seed 003 Table II: the smallest allocation unit jobs are placed on."""
    failures: FailureChance
    """Where P_f(X) comes from; `NoFailures()` (the default) makes the cost plain BLK(X)."""
    alpha: float
    """Weight of BLK_f(X) in Allocation_Cost (seed 003 §IV-B; 1.0 by default)."""
    beta: float
    """Weight of P_f(X) in Allocation_Cost (seed 003 §IV-B; 1.0 by default). On a flat machine
    β > 0 with a failure source means: take the free nodes of lowest P_f."""

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

    def find_location(
        self, nodes: int, duration: float, now: float, allowed: PlaceSet | None = None
    ) -> str | None:
        """The lowest-cost free place (within `allowed`) for a job running [now, now+duration),
        or None.

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

    def fail(self, component: str) -> list[int]:
        """Take `component` out of service; return the ids (ascending) of the jobs whose held
        place includes it. The jobs keep their places until released: killing them is the
        caller's business. Failing a failed component again changes nothing.

        Raises MachineError naming the component when the machine has no such component.
        """
        ...

    def unfail(self, component: str) -> None:
        """Put `component` back in service (nothing happens if it was not failed).

        Raises MachineError naming the component when the machine has no such component.
        """
        ...

    def failed_components(self) -> list[str]:
        """The components out of service, sorted by name, as they were given to `fail`."""
        ...

    def failure_units(self) -> list[str]:
        """The components failures are generated for: midplanes on Blue Gene/P (seed 003
        §VI-A3), nodes on a flat machine."""
        ...

    def places_within(self, places: PlaceSet) -> PlaceSet:
        """`places` and every schedulable place lying wholly inside them: on Blue Gene/P the
        blocks whose node cards all belong to blocks of `places` (a reservation's jobs may run
        on its blocks' children); on a flat machine the nodes themselves."""
        ...

    def places_over(self, component: str) -> list[str]:
        """The schedulable places (block names; node numbers on a flat machine) that include
        `component`: what a failure of it would take down. MachineError when unknown."""
        ...
