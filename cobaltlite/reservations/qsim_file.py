"""The reservation file of `qsim --reservations FILE`: YAML, or one setres line per reservation.

YAML (a list under `reservations:`, keys as setres's long options)::

    reservations:
      - name: maint
        start: 2009_01_06-08:00      # UTC, as the replayed traces; or epoch seconds
        duration: "08:00:00"
        places: [ANL-R00-R47-32768]  # or "ANL-R00-M0-512:ANL-R00-M1-512"; flat: "0-63"
        cycle: "168:00:00"           # optional: every week
        users: [alice]               # optional: default every user

Lines (blank lines and `#` comments skipped; the leading `setres` is optional)::

    setres -n maint -s 2009_01_06-08:00 -d 08:00:00 -p ANL-R00-R47-32768

Every reservation is checked as setres checks it (places, users are not looked up: a trace's
users are not accounts here); an error names the file and line, and nothing is replayed.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from cobaltlite.commands.common import CommandError, ParserExit, UsageError
from cobaltlite.errors import InputError
from cobaltlite.machine.model import Machine
from cobaltlite.reservations.model import Reservation
from cobaltlite.reservations.requests import REQUEST_KEYS, build_reservation


def load_reservations(path: Path, machine: Machine) -> list[Reservation]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"--reservations {path}: {exc.strerror}") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
    meaningful = [(n, line) for n, line in lines if line and not line.startswith("#")]
    if meaningful and meaningful[0][1].split()[0] in ("setres", "-n", "--name"):
        requests = [(n, _line_request(path, n, line)) for n, line in meaningful]
    else:
        requests = _yaml_requests(path, text)
    made: list[Reservation] = []
    for number, request in requests:
        try:
            res, _ = build_reservation(request, machine, None, made,
                                       user_exists=lambda _u: True, utc=True)
        except InputError as exc:
            raise InputError(f"{path}:{number}: {exc}") from None
        made.append(res)
    return made


def _line_request(path: Path, number: int, line: str) -> dict[str, Any]:
    from cobaltlite.commands.setres import build_parser, request_from_args

    words = shlex.split(line, comments=True)
    if words and words[0] == "setres":
        words = words[1:]
    try:
        args = build_parser("setres").parse_args(words)
        if args.modify:
            raise CommandError("-m (modify) has no meaning in a reservation file")
        return request_from_args(args)
    except (UsageError, CommandError) as exc:
        raise InputError(f"{path}:{number}: {exc}") from None
    except ParserExit:
        raise InputError(f"{path}:{number}: --help has no place in a reservation file") from None


def _yaml_requests(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        document = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not YAML nor setres lines: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("reservations"), list):
        raise InputError(f"{path}: expected a list under 'reservations:' (or setres lines)")
    nodes = document.value[[k.value for k, _ in document.value].index("reservations")][1].value
    requests = []
    for node, item in zip(nodes, data["reservations"], strict=True):
        number = node.start_mark.line + 1
        if not isinstance(item, dict):
            raise InputError(f"{path}:{number}: a reservation is a mapping of setres options")
        unknown = set(item) - REQUEST_KEYS
        if unknown:
            raise InputError(f"{path}:{number}: unknown key(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(REQUEST_KEYS))})")
        for key in ("duration", "cycle"):
            if key in item and not isinstance(item[key], str):
                raise InputError(f"{path}:{number}: {key} {item[key]!r}: quote it (\"04:00:00\" "
                                 "or \"240\"): YAML reads bare 04:00:00 as a number")
        requests.append((number, dict(item)))
    return requests
