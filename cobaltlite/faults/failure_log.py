"""The failure log: a file of failures to replay (a RAS extract, or a list made elsewhere).

Format, one failure a line; `#` starts a comment, blank lines are skipped:

    # TIME                 COMPONENT
    1231459200             R00-M0          # epoch seconds, on the trace's clock
    2009-01-09T06:30:00    R12-M1-N04      # ISO 8601 date-time, UTC unless it gives an offset

TIME is epoch seconds (decimals allowed, never negative) or an ISO 8601 date-time. COMPONENT is
what `Machine.fail` accepts: a midplane (R00-M0), a node card (R00-M0-N04) or a block name on
Blue Gene/P, a node number on a flat machine. Lines need not be sorted. Any bad line stops the
read with `FILE:LINE:` and the offending value; nothing is replayed from a partly read log.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from cobaltlite.errors import InputError, MachineError
from cobaltlite.faults.sources import FailureEvent
from cobaltlite.machine.model import Machine


def read_failure_log(path: Path, machine: Machine) -> list[FailureEvent]:
    """The failures of the log at `path`, sorted; InputError with file:line on a bad line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"--failure-log {path}: cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"--failure-log {path}: not a text file") from None
    known: set[str] = set()
    events: list[FailureEvent] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.partition("#")[0].strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        fields = line.split()
        if len(fields) != 2:
            raise InputError(f"{where}: expected 'TIME COMPONENT', got {line!r}")
        time_text, component = fields
        when = _time(time_text, where)
        if component not in known:
            try:
                machine.places_over(component)
            except MachineError as exc:
                raise InputError(f"{where}: {exc}") from None
            known.add(component)
        events.append(FailureEvent(when, component))
    events.sort()
    return events


def _time(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(f"{where}: time {text!r} is neither epoch seconds nor an ISO "
                             "date-time such as 2009-01-09T06:30:00") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = moment.timestamp()
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: time {text!r} must be zero or more seconds since the epoch")
    return value
