"""Cobalt's accounting log: the record writer, and the reader that turns a log back into a trace.

A record is one line, `MM/DD/YYYY HH:MM:SS;<type>;<id>;key=value key=value ...`. The type is a
letter code: Q queued, S started, E ended, D deleted, A aborted (wall-time limit), plus task,
hold, rerun and checkpoint records for jobs (TS, TE, QA, HA, HR, R, C), reservation records
(B, F, K, k, Y, U, YA) whose id is a reservation, not a job, and cobaltlite's FAIL record whose
id is a failed machine component (docs/fault-aware.md). Nested attribute dictionaries are
flattened with dots (`Resource_List.nodect=512`) and keys are sorted.

Differences from Cobalt, on purpose:
- Timestamps are written in UTC, so a log does not depend on the machine's time zone. Cobalt
  wrote local time; `read_accounting_log(..., timezone="America/Chicago")` reads such logs.
- Values are quoted with escapes whenever needed, and the reader honours the quoting, so any
  value survives a round trip (Cobalt quoted on write but its Qsim reader split on blanks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from operator import attrgetter
from pathlib import Path
from typing import TextIO

from cobaltlite.errors import InputError
from cobaltlite.timefmt import MINUTES_SECONDS, TWO_DIGITS
from cobaltlite.traces.model import TraceJob, TraceReadResult
from cobaltlite.traces.swf import ESTIMATES, read_lines

FAILURE_RECORD = "FAIL"
"""A machine component failed (Qsim under failures):
`FAIL;R00-M0;failed_at=T repaired=T killed=J1:J2`; `read_failure_records` reads them back."""
RESERVATION_RECORDS = frozenset({"B", "F", "K", "k", "Y", "U", "YA"})
"""Record types about reservations; the trace reader ignores them."""
NOT_JOB_RECORDS = RESERVATION_RECORDS | {FAILURE_RECORD}
"""Records whose id is not a job: the trace reader skips them."""

_NEEDS_QUOTES = re.compile(r'[\s",=]')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "r": "\r"}
_BAD_NAME = re.compile(r'[\s=;"]')
_RECORD_DATE = re.compile(r"(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d)")
_ISO_DATE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")
_HMS = re.compile(r"(\d+):(\d\d):(\d\d)")


# --------------------------------------------------------------------------------------- writing


def format_record(when: float, kind: str, jobid: object, fields: Mapping[str, object]) -> str:
    """One accounting record, without the newline.

    `when` (Unix seconds) is rendered in UTC, truncated to the second. Nested mappings are
    flattened with dots; lists and tuples are joined with `:` (Cobalt's exec_host list of
    partitions); other values use str(). A value containing whitespace, a double quote, a comma
    or `=` is written in double quotes with `\\`, `"`, newline and carriage return escaped by a
    backslash.
    """
    if not kind.isalpha():
        raise ValueError(f"record type {kind!r} is not a letter code")
    ident = str(jobid)
    if type(jobid) is not int and (not ident or _BAD_NAME.search(ident)):
        raise ValueError(f"record id {ident!r} is empty or contains a blank, '=', ';' or '\"'")
    flat: dict[str, str] = {}
    _flatten(fields, "", flat)
    message = " ".join([f"{key}={flat[key]}" for key in sorted(flat)])
    return f"{record_stamp(when)};{kind};{ident};{message}"


_DATES: dict[int, str] = {}
"""`MM/DD/YYYY ` of each day (days since the epoch) a record was written for: a replay writes
hundreds of thousands of records over a few hundred days."""


def record_stamp(when: float) -> str:
    """`when` as `MM/DD/YYYY HH:MM:SS` in UTC, truncated to the second: a record's timestamp."""
    second = int(when)
    if second != when:  # datetime rounds fractions to the microsecond first: let it decide
        return datetime.fromtimestamp(when, UTC).strftime("%m/%d/%Y %H:%M:%S")
    day, in_day = divmod(second, 86400)
    date = _DATES.get(day)
    if date is None:
        date = _DATES[day] = datetime.fromtimestamp(day * 86400, UTC).strftime("%m/%d/%Y ")
    hour, in_hour = divmod(in_day, 3600)
    return f"{date}{TWO_DIGITS[hour]}:{MINUTES_SECONDS[in_hour]}"


_GOOD_NAMES: set[str] = set()
"""Field names already checked (records repeat the same few dozen names)."""


def _flatten(fields: Mapping[str, object], prefix: str, into: dict[str, str]) -> None:
    """Flattened, quoted values of `fields` into `into`. Numbers are never quoted: their str()
    has no blank, quote, comma or `=`."""
    for key, value in fields.items():
        name = f"{prefix}{key}" if prefix else key
        if key not in _GOOD_NAMES:
            if not key or _BAD_NAME.search(key):
                raise ValueError(
                    f"field name {name!r} is empty or contains a blank, '=', ';' or '\"'")
            _GOOD_NAMES.add(key)
        kind = type(value)
        if kind is int or kind is float:
            text = str(value)
        elif kind is str:
            text = quote_value(value)  # type: ignore[arg-type]
        elif isinstance(value, Mapping):
            _flatten(value, name + ".", into)
            continue
        elif isinstance(value, list | tuple):
            text = quote_value(":".join(str(item) for item in value))
        else:
            text = quote_value(str(value))
        if name in into:
            raise ValueError(f"field {name!r} given twice (once nested, once dotted)")
        into[name] = text


def quote_value(value: str) -> str:
    """`value` as a record writes it: as it is, or in double quotes with escapes if needed."""
    if not _NEEDS_QUOTES.search(value):
        return value
    return f'"{value.translate(_ESCAPE_TABLE)}"'


class AccountingLog:
    """Appends accounting records to a path or an open text stream.

    Records are buffered (a replay writes hundreds of thousands); everything is on disk after
    flush() or close(), and a crash loses at most the unflushed tail. A live daemon whose log
    others tail should pass `line_buffered=True`, which flushes after every record. A path is
    truncated unless `append=True`; a stream given by the caller is flushed but not closed.
    The object is a context manager.
    """

    def __init__(
        self, target: str | Path | TextIO, *, append: bool = False, line_buffered: bool = False
    ) -> None:
        self._line_buffered = line_buffered
        if isinstance(target, str | Path):
            try:
                # The log lives as long as this object, which closes it in close() / __exit__.
                self._stream: TextIO = Path(target).open(  # noqa: SIM115
                    "a" if append else "w", encoding="utf-8", buffering=1 if line_buffered else -1
                )
            except OSError as exc:
                raise InputError(
                    f"{target}: cannot write the accounting log: {exc.strerror}"
                ) from None
            self._owned = True
        else:
            self._stream = target
            self._owned = False

    def write(self, when: float, kind: str, jobid: object, fields: Mapping[str, object]) -> None:
        self._stream.write(format_record(when, kind, jobid, fields) + "\n")
        if self._line_buffered and not self._owned:
            self._stream.flush()

    def write_formatted(self, lines: str) -> None:
        """Append whole records already formatted as format_record does, each ending in a
        newline (Qsim's job log builds its records from parts formatted once per job)."""
        self._stream.write(lines)
        if self._line_buffered and not self._owned:
            self._stream.flush()

    def write_encoded(self, data: bytes) -> None:
        """write_formatted for records already encoded as UTF-8 (Qsim's compiled job log
        gathers its records as bytes: decoding them to be encoded again cost a copy of each)."""
        self._stream.flush()  # what write() and write_formatted() left goes first
        self._stream.buffer.write(data)
        if self._line_buffered and not self._owned:
            self._stream.buffer.flush()

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if self._owned:
            self._stream.close()
        else:
            self._stream.flush()

    def __enter__(self) -> AccountingLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------- reading


class _Malformed(Exception):
    """Internal: a line that is not a valid record; the message names the culprit."""


class _Job:
    """All records of one job id merged: later lines override earlier keys."""

    __slots__ = ("deleted", "line", "numbers", "queued_at", "texts")

    def __init__(self, line: int) -> None:
        self.line = line
        self.numbers: dict[str, float] = {}
        self.texts: dict[str, str] = {}
        self.queued_at: float | None = None
        self.deleted = False


def read_accounting_log(
    path: str | Path,
    *,
    lenient: bool = False,
    estimate: str = "requested",
    timezone: str = "UTC",
) -> TraceReadResult:
    """Read a Cobalt accounting log (or a Qsim job log) as a trace, jobs sorted by (submit, id).

    Lines are either records (`MM/DD/YYYY HH:MM:SS;<type>;<jobid>;k=v k=v`, values optionally
    quoted as format_record writes them) or Cobalt's alternative form `jobid=N;k=v;k=v`. All lines
    of a job id are merged; later lines override earlier keys, and within a line the first
    occurrence of a key wins (Cobalt's rule). For each job:

    - submit_time: `qtime=` (exact epoch seconds, independent of time zones), else the
      timestamp of the first Q record, else `ctime=`;
    - nodes: `Resource_List.nodect=`;
    - run_time: `runtime=`, else `end=` - `start=`, else `resources_used.walltime=`;
    - requested_time (`estimate="requested"`): `Resource_List.walltime=` (HH:MM:SS or seconds),
      else the run time; `estimate="runtime"`: always the run time. Unlike Cobalt's Qsim, run
      times past the wall time are kept as they are (the replay kills the job at the limit);
    - user `user=`, project `account=` (or `project=`), queue `requested_queue=` (the queue
      a job was submitted to when the daemons' queue layout routed it elsewhere: a replay
      under a layout routes it again from there) else `queue=`, dependencies
      `dependencies=` (job ids separated by `:`, as the Q record carries them);
    - times (`qtime`, `ctime`, `start`, `end`) are epoch seconds or `YYYY-MM-DD HH:MM:SS`.

    Record timestamps and `YYYY-MM-DD` times are read in `timezone` (an IANA name): UTC for logs
    this module writes, the site's zone for logs written by Cobalt itself.

    Jobs without a submit time, node count or run time (never ended, deleted while queued) are
    skipped and listed in `skipped`. A malformed line (bad timestamp, missing `;` fields, a token
    that is not key=value, a non-numeric value where a number is needed) is an InputError naming
    file, line and field, or with `lenient` is skipped and listed while the job's other lines
    still count. Reservation and FAIL records are ignored; a job killed by a failure and run
    again (A and R records, then S and E) is read as its successful run, from its first qtime.
    """
    if estimate not in ESTIMATES:
        raise InputError(f"estimate {estimate!r}: choose one of {', '.join(ESTIMATES)}")
    zone = _zone(timezone)
    source = str(path)
    jobs: dict[int, _Job] = {}
    skipped: list[str] = []

    for lineno, raw in read_lines(path):
        line = raw.strip()
        if not line:
            continue
        try:
            parsed = _parse_line(line, zone)
            if parsed is None:
                continue
            jobid, kind, stamp, numbers, texts = parsed
        except _Malformed as exc:
            message = f"{source}:{lineno}: {exc}"
            if not lenient:
                raise InputError(message) from None
            skipped.append(message)
            continue
        job = jobs.get(jobid)
        if job is None:
            job = jobs[jobid] = _Job(lineno)
        job.numbers.update(numbers)
        job.texts.update(texts)
        if kind == "Q" and job.queued_at is None:
            job.queued_at = stamp
        elif kind == "D":
            job.deleted = True

    result: list[TraceJob] = []
    for jobid, job in jobs.items():
        built = _build(jobid, job, estimate)
        if isinstance(built, str):
            skipped.append(f"{source}:{job.line}: job {jobid}: {built}")
        else:
            result.append(built)
    result.sort(key=attrgetter("submit_time", "jobid"))
    return TraceReadResult(jobs=result, skipped=skipped, origin=0)


def read_failure_records(path: str | Path) -> list[tuple[int, float, str]]:
    """(line, time, component) of every FAIL record of a log, in file order: the failures a Qsim
    replay met, to replay them again. The time is `failed_at=` (exact) or else the record's
    timestamp (UTC, to the second). A malformed FAIL record is an InputError with file:line;
    other records are not looked at."""
    found: list[tuple[int, float, str]] = []
    for lineno, raw in read_lines(path):
        parts = raw.strip().split(";", 3)
        if len(parts) < 3 or parts[1] != FAILURE_RECORD:
            continue
        try:
            fields = dict(_split_pairs(parts[3]) if len(parts) == 4 else [])
            if "failed_at" in fields:
                when = _number(fields["failed_at"])
            else:
                when = _record_time(parts[0], UTC)
        except _Malformed as exc:
            raise InputError(f"{path}:{lineno}: FAIL record: {exc}") from None
        found.append((lineno, when, parts[2]))
    return found


def _zone(name: str) -> tzinfo:
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: only a local-time log needs it

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"timezone {name!r}: not a known IANA time zone name") from None


def _parse_line(
    line: str, zone: tzinfo
) -> tuple[int, str | None, float | None, dict[str, float], dict[str, str]] | None:
    """(job id, record type, timestamp, numeric fields, text fields) of a line, or None for a
    line to ignore (reservation and FAIL records)."""
    if line[0].isdigit():
        parts = line.split(";", 3)
        if len(parts) < 3:
            raise _Malformed(
                "expected 'MM/DD/YYYY HH:MM:SS;<type>;<id>;key=value ...' (too few ';' fields)"
            )
        stamp_text, kind, ident = parts[0], parts[1], parts[2]
        if not kind.isalpha():
            raise _Malformed(f"record type {kind!r} is not a letter code")
        if kind in NOT_JOB_RECORDS:
            return None
        stamp = _record_time(stamp_text, zone)
        pairs = _split_pairs(parts[3]) if len(parts) == 4 else []
    else:
        # Cobalt's alternative trace form: k=v;k=v with the job id as a field.
        kind, stamp = None, None
        pairs = []
        for item in line.split(";"):
            if not item.strip():
                continue
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise _Malformed(f"field {item.strip()!r} is not key=value")
            pairs.append((key.strip(), value.strip()))
        found = next((value for key, value in pairs if key == "jobid"), None)
        if found is None:
            raise _Malformed("neither a record (MM/DD/YYYY HH:MM:SS;...) nor k=v;... with jobid=")
        ident = found
    try:
        jobid = int(ident)
    except ValueError:
        raise _Malformed(f"job id {ident!r} is not an integer") from None
    numbers: dict[str, float] = {}
    texts: dict[str, str] = {}
    for key, value in pairs:
        if key in numbers or key in texts:
            continue  # Cobalt's rule: within a line the first occurrence of a key wins.
        convert = _CONVERTERS.get(key)
        if convert is None:
            texts[key] = value
        else:
            numbers[key] = _convert(key, value, convert, zone)
    return jobid, kind, stamp, numbers, texts


def _split_pairs(message: str) -> list[tuple[str, str]]:
    """The key=value tokens of a record, honouring double-quoted values."""
    if '"' not in message:
        pairs = []
        for token in message.split():
            key, eq, value = token.partition("=")
            if not eq or not key:
                raise _Malformed(f"field {token!r} is not key=value")
            pairs.append((key, value))
        return pairs
    return _scan_quoted(message)


def _scan_quoted(message: str) -> list[tuple[str, str]]:
    pairs = []
    i, n = 0, len(message)
    while i < n:
        if message[i].isspace():
            i += 1
            continue
        eq = message.find("=", i)
        blank = next((j for j in range(i, n) if message[j].isspace()), n)
        if eq < 0 or eq > blank or eq == i:
            raise _Malformed(f"field {message[i:blank]!r} is not key=value")
        key = message[i:eq]
        i = eq + 1
        if i < n and message[i] == '"':
            chars: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise _Malformed(f"field {key!r}: unterminated quoted value")
                char = message[i]
                if char == '"':
                    i += 1
                    break
                if char == "\\" and i + 1 < n and message[i + 1] in _UNESCAPES:
                    chars.append(_UNESCAPES[message[i + 1]])
                    i += 2
                    continue
                chars.append(char)
                i += 1
            if i < n and not message[i].isspace():
                raise _Malformed(f"field {key!r}: text after the closing quote")
            pairs.append((key, "".join(chars)))
        else:
            end = next((j for j in range(i, n) if message[j].isspace()), n)
            pairs.append((key, message[i:end]))
            i = end
    return pairs


def _record_time(text: str, zone: tzinfo) -> float:
    match = _RECORD_DATE.fullmatch(text)
    if match is None:
        raise _Malformed(f"timestamp {text!r} is not MM/DD/YYYY HH:MM:SS")
    month, day, year, hour, minute, second = map(int, match.groups())
    return _epoch(text, (year, month, day, hour, minute, second), zone)


def _epoch(text: str, parts: tuple[int, int, int, int, int, int], zone: tzinfo) -> float:
    try:
        moment = datetime(*parts, tzinfo=zone)
    except ValueError:
        raise _Malformed(f"timestamp {text!r} is not a valid date and time") from None
    return moment.timestamp()


def _convert(key: str, value: str, convert: Callable[[str, tzinfo], float], zone: tzinfo) -> float:
    try:
        return convert(value, zone)
    except _Malformed as exc:
        raise _Malformed(f"field {key}: value {value!r} {exc}") from None


def _time_value(value: str, zone: tzinfo) -> float:
    match = _ISO_DATE.fullmatch(value)
    if match is not None:
        year, month, day, hour, minute, second = map(int, match.groups())
        return _epoch(value, (year, month, day, hour, minute, second), zone)
    return _number(value)


def _duration_value(value: str, _zone: tzinfo) -> float:
    match = _HMS.fullmatch(value)
    if match is None:
        return _number(value)
    hours, minutes, seconds = map(int, match.groups())
    if minutes > 59 or seconds > 59:
        raise _Malformed("is not a duration (HH:MM:SS with minutes and seconds below 60)")
    return hours * 3600 + minutes * 60 + seconds


def _count_value(value: str, _zone: tzinfo) -> float:
    try:
        count = int(value)
    except ValueError:
        raise _Malformed("is not an integer") from None
    if count < 0:
        raise _Malformed("is negative")
    return count


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _Malformed("is not a number") from None
    if not 0 <= number < float("inf"):
        raise _Malformed("is not a non-negative finite number")
    return number


# Fields whose values the reader needs as numbers; other fields are kept as text.
_CONVERTERS: dict[str, Callable[[str, tzinfo], float]] = {
    "qtime": _time_value,
    "ctime": _time_value,
    "start": _time_value,
    "end": _time_value,
    "runtime": _duration_value,
    "Resource_List.walltime": _duration_value,
    "resources_used.walltime": _duration_value,
    "Resource_List.nodect": _count_value,
}


def _build(jobid: int, job: _Job, estimate: str) -> TraceJob | str:
    """The trace job for a merged record set, or why it cannot be replayed."""
    f, texts = job.numbers, job.texts
    submit = f.get("qtime", job.queued_at if job.queued_at is not None else f.get("ctime"))
    if submit is None:
        return "no Q record, qtime= or ctime=: submit time unknown"
    nodes = f.get("Resource_List.nodect")
    if nodes is None:
        return "no Resource_List.nodect: size unknown"
    if "runtime" in f:
        run = f["runtime"]
    elif "end" in f and "start" in f:
        run = f["end"] - f["start"]
    elif "resources_used.walltime" in f:
        run = f["resources_used.walltime"]
    elif job.deleted:
        return "deleted before it ran (D record, no end)"
    else:
        return "no end: neither runtime= nor start= and end= (the job never ended in this log)"
    run = round(run)
    # A job that ended within its first second logs runtime=0 but did run: replay it. Only a
    # negative run time or an empty job is meaningless.
    if run < 0 or nodes <= 0:
        return f"run time {run} s on {nodes} nodes: nothing to replay"
    walltime = f.get("Resource_List.walltime")
    requested = round(walltime) if estimate == "requested" and walltime else run
    deps_text = texts.get("dependencies", "")
    deps = deps_text.split(":") if deps_text else []
    if not all(d.isdigit() for d in deps):
        return f"dependencies {deps_text!r}: not job ids separated by ':'"
    return TraceJob(
        jobid=jobid,
        submit_time=round(submit),
        run_time=run,
        requested_time=requested,
        nodes=int(nodes),
        user=texts.get("user", "unknown"),
        project=texts.get("account", texts.get("project", "unknown")),
        queue=texts.get("requested_queue", texts.get("queue", "default")),
        dependencies=tuple(int(d) for d in deps),
        extra={key: texts[key] for key in ("exec_host", "Exit_status") if key in texts},
    )
