"""The metrics a monitor samples (seed 000 §4.2) and the time averages the tuning rules read.

One definition serves Qsim (which records a value at every event, so its averages are exact) and
the live monitor (which records one sample per interval, so its averages treat each sample as
holding until the next one). Decisions, recorded in docs/metric-aware.md:

* queue depth = Σ over queued jobs of (now - submit), in **minutes** as the paper reports it;
* utilization = busy nodes / machine nodes at an instant (allocated nodes: a Blue Gene/P block
  counts whole);
* utilization_1h / _10h / _24h = the time average of the instant utilization over the past 1, 10
  or 24 hours; before that much history exists, over the history there is.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping

ROLLING_UTILIZATION: Mapping[str, float] = {
    "utilization_1h": 3600.0,
    "utilization_10h": 36000.0,
    "utilization_24h": 86400.0,
}
MONITORED_METRICS: tuple[str, ...] = ("queue_depth", "queued_jobs", "utilization",
                                      *ROLLING_UTILIZATION)
"""Every metric a tuning rule may name (its M), and what the monitor keeps in its history."""


class StepSeries:
    """A quantity that keeps its value from one recorded time to the next.

    Times must not go backwards; a second value at the same time replaces the first.
    """

    __slots__ = ("_cumulative", "_times", "_values")

    def __init__(self) -> None:
        self._times: list[float] = []
        self._values: list[float] = []
        self._cumulative: list[float] = []  # ∫ from the first time to times[i]

    def __len__(self) -> int:
        return len(self._times)

    def record(self, time: float, value: float) -> None:
        times = self._times
        if times and time <= times[-1]:
            if time < times[-1]:
                raise ValueError(f"series time went backwards: {time} after {times[-1]}")
            self._values[-1] = value
            return
        if times:
            self._cumulative.append(
                self._cumulative[-1] + self._values[-1] * (time - times[-1]))
        else:
            self._cumulative.append(0.0)
        times.append(time)
        self._values.append(value)

    def value_at(self, time: float) -> float:
        i = bisect_right(self._times, time) - 1
        return self._values[i] if i >= 0 else 0.0

    def _integral_to(self, time: float) -> float:
        i = bisect_right(self._times, time) - 1
        if i < 0:
            return 0.0
        return self._cumulative[i] + self._values[i] * (time - self._times[i])

    def average(self, time: float, span: float) -> float:
        """Time average over [time - span, time], clipped to the first recorded time."""
        if not self._times:
            return 0.0
        start = max(time - span, self._times[0])
        if time <= start:
            return self.value_at(time)
        return (self._integral_to(time) - self._integral_to(start)) / (time - start)


def monitored_values(
    now: float, utilization: StepSeries, queue_depth_seconds: float, queued_jobs: int
) -> dict[str, float]:
    """The values of MONITORED_METRICS at `now`, given the instant utilization's history."""
    values = {
        "queue_depth": queue_depth_seconds / 60.0,
        "queued_jobs": float(queued_jobs),
        "utilization": utilization.value_at(now),
    }
    for name, span in ROLLING_UTILIZATION.items():
        values[name] = utilization.average(now, span)
    return values
