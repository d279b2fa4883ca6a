"""A setres request (a dict, as the command or a Qsim file line gives it) made into a
`Reservation`, with every check before anything changes.

Keys: name, start ("now", YYYY_MM_DD-HH:MM or epoch seconds), duration and cycle (minutes,
HH:MM or HH:MM:SS), places (names; flat machines also take ranges such as 0-15), nodecount
(flat machines), users (a list, or None / ["*"] for everyone), project, queue,
block_passthrough, force.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from cobaltlite.machine.bits import iter_bits, ranges_to_mask
from cobaltlite.machine.model import Machine
from cobaltlite.reservations.model import (
    Reservation,
    ReservationError,
    check_name,
    check_places,
    overlapping,
    parse_duration,
    parse_start,
    pick_nodes,
    split_list,
)

REQUEST_KEYS = frozenset({"name", "start", "duration", "cycle", "places", "nodecount", "users",
                          "project", "queue", "block_passthrough", "force"})


def unix_user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def build_reservation(
    request: Mapping[str, Any], machine: Machine, now: float | None,
    others: Iterable[Reservation], user_exists: Callable[[str], bool] = unix_user_exists,
    utc: bool = False, base: Reservation | None = None,
) -> tuple[Reservation, list[str]]:
    """The reservation asked for and the names of the others it overlaps (refused unless
    `force`); ReservationError naming what is wrong. `now` None skips the check that the
    reservation is not over already (a Qsim file is read before its replay's clock exists).
    `base`: the reservation a modify (setres -m) starts from; keys absent keep its values."""
    unknown = set(request) - REQUEST_KEYS
    if unknown:
        raise ReservationError(f"unknown reservation fields: {', '.join(sorted(unknown))}")
    others = [o for o in others if base is None or o.name != base.name]
    name = check_name(request.get("name", base.name if base else ""))
    if base is None and any(o.name == name for o in others):
        raise ReservationError(f"reservation '{name}' already exists")
    start = _start(request, now, utc, base)
    duration = (parse_duration(request["duration"]) if request.get("duration") is not None
                else base.duration if base else None)
    if duration is None:
        raise ReservationError("Must supply a duration time for the reservation with -d")
    cycle = (parse_duration(request["cycle"], "cycle") if request.get("cycle") not in (None, "")
             else base.cycle if base else 0.0)
    if cycle and cycle < duration:
        raise ReservationError(f"cycle {cycle:g} s is shorter than the duration {duration:g} s: "
                               "periods would overlap")
    if now is not None and not cycle and start + duration <= now:
        ends = datetime.fromtimestamp(start + duration, UTC)
        raise ReservationError(f"Start time + duration ({ends:%Y-%m-%d %H:%M:%S} UTC) already "
                               "in the past")
    places = _places(request, machine, start, start + duration, others, base)
    users = _users(request, user_exists, base)
    res = Reservation(
        name=name, start=start, duration=duration, places=places, users=users,
        project=str(request.get("project") or (base.project if base else "")),
        queue=str(request.get("queue") or (base.queue if base else "")),
        cycle=cycle,
        block_passthrough=bool(request.get("block_passthrough",
                                           base.block_passthrough if base else True)),
    )
    if base is not None:
        res = replace(res, res_id=base.res_id, cycle_id=base.cycle_id,
                      began=base.began and start == base.start, created_by=base.created_by)
    clashes = overlapping(machine, res, others)
    if clashes and not request.get("force"):
        raise ReservationError(
            f"reservation '{name}' overlaps reservation(s) {', '.join(clashes)} on the same "
            "places at the same time; choose other places or times, or force it (--force)")
    return res, clashes


def _start(request: Mapping[str, Any], now: float | None, utc: bool,
           base: Reservation | None) -> float:
    if request.get("start") is None:
        if base is None:
            raise ReservationError("Must supply a start time for the reservation with -s")
        return base.start
    return parse_start(request["start"], now if now is not None else 0.0, utc)


def _places(request: Mapping[str, Any], machine: Machine, start: float, end: float,
            others: list[Reservation], base: Reservation | None) -> tuple[str, ...]:
    count = request.get("nodecount")
    names = split_list(request.get("places"))
    if count is not None:
        if names:
            raise ReservationError("give places or a node count, not both")
        if isinstance(count, bool) or not isinstance(count, int):
            raise ReservationError(f"node count {count!r}: give a whole number")
        return pick_nodes(machine, count, start, end, others)
    if not names and base is not None:
        return base.places
    return named_places(machine, names)


def named_places(machine: Machine, names: list[str]) -> tuple[str, ...]:
    """Block names, node numbers or node ranges (`0-15`, as qstat shows locations) as the
    machine's places, sorted; ReservationError naming each unknown one."""
    expanded: list[str] = []
    for name in names:
        if "-" in name and name.replace("-", "").replace(",", "").isdigit():
            try:  # a flat machine's node range
                expanded.extend(str(n) for n in iter_bits(ranges_to_mask(name)))
                continue
            except ValueError:
                pass
        expanded.append(name)
    return check_places(machine, expanded)


def _users(request: Mapping[str, Any], user_exists: Callable[[str], bool],
           base: Reservation | None) -> tuple[str, ...] | None:
    if "users" not in request:
        return base.users if base else None
    users = request["users"]
    names = split_list(users) if users is not None else ["*"]
    if names == ["*"]:
        return None
    unknown = [u for u in names if u == "*" or not user_exists(u)]
    if unknown:
        raise ReservationError(f"unknown user(s): {', '.join(unknown)} ('*' alone means "
                               "every user)")
    return tuple(sorted(set(names)))
