"""Algorithm 1 of seed 000 (§3.4): every C_i, read the monitored metrics and set the tunables.

The same `Tuner` runs inside Qsim (on the virtual clock, `cobaltlite.tuning.qsim`) and inside the
scheduler daemon (on the wall clock). It owns the current BF and W, the admin's pins and the log
of every change with the metric values that caused it; it never touches a scheduler itself: the
caller applies `values` after a check that changed something.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cobaltlite.tuning.scheme import TUNABLE_BOUNDS, TuningScheme

DEFAULT_VALUES: Mapping[str, float] = {"bf": 1.0, "w": 1}
"""FCFS with backfilling and no window: what a tunable is when no rule and no pin sets it."""


@dataclass(frozen=True)
class Change:
    time: float
    tunable: str
    old: float
    new: float
    cause: str                       # the rule's name, "pinned by an admin" or "pin released"
    metrics: Mapping[str, float] = field(default_factory=dict)

    def reason(self) -> str:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted(self.metrics.items()))
        return f"{self.cause}" + (f" ({shown})" if shown else "")

    def as_record(self) -> dict[str, Any]:
        return {"time": self.time, "tunable": self.tunable, "old": self.old, "new": self.new,
                "cause": self.cause, "metrics": dict(self.metrics)}


class Tuner:
    def __init__(self, scheme: TuningScheme | None, start: float,
                 base: Mapping[str, float] | None = None) -> None:
        """`base`: the tunables' values before any rule (default DEFAULT_VALUES); a rule's
        initial value T_i replaces its tunable's."""
        self.scheme = scheme
        self.values: dict[str, float] = {**DEFAULT_VALUES, **(base or {})}
        self.wanted: dict[str, float] = {}   # what the rules say, pinned or not
        self.pins: dict[str, float] = {}
        self.changes: list[Change] = []
        self.last_check = start
        if scheme is not None:
            for rule in scheme.rules:
                self.values[rule.tunable] = self.wanted[rule.tunable] = rule.initial

    def due(self, now: float) -> bool:
        """Whether C_i has passed since the last check (Algorithm 1's test)."""
        return self.scheme is not None and now - self.last_check >= self.scheme.check_interval

    def check(self, now: float, metrics: Mapping[str, float]) -> list[Change]:
        """Classify the events of every rule and set the tunables; return what changed."""
        if self.scheme is None:
            return []
        self.last_check = now
        made = []
        for rule in self.scheme.rules:
            wanted = rule.raised if rule.fires(metrics) else rule.initial
            self.wanted[rule.tunable] = wanted
            if rule.tunable in self.pins:
                continue
            cause_values = {rule.metric: metrics[rule.metric]}
            if isinstance(rule.threshold, str):
                cause_values[rule.threshold] = metrics[rule.threshold]
            made += self._set(now, rule.tunable, wanted, rule.name, cause_values)
        return made

    def pin(self, now: float, tunable: str, value: float) -> list[Change]:
        """An admin fixes a tunable; rules keep being evaluated but do not move it."""
        low, high = TUNABLE_BOUNDS[tunable]
        if not low <= value <= high or (tunable == "w" and value != int(value)):
            raise ValueError(f"{tunable}={value:g} is outside {tunable.upper()}'s bounds "
                             f"[{low:g}, {high:g}]" + (" or not whole" if tunable == "w" else ""))
        self.pins[tunable] = value
        return self._set(now, tunable, value, "pinned by an admin", {})

    def unpin(self, now: float, tunable: str) -> list[Change]:
        """Release a pin: the tunable returns to what its rule last asked for (or its default)."""
        if self.pins.pop(tunable, None) is None:
            return []
        back = self.wanted.get(tunable, DEFAULT_VALUES[tunable])
        return self._set(now, tunable, back, "pin released", {})

    def replace_scheme(self, scheme: TuningScheme | None) -> None:
        """Run `scheme` from the next check on; tunables it no longer names keep their value."""
        self.scheme = scheme
        self.wanted = {}

    def values_at(self, time: float) -> dict[str, float]:
        """The tunables in force for a pass at `time` (a check runs before the pass at its
        instant, so a change made at `time` counts)."""
        values = {name: self._initial(name) for name in DEFAULT_VALUES}
        for change in self.changes:
            if change.time > time:
                break
            values[change.tunable] = change.new
        return values

    def _initial(self, tunable: str) -> float:
        first = next((c for c in self.changes if c.tunable == tunable), None)
        return first.old if first is not None else self.values[tunable]

    def _set(self, now: float, tunable: str, value: float, cause: str,
             metrics: Mapping[str, float]) -> list[Change]:
        old = self.values[tunable]
        if old == value:
            return []
        self.values[tunable] = value
        change = Change(now, tunable, old, value, cause, dict(metrics))
        self.changes.append(change)
        return [change]
