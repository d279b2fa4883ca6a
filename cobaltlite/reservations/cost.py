"""What the reservations (setres) cost the machine and its users now, for the metrics monitor.

Two parts (definitions in docs/administration.md, "What a reservation costs, live"):

* **Capacity now**: the nodes of the reservation periods open now (`reserved_nodes`), and of
  those the nodes no job of the reservation runs on (`reserved_idle_nodes`): nodes the
  reservation holds idle, which no other job may use. Counted when the monitor asks, so a
  sample right after `cobaltlite up` or setres has them before any scheduling pass.
* **Delay**: the queued jobs (other than the reservations' own) that start later because of the
  reservations, and by how much: the start estimates (qsim/fork.py) with the reservations,
  against the same estimate without them. A job that starts in the estimate without them but
  not with them (nothing had room before the fork gave up) is counted as delayed, with no
  amount. This part is as of the last estimate (after each scheduling pass).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cobaltlite.errors import MachineError
from cobaltlite.machine.model import Machine
from cobaltlite.reservations.model import Reservation

CAPACITY_METRICS: dict[str, str] = {
    "reserved_nodes": "nodes of the reservation periods open now (setres)",
    "reserved_idle_nodes": "of those, nodes no job of the reservation runs on: held idle",
}
"""The capacity part: counted from the reservations and the running jobs when asked."""

DELAY_METRICS: dict[str, str] = {
    "reservation_delayed_jobs": "queued jobs whose estimated start the reservations push back",
    "reservation_delay_mean": "mean push-back in seconds of those jobs (estimates with the "
                              "reservations against estimates without them)",
    "reservation_delay_max": "longest push-back in seconds of a queued job",
}
"""The delay part: it needs the start estimates, so it is as of the last estimate."""

COST_METRICS: dict[str, str] = {**CAPACITY_METRICS, **DELAY_METRICS}
"""Name -> meaning of every cost value (the monitor's catalog lists them)."""

NO_DELAY = dict.fromkeys(DELAY_METRICS, 0.0)
"""The delay values when no reservation is booked."""


def reserved_capacity(machine: Machine, now: float, reservations: Sequence[Reservation],
                      running: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The CAPACITY_METRICS values. `machine`: an empty model of the machine (left empty);
    `running`: the running jobs' rows (queue, nodes)."""
    open_now = [r for r in reservations if r.active(now)]
    reserved = _nodes_of(machine, {place for r in open_now for place in r.places})
    inside = {r.queue_name for r in open_now}
    busy = sum(machine.allocation_size(row["nodes"]) or row["nodes"]
               for row in running if row["queue"] in inside)
    return {"reserved_nodes": float(reserved),
            "reserved_idle_nodes": float(max(0, reserved - busy))}


def reservation_delays(reservations: Sequence[Reservation], queued_queues: Mapping[int, str],
                       with_them: Mapping[int, float], without_them: Mapping[int, float]
                       ) -> dict[str, float]:
    """The DELAY_METRICS values. `queued_queues`: queued job id -> its queue; `with_them` /
    `without_them`: the start estimates with and without the reservations."""
    own = {r.queue_name for r in reservations}
    delays: list[float] = []
    delayed = 0
    for jobid, queue in queued_queues.items():
        if queue in own or jobid not in without_them:
            continue
        start = with_them.get(jobid)
        if start is None or start > without_them[jobid]:
            delayed += 1
            if start is not None:
                delays.append(start - without_them[jobid])
    return {"reservation_delayed_jobs": float(delayed),
            "reservation_delay_mean": sum(delays) / len(delays) if delays else 0.0,
            "reservation_delay_max": max(delays, default=0.0)}


def _nodes_of(machine: Machine, places: set[str]) -> int:
    """Nodes the `places` cover: each place held on the empty what-if machine (which says how
    many nodes a place holds), then released. A place overlapping one already counted adds
    nothing, so only reservations forced over each other (setres -f) on nested blocks can be
    counted short (a parent block met after its child adds none of its other nodes); a place
    over a component out of service cannot be held and is not counted."""
    nodes = 0
    pseudo = -1
    try:
        for place in sorted(places):
            try:
                nodes += machine.allocate(place, pseudo, float("inf"))
            except MachineError:
                continue
            pseudo -= 1
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)
    return nodes
