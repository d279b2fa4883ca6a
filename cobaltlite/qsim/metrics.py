"""The figures a replay reports, computed from its records alone, and their terminal/Markdown views.

`compute_metrics` is pure: it reads `JobOutcome`s and `CapacitySample`s and returns plain JSON data
(ints, floats, None, strings, lists, dicts), so `summary.json` can hold it as is.

Definitions (all times in seconds on the trace's clock):

* wait = start - submit, response = end - submit, run time = end - start (`JobOutcome`).
* bounded slowdown = max(1, response / max(run time, bound)), bound = 10 s by default: seed 003
  §V-B ("a small running time bound (10 seconds) is imposed"), in the usual form that clamps the
  ratio at 1. Cobalt's own qsim_analy.py wrote max(resp, 10) / max(run, 10); the two agree for
  every job whose response is at least its run time (wait >= 0), so the figures are comparable.
* utilization = Σ allocated_nodes · run time / (N · makespan), makespan = last end - first submit;
  useful_utilization is the same with the requested node counts (the gap between the two is what
  rounding requests up to Blue Gene/P blocks costs).
* loss of capacity: seed 000 eq. 4, Σ_{i<m} n_i (t_{i+1} - t_i) δ_i / (N (t_m - t_1)) over the
  capacity samples, n_i = idle nodes and δ_i = "a queued job would fit" after event i.
* categories: seed 003 Tables III (run time) and IV (allocated nodes, so a 1000-node job on
  Intrepid counts as 1024 as in the paper). Every category is "up to and including its limit":
  a job belongs to the first category whose limit is >= its value. That gives one rule for both
  tables and matches Table III's ">4hr" and Table IV's "≤ 64"; it departs from Table III's
  "<10min" only for a job of exactly 600 s (Very Short here). It also puts a job killed at a
  round wall-time limit (1 h, 4 h) with the jobs that asked for "up to" that limit. Sizes between
  the paper's ranges (65-127, 513-1023, 2049-4095 nodes, which a flat cluster produces) fall in
  the larger neighbour's lower side: Very Small ≤ 64 < Small ≤ 512 < Large ≤ 2048 < Very Large.

Under failures (seed 003 §VI-B; docs/fault-aware.md), only when the replay had a failure source:

* JFR = jobs killed by a failure at least once / jobs; `failed_runs` counts every killed run and
  `events` every failure, whether or not it struck a job.
* SULR = node-seconds held by runs that failures killed / (those + the node-seconds delivered by
  the successful runs); `sulr_capacity` divides the same loss by N · makespan instead.
* A job's wait is its successful start minus its first submission and its response ends at its
  successful end, so both include the runs it lost and the waits after them.

Undefined values are None, never 0 or NaN: the statistics of an empty set of jobs (no jobs, or an
empty category), utilization over a zero-length makespan, loss of capacity with fewer than two
samples or a zero-length sample span. Counts are 0 and shares are 0.0 when there are no jobs.

Determinism: sums use math.fsum (correctly rounded, so independent of the order of the outcomes)
and order statistics come from sorted values, so the same records in any order give
byte-identical `json.dumps(..., sort_keys=True)`. Seconds are rounded to milliseconds and ratios
to six decimals, which is below anything a trace can resolve.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

from cobaltlite.compiled import COMPILED
from cobaltlite.metrics_monitor.series import ROLLING_UTILIZATION
from cobaltlite.qsim.outcome import CapacitySample, CapacitySamples, JobOutcome

if COMPILED:
    from cobaltlite._speedups import series_columns

if TYPE_CHECKING:  # rich is imported where tables are drawn: it is a third of qsim's start-up
    from rich.console import Console, Group
    from rich.table import Table

# (name, inclusive upper limit); the last category has no limit (None).
Categories = Sequence[tuple[str, float | None]]

#: Seed 003 Table III, run time in seconds.
PAPER_LENGTH_CATEGORIES: Categories = (
    ("Very Short", 600.0),
    ("Short", 3600.0),
    ("Long", 14400.0),
    ("Very Long", None),
)
#: Seed 003 Table IV, allocated nodes, with the gaps between its ranges closed upwards.
PAPER_SCALE_CATEGORIES: Categories = (
    ("Very Small", 64),
    ("Small", 512),
    ("Large", 2048),
    ("Very Large", None),
)

_SECONDS_DIGITS = 3
_RATIO_DIGITS = 6


def compute_metrics(
    outcomes: Sequence[JobOutcome],
    samples: CapacitySamples | Sequence[CapacitySample],
    machine_nodes: int,
    *,
    slowdown_bound: float = 10.0,
    length_categories: Categories = PAPER_LENGTH_CATEGORIES,
    scale_categories: Categories = PAPER_SCALE_CATEGORIES,
    fair_start: Mapping[int, float] | None = None,
    fair_start_method: str | None = None,
    failure_events: int | None = None,
) -> dict[str, Any]:
    """The replay's figures as plain JSON data; see the module docstring for the definitions.

    Keys: jobs, killed, machine_nodes, slowdown_bound, first_submit, last_end, makespan,
    wait / response / run_time / bounded_slowdown (each {mean, median, p90, max}), utilization,
    useful_utilization, loss_of_capacity, by_length and by_scale (lists, in category order, of
    {name, max, jobs, share, mean_wait, mean_response, mean_bounded_slowdown}); seed 000's
    queue_depth_mean and queue_depth_peak (minutes, 30-min samples), series (`time_series`),
    unfair_jobs and fair_start_method (None unless `fair_start` gives each job's fair start time,
    cobaltlite/qsim/fairness.py).
    {name, max, jobs, share, mean_wait, mean_response, mean_bounded_slowdown}); with
    `failure_events` (a replay under failures) also failures = {events, jobs_hit, failed_runs,
    jfr, lost_node_seconds, sulr, sulr_capacity}.
    """
    if machine_nodes <= 0:
        raise ValueError(f"machine_nodes must be positive, got {machine_nodes}")
    if not slowdown_bound > 0:
        # A zero bound would divide by the run time of zero-length jobs.
        raise ValueError(f"slowdown_bound must be positive, got {slowdown_bound}")
    length_limits = _limits(length_categories, "length_categories")
    scale_limits = _limits(scale_categories, "scale_categories")

    n = len(outcomes)
    # The series first: what it builds is gone before the per-job columns below are made, so
    # the two never add up (on a large trace this function held the replay's peak memory).
    series = time_series(outcomes, machine_nodes)
    # Comprehensions over the columns rather than one indexed loop: this runs on whole traces
    # (250,000 jobs in about 0.4 s) and the indexed loop took a third longer.
    # JobOutcome's wait, response and run_time, written out: three property calls per job.
    waits = [job.start_time - job.submit_time for job in outcomes]
    responses = [job.end_time - job.submit_time for job in outcomes]
    runs = [job.end_time - job.start_time for job in outcomes]
    bound = slowdown_bound
    slowdowns = [ratio if (ratio := r / (t if t > bound else bound)) > 1.0 else 1.0
                 for r, t in zip(responses, runs, strict=True)]
    killed = sum(job.killed for job in outcomes)

    def breakdown(
        categories: Categories, limits: list[float], keys: Sequence[float]
    ) -> list[dict[str, Any]]:
        members: list[list[int]] = [[] for _ in categories]
        for i, key in enumerate(keys):
            members[bisect_left(limits, key)].append(i)
        return [
            {
                "name": name,
                "max": limit,
                "jobs": len(group),
                "share": _ratio(len(group) / n) if n else 0.0,
                "mean_wait": _seconds(_mean([waits[i] for i in group])),
                "mean_response": _seconds(_mean([responses[i] for i in group])),
                "mean_bounded_slowdown": _ratio(_mean([slowdowns[i] for i in group])),
            }
            for (name, limit), group in zip(categories, members, strict=True)
        ]

    first_submit = min((job.submit_time for job in outcomes), default=None)
    last_end = max((job.end_time for job in outcomes), default=None)
    span = None if first_submit is None or last_end is None else last_end - first_submit
    utilization = useful_utilization = None
    if span:  # None (no jobs) and 0 (every job instantaneous) both leave it undefined
        capacity = machine_nodes * span
        held = math.fsum(job.allocated_nodes * run for job, run in zip(outcomes, runs, strict=True))
        asked = math.fsum(job.nodes * run for job, run in zip(outcomes, runs, strict=True))
        utilization = _ratio(held / capacity)
        useful_utilization = _ratio(asked / capacity)

    unfair = None
    if fair_start is not None:
        unfair = sum(1 for job in outcomes if job.start_time > fair_start[job.jobid] + 1e-6)
    metrics = {
        "jobs": n,
        "killed": killed,
        "machine_nodes": machine_nodes,
        "slowdown_bound": slowdown_bound,
        "first_submit": first_submit,
        "last_end": last_end,
        "makespan": _seconds(span),
        "wait": _summary(waits, _seconds),
        "response": _summary(responses, _seconds),
        "run_time": _summary(runs, _seconds),
        "bounded_slowdown": _summary(slowdowns, _ratio),
        "utilization": utilization,
        "useful_utilization": useful_utilization,
        "loss_of_capacity": loss_of_capacity(samples, machine_nodes),
        "queue_depth_mean": series["queue_depth_mean"],
        "queue_depth_peak": series["queue_depth_peak"],
        "unfair_jobs": unfair,
        "fair_start_method": fair_start_method if fair_start is not None else None,
        "series": series,
        "by_length": breakdown(length_categories, length_limits, runs),
        "by_scale": breakdown(
            scale_categories, scale_limits, [job.allocated_nodes for job in outcomes]
        ),
    }
    if failure_events is not None:
        lost = math.fsum(job.lost_node_seconds for job in outcomes)
        delivered = math.fsum(
            job.allocated_nodes * run for job, run in zip(outcomes, runs, strict=True)
        )
        hit = sum(1 for job in outcomes if job.failed_runs)
        metrics["failures"] = {
            "events": failure_events,
            "jobs_hit": hit,
            "failed_runs": sum(job.failed_runs for job in outcomes),
            "jfr": _ratio(hit / n) if n else None,
            "lost_node_seconds": _seconds(lost),
            "sulr": _ratio(lost / (lost + delivered)) if lost + delivered > 0 else None,
            "sulr_capacity": _ratio(lost / (machine_nodes * span)) if span else None,
        }
    return metrics


def loss_of_capacity(
    samples: CapacitySamples | Sequence[CapacitySample], machine_nodes: int
) -> float | None:
    """Seed 000 eq. 4 over samples in time order; None when they span no time."""
    columns = samples if isinstance(samples, CapacitySamples) else CapacitySamples(samples)
    times = columns.times
    if len(times) < 2:
        return None
    span = times[-1] - times[0]
    lost = []
    # The last sample opens no interval: zip stops at the shorter times[1:].
    for here, after, idle, fits in zip(times, times[1:], columns.idle, columns.fits,
                                       strict=False):
        step = after - here
        if step < 0:
            raise ValueError(f"capacity samples out of time order at t={after:.15g}")
        if fits:
            lost.append(idle * step)
    if span <= 0:
        return None
    return _ratio(math.fsum(lost) / (machine_nodes * span))


def longest_periods(periods: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Queue -> the longest reservation period its jobs may run in, from (queue, seconds)
    pairs: a reservation's queue and its duration (Qsim) or one of its periods' end - start
    (the live windows)."""
    longest: dict[str, float] = {}
    for queue, seconds in periods:
        longest[queue] = max(seconds, longest.get(queue, 0.0))
    return longest


def never_starts(queue: str, wall_time: float, longest: Mapping[str, float]) -> bool:
    """Whether a job of `queue` asking `wall_time` seconds can never start: its queue's jobs
    start only inside a reservation period and must end by its end (docs/operator-guide.md,
    "Reservations"), and no period is that long. Seed 000 eq. 4's loss of capacity counts idle
    nodes while a job waits for nodes (§4.1: nodes idle "because of fragmentation"); such a job
    waits for no node the machine could free, so Qsim's capacity samples and the live monitor
    both leave it out of δ (docs/metric-aware.md, D000-9). `longest`: `longest_periods`'."""
    period = longest.get(queue)
    return period is not None and wall_time > period


SERIES_STEP = 1800.0
"""Seed 000 §4.2 samples queue depth and utilization every 30 minutes."""


def time_series(
    outcomes: Sequence[JobOutcome], machine_nodes: int, step: float = SERIES_STEP
) -> dict[str, Any]:
    """Seed 000's monitored series, sampled every `step` seconds from the first submission to
    the last end: hours since the first submission, queue depth (minutes), instant utilization
    and its 1 h / 10 h / 24 h rolling averages (exact time averages of the replay's busy nodes;
    cobaltlite/metrics_monitor/series.py), plus the mean and peak of the sampled queue depth."""
    if not outcomes:
        return {"step": step, "hours": [], "queue_depth": [], "utilization": [],
                **{name: [] for name in ROLLING_UTILIZATION},
                "queue_depth_mean": None, "queue_depth_peak": None}
    if COMPILED:
        series = compiled_time_series(outcomes, machine_nodes, step)
        if series is not None:
            return series
    return python_time_series(outcomes, machine_nodes, step)


def compiled_time_series(
    outcomes: Sequence[JobOutcome], machine_nodes: int, step: float
) -> dict[str, Any] | None:
    """python_time_series' figures to the bit, its loop in C (cobaltlite/_speedups.c: a fifth
    of its time), or None where the C loop would not be exact (a time or a node count that is
    not a double exactly: an int past 2**53, say). Outcomes: at least one."""
    raw = series_columns(outcomes, _SERIES_FIELDS, machine_nodes, step,
                         tuple(ROLLING_UTILIZATION.values()), _STEPS_DROPPED)
    if raw is None:
        return None
    # The rounding is Python's (round() to six digits, correctly rounded), as below.
    hours, *rest = raw
    depths, *utilization = ([round(x, _RATIO_DIGITS) or 0.0 for x in column]
                            for column in rest)
    return {"step": step, "hours": [round(x, 6) for x in hours], "queue_depth": depths,
            **dict(zip(["utilization", *ROLLING_UTILIZATION], utilization, strict=True)),
            "queue_depth_mean": _ratio(_mean(depths)), "queue_depth_peak": max(depths)}


def python_time_series(
    outcomes: Sequence[JobOutcome], machine_nodes: int, step: float
) -> dict[str, Any]:
    """time_series in Python: the reference for compiled_time_series. Outcomes: at least one."""
    # Three orderings of the jobs (no per-job tuples: on a large trace they were the peak of
    # the whole replay): by submission, by start and by end. The loops below read columns of
    # them (lists of the outcomes' own numbers: no new objects), each ended by an infinite
    # time so that no read needs a bounds test.
    by_submit = sorted(outcomes, key=_SUBMIT)
    by_start = sorted(outcomes, key=_SUBMIT, reverse=True)
    by_start.sort(key=_START)  # equal starts: the later submission first
    by_end = sorted(outcomes, key=_END)
    inf = math.inf
    submit_times = [*map(_SUBMIT, by_submit), inf]
    start_times = [*map(_START, by_start), inf]
    started_submits = list(map(_SUBMIT, by_start))
    start_nodes = list(map(_ALLOCATED, by_start))
    end_times = [*map(_END, by_end), inf]
    end_nodes = list(map(_ALLOCATED, by_end))
    del by_submit, by_start, by_end
    first = submit_times[0]
    last = end_times[-2]
    first_start = start_times[0]
    series: dict[str, list[float]] = {"hours": [], "queue_depth": [], "utilization": [],
                                      **{name: [] for name in ROLLING_UTILIZATION}}
    hours = series["hours"].append
    depth = series["queue_depth"].append
    utilization = series["utilization"].append
    rolling = [(series[name].append, span) for name, span in ROLLING_UTILIZATION.items()]
    # The instant utilization as a step function, built in time order up to each sample: at
    # every time a job starts or ends, the time, the value from then on and the integral from
    # the first such time. The averages use StepSeries' arithmetic (metrics_monitor/series.py)
    # step for step, so the figures are the same to the bit; each span finds where its window
    # opens by bisection from where the last sample's opened (the sample times only grow).
    times: list[float] = []
    values: list[float] = []
    areas: list[float] = []
    opens = [0] * len(rolling)
    held = i_up = i_down = 0
    # The last step's time, value and integral; before the first start, the first step's
    # integral comes out 0.0 (0.0 + 0.0 * 0.0), as StepSeries starts it.
    when, value, area = first_start, 0.0, 0.0
    # Queue depth at t = n(t)·t - Σ submit over the jobs queued at t (submit <= t < start): the
    # submissions and starts up to t, in time order, a start before a submission at one time
    # and equal starts by later submission first (the sums are in that order).
    count, submits, i_submit, i_start = 0, 0.0, 0, 0
    t = first
    while t <= last:
        while True:
            started = start_times[i_start]
            submitted = submit_times[i_submit]
            if started <= submitted:
                if started > t:
                    break
                count -= 1
                submits -= started_submits[i_start]
                i_start += 1
            elif submitted <= t:
                count += 1
                submits += submitted
                i_submit += 1
            else:
                break
        while True:
            up = start_times[i_up]
            down = end_times[i_down]
            now = up if up < down else down
            if now > t:
                break
            while start_times[i_up] == now:
                held += start_nodes[i_up]
                i_up += 1
            while end_times[i_down] == now:
                held -= end_nodes[i_down]
                i_down += 1
            area += value * (now - when)
            when = now
            value = held / machine_nodes
            areas.append(area)
            times.append(now)
            values.append(value)
        # round(x, _RATIO_DIGITS) is _ratio(x), without a call per value.
        hours(round((t - first) / 3600.0, 6))
        depth(round(max(0.0, count * t - submits) / 60.0, _RATIO_DIGITS) or 0.0)
        if t < first_start:  # nothing started yet
            utilization(0.0)
            for column, _ in rolling:
                column(0.0)
            t += step
            continue
        area_now = area + value * (t - when)
        utilization(round(value, _RATIO_DIGITS) or 0.0)
        for k, (column, span) in enumerate(rolling):
            opened = t - span
            if opened < first_start:
                opened = first_start
            if t <= opened:
                average = value
            else:
                i = opens[k] = bisect_right(times, opened, opens[k]) - 1
                average = (area_now - (areas[i] + values[i] * (opened - times[i]))) / (t - opened)
            column(round(average, _RATIO_DIGITS) or 0.0)
        # The steps before the longest window's opening are never read again: dropped in
        # blocks, so the step function holds about a day of events, not a whole trace's.
        gone = min(opens)
        if gone >= _STEPS_DROPPED:
            del times[:gone], values[:gone], areas[:gone]
            opens = [i - gone for i in opens]
        t += step
    depths = series["queue_depth"]
    return {"step": step, **series,
            "queue_depth_mean": _ratio(_mean(depths)), "queue_depth_peak": max(depths)}


_STEPS_DROPPED = 4096
"""How many passed steps of the utilization `time_series` drops at once (a block, not one by
one: each drop moves what is kept)."""

_SERIES_FIELDS = (JobOutcome._fields.index("submit_time"), JobOutcome._fields.index("start_time"),
                  JobOutcome._fields.index("end_time"),
                  JobOutcome._fields.index("allocated_nodes"))
"""Where series_columns reads a JobOutcome's times and node count."""

_SUBMIT = attrgetter("submit_time")
_START = attrgetter("start_time")
_END = attrgetter("end_time")
_ALLOCATED = attrgetter("allocated_nodes")


def _limits(categories: Categories, what: str) -> list[float]:
    """The finite limits, checked: strictly increasing, and only the last category open."""
    if not categories:
        raise ValueError(f"{what} is empty")
    *bounded, (_, last) = categories
    if last is not None:
        raise ValueError(f"{what}: the last category must have no limit (None)")
    limits: list[float] = []
    for name, limit in bounded:
        if limit is None:
            raise ValueError(f"{what}: only the last category may have no limit, not {name!r}")
        if limits and limit <= limits[-1]:
            raise ValueError(f"{what}: limits must increase, {name!r} has {limit}")
        limits.append(limit)
    return limits


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); q=0.5 is the median."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _summary(
    values: list[float], rounded: Callable[[float | None], float | None]
) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "p90": None, "max": None}
    ordered = sorted(values)
    return {
        "mean": rounded(_mean(ordered)),
        "median": rounded(_quantile(ordered, 0.5)),
        "p90": rounded(_quantile(ordered, 0.9)),
        "max": rounded(ordered[-1]),
    }


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, _SECONDS_DIGITS)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, _RATIO_DIGITS)


# ---- presentation ------------------------------------------------------------------------------

_MISSING = "–"


def human_duration(seconds: float) -> str:
    """Two clock units at most, a zero second one dropped: 42s, 12m05s, 1h02m, 4h, 3d04h."""
    sign = "-" if seconds < 0 else ""
    whole = round(abs(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    for major, major_unit, minor, minor_unit in (
        (days, "d", hours, "h"), (hours, "h", minutes, "m"), (minutes, "m", secs, "s")
    ):
        if major:
            return f"{sign}{major}{major_unit}" + (f"{minor:02d}{minor_unit}" if minor else "")
    return f"{sign}{secs}s"


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return _MISSING
    text = f"{value:,.1f} s"
    return f"{text} ({human_duration(value)})" if abs(value) >= 60 else text


def _fmt_percent(value: float | None) -> str:
    return _MISSING if value is None else f"{value * 100:.2f}%"


def _fmt_minutes(value: float | None) -> str:
    return _MISSING if value is None else f"{value:,.1f} min"


def _fmt_ratio(value: float | None) -> str:
    return _MISSING if value is None else f"{value:,.2f}"


def _fmt_count(value: int | None) -> str:
    return _MISSING if value is None else f"{value:,}"


def _criterion(categories: Sequence[Mapping[str, Any]], unit: Callable[[float], str]) -> list[str]:
    """"≤ 10m", "> 10m, ≤ 1h", …, "> 4h": the inclusive-upper-limit rule spelled out."""
    texts = []
    previous = None
    for category in categories:
        limit = category["max"]
        parts = [] if previous is None else [f"> {unit(previous)}"]
        if limit is not None:
            parts.append(f"≤ {unit(limit)}")
        texts.append(", ".join(parts) or "all")
        previous = limit
    return texts


def render_metrics(metrics: Mapping[str, Any], *, title: str) -> Group:
    """Three tables: headline figures, the wait/response/slowdown distributions, categories."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table

    headline = Table(title=escape(title), show_header=False, title_justify="left")
    headline.add_column(style="bold")
    headline.add_column(justify="right")
    rows = [
        ("jobs", _fmt_count(metrics["jobs"])),
        ("killed at wall-time limit", _fmt_count(metrics["killed"])),
        ("machine nodes", _fmt_count(metrics["machine_nodes"])),
        ("makespan", _fmt_seconds(metrics["makespan"])),
        ("utilization", _fmt_percent(metrics["utilization"])),
        ("useful utilization (requested nodes)", _fmt_percent(metrics["useful_utilization"])),
        ("loss of capacity", _fmt_percent(metrics["loss_of_capacity"])),
        ("queue depth, mean / peak (seed 000)", f"{_fmt_minutes(metrics['queue_depth_mean'])} / "
                                                f"{_fmt_minutes(metrics['queue_depth_peak'])}"),
        (f"unfair jobs ({metrics['fair_start_method'] or 'not computed'})",
         _fmt_count(metrics["unfair_jobs"])),
    ]
    rows += [(label, fmt(read(metrics))) for label, read, fmt, _ in _UNFAIRNESS_ROWS
             if "unfairness" in metrics]
    failures = metrics.get("failures")
    if failures is not None:
        rows += [
            ("failure events", _fmt_count(failures["events"])),
            ("runs killed by failures", _fmt_count(failures["failed_runs"])),
            ("JFR (jobs hit by a failure)", _fmt_percent(failures["jfr"])),
            ("SULR (node-seconds lost / delivered + lost)", _fmt_percent(failures["sulr"])),
            ("SULR of capacity (lost / N x makespan)", _fmt_percent(failures["sulr_capacity"])),
        ]
    for row in rows:
        headline.add_row(*row)

    bound = metrics["slowdown_bound"]
    spread = Table(title=f"Per job (bounded slowdown: run time bound {bound:g} s)",
                   title_justify="left")
    spread.add_column("")
    for column in ("mean", "median", "p90", "max"):
        spread.add_column(column, justify="right")
    for key, label, fmt in (
        ("wait", "wait", _fmt_seconds),
        ("response", "response", _fmt_seconds),
        ("run_time", "run time", _fmt_seconds),
        ("bounded_slowdown", "bounded slowdown", _fmt_ratio),
    ):
        stats = metrics[key]
        spread.add_row(label, *(fmt(stats[c]) for c in ("mean", "median", "p90", "max")))

    categories = Table(title="By job length (run time) and scale (allocated nodes), seed 003",
                       title_justify="left")
    for column in ("category", "criterion"):
        categories.add_column(column, justify="left")
    for column in ("jobs", "share", "mean wait", "mean response", "mean BSD"):
        categories.add_column(column, justify="right")
    for key, unit in (("by_length", human_duration), ("by_scale", lambda v: f"{v:,.0f}")):
        for category, criterion in zip(metrics[key], _criterion(metrics[key], unit), strict=True):
            categories.add_row(
                escape(category["name"]), criterion, _fmt_count(category["jobs"]),
                _fmt_percent(category["share"]), _fmt_seconds(category["mean_wait"]),
                _fmt_seconds(category["mean_response"]),
                _fmt_ratio(category["mean_bounded_slowdown"]),
            )
        categories.add_section()
    return Group(headline, spread, categories)


PAPERS = (
    "seed 000: Tang, Ren, Lan, Desai, \"Toward balanced and sustainable job scheduling for "
    "production supercomputers\", Parallel Computing 2013. "
    "seed 003: Tang, Lan, Desai, Buettner, \"Fault-Aware, Utility-Based Job Scheduling on "
    "Blue Gene/P Systems\", IEEE Cluster 2009. "
    "seed 001: Jin, \"Backfilling with fairness and slack for parallel job scheduling\", "
    "MSc thesis, U. Windsor 2009. (docs/architecture.md, The papers)")
"""The footnote that tells a reader which papers the "seed" numbers are."""

_PIPED_WIDTH = 200
"""Columns when stdout is not a terminal: rich would wrap at 80 and a log or file has no width."""


def output_console() -> Console:
    """Stdout: the terminal's width, or wide enough not to wrap a table in a file or a CI log."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=_PIPED_WIDTH)


def print_metrics(
    metrics: Mapping[str, Any], console: Console | None = None, *, title: str = "Qsim metrics"
) -> None:
    """Print `render_metrics` to `console` (stdout by default), with the papers named."""
    console = console or output_console()
    console.print(render_metrics(metrics, title=title))
    console.print(PAPERS, style="dim", soft_wrap=True)


# One row of a side-by-side comparison: label, how to read the value, how to show it as plain
# text, and which direction is better (None: neither), so the best run can be marked.
_Better = Literal["lower", "higher"] | None
_Row = tuple[str, Callable[[Mapping[str, Any]], Any], Callable[[Any], str], _Better]


def _category_value(key: str, name: str, field: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(metrics: Mapping[str, Any]) -> Any:
        # Runs compared with different category settings may lack a category: show it as missing.
        return next((c[field] for c in metrics[key] if c["name"] == name), None)

    return read


_HEADLINE: tuple[_Row, ...] = (
    ("jobs", lambda m: m["jobs"], _fmt_count, None),
    ("killed", lambda m: m["killed"], _fmt_count, None),
    ("makespan", lambda m: m["makespan"], _fmt_seconds, "lower"),
    ("utilization", lambda m: m["utilization"], _fmt_percent, "higher"),
    ("useful utilization", lambda m: m["useful_utilization"], _fmt_percent, "higher"),
    ("loss of capacity", lambda m: m["loss_of_capacity"], _fmt_percent, "lower"),
    ("unfair jobs", lambda m: m["unfair_jobs"], _fmt_count, "lower"),
    ("mean queue depth", lambda m: m["queue_depth_mean"], _fmt_minutes, "lower"),
    ("peak queue depth", lambda m: m["queue_depth_peak"], _fmt_minutes, "lower"),
    ("mean wait", lambda m: m["wait"]["mean"], _fmt_seconds, "lower"),
    ("median wait", lambda m: m["wait"]["median"], _fmt_seconds, "lower"),
    ("p90 wait", lambda m: m["wait"]["p90"], _fmt_seconds, "lower"),
    ("max wait", lambda m: m["wait"]["max"], _fmt_seconds, "lower"),
    ("mean response", lambda m: m["response"]["mean"], _fmt_seconds, "lower"),
    ("mean bounded slowdown", lambda m: m["bounded_slowdown"]["mean"], _fmt_ratio, "lower"),
    ("max bounded slowdown", lambda m: m["bounded_slowdown"]["max"], _fmt_ratio, "lower"),
)


def _failure_value(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(metrics: Mapping[str, Any]) -> Any:
        failures = metrics.get("failures")
        return None if failures is None else failures[key]

    return read


_FAILURE_ROWS: tuple[_Row, ...] = (
    ("failure events", _failure_value("events"), _fmt_count, None),
    ("runs killed by failures", _failure_value("failed_runs"), _fmt_count, "lower"),
    ("JFR", _failure_value("jfr"), _fmt_percent, "lower"),
    ("SULR", _failure_value("sulr"), _fmt_percent, "lower"),
    ("SULR of capacity", _failure_value("sulr_capacity"), _fmt_percent, "lower"),
)


def _unfairness_value(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(metrics: Mapping[str, Any]) -> Any:
        seed001 = metrics.get("unfairness")
        return None if seed001 is None else seed001[key]

    return read


def _rr_value(job_class: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(metrics: Mapping[str, Any]) -> Any:
        seed001 = metrics.get("unfairness")
        if seed001 is None:
            return None
        return next(r["rr_600s"] for r in seed001["relative_response"] if r["name"] == job_class)

    return read


_UNFAIRNESS_ROWS: tuple[_Row, ...] = (
    ("OverallUnfairness (seed 001)", _unfairness_value("overall_unfairness"), _fmt_seconds,
     "lower"),
    ("SkipUnfairness (seed 001)", _unfairness_value("skip_unfairness"), _fmt_seconds, "lower"),
    ("jobs late / early vs thesis FST", lambda m: None if m.get("unfairness") is None else
     f"{m['unfairness']['late_jobs']:,} / {m['unfairness']['early_jobs']:,}", lambda v: v or "-",
     None),
    ("high-load phase utilization", lambda m: None if m.get("unfairness") is None else
     m["unfairness"]["high_load"]["phase_utilization"], _fmt_percent, "higher"),
    *((f"relative response, {c} (10 min cut-off)", _rr_value(c), _fmt_ratio, "lower")
      for c in ("short", "medium", "long", "all")),
)


def _headline_rows(named: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[_Row, ...]:
    """The headline rows, with the failure rows when some run had failures and seed 001's when
    some run measured them (--unfairness)."""
    rows = _HEADLINE
    if any("unfairness" in metrics for _, metrics in named):
        rows += _UNFAIRNESS_ROWS
    if any("failures" in metrics for _, metrics in named):
        rows += _FAILURE_ROWS
    return rows


def _category_rows(named: Sequence[tuple[str, Mapping[str, Any]]]) -> list[_Row]:
    """Mean wait and mean bounded slowdown per category, in the first run's category order."""
    rows: list[_Row] = []
    for key in ("by_length", "by_scale"):
        names = [c["name"] for c in named[0][1][key]] if named else []
        for name in names:
            rows.append((f"{name}: mean wait", _category_value(key, name, "mean_wait"),
                         _fmt_seconds, "lower"))
            rows.append((f"{name}: mean BSD", _category_value(key, name, "mean_bounded_slowdown"),
                         _fmt_ratio, "lower"))
    return rows


def _best(values: Sequence[Any], better: _Better) -> set[int]:
    """Indices of the best values; nothing is marked when fewer than two runs have a value or
    all those values are equal, since then no run is better."""
    present = [v for v in values if v is not None]
    if better is None or len(set(present)) < 2:
        return set()
    target = min(present) if better == "lower" else max(present)
    return {i for i, v in enumerate(values) if v == target}


def compare_metrics(named: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    from rich.markup import escape
    from rich.table import Table

    """Runs side by side, one column each; the best value of each row is in bold and starred
    (the star survives where bold does not: a file, a pipe, a CI log)."""
    table = Table(title="Qsim runs compared (*: best)", title_justify="left")
    table.add_column("")
    for name, _ in named:
        table.add_column(escape(name), justify="right")
    for section in (_headline_rows(named), _category_rows(named)):
        for label, read, fmt, better in section:
            values = [read(metrics) for _, metrics in named]
            best = _best(values, better)
            cells = [f"[bold]{fmt(v)} *[/]" if i in best else fmt(v)
                     for i, v in enumerate(values)]
            table.add_row(escape(label), *cells)
        table.add_section()
    return table


def print_comparison(
    named: Sequence[tuple[str, Mapping[str, Any]]], console: Console | None = None
) -> None:
    """Print `compare_metrics` to `console` (stdout by default), with the papers named."""
    console = console or output_console()
    console.print(compare_metrics(named))
    console.print(PAPERS, style="dim", soft_wrap=True)


def metrics_markdown(named: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The headline figures of several runs as a GitHub Markdown table, best values in bold."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [
        "| | " + " | ".join(cell(name) for name, _ in named) + " |",
        "|---|" + "---:|" * len(named),
    ]
    for label, read, fmt, better in _headline_rows(named):
        values = [read(metrics) for _, metrics in named]
        best = _best(values, better)
        cells = [f"**{cell(fmt(v))}**" if i in best else cell(fmt(v)) for i, v in enumerate(values)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    methods = sorted({m["fair_start_method"] for _, m in named if m.get("fair_start_method")})
    note = (f"\n\nUnfair jobs: fair start time by {' and '.join(methods)} "
            "(cobaltlite/qsim/fairness.py)." if methods else "")
    return "\n".join(lines) + f"{note}\n\n{PAPERS}\n"
