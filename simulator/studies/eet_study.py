"""Seed 004 §4 on METACENTRUM-2009-2: FIFO, fairshare FIFO, EASY and fairshare + EASY, judged by
classic metrics and by expected end times (EET). One command reproduces docs/fairness.md's
"Seed 004" study, its table and its figures (docs/fairness.md used --arrival-scale 0.5; the
default, 1.0, replays at the log's own light load, where the four schedules score alike):

    python simulator/studies/eet_study.py --out docs/fairness --arrival-scale 0.5

Set-up (docs/fairness.md, "Seed 004"): the trace on a flat machine of 806 processors (PWA's
total for this log, one processor a node), run times as estimates (the log has none), the
default 24-hour usage half-life, EET shares = the machine divided equally among the users with
jobs in the window. `fifo` is fcfs without backfilling, `fairshare fifo` the fairshare policy
without backfilling, `easy` fcfs with EASY, `fair. + easy` fairshare with EASY. The recorded
schedule (submit + wait) is scored too. `--days N` keeps the first N days of submissions;
`--arrival-scale F` multiplies the gaps between arrivals by F (0.4: 2.5 times the load) for the
replays (the recorded schedule is scored as it ran).

Writes OUT/eet-study.json (every run's metrics), OUT/eet-study.md (the table), OUT/eet-boxplots.png
(F6a/F6b: one box per schedule) and OUT/eet-heatmap-NAME.png (F7).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.eet import (
    EetReport,
    EqualShares,
    eet_markdown,
    from_outcomes,
    recorded_schedule,
    score_schedule,
)
from cobaltlite.qsim.eet_figures import draw_boxplots, draw_heatmap
from cobaltlite.qsim.replay import ReplaySettings, replay
from cobaltlite.scheduler.scheduler import Backfill

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO.parent / "shared" / "traces" / "METACENTRUM-2009-2.swf.gz"
MACHINE_CPUS = 806
SCHEDULES = {  # name -> (policy, backfilling), seed 004 §4's four schedules
    "fifo": ("fcfs", Backfill.NONE),
    "fairshare fifo": ("fairshare", Backfill.NONE),
    "easy": ("fcfs", Backfill.EASY),
    "fair. + easy": ("fairshare", Backfill.EASY),
}


def run(name: str, end: float | None, scale: float) -> tuple[str, dict[str, Any], EetReport]:
    policy, backfill = SCHEDULES[name]
    settings = ReplaySettings(trace=TRACE, machine=f"flat:{MACHINE_CPUS}",
                              policy=builtin_policy(policy), backfill=backfill,
                              estimate="runtime", lenient=True, end=end, arrival_scale=scale)
    report = replay(settings)
    scored = score_schedule(from_outcomes(report.result.outcomes), MACHINE_CPUS, EqualShares())
    return name, report.metrics, scored


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "fairness",
                        help="where the table, JSON and figures go (default: docs/fairness)")
    parser.add_argument("--days", type=float, help="keep the first N days of submissions")
    parser.add_argument("--arrival-scale", type=float, default=1.0,
                        help="multiply the gaps between arrivals by F in the replays (default "
                        "1.0; docs/fairness.md's study used 0.5)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    end = None if args.days is None else args.days * 86400.0  # the log's clock starts at 0
    with ProcessPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(run, SCHEDULES, [end] * len(SCHEDULES),
                             [args.arrival_scale] * len(SCHEDULES)))
    recorded_jobs, _ = recorded_schedule(TRACE, lenient=True, end=end)
    recorded = score_schedule(recorded_jobs, MACHINE_CPUS, EqualShares())
    named = [(name, scored) for name, _, scored in runs] + [("recorded", recorded)]
    results = {name: {"metrics": metrics, "eet": scored.summary()}
               for name, metrics, scored in runs}
    results["recorded"] = {"eet": recorded.summary()}
    (args.out / "eet-study.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    classic = ["| schedule | mean wait (h) | mean response (h) | mean bounded slowdown | "
               "utilization |", "|---|---:|---:|---:|---:|"]
    for name, metrics, _ in runs:
        classic.append(f"| {name} | {metrics['wait']['mean'] / 3600:.2f} | "
                       f"{metrics['response']['mean'] / 3600:.2f} | "
                       f"{metrics['bounded_slowdown']['mean']:.1f} | "
                       f"{100 * metrics['utilization']:.1f} % |")
    table = "\n".join(classic) + "\n\n" + eet_markdown(
        [(name, scored.summary()) for name, scored in named]) + "\n"
    (args.out / "eet-study.md").write_text(table)
    draw_boxplots(named, args.out / "eet-boxplots.png")
    load = f", arrivals x {args.arrival_scale:g}" if args.arrival_scale != 1.0 else ""
    for name, scored in named:
        slug = name.replace(". + ", "-").replace(" ", "-")
        # The recorded schedule ran at the log's own arrival times, whatever the replays' scale.
        shown = "" if name == "recorded" else load
        draw_heatmap(scored, args.out / f"eet-heatmap-{slug}.png",
                     f"METACENTRUM-2009-2 on {MACHINE_CPUS} CPUs{shown}: {name}")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
