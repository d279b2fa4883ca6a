#!/usr/bin/env python3
"""Seed 000's study (§4, Tables 2-3, Figs. 3-10) on the traces we hold; one command reproduces it.

    python simulator/studies/metric_aware.py [--only sp2|intrepid] [--fair-start estimate|replay]
                                            [--out docs/metric-aware]

For each experiment: BF ∈ {1, .75, .5, .25, 0} × W ∈ {1..5} (the sweep, Figs. 3-4), then
BF-adaptive, W-adaptive and 2-D adaptive (Figs. 5-10) with the queue-depth threshold Th set, as
the paper does, to the historical average: here the mean queue depth of the BF 1 / W 1 run.
Writes OUT/<experiment>.md (the tables), OUT/<experiment>.json (every run's headline figures)
and OUT/<experiment>-*.png (the figures); matplotlib comes with `pip install -e .[study]`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.replay import ReplayReport, ReplaySettings, replay
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.tuning.scheme import example_scheme

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"  # the shared material sits beside the repository
BFS = (1.0, 0.75, 0.5, 0.25, 0.0)
WINDOWS = (1, 2, 3, 4, 5)
PLOT_HOURS = 200


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    trace: Path
    machine: str
    backfill: Backfill
    end: float | None = None
    arrival_scale: float = 1.0


def sp2(traces: Path) -> Experiment:
    """SDSC-SP2, the first 5,000 jobs of the log: those submitted before its 5,001st line
    (898616763 = 1998-06-23). 359 of them were cancelled (run time <= 0) and are not replayed,
    as seed-guide §1c counts: 4,641 jobs run."""
    path = traces / "SDSC-SP2-1998-4.2-cln.swf.gz"
    start, line = 0, 0
    with gzip.open(path, "rt") as stream:
        for text in stream:
            if text.startswith(";"):
                if "UnixStartTime:" in text:
                    start = int(text.split(":")[1])
                continue
            line += 1
            if line == 5001:
                end = start + int(text.split()[1])
                break
    return Experiment("sp2", "SDSC-SP2, first 5,000 jobs, flat:128, EASY", path, "flat:128",
                      Backfill.EASY, end=float(end))


def intrepid(traces: Path) -> Experiment:
    # At its own pace the slice already forms queues (peak queue depth ~12,000 min, mean wait
    # ~15 min under BF 1). Heavier loads (--arrival-scale 0.8, 0.5) make conservative
    # backfilling on the 40-rack table too slow for a 28-run sweep on this machine: every pass
    # re-plans every queued job against every block.
    return Experiment("intrepid", "Intrepid 2009, first 3,000 jobs, real 40-rack table, "
                      "conservative", traces / "intrepid-2009-first3000.6col.txt.gz",
                      "intrepid", Backfill.CONSERVATIVE)


def run(exp: Experiment, label: str, bf: float, window: int, fair_start: str,
        tuning: Any = None) -> tuple[str, ReplayReport, float]:
    settings = ReplaySettings(
        trace=exp.trace, machine=exp.machine,
        policy=builtin_policy("balanced", {"balance_factor": bf}), backfill=exp.backfill,
        end=exp.end, arrival_scale=exp.arrival_scale, lenient=True, window=window,
        tuning=tuning, fair_start=fair_start)
    began = time.perf_counter()
    report = replay(settings)
    elapsed = time.perf_counter() - began
    m = report.metrics
    print(f"  {label:<14} wait {m['wait']['mean'] / 60:9.1f} min  unfair {m['unfair_jobs']:5}  "
          f"LoC {m['loss_of_capacity'] * 100:5.2f} %  QD {m['queue_depth_mean']:10.1f} min  "
          f"({elapsed:.1f} s)", flush=True)
    return label, report, elapsed


def headline(report: ReplayReport) -> dict[str, Any]:
    m = report.metrics
    return {"jobs": m["jobs"], "mean_wait_min": round(m["wait"]["mean"] / 60, 1),
            "unfair_jobs": m["unfair_jobs"], "loss_of_capacity": m["loss_of_capacity"],
            "queue_depth_mean_min": m["queue_depth_mean"], "utilization": m["utilization"],
            "mean_bounded_slowdown": m["bounded_slowdown"]["mean"],
            "tuning_changes": len(report.tuner.changes) if report.tuner else 0}


TABLE_CONFIGS = ((1.0, 1), (1.0, 4), (0.5, 1), (0.5, 4))
"""The static rows of the paper's Tables 2-3."""


def study(exp: Experiment, fair_start: str, out: Path, table_only: bool = False) -> None:
    print(f"{exp.title}: fair start by {fair_start}", flush=True)
    runs: dict[str, ReplayReport] = {}
    seconds: dict[str, float] = {}
    grid = TABLE_CONFIGS if table_only else [(bf, w) for bf in BFS for w in WINDOWS]
    for bf, window in grid:
        label, report, took = run(exp, f"BF {bf:g} / W {window}", bf, window, fair_start)
        runs[label], seconds[label] = report, took
    threshold = runs["BF 1 / W 1"].metrics["queue_depth_mean"]
    for label, scheme in (("BF adaptive", example_scheme("bf-adaptive", threshold)),
                          ("W adaptive", example_scheme("w-adaptive")),
                          ("2D adaptive", example_scheme("2d-adaptive", threshold))):
        label, report, took = run(exp, label, 1.0, 1, fair_start, scheme)
        runs[label], seconds[label] = report, took
    data = {"experiment": exp.title, "fair_start": fair_start, "threshold_min": threshold,
            "runs": {label: {**headline(r), "seconds": round(seconds[label], 2)}
                     for label, r in runs.items()}}
    out.mkdir(parents=True, exist_ok=True)
    name = f"{exp.name}-tables-{fair_start}" if table_only else exp.name
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    (out / f"{name}.md").write_text(tables(exp, runs, threshold, fair_start))
    if not table_only:
        plots(exp, runs, out)


def tables(exp: Experiment, runs: dict[str, ReplayReport], threshold: float,
           fair_start: str) -> str:
    lines = [f"### {exp.title}", "",
             f"Fair start time by {fair_start}; queue-depth threshold Th = {threshold:,.0f} min "
             "(the BF 1 / W 1 run's mean).", "",
             "Table 2/3 form (change against BF 1 / W 1 in brackets):", "",
             "| config | avg wait (min) | unfair # | LoC % | mean QD (min) | changes |",
             "|---|---:|---:|---:|---:|---:|"]
    base = headline(runs["BF 1 / W 1"])

    def delta(value: float, ref: float) -> str:
        return f" ({(value - ref) / ref * 100:+.0f} %)" if ref else ""

    for label in ("BF 1 / W 1", "BF 1 / W 4", "BF 0.5 / W 1", "BF 0.5 / W 4", "BF adaptive",
                  "W adaptive", "2D adaptive"):
        h = headline(runs[label])
        loc = (h["loss_of_capacity"] or 0) * 100
        wait = h["mean_wait_min"]
        lines.append(
            f"| {label} | {wait:,.1f}{delta(wait, base['mean_wait_min'])}"
            f" | {h['unfair_jobs']} | {loc:.1f}"
            f"{delta(loc, (base['loss_of_capacity'] or 0) * 100)} | "
            f"{h['queue_depth_mean_min']:,.0f} | {h['tuning_changes']} |")
    if "BF 0 / W 5" not in runs:
        return "\n".join(lines) + "\n"
    lines += ["", "The whole sweep (Fig. 3/4 form): avg wait (min) / unfair / LoC %", "",
              "| BF \\ W | " + " | ".join(str(w) for w in WINDOWS) + " |",
              "|---|" + "---:|" * len(WINDOWS)]
    for bf in BFS:
        cells = []
        for window in WINDOWS:
            h = headline(runs[f"BF {bf:g} / W {window}"])
            cells.append(f"{h['mean_wait_min']:,.0f} / {h['unfair_jobs']} / "
                         f"{(h['loss_of_capacity'] or 0) * 100:.1f}")
        lines.append(f"| {bf:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plots(exp: Experiment, runs: dict[str, ReplayReport], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(label: str, key: str) -> tuple[list[float], list[float]]:
        s = runs[label].metrics["series"]
        keep = [i for i, h in enumerate(s["hours"]) if h <= PLOT_HOURS]
        return [s["hours"][i] for i in keep], [s[key][i] for i in keep]

    # Figs. 3/4: the sweep.
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (key, title) in zip(axes, (("mean_wait_min", "avg wait (min)"),
                                       ("unfair_jobs", "unfair jobs"),
                                       ("loss_of_capacity", "loss of capacity")), strict=True):
        for bf in BFS:
            ax.plot(WINDOWS, [headline(runs[f"BF {bf:g} / W {w}"])[key] or 0 for w in WINDOWS],
                    marker="o", label=f"BF {bf:g}")
        ax.set_xlabel("window W")
        ax.set_title(title)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{exp.title}: BF × W sweep (Fig. 3/4 form)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / f"{exp.name}-sweep.png", dpi=90)
    plt.close(fig)

    # Figs. 5/6: queue depth, BF adaptive against static BF (linear and log scale).
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.6))
    for ax, log in zip(axes, (False, True), strict=True):
        for label in ("BF 1 / W 1", "BF 0.75 / W 1", "BF 0.5 / W 1", "BF adaptive"):
            ax.plot(*series(label, "queue_depth"), label=label, linewidth=0.8)
        ax.set_xlabel("hours")
        ax.set_ylabel("queue depth (min)")
        if log:
            ax.set_yscale("symlog")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{exp.title}: queue depth, first {PLOT_HOURS} h (Fig. 5/6 form)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / f"{exp.name}-bf-adaptive.png", dpi=90)
    plt.close(fig)

    # Figs. 7/8 (W adaptive) and 9/10 (2D): utilization series against W = 1.
    for label, name in (("W adaptive", "w-adaptive"), ("2D adaptive", "2d-adaptive")):
        fig, axes = plt.subplots(1, 2, figsize=(13, 3.6), sharey=True)
        for ax, run_label in zip(axes, ("BF 1 / W 1", label), strict=True):
            for key in ("utilization", "utilization_1h", "utilization_10h", "utilization_24h"):
                ax.plot(*series(run_label, key), label=key, linewidth=0.8)
            ax.set_title(run_label, fontsize=9)
            ax.set_xlabel("hours")
        axes[0].set_ylabel("utilization")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{exp.title}: utilization, first {PLOT_HOURS} h", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / f"{exp.name}-{name}.png", dpi=90)
        plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["sp2", "intrepid"], action="append")
    parser.add_argument("--fair-start", choices=["estimate", "replay"], default="estimate")
    parser.add_argument("--tables-only", action="store_true",
                        help="only the seven rows of the paper's Tables 2-3 (no sweep, no "
                        "figures), written to OUT/<experiment>-tables-<fair start>.md")
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "metric-aware")
    args = parser.parse_args(argv)
    for name in args.only or ["sp2", "intrepid"]:
        exp = sp2(args.traces) if name == "sp2" else intrepid(args.traces)
        study(exp, args.fair_start, args.out, args.tables_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
