"""Time, read only through a clock object.

The scheduler and the queue-manager logic never call `time.time()` themselves: a daemon hands them
a `WallClock`, Qsim a `VirtualClock`, and the same code runs under both.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch (or since the trace's origin under Qsim)."""
        ...


class WallClock:
    """The real time, for daemons."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Simulated time, moved forward only by the event loop that owns it."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        if when < self._now:
            raise ValueError(f"virtual time cannot go backwards: {when} < {self._now}")
        self._now = when
