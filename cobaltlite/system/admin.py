"""What admins set on the machine's places (partadm, nodeadm), as one immutable value.

Per place (a Blue Gene/P block, a flat node number): deleted (`partadm -d`: not managed, not
listed by partlist, never placed on), disabled (`partadm --disable`, `nodeadm --down`: never
placed on, relatives unaffected), inactive (`partadm --deactivate`: not functional; blocks
sharing a node card with it are unusable too, reference §6.1) and the queues it serves
(`partadm --queue/--appq/--rmq`, `nodeadm --queue`).

Queues (docs/administration.md): a place with no queue list is *open*. A queue listed on some
managed place runs only on the places listing it; any other queue runs only on open places. When
no managed place lists a queue, every queue runs anywhere: no mapping at all.

The system component keeps this in `<state-dir>/system/places-admin` (JSON, but not named
`*.json`: those are launch records); a change is checked whole (`PlaceKeeper.change` raises
ValueError naming what is wrong), written, and only then applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import structlog

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import Machine
from cobaltlite.system.files import write_json

log = structlog.get_logger("system")

BLOCK_ONLY = ("add", "delete", "activate", "deactivate")
"""Actions for Blue Gene/P blocks only: a flat node is brought down and up instead."""
QUEUE_ACTIONS = ("queue", "appq", "rmq")
ACTIONS = (*BLOCK_ONLY, "enable", "disable", *QUEUE_ACTIONS)
OPTIONS = {"add": "partadm -a", "delete": "partadm -d", "activate": "partadm --activate",
           "deactivate": "partadm --deactivate", "enable": "partadm --enable, nodeadm --up",
           "disable": "partadm --disable, nodeadm --down",
           "queue": "partadm --queue, nodeadm --queue", "appq": "partadm --appq",
           "rmq": "partadm --rmq"}
"""The command options that ask for each action: what a refusal names, in the user's words."""
CHECKED_WITH_QUEUES = (*QUEUE_ACTIONS, "delete")
"""Actions that can leave a queue without a place: they need the queue manager's waiting jobs."""


@dataclass(frozen=True)
class PlaceAdmin:
    deleted: frozenset[str] = frozenset()
    disabled: frozenset[str] = frozenset()
    inactive: frozenset[str] = frozenset()
    queues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Place -> the queues it serves; a place absent is open."""

    # ---- changes -------------------------------------------------------------------------

    def changed(self, action: str, places: Iterable[str], queues: Iterable[str] = ()) -> PlaceAdmin:
        """This state after `action` on `places` (names already checked against the machine)."""
        names = frozenset(places)
        listed = tuple(dict.fromkeys(queues))
        if action == "add":
            return replace(self, deleted=self.deleted - names)
        if action == "delete":
            return replace(self, deleted=self.deleted | names)
        if action == "enable":
            return replace(self, disabled=self.disabled - names)
        if action == "disable":
            return replace(self, disabled=self.disabled | names)
        if action == "activate":
            return replace(self, inactive=self.inactive - names)
        if action == "deactivate":
            return replace(self, inactive=self.inactive | names)
        mapping = dict(self.queues)
        for name in names:
            old = mapping.get(name, ())
            new = (listed if action == "queue"
                   else old + tuple(q for q in listed if q not in old) if action == "appq"
                   else tuple(q for q in old if q not in listed))
            if new:
                mapping[name] = new
            else:
                mapping.pop(name, None)
        return replace(self, queues=mapping)

    def apply(self, machine: Machine, before: PlaceAdmin) -> None:
        """Make `machine` follow this state, coming from `before` (only what differs)."""
        unscheduled = self.deleted | self.disabled
        was_unscheduled = before.deleted | before.disabled
        for name in sorted(unscheduled ^ was_unscheduled):
            machine.set_scheduled(name, name not in unscheduled)
        if isinstance(machine, BGPMachine):
            for name in sorted(self.inactive ^ before.inactive):
                machine.set_usable(name, name not in self.inactive)

    # ---- what the scheduler and the commands read ------------------------------------------

    def place_map(self, places: Iterable[str]) -> dict[str, Any]:
        """For the scheduler, over the machine's `places`: {"queues": {queue: [places it is
        listed on]}, "open": [places listing no queue]}; "open" is None when no managed place
        lists a queue (no mapping: every queue anywhere). Read it with `allowed_places`."""
        managed = [p for p in places if p not in self.deleted]
        if not any(p in self.queues for p in managed):
            return {"queues": {}, "open": None}
        served: dict[str, list[str]] = {}
        for name in managed:
            for queue in self.queues.get(name, ()):
                served.setdefault(queue, []).append(name)
        return {"queues": served, "open": [p for p in managed if p not in self.queues]}

    def names(self) -> frozenset[str]:
        """Every place this state says something about."""
        return self.deleted | self.disabled | self.inactive | frozenset(self.queues)

    def restricted_to(self, places: frozenset[str]) -> PlaceAdmin:
        return PlaceAdmin(self.deleted & places, self.disabled & places, self.inactive & places,
                          {k: v for k, v in self.queues.items() if k in places})

    # ---- on disk ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"deleted": sorted(self.deleted), "disabled": sorted(self.disabled),
                "inactive": sorted(self.inactive),
                "queues": {name: list(q) for name, q in sorted(self.queues.items())}}

    @classmethod
    def from_json(cls, data: Any) -> PlaceAdmin:
        """ValueError when `data` is not what `to_json` writes."""
        if not isinstance(data, dict) or set(data) != {"deleted", "disabled", "inactive",
                                                       "queues"}:
            raise ValueError("expected an object with deleted, disabled, inactive and queues")
        for key in ("deleted", "disabled", "inactive"):
            if not isinstance(data[key], list) or not all(isinstance(n, str) for n in data[key]):
                raise ValueError(f"{key} must be a list of names")
        queues = data["queues"]
        if not isinstance(queues, dict) or not all(
                isinstance(q, list) and q and all(isinstance(n, str) for n in q)
                for q in queues.values()):
            raise ValueError("queues must map each place to a non-empty list of queue names")
        return cls(frozenset(data["deleted"]), frozenset(data["disabled"]),
                   frozenset(data["inactive"]), {k: tuple(v) for k, v in queues.items()})


def allowed_places(place_map: Mapping[str, Any], queue: str) -> frozenset[str] | None:
    """Where jobs of `queue` may run by a `PlaceAdmin.place_map`; None: anywhere."""
    served = place_map["queues"].get(queue)
    if served is not None:
        return frozenset(served)
    return None if place_map["open"] is None else frozenset(place_map["open"])


class PlaceKeeper:
    """The live system's `PlaceAdmin`: checked, written to `path`, applied to the machine.

    A change is refused, nothing changed, when it names an unknown place or queue, deletes a
    block a job holds, or would leave a queue with waiting jobs no place to run on (unless
    forced).
    """

    def __init__(self, machine: Machine, path: Path) -> None:
        self.machine = machine
        self.path = path
        self.flat = isinstance(machine, FlatMachine)
        self.places: list[str] = ([str(n) for n in range(machine.total_nodes)] if self.flat
                                  else list(cast(BGPMachine, machine).names))
        self._known = frozenset(self.places)
        self.state = PlaceAdmin()
        self.place_map = self.state.place_map(self.places)
        self._restore()

    def _restore(self) -> None:
        """Apply the state saved before a restart; an unreadable file is logged and ignored."""
        try:
            saved = PlaceAdmin.from_json(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("place administration unreadable, none restored", path=str(self.path),
                      error=str(exc))
            return
        unknown = saved.names() - self._known
        if unknown:  # the machine description changed meanwhile: keep what still exists
            log.error("places no longer on the machine dropped", places=sorted(unknown))
            saved = saved.restricted_to(self._known)
        self._adopt(saved)

    def change(self, action: str, places: list[str], queues: list[str], force: bool,
               held: Mapping[int, str], waiting: Mapping[str, int] | None) -> PlaceAdmin:
        """Check and make one change; `held` is job id -> place held now, `waiting` the queue
        manager's {queue: jobs not yet started} for every queue (for CHECKED_WITH_QUEUES; None:
        not checked). ValueError saying what is wrong and that nothing changed."""
        kind = "node" if self.flat else "block"
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        if self.flat and action in BLOCK_ONLY:
            raise ValueError(f"nothing changed: a flat machine has no blocks to {action}; "
                             "take nodes out of service with nodeadm --down")
        unknown = [p for p in places if p not in self._known]
        if unknown:
            raise ValueError(f"nothing changed: no {kind} {', '.join(map(repr, unknown))} on "
                             f"{self.machine.name} ({'nodelist' if self.flat else 'partadm -l'}"
                             f" lists them)")
        if action == "delete":
            holding = {where: jobid for jobid, where in held.items()}
            busy = [f"{p} (job {holding[p]})" for p in places if p in holding]
            if busy:
                raise ValueError(f"nothing changed: {', '.join(busy)} held by a running job; "
                                 "delete it when the job has ended")
        new = self.state.changed(action, places, queues)
        if waiting is not None and action in CHECKED_WITH_QUEUES:
            self._check_queues(new, queues if action in ("queue", "appq") else [], waiting,
                               force)
        write_json(self.path, new.to_json())
        self._adopt(new)
        return new

    def _check_queues(self, new: PlaceAdmin, named: list[str], waiting: Mapping[str, int],
                      force: bool) -> None:
        unknown = [q for q in named if q not in waiting]
        if unknown:
            raise ValueError("nothing changed: " + ", ".join(
                f"{q!r} is not an existing queue" for q in unknown))
        if force:
            return
        after = new.place_map(self.places)
        # A reservation's own queue R.<name> runs inside its reservation, not by the mapping.
        stranded = [f"{queue} ({count} waiting)" for queue, count in sorted(waiting.items())
                    if count and not queue.startswith("R.")
                    and allowed_places(after, queue) == frozenset()]
        if stranded:
            raise ValueError(f"nothing changed: queue {', '.join(stranded)} would be left with "
                             "no place to run on; map it elsewhere first, or force (-f)")

    def _adopt(self, new: PlaceAdmin) -> None:
        new.apply(self.machine, self.state)
        self.state = new
        self.place_map = new.place_map(self.places)
