"""User-aware schedule metrics (seed 004, Tóth and Klusáček): expected end times (EET).

Each user expects a fixed share of the machine at all times. Algorithm 1 (§3.2) packs the user's
jobs, in arrival order, into that share: a job may become longer and narrower than it ran, never
wider than it asked, and its EET is when its CPU-seconds are all packed. A job whose real
completion is later than its EET *violated* it (§3.3): per user, the share of violated jobs
(VEET_u, formula 1), the tardiness T_j = max(0, C_j - EET_j) (formula 2) and the CPU-weighted
tardiness WT_u = sum of w_j T_j with w_j the job's CPUs (formula 3).

The paper's Algorithm 1 walks a per-second capacity array; here the user's used capacity is a
step function (breakpoints and values), which gives the same EETs in integer seconds without a
cell per second: a trace of months is thousands of steps instead of millions of cells. Decisions
where the paper is vague are in docs/fairness.md ("Seed 004").

Units: "CPUs" are the schedule's own units, the processors of an SWF trace or the nodes of a
replay (qsim --machine flat:N with one processor per node makes them the same).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cobaltlite.errors import InputError

SHARE_TOLERANCE = 1e-6
"""How far (relative) explicit shares may sum away from the machine before they are refused."""

HEATMAP_MAX_COLUMNS = 1500
"""The heatmap's 1-minute cells (§3.3) are averaged into at most this many columns to draw."""


@dataclass(frozen=True, slots=True)
class ExecutedJob:
    """One job as a schedule ran it: what the EET metric reads. Times in seconds."""

    jobid: int
    user: str
    submit: float
    start: float
    end: float
    cpus: int

    @property
    def run_time(self) -> float:
        return self.end - self.start


# ---- the expected share of each user ----------------------------------------------------------


class ShareModel:
    """How the machine is divided among users: `shares(users, cpus)` maps every user to CPUs,
    summing to `cpus`."""

    name = "model"

    def shares(self, users: Sequence[str], machine_cpus: float) -> dict[str, float]:
        raise NotImplementedError


class EqualShares(ShareModel):
    """The default (seed guide §5d option a): the machine divided equally among the users
    active in the scored schedule (every user with at least one job in it)."""

    name = "equal"

    def shares(self, users: Sequence[str], machine_cpus: float) -> dict[str, float]:
        each = machine_cpus / len(users) if users else 0.0
        return dict.fromkeys(users, each)


class FixedShares(ShareModel):
    """Shares given per user (a site's fairshare targets), in CPUs; `source` names where they
    came from for the messages."""

    name = "fixed"

    def __init__(self, shares: Mapping[str, float], source: str = "shares") -> None:
        self._shares = dict(shares)
        self._source = source

    def shares(self, users: Sequence[str], machine_cpus: float) -> dict[str, float]:
        total = sum(self._shares.values())
        if abs(total - machine_cpus) > SHARE_TOLERANCE * max(machine_cpus, 1.0):
            raise InputError(f"{self._source}: the shares sum to {total:g} CPUs but the machine "
                             f"has {machine_cpus:g}; they must divide the whole machine")
        missing = sorted(set(users) - set(self._shares))
        if missing:
            raise InputError(f"{self._source}: no share for user(s) {', '.join(missing[:10])}"
                             + (f" and {len(missing) - 10} more" if len(missing) > 10 else ""))
        return {user: self._shares[user] for user in users}


def load_shares(path: Path) -> FixedShares:
    """Read a share file: one `USER CPUS` a line, `#` comments and blank lines skipped."""
    shares: dict[str, float] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the share file: {exc.strerror or exc}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        content = line.split("#", 1)[0].split()
        if not content:
            continue
        where = f"{path}:{lineno}"
        if len(content) != 2:
            raise InputError(f"{where}: expected 'USER CPUS', found {line.strip()!r}")
        user, value = content
        try:
            cpus = float(value)
        except ValueError:
            raise InputError(f"{where}: share {value!r} of user {user} is not a number") from None
        if not (math.isfinite(cpus) and cpus > 0):
            raise InputError(f"{where}: share {value!r} of user {user} must be a number > 0")
        if user in shares:
            raise InputError(f"{where}: user {user} has a share already")
        shares[user] = cpus
    if not shares:
        raise InputError(f"{path}: the share file lists no user")
    return FixedShares(shares, str(path))


# ---- Algorithm 1 ------------------------------------------------------------------------------


def expected_end_times(jobs: Sequence[tuple[float, int, float]], capacity: float) -> list[float]:
    """EET of each of one user's jobs, given as (arrival, CPUs, run time) in arrival order, with
    `capacity` CPUs as the user's share (§3.2, Algorithm 1).

    At each second from its arrival a job takes min(free share, its CPUs) until its CPU-seconds
    are used; the last second is taken whole, as the algorithm's per-second loop does.
    """
    if not (math.isfinite(capacity) and capacity > 0):
        raise InputError(f"expected share {capacity!r} CPUs: must be a number > 0")
    full = capacity - 1e-9
    # used[i] CPUs of the share are taken over [times[i], times[i+1]); from the last breakpoint
    # on, nothing. Steps before the current arrival are never read again and are dropped, and
    # neighbouring full steps are merged, so a long backlog is skipped in one step.
    times: list[float] = []
    used: list[float] = []
    result: list[float] = []
    for arrival, cpus, run_time in jobs:
        need = cpus * run_time
        if need <= 0:  # no CPU-seconds to place: done on arrival
            result.append(arrival)
            continue
        cut = bisect_right(times, arrival)
        if cut:  # start the profile at the step holding `arrival`, cut to begin there
            del times[:cut - 1], used[:cut - 1]
            times[0] = arrival
        else:  # before the first step (or no step yet): the share is free until it
            times.insert(0, arrival)
            used.insert(0, 0.0)
        i = 0
        while True:
            take = min(capacity - used[i], cpus)
            last = i + 1 == len(times)
            if take > 1e-9 and (last or take * (times[i + 1] - times[i]) >= need - 1e-9):
                end = times[i] + math.ceil(need / take - 1e-9)
                if last:
                    times.append(end)
                    used.append(0.0)
                elif end < times[i + 1]:
                    times.insert(i + 1, end)
                    used.insert(i + 1, used[i])
                used[i] += take
                if i and used[i] >= full and used[i - 1] >= full:
                    del times[i], used[i]
                break
            if take > 1e-9:
                used[i] += take
                need -= take * (times[i + 1] - times[i])
            if i and used[i] >= full and used[i - 1] >= full:
                del times[i], used[i]
            else:
                i += 1
        result.append(end)
    return result


# ---- the metrics -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserScore:
    jobs: int
    violated: int
    tardiness: float           # sum of T_j, seconds
    weighted_tardiness: float  # WT_u, CPU-seconds
    share: float               # the expected share, CPUs

    @property
    def violated_percent(self) -> float:
        return 100.0 * self.violated / self.jobs


@dataclass
class EetReport:
    """The EET of every job and the per-user scores of one schedule."""

    model: str
    machine_cpus: float
    jobs: list[ExecutedJob]
    eet: dict[int, float]
    users: dict[str, UserScore]

    def summary(self) -> dict[str, Any]:
        """What summary.json records: settings, totals and the box-plot statistics across users."""
        scores = list(self.users.values())
        violated = sum(u.violated for u in scores)
        veet = sorted(u.violated_percent for u in scores)
        wt = sorted(u.weighted_tardiness for u in scores)
        return {
            "share_model": self.model,
            "machine_cpus": self.machine_cpus,
            "users": len(scores),
            "jobs": len(self.jobs),
            "violated_jobs": violated,
            "violated_percent": 100.0 * violated / len(self.jobs) if self.jobs else None,
            "tardiness_mean": (sum(u.tardiness for u in scores) / len(self.jobs)
                               if self.jobs else None),
            "users_all_violated": sum(1 for v in veet if v >= 100.0),
            "users_at_most_35_percent_violated": sum(1 for v in veet if v <= 35.0),
            "veet_percent_across_users": box_statistics(veet),
            "weighted_tardiness_across_users": box_statistics(wt),
            "per_user": {name: {"jobs": u.jobs, "violated": u.violated, "share": u.share,
                                "tardiness": u.tardiness,
                                "weighted_tardiness": u.weighted_tardiness}
                         for name, u in sorted(self.users.items())},
        }


def box_statistics(ordered: Sequence[float]) -> dict[str, float] | None:
    """min, quartiles, median, max and mean of sorted values (linear interpolation)."""
    if not ordered:
        return None

    def quantile(q: float) -> float:
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return {"min": ordered[0], "q1": quantile(0.25), "median": quantile(0.5),
            "q3": quantile(0.75), "max": ordered[-1], "mean": sum(ordered) / len(ordered)}


def score_schedule(jobs: Iterable[ExecutedJob], machine_cpus: float,
                   model: ShareModel | None = None) -> EetReport:
    """EETs and per-user scores of a schedule on a machine of `machine_cpus` CPUs."""
    model = model or EqualShares()
    if not (math.isfinite(machine_cpus) and machine_cpus > 0):
        raise InputError(f"machine size {machine_cpus!r} CPUs: must be a number > 0")
    by_user: dict[str, list[ExecutedJob]] = {}
    for job in jobs:
        by_user.setdefault(job.user, []).append(job)
    shares = model.shares(sorted(by_user), machine_cpus)
    eet: dict[int, float] = {}
    users: dict[str, UserScore] = {}
    every: list[ExecutedJob] = []
    for user, own in by_user.items():
        own.sort(key=lambda j: (j.submit, j.jobid))
        every.extend(own)
        ends = expected_end_times([(j.submit, j.cpus, j.run_time) for j in own], shares[user])
        violated, tardiness, weighted = 0, 0.0, 0.0
        for job, expected in zip(own, ends, strict=True):
            eet[job.jobid] = expected
            late = job.end - expected
            if late > 0:  # C_j > EET_j, strictly (§3.3)
                violated += 1
                tardiness += late
                weighted += job.cpus * late
        users[user] = UserScore(len(own), violated, tardiness, weighted, shares[user])
    return EetReport(model.name, machine_cpus, every, eet, users)


# ---- where schedules come from -----------------------------------------------------------------


def from_outcomes(outcomes: Iterable[Any]) -> list[ExecutedJob]:
    """A replay's finished jobs (qsim JobOutcome): CPUs are the nodes each job asked for."""
    return [ExecutedJob(o.jobid, o.user, o.submit_time, o.start_time, o.end_time, o.nodes)
            for o in outcomes]


def recorded_schedule(path: Path, *, processors_per_node: int = 1, lenient: bool = False,
                      start: float | None = None, end: float | None = None,
                      ) -> tuple[list[ExecutedJob], list[str]]:
    """The schedule an SWF trace recorded, without replaying it: start = submit + wait (field 3),
    end = start + run time. Jobs the reader skips (cancelled: run time <= 0) and jobs without a
    recorded wait are left out and listed ("file:line" or "job N": reason)."""
    from cobaltlite.traces.swf import read_swf

    read = read_swf(path, processors_per_node=processors_per_node, lenient=lenient,
                    start=start, end=end)
    skipped = list(read.skipped)
    jobs: list[ExecutedJob] = []
    for job in read.jobs:
        wait = int(job.extra["wait"])
        if wait < 0:
            skipped.append(f"{path}: job {job.jobid}: wait time unknown (-1)")
            continue
        begin = job.submit_time + wait
        jobs.append(ExecutedJob(job.jobid, job.user, job.submit_time, begin,
                                begin + job.run_time, job.nodes))
    return jobs, skipped


# ---- reporting -------------------------------------------------------------------------------

TABLE_ROWS: tuple[tuple[str, str], ...] = (
    ("users", "users"),
    ("jobs scored", "jobs"),
    ("violated EET jobs (%)", "violated_percent"),
    ("users with every EET violated", "users_all_violated"),
    ("users with <= 35 % violated", "users_at_most_35_percent_violated"),
    ("VEET_u median / q3 (%)", "veet_percent_across_users"),
    ("WT_u median / q3 (CPU-h)", "weighted_tardiness_across_users"),
    ("mean tardiness per job (h)", "tardiness_mean"),
)


def _cell(key: str, summary: Mapping[str, Any]) -> str:
    value = summary[key]
    if value is None:
        return "-"
    if key == "veet_percent_across_users":
        return f"{value['median']:.1f} / {value['q3']:.1f}"
    if key == "weighted_tardiness_across_users":
        return f"{value['median'] / 3600:,.1f} / {value['q3'] / 3600:,.1f}"
    if key == "tardiness_mean":
        return f"{value / 3600:,.2f}"
    if key == "violated_percent":
        return f"{value:.1f}"
    return f"{value:,}"


def eet_rows(named: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[str]]:
    """The EET table, one row per metric and one column per schedule (after the label)."""
    return [[label, *(_cell(key, summary) for _, summary in named)] for label, key in TABLE_ROWS]


def eet_markdown(named: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    first = named[0][1]
    lines = [f"EET (seed 004), expected share: {first['share_model']} on "
             f"{first['machine_cpus']:g} CPUs", "",
             "| metric | " + " | ".join(name for name, _ in named) + " |",
             "|---|" + "---:|" * len(named)]
    lines += ["| " + " | ".join(row) + " |" for row in eet_rows(named)]
    return "\n".join(lines)


def print_eet(named: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    first = named[0][1]
    table = Table(title=f"EET (seed 004), expected share: {first['share_model']} on "
                  f"{first['machine_cpus']:g} CPUs")
    table.add_column("metric")
    for name, _ in named:
        table.add_column(name, justify="right")
    for row in eet_rows(named):
        table.add_row(*row)
    Console().print(table)


def write_figures(report: EetReport, out: Path, title: str) -> None:
    """DIR/eet-boxplots.png and DIR/eet-heatmap.png (imports matplotlib)."""
    from cobaltlite.qsim.eet_figures import draw_boxplots, draw_heatmap

    if not report.jobs:
        return
    draw_boxplots([(title, report)], out / "eet-boxplots.png")
    draw_heatmap(report, out / "eet-heatmap.png", title)
