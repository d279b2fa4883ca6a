"""Per-user decayed usage: the input `user_usage` of fairshare policies (seed 004 §4; decisions
in docs/fairness.md, "Seed 004").

A node held for a second counts 1 node-second, weighted by 2^(-age / half-life): usage from one
half-life ago counts half. Running jobs count as they run (the integral so far), finished jobs
count their whole run. `share` divides a user's usage by what the whole machine would have
delivered under the same decay (machine_size x half-life / ln 2), so it lies in [0, 1]: 0 for
a user who ran nothing lately, 1 for one who has held the whole machine for ever.

Each user keeps four numbers at a reference time r: the finished usage F, the running nodes N
and S = sum over running jobs of nodes x 2^((start - r) / h). The usage at t >= r is then
F d + (h / ln 2)(N - S d) with d = 2^((r - t) / h): O(1) per read, per start and per end,
whatever the number of jobs. The queue manager stores (F, r) per user; N and S are rebuilt
from the running jobs after a restart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from cobaltlite.errors import InputError

DEFAULT_HALF_LIFE = 86400.0
"""24 hours: seed guide §5d's example (seed 004 leaves the fairshare decay unspecified)."""


def check_half_life(value: float, what: str = "usage half-life") -> float:
    """`value` if it is a usable half-life in seconds, else InputError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{what} {value!r}: must be a number of seconds")
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{what} {value!r}: must be a finite number of seconds > 0")
    return float(value)


class UsageLedger:
    """Decayed node-seconds per user, read as a share of the machine at the ledger's clock."""

    def __init__(self, half_life: float, clock: Callable[[], float]) -> None:
        self.half_life = check_half_life(half_life)
        self._clock = clock
        self._mean_life = self.half_life / math.log(2)  # the integral of 2^(-x/h) over x >= 0
        # user -> [reference time, finished usage F, running nodes N, running weight S]
        self._users: dict[str, list[float]] = {}

    def _at(self, user: str, when: float) -> list[float]:
        """The user's numbers moved forward to `when` (never backwards)."""
        state = self._users.get(user)
        if state is None:
            state = self._users[user] = [when, 0.0, 0.0, 0.0]
        elif when > state[0]:
            decay = 2.0 ** ((state[0] - when) / self.half_life)
            state[0], state[1], state[3] = when, state[1] * decay, state[3] * decay
        return state

    def started(self, user: str, nodes: int, at: float) -> None:
        state = self._at(user, at)
        state[2] += nodes
        state[3] += nodes * 2.0 ** ((at - state[0]) / self.half_life)

    def stopped(self, user: str, nodes: int, started_at: float, at: float) -> None:
        """A run that started at `started_at` ended (or was killed) at `at`."""
        state = self._at(user, at)
        h, ref = self.half_life, state[0]
        state[2] -= nodes
        state[3] -= nodes * 2.0 ** ((started_at - ref) / h)
        if state[2] <= 0:  # no run left: drop the rounding residue of the running weight
            state[2] = state[3] = 0.0
        state[1] += nodes * self._mean_life * (2.0 ** ((at - ref) / h)
                                                - 2.0 ** ((started_at - ref) / h))

    def usage(self, user: str, now: float) -> float:
        """Decayed node-seconds of `user` at `now`."""
        state = self._users.get(user)
        if state is None:
            return 0.0
        ref, finished, nodes, weight = state
        decay = 2.0 ** ((ref - now) / self.half_life) if now > ref else 1.0
        return finished * decay + self._mean_life * (nodes - weight * decay)

    def share_of(self, machine_size: int) -> Callable[[str], float]:
        """user -> usage now as a share of a machine of `machine_size` nodes: the input
        `user_usage` (PassInputs.user_usage)."""
        if machine_size <= 0:
            raise InputError(f"machine size {machine_size!r}: must be at least one node")
        full, usage, clock = machine_size * self._mean_life, self.usage, self._clock
        # Usage is continuous in time (a run starting or ending at t adds nothing at t), so a
        # user's share is computed once per instant however many of their jobs are scored.
        known: dict[str, float] = {}
        instant = [math.nan]

        def share(user: str) -> float:
            now = clock()
            if now != instant[0]:
                known.clear()
                instant[0] = now
            value = known.get(user)
            if value is None:
                value = known[user] = usage(user, now) / full
            return value

        return share

    def finished(self, user: str) -> tuple[str, float, float]:
        """(user, finished usage, its reference time): the row a store keeps across restarts."""
        state = self._users.get(user)
        return (user, 0.0, 0.0) if state is None else (user, state[1], state[0])

    def restore(self, finished: Iterable[tuple[str, float, float]]) -> None:
        """Load (user, finished usage, reference time) rows kept by `finished`; call before
        `started` rebuilds the running jobs."""
        for user, value, ref in finished:
            self._users[user] = [ref, value, 0.0, 0.0]
