"""Seed 001's metrics (Jin 2009, §4.3.1 and §5.1) from a replay's records.

* Fair start time, the thesis's own (§4.3.1, F5): at job i's submission, the running jobs end at
  their requested times and the jobs queued before i, in submission order, are planned by
  conservative backfilling (each starts now or takes its earliest place, holes included); job i
  is then placed FCFS "behind the fragments": at the earliest time no earlier than the latest of
  those jobs' planned starts at which it fits. It differs from seed 000's FST
  (cobaltlite/qsim/fairness.py), which lets the job itself backfill.
* OverallUnfairness (eq. 3) = Σ max(AST − FST, 0) / n and SkipUnfairness (eq. 4) =
  Σ max(FST − AST, 0) / n over all n jobs, with the late and early jobs counted.
* High-load phases (eq. 1): the maximal intervals in which at least N_H jobs wait; phase
  utilization (eq. 2 inside them). N_H is not given by the thesis: the time-weighted median of
  the number of waiting jobs over the replay, at least 1 (docs/fairness.md, D001-8).
* Relative response time per class (§5.1): mean (wait + run) / max(run, cut-off) for short
  (< 10 min), medium (< 3 h) and long jobs and all jobs, with cut-offs 10 s and 10 min.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from cobaltlite.machine.model import Machine
from cobaltlite.qsim.fairness import TOLERANCE, _states_at_submission
from cobaltlite.qsim.outcome import JobOutcome

JOB_CLASSES = (("short", 600.0), ("medium", 10_800.0), ("long", math.inf))
"""§4.4's classes by run time: short < 10 min, medium < 3 h, long the rest."""
RR_CUTOFFS = (10.0, 600.0)
"""Run-time floors of relative response time: seed 000/003's 10 s and the thesis's short job."""


def thesis_fair_starts(outcomes: Sequence[JobOutcome], machine: Machine) -> dict[int, float]:
    """{jobid: fair start time as §4.3.1 defines it}. `machine` must hold nothing; it is
    reused for every submission instant and left empty."""
    fair: dict[int, float] = {}
    for target, t, running, queued in _states_at_submission(outcomes):
        try:
            for o in running:
                machine.allocate(o.location, o.jobid, o.start_time + o.requested_time)
            planner = machine.planner(t)
            behind = t  # the latest planned start of the jobs ahead
            for o in queued:
                if o.jobid == target.jobid:
                    continue
                if planner.plan_now(o.nodes, o.requested_time):
                    continue
                start = planner.reserve_earliest(o.nodes, o.requested_time)[0]
                if start > behind and not math.isinf(start):
                    behind = start
            fair[target.jobid] = planner.reserve_earliest(target.nodes, target.requested_time,
                                                          not_before=behind)[0]
        finally:
            for jobid in list(machine.held_by()):
                machine.release(jobid)
    return fair


def unfairness(outcomes: Sequence[JobOutcome], fair: dict[int, float]) -> dict[str, Any]:
    """Eqs. 3-4 and the late/early counts behind them (seconds)."""
    n = len(outcomes)
    late = [o.start_time - fair[o.jobid] for o in outcomes
            if o.start_time > fair[o.jobid] + TOLERANCE]
    early = [fair[o.jobid] - o.start_time for o in outcomes
             if o.start_time < fair[o.jobid] - TOLERANCE]
    return {
        "overall_unfairness": math.fsum(late) / n if n else None,
        "skip_unfairness": math.fsum(early) / n if n else None,
        "late_jobs": len(late),
        "mean_lateness": math.fsum(late) / len(late) if late else None,
        "early_jobs": len(early),
        "mean_earliness": math.fsum(early) / len(early) if early else None,
    }


def high_load_phases(outcomes: Sequence[JobOutcome], machine_nodes: int,
                     threshold: int | None = None) -> dict[str, Any]:
    """Eq. 1's phases (N_wait >= N_H) and eq. 2's utilization inside them. `threshold`: N_H;
    None: the time-weighted median of N_wait, at least 1."""
    # Waiting count and busy nodes as step functions over the event times.
    deltas: dict[float, list[float]] = {}
    for o in outcomes:
        deltas.setdefault(o.submit_time, [0, 0])[0] += 1
        deltas.setdefault(o.start_time, [0, 0])[0] -= 1
        deltas.setdefault(o.start_time, [0, 0])[1] += o.allocated_nodes
        deltas.setdefault(o.end_time, [0, 0])[1] -= o.allocated_nodes
    times = sorted(deltas)
    steps: list[tuple[float, float, int, float]] = []  # (from, to, waiting, busy nodes)
    waiting = busy = 0.0
    for here, after in pairwise(times):
        waiting += deltas[here][0]
        busy += deltas[here][1]
        steps.append((here, after, int(waiting), busy))
    if threshold is None:
        threshold = max(1, _weighted_median([(w, b - a) for a, b, w, _ in steps]))
    phases: list[list[float]] = []
    inside = node_seconds = 0.0
    for a, b, w, nodes in steps:
        if w < threshold:
            continue
        if phases and phases[-1][1] == a:
            phases[-1][1] = b
        else:
            phases.append([a, b])
        inside += b - a
        node_seconds += nodes * (b - a)
    return {
        "threshold": threshold,
        "phases": len(phases),
        "phase_seconds": inside,
        "phase_utilization": node_seconds / (inside * machine_nodes) if inside else None,
    }


def _weighted_median(values: list[tuple[int, float]]) -> int:
    total = math.fsum(weight for _, weight in values)
    if total <= 0:
        return 0
    seen = 0.0
    for value, weight in sorted(values):
        seen += weight
        if seen >= total / 2:
            return value
    return values[-1][0]


def relative_response(outcomes: Sequence[JobOutcome]) -> list[dict[str, Any]]:
    """§5.1's RR per class and over all jobs, for each cut-off of `RR_CUTOFFS`."""
    groups: dict[str, list[JobOutcome]] = {name: [] for name, _ in JOB_CLASSES}
    for o in outcomes:
        groups[next(name for name, limit in JOB_CLASSES if o.run_time < limit)].append(o)
    groups["all"] = list(outcomes)
    rows = []
    for name, members in groups.items():
        row: dict[str, Any] = {"name": name, "jobs": len(members)}
        for cut in RR_CUTOFFS:
            row[f"rr_{cut:g}s"] = (math.fsum((o.wait + o.run_time) / max(o.run_time, cut)
                                             for o in members) / len(members)
                                   if members else None)
        rows.append(row)
    return rows


def seed001_metrics(outcomes: Sequence[JobOutcome], machine: Machine) -> dict[str, Any]:
    """Every metric above for a replay; `machine`: an empty machine of the replay's kind."""
    fair = thesis_fair_starts(outcomes, machine)
    return {
        **unfairness(outcomes, fair),
        "high_load": high_load_phases(outcomes, machine.total_nodes),
        "relative_response": relative_response(outcomes),
    }
