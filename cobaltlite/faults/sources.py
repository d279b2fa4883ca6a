"""Failure lists: when which component fails. One list feeds both Qsim (which kills jobs at those
times) and the predictor (which turns it into P_f for the allocation cost).

Weibull generation follows seed 003 §VI-A3: each failure unit (a 512-node midplane on Blue
Gene/P, a node on a flat machine; `Machine.failure_units`) fails independently, with Weibull
gaps of shape k and scale λ between its failures, from the start of the span to its end. Each
unit draws from its own generator seeded by (seed, unit name), so a unit's failures do not change
when the machine gains or loses other units, and the same seed gives the same list on any host.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from cobaltlite.errors import InputError

SPAN_AFTER_LAST_SUBMISSION = 30 * 86400.0
"""How far past the last submission a generated list reaches: a replay runs on after its last
arrival until the queue drains, and failures past the list's end would silently stop."""


@dataclass(frozen=True, slots=True, order=True)
class FailureEvent:
    """At `time` (seconds on the trace's clock), `component` fails."""

    time: float
    component: str


def weibull_failures(
    units: Sequence[str], shape: float, scale: float, start: float, end: float, seed: int
) -> list[FailureEvent]:
    """Every failure of every unit in [start, end), sorted by time then component."""
    check_weibull(shape, scale)
    events: list[FailureEvent] = []
    for unit in units:
        draw = random.Random(f"{seed}:{unit}").weibullvariate
        t = start + draw(scale, shape)
        while t < end:
            events.append(FailureEvent(t, unit))
            t += draw(scale, shape)
    events.sort()
    return events


def check_weibull(shape: float, scale: float) -> None:
    if not (shape > 0 and math.isfinite(shape)):
        raise InputError(f"--weibull-shape {shape!r}: the shape k must be a number above zero")
    if not (scale > 0 and math.isfinite(scale)):
        raise InputError(f"Weibull scale {scale!r}: the scale λ must be seconds above zero "
                         "(from --weibull-scale, or --mtbf)")


def unit_mean(shape: float, scale: float) -> float:
    """Mean time between failures of one unit: λ·Γ(1 + 1/k)."""
    return scale * math.gamma(1.0 + 1.0 / shape)


def scale_for_system_mtbf(mtbf_hours: float, units: int, shape: float) -> float:
    """The per-unit scale λ (seconds) that gives the whole machine `mtbf_hours` between failures.

    With n independent units of mean m each, failures of the machine come n times as often, so
    the system MTBF is m / n (seed 003 §VI-A3: λ = 1–6 × 10⁶ s over 80 midplanes is 3.5–21 h).
    """
    if not (mtbf_hours > 0 and math.isfinite(mtbf_hours)):
        raise InputError(f"--mtbf {mtbf_hours!r}: the system MTBF must be hours above zero")
    if not (shape > 0 and math.isfinite(shape)):
        raise InputError(f"--weibull-shape {shape!r}: the shape k must be a number above zero")
    return mtbf_hours * 3600.0 * units / math.gamma(1.0 + 1.0 / shape)
