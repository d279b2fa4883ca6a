"""Seed 003 §VI-C2 on the Intrepid slice: ordinary versus fault-aware allocation under failures.

One command reproduces docs/fault-aware.md's table and plot:

    python simulator/studies/fault_aware.py            # about 120 replays, a few minutes

Set-up (docs/fault-aware.md, "The study"): the 3,000-job Intrepid slice at twice its load
(--arrival-scale 0.5) without its two jobs longer than 13 h (63 h and 41 h, far past Intrepid's
12-hour limit: one alone would be most of the loss), on the 40-rack table with every block
schedulable (64-node minimum), run times as estimates (the slice has no requested times), EASY
backfilling. Failures per midplane, Weibull k = 1 with the paper's scales λ = 1..6 × 10⁶ s
(system MTBF 3.5..20.8 h), five failure seeds per point; a 20-minute repair. Ordinary allocation
is α = 1, β = 0 with P_f ignored (the `none` predictor, so BLK_f = BLK); fault-aware is the
paper's α = β = 1 with its window predictor, sensitivity = specificity = 0.6; "P_f first" is the
same predictor with β = 100, so P_f decides and BLK_f only breaks ties. All three see the same
failures for a given seed.

Writes OUT/results.json (every run), OUT/table.md (the summary table) and the plot (PNG).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.replay import ReplaySettings, replay
from cobaltlite.scheduler.scheduler import Backfill

REPO = Path(__file__).resolve().parents[2]
# The shared material sits beside the repository (README, "Layout").
TRACE = REPO.parent / "shared" / "traces" / "intrepid-2009-first3000.6col.txt.gz"
POLICIES = ("wfp3", "fcfs")
SCALES = (1e6, 2e6, 3e6, 4e6, 5e6, 6e6)  # seed 003 §VI-A3, per midplane
MIDPLANES = 80
MODES = {
    "ordinary": {"alpha": 1.0, "beta": 0.0, "predictor": "none"},
    "fault-aware": {"alpha": 1.0, "beta": 1.0, "predictor": "window"},
    "P_f first": {"alpha": 1.0, "beta": 100.0, "predictor": "window"},
}
AWARE = [mode for mode in MODES if mode != "ordinary"]
LONGEST_RUN = 13 * 3600  # jobs running longer are left out (see the docstring)
# Seed 003 Fig. 9: gains of fault-aware over ordinary allocation (lowest..highest over MTBF).
PAPER_GAINS = {
    "wfp3": {"jfr": (17.24, 23.77), "sulr": (17.96, 31.21), "response": (None, 6.68),
             "bsd": (None, 9.72)},
    "fcfs": {"jfr": (16.66, 34.45), "sulr": (18.11, 38.94), "response": (None, 5.03),
             "bsd": (None, 7.47)},
}
METRICS = ("jfr", "sulr", "response", "bsd")
LABELS = {"jfr": "JFR (%)", "sulr": "SULR (%)", "response": "mean response (h)",
          "bsd": "mean bounded slowdown"}


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    mode = MODES.get(task["mode"], {})
    settings = ReplaySettings(
        trace=Path(task["trace"]), machine="intrepid", policy=builtin_policy(task["policy"]),
        backfill=Backfill.EASY, schedulable="all", estimate="runtime",
        arrival_scale=task["arrival_scale"],
        weibull_scale=task.get("scale"), failure_seed=task.get("seed", 1),
        alpha=mode.get("alpha", 1.0), beta=mode.get("beta", 1.0),
        predictor=mode.get("predictor", "none"),
    )
    metrics = replay(settings).metrics
    failures = metrics.get("failures") or {}
    return {
        **task,
        "jobs": metrics["jobs"],
        "mean_wait": metrics["wait"]["mean"],
        "response": metrics["response"]["mean"],
        "bsd": metrics["bounded_slowdown"]["mean"],
        "utilization": metrics["utilization"],
        "events": failures.get("events", 0),
        "failed_runs": failures.get("failed_runs", 0),
        "jfr": failures.get("jfr", 0.0),
        "sulr": failures.get("sulr", 0.0),
        "sulr_capacity": failures.get("sulr_capacity", 0.0),
    }


def tasks(trace: Path, seeds: int, arrival_scale: float) -> list[dict[str, Any]]:
    common = {"trace": str(trace), "arrival_scale": arrival_scale}
    result = [{**common, "policy": p, "mode": "failure-free"} for p in POLICIES]
    for policy in POLICIES:
        for scale in SCALES:
            for seed in range(1, seeds + 1):
                for mode in MODES:
                    result.append({**common, "policy": policy, "mode": mode, "scale": scale,
                                   "seed": seed})
    return result


def mtbf_hours(scale: float) -> float:
    return scale / MIDPLANES / 3600.0  # k = 1: a midplane's mean is λ


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (policy, λ): each metric's mean and range over seeds, both modes, the gain."""
    rows = []
    for policy in POLICIES:
        for scale in SCALES:
            row: dict[str, Any] = {"policy": policy, "scale": scale, "mtbf_h": mtbf_hours(scale)}
            for mode in MODES:
                picked = [r for r in runs if r["policy"] == policy and r.get("scale") == scale
                          and r["mode"] == mode]
                row[mode] = {m: _spread([r[m] for r in picked]) for m in (*METRICS, "events")}
                row[mode]["seeds"] = len(picked)
            row["gain"] = {mode: {m: _gain(row["ordinary"][m]["mean"], row[mode][m]["mean"])
                                  for m in METRICS} for mode in AWARE}
            rows.append(row)
    return rows


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def _gain(ordinary: float, aware: float) -> float | None:
    """Percent by which fault-aware is lower than ordinary (the paper's Fig. 9 sign)."""
    return None if ordinary == 0 else 100.0 * (ordinary - aware) / ordinary


def markdown(rows: Sequence[dict[str, Any]], baseline: dict[str, dict[str, Any]]) -> str:
    def fmt(metric: str, stats: dict[str, float]) -> str:
        scale = {"jfr": 100.0, "sulr": 100.0, "response": 1 / 3600.0, "bsd": 1.0}[metric]
        digits = {"jfr": 2, "sulr": 1, "response": 2, "bsd": 2}[metric]
        return (f"{stats['mean'] * scale:.{digits}f} "
                f"({stats['min'] * scale:.{digits}f}–{stats['max'] * scale:.{digits}f})")

    lines = []
    for policy in POLICIES:
        base = baseline[policy]
        lines += [
            f"**{policy.upper()}** (failure-free: mean response {base['response'] / 3600:.2f} h, "
            f"bounded slowdown {base['bsd']:.2f}). Each cell: mean over seeds (min–max); "
            "gain = how much lower fault-aware is than ordinary.",
            "",
            "| λ (s) | MTBF (h) | failures | allocation | JFR % | SULR % | response (h) | BSD |",
            "|---:|---:|---:|---|---:|---:|---:|---:|",
        ]
        for row in (r for r in rows if r["policy"] == policy):
            for mode in MODES:
                stats = row[mode]
                lines.append(
                    f"| {row['scale']:.0e} | {row['mtbf_h']:.1f} | {stats['events']['mean']:.0f} "
                    f"| {mode} | " + " | ".join(fmt(m, stats[m]) for m in METRICS) + " |")
            for mode in AWARE:
                gains = row["gain"][mode]
                lines.append(f"| | | | gain of {mode} | " + " | ".join(
                    "–" if gains[m] is None else f"**{gains[m]:+.1f} %**" for m in METRICS) + " |")
        paper = PAPER_GAINS[policy]
        lines += ["", "Seed 003 Fig. 9 gains for " + policy.upper() + ": " + ", ".join(
            f"{m.upper()} {'up to ' if lo is None else f'{lo}–'}{hi} %"
            for m, (lo, hi) in paper.items()) + ".", ""]
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], baseline: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale_of = {"jfr": 100.0, "sulr": 100.0, "response": 1 / 3600.0, "bsd": 1.0}
    fig, axes = plt.subplots(len(POLICIES), len(METRICS), figsize=(16, 7), sharex=True)
    for i, policy in enumerate(POLICIES):
        mine = [r for r in rows if r["policy"] == policy]
        x = [r["mtbf_h"] for r in mine]
        for j, metric in enumerate(METRICS):
            ax = axes[i][j]
            k = scale_of[metric]
            for mode, colour in zip(MODES, ("tab:red", "tab:blue", "tab:green"), strict=True):
                mean = [r[mode][metric]["mean"] * k for r in mine]
                low = [m - r[mode][metric]["min"] * k for m, r in zip(mean, mine, strict=True)]
                high = [r[mode][metric]["max"] * k - m for m, r in zip(mean, mine, strict=True)]
                ax.errorbar(x, mean, yerr=[low, high], label=mode, color=colour, marker="o",
                            capsize=3)
            if metric in ("response", "bsd"):
                ax.axhline(baseline[policy][metric] * k, color="grey", linestyle="--",
                           label="failure-free")
            ax.set_title(f"{policy.upper()}: {LABELS[metric]}", fontsize=10)
            if i == len(POLICIES) - 1:
                ax.set_xlabel("system MTBF (h)")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Ordinary vs fault-aware allocation, Intrepid slice (2x load), "
                 "mean and range over failure seeds (seed 003 Figs. 7-9)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--seeds", type=int, default=5, help="failure seeds per point")
    parser.add_argument("--arrival-scale", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=1, help="replays run in parallel")
    parser.add_argument("--out", type=Path, default=REPO / "simulator" / "studies" / "fault_aware")
    parser.add_argument("--plot", type=Path, default=REPO / "docs" / "fault-aware.png")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / "intrepid-slice-under-13h.txt"
    with gzip.open(args.trace, "rt") as source, trace.open("w") as kept:
        for n, line in enumerate(source):
            if n == 0 or int(line.split()[2]) <= LONGEST_RUN:  # the header, then Runtime
                kept.write(line)
    todo = tasks(trace, args.seeds, args.arrival_scale)
    with ProcessPoolExecutor(args.workers) as pool:
        runs = []
        for n, run in enumerate(pool.map(run_one, todo), start=1):
            runs.append(run)
            print(f"{n}/{len(todo)} {run['policy']} {run['mode']} λ={run.get('scale')} "
                  f"seed={run.get('seed')}: JFR {run['jfr']:.4f} SULR {run['sulr']:.4f}",
                  file=sys.stderr)
    baseline = {r["policy"]: r for r in runs if r["mode"] == "failure-free"}
    rows = summarize(runs)
    (args.out / "results.json").write_text(
        json.dumps({"runs": runs, "summary": rows}, indent=1, sort_keys=True) + "\n")
    table = markdown(rows, baseline)
    (args.out / "table.md").write_text(table)
    plot(rows, baseline, args.plot)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
