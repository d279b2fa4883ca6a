"""`qsim sweep FILE` and `qsim report DIR`: the argument parsing and exit codes of the two
subcommands (`cobaltlite.qsim.cli` hands them their arguments)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from cobaltlite.argtypes import positive_int
from cobaltlite.errors import CobaltliteError

SWEEP_EPILOG = """\
example:
  qsim sweep simulator/experiments/lublin-balance-factor.yaml --workers 2
  qsim report sweeps/lublin-balance-factor

The experiment file's format is in docs/experiments.md. Outputs: DIR/results.parquet (or .csv),
one row per replay (configuration + every metric); DIR/replays/ID/summary.json and
accounting.log per replay; DIR/failures.json when replays failed. Run the same command again to
resume an interrupted sweep: finished replays are not recomputed. Exit status: 0 when every
replay finished, 1 when some failed (the others finish) or the file is wrong, 130 on Ctrl-C.
"""

REPORT_EPILOG = """\
DIR is what `qsim --out DIR` wrote (one replay, or one per policy) or what `qsim sweep` wrote.
The page (DIR/report/index.html unless --out) is plain HTML with PNG figures, no JavaScript.
"""


def sweep_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim sweep",
        description="Run every replay of an experiment file as a dask.distributed task and "
        "collect one row per replay.",
        epilog=SWEEP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", type=Path, metavar="FILE",
                        help="the experiment (YAML); - reads it from standard input, its "
                        "relative file names then relative to the current directory")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="output directory (default: sweeps/NAME, NAME from the file)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a "
                        "LocalCluster on this machine)")
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        help="LocalCluster worker processes (default: one per CPU)")
    parser.add_argument("--table", default="parquet", choices=("parquet", "csv"),
                        help="format of the results table (default: parquet)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def sweep_main(argv: Sequence[str]) -> int:
    from cobaltlite.experiments.spec import load_experiment
    from cobaltlite.experiments.sweep import run_sweep

    args = sweep_parser().parse_args(argv)
    err = Console(stderr=True, soft_wrap=True)
    if args.scheduler is not None and args.workers is not None:
        err.print("qsim sweep: error: --workers sizes the LocalCluster; with --scheduler the "
                  "cluster has its own workers", markup=False, highlight=False)
        return 1
    try:
        experiment = load_experiment(args.experiment)
        out = args.out or Path("sweeps") / experiment.name
        if out.exists() and not out.is_dir():
            err.print(f"qsim sweep: error: --out {out}: exists and is not a directory",
                      markup=False, highlight=False)
            return 1
        outcome = run_sweep(experiment, out, scheduler=args.scheduler, workers=args.workers,
                            table_format=args.table, console=err,
                            show_progress=not args.quiet and err.is_terminal)
    except CobaltliteError as exc:
        err.print(f"qsim sweep: error: {exc}", markup=False, highlight=False)
        return 1
    except KeyboardInterrupt:
        err.print("qsim sweep: interrupted; run the same command again to resume",
                  markup=False, highlight=False)
        return 130
    done = outcome.reused + outcome.ran
    err.print(f"qsim sweep: {done} of {outcome.total} replays done ({outcome.ran} run now, "
              f"{outcome.reused} reused), {len(outcome.failures)} failed; results: "
              f"{outcome.table or 'none yet'}", markup=False, highlight=False)
    return 1 if outcome.failures else 0


def report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim report",
        description="Turn a replay's or a sweep's output directory into an HTML page with "
        "figures (matplotlib PNGs).",
        epilog=REPORT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path, metavar="DIR")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="where the page and figures go (default: DIR/report)")
    parser.add_argument("--gantt-hours", type=float, default=48.0, metavar="H",
                        help="length of the Gantt view's time window, from the first "
                        "submission (default: 48)")
    return parser


def report_main(argv: Sequence[str]) -> int:
    from cobaltlite.experiments.report import write_report

    args = report_parser().parse_args(argv)
    err = Console(stderr=True, soft_wrap=True)
    if not args.gantt_hours > 0:
        err.print(f"qsim report: error: --gantt-hours {args.gantt_hours}: must be > 0",
                  markup=False, highlight=False)
        return 1
    try:
        page = write_report(args.directory, args.out or args.directory / "report",
                            gantt_hours=args.gantt_hours)
    except CobaltliteError as exc:
        err.print(f"qsim report: error: {exc}", markup=False, highlight=False)
        return 1
    print(page)
    return 0
