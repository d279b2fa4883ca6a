"""What partadm, partlist, nodeadm and nodelist share: the places' rows with the queues each
serves, and an admin's change sent to the system component (which checks who asks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import Pyro5.errors

from cobaltlite.commands.common import CommandError, connect_queue_manager, connect_system
from cobaltlite.config import instance_paths
from cobaltlite.reservations.model import queue_name
from cobaltlite.rpc.client import connect

DONE = {"add": "added", "delete": "deleted", "enable": "enabled", "disable": "disabled",
        "activate": "activated", "deactivate": "deactivated"}
"""What each change prints before the places it changed (queue changes print the lists)."""


def places_with_queues() -> list[dict[str, Any]]:
    """The system's places (managed or not), each with `queue`: the queues that may run there.

    A place listing queues serves those; an open place serves every queue listed nowhere
    (docs/administration.md), but for a reservation's queue (its jobs run only on the
    reservation's places, as showres shows) and a dead queue (an ended reservation's, whose
    jobs run nowhere). `?` when the queue manager cannot say which queues exist."""
    with connect_system() as system:
        rows = system.partitions()
    try:
        with connect_queue_manager() as qm:
            reserved = {queue_name(r["name"], r["queue"]) for r in qm.reservations()}
            names: list[str] | None = [q["name"] for q in qm.queues()
                                       if q["state"] != "dead" and q["name"] not in reserved]
    except CommandError:  # the queue manager is down: the places are still worth seeing
        names = None
    mapped = {q for r in rows if r["managed"] for q in r["queues"]}
    open_queues = "?" if names is None else ":".join(q for q in names if q not in mapped) or "-"
    for row in rows:
        row["queue"] = ":".join(row["queues"]) if row["queues"] else open_queues
    return rows


def scheduler_backfill() -> dict[str, float]:
    """Block -> when the scheduler's last drain ends there (partlist's Backfill); empty when
    there is none or the scheduler cannot be reached (the listing is still worth seeing)."""
    try:
        with connect(f"PYRO:scheduler-control@./u:{instance_paths().admin_socket}") as scheduler:
            backfill = scheduler.status().get("drain_window")
    except (Pyro5.errors.PyroError, OSError):
        return {}
    if not backfill:
        return {}
    return {str(block): float(backfill["until"]) for block in backfill["blocks"]}


def administer(action: str, places: Sequence[str], queues: Sequence[str] = (),
               force: bool = False, done: str | None = None) -> int:
    """Make one change on the system and say what it did (`done`, else DONE[action], then
    the places; for queue changes each place's queues)."""
    with connect_system() as system:
        state = system.administer(action, list(places), list(queues), force)
    if action in DONE:
        print(f"{done or DONE[action]}: {' '.join(places)}")
    else:
        for place in places:
            served = ":".join(state["queues"].get(place, [])) or "(none: open)"
            print(f"queues of {place}: {served}")
    return 0


def queue_names(spec: str, option: str) -> list[str]:
    """Cobalt's `q1:q2` list; CommandError naming the option when it names no queue."""
    names = [name for name in spec.split(":") if name]
    if not names:
        raise CommandError(f"{option} {spec!r}: give one or more queue names, as q1:q2")
    return names
