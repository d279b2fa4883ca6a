"""The live reservation book on a real database (SQLite and PostgreSQL): a reservation and its
queue persist across a restart of the queue manager's store, periods begin and end with their
accounting records, a cyclic one rolls, and a refused request changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_persistence import database_url  # noqa: F401 (the fixture: SQLite and PostgreSQL)

from cobaltlite.accounting import AccountingLog
from cobaltlite.clock import VirtualClock
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.queue_manager.store import JobStore
from cobaltlite.reservations.book import ReservationBook
from cobaltlite.reservations.model import ReservationError

T0 = 1_800_000_000.0


def open_book(url: str, log: Path, clock: VirtualClock) -> tuple[JobStore, ReservationBook]:
    store = JobStore(url, sole_writer=True)
    store.init()
    accounting = AccountingLog(log, append=True, line_buffered=True)
    return store, ReservationBook(store, accounting, clock,
                                  lambda: build_machine(load_description("flat:4")))


def records(log: Path) -> list[tuple[str, str]]:
    """(type, name) of each reservation record, in order."""
    found = []
    for line in log.read_text().splitlines():
        _, kind, _, body = line.split(";", 3)
        name = next(p.split("=", 1)[1] for p in body.split() if p.startswith("name="))
        found.append((kind, name))
    return found


def test_reservations_persist_begin_end_and_roll(database_url: str,  # noqa: F811 (fixture)
                                                 tmp_path: Path) -> None:
    log, clock = tmp_path / "accounting.log", VirtualClock(T0)
    store, book = open_book(database_url, log, clock)
    book.add("root", {"name": "once", "start": T0 + 60, "duration": "10", "places": ["0", "1"],
                      "users": ["root"]})
    book.add("root", {"name": "weekly", "start": T0 + 60, "duration": "5", "cycle": "20",
                      "places": ["2"]})
    # Made after weekly: its res_id (3) is not the one weekly's next period gets.
    book.add("root", {"name": "later", "start": T0 + 86400, "duration": "10", "places": ["3"]})
    with pytest.raises(ReservationError, match="overlaps"):
        book.add("root", {"name": "clash", "start": T0 + 100, "duration": "10",
                          "places": ["1"]})
    with pytest.raises(ReservationError, match="does not exist"):
        book.add("root", {"name": "noqueue", "start": T0 + 100, "duration": "10",
                          "places": ["3"], "queue": "nosuch"})
    queues = {q["name"]: q for q in store.queues()}
    assert queues["R.once"]["state"] == "running"
    assert queues["R.once"]["restrictions"] == {"users": "root"}
    store.close()

    # A new store and book on the same database: everything is still there.
    store, book = open_book(database_url, log, clock)
    assert sorted(r["name"] for r in book.listing()) == ["later", "once", "weekly"]
    assert "clash" not in {q["name"] for q in store.queues()}
    clock.advance_to(T0 + 61)
    assert sorted((w[0], w[3], w[4]) for w in book.windows() if w[0] != "later")[:2] == [
        ("once", T0 + 60, T0 + 660), ("weekly", T0 + 60, T0 + 360)]
    clock.advance_to(T0 + 700)  # once is over; weekly's first period too
    rows = {r["name"]: r for r in book.listing()}
    assert set(rows) == {"weekly", "later"}
    assert rows["weekly"]["start"] == T0 + 60 + 1200 and rows["weekly"]["res_id"] == 4
    assert {q["name"]: q["state"] for q in store.queues()}["R.once"] == "dead"
    assert records(log) == [("Y", "once"), ("Y", "weekly"), ("Y", "later"), ("U", "clash"),
                            ("U", "noqueue"), ("B", "once"), ("B", "weekly"), ("F", "once"),
                            ("K", "once"), ("F", "weekly")]
    lines = book.release("root", ["weekly", "nosuch"])
    assert lines == ["Reservation subset matched",
                     "Released reservation 'weekly' for partitions: 2"]
    assert records(log)[-1] == ("k", "weekly")
    assert [r["name"] for r in book.listing()] == ["later"]
    store.close()
