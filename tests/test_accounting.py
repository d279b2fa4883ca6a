"""Cobalt's accounting log: exact record text, the reader, and the write-then-read round trip."""

from __future__ import annotations

import gzip
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.accounting import (
    AccountingLog,
    format_record,
    read_accounting_log,
    record_stamp,
)
from cobaltlite.errors import InputError
from cobaltlite.jobs.records import JobFacts, end_fields, queued_fields, start_fields
from cobaltlite.timefmt import format_hms
from cobaltlite.traces.model import TraceJob

# 2009-03-16 09:00:00 UTC
T0 = 1237194000

# ------------------------------------------------------------------------------ writing


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "00:00:00"),
        (59, "00:00:59"),
        (3600, "01:00:00"),
        (5025, "01:23:45"),
        (359_999, "99:59:59"),
        (360_000, "100:00:00"),
        (59.6, "00:01:00"),
    ],
)
def test_format_hms(seconds: float, text: str) -> None:
    assert format_hms(seconds) == text


def test_format_hms_rejects_negative_durations() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_hms(-1)


@given(st.one_of(st.integers(0, 10**9), st.floats(0, 10**9, allow_nan=False)))
def test_format_hms_is_hours_minutes_seconds_of_the_rounded_duration(seconds: float) -> None:
    """Its digits come from lookup tables (a replay formats one per record): they must say what
    the plain arithmetic says."""
    whole = round(seconds)
    assert format_hms(seconds) == f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"


@given(st.one_of(st.integers(-10**10, 10**10),
                 st.floats(-10**10, 10**10, allow_nan=False).map(lambda t: round(t, 3))))
def test_record_stamp_is_the_utc_date_and_time_truncated_to_the_second(when: float) -> None:
    """Whole seconds go through cached dates and lookup tables, fractions through datetime:
    both must be what datetime writes."""
    assert record_stamp(when) == datetime.fromtimestamp(when, UTC).strftime("%m/%d/%Y %H:%M:%S")


def test_golden_qsim_records() -> None:
    common = {
        "queue": "prod",
        "user": "alice",
        "account": "climate",
        "qtime": T0,
        "Resource_List.nodect": 512,
        "Resource_List.walltime": format_hms(3600),
    }
    assert format_record(T0, "Q", 123, common) == (
        "03/16/2009 09:00:00;Q;123;Resource_List.nodect=512 Resource_List.walltime=01:00:00"
        " account=climate qtime=1237194000 queue=prod user=alice"
    )
    started = {**common, "start": T0 + 600, "exec_host": "ANL-R00-M0-512"}
    assert format_record(T0 + 600.9, "S", 123, started) == (
        "03/16/2009 09:10:00;S;123;Resource_List.nodect=512 Resource_List.walltime=01:00:00"
        " account=climate exec_host=ANL-R00-M0-512 qtime=1237194000 queue=prod start=1237194600"
        " user=alice"
    )
    ended = {**started, "end": T0 + 3000, "runtime": 2400, "Exit_status": 0}
    assert format_record(T0 + 3000, "E", 123, ended) == (
        "03/16/2009 09:50:00;E;123;Exit_status=0 Resource_List.nodect=512"
        " Resource_List.walltime=01:00:00 account=climate end=1237197000"
        " exec_host=ANL-R00-M0-512 qtime=1237194000 queue=prod runtime=2400 start=1237194600"
        " user=alice"
    )


def test_golden_nesting_sequences_and_quoting() -> None:
    fields = {
        "Resource_List": {"nodect": 64, "walltime": "00:30:00"},
        "exec_host": ["R00-M0-N00", "R00-M0-N01"],
        "args": 'a "b" c=d,e',
        "path": "C:\\dir",
        "empty": "",
        "note": "two\nlines",
    }
    assert format_record(0, "E", 7, fields) == (
        "01/01/1970 00:00:00;E;7;Resource_List.nodect=64 Resource_List.walltime=00:30:00"
        ' args="a \\"b\\" c=d,e" empty= exec_host=R00-M0-N00:R00-M0-N01'
        ' note="two\\nlines" path=C:\\dir'
    )


def test_golden_delete_and_abort_records() -> None:
    assert format_record(T0, "D", 9, {"requester": "bob"}) == (
        "03/16/2009 09:00:00;D;9;requester=bob"
    )
    assert format_record(T0, "A", 9, {}) == "03/16/2009 09:00:00;A;9;"


@pytest.mark.parametrize(
    ("kind", "jobid", "fields"),
    [
        ("", 1, {}),
        ("Q;", 1, {}),
        ("Q", "1 2", {}),
        ("Q", 1, {"a b": 1}),
        ("Q", 1, {"a=": 1}),
        ("Q", 1, {"a.b": 1, "a": {"b": 2}}),
    ],
)
def test_format_record_rejects_what_would_break_the_line(
    kind: str, jobid: object, fields: dict
) -> None:
    with pytest.raises(ValueError):
        format_record(T0, kind, jobid, fields)


def test_accounting_log_to_path_is_buffered_until_close(tmp_path: Path) -> None:
    path = tmp_path / "acct.log"
    with AccountingLog(path) as log:
        log.write(T0, "Q", 1, {"queue": "q"})
        log.flush()
        assert path.read_text() == "03/16/2009 09:00:00;Q;1;queue=q\n"
        log.write(T0, "D", 1, {})
    assert path.read_text().splitlines() == [
        "03/16/2009 09:00:00;Q;1;queue=q",
        "03/16/2009 09:00:00;D;1;",
    ]
    with AccountingLog(path, append=True) as log:
        log.write(T0, "Q", 2, {})
    assert len(path.read_text().splitlines()) == 3
    with AccountingLog(path) as log:  # truncates by default
        pass
    assert path.read_text() == ""


def test_accounting_log_line_buffered_is_visible_at_once(tmp_path: Path) -> None:
    path = tmp_path / "live.log"
    log = AccountingLog(path, line_buffered=True)
    log.write(T0, "Q", 1, {})
    assert path.read_text() == "03/16/2009 09:00:00;Q;1;\n"
    log.close()


def test_accounting_log_leaves_a_callers_stream_open() -> None:
    stream = io.StringIO()
    with AccountingLog(stream) as log:
        log.write(T0, "Q", 5, {"user": "x y"})
    assert stream.getvalue() == '03/16/2009 09:00:00;Q;5;user="x y"\n'
    assert not stream.closed


def test_unwritable_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write the accounting log"):
        AccountingLog(tmp_path / "missing-dir" / "acct.log")


# ------------------------------------------------------------------------------ reading


def write_log(tmp_path: Path, text: str, name: str = "acct.log") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


COBALT_EXAMPLE = (
    "03/16/2009 09:00:00;Q;123;queue=prod Resource_List.nodect=512"
    " Resource_List.walltime=01:00:00 user=alice\n"
    "03/16/2009 11:00:00;E;123;Resource_List.nodect=512 Resource_List.walltime=01:00:00"
    " account=proj exec_host=ANL-R00-M0-512 start=1237215600 end=1237219200 queue=prod"
    " user=alice\n"
)


def test_cobalt_reference_example(tmp_path: Path) -> None:
    path = write_log(tmp_path, COBALT_EXAMPLE)
    result = read_accounting_log(path)
    assert result.skipped == [] and result.origin == 0
    assert result.jobs == [
        TraceJob(
            jobid=123,
            submit_time=T0,
            run_time=3600,
            requested_time=3600,
            nodes=512,
            user="alice",
            project="proj",
            queue="prod",
            extra={"exec_host": "ANL-R00-M0-512"},
        )
    ]
    # Cobalt stamped records in local time: read in Chicago the Q record is 14:00 UTC, an hour
    # before the epoch start= value, which is the wait the example describes.
    chicago = read_accounting_log(path, timezone="America/Chicago").jobs[0]
    assert chicago.submit_time == 1237215600 - 3600


def test_cobalt_alternative_line_form(tmp_path: Path) -> None:
    path = write_log(
        tmp_path,
        "jobid=7;qtime=2009-03-16 09:00:00;start=2009-03-16 09:30:00;end=2009-03-16 10:00:00;"
        "Resource_List.nodect=1024;Resource_List.walltime=7200;user=carol;account=p2\n",
    )
    job = read_accounting_log(path).jobs[0]
    assert (job.jobid, job.submit_time, job.run_time, job.requested_time, job.nodes) == (
        7,
        T0,
        1800,
        7200,
        1024,
    )
    assert (job.user, job.project, job.queue) == ("carol", "p2", "default")


def test_merge_rules_and_field_sources(tmp_path: Path) -> None:
    path = write_log(
        tmp_path,
        # Within a line the first key wins; later lines override earlier ones.
        "03/16/2009 09:00:00;Q;1;queue=a queue=b Resource_List.nodect=8 user=u1\n"
        "03/16/2009 09:05:00;QA;1;queue=c\n"
        "03/16/2009 10:00:00;E;1;resources_used.walltime=00:10:00 user=u2\n"
        # qtime beats the Q timestamp; runtime= beats end - start; no walltime -> run time.
        "03/16/2009 09:00:00;Q;2;qtime=1237190000 Resource_List.nodect=4\n"
        "03/16/2009 10:00:00;E;2;runtime=50 start=1237194000 end=1237194100\n"
        # No Q record at all: ctime is the submit time.
        "03/16/2009 10:00:00;E;3;ctime=1237100000 Resource_List.nodect=2 runtime=5\n",
    )
    one, two, three = sorted(read_accounting_log(path).jobs, key=lambda j: j.jobid)
    assert (one.queue, one.user, one.run_time, one.requested_time) == ("c", "u2", 600, 600)
    assert (two.submit_time, two.run_time) == (1237190000, 50)
    assert three.submit_time == 1237100000
    assert read_accounting_log(path).jobs[0].jobid == 3  # sorted by submit time


def test_estimate_runtime_ignores_the_wall_time(tmp_path: Path) -> None:
    path = write_log(tmp_path, COBALT_EXAMPLE.replace("walltime=01:00:00", "walltime=02:00:00"))
    assert read_accounting_log(path).jobs[0].requested_time == 7200
    assert read_accounting_log(path, estimate="runtime").jobs[0].requested_time == 3600
    with pytest.raises(InputError, match="estimate 'best'"):
        read_accounting_log(path, estimate="best")
    with pytest.raises(InputError, match="timezone 'Mars/Olympus'"):
        read_accounting_log(path, timezone="Mars/Olympus")


def test_incomplete_jobs_are_skipped_with_reasons(tmp_path: Path) -> None:
    path = write_log(
        tmp_path,
        "03/16/2009 09:00:00;Q;1;Resource_List.nodect=8\n"
        "03/16/2009 09:01:00;S;1;start=1237194060\n"  # started, never ended
        "03/16/2009 09:00:00;Q;2;Resource_List.nodect=8\n"
        "03/16/2009 09:02:00;D;2;requester=bob\n"  # deleted while queued
        "03/16/2009 09:00:00;E;3;Resource_List.nodect=8 runtime=10\n"  # no submit
        "03/16/2009 09:00:00;Q;4;user=x\n"
        "03/16/2009 09:10:00;E;4;runtime=10\n"  # no size
        "03/16/2009 09:00:00;Q;5;Resource_List.nodect=8\n"
        "03/16/2009 09:00:00;E;5;start=1237194000 end=1237193990\n"  # ends before it starts
        "03/16/2009 09:00:00;B;resv-1;name=maint\n"  # reservations are not jobs
        "03/16/2009 09:00:00;Q;6;Resource_List.nodect=8 Resource_List.walltime=00:01:00\n"
        "03/16/2009 09:01:00;A;6;reason=time_limit\n"
        "03/16/2009 09:01:00;E;6;runtime=60 Exit_status=-1\n",
    )
    result = read_accounting_log(path)
    assert [job.jobid for job in result.jobs] == [6]
    assert result.jobs[0].extra == {"Exit_status": "-1"}
    reasons = dict(line.split(": ", 1) for line in result.skipped)
    assert reasons == {
        f"{path}:1": "job 1: no end: neither runtime= nor start= and end= (the job never ended"
        " in this log)",
        f"{path}:3": "job 2: deleted before it ran (D record, no end)",
        f"{path}:5": "job 3: no Q record, qtime= or ctime=: submit time unknown",
        f"{path}:6": "job 4: no Resource_List.nodect: size unknown",
        f"{path}:8": "job 5: run time -10 s on 8 nodes: nothing to replay",
    }


def test_a_job_that_ended_within_a_second_is_replayed(tmp_path: Path) -> None:
    # Live logs hold whole seconds, so a quick job logs runtime=0; it did run.
    path = write_log(
        tmp_path,
        "03/16/2009 09:00:00;Q;1;Resource_List.nodect=2 Resource_List.walltime=00:01:00\n"
        "03/16/2009 09:00:00;E;1;runtime=0 Exit_status=0\n",
    )
    (job,) = read_accounting_log(path).jobs
    assert (job.jobid, job.run_time, job.requested_time) == (1, 0, 60)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("03/16/2009 09:00;Q;9;user=x", "timestamp '03/16/2009 09:00' is not MM/DD/YYYY HH:MM:SS"),
        ("02/30/2009 09:00:00;Q;9;user=x", "timestamp '02/30/2009 09:00:00' is not a valid date"),
        ("03/16/2009 09:00:00;Q", "expected 'MM/DD/YYYY HH:MM:SS;<type>;<id>;key=value ...'"),
        ("03/16/2009 09:00:00;Q;x9;user=x", "job id 'x9' is not an integer"),
        ("03/16/2009 09:00:00;Q;9;user=x oops", "field 'oops' is not key=value"),
        ("03/16/2009 09:00:00;Q;9;=x", "field '=x' is not key=value"),
        ('03/16/2009 09:00:00;Q;9;user="x', "field 'user': unterminated quoted value"),
        (
            "03/16/2009 09:00:00;Q;9;Resource_List.nodect=big",
            "field Resource_List.nodect: value 'big' is not an integer",
        ),
        ("03/16/2009 09:00:00;E;9;start=soon", "field start: value 'soon' is not a number"),
        (
            "03/16/2009 09:00:00;Q;9;Resource_List.walltime=01:75:00",
            "field Resource_List.walltime: value '01:75:00' is not a duration",
        ),
        ("user=x;queue=y", "neither a record"),
        ("garbage here", "field 'garbage here' is not key=value"),
    ],
)
def test_malformed_lines_fail_strict_and_are_counted_lenient(
    tmp_path: Path, line: str, message: str
) -> None:
    path = write_log(tmp_path, COBALT_EXAMPLE + line + "\n")
    with pytest.raises(InputError) as caught:
        read_accounting_log(path)
    assert str(caught.value).startswith(f"{path}:3: {message}")
    lenient = read_accounting_log(path, lenient=True)
    assert [job.jobid for job in lenient.jobs] == [123]
    assert len(lenient.skipped) == 1 and lenient.skipped[0].startswith(f"{path}:3: {message}")


def test_reads_gzip_logs(tmp_path: Path) -> None:
    path = tmp_path / "acct.log.gz"
    path.write_bytes(gzip.compress(COBALT_EXAMPLE.encode()))
    assert [job.jobid for job in read_accounting_log(path).jobs] == [123]


# ------------------------------------------------------------------------------ round trip


def write_like_qsim(log: AccountingLog, job: TraceJob, start: int) -> None:
    """The Q, S and E records Qsim's job log writes for one job."""
    common = {
        "queue": job.queue,
        "user": job.user,
        "account": job.project,
        "qtime": job.submit_time,
        "Resource_List.nodect": job.nodes,
        "Resource_List.walltime": format_hms(job.requested_time),
    }
    log.write(job.submit_time, "Q", job.jobid, common)
    log.write(start, "S", job.jobid, {**common, "start": start, "exec_host": "R00"})
    end = start + job.run_time
    log.write(
        end,
        "E",
        job.jobid,
        {
            **common,
            "start": start,
            "end": end,
            "exec_host": "R00",
            "runtime": job.run_time,
            "Exit_status": 0,
        },
    )


def strip_extra(jobs: list[TraceJob]) -> list[TraceJob]:
    for job in jobs:
        job.extra = {}
    return jobs


def test_round_trip_of_a_small_workload(tmp_path: Path) -> None:
    jobs = [
        TraceJob(1, T0, 3600, 7200, 512, "alice", "climate", "prod"),
        TraceJob(2, T0, 60, 600, 64, "bob smith", "p,q", "debug"),
        TraceJob(3, T0 + 5, 86_400 * 3, 86_400 * 5, 40_960, 'o"neil', "a=b", "prod-capability"),
    ]
    path = tmp_path / "qsim.log"
    with AccountingLog(path) as log:
        for job in jobs:
            write_like_qsim(log, job, start=job.submit_time + 100)
    assert strip_extra(read_accounting_log(path).jobs) == jobs


names = st.text(min_size=0, max_size=12)
trace_jobs = st.builds(
    TraceJob,
    jobid=st.integers(1, 10**9),
    submit_time=st.integers(0, 2**32),
    run_time=st.integers(1, 10**7),
    requested_time=st.integers(1, 10**7),
    nodes=st.integers(1, 10**6),
    user=names,
    project=names,
    queue=names,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(trace_jobs, max_size=8, unique_by=lambda job: job.jobid), st.integers(0, 10**6))
def test_round_trip_property(
    tmp_path_factory: pytest.TempPathFactory, jobs: list[TraceJob], wait: int
) -> None:
    path = tmp_path_factory.mktemp("rt") / "qsim.log"
    with AccountingLog(path) as log:
        for job in jobs:
            write_like_qsim(log, job, start=job.submit_time + wait)
    expected = sorted(jobs, key=lambda job: (job.submit_time, job.jobid))
    result = read_accounting_log(path)
    assert result.skipped == []
    assert strip_extra(result.jobs) == expected


def test_the_queue_managers_records_read_back_as_the_job_they_describe(tmp_path: Path) -> None:
    """Q, S and E records with every field of reference §2.9, as the live queue manager and
    Qsim write them (cobaltlite.jobs.records), read back as the job."""
    facts = JobFacts(jobid=42, user="alice", queue="short", project="climate", nodes=16,
                     walltime=3600, submittime=T0, jobname="run one", group="users", procs=64,
                     mode="script", cwd="/home/alice", command="/home/alice/run.sh",
                     args=["-n", "16"], dependencies=[40, 41], starttime=T0 + 600,
                     location="R00-M0")
    path = tmp_path / "records.log"
    with AccountingLog(path) as log:
        log.write(T0, "Q", 42, queued_fields(facts))
        log.write(T0 + 600, "S", 42, start_fields(facts, T0 + 600))
        log.write(T0 + 2400, "E", 42, end_fields(facts, T0 + 2400, 0))
    text = path.read_text()
    for field in ("jobname=\"run one\"", "cwd=/home/alice", "exe=/home/alice/run.sh",
                  "args=\"-n 16\"", "mode=script", "ctime=", "etime=", "group=users",
                  "Resource_List.ncpus=64", "resources_used.walltime=00:30:00", "Exit_status=0",
                  "dependencies=40:41"):
        assert field in text, field
    job, = read_accounting_log(path).jobs
    assert (job.jobid, job.submit_time, job.run_time, job.requested_time, job.nodes) == (
        42, T0, 1800, 3600, 16)
    assert (job.user, job.project, job.queue, job.dependencies) == (
        "alice", "climate", "short", (40, 41))
    assert job.extra == {"exec_host": "R00-M0", "Exit_status": "0"}


def test_a_malformed_dependency_list_skips_the_job_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.log"
    path.write_text("03/16/2009 09:00:00;E;7;qtime=1237194000 Resource_List.nodect=1 "
                    "runtime=10 dependencies=4:x\n")
    result = read_accounting_log(path)
    assert result.jobs == []
    assert result.skipped == [f"{path}:1: job 7: dependencies '4:x': not job ids separated "
                              "by ':'"]
