"""Slack-based backfilling with lookahead (seed 001, Jin 2009, §4.3.2-§4.3.3).

Each waiting job gets a slack: how far past its expected start it may be pushed so that other
jobs can start now. The slack factor (eq. 5) shrinks as the expected wait grows,

    F_slack = min(SLACK_UP, K2 · exp(K1 · T_wait / time_unit) + SLACK_DOWN),

and only a part of it is usable while the job has waited little (eqs. 6-7),

    F_part = min(F_slack, F_min + T_alreadywait · (F_slack − F_min) / T_wait),

so a job's deadline at an instant is first_seen + F_part · T_wait (docs/fairness.md, Seed 001,
D001-1 to D001-3 for T_wait, its units and first_seen).

One pass (§4.3.3 steps 1-12): the first L waiting jobs in rank order that fit in the idle nodes
and that conservative backfilling would not start now are the lookahead (the ones it would
start make one candidate together, D001-5). A depth-first search over their subsets in rank
order (a node's children add one later job: the include/exclude tree with the exclude branches
collapsed, step 3) prunes a
subset when its sizes exceed the idle nodes (step 4), when the machine cannot place it now, or
when starting it now and planning every other waiting job conservatively in rank order puts one
of them past both its deadline and its conservative start (step 5; D001-4). Every other node is a
candidate (step 6); none: conservative backfilling (step 7). Among the candidates goal G1 or G2
picks one (steps 8-11, `choose`); the scheduler starts it and backfills the rest conservatively,
and searches again over the jobs left while that starts a job (D001-5).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.machine.flat import FlatPlanner
from cobaltlite.machine.model import Machine, Planner
from cobaltlite.scheduler.interfaces import SchedulableJob

MAX_LOOKAHEAD = 64
"""The largest lookahead L accepted: the search is exponential in L, and the thesis's sweep
stops at 40 (F11-14)."""


class Goal(StrEnum):
    FAIRNESS = "fairness"        # G1: as close to FCFS as possible, utilization kept high
    UTILIZATION = "utilization"  # G2: utilization raised, staying reasonably close to FCFS


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """Seed 001's constants: Table 3's values are the defaults. Build from user input with
    `from_mapping`, which checks every value; the scheduler takes any instance (lookahead 0
    means no search: conservative backfilling)."""

    slack_up: float = 1.5
    slack_down: float = 1.2
    slack_min: float = 1.1
    k1: float = -0.5
    k2: float = 0.4
    time_unit: float = 10_000.0
    """Seconds of T_wait per unit of eq. 5's exponent: 10⁴ s is the unit that fits Fig. 6."""
    lookahead: int = 20
    goal: Goal = Goal.FAIRNESS
    max_ou_range: float = 1.1
    max_su_range: float = 1.1
    min_u_range: float = 1.0
    max_nodes: int = 256
    """The most search-tree nodes evaluated in one pass (not in the thesis; keeps a pass's cost
    bounded when many small jobs fit: the search stops there with the candidates found)."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], where: str = "") -> SlackSettings:
        """Checked settings from NAME: VALUE pairs (strings or numbers); a ValueError names
        `where` (a file:line or spec key; empty: left to the caller, as argparse names the
        option), the setting and the value."""
        known = {f.name for f in fields(cls)}
        out: dict[str, object] = {}
        for name, raw in values.items():
            if name not in known:
                raise ValueError(f"{where}: " * bool(where) + f"unknown slack setting {name!r}; "
                                 f"known: {', '.join(sorted(known))}")
            out[name] = _checked(name, raw, where)
        return cls(**out)  # type: ignore[arg-type]

    def by_name(self) -> dict[str, Any]:
        """JSON-safe {setting: value}, the goal as its name: what `from_mapping` reads back."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["goal"] = str(self.goal)
        return values


_FACTORS = ("slack_up", "slack_down", "slack_min")
_RANGES = ("max_ou_range", "max_su_range", "min_u_range")


def _checked(name: str, raw: object, where: str) -> object:
    bad = f"{where}: " * bool(where) + f"slack setting {name}={raw}"
    if name == "goal":
        try:
            return Goal(str(raw))
        except ValueError:
            raise ValueError(f"{bad}: choose fairness (G1) or utilization (G2)") from None
    if name in ("lookahead", "max_nodes"):
        try:
            number = int(str(raw))
        except ValueError:
            raise ValueError(f"{bad} is not a whole number") from None
        top = MAX_LOOKAHEAD if name == "lookahead" else 100_000
        if not 1 <= number <= top:
            raise ValueError(f"{bad}: must be from 1 to {top}"
                             + (" (for no lookahead use conservative backfilling)"
                                if name == "lookahead" else ""))
        return number
    try:
        value = float(str(raw))
    except ValueError:
        raise ValueError(f"{bad} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{bad} is not a finite number")
    if name in _FACTORS and value < 1:
        raise ValueError(f"{bad}: a slack factor below 1 would set a job's deadline before its "
                         "expected start; give 1 or more")
    if (name in ("k2", *_RANGES) and value < 0) or (name == "time_unit" and value <= 0):
        raise ValueError(f"{bad}: must be " + ("above 0" if name == "time_unit" else "0 or more"))
    return value


def parse_slack_section(path: Path, value: object) -> SlackSettings:
    """The `slack:` section of cobaltlite.yaml; errors name the file and the setting's line."""
    import yaml

    from cobaltlite.tuning.scheme import _node_lines  # the loader that knows YAML lines

    if not isinstance(value, Mapping):
        raise InputError(f"{path}: option slack: give a mapping of setting: value "
                         "(e.g. {lookahead: 20, goal: utilization})")
    node = yaml.compose(path.read_text())
    lines = _node_lines(node) if node is not None else {}
    for name, raw in value.items():
        try:
            SlackSettings.from_mapping({name: raw}, f"{path}:{lines.get(('slack', name), '?')}")
        except ValueError as exc:
            raise InputError(str(exc)) from None
    return SlackSettings.from_mapping(value)


def slack_factor(settings: SlackSettings, t_wait: float) -> float:
    """F_slack of eq. 5 for an expected wait of `t_wait` seconds."""
    s = settings
    return min(s.slack_up, s.k2 * math.exp(s.k1 * t_wait / s.time_unit) + s.slack_down)


def usable_factor(settings: SlackSettings, t_wait: float, waited: float) -> float:
    """F_part of eqs. 6-7: from F_min at first sight to F_slack once the job waited T_wait."""
    full = slack_factor(settings, t_wait)
    if waited >= t_wait:
        return full
    return settings.slack_min + waited * (full - settings.slack_min) / t_wait


Reference = tuple[Mapping[int, float], Sequence[SchedulableJob]]
"""A plan `_plan` made (every job's planned start) and the combination it started now."""


@dataclass(slots=True)
class Candidate:
    """A combination that survived the pruning, scored as step 9 scores it."""

    jobs: tuple[SchedulableJob, ...]
    ou: float  # Σ max(planned start − expected start, 0) / n over the waiting jobs
    su: float  # Σ max(expected start − planned start, 0) / n
    u: float   # busy nodes right after starting it (and the conservative starts) / N
    starts: frozenset[int] = frozenset()  # the jobids its plan starts now, itself included
    plan: Mapping[int, float] | None = None  # every waiting job's start in its plan
    planner: Planner | None = None  # that plan's planner (None: the base plan's)


def _ratio(a: float, b: float) -> float:
    """a/b with 0/0 = 1 and x/0 = ∞ (D001-6)."""
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def choose(candidates: Sequence[Candidate], goal: Goal, settings: SlackSettings) -> Candidate:
    """Steps 9-11: the last candidate accepted against moving references, else the anchor."""
    s = settings
    if goal is Goal.FAIRNESS:
        anchor = min(candidates, key=lambda c: c.ou)  # c*: the first of least OU
        chosen, ref_su, ref_u = anchor, anchor.su, anchor.u
        for c in candidates:
            if (_ratio(c.ou, anchor.ou) <= s.max_ou_range and _ratio(c.su, ref_su) <= s.max_su_range
                    and _ratio(c.u, ref_u) >= s.min_u_range):
                chosen, ref_su, ref_u = c, c.su, c.u
        return chosen
    anchor = max(candidates, key=lambda c: c.u)  # c**: the first of greatest U
    chosen, ref_ou, ref_su = anchor, anchor.ou, anchor.su
    for c in candidates:
        if (_ratio(anchor.u, c.u) <= s.min_u_range and _ratio(ref_ou, c.ou) >= s.max_ou_range
                and _ratio(ref_su, c.su) >= s.max_su_range):
            chosen, ref_ou, ref_su = c, c.ou, c.su
    return chosen


class SlackBackfill:
    """The scheme's memory across passes and its search. `expected` holds, per waiting job, when
    the scheduler first planned it and its expected start then (D001-2)."""

    def __init__(self, settings: SlackSettings | None = None) -> None:
        self.settings = settings or SlackSettings()
        self.expected: dict[int, tuple[float, float]] = {}  # jobid -> (first seen, start)
        self.plan_starts: frozenset[int] | None = None
        """The jobids that the plan behind the last `select` starts now (None: it made no
        plan). That plan is the conservative pass the scheduler runs next, so the scheduler
        stops its pass after the last of them instead of planning the queue a second time."""
        self.chosen: Candidate | None = None
        """The combination the last `select` chose, with its plan and planner (None: none, the
        base plan stands)."""

    def deadline(self, jobid: int, now: float) -> float:
        """The latest start job `jobid` may be planned at now without overrunning its slack."""
        first_seen, expected = self.expected[jobid]
        t_wait = expected - first_seen
        if t_wait <= 0:
            return first_seen  # no expected wait: no slack (D001-1)
        return first_seen + usable_factor(self.settings, t_wait, now - first_seen) * t_wait

    def select(self, ranked: Sequence[SchedulableJob], machine: Machine, now: float,
               planned: Mapping[int, float] | None = None) -> list[SchedulableJob]:
        """The combination to start now ahead of conservative backfilling (empty: none
        survived, or nothing to search). `ranked`: the waiting jobs in rank order, top first.
        `planned`: their conservative plan (each job's start) when the caller holds it (the
        scheduler's kept plan), else the search makes it."""
        ranked = [j for j in ranked if machine.allocation_size(j.size) is not None]
        idle = machine.idle_nodes()
        fitting = [j for j in ranked[: self.settings.lookahead] if j.size <= idle]
        self.plan_starts = self.chosen = None
        if not fitting and all(j.jobid in self.expected for j in ranked):
            return []  # nothing to search and no new job to record: no plan needed
        base = machine.planner(now)
        if planned is None:
            planned = _plan(base.copy(), ranked, (), now)
            assert planned is not None
        self.expected = {j.jobid: self.expected.get(j.jobid) or (now, planned[j.jobid])
                         for j in ranked}
        # Jobs the conservative plan starts now start anyway after any combination, unless it
        # pushes them (step 5 checks them like every job): only the others are searched, and
        # the conservative outcome is one candidate (D001-5).
        blocked = [j for j in fitting if planned[j.jobid] > now]
        if not blocked:
            self.plan_starts = _starts_now(ranked, planned, now)
            return []
        limits = {j.jobid: max(self.deadline(j.jobid, now), planned[j.jobid]) for j in ranked}
        free = tuple(j for j in fitting if planned[j.jobid] == now)
        total = machine.total_nodes
        candidates = [self._score(free, planned, ranked, idle, total, now)] if free else []
        candidates += self._search(blocked, ranked, base, limits, idle, total, now,
                                   planned)
        if not candidates:  # step 7: conservative backfilling alone
            self.plan_starts = _starts_now(ranked, planned, now)
            return []
        chosen = choose(candidates, self.settings.goal, self.settings)
        self.plan_starts = chosen.starts
        if chosen.jobs is free:
            return []
        self.chosen = chosen
        return list(chosen.jobs)

    def _search(self, lookahead: list[SchedulableJob], ranked: Sequence[SchedulableJob],
                base: Planner, limits: dict[int, float], idle: int, total: int, now: float,
                planned: Mapping[int, float]) -> list[Candidate]:
        """The surviving combinations, depth first. `planned`: the base plan (nothing chosen);
        each node's plan is made with its parent's plan as the reference (see `_plan`)."""
        candidates: list[Candidate] = []
        budget = self.settings.max_nodes
        stack: list[tuple[tuple[SchedulableJob, ...], int, int, Mapping[int, float]]] = [
            ((), 0, 0, planned)]
        while stack and budget > 0:
            chosen, used, nxt, plan = stack.pop()
            if chosen:  # the root starts nothing: it is the fallback, not a candidate
                budget -= 1
                planner = base.copy()
                child = _plan(planner, ranked, chosen, now, limits, (plan, chosen[:-1]))
                if child is None:
                    continue  # step 5 (or no place now): the subtree is pruned
                plan = child
                candidates.append(self._score(chosen, plan, ranked, idle, total, now, planner))
            # Children in reverse so the depth-first walk meets them in rank order.
            for k in range(len(lookahead) - 1, nxt - 1, -1):
                job = lookahead[k]
                if used + job.size <= idle:  # step 4: capacity
                    stack.append(((*chosen, job), used + job.size, k + 1, plan))
        return candidates

    def _score(self, chosen: tuple[SchedulableJob, ...], planned: Mapping[int, float],
               ranked: Sequence[SchedulableJob], idle: int, total: int, now: float,
               planner: Planner | None = None) -> Candidate:
        """Step 9's OU, SU and U of a combination from its plan (made on `planner`; None: the
        base plan)."""
        late = early = 0.0
        busy = 0
        starts = []
        for job in ranked:
            start, expected = planned[job.jobid], self.expected[job.jobid][1]
            if start == now:
                busy += job.size
                starts.append(job.jobid)
            if math.isinf(start) or math.isinf(expected):
                continue  # a job with no place in service: no start to compare
            if start > expected:
                late += start - expected
            else:
                early += expected - start
        n = len(ranked)
        return Candidate(chosen, late / n, early / n, (total - idle + busy) / total,
                         frozenset(starts), planned, planner)


@dataclass(frozen=True, slots=True)
class SlackState:
    """A scheduler's slack settings and memory, for a forked replay (the start estimates) to
    begin where the scheduler is: the deadlines depend on when each job was first seen and on
    its expected start then, so a fork with empty memory could start other jobs.

    `expected`: `SlackBackfill.expected` by scheme, "" the scheduler's own, else a queue
    layout region's (`PartitionedPass`, by region name)."""

    settings: SlackSettings
    expected: Mapping[str, Mapping[int, tuple[float, float]]]

    def for_jobs(self, jobids: Collection[int]) -> SlackState:
        """A copy remembering only `jobids` (the jobs still queued)."""
        return SlackState(self.settings, {
            scheme: {jobid: seen for jobid, seen in memory.items() if jobid in jobids}
            for scheme, memory in self.expected.items()})

    def to_wire(self) -> dict[str, Any]:
        """JSON-safe: the settings by name (the goal as its name) and one row per remembered
        job, [scheme, jobid, first seen, expected start or None for never]."""
        return {"settings": self.settings.by_name(),
                "expected": [[scheme, jobid, first, start if math.isfinite(start) else None]
                             for scheme, memory in self.expected.items()
                             for jobid, (first, start) in memory.items()]}

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> SlackState:
        """The inverse of `to_wire`; ValueError (settings) or KeyError/TypeError on bad input."""
        expected: dict[str, dict[int, tuple[float, float]]] = {}
        for scheme, jobid, first, start in wire["expected"]:
            expected.setdefault(str(scheme), {})[int(jobid)] = (
                float(first), math.inf if start is None else float(start))
        return cls(SlackSettings.from_mapping(wire["settings"]), expected)


def _starts_now(ranked: Sequence[SchedulableJob], planned: Mapping[int, float],
                now: float) -> frozenset[int]:
    return frozenset(j.jobid for j in ranked if planned[j.jobid] == now)


def _plan(planner: Planner, ranked: Sequence[SchedulableJob], chosen: Sequence[SchedulableJob],
          now: float, limits: Mapping[int, float] | None = None,
          reference: Reference | None = None) -> dict[int, float] | None:
    """Planned starts: `chosen` now, then every other job in rank order now if it fits without
    delaying an earlier reservation, else at its earliest reservation (conservative). None when
    a chosen job cannot be placed now or another job would start after its limit.

    `reference`: the plan of a sub-combination of `chosen` (the parent in the search: every
    job's start in it, and the sub-combination). On a flat machine it tells before when a job
    cannot start, so the planner's search for its start begins there (same result, see
    `_plan_flat`).
    """
    starts: dict[int, float] = {}
    for job in chosen:
        if not planner.plan_now(job.size, job.wall_time):
            return None
        starts[job.jobid] = now
    if isinstance(planner, FlatPlanner):
        return _plan_flat(planner, ranked, starts, now, limits, reference)
    for job in ranked:
        if job.jobid in starts:
            continue
        if planner.plan_now(job.size, job.wall_time):
            start = now
        else:
            start = planner.reserve_earliest(job.size, job.wall_time)[0]
        if limits is not None and start > limits[job.jobid] + 1e-6:
            return None
        starts[job.jobid] = start
    return starts


def _plan_flat(planner: FlatPlanner, ranked: Sequence[SchedulableJob], starts: dict[int, float],
               now: float, limits: Mapping[int, float] | None,
               reference: Reference | None) -> dict[int, float] | None:
    """`_plan` after the chosen jobs (in `starts`) on a flat machine, where only node counts
    matter: a job's earliest reservation is then "now" exactly when it fits now, so one
    `reserve_earliest` does what `plan_now` and `reserve_earliest` do together.

    With a reference plan R, a job's search begins at `_no_start_before`. Why that is exact:
    let D(t) be this plan's free nodes minus R's at the same job. It starts ≤ 0 everywhere (the
    chosen jobs take nodes now) and gains a positive part only where R reserved nodes that this
    plan did not: a job chosen here but not in R (its place in R), or a job this plan starts
    elsewhere than R (its start in R). `more_free_from` is the earliest of those starts. A
    window ending by then sees no more free nodes here than in R; so before the job's start in
    R, where R found no window, no window ending by `more_free_from` fits here either."""
    more_free_from = math.inf
    if reference is None:
        known: Mapping[int, float] = {}
        both: frozenset[int] = frozenset()
    else:
        known, both = reference[0], frozenset(j.jobid for j in reference[1])
    for job in ranked:
        jobid = job.jobid
        was = known.get(jobid)
        if jobid in starts:  # chosen: R's reservation of it is free here unless R chose it too
            if was is not None and jobid not in both:
                more_free_from = min(more_free_from, was)
            continue
        not_before = None
        if was is not None:
            before = _no_start_before(was, more_free_from, job.wall_time)
            if now < before < math.inf:
                not_before = before
        start = planner.reserve_earliest(job.size, job.wall_time, None, not_before)[0]
        if limits is not None and start > limits[jobid] + 1e-6:
            return None
        starts[jobid] = start
        if was is not None and start != was:
            more_free_from = min(more_free_from, was)
    return starts


def _no_start_before(reference_start: float, more_free_from: float, wall_time: float) -> float:
    """The earliest a job can start in a plan that has no more free nodes than the reference
    plan over windows ending by `more_free_from` (`_plan_flat`). One second of margin keeps
    the float subtraction on the safe side."""
    return min(reference_start, more_free_from - wall_time - 1.0)
