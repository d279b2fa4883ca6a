"""The failure log: a file of failures to replay (a RAS extract, or a list made elsewhere).

Format, one failure a line; `#` starts a comment, blank lines are skipped:

    # TIME                 COMPONENT
    1231459200             R00-M0          # epoch seconds, on the trace's clock
    2009-01-09T06:30:00    R12-M1-N04      # ISO 8601 date-time, UTC unless it gives an offset

TIME is epoch seconds (decimals allowed, never negative) or an ISO 8601 date-time. COMPONENT is
what `Machine.fail` accepts: a midplane (R00-M0), a node card (R00-M0-N04) or a block name on
Blue Gene/P, a node number on a flat machine. Lines need not be sorted. Any bad line stops the
read with `FILE:LINE:` and the offending value; nothing is replayed from a partly read log.

A Qsim job log (`--out DIR/accounting.log`) is read as a failure log too: its FAIL records are
the failures that replay met, so another replay (another policy, another allocation) can meet
the same ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

from cobaltlite.accounting import read_failure_records
from cobaltlite.errors import InputError, MachineError
from cobaltlite.faults.sources import FailureEvent
from cobaltlite.machine.model import Machine
from cobaltlite.moments import parse_moment

_JOB_LOG_LINE = re.compile(r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;")
"""How an accounting record starts (`MM/DD/YYYY HH:MM:SS;`): the file is a job log."""


def read_failure_log(path: Path, machine: Machine) -> list[FailureEvent]:
    """The failures of the log at `path`, sorted; InputError with file:line on a bad line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"--failure-log {path}: cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"--failure-log {path}: not a text file") from None
    if _JOB_LOG_LINE.match(text):
        entries = [(f"{path}:{lineno}", when, component)
                   for lineno, when, component in read_failure_records(path)]
    else:
        entries = list(_entries(path, text))
    known: set[str] = set()
    events: list[FailureEvent] = []
    for where, when, component in entries:
        if component not in known:
            try:
                machine.places_over(component)
            except MachineError as exc:
                raise InputError(f"{where}: {exc}") from None
            known.add(component)
        events.append(FailureEvent(when, component))
    events.sort()
    return events


def _entries(path: Path, text: str) -> Iterator[tuple[str, float, str]]:
    """(file:line, time, component) of each failure line."""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.partition("#")[0].strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        fields = line.split()
        if len(fields) != 2:
            raise InputError(f"{where}: expected 'TIME COMPONENT', got {line!r}")
        yield where, _time(fields[0], where), fields[1]


def _time(text: str, where: str) -> float:
    try:
        value = parse_moment(text)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: time {text!r} must be zero or more seconds since the epoch")
    return value
