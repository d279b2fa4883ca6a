"""The live system's failure forecast: P_f per component, from a file or a monitor's RPC call.

This is the failure-chance source (`FailureChance`, seed 003 §IV-B) of the live system: what an
external failure predictor tells the system, not a model of its own. The forecast file holds
one entry a line (`#` starts a comment, blank lines are ignored):

    COMPONENT  P_F  [FROM  UNTIL]

* COMPONENT: what partadm --fail takes (`Machine.fail`): on Blue Gene/P a block name
  (ANL-R00-M0-512, meaning all its node cards), a midplane (R00-M0) or a node card
  (R00-M0-N04); on a flat cluster a node number (0, 1, ...).
* P_F: the chance that the component fails, a number from 0 to 1.
* FROM UNTIL: the entry holds over [FROM, UNTIL) only; each is ISO 8601 (2026-11-23T18:00:00Z;
  a time without a zone is UTC) or Unix seconds. Without them the entry always holds.

P_f(X) of a place X over a job's [start, end] combines every entry whose component shares a
node card (a node) with X and whose window overlaps [start, end] as independent failures:
P_f(X) = 1 − Π (1 − p). A place no entry touches has P_f = 0 at no cost.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from cobaltlite.clock import Clock
from cobaltlite.errors import InputError, MachineError
from cobaltlite.machine.bits import ranges_to_mask
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.model import FailureChance, Machine, NoFailures
from cobaltlite.moments import parse_moment

log = structlog.get_logger("system")


class ForecastError(InputError):
    """A forecast refused: the message names the file and line, or the entry, and the value."""


@dataclass(frozen=True)
class ForecastEntry:
    component: str
    chance: float
    valid_from: float = -math.inf
    valid_until: float = math.inf

    def to_wire(self) -> list[Any]:
        # JSON has no infinity: an open end travels as None.
        return [self.component, self.chance,
                None if self.valid_from == -math.inf else self.valid_from,
                None if self.valid_until == math.inf else self.valid_until]

    @classmethod
    def from_wire(cls, row: Sequence[Any]) -> ForecastEntry:
        """An entry as to_wire sent it (already checked by the system)."""
        component, chance, valid_from, valid_until = row
        return cls(component, chance, -math.inf if valid_from is None else valid_from,
                   math.inf if valid_until is None else valid_until)


Window = tuple[float, float, float]  # (P_f, valid from, valid until)


class Forecast:
    """P_f(X) over [start, end] from a list of entries (see the module's docstring)."""

    def __init__(self, machine: Machine, entries: Sequence[ForecastEntry] = ()) -> None:
        self.entries = tuple(entries)
        self._flat = isinstance(machine.description, FlatDescription)
        # Per place (a block; a node on a flat machine): the windows of the entries touching it.
        self._windows: dict[str, list[Window]] = {}
        for entry in self.entries:
            window = (entry.chance, entry.valid_from, entry.valid_until)
            for place in machine.places_over(entry.component):
                self._windows.setdefault(place, []).append(window)
        # One placement asks for the same run's P_f of each block many times (every candidate's
        # newly blocked neighbours overlap): the answers for the latest span are kept.
        self._span: tuple[float, float] | None = None
        self._known: dict[str, float] = {}

    def chance(self, location: str, start: float, end: float) -> float:
        if not self._windows:
            return 0.0
        if self._span != (start, end):
            self._span, self._known = (start, end), {}
        known = self._known.get(location)
        if known is None:
            known = self._known[location] = self._chance(location, start, end)
        return known

    def _chance(self, location: str, start: float, end: float) -> float:
        if not self._flat or location.isdigit():  # a block, or one node (flat placement)
            return _combined(self._windows.get(location, ()), start, end)
        try:  # a flat location is a set of node ranges: 0-15,32
            mask = ranges_to_mask(location)
        except ValueError:
            return 0.0
        return _combined([w for node, found in self._windows.items() if (mask >> int(node)) & 1
                          for w in found], start, end)


def failure_source(machine: Machine, entries: Sequence[ForecastEntry]) -> FailureChance:
    """What the machine's allocation cost should read P_f from: no entries cost nothing."""
    return Forecast(machine, entries) if entries else NoFailures()


def _combined(windows: Sequence[Window], start: float, end: float) -> float:
    survive = 1.0
    for chance, valid_from, valid_until in windows:
        if valid_from <= end and valid_until > start:
            survive *= 1.0 - chance
    return 1.0 - survive


def _entry(machine: Machine, component: Any, chance: Any, valid_from: Any = None,
           valid_until: Any = None) -> ForecastEntry:
    """One checked entry; ValueError says what is wrong with which value."""
    if not isinstance(component, str) or not component:
        raise ValueError(f"component {component!r} must be a name")
    try:
        machine.places_over(component)
    except MachineError as exc:
        raise ValueError(str(exc)) from None
    if isinstance(chance, str):
        try:
            chance = float(chance)
        except ValueError:
            raise ValueError(f"P_f {chance!r} is not a number") from None
    if isinstance(chance, bool) or not isinstance(chance, int | float) \
            or not 0.0 <= chance <= 1.0:
        raise ValueError(f"P_f {chance!r} must be a number from 0 to 1")
    if (valid_from is None) != (valid_until is None):
        raise ValueError("give both FROM and UNTIL, or neither")
    if valid_from is None:
        return ForecastEntry(component, float(chance))
    times = []
    for value in (valid_from, valid_until):
        if isinstance(value, str):
            value = parse_moment(value)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise ValueError(f"time {value!r} must be ISO 8601 or Unix seconds")
        times.append(float(value))
    if times[1] <= times[0]:
        raise ValueError(f"UNTIL {valid_until} is not after FROM {valid_from}")
    return ForecastEntry(component, float(chance), times[0], times[1])


def parse_forecast_file(path: Path, machine: Machine) -> list[ForecastEntry]:
    """Read a forecast file; ForecastError names file:line and the value at the first fault."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ForecastError(f"{path}: cannot read the forecast file: {exc}") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) not in (2, 4):
            raise ForecastError(f"{path}:{number}: expected COMPONENT P_F [FROM UNTIL], "
                                f"found {len(fields)} fields: {line.strip()!r}")
        try:
            entries.append(_entry(machine, *fields))
        except ValueError as exc:
            raise ForecastError(f"{path}:{number}: {exc}") from None
    return entries


def entries_from_wire(machine: Machine, rows: Any) -> list[ForecastEntry]:
    """Entries a monitor sent: a list of [COMPONENT, P_F] or [COMPONENT, P_F, FROM, UNTIL]."""
    if not isinstance(rows, list):
        raise ForecastError("a forecast must be a list of [component, P_f, from, until] entries")
    entries = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, list | tuple) or len(row) not in (2, 4):
            raise ForecastError(f"forecast entry {number}: expected [component, P_f] or "
                                f"[component, P_f, from, until], got {row!r}")
        try:
            entries.append(_entry(machine, *row))
        except ValueError as exc:
            raise ForecastError(f"forecast entry {number}: {exc}") from None
    return entries


class ForecastKeeper:
    """The active forecast of the system component and where it came from.

    The file (config `failure_forecast`) is re-read whenever it changes (checked at each call of
    `refresh`, i.e. each poll); a monitor's `set_entries` replaces the forecast too, and the
    newer of the two holds. A forecast that fails its checks changes nothing: the previous one
    stays active and the error is logged and shown by `status`.
    """

    def __init__(self, machine: Machine, path: Path | None, clock: Clock) -> None:
        self.machine = machine
        self.path = path
        self.clock = clock
        self.active = Forecast(machine)
        # Bumped at every change, so a replica knows when to fetch the forecast again; it starts
        # from the clock so that a restarted system never repeats a version of its previous life.
        self.version = int(clock.now() * 1e6)
        self.source = "none"
        self.loaded_at: float | None = None
        self.last_error: str | None = None
        self._seen: tuple[int, int, int] | None = None

    def refresh(self) -> bool:
        """Re-read the file if it changed since the last look; whether the forecast changed."""
        if self.path is None:
            return False
        try:
            info = os.stat(self.path)
            current: tuple[int, int, int] | None = (info.st_mtime_ns, info.st_size, info.st_ino)
        except OSError:
            current = None
        if current == self._seen:
            return False
        self._seen = current
        if current is None:
            self._refuse(f"{self.path}: the forecast file is missing")
            return False
        try:
            entries = parse_forecast_file(self.path, self.machine)
        except ForecastError as exc:
            self._refuse(str(exc))
            return False
        self._activate(entries, f"file {self.path}")
        return True

    def source_for_machine(self) -> FailureChance:
        """The active forecast, or NoFailures when it is empty (the cost's fast path)."""
        return self.active if self.active.entries else NoFailures()

    def set_entries(self, rows: Any, by: str) -> int:
        """Replace the forecast with a monitor's entries; ForecastError if any is wrong."""
        entries = entries_from_wire(self.machine, rows)
        self._activate(entries, f"RPC by {by}")
        return len(entries)

    def _activate(self, entries: list[ForecastEntry], source: str) -> None:
        self.active = Forecast(self.machine, entries)
        self.version += 1
        self.source = source
        self.loaded_at = self.clock.now()
        self.last_error = None
        log.info("failure forecast active", source=source, entries=len(entries))

    def _refuse(self, error: str) -> None:
        self.last_error = f"{error}; the previous forecast stays active"
        log.error("failure forecast refused", error=error, active_source=self.source)

    def status(self) -> dict[str, Any]:
        return {"source": self.source, "entries": len(self.active.entries),
                "loaded_at": self.loaded_at, "file": str(self.path) if self.path else None,
                "last_error": self.last_error}

    def wire(self, known_version: int) -> dict[str, Any] | None:
        """The forecast for a replica that has `known_version`; None when that is current."""
        if known_version == self.version:
            return None
        return {"version": self.version,
                "entries": [entry.to_wire() for entry in self.active.entries]}
