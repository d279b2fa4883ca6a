"""Reader for the reduced Intrepid job list (`intrepid-2009-first3000.6col.txt.gz`).

The file is the first 3,000 jobs of ALCF Intrepid's 2009 log as one header line
`Job_name Submit Runtime Nodes Comment Perc` and six whitespace-separated columns a line: job id,
submit time in seconds from the first job, run time in seconds, nodes allocated. The last two
columns were added by a later author and are not data, so they are ignored (and may be absent).
The list has no requested time, user, project or queue.
"""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path

from cobaltlite.errors import InputError
from cobaltlite.traces.model import TraceJob, TraceReadResult
from cobaltlite.traces.swf import accept_row, read_lines

INTREPID_ORIGIN = 1231135224
"""UnixStartTime of Intrepid's 2009 SWF log (2009-01-05 06:00:24 UTC); submits count from it."""

HEADER = ("Job_name", "Submit", "Runtime", "Nodes")
COLUMN_NAMES = ("job id", "submit time", "run time", "nodes")


def read_intrepid_list(
    path: str | Path, *, lenient: bool = False, estimate: str = "runtime"
) -> TraceReadResult:
    """Read the Intrepid reduced list into jobs sorted by (submit time, job id).

    Estimate model: the list records no requested wall time, so requested_time is the run time
    (perfect estimates, `estimate="runtime"`, the only model the data allows). submit_time is
    INTREPID_ORIGIN + column 2 and `origin` is INTREPID_ORIGIN. A malformed line (fewer than four
    columns, a non-integer or negative value) is an InputError naming file, line and column, or
    is skipped and counted with `lenient`; jobs with no run time or no nodes are always skipped
    and counted.
    """
    if estimate != "runtime":
        raise InputError(
            f"estimate {estimate!r}: the Intrepid list has no requested times, so only"
            " 'runtime' (requested time = run time) is possible"
        )
    source = str(path)
    jobs: list[TraceJob] = []
    skipped: list[str] = []
    first_line_of: dict[int, int] = {}
    header_seen = False

    for lineno, line in read_lines(path):
        parts = line.split()
        if not parts:
            continue
        if not header_seen:
            if tuple(parts[:4]) != HEADER:
                raise InputError(
                    f"{source}:{lineno}: expected the header line '{' '.join(HEADER)} ...',"
                    f" found {line.strip()[:60]!r}: is this the Intrepid reduced list?"
                )
            header_seen = True
            continue
        parsed = _parse_row(parts)
        if not accept_row(parsed, first_line_of, source, lineno, lenient, skipped, "job id"):
            continue
        jobid, submit, run, nodes = parsed
        if run <= 0 or nodes <= 0:
            skipped.append(
                f"{source}:{lineno}: job {jobid}: run time {run}, nodes {nodes}: nothing to replay"
            )
            continue
        jobs.append(
            TraceJob(
                jobid=jobid,
                submit_time=INTREPID_ORIGIN + submit,
                run_time=run,
                requested_time=run,
                nodes=nodes,
            )
        )

    jobs.sort(key=attrgetter("submit_time", "jobid"))
    return TraceReadResult(jobs=jobs, skipped=skipped, origin=INTREPID_ORIGIN)


def _parse_row(parts: list[str]) -> tuple[int, int, int, int] | str:
    """(job id, submit, run time, nodes) of a data line, or why the line is malformed."""
    if len(parts) < 4:
        return f"expected at least 4 columns ({', '.join(COLUMN_NAMES)}), found {len(parts)}"
    values = []
    for index, token in enumerate(parts[:4]):
        try:
            value = int(token)
        except ValueError:
            return f"column {index + 1} ({COLUMN_NAMES[index]}): value {token!r} is not an integer"
        if value < 0:
            return f"column {index + 1} ({COLUMN_NAMES[index]}): value {token!r} is negative"
        values.append(value)
    jobid, submit, run, nodes = values
    if jobid < 1:
        return f"column 1 (job id): value {parts[0]!r} is not a job id (must be 1 or more)"
    return jobid, submit, run, nodes
