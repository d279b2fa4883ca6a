"""Seed 002's study on SDSC-SP2 and SDSC-BLUE: non-partitioned, static partitioned, PP, NLP, DQR
and hybrid, reconfigured monthly (docs/hybrid-queues.md, "The study").

    python simulator/studies/hybrid_queues.py --out study-out --months 3 --workers 2

Set-up: each trace's queues are size and time classes (simulator/studies/hybrid_queues/*.yaml,
D002-22); jobs wider than half the machine are left out for every strategy alike (written to
OUT/TRACE-half.swf.gz). The first replayed month is configured from the month before it; each
strategy is `qsim --queue-layout CLASSES --reconfigure monthly --method M` over the same months
(FCFS, EASY inside each partition). Writes OUT/TRACE/METHOD/summary.json and OUT/table.md.
The summaries kept in the repository (simulator/studies/hybrid_queues/results/TRACE/METHOD.json)
are tabulated again without a run by

    python simulator/studies/hybrid_queues.py --out simulator/studies/hybrid_queues/results \
        --table-only
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path
from typing import Any

from cobaltlite.choices import MONTHLY_METHODS as METHODS
from cobaltlite.qsim.cli import main as qsim

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
HERE = Path(__file__).resolve().with_suffix("")
STUDIES = {
    # name: (trace file, processors per node, machine nodes, first replayed month)
    "SDSC-SP2": ("SDSC-SP2-1998-4.2-cln.swf.gz", 1, 128, (1998, 6)),
    "SDSC-BLUE": ("SDSC-BLUE-2000-4.2-cln.swf.gz", 8, 144, (2000, 6)),
}
PAPER = {"hybrid vs static": -46.0, "hybrid vs whole": -55.0}
"""Seed 002's headline: hybrid's mean wait against static partitioned and non-partitioned
(the real Cray configuration), averaged over months."""


def half_machine_trace(name: str, ppn: int, nodes: int, out: Path) -> Path:
    """The trace without its jobs wider than half the machine (D002-22)."""
    path = out / name.replace(".swf.gz", "-half.swf.gz")
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    with gzip.open(TRACES / name, "rt") as src, gzip.open(tmp, "wt") as dst:
        for line in src:
            fields = line.split()
            if line.startswith(";") or not fields:
                dst.write(line)
                continue
            procs = int(fields[7]) if int(fields[7]) > 0 else int(fields[4])
            if -(-procs // ppn) <= nodes // 2:
                dst.write(line)
    tmp.replace(path)
    return path


def month_arg(year: int, month: int, plus: int) -> str:
    month += plus
    year += (month - 1) // 12
    return f"{year}-{(month - 1) % 12 + 1:02d}-01"


def run(study: str, months: int, workers: int, samples: int, out: Path) -> dict[str, Any]:
    name, ppn, nodes, (year, month) = STUDIES[study]
    trace = half_machine_trace(name, ppn, nodes, out)
    classes = HERE / f"{study.lower()}-classes.yaml"
    results = {}
    for method in METHODS:
        target = out / study / method
        if not (target / "summary.json").exists():
            code = qsim(["--trace", str(trace), "--machine", f"flat:{nodes}:{ppn}",
                         "--queue-layout", str(classes), "--reconfigure", "monthly",
                         "--method", method, "--start", month_arg(year, month, 0),
                         "--end", month_arg(year, month, months), "--workers", str(workers),
                         "--samples", str(samples), "--out", str(target), "-q"])
            if code != 0:
                raise SystemExit(f"{study} {method}: qsim exited {code}")
        results[method] = json.loads((target / "summary.json").read_text())
    return results


def change(new: float | None, old: float | None) -> float | None:
    return None if new is None or not old else 100.0 * (new - old) / old


def month_weighted(months: list[dict[str, Any]], queue: str) -> float:
    """A queue's utilization over the months: each month's (node-seconds its jobs ran in the
    month over the machine's) weighted by the month's length."""
    seconds = sum(m["end"] - m["start"] for m in months)
    return sum(m["queues"][queue]["utilization"] * (m["end"] - m["start"])
               for m in months) / seconds


def summary_path(out: Path, study: str, method: str) -> Path:
    """Where a run's summary is: OUT/TRACE/METHOD/summary.json as a run writes it, or
    OUT/TRACE/METHOD.json as the repository keeps it (results/)."""
    run_dir = out / study / method / "summary.json"
    return run_dir if run_dir.exists() else out / study / f"{method}.json"


def table(study: str, results: dict[str, Any]) -> list[str]:
    """The Markdown of one trace's runs (the methods run so far, when --table-only)."""
    methods = [m for m in METHODS if m in results]
    h = [f"### {study}", ""]
    months = [m["month"] for m in results["whole"]["months"]]
    h.append("Mean wait (h) per month, all queues; maximum wait (h), mean bounded slowdown and "
             "utilization in brackets:")
    h.append("")
    h.append("| month | " + " | ".join(methods) + " |")
    h.append("|---" * (len(methods) + 1) + "|")
    for k, month in enumerate(months):
        cells = []
        for method in methods:
            m = results[method]["months"][k]
            cells.append(f"{m['mean_wait'] / 3600:.2f} ({m['max_wait'] / 3600:.0f}, "
                         f"{m['mean_bounded_slowdown']:.0f}, {m['utilization']:.0%})")
        h.append(f"| {month} | " + " | ".join(cells) + " |")
    h.append("")
    h.append("Per queue over the months: mean wait h / max wait h (mean bounded slowdown, "
             "utilization of the machine by the queue's jobs):")
    h.append("")
    queues = list(results["whole"]["months"][0]["queues"])
    h.append("| queue | " + " | ".join(methods) + " |")
    h.append("|---" * (len(methods) + 1) + "|")
    for q in queues:
        cells = []
        for method in methods:
            rows = [m["queues"][q] for m in results[method]["months"] if m["queues"][q]["jobs"]]
            jobs = sum(r["jobs"] for r in rows)
            mean = sum(r["mean_wait"] * r["jobs"] for r in rows) / jobs if jobs else 0.0
            top = max((r["max_wait"] for r in rows), default=0.0)
            bsld = sum(r["mean_bounded_slowdown"] * r["jobs"] for r in rows) / jobs if jobs else 0.0
            cells.append(f"{mean / 3600:.2f} / {top / 3600:.1f} ({bsld:.0f}, "
                         f"{month_weighted(results[method]['months'], q):.1%})")
        h.append(f"| {q} | " + " | ".join(cells) + " |")
    h.append("")
    for other in [m for m in ("static", "whole") if "hybrid" in results and m in results]:
        changes = [change(results["hybrid"]["months"][k]["mean_wait"],
                          results[other]["months"][k]["mean_wait"]) for k in range(len(months))]
        known = [c for c in changes if c is not None]
        h.append(f"- hybrid vs {other}: mean wait {statistics.mean(known):+.0f} % on average "
                 f"over {len(known)} months (per month: "
                 + ", ".join(f"{c:+.0f} %" for c in known)
                 + f"); paper {PAPER[f'hybrid vs {other}']:+.0f} %")
    for a, b in [(a, b) for a, b in (("pp", "static"), ("nlp", "pp"), ("dqr", "nlp"),
                                      ("dqr", "whole")) if a in results and b in results]:
        changes = [change(results[a]["months"][k]["mean_wait"],
                          results[b]["months"][k]["mean_wait"]) for k in range(len(months))]
        known = [c for c in changes if c is not None]
        h.append(f"- {a} vs {b}: mean wait {statistics.mean(known):+.0f} % on average")
    last = "hybrid" if "hybrid" in results else methods[-1]
    layouts = [m["layout"] for m in results[last]["months"]]
    h.append(f"- {last} layouts (queue nodes, pool): " + "; ".join(
        f"{m}: {lay and lay['queues']} pool {lay and lay['pool']}"
        for m, lay in zip(months, layouts, strict=True)))
    h.append("")
    return h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("hybrid-study"),
                        help="directory of the runs (default hybrid-study); with --table-only "
                        "also the repository's simulator/studies/hybrid_queues/results")
    parser.add_argument("--months", type=int, default=3, help="months replayed (default 3)")
    parser.add_argument("--workers", type=int, default=2,
                        help="processes configuring months in parallel (default 2)")
    parser.add_argument("--samples", type=int, default=100,
                        help="NLP partition vectors simulated per month (default 100)")
    parser.add_argument("--study", choices=list(STUDIES), action="append",
                        help="the trace (repeatable; default both)")
    parser.add_argument("--table-only", action="store_true",
                        help="tabulate the runs already in OUT, run nothing")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for study in args.study or list(STUDIES):
        if args.table_only:
            results = {m: json.loads(summary_path(args.out, study, m).read_text())
                       for m in METHODS if summary_path(args.out, study, m).exists()}
        else:
            results = run(study, args.months, args.workers, args.samples, args.out)
        lines += table(study, results)
    if not args.table_only:
        (args.out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
