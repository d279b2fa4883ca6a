"""`qsim eet TRACE`: score the schedule an SWF trace recorded (submit + wait) by seed 004's
expected end times, without replaying it, so a centre can judge its own history."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from cobaltlite.argtypes import moment, positive_int
from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import FlatDescription
from cobaltlite.qsim.eet import (
    EqualShares,
    ShareModel,
    eet_markdown,
    load_shares,
    print_eet,
    recorded_schedule,
    score_schedule,
    write_figures,
)

EPILOG = """\
examples:
  qsim eet METACENTRUM-2009-2.swf.gz --machine flat:806 --out out/meta-recorded
  qsim eet SDSC-SP2-1998-4.2-cln.swf.gz --machine flat:128 --shares shares.txt --markdown

Each user's expected share is the machine divided equally among the users with jobs in the
scored window, unless --shares gives a file of 'USER CPUS' lines that must sum to the machine.
Outputs with --out DIR: DIR/eet.json (totals, box-plot statistics across users, per-user
scores), DIR/eet-boxplots.png and DIR/eet-heatmap.png. A replay is scored with `qsim --eet`.
Decisions: docs/fairness.md, "Seed 004".
"""


def share_model(path: Path | None) -> ShareModel:
    """--shares FILE, else the machine divided among the active users."""
    return EqualShares() if path is None else load_shares(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim eet",
        description="Score the schedule an SWF trace recorded (start = submit + wait) by expected "
        "end times (seed 004): per-user violated EETs, tardiness and CPU-weighted tardiness.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, metavar="TRACE", help="an SWF file (.swf or .swf.gz)")
    parser.add_argument(
        "--machine", required=True, metavar="flat:N[:PPN]",
        help="the machine the trace ran on: N nodes of PPN processors; EETs count nodes, so "
        "flat:N (one processor a node) scores in CPUs")
    parser.add_argument("--shares", type=Path, metavar="FILE",
                        help="expected share per user: lines 'USER CPUS' summing to the machine "
                        "(default: the machine divided equally among the active users)")
    parser.add_argument("--start", type=moment, metavar="DATE",
                        help="score only jobs submitted at or after DATE")
    parser.add_argument("--end", type=moment, metavar="DATE",
                        help="score only jobs submitted before DATE")
    parser.add_argument("--procs-per-node", type=positive_int, metavar="N",
                        help="SWF processors per node (default: the machine's PPN)")
    parser.add_argument("--lenient", action="store_true",
                        help="skip and count malformed trace lines instead of stopping")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write DIR/eet.json, DIR/eet-boxplots.png and DIR/eet-heatmap.png")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        description = load_description(args.machine)
        if not isinstance(description, FlatDescription):
            raise InputError(f"--machine {args.machine}: qsim eet scores clusters (flat:N[:PPN])")
        if args.out is not None and args.out.exists() and not args.out.is_dir():
            raise InputError(f"--out {args.out}: exists and is not a directory")
        model = share_model(args.shares)
        ppn = args.procs_per_node or description.processors_per_node
        jobs, skipped = recorded_schedule(args.trace, processors_per_node=ppn,
                                          lenient=args.lenient, start=args.start, end=args.end)
        if not jobs:
            raise InputError(f"{args.trace}: no job with a recorded start to score")
        report = score_schedule(jobs, description.nodes, model)
        summary = report.summary()
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            write_figures(report, args.out, f"{args.trace.name}, recorded schedule")
            text = json.dumps({"trace": args.trace.name, "machine": args.machine,
                               "jobs_skipped": len(skipped), "eet": summary},
                              indent=2, sort_keys=True) + "\n"
            (args.out / "eet.json").write_text(text, encoding="utf-8")
    except CobaltliteError as exc:
        print(f"qsim eet: error: {exc}", file=sys.stderr)
        return 1
    if skipped:
        print(f"qsim eet: {len(skipped)} jobs left out (never ran or no recorded wait); first: "
              f"{skipped[0]}", file=sys.stderr)
    if args.markdown:
        print(eet_markdown([("recorded", summary)]))
    else:
        print_eet([("recorded", summary)])
    return 0
