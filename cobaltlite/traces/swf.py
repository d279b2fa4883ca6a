"""Reader for the Standard Workload Format (SWF) of the Parallel Workloads Archive.

An SWF file is one job a line, 18 whitespace-separated numeric fields, -1 meaning "unknown",
preceded by `;` header comments (`; UnixStartTime: 956700003`). Sizes are processors; Qsim
schedules nodes, so the reader converts with `processors_per_node`.

Two kinds of bad lines are told apart. A *malformed* line (wrong field count, a field that is not
a number, a value no SWF writer produces) means the file is not what the user thinks it is: it is
an InputError naming file, line and field, unless `lenient=True`, which skips and counts it. A
well-formed job that cannot be replayed (run time or size unknown or zero: cancelled jobs, which
real logs are full of) is always skipped and counted, never an error.
"""

from __future__ import annotations

import gzip
import math
import sys
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TypeGuard

from cobaltlite.errors import InputError
from cobaltlite.traces.model import TraceJob, TraceReadResult, select_window

FIELD_NAMES = (
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average cpu time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
)
"""The 18 SWF fields in file order (field N of the SWF definition is FIELD_NAMES[N - 1])."""

SIZES = ("requested", "allocated")
"""Which processor count makes a job's size: "requested" uses field 8 (requested processors)
and falls back to field 5 (allocated) when it is -1 or 0; "allocated" is the other way round.
Intrepid needs "allocated": its field 8 counts MPI tasks (nodes, in SMP mode) while field 5
always counts cores of the partition the job really held (job 6: 64 requested, 256 allocated).
"""

ESTIMATES = ("requested", "runtime")
"""Runtime-estimate models: how `TraceJob.requested_time` (the scheduler's plan) is chosen.

"requested": the user's requested time (field 9), else the run time when field 9 is -1 or 0.
"runtime": always the actual run time, i.e. perfect estimates (an upper bound on what better
wall-time prediction could give).
"""

# Average CPU time and the two memory fields are real numbers in several PWA logs (SDSC-BLUE's
# "0.03"); every other field is an integer by the SWF definition.
_REAL_FIELDS = (5, 6, 9)
_INTEGER_FIELDS = tuple(i for i in range(18) if i not in _REAL_FIELDS)
_integers = itemgetter(*_INTEGER_FIELDS)
_reals = itemgetter(*_REAL_FIELDS)
# SWF status codes: 0 failed, 1 completed, 2-4 checkpoint/swap records, 5 cancelled; -1 unknown.
_STATUSES = frozenset(range(-1, 6))
_GZIP_MAGIC = b"\x1f\x8b"


class RecordedRun(Mapping[str, str]):
    """A job's `extra` from an SWF line: the wait and status the machine recorded (fields 3 and
    11, as written), so a replay can be compared with what really happened. A mapping like the
    dict other readers give, in two slots: a dict per job was a fifth of a large trace's memory.
    """

    __slots__ = ("_status", "_wait")

    def __init__(self, wait: str, status: str) -> None:
        self._wait = wait
        self._status = status

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """Mapping.get without the KeyError it raises and catches for a missing key (Qsim asks
        every job for an `Exit_status`, which an SWF line does not have)."""
        if key == "wait":
            return self._wait
        if key == "status":
            return self._status
        return default

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(("wait", "status"))

    def __len__(self) -> int:
        return 2


def accept_row(
    parsed: tuple[int, ...] | str, first_line_of: dict[int, int], source: str, lineno: int,
    lenient: bool, skipped: list[str], id_name: str,
) -> TypeGuard[tuple[int, ...]]:
    """Whether a parsed line (a tuple starting with its job id, or the reason it is malformed)
    is a new job. A malformed or repeated line raises InputError with `source:line`, or on a
    lenient read is recorded in `skipped` and refused."""
    if isinstance(parsed, tuple):
        seen = first_line_of.setdefault(parsed[0], lineno)
        problem = None if seen == lineno else f"{id_name} {parsed[0]} repeats line {seen}"
    else:
        problem = parsed
    if problem is None:
        return True
    message = f"{source}:{lineno}: {problem}"
    if not lenient:
        raise InputError(message)
    skipped.append(message)
    return False


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, line) of a plain or gzip-compressed text file.

    Compression is recognised by the gzip magic bytes or a `.gz` suffix, so a compressed file
    renamed without its suffix still reads. Undecodable bytes become U+FFFD instead of a
    UnicodeDecodeError so that they surface as a field error with a line number. Open and
    decompression failures become InputError naming the file.
    """
    path = Path(path)
    try:
        with path.open("rb") as probe:
            compressed = probe.read(2) == _GZIP_MAGIC or path.suffix == ".gz"
        opener = gzip.open if compressed else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as stream:
            yield from enumerate(stream, 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a job log") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: damaged or truncated gzip data ({exc})") from None


@dataclass(frozen=True, slots=True)
class SwfHeader:
    """What an SWF file's `;` comments say about the log.

    `fields` maps each `Key:` to its value; repeated keys (`Queue:`, `Note:`) and continuation
    lines (comment lines without a key, such as a wrapped copyright notice) are joined to the
    value with newlines. `lines` keeps every comment verbatim, without the `;`, because the PWA
    asks that the header travel with any trimmed copy of a log.
    """

    fields: dict[str, str]
    lines: tuple[str, ...]
    unix_start_time: int | None
    max_nodes: int | None
    max_procs: int | None


class _HeaderParser:
    """Accumulates comment lines into an SwfHeader."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._fields: dict[str, str] = {}
        self._lines: list[str] = []
        self._where: dict[str, int] = {}
        self._last_key: str | None = None

    def add(self, lineno: int, line: str) -> None:
        text = line.strip()[1:].rstrip()
        self._lines.append(text)
        key, value = _split_header_key(text)
        if key is None:
            if self._last_key is not None and text.strip():
                self._fields[self._last_key] += "\n" + text.strip()
            return
        self._last_key = key
        self._where.setdefault(key, lineno)
        previous = self._fields.get(key)
        self._fields[key] = value if previous is None else previous + "\n" + value

    def build(self) -> SwfHeader:
        return SwfHeader(
            fields=self._fields,
            lines=tuple(self._lines),
            unix_start_time=self._leading_int("UnixStartTime"),
            max_nodes=self._leading_int("MaxNodes"),
            max_procs=self._leading_int("MaxProcs"),
        )

    def _leading_int(self, key: str) -> int | None:
        # Values carry remarks after the number ("MaxNodes: 338 (batch partition; 512 total)").
        value = self._fields.get(key)
        if value is None:
            return None
        token = value.split(maxsplit=1)[0] if value.strip() else ""
        try:
            return int(token)
        except ValueError:
            raise InputError(
                f"{self._source}:{self._where[key]}: header {key}: value {token!r} is not an"
                " integer"
            ) from None


def _split_header_key(text: str) -> tuple[str | None, str]:
    """("Key", "value") for a `Key: value` comment, else (None, text).

    PWA keys are capitalised words directly after the `;`. Requiring that (and a blank after
    the colon) keeps wrapped text such as "http://..." or "see: ..." from posing as keys.
    """
    stripped = text.lstrip()
    key, colon, value = stripped.partition(":")
    if not colon or not key.isalnum() or not key[0].isupper() or (value and not value[0].isspace()):
        return None, text
    return key, value.strip()


def read_swf_header(path: str | Path) -> SwfHeader:
    """Parse the `;` comment block at the top of an SWF file (stops at the first job line)."""
    header = _HeaderParser(str(path))
    for lineno, line in read_lines(path):
        stripped = line.lstrip()
        if stripped.startswith(";"):
            header.add(lineno, line)
        elif stripped:
            break
    return header.build()


def read_swf(
    path: str | Path,
    *,
    processors_per_node: int = 1,
    estimate: str = "requested",
    size: str = "requested",
    lenient: bool = False,
    start: float | None = None,
    end: float | None = None,
    arrival_scale: float = 1.0,
) -> TraceReadResult:
    """Read an SWF trace (plain or gzip) into jobs sorted by (submit time, job id).

    - nodes = ceil(processors / processors_per_node), processors chosen by `size` (see SIZES):
      by default the requested count (field 8) when known, else the allocated count (field 5).
    - requested_time follows `estimate` (see ESTIMATES). Jobs that ran past their requested time
      keep their real run time: the replay kills them at requested_time, as the machine did.
    - submit_time = UnixStartTime + field 2 when the header gives UnixStartTime (origin is then
      that value), else field 2 itself (origin 0).
    - `start`/`end` keep jobs with start <= submit_time < end (same clock as submit_time); jobs
      outside the window are dropped silently, not counted as skipped.
    - `arrival_scale` multiplies every job's gap to the first kept job's submit time (after the
      window), rounded to whole seconds: 0.5 squeezes the arrivals into half the time (twice
      the offered load), 2.0 spreads them out. Run and requested times are unchanged.
    - `skipped` lists "file:line: reason" for each job left out: unreplayable jobs always,
      malformed lines only when `lenient` (strict mode raises InputError on the first one).
    """
    if estimate not in ESTIMATES:
        raise InputError(f"estimate {estimate!r}: choose one of {', '.join(ESTIMATES)}")
    if size not in SIZES:
        raise InputError(f"size {size!r}: choose one of {', '.join(SIZES)}")
    if (
        isinstance(processors_per_node, bool)
        or not isinstance(processors_per_node, int)
        or (processors_per_node < 1)
    ):
        raise InputError(f"processors_per_node {processors_per_node!r}: must be an integer >= 1")
    # Checked before reading, so a bad option fails at once rather than after a large file.
    select_window([], start, end, arrival_scale)

    source = str(path)
    header = _HeaderParser(source)
    jobs: list[TraceJob] = []
    skipped: list[str] = []
    first_line_of: dict[int, int] = {}
    use_requested = estimate == "requested"
    intern = sys.intern
    # A date window drops the jobs outside it as they are read, so reading part of a large
    # trace takes memory for that part only. It needs the origin when the first job comes:
    # every SWF log gives UnixStartTime before its jobs; one giving it later is read again.
    windowed = start is not None or end is not None
    low = -math.inf if start is None else start
    high = math.inf if end is None else end
    origin_seen: int | None = None  # the origin as the header gave it before the first job
    size_by_request = size == "requested"

    for lineno, line in read_lines(path):
        parts = line.split()
        if not parts:
            continue
        if parts[0][0] == ";":
            header.add(lineno, line)
            continue
        parsed = _parse_job_line(parts)
        # A new job's line is accepted here; accept_row words (or raises) every other case.
        if type(parsed) is not tuple or first_line_of.setdefault(parsed[0], lineno) != lineno:
            accept_row(parsed, first_line_of, source, lineno, lenient, skipped, "job number")
            continue

        (
            number,
            submit,
            _wait,
            run,
            allocated,
            requested_procs,
            requested,
            _status,
            user,
            group,
            _exe,
            queue,
            _part,
            _prec,
            _think,
        ) = parsed
        if size_by_request:
            procs = requested_procs if requested_procs > 0 else allocated
        else:
            procs = allocated if allocated > 0 else requested_procs
        reason = None
        if submit < 0:
            reason = "submit time unknown (-1)"
        elif run <= 0:
            reason = f"run time {run}: the job never ran (cancelled or failed at start)"
        elif procs <= 0:
            reason = "size unknown: requested and allocated processors are both -1 or 0"
        if reason is not None:
            skipped.append(f"{source}:{lineno}: job {number}: {reason}")
            continue
        if windowed:
            if origin_seen is None:
                origin_seen = header.build().unix_start_time or 0
            if not low <= submit + origin_seen < high:
                continue
        # Positional, in TraceJob's field order: jobid, submit_time, run_time, requested_time,
        # nodes, user, project, queue, dependencies, extra (keywords cost a third more).
        jobs.append(TraceJob(
            number, submit, run, requested if use_requested and requested > 0 else run,
            -(-procs // processors_per_node),
            # Interned: a few hundred users, groups and queues over 100,000s of jobs.
            intern(parts[11]) if user >= 0 else "unknown",
            intern(parts[12]) if group >= 0 else "unknown",
            intern(parts[14]) if queue >= 0 else "default",
            (), RecordedRun(parts[2], intern(parts[10]))))

    info = header.build()
    origin = info.unix_start_time or 0
    if origin_seen is not None and origin != origin_seen:  # UnixStartTime after the jobs
        whole = read_swf(path, processors_per_node=processors_per_node, estimate=estimate,
                         size=size, lenient=lenient)
        whole.jobs = select_window(whole.jobs, start, end, arrival_scale)
        return whole
    if origin:
        for job in jobs:
            job.submit_time += origin
    jobs = select_window(jobs, start, end, arrival_scale)
    return TraceReadResult(jobs=jobs, skipped=skipped, origin=origin)


def _parse_job_line(parts: list[str]) -> tuple[int, ...] | str:
    """The integer fields of a valid SWF job line, or why the line is not valid SWF."""
    if len(parts) != 18:
        return f"expected 18 fields, found {len(parts)}"
    try:
        values = tuple(map(int, _integers(parts)))
        cpu, memory, requested_memory = map(float, _reals(parts))
    except ValueError:
        return _first_unparsable(parts)
    inf = math.inf  # written out, not a generator: this runs once per line of 300,000
    if min(values) < -1 or not (-1 <= cpu < inf and -1 <= memory < inf
                                and -1 <= requested_memory < inf):
        return _first_out_of_range(parts)
    if values[0] < 1:
        return _field(0, parts, "is not a job number (must be 1 or more)")
    if values[7] not in _STATUSES:
        return _field(10, parts, "is not an SWF status (-1 unknown, 0 to 5)")
    return values


def _field(index: int, parts: list[str], complaint: str) -> str:
    return f"field {index + 1} ({FIELD_NAMES[index]}): value {parts[index]!r} {complaint}"


def _first_unparsable(parts: list[str]) -> str:
    for index, token in enumerate(parts):
        if index in _REAL_FIELDS:
            try:
                float(token)
            except ValueError:
                return _field(index, parts, "is not a number")
        else:
            try:
                int(token)
            except ValueError:
                return _field(index, parts, "is not an integer")
    raise AssertionError("called for a line whose fields all parse")


def _first_out_of_range(parts: list[str]) -> str:
    for index, token in enumerate(parts):
        value = float(token)
        if not -1 <= value < math.inf:
            return _field(index, parts, "is out of range (SWF marks unknown values with -1)")
    raise AssertionError("called for a line whose fields are all in range")
