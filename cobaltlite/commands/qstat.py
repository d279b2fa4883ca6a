"""qstat: show jobs or queues (Cobalt's qstat, reference §3.2).

The formatting works on plain rows (the dicts the queue manager's user API returns) and an
explicit `now`, so it is tested without a server. Column names are matched case-insensitively
and printed as the user spelled them, as in Cobalt.

Header choice, first match wins: --header; -f -l (the long list); -f ($QSTAT_HEADER_FULL, else
the full header); $QSTAT_HEADER; the default header. Cobalt let -f override --header; here the
explicit option wins.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    QueueManagerAPI,
    Row,
    add_help_option,
    connect_queue_manager,
    format_table,
    format_vertical,
    print_error,
    print_lines,
    run_command,
)
from cobaltlite.timefmt import format_hms

PROG = "qstat"

DEFAULT_HEADER = ("JobID", "User", "WallTime", "Nodes", "State", "Location")
COBALT_FULL_HEADER = ("JobID", "JobName", "User", "WallTime", "QueuedTime", "RunTime",
                      "TimeRemaining", "Nodes", "State", "Location", "Mode", "Procs",
                      "Preemptable", "Queue", "StartTime", "Index")
# Cobalt's -f header, and the estimated start that Cobalt showed only in the long list.
FULL_HEADER = (*COBALT_FULL_HEADER, "Est_Start_Time")
# Cobalt's long list (client_utils.py long_header) in its order, with the dependency hold
# beside the other two, and what a job that has ended can tell at the end.
LONG_HEADER = (*COBALT_FULL_HEADER[:13], "User_Hold", "Admin_Hold", "Dep_Hold",
               *COBALT_FULL_HEADER[13:],
               "SubmitTime", "Path", "OutputDir", "ErrorPath", "OutputPath", "CobaltLog",
               "InputFile", "Envs", "Command", "Args", "Kernel", "KernelOptions", "ION_Kernel",
               "ION_KernelOptions", "Project", "Dependencies", "S", "Notify", "Score",
               "Maxtasktime", "attrs", "dep_frac", "user_list", "Geometry", "Est_Start_Time",
               "EndTime", "ExitStatus", "EndReason")
QUEUE_HEADER = ("Name", "Users", "Groups", "MinTime", "MaxTime", "MaxRunning", "MaxQueued",
                "MaxUserNodes", "MaxNodeHours", "TotalNodes", "State")

MISSING = "-"
TIME_FORMAT = "%a %b %d %H:%M:%S %Y %z (%Z)"
ESTIMATE_FORMAT = "%Y-%m-%d %H:%M:%S"
"""Cobalt's Est_Start_Time format (qstat.py:247-254)."""


# ---- values ------------------------------------------------------------------------------------


def format_score(score: float) -> str:
    """Cobalt's score display: `%5.1f`, scaled down by thousands with a K, M or G suffix."""
    for suffix in ("", "K", "M"):
        if abs(score) < 1000:
            return f"{score:5.1f}{suffix}"
        score /= 1000
    return f"{score:5.1f}G"


def format_timestamp(when: float) -> str:
    return time.strftime(TIME_FORMAT, time.localtime(when))


def _estimated_start(row: Row, now: float) -> float | None:
    """The last estimate, but never before now: a job the next pass has not started yet
    cannot start in the past (Cobalt likewise showed at least now)."""
    estimate = row.get("est_start")
    return None if estimate is None else max(estimate, now)


def _first_time(*times: float | None) -> float:
    """The first time that is set (0.0 is a valid time under a virtual clock)."""
    return next(t for t in times if t is not None)


def _queued_seconds(row: Row, now: float) -> float:
    """Submission to start; to the end for a job deleted while queued; to now if still waiting."""
    end = _first_time(row.get("starttime"), row.get("endtime"), now)
    return max(0.0, end - row["submittime"])


def _run_seconds(row: Row, now: float) -> float | None:
    start = row.get("starttime")
    if start is None:
        return None
    return max(0.0, _first_time(row.get("endtime"), now) - start)


def _remaining_seconds(row: Row, now: float) -> float | None:
    start = row.get("starttime")
    if start is None or row.get("endtime") is not None:
        return None
    return max(0.0, row["walltime"] - (now - start))


def _joined(separator: str) -> Callable[[Any], str]:
    def show(values: Any) -> str:
        if isinstance(values, Mapping):
            values = [f"{key}={value}" for key, value in values.items()]
        return separator.join(str(v) for v in values) or MISSING
    return show


@dataclass(frozen=True)
class Column:
    """One column: `value` gives the raw, sortable value and `show` its text.

    A None value is shown as `absent` when the column has one (RunTime's N/A), else as the
    table's placeholder for missing values.
    """

    value: Callable[[Row, float], Any]
    show: Callable[[Any], str] = str
    absent: str | None = None
    needs: tuple[str, ...] = ()
    """The job fields `value` reads: qstat asks the server for only these."""
    field: str | None = None
    """Set when the value is just this field of the row: read without calling `value`."""

    def texts(self, rows: Sequence[Row], now: float, missing: str) -> list[str]:
        """The column's text for each row. Each distinct value is formatted once: 10,000
        jobs share a handful of wall times, states and sizes."""
        absent = missing if self.absent is None else self.absent
        if self.field is not None:
            field = self.field
            values = [row.get(field) for row in rows]
        else:
            values = [self.value(row, now) for row in rows]
        kinds = set(map(type, values)) - {type(None)}
        # Only values of one kind, other than float, can share a text by being equal: True and
        # 1, or 0.0 and -0.0, are equal but print differently. Lists and mappings (args, env)
        # cannot be keys. Those are formatted one by one.
        if len(kinds) > 1 or kinds & {float, list, dict}:
            return [absent if value is None else self.show(value) for value in values]
        shown = {value: absent if value is None else self.show(value) for value in set(values)}
        return [shown[value] for value in values]


def _field(name: str, show: Callable[[Any], str] = str) -> Column:
    return Column(lambda row, _now: row.get(name), show, needs=(name,), field=name)


def _or_missing(text: str) -> str:
    """Text fields the queue manager keeps as "" when unset."""
    return text or MISSING


_NOT_KEPT = Column(lambda _row, _now: None)
"""A column of Cobalt's that names something cobaltlite does not have: shown as missing."""

JOB_COLUMNS: dict[str, Column] = {
    "jobid": _field("jobid"),
    "jobname": _field("jobname"),
    "user": _field("user"),
    "walltime": _field("walltime", format_hms),
    "queuedtime": Column(_queued_seconds, format_hms,
                         needs=("starttime", "endtime", "submittime")),
    "runtime": Column(_run_seconds, format_hms, absent="N/A", needs=("starttime", "endtime")),
    "timeremaining": Column(_remaining_seconds, format_hms, absent="N/A",
                            needs=("starttime", "endtime", "walltime")),
    "nodes": _field("nodes"),
    "state": _field("display_state"),
    "s": _field("short_state"),
    "short_state": _field("short_state"),
    "location": _field("location"),
    "mode": _field("mode"),
    "procs": _field("procs"),
    # Stored and shown; the scheduler never preempts (neither did Cobalt's, §2.6).
    "preemptable": _field("preemptable"),
    "user_hold": _field("user_hold"),
    "admin_hold": _field("admin_hold"),
    "dep_hold": _field("dep_hold"),
    "queue": _field("queue"),
    "starttime": _field("starttime", format_timestamp),
    # Cobalt's Index numbered the tasks of a job array; cobaltlite has no job arrays.
    "index": _NOT_KEPT,
    "submittime": _field("submittime", format_timestamp),
    "endtime": _field("endtime", format_timestamp),
    "path": Column(lambda row, _now: (row.get("env") or {}).get("PATH"), needs=("env",)),
    "outputdir": _field("cwd"),
    "errorpath": _field("errorpath"),
    "outputpath": _field("outputpath"),
    "cobaltlog": _field("cobaltlog"),
    "inputfile": _field("inputfile", _or_missing),
    "envs": _field("env", _joined(":")),
    "command": _field("command"),
    "args": _field("args", lambda args: shlex.join(args) or MISSING),
    # Blue Gene boot images and preemption time limits: cobaltlite has neither.
    "kernel": _NOT_KEPT,
    "kerneloptions": _NOT_KEPT,
    "ion_kernel": _NOT_KEPT,
    "ion_kerneloptions": _NOT_KEPT,
    "maxtasktime": _NOT_KEPT,
    "project": _field("project"),
    "dependencies": _field("dependencies", _joined(":")),
    "notify": _field("notify", _or_missing),
    "score": _field("score", format_score),
    "attrs": _field("attrs", _joined(":")),
    "user_list": _field("user_list", _joined(":")),
    "dep_frac": _field("dep_frac"),
    "geometry": _field("geometry", _or_missing),
    "exitstatus": _field("exit_status"),
    # Why the job's last run ended; on a queued job, why it was resubmitted (a failure).
    "endreason": _field("end_reason"),
    # Queued jobs the last scheduling pass's estimate reached (queue_manager/estimates.py).
    "est_start_time": Column(_estimated_start,
                             lambda when: time.strftime(ESTIMATE_FORMAT, time.localtime(when)),
                             needs=("est_start",)),
}


def _restriction(name: str, show: Callable[[Any], str] = str) -> Column:
    """A queue restriction: a key of the queue's row, None where unset."""
    return _field(name, show)


def _duration(value: Any) -> str:
    """maxtime or mintime: seconds, as a job's wall time."""
    return format_hms(float(value))


QUEUE_COLUMNS: dict[str, Column] = {
    "name": _field("name"),
    "users": _restriction("users"),
    "groups": _restriction("groups"),
    "mintime": _restriction("mintime", _duration),
    "maxtime": _restriction("maxtime", _duration),
    "minnodes": _restriction("minnodes"),
    "maxnodes": _restriction("maxnodes"),
    "maxrunning": _restriction("maxrunning"),
    "maxtotaljobs": _restriction("maxtotaljobs"),
    "maxqueued": _restriction("maxqueued"),
    "maxusernodes": _restriction("maxusernodes"),
    "maxnodehours": _restriction("maxnodehours"),
    "totalnodes": _restriction("totalnodes"),
    "state": _field("state"),
    "policy": _field("policy"),
    "priority": _field("priority"),
}
# Cobalt printed Python's None for a queue limit that is not set.
QUEUE_MISSING = "None"


# ---- tables --------------------------------------------------------------------------------------


def resolve_header(header: Sequence[str], columns: Mapping[str, Column]) -> list[Column]:
    unknown = [name for name in header if name.lower() not in columns]
    if unknown:
        raise CommandError(f"unknown column(s) {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(columns))}")
    return [columns[name.lower()] for name in header]


def _sort_key(value: Any) -> tuple[int, float | str]:
    """Missing values first, then numbers by value, then text (Cobalt: numeric when possible)."""
    if value is None:
        return (0, 0.0)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return (2, str(value))
    # "nan" or "inf" as text (a job name, say) is not a number to sort by.
    return (1, number) if math.isfinite(number) else (2, str(value))


def sort_rows(
    rows: Sequence[Row], header: Sequence[str], sort: Sequence[str] | None,
    columns: Mapping[str, Column], now: float, reverse: bool = False,
) -> list[Row]:
    """Cobalt's order: by the --sort columns, else by score when shown, else by JobID (or the
    first column when JobID is not shown), ascending; --reverse reverses the whole list."""
    shown = [name.lower() for name in header]
    if sort:
        keys = [name.lower() for name in sort]
        resolve_header(keys, columns)
    elif "score" in shown:
        keys = ["score"]
    elif "jobid" in shown:
        keys = ["jobid"]
    else:
        keys = shown[:1]
    ordered = sorted(rows, key=lambda row: [_sort_key(columns[k].value(row, now))
                                            for k in keys])
    # The whole list backwards, ties included (sorted(reverse=True) keeps ties in order).
    return ordered[::-1] if reverse else ordered


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` with control characters (and any lone surrogate) as escapes such as \\x1b: a
    job's name or environment, written by its owner, must not drive another user's terminal."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def render(
    rows: Sequence[Row], header: Sequence[str], columns: Mapping[str, Column], now: float,
    vertical: bool = False, missing: str = MISSING,
) -> list[str]:
    """The table (or, with `vertical`, the per-row blocks) of `rows` in the given order."""
    resolved = resolve_header(header, columns)
    cells = list(zip(*(map(escape_controls, column.texts(rows, now, missing))
                       for column in resolved), strict=True))
    return format_vertical(header, cells) if vertical else format_table(header, cells)


def choose_header(args: argparse.Namespace, environ: Mapping[str, str]) -> list[str]:
    if args.header:
        return args.header.split(":")
    if args.Q:
        return list(QUEUE_HEADER)
    if args.full and args.long:
        return list(LONG_HEADER)
    if args.full:
        custom_full = environ.get("QSTAT_HEADER_FULL")
        return custom_full.split(":") if custom_full else list(FULL_HEADER)
    custom = environ.get("QSTAT_HEADER")
    return custom.split(":") if custom else list(DEFAULT_HEADER)


# ---- selection -------------------------------------------------------------------------------


def needed_fields(header: Sequence[str], sort: Sequence[str] | None) -> list[str]:
    """The job fields the header and sort keys read (select_jobs adds those it filters on)."""
    wanted = {"jobid"}
    for name in [*header, *(sort or [])]:
        column = JOB_COLUMNS.get(name.lower())
        if column is not None:
            wanted.update(column.needs)
    return sorted(wanted)


def select_jobs(
    qm: QueueManagerAPI, targets: Sequence[str], users: Sequence[str] | None,
    fields: Sequence[str] | None = None,
) -> tuple[list[Row], list[str]]:
    """Jobs named by id or by queue (all unfinished jobs when none is named), of `users` if set.

    Returns the rows and one message per target that matched nothing.
    """
    jobids = [int(t) for t in targets if t.isdigit()]
    queue_names = [t for t in targets if not t.isdigit()]
    if fields is not None:
        filtered_on = (["user"] if users else []) + (["queue"] if queue_names else [])
        fields = sorted({*fields, *filtered_on})
    rows: list[Row] = []
    problems: list[str] = []
    if jobids:
        rows = qm.jobs(jobids, fields)
        found = {row["jobid"] for row in rows}
        problems += [f"job {jobid} not found" for jobid in jobids if jobid not in found]
    if queue_names:
        known = {queue["name"] for queue in qm.queues()}
        problems += [f"{name} is not a valid jobid or queue name"
                     for name in queue_names if name not in known]
        wanted = set(queue_names)
        seen = {row["jobid"] for row in rows}
        rows += [row for row in qm.jobs(None, fields)
                 if row["queue"] in wanted and row["jobid"] not in seen]
    if not targets:
        rows = qm.jobs(None, fields)
    if users:
        rows = [row for row in rows if row["user"] in users]
    return rows, problems


def select_queues(qm: QueueManagerAPI, names: Sequence[str]) -> tuple[list[Row], list[str]]:
    queues = qm.queues()
    if not names:
        return queues, []
    known = {queue["name"] for queue in queues}
    problems = [f"{name} is not a valid queue name" for name in names if name not in known]
    return [queue for queue in queues if queue["name"] in names], problems


# ---- the command -----------------------------------------------------------------------------


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG,
        usage="%(prog)s [options] [<jobid or queue> ...]",
        description="Show jobs (by default all unfinished jobs), or queues with -Q. Job ids "
                    "name jobs (finished ones too); other arguments name queues.",
        epilog="Job columns: " + ", ".join(sorted(JOB_COLUMNS)) + ". Queue columns: "
               + ", ".join(sorted(QUEUE_COLUMNS)) + ". Column names ignore case. "
               "Environment: QSTAT_HEADER and QSTAT_HEADER_FULL (A:B:C) set the columns of the "
               "default and -f listings; --header overrides both. Exit status: 0 shown, 1 an "
               "id or queue matched nothing or a server error, 2 bad command line.",
        add_help=False,
    )
    add = parser.add_argument
    add("-f", "--full", action="store_true", help="show the full header; with -l, every field")
    add("-l", "--long", action="store_true",
        help="print one 'Attribute: value' block per job instead of a table")
    add("-u", "--user", metavar="USER[:USER]", help="only jobs of these users")
    add("--header", metavar="A:B:C", help="columns to show, e.g. JobID:User:Score:S")
    add("--sort", metavar="A:B", help="columns to sort by (default: Score if shown, else JobID)")
    add("--reverse", action="store_true", help="reverse the sort order")
    add("-Q", action="store_true",
        help="show queues and their limits instead of jobs (arguments name queues)")
    add_help_option(parser)
    add("targets", nargs="*", metavar="jobid_or_queue", help="job ids or queue names")
    return parser


def show(qm: QueueManagerAPI, args: argparse.Namespace, environ: Mapping[str, str],
         now: float) -> int:
    header = choose_header(args, environ)
    columns = QUEUE_COLUMNS if args.Q else JOB_COLUMNS
    resolve_header(header, columns)  # reject a bad --header before asking the server
    if args.Q:
        rows, problems = select_queues(qm, args.targets)
        missing = QUEUE_MISSING
    else:
        users = args.user.split(":") if args.user else None
        sort_keys = args.sort.split(":") if args.sort else None
        # The long listing shows every field the server keeps: ask for all of them, so it
        # shows what this server has rather than failing on a field an older one lacks.
        fields = None if args.full and args.long else needed_fields(header, sort_keys)
        rows, problems = select_jobs(qm, args.targets, users, fields)
        missing = MISSING
    sort = args.sort.split(":") if args.sort else None
    ordered = sort_rows(rows, header, sort, columns, now, args.reverse)
    print_lines(render(ordered, header, columns, now, vertical=args.long, missing=missing))
    for problem in problems:
        print_error(PROG, problem)
    return 1 if problems else 0


def _main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    with connect_queue_manager() as qm:
        return show(qm, args, os.environ, time.time())


def main(argv: Sequence[str] | None = None) -> int:
    # Listing 10,000 jobs builds some 100,000 lists, dicts and strings, none of them cyclic:
    # the cycle collector's runs over them found nothing to free and took ~25 ms, an eighth of
    # the command. Restored for callers in the same process (tests).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return run_command(PROG, lambda: _main(sys.argv[1:] if argv is None else argv))
    finally:
        if collecting:
            gc.enable()


if __name__ == "__main__":
    sys.exit(main())
