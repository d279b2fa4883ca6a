"""A reservation and its rules, with no clock, store or RPC of its own.

Cobalt's reservation (reference §5, bgsched.py:97-438): a name, a start, a duration, the places
(blocks on Blue Gene/P; node numbers on a flat machine), the users allowed (None: everyone), a
project, the queue whose jobs run in it (`R.<name>` unless another is given), an optional cycle
period, and whether wiring passthrough is blocked. Decisions where Cobalt is loose are written
in docs/operator-guide.md ("Reservations").
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from cobaltlite.errors import InputError, MachineError
from cobaltlite.machine.model import Machine

MAX_BOOKED_PERIODS = 64
"""At most this many periods of one cyclic reservation are booked per pass: enough to cover any
job's wall time unless the cycle is absurdly short (a job still never starts across one: the
scheduler checks the periods it books, and a later period is booked at a later pass)."""

_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,56}$")
_START = re.compile(r"^(\d{4})_(\d\d)_(\d\d)-(\d\d):(\d\d)$")
_HMS = re.compile(r"^(\d+):(\d\d):(\d\d)$")
_HM = re.compile(r"^(\d+):(\d\d)$")


class ReservationError(InputError):
    """A reservation request that cannot be honoured; the message says what and why."""


def queue_name(name: str, queue: str) -> str:
    """The queue of reservation `name`: the existing queue given with -q, else its own
    R.<name> (also for showres and partlist, which see the reservation as a row)."""
    return queue or f"R.{name}"


@dataclass(frozen=True, slots=True)
class Window:
    """What the scheduler sees of a reservation for one pass: `places` are held over
    [start, end) for the jobs of `queue`, which run only there and then, on the places of
    `inside`: the reserved places and, on Blue Gene/P, every block within them (Cobalt ran a
    reservation's jobs on its blocks' children too, reference §5)."""

    name: str
    queue: str
    places: frozenset[str]
    start: float
    end: float
    block_passthrough: bool = False
    inside: frozenset[str] = frozenset()

    def to_row(self) -> list[Any]:
        """Compact, for the scheduler over RPC."""
        return [self.name, self.queue, sorted(self.places), self.start, self.end,
                self.block_passthrough, sorted(self.inside)]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Window:
        name, queue, places, start, end, wires, inside = row
        return cls(name, queue, frozenset(places), start, end, wires, frozenset(inside))


@dataclass(frozen=True, slots=True)
class Reservation:
    name: str
    start: float          # epoch seconds of the current (or only) period
    duration: float       # seconds
    places: tuple[str, ...]
    users: tuple[str, ...] | None = None   # None: every user (Cobalt's `-u '*'`)
    project: str = ""
    queue: str = ""       # "" means R.<name>
    cycle: float = 0.0    # seconds between period starts; 0: not cyclic
    block_passthrough: bool = False
    res_id: int = 0       # Cobalt's res_id: a new one for each period of a cyclic reservation
    cycle_id: int = 0     # Cobalt's cycle_id: the same for every period
    began: bool = False   # the B record of the current period is written
    created_by: str = ""

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def queue_name(self) -> str:
        return queue_name(self.name, self.queue)

    @property
    def owns_queue(self) -> bool:
        """True when the reservation made its queue (R.<name>) and removes it when it ends."""
        return not self.queue

    def active(self, now: float) -> bool:
        return self.start <= now < self.end

    def is_over(self, now: float) -> bool:
        """A non-cyclic reservation is over at its end; a cyclic one never is (it rolls)."""
        return not self.cycle and self.end <= now

    def periods(self, since: float,
                count: int = MAX_BOOKED_PERIODS) -> Iterator[tuple[float, float]]:
        """(start, end) of the periods that end after `since`, first one first."""
        start = self.start
        if self.cycle and self.end <= since:
            start += self.cycle * ((since - self.end) // self.cycle + 1)
        for _ in range(count if self.cycle else 1):
            if start + self.duration > since:
                yield start, start + self.duration
            start += self.cycle

    def rolled(self, now: float, res_id: int) -> tuple[Reservation, int]:
        """A cyclic reservation moved to its first period that ends after `now`, and how many
        periods were skipped (0: unchanged). Each new period is a new res_id (Cobalt): `res_id`,
        drawn by the caller from the counter that numbers every reservation, so that no two
        reservations' records share an id."""
        if not self.cycle or self.end > now:
            return self, 0
        skipped = int((now - self.end) // self.cycle) + 1
        return replace(self, start=self.start + skipped * self.cycle,
                       res_id=res_id, began=False), skipped

    def windows(self, since: float, machine: Machine) -> list[Window]:
        """The periods ending after `since`, as the scheduler books them."""
        places = frozenset(self.places)
        inside = machine.places_within(places)
        return [Window(self.name, self.queue_name, places, start, end, self.block_passthrough,
                       inside) for start, end in self.periods(since)]

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["places"] = list(self.places)
        row["users"] = None if self.users is None else list(self.users)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Reservation:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in row.items() if k in known}
        values["places"] = tuple(values.get("places") or ())
        users = values.get("users")
        values["users"] = None if users is None else tuple(users)
        return cls(**values)

    def describe_places(self) -> str:
        return ":".join(self.places)


# ---- parsing what setres and the Qsim file give ----------------------------------------------


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ReservationError(
            f"reservation name {name!r}: use 1 to 56 letters, digits, '_', '.', '+' or '-'")
    return name


def parse_start(text: str | float, now: float, utc: bool = False) -> float:
    """`YYYY_MM_DD-HH:MM` (local time, as Cobalt's setres; UTC with `utc`, as Qsim's traces),
    `now`, or epoch seconds; epoch seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    if text == "now":
        return float(int(now))
    match = _START.match(str(text).strip())
    if not match:
        raise ReservationError(f"start {text!r}: give YYYY_MM_DD-HH:MM or now")
    year, month, day, hour, minute = (int(g) for g in match.groups())
    fields = (year, month, day, hour, minute, 0, 0, 0, -1)
    try:
        stamp = calendar.timegm(fields) if utc else time.mktime(fields)
        shown = (time.gmtime if utc else time.localtime)(stamp)[:5]
    except (OverflowError, ValueError) as exc:
        raise ReservationError(f"start {text!r}: {exc}") from None
    if shown != (year, month, day, hour, minute):
        raise ReservationError(f"start {text!r} is not a valid date and time")
    return float(stamp)


def parse_duration(text: str | int | float, what: str = "duration") -> float:
    """Minutes (`90`), `HH:MM` or `HH:MM:SS`, as Cobalt's setres; seconds, > 0."""
    raw = str(text).strip()
    seconds: float
    if (m := _HMS.match(raw)) is not None:
        h, mi, s = (int(g) for g in m.groups())
        if mi > 59 or s > 59:
            raise ReservationError(f"{what} {raw!r}: minutes and seconds go up to 59")
        seconds = h * 3600 + mi * 60 + s
    elif (m := _HM.match(raw)) is not None:
        h, mi = (int(g) for g in m.groups())
        if mi > 59:
            raise ReservationError(f"{what} {raw!r}: minutes go up to 59")
        seconds = h * 3600 + mi * 60
    elif raw.isdigit():
        seconds = int(raw) * 60
    else:
        raise ReservationError(f"{what} {raw!r}: give minutes, HH:MM or HH:MM:SS")
    if seconds <= 0:
        raise ReservationError(f"{what} {raw!r} must be longer than zero")
    return float(seconds)


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def split_list(text: str | Sequence[str] | None) -> list[str]:
    """Cobalt's ':'-separated lists (`-p ANL-R00-M0-512:ANL-R00-M1-512`, `-u alice:bob`); lists
    pass through."""
    if text is None:
        return []
    if isinstance(text, int | float):  # a YAML file's bare node number
        text = str(text)
    items = text.split(":") if isinstance(text, str) else list(text)
    return [str(item).strip() for item in items if str(item).strip()]


# ---- validation against a machine and the other reservations ---------------------------------


def place_names(machine: Machine) -> list[str]:
    """The places a reservation may name: schedulable blocks, or a flat machine's nodes."""
    return [str(row["name"]) for row in machine.block_states()]


def check_places(machine: Machine, places: Iterable[str]) -> tuple[str, ...]:
    """The places sorted and de-duplicated; ReservationError naming each unknown one."""
    chosen = sorted(set(places), key=_place_order)
    if not chosen:
        raise ReservationError("Must supply either -p with value or partitions as arguments")
    known = set(place_names(machine))
    unknown = [p for p in chosen if p not in known]
    if unknown:
        kind = "node" if _flat(machine) else "block"
        raise ReservationError(f"unknown {kind}(s) on {machine.name}: {', '.join(unknown)}")
    return tuple(chosen)


def pick_nodes(machine: Machine, count: int, start: float, end: float,
               others: Iterable[Reservation]) -> tuple[str, ...]:
    """`count` nodes of a flat machine free of every other reservation over [start, end):
    the highest-numbered ones, so reservations stay clear of the low nodes jobs get first."""
    if not _flat(machine):
        raise ReservationError("a node count (--nodecount) is for flat machines; "
                               "on Blue Gene/P name the blocks")
    taken: set[str] = set()
    for other in others:
        if _periods_overlap(other, start, end):
            taken.update(other.places)
    free = [n for n in reversed(place_names(machine)) if n not in taken]
    if not 0 < count <= len(free):
        raise ReservationError(f"--nodecount {count}: {len(free)} of {machine.total_nodes} "
                               "nodes are free of other reservations over that time")
    return tuple(sorted(free[:count], key=int))


def footprint(machine: Machine, places: Iterable[str]) -> set[str]:
    """Every schedulable place sharing hardware with `places` (blocks sharing a node card)."""
    shared: set[str] = set()
    for place in places:
        try:
            shared.update(machine.places_over(place))
        except MachineError as exc:
            raise ReservationError(str(exc)) from None
    return shared


def overlapping(machine: Machine, new: Reservation,
                others: Iterable[Reservation]) -> list[str]:
    """Names of the reservations sharing hardware with `new` at some common time."""
    mine = footprint(machine, new.places)
    clashes = []
    for other in others:
        if other.name == new.name:
            continue
        if any(_periods_overlap(other, s, e) for s, e in new.periods(new.start)) and \
                mine & footprint(machine, other.places):
            clashes.append(other.name)
    return sorted(clashes)


def _periods_overlap(res: Reservation, start: float, end: float) -> bool:
    for s, e in res.periods(start):
        if s >= end:
            return False
        if e > start:
            return True
    return False


def _flat(machine: Machine) -> bool:
    return machine.min_block_size == 1 and all(
        str(n).isdigit() for n in machine.failure_units()[:1])


def _place_order(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (0, name)
