"""cqmetrics: the metrics monitor's current values and recent history (any user, read-only).

The values are the monitor's samples (metrics_monitor/catalog.py lists them with their meaning);
the history comes from the database, so it reaches back past restarts, up to the retention
(`metrics_retention_days`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_metrics,
    format_table,
    parse_time,
    print_lines,
    run_command,
)
from cobaltlite.metrics_monitor.catalog import METRICS
from cobaltlite.timefmt import format_hms

PROG = "cqmetrics"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
HISTORY_COLUMNS = {"utilization": "Util", "utilization_1h": "Util_1h",
                   "queued_jobs": "Queued", "running_jobs": "Running",
                   "queue_depth": "Depth_min", "wait_mean": "Wait_mean",
                   "loss_of_capacity": "LoC", "out_of_service": "OOS",
                   "reserved_idle_nodes": "Res_idle", "reservation_delayed_jobs": "Res_delayed",
                   "reservation_delay_mean": "Res_delay"}
"""The history table's columns (metric: title); --json carries every metric."""


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, add_help=False,
        description="Print the metrics monitor's latest sample (utilization now and over "
                    "1 h/10 h/24 h, queued, waiting and running jobs, queue depth, wait "
                    "statistics of the last hour, loss of capacity, components out of "
                    "service, what booked reservations cost) and its history. The latest "
                    "sample is up to metrics_interval seconds old (cobaltlite.yaml).",
        epilog="Metrics: " + "; ".join(f"{name}: {meaning}" for name, meaning in METRICS.items())
               + ". Exit status: 0 shown; 1 the monitor is unreachable or has no sample yet; "
               "2 bad command line.")
    add_help_option(parser)
    parser.add_argument("--since", default="60", metavar="TIME",
                        help="history of the last TIME: minutes, HH:MM, HH:MM:SS or "
                             "DD:HH:MM:SS (default 60 minutes; 0: no history)")
    parser.add_argument("--limit", type=int, default=20, metavar="N",
                        help="at most the N latest samples of the history (default 20)")
    parser.add_argument("--json", action="store_true",
                        help="print {\"current\": sample, \"history\": [samples]} as JSON, "
                             "each sample {\"time\": unix seconds, \"values\": {metric: value}}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    span = parse_time(args.since)
    if not 1 <= args.limit <= 100_000:
        raise CommandError(f"--limit {args.limit}: give a number from 1 to 100000")
    with connect_metrics() as monitor:
        current = monitor.latest()
        history = monitor.since(time.time() - span, args.limit) if span else []
    if current is None:
        raise CommandError("the metrics monitor has no sample yet (it samples every "
                           "metrics_interval seconds after it starts)")
    if args.json:
        sys.stdout.write(json.dumps({"current": current, "history": history}, indent=1) + "\n")
    else:
        print_lines(report(current, history))
    return 0


def report(current: dict[str, Any], history: Sequence[dict[str, Any]]) -> list[str]:
    """The text cqmetrics prints: the current values, then the history table."""
    values = current["values"]
    lines = [f"Metrics sampled at {_when(current['time'])}"]
    lines += format_table(["Metric", "Value", "Meaning"],
                          [[name, _number(values[name]), meaning]
                           for name, meaning in METRICS.items() if name in values])
    lines += reservation_summary(values)
    if history:
        counted = "1 sample" if len(history) == 1 else f"{len(history)} samples"
        lines.append(f"History: {counted} from {_when(history[0]['time'])}")
        lines += format_table(["Time", *HISTORY_COLUMNS.values()],
                              [[_when(s["time"]), *(_number(s["values"].get(name))
                                                    for name in HISTORY_COLUMNS)]
                               for s in history])
    return lines


def reservation_summary(values: dict[str, float]) -> list[str]:
    """What the reservations cost now, in a sentence an admin reads (none when nothing is
    reserved and nothing delayed)."""
    held, idle = values.get("reserved_nodes", 0.0), values.get("reserved_idle_nodes", 0.0)
    delayed = int(values.get("reservation_delayed_jobs", 0.0))
    if not held and not delayed:
        return []
    share = f" ({100.0 * values.get('reserved_idle_share', 0.0):.1f} % of the machine)"
    text = (f"Reservations: {held:.0f} nodes reserved now, {idle:.0f} of them held idle{share}; "
            f"{delayed} queued job{' starts' if delayed == 1 else 's start'} later because of "
            "them")
    if delayed:
        text += (f", by {format_hms(values.get('reservation_delay_mean', 0.0))} on average, "
                 f"{format_hms(values.get('reservation_delay_max', 0.0))} at most")
    return [text]


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3f}"


def _when(t: float) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(t))


if __name__ == "__main__":
    sys.exit(main())
