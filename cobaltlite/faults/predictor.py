"""The failure predictor of seed 003 §VI-A3: a failure list turned into P_f for the allocation cost.

P_f(X) over [start, end) is the sensitivity when a failure of a component of X falls in that
window, else 1 − specificity (the chance of a false alarm). The paper prints specificity's
formula as TP/(TP+FN); it is TN/(TN+FP), so 1 − specificity is the false-alarm rate. The
scheduler learns only P_f, never when a failure comes. `perfect` (1, 1) and `none` (P_f = 0
everywhere, i.e. ordinary allocation) bound what a predictor can give.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cobaltlite.choices import PAPER_SENSITIVITY, PAPER_SPECIFICITY, PREDICTORS
from cobaltlite.errors import InputError
from cobaltlite.machine.model import FailureChance, Machine, NoFailures

if TYPE_CHECKING:  # the failure generator, loaded only by a replay with failures
    from cobaltlite.faults.sources import FailureEvent


class WindowPredictor:
    """P_f = sensitivity if a failure of the place falls in [start, end), else 1 − specificity."""

    def __init__(
        self,
        events: Sequence[FailureEvent],
        machine: Machine,
        sensitivity: float = PAPER_SENSITIVITY,
        specificity: float = PAPER_SPECIFICITY,
    ) -> None:
        check_rate("--sensitivity", sensitivity)
        check_rate("--specificity", specificity)
        self.hit = sensitivity
        self.miss = 1.0 - specificity
        self._events = sorted(events)
        self._event_times = [event.time for event in self._events]
        # place -> sorted failure times of the components under it: one bisect per question.
        self._times: dict[str, list[float]] = {}
        places_of: dict[str, list[str]] = {}
        for event in events:
            places = places_of.get(event.component)
            if places is None:
                places = places_of[event.component] = machine.places_over(event.component)
            for place in places:
                self._times.setdefault(place, []).append(event.time)
        for times in self._times.values():
            times.sort()

    def chance(self, location: str, start: float, end: float) -> float:
        times = self._times.get(location)
        if times is None:
            return self.miss
        i = bisect_left(times, start)
        return self.hit if i < len(times) and times[i] < end else self.miss


    def failing_components(self, start: float, end: float) -> list[str]:
        """The components with a failure in [start, end): `TwoLevelChance` for fast BLK_f."""
        first = bisect_left(self._event_times, start)
        last = bisect_left(self._event_times, end, first)
        return [event.component for event in self._events[first:last]]


def check_rate(option: str, value: float) -> None:
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise InputError(f"{option} {value!r}: must be between 0 and 1")


def build_predictor(
    kind: str,
    events: Sequence[FailureEvent],
    machine: Machine,
    sensitivity: float = PAPER_SENSITIVITY,
    specificity: float = PAPER_SPECIFICITY,
) -> FailureChance:
    """`window` (the paper's, with the given rates), `perfect` (1, 1) or `none` (P_f = 0)."""
    check_rate("--sensitivity", sensitivity)
    check_rate("--specificity", specificity)
    if kind == "window":
        return WindowPredictor(events, machine, sensitivity, specificity)
    if kind == "perfect":
        return WindowPredictor(events, machine, 1.0, 1.0)
    if kind == "none":
        return NoFailures()
    raise InputError(f"--predictor {kind!r}: choose one of {', '.join(PREDICTORS)}")
