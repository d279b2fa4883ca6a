"""`qsim configure-queues`: read a history log, write a queue layout (seed 002).

The history is any trace qsim reads; its jobs go to the queues of a starting layout (by default
one queue per queue the trace names). The method sizes the partitions (pp: eq. 7; nlp: §II-A)
and dqr then splits and merges the queues (§II-B). Every candidate is scored by replaying it
(cobaltlite.partitioning.evaluate).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cobaltlite.argtypes import moment, positive_int
from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.partitioning.configure import (
    CHUNK_NODES,
    DEGRADATION,
    METHODS,
    ConfigureSettings,
    configure_layout,
    flat_machine,
)
from cobaltlite.partitioning.evaluate import Evaluation
from cobaltlite.partitioning.layout import QueueLayout, layout_yaml, read_layout, trace_layout
from cobaltlite.traces.model import TraceJob

EPILOG = """\
example:
  qsim configure-queues --trace SDSC-SP2-1998-4.2-cln.swf.gz --machine flat:128 \\
      --layout size-classes.yaml --start 1998-05-01 --end 1998-06-01 --method dqr \\
      --out june.yaml

--layout gives the starting queues (docs/hybrid-queues.md shows the file); without it every
queue the trace names is one queue taking all of its jobs. Exit status: 0 with the layout
written, 1 when the history or the layout cannot be used (the message says why), 2 for a bad
command line.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qsim configure-queues",
        description="Choose queue partitions from a history log (seed 002): proportional "
                    "(pp), the NLP partitioner (nlp), NLP then split and merge (dqr), or dqr "
                    "then a common pool carved from the partitions (hybrid).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", required=True, type=Path, metavar="FILE",
                        help="the history: an SWF trace (.swf or .swf.gz)")
    parser.add_argument("--machine", required=True, metavar="flat:N[:PPN]",
                        help="the machine the partitions share (a flat cluster)")
    parser.add_argument("--layout", type=Path, metavar="FILE",
                        help="the starting queues (YAML); default: the trace's queues")
    parser.add_argument("--start", type=moment, metavar="WHEN",
                        help="use the history from this moment (date or epoch seconds)")
    parser.add_argument("--end", type=moment, metavar="WHEN",
                        help="use the history up to this moment")
    parser.add_argument("--method", choices=METHODS, default="dqr",
                        help="how to size the partitions (default: dqr)")
    parser.add_argument("--samples", type=positive_int, default=100, metavar="N",
                        help="nlp/dqr: partition vectors simulated for the fit (default 100)")
    parser.add_argument("--tolerance", type=float, default=0.2, metavar="T",
                        help="nlp/dqr: slack of the proportional constraint, in [0, 1) "
                             "(default 0.2; docs/hybrid-queues.md D002-2)")
    parser.add_argument("--epochs", type=positive_int, default=3, metavar="N",
                        help="nlp/dqr/hybrid: the history cut into N periods weighted 1/N .. N/N "
                             "(default 3, seed 002 Table III)")
    parser.add_argument("--chunk", type=positive_int, default=CHUNK_NODES, metavar="NODES",
                        help=f"hybrid: nodes moved to the common pool per visit (default "
                             f"{CHUNK_NODES}; docs/hybrid-queues.md D002-21)")
    parser.add_argument("--degradation", type=float, default=DEGRADATION, metavar="F",
                        help=f"hybrid: largest rise of a queue's or the overall mean wait kept, "
                             f"as a fraction (default {DEGRADATION}, seed 002 §III)")
    parser.add_argument("--workers", type=positive_int, default=1, metavar="N",
                        help="replays run in parallel on N processes (default 1)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="write the layout here (YAML); default: standard output")
    return parser


def configure(args: argparse.Namespace) -> tuple[QueueLayout, int, Evaluation]:
    from cobaltlite.traces.swf import read_swf

    description = flat_machine(args.machine)
    total = description.nodes
    jobs: list[TraceJob] = read_swf(args.trace, processors_per_node=description.processors_per_node,
                                    start=args.start, end=args.end).jobs
    if not jobs:
        raise InputError(f"{args.trace}: no job in the history window")
    layout = trace_layout(jobs, total) if args.layout is None else read_layout(args.layout)[0]
    settings = ConfigureSettings(args.method, args.samples, args.tolerance, args.epochs,
                                 args.chunk, args.degradation, args.workers)
    try:
        layout, score = configure_layout(jobs, layout, total, settings)
    except InputError as exc:
        raise InputError(f"{args.trace}: {exc}") from None
    return layout, total, score


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if not 0 <= args.tolerance < 1:
        build_parser().error(f"--tolerance {args.tolerance}: give a number in [0, 1)")
    if not args.degradation >= 0:
        build_parser().error(f"--degradation {args.degradation}: give a fraction of 0 or more")
    try:
        layout, total, score = configure(args)
    except CobaltliteError as exc:
        print(f"qsim configure-queues: error: {exc}", file=sys.stderr)
        return 1
    text = layout_yaml(layout, total)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
    pool = f", common pool {layout.pool} nodes (tau_pf {layout.tau_pf:g})" if layout.pool else ""
    print(f"{len(layout.queues)} queues{pool}, mean wait {score.mean_wait / 3600:.2f} h, "
          f"utilization {score.utilization:.1%}", file=sys.stderr)
    for q in layout.queues:
        run = score.queues[q.name]
        print(f"  {q.name}: {q.nodes} nodes, {run.jobs} jobs, mean wait "
              f"{run.mean_wait / 3600:.2f} h", file=sys.stderr)
    return 0
