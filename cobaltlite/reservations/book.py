"""The live reservations, kept by the queue manager in its database (docs/architecture.md,
"Reservations").

The queue manager owns the queues, and a reservation's queue `R.<name>` must exist exactly while
the reservation does, so both live in the same database and change in one transaction. Time
moves the book on lazily: every read (the scheduler's pass, showres) first writes what happened
since the last one (`tick`): a period that began gets its B record, a period that ended its F
record; a cyclic reservation then rolls to its next period (new res_id), a non-cyclic one is
removed (K record) and its queue set `dead`, as Cobalt's bgsched did. Admins' removals write k,
creations Y, changes YA, and a refused creation U (reference §2.9).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from cobaltlite.accounting import AccountingLog
from cobaltlite.clock import Clock
from cobaltlite.machine.model import Machine
from cobaltlite.queue_manager.store import JobStore
from cobaltlite.reservations.cost import reserved_capacity
from cobaltlite.reservations.model import (
    Reservation,
    ReservationError,
    format_duration,
)
from cobaltlite.reservations.requests import build_reservation

log = structlog.get_logger("reservations")


class ReservationBook:
    def __init__(self, store: JobStore, accounting: AccountingLog, clock: Clock,
                 machine: Callable[[], Machine], default_policy: str = "default",
                 wake_scheduler: Callable[[], None] = lambda: None) -> None:
        """`machine` gives the machine model places are checked against (built on first use:
        the system component may start after the queue manager)."""
        self._store = store
        self._accounting = accounting
        self._clock = clock
        self._machine_factory = machine
        self._machine: Machine | None = None
        self._policy = default_policy
        self._wake = wake_scheduler
        self._lock = threading.Lock()
        self._cache: list[Reservation] | None = None  # the table: this book is its only writer

    def _machine_model(self) -> Machine:
        if self._machine is None:
            self._machine = self._machine_factory()
        return self._machine

    def _all(self) -> list[Reservation]:
        if self._cache is None:
            self._cache = [Reservation.from_row(row) for row in self._store.reservations()]
        return list(self._cache)

    def _save(self, changed: list[Reservation], deleted: Sequence[str] = (),
              queues: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Write to the database (one transaction), then the memory copy."""
        self._store.save_reservations([r.to_row() for r in changed], deleted, queues)
        names = {r.name for r in changed} | set(deleted)
        kept = [r for r in self._all() if r.name not in names]
        self._cache = sorted(kept + changed, key=lambda r: r.name)

    # ---- admins ---------------------------------------------------------------------------

    def add(self, requester: str, request: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            now = self._clock.now()
            self._tick(now)
            try:
                res, overlaps = build_reservation(request, self._machine_model(), now,
                                                  self._all())
                self._check_queue(res)
            except ReservationError as exc:
                self._write(now, "U", str(request.get("name", "?")),
                            {"requester": requester, "reason": str(exc)})
                raise
            rid = self._store.next_reservation_id()
            res = replace(res, res_id=rid, cycle_id=rid if res.cycle else 0,
                          created_by=requester)
            self._save([res], queues=self._queue_change(res))
            self._write(now, "Y", res, {"requester": requester})
            log.info("reservation made", name=res.name, by=requester, places=res.places)
        self._wake()
        return {"name": res.name, "overlaps": overlaps,
                "message": f"Reservation '{res.name}' made: queue {res.queue_name}, "
                           f"places {res.describe_places()}"}

    def modify(self, requester: str, request: Mapping[str, Any],
               defer: bool = False) -> dict[str, Any]:
        with self._lock:
            now = self._clock.now()
            self._tick(now)
            current = {r.name: r for r in self._all()}
            name = str(request.get("name", ""))
            base = current.get(name)
            if base is None:
                raise LookupError(f"cannot find reservation named '{name}'")
            if defer:
                if not base.cycle:
                    raise ReservationError("Cannot use -D on a non-cyclic reservation")
                request = {**request, "start": base.start + base.cycle}
            res, overlaps = build_reservation(request, self._machine_model(), now,
                                              current.values(), base=base)
            self._check_queue(res)
            deleted = [base.name] if base.name != res.name else []
            queues = self._queue_change(res)
            if base.owns_queue and base.queue_name != res.queue_name:
                queues[base.queue_name] = {"state": "dead"}
            self._save([res], deleted, queues)
            self._write(now, "YA", res, {"requester": requester})
            log.info("reservation changed", name=res.name, by=requester)
        self._wake()
        return {"name": res.name, "overlaps": overlaps,
                "message": f"Reservation '{res.name}' changed"}

    def release(self, requester: str, names: Iterable[str],
                may_release: Callable[[Reservation], bool] = lambda _r: True) -> list[str]:
        """Remove the named reservations (all or none); their queues go dead. LookupError when
        none matches; PermissionError naming one the caller may not release."""
        with self._lock:
            now = self._clock.now()
            self._tick(now)
            current = {r.name: r for r in self._all()}
            wanted = list(dict.fromkeys(names))
            found = [current[n] for n in wanted if n in current]
            if not found:
                raise LookupError("No Reservations matched")
            refused = [r.name for r in found if not may_release(r)]
            if refused:
                raise PermissionError(f"You are not a user of reservation '{refused[0]}' and so "
                                      "cannot alter it.")
            self._save(
                [], [r.name for r in found],
                {r.queue_name: {"state": "dead"} for r in found if r.owns_queue})
            lines = [] if len(found) == len(wanted) else ["Reservation subset matched"]
            for res in found:
                self._write(now, "k", res, {"requester": requester})
                lines.append(f"Released reservation '{res.name}' for partitions: "
                             f"{res.describe_places()}")
            log.info("reservations released", names=[r.name for r in found], by=requester)
        self._wake()
        return lines

    def user_release(self, requester: str, name: str, is_admin: bool = False) -> list[str]:
        """userres: a reservation's listed user (or an admin) ends a non-cyclic one, or moves a
        cyclic one to its next period (Cobalt's userres.py:76-95; checked on the server here).
        A reservation open to every user has no listed user: only an admin may."""
        with self._lock:
            now = self._clock.now()
            self._tick(now)
            res = next((r for r in self._all() if r.name == name), None)
        if res is None:
            raise LookupError(f"cannot find reservation named '{name}'")
        if not is_admin and (res.users is None or requester not in res.users):
            raise PermissionError(f"You are not a user of reservation '{name}' and so cannot "
                                  "alter it.")
        if not res.cycle:
            return self.release(requester, [name])
        self.modify(requester, {"name": name}, defer=True)
        return [f"Reservation '{name}' moved to its next period"]

    # ---- readers --------------------------------------------------------------------------

    def listing(self) -> list[dict[str, Any]]:
        """Every reservation as showres prints it."""
        with self._lock:
            self._tick(self._clock.now())
            return [r.to_row() for r in self._all()]

    def windows(self) -> list[list[Any]]:
        """The periods ending after now, as rows for the scheduler (Window.to_row)."""
        with self._lock:
            now = self._clock.now()
            self._tick(now)
            machine = self._machine_model()
            return [w.to_row() for r in self._all() for w in r.windows(now, machine)]

    def capacity_now(self, running: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """reservations/cost.py's capacity values now, given the running jobs' rows (queue,
        nodes). The book's machine model holds nothing, as `reserved_capacity` needs."""
        with self._lock:
            now = self._clock.now()
            self._tick(now)
            return reserved_capacity(self._machine_model(), now, self._all(), running)

    # ---- time -----------------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        changed: list[Reservation] = []
        gone: list[str] = []
        dead: dict[str, Mapping[str, Any]] = {}
        for res in self._all():
            current = res
            if current.active(now) and not current.began:
                self._write(current.start, "B", current, {})
                current = replace(current, began=True)
            if current.end <= now:
                self._write(current.end, "F", current, {})
                if current.cycle:
                    current, _ = current.rolled(now, self._store.next_reservation_id())
                else:
                    self._write(now, "K", current, {})
                    gone.append(current.name)
                    if current.owns_queue:
                        dead[current.queue_name] = {"state": "dead"}
                    continue
                if current.active(now):
                    self._write(current.start, "B", current, {})
                    current = replace(current, began=True)
            if current != res:
                changed.append(current)
        if changed or gone:
            self._save(changed, gone, dead)

    def _check_queue(self, res: Reservation) -> None:
        """-q names an existing queue; R.<name> may exist only as what an ended one left."""
        existing = {q["name"]: q for q in self._store.queues()}
        if not res.owns_queue and res.queue not in existing:
            raise ReservationError(f"queue '{res.queue}' does not exist (-q names an existing "
                                   "queue; leave it out to get R.<name>)")

    def _queue_change(self, res: Reservation) -> dict[str, dict[str, Any]]:
        if not res.owns_queue:
            return {}
        restrictions = {"users": ":".join(res.users)} if res.users else {}
        return {res.queue_name: {"state": "running", "policy": self._policy,
                                 "restrictions": restrictions}}

    def _write(self, when: float, kind: str, res: Reservation | str,
               fields: Mapping[str, Any]) -> None:
        if isinstance(res, str):  # a refused request (U): no res_id, a name maybe unusable
            self._accounting.write(when, kind, "-", {"name": res, **fields})
            return
        self._accounting.write(when, kind, res.res_id, {
            "name": res.name, "queue": res.queue_name, "start": f"{res.start:.0f}",
            "end": f"{res.end:.0f}", "duration": format_duration(res.duration),
            "exec_host": res.describe_places(), "Authorized_Users":
                "*" if res.users is None else ":".join(res.users),
            "account": res.project or "-", "cycle": format_duration(res.cycle),
            "cycle_id": res.cycle_id, **fields})
