"""`qsim report DIR`: one replay, several (`qsim --out` with several policies) or a sweep, as an
HTML page with PNG figures (matplotlib, no JavaScript).

Figures: wait and bounded-slowdown CDFs, queue depth and utilization over time, mean wait per
seed 003 category (Tables III and IV), a Gantt-style view of a time window, and for a sweep the
metric-versus-parameter lines (mean over repetitions, min-max band). The policy comparison is
qsim's own comparison table. Per-job figures are drawn from each replay's accounting.log (Qsim
exports no time series): queue depth counts jobs submitted and not started, utilization the
nodes held (the block a job got, i.e. the machine's allocation size for its request) over the
machine's nodes.

Which replays the per-job figures compare: all of them when there are at most eight; for a
sweep, the replays at the first value of every swept parameter but the policy (or, without a
policy axis, but the first swept parameter), repetition 0.
"""

from __future__ import annotations

import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from itertools import groupby
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from rich.console import Console

from cobaltlite.accounting import _parse_line
from cobaltlite.errors import InputError
from cobaltlite.experiments.sweep import SWEEP_INFO, read_results, table_path
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.qsim.metrics import compare_metrics
from cobaltlite.traces.swf import read_lines

MAX_COMPARED = 8
GANTT_MAX_JOBS = 300
UTILIZATION_BINS = 200
SWEEP_METRICS = (("wait.mean", "mean wait (s)"), ("bounded_slowdown.mean", "mean bounded slowdown"),
                 ("utilization", "utilization"))


@dataclass(frozen=True)
class Replay:
    """One replay's output directory: its label in the figures, summary and job log."""

    label: str
    directory: Path
    summary: dict[str, Any]


@dataclass(frozen=True)
class Job:
    jobid: int
    submit: float
    start: float
    end: float
    nodes: int
    held: int


def write_report(directory: Path, out: Path, *, gantt_hours: float = 48.0) -> Path:
    """Write out/index.html and its PNGs; returns the page's path."""
    rows, info = _sweep(directory)
    compared = _compared_replays(directory, rows, info)
    jobs = {replay.label: read_jobs(replay) for replay in compared}
    out.mkdir(parents=True, exist_ok=True)  # only once every input has been read
    sections: list[str] = []
    figures: list[tuple[str, str, str]] = []   # (section, file, caption)

    def figure(section: str, name: str, caption: str, fig: Figure) -> None:
        fig.savefig(out / name, dpi=100, bbox_inches="tight")
        figures.append((section, name, caption))

    if rows:
        for axis in _numeric_axes(rows, info):
            figure("Sweep", f"sweep-{axis}.png",
                   f"Metrics against {axis}: mean over repetitions, band = min to max",
                   _sweep_figure(rows, info, axis))
    figure("Distributions", "wait-cdf.png", "Wait time, cumulative distribution",
           _cdf_figure(jobs, lambda j: j.start - j.submit, "wait (s)"))
    bound = float(compared[0].summary["metrics"]["slowdown_bound"])
    figure("Distributions", "bsd-cdf.png", "Bounded slowdown, cumulative distribution",
           _cdf_figure(jobs, lambda j: max(1.0, (j.end - j.submit) / max(j.end - j.start, bound)),
                       "bounded slowdown"))
    figure("Over time", "queue-utilization.png", "Queue depth and utilization over time",
           _timeline_figure(jobs, {r.label: r.summary["machine_nodes"] for r in compared}))
    figure("Categories", "categories.png",
           "Mean wait and bounded slowdown per job category (seed 003 Fig. 6, Tables III, IV)",
           _category_figure(compared))
    first = compared[0]
    figure("Gantt", "gantt.png",
           f"{first.label}: jobs submitted in the first {gantt_hours:g} h (grey: waiting)",
           _gantt_figure(jobs[first.label], gantt_hours))

    named = [(r.label, r.summary["metrics"]) for r in compared]
    console = Console(record=True, width=40 + 26 * len(named), file=io.StringIO())
    console.print(compare_metrics(named))
    comparison = console.export_html(inline_styles=True, code_format="<pre>{code}</pre>")
    sections.append(f"<h2>Policy comparison</h2>\n{comparison}")
    if rows:
        sections.append("<h2>All replays</h2>\n" + _rows_table(rows, info))
    page = out / "index.html"
    page.write_text(_page(directory, compared, figures, sections))
    return page


# ---- what the directory holds --------------------------------------------------------------


def _sweep(directory: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the results rows, the sweep's column info), or ([], {}) for qsim --out directories."""
    info_path = directory / SWEEP_INFO
    if not info_path.is_file():
        return [], {}
    info = json.loads(info_path.read_text())
    for table_format in ("parquet", "csv"):
        path = table_path(directory, table_format)
        if path.is_file():
            return read_results(path), info
    raise InputError(f"{directory}: a sweep without a results table; run qsim sweep again")


def _compared_replays(directory: Path, rows: list[dict[str, Any]],
                      info: Mapping[str, Any]) -> list[Replay]:
    if rows:
        parameters = set(info.get("policy_parameters", []))
        swept = [k for k in info["swept"] if k != "repetition"]
        axis = "policy" if "policy" in swept else (swept[0] if swept else None)
        # Policies compared at their first parameter values: a policy's parameters are part of
        # the policy axis, not axes of their own.
        fixed = [k for k in swept if k != axis and not (axis == "policy" and k in parameters)]
        chosen: dict[str, dict[str, Any]] = {}
        for row in rows:
            if str(row["repetition"]) == "0" and all(str(row[k]) == str(rows[0][k])
                                                     for k in fixed):
                chosen.setdefault(str(row[axis]) if axis else row["replay"], row)
        return [_replay(directory / "replays" / r["replay"], _label(r, axis, parameters))
                for r in list(chosen.values())[:MAX_COMPARED]]
    if (directory / "summary.json").is_file():
        return [_replay(directory, directory.name)]
    several = sorted(p.parent for p in directory.glob("*/summary.json"))
    if not several:
        raise InputError(f"{directory}: no summary.json, */summary.json or sweep results here; "
                         "give a directory written by qsim --out or qsim sweep")
    return [_replay(d, d.name) for d in several[:MAX_COMPARED]]


def _label(row: Mapping[str, Any], axis: str | None, parameters: set[str]) -> str:
    if axis is None:
        return str(row["replay"])
    extra = [f"{k}={row[k]}" for k in sorted(parameters)
             if axis == "policy" and row[k] not in (None, "")]
    return " ".join([f"{axis}={row[axis]}", *extra])


def _replay(directory: Path, label: str) -> Replay:
    path = directory / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the replay's summary: {exc}") from None
    return Replay(label, directory, summary)


def read_jobs(replay: Replay) -> list[Job]:
    """The replay's finished jobs from the E records of its accounting.log."""
    path = replay.directory / "accounting.log"
    if not path.is_file():
        raise InputError(f"{path}: missing; the report draws per-job figures from it")
    machine = build_machine(load_description(replay.summary["machine"]))
    jobs = []
    for lineno, line in read_lines(path):
        parsed = _parse_line(line.strip(), UTC) if line.strip() else None
        if parsed is None or parsed[1] != "E":
            continue
        jobid, _, _, numbers, _ = parsed
        try:
            nodes = int(numbers["Resource_List.nodect"])
            jobs.append(Job(jobid, numbers["qtime"], numbers["start"], numbers["end"], nodes,
                            machine.allocation_size(nodes) or nodes))
        except KeyError as exc:
            raise InputError(f"{path}:{lineno}: E record without {exc.args[0]}=") from None
    return jobs


# ---- figures -------------------------------------------------------------------------------


def _cdf_figure(jobs: Mapping[str, list[Job]], value: Any, label: str) -> Figure:
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for name, items in jobs.items():
        values = sorted(value(j) for j in items)
        if values:
            ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post",
                    label=name)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel(label + " (log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def _steps(events: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    times: list[float] = []
    levels: list[int] = []
    level = 0
    for time, group in groupby(sorted(events), key=lambda e: e[0]):
        level += sum(delta for _, delta in group)
        times.append(time)
        levels.append(level)
    return times, levels


def _binned_means(times: list[float], levels: list[int],
                  bins: int) -> tuple[list[float], list[float]]:
    """(bin edges, time-weighted mean level per bin) of a step function that holds levels[i]
    from times[i] to times[i + 1]: a readable curve where the raw steps are a solid band."""
    if len(times) < 2 or times[-1] <= times[0]:
        return [], []
    width = (times[-1] - times[0]) / bins
    edges = [times[0] + i * width for i in range(bins)] + [times[-1]]
    sums = [0.0] * bins
    index = 0  # the bin `begin` is in; both only move forward
    for (begin, level), end in zip(zip(times, levels, strict=False), times[1:], strict=False):
        while begin < end:
            while index < bins - 1 and edges[index + 1] <= begin:
                index += 1
            stop = min(end, edges[index + 1])
            sums[index] += level * (stop - begin)
            begin = stop
    return edges, [total / (high - low) for total, low, high in
                   zip(sums, edges, edges[1:], strict=False)]


def _timeline_figure(jobs: Mapping[str, list[Job]], nodes: Mapping[str, int]) -> Figure:
    fig = Figure(figsize=(9, 5.5))
    depth, used = fig.subplots(2, 1, sharex=True)
    for name, items in jobs.items():
        origin = min((j.submit for j in items), default=0.0)
        queued = [(j.submit, 1) for j in items] + [(j.start, -1) for j in items]
        busy = [(j.start, j.held) for j in items] + [(j.end, -j.held) for j in items]
        t, level = _steps(queued)
        depth.step([(x - origin) / 86400 for x in t], level, where="post", label=name, lw=0.8)
        t, level = _steps(busy)
        edges, means = _binned_means(t, level, UTILIZATION_BINS)
        used.stairs([v / nodes[name] for v in means], [(x - origin) / 86400 for x in edges],
                    label=name, lw=0.8)
    depth.set_ylabel("queued jobs")
    used.set_ylabel(f"utilization (mean over {UTILIZATION_BINS} bins)")
    used.set_xlabel("days since the first submission")
    for ax in (depth, used):
        ax.grid(alpha=0.3)
    depth.legend(fontsize="small")
    return fig


def _category_figure(replays: Sequence[Replay]) -> Figure:
    """Seed 003 Fig. 6: mean wait and mean bounded slowdown per job-length (Table III) and
    job-scale (Table IV) category, the replays side by side."""
    fig = Figure(figsize=(11, 7))
    grid = fig.subplots(2, 2)
    width = 0.8 / max(len(replays), 1)
    for column, (key, title) in enumerate((("by_length", "job length (Table III)"),
                                           ("by_scale", "job scale (Table IV)"))):
        names = [c["name"] for c in replays[0].summary["metrics"][key]]
        for row, (field, unit) in enumerate((("mean_wait", "mean wait (s)"),
                                             ("mean_bounded_slowdown", "mean bounded slowdown"))):
            ax = grid[row][column]
            for i, replay in enumerate(replays):
                values = {c["name"]: c[field] for c in replay.summary["metrics"][key]}
                ax.bar([x + i * width for x in range(len(names))],
                       [values.get(n) or 0.0 for n in names], width, label=replay.label)
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names)
            ax.set_ylabel(unit)
            if row == 0:
                ax.set_title(title)
    grid[0][0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def _gantt_figure(jobs: list[Job], hours: float) -> Figure:
    origin = min((j.submit for j in jobs), default=0.0)
    shown = sorted((j for j in jobs if j.submit < origin + hours * 3600),
                   key=lambda j: (j.start, j.jobid))[:GANTT_MAX_JOBS]
    fig = Figure(figsize=(10, 6))
    ax = fig.subplots()
    largest = max((j.held for j in shown), default=1)
    colour = colormaps["viridis"]
    for row, job in enumerate(shown):
        ax.barh(row, (job.start - job.submit) / 3600, left=(job.submit - origin) / 3600,
                color="0.85", height=0.8)
        ax.barh(row, max(job.end - job.start, 1) / 3600, left=(job.start - origin) / 3600,
                color=colour(math.log1p(job.held) / math.log1p(largest)), height=0.8)
    ax.set_xlabel("hours since the first submission")
    ax.set_ylabel(f"jobs by start time ({len(shown)} shown; colour: nodes held, log)")
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    return fig


def _numeric_axes(rows: list[dict[str, Any]], info: Mapping[str, Any]) -> list[str]:
    def number(value: Any) -> bool:
        try:
            float(value)
        except (TypeError, ValueError):
            return False
        return True

    return [k for k in info["swept"] if k != "repetition"
            and all(number(r[k]) for r in rows if r[k] not in (None, ""))]


def _sweep_figure(rows: list[dict[str, Any]], info: Mapping[str, Any], axis: str) -> Figure:
    """One line per combination of the other swept parameters; repetitions make the band."""
    others = [k for k in info["swept"] if k not in (axis, "repetition")]
    lines: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row[axis] not in (None, ""):
            label = ", ".join(f"{k}={row[k]}" for k in others
                              if row[k] not in (None, "")) or "all"
            lines.setdefault(label, []).append(row)
    fig = Figure(figsize=(5 * len(SWEEP_METRICS), 4))
    panels = fig.subplots(1, len(SWEEP_METRICS))
    for panel, (metric, title) in zip(panels, SWEEP_METRICS, strict=True):
        for label, members in lines.items():
            points: dict[float, list[float]] = {}
            for row in members:
                if row[metric] not in (None, ""):
                    points.setdefault(float(row[axis]), []).append(float(row[metric]))
            xs = sorted(points)
            line, = panel.plot(xs, [sum(points[x]) / len(points[x]) for x in xs], marker="o",
                               label=label)
            panel.fill_between(xs, [min(points[x]) for x in xs], [max(points[x]) for x in xs],
                               color=line.get_color(), alpha=0.2)
        panel.set_xlabel(axis)
        panel.set_title(title)
        panel.grid(alpha=0.3)
    panels[-1].legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    return fig


# ---- the page ------------------------------------------------------------------------------


def _rows_table(rows: list[dict[str, Any]], info: Mapping[str, Any]) -> str:
    columns = ["replay", *info["swept"], *(m for m, _ in SWEEP_METRICS), "loss_of_capacity"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>"
                                      for c in columns) + "</tr>" for r in rows)
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _page(directory: Path, compared: Sequence[Replay],
          figures: Sequence[tuple[str, str, str]], sections: Sequence[str]) -> str:
    parts = [f"<h1>Qsim report: {html.escape(str(directory))}</h1>",
             "<p>Replays compared: " + ", ".join(html.escape(r.label) for r in compared) + "</p>"]
    for section, group in groupby(figures, key=lambda f: f[0]):
        parts.append(f"<h2>{html.escape(section)}</h2>")
        for _, name, caption in group:
            parts.append(f'<figure><img src="{name}" alt="{html.escape(caption)}">'
                         f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.extend(sections)
    style = ("body{font-family:sans-serif;margin:2em;max-width:80em}img{max-width:100%}"
             "table{border-collapse:collapse;font-size:small}td,th{border:1px solid #ccc;"
             "padding:2px 6px;text-align:right}figure{margin:1em 0}")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Qsim report</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")
