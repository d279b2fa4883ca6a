"""Seed 004's figures of EET scores: box plots across users (F6) and the users x time heatmap
with the machine's usage under it (F7). matplotlib is imported here only, so scoring without
figures never loads it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from cobaltlite.qsim.eet import HEATMAP_MAX_COLUMNS, EetReport

MINUTE = 60.0


def draw_boxplots(named: Sequence[tuple[str, EetReport]], path: Path) -> None:
    """VEET_u (percent) and WT_u (CPU-seconds, log scale) across users, one box per schedule."""
    figure, (veet_axes, wt_axes) = plt.subplots(1, 2, figsize=(5 + 1.6 * len(named), 4.2))
    labels = [name for name, _ in named]
    veet_axes.boxplot([[u.violated_percent for u in r.users.values()] for _, r in named])
    veet_axes.set_xticks(range(1, len(labels) + 1), labels, rotation=20)
    veet_axes.set_ylabel("violated EETs per user (%)")
    veet_axes.set_title("VEET_u (formula 1)")
    # Users without tardiness have nothing to show on a log scale: they are left out of WT_u's box
    # (the count is in summary.json's per_user).
    late = [[u.weighted_tardiness for u in r.users.values() if u.weighted_tardiness > 0]
            for _, r in named]
    wt_axes.boxplot([values or [math.nan] for values in late])
    wt_axes.set_xticks(range(1, len(labels) + 1), labels, rotation=20)
    if any(late):  # a log axis needs one value above zero
        wt_axes.set_yscale("log")
    wt_axes.set_ylabel("weighted tardiness per user (CPU-s)")
    wt_axes.set_title("WT_u (formula 3), users with WT_u > 0")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def heatmap_cells(report: EetReport) -> tuple[list[str], np.ndarray, np.ndarray, float]:
    """(users, cells, usage, column seconds): each violated job adds 1 to T_j worth of
    its user's 1-minute cells from x = EET_j - run time (§3.3); columns average those cells over
    equal spans of time, and `usage` is the share of the machine's CPUs busy in each column."""
    jobs = report.jobs
    origin = math.floor(min(j.submit for j in jobs) / MINUTE) * MINUTE
    # A violated job's cells span [EET_j - p_j, C_j - p_j): they end at its real start, so the
    # last end bounds them (an EET may lie far later: a heavy user's share packs for months).
    horizon = max(j.end for j in jobs)
    minutes = max(1, math.ceil((horizon - origin) / MINUTE))
    per_column = math.ceil(minutes / HEATMAP_MAX_COLUMNS)
    edges = origin + MINUTE * per_column * np.arange(math.ceil(minutes / per_column) + 1)
    # Rows: the users with most jobs on top, the same order for every schedule of one job set.
    counts = {user: score.jobs for user, score in report.users.items()}
    users = sorted(counts, key=lambda u: (-counts[u], u))
    row = {user: index for index, user in enumerate(users)}
    starts: list[list[float]] = [[] for _ in users]
    ends: list[list[float]] = [[] for _ in users]
    for job in jobs:
        expected = report.eet[job.jobid]
        if job.end > expected:
            first = math.floor((expected - job.run_time - origin) / MINUTE)
            span = math.ceil((job.end - expected) / MINUTE)
            starts[row[job.user]].append(origin + MINUTE * first)
            ends[row[job.user]].append(origin + MINUTE * (first + span))
    cells = np.zeros((len(users), len(edges) - 1))
    for index in range(len(users)):
        if starts[index]:
            covered = _covered(np.array(starts[index]), np.array(ends[index]), edges)
            cells[index] = np.diff(covered) / (MINUTE * per_column)
    weights = np.array([j.cpus for j in jobs], dtype=float)
    busy = _covered(np.array([j.start for j in jobs]), np.array([j.end for j in jobs]), edges,
                    weights)
    usage = np.diff(busy) / (MINUTE * per_column * report.machine_cpus)
    return users, cells, usage, MINUTE * per_column


def _covered(starts: np.ndarray, ends: np.ndarray, at: np.ndarray,
             weights: np.ndarray | None = None) -> np.ndarray:
    """For each time in `at`, the (weighted) time the intervals [start, end) cover before it:
    sum of w * (clip(t - start, 0) - clip(t - end, 0)), from sorted ends and running sums."""
    weights = np.ones_like(starts) if weights is None else weights
    total = np.zeros(len(at))
    for points, sign in ((starts, 1.0), (ends, -1.0)):
        order = np.argsort(points)
        ordered, w = points[order], weights[order]
        weight_sum = np.concatenate(([0.0], np.cumsum(w)))
        moment_sum = np.concatenate(([0.0], np.cumsum(w * ordered)))
        k = np.searchsorted(ordered, at, side="right")
        total += sign * (weight_sum[k] * at - moment_sum[k])
    return total


def draw_heatmap(report: EetReport, path: Path, title: str) -> None:
    """Users x time: how many of the user's jobs were past their EET, with the CPU usage under
    it (seed 004 F7)."""
    users, cells, usage, column = heatmap_cells(report)
    days = np.arange(len(usage) + 1) * column / 86400.0
    figure, (heat_axes, usage_axes) = plt.subplots(
        2, 1, figsize=(11, 6), sharex=True, gridspec_kw={"height_ratios": [4, 1]})
    # A log colour scale: a few cells with hundreds of late jobs would wash out the rest. Cells
    # without a late job are left blank.
    positive = cells[cells > 0]
    norm = (LogNorm(vmin=max(positive.min(), 1e-3), vmax=positive.max()) if positive.size
            else None)
    image = heat_axes.pcolormesh(days, np.arange(len(users) + 1),
                                 np.ma.masked_less_equal(cells, 0), cmap="magma_r",
                                 shading="flat", norm=norm)
    heat_axes.invert_yaxis()
    heat_axes.set_ylabel(f"users ({len(users)}, most jobs on top)")
    heat_axes.set_title(title)
    figure.colorbar(image, ax=[heat_axes, usage_axes], label="violated EET jobs (mean per minute)")
    usage_axes.fill_between(days[:-1], 100.0 * usage, step="post", color="tab:blue")
    usage_axes.set_ylim(0, 100)
    usage_axes.set_ylabel("CPU use (%)")
    usage_axes.set_xlabel(f"days since the first submission (columns of {column / 60:g} min)")
    figure.savefig(path, dpi=110)
    plt.close(figure)
