"""SWF and Intrepid-list readers: real traces from shared/traces and small hand-made files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from shared_paths import TRACES

from cobaltlite.errors import InputError
from cobaltlite.traces.intrepid_list import INTREPID_ORIGIN, read_intrepid_list
from cobaltlite.traces.model import TraceReadResult, select_window
from cobaltlite.traces.swf import FIELD_NAMES, read_swf, read_swf_header

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=f"no shared traces at {TRACES}")


def is_sorted(result: TraceReadResult) -> bool:
    keys = [(job.submit_time, job.jobid) for job in result.jobs]
    return keys == sorted(keys)


# ------------------------------------------------------------------------------ real traces


@pytest.fixture(scope="module")
def lublin() -> TraceReadResult:
    return read_swf(TRACES / "lublin_256.swf.gz")


@pytest.fixture(scope="module")
def sdsc_sp2() -> TraceReadResult:
    return read_swf(TRACES / "SDSC-SP2-1998-4.2-cln.swf.gz")


@pytest.fixture(scope="module")
def theta_2023() -> TraceReadResult:
    return read_swf(TRACES / "theta_2023.swf.gz")


@pytest.fixture(scope="module")
def intrepid_list() -> TraceReadResult:
    return read_intrepid_list(TRACES / "intrepid-2009-first3000.6col.txt.gz")


def test_lublin_reads_every_job_with_perfect_estimates(lublin: TraceReadResult) -> None:
    # Every requested time is -1 in this synthetic log, so the estimate falls back to run time.
    assert len(lublin.jobs) == 10_000
    assert lublin.skipped == []
    assert all(job.requested_time == job.run_time for job in lublin.jobs)
    assert max(job.nodes for job in lublin.jobs) == 256
    assert lublin.origin == 0  # no UnixStartTime: submit times stay relative
    assert is_sorted(lublin)
    first = lublin.jobs[0]
    assert (first.jobid, first.submit_time, first.run_time, first.nodes) == (1, 5094, 12072, 16)
    assert (first.user, first.project, first.queue) == ("unknown", "unknown", "0")


def test_sdsc_sp2_accounts_for_every_record_in_the_header(sdsc_sp2: TraceReadResult) -> None:
    header = read_swf_header(TRACES / "SDSC-SP2-1998-4.2-cln.swf.gz")
    assert int(header.fields["MaxRecords"]) == 59_715
    assert len(sdsc_sp2.jobs) + len(sdsc_sp2.skipped) == 59_715
    # The skipped jobs are the cancelled ones (run time 0 or -1), each with file:line.
    assert all("SDSC-SP2-1998-4.2-cln.swf.gz:" in s and "run time" in s for s in sdsc_sp2.skipped)
    assert sdsc_sp2.origin == header.unix_start_time == 893466664
    assert max(job.nodes for job in sdsc_sp2.jobs) <= header.max_nodes == 128
    assert is_sorted(sdsc_sp2)
    job11 = next(job for job in sdsc_sp2.jobs if job.jobid == 11)
    # Line: 11 566129 5 28826 1 27758 -1 1 28800 -1 5 153 75 18180 3 -1 -1 -1
    assert job11.submit_time == 893466664 + 566129
    assert (job11.run_time, job11.requested_time, job11.nodes) == (28826, 28800, 1)
    assert (job11.user, job11.project, job11.queue) == ("153", "75", "3")
    assert job11.extra == {"wait": "5", "status": "5"}


def test_theta_2023_is_sorted_by_submission_after_reading(theta_2023: TraceReadResult) -> None:
    assert len(theta_2023.jobs) == 8_401
    assert is_sorted(theta_2023)  # the file itself is ordered by completion
    # Jobs that overran their request keep the real run time: the replay kills them.
    assert any(job.run_time > job.requested_time for job in theta_2023.jobs)


def test_intrepid_list_matches_the_swf_lines_at_four_cores_a_node(
    intrepid_list: TraceReadResult,
) -> None:
    assert len(intrepid_list.jobs) == 3_000
    assert intrepid_list.origin == INTREPID_ORIGIN
    assert len(set(range(1, 3018)) - {job.jobid for job in intrepid_list.jobs}) == 17
    assert all(job.requested_time == job.run_time for job in intrepid_list.jobs)
    assert is_sorted(intrepid_list)
    # The list's nodes are the SWF's allocated cores / 4; Intrepid's requested-processor field
    # counts tasks (job 6: 64 requested, 256 cores allocated), hence size="allocated".
    swf = read_swf(
        TRACES / "ANL-Intrepid-2009-1.first10.swf.gz",
        processors_per_node=4,
        estimate="runtime",
        size="allocated",
    )
    assert swf.origin == INTREPID_ORIGIN
    assert len(swf.jobs) == 10
    listed = {job.jobid: job for job in intrepid_list.jobs}
    for job in swf.jobs:
        other = listed[job.jobid]
        assert (other.submit_time, other.run_time, other.nodes, other.requested_time) == (
            job.submit_time,
            job.run_time,
            job.nodes,
            job.requested_time,
        )
    assert [job.nodes for job in swf.jobs[:7]] == [512, 512, 512, 2048, 512, 64, 16384]
    by_request = read_swf(TRACES / "ANL-Intrepid-2009-1.first10.swf.gz", processors_per_node=4)
    assert by_request.jobs[5].nodes == 16
    assert by_request.jobs[0].requested_time == 10800


def test_swf_header_keeps_every_comment_and_parses_the_numbers() -> None:
    header = read_swf_header(TRACES / "CTC-SP2-1996-3.1-cln.swf.gz")
    assert header.unix_start_time == 835823160
    assert header.max_nodes == 338  # "338 (batch partition; 512 total)"
    assert header.max_procs == 338
    assert header.fields["MaxNodes"] == "338 (batch partition; 512 total)"
    assert header.fields["Queue"].splitlines() == ["1 DSI", "2 astro", "3 piofs", "4 informix"]
    # A wrapped line ("   http://...") continues the previous key instead of posing as one.
    assert header.fields["Information"].splitlines() == [
        "http://www.tc.cornell.edu/",
        "http://www.cs.huji.ac.il/labs/parallel/workload/",
    ]
    assert "http" not in header.fields
    assert header.lines[0] == " Version: 2.2"
    assert len(header.lines) == 29


@pytest.mark.slow
def test_sdsc_blue_full_read_converts_processors_to_nodes() -> None:
    result = read_swf(TRACES / "SDSC-BLUE-2000-4.2-cln.swf.gz", processors_per_node=8)
    assert len(result.jobs) + len(result.skipped) == 243_306
    assert 0 < max(job.nodes for job in result.jobs) <= 144
    assert is_sorted(result)


# ------------------------------------------------------------------------------ hand-made SWF

HEADER = "; UnixStartTime: 1000000\n; MaxNodes: 16\n"
#        job submit wait run alloc cpu mem req_p req_t req_m st uid gid exe q part prec think
GOOD = [
    "1 0 5 100 8 1.5 -1 8 200 -1 1 7 3 -1 2 -1 -1 -1",
    "2 10 0 50 4 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1",
    "3 20 0 70 -1 -1 -1 9 60 -1 0 8 3 -1 1 -1 -1 -1",
]


def write(tmp_path: Path, lines: list[str], name: str = "t.swf", header: str = HEADER) -> Path:
    path = tmp_path / name
    path.write_text(header + "\n".join(lines) + "\n")
    return path


def test_hand_made_file_fields_and_conversions(tmp_path: Path) -> None:
    result = read_swf(write(tmp_path, GOOD), processors_per_node=4)
    assert result.origin == 1_000_000
    one, two, three = result.jobs
    assert (one.jobid, one.submit_time, one.run_time) == (1, 1_000_000, 100)
    assert one.requested_time == 200
    assert one.nodes == 2  # requested 8 processors, 4 a node
    assert (one.user, one.project, one.queue) == ("7", "3", "2")
    assert two.nodes == 1 and two.requested_time == 50  # allocated 4; no request -> run time
    assert (two.user, two.project, two.queue) == ("unknown", "unknown", "default")
    assert three.nodes == 3  # ceil(9 / 4), requested processors beat the unknown allocation
    assert three.requested_time == 60 and three.run_time == 70  # overran: kept as is
    runtime = read_swf(write(tmp_path, GOOD), estimate="runtime")
    assert [job.requested_time for job in runtime.jobs] == [100, 50, 70]
    # size="allocated" prefers field 5 and falls back to field 8 when it is unknown.
    allocated = read_swf(write(tmp_path, GOOD), processors_per_node=4, size="allocated")
    assert [job.nodes for job in allocated.jobs] == [2, 1, 3]


def test_without_unix_start_time_submit_times_stay_relative(tmp_path: Path) -> None:
    result = read_swf(write(tmp_path, GOOD, header=""))
    assert result.origin == 0
    assert [job.submit_time for job in result.jobs] == [0, 10, 20]


def test_gzip_is_recognised_by_magic_bytes_and_crlf_lines_read(tmp_path: Path) -> None:
    data = (HEADER + "\r\n".join(GOOD) + "\r\n").encode()
    hidden = tmp_path / "no-suffix.swf"
    hidden.write_bytes(gzip.compress(data))
    suffixed = tmp_path / "t.swf.gz"
    suffixed.write_bytes(gzip.compress(data))
    assert len(read_swf(hidden).jobs) == len(read_swf(suffixed).jobs) == 3
    broken = tmp_path / "broken.swf.gz"
    broken.write_bytes(gzip.compress(data)[:40])
    with pytest.raises(InputError, match=r"broken\.swf\.gz: damaged or truncated gzip"):
        read_swf(broken)


def test_unreplayable_jobs_are_skipped_with_reasons_not_errors(tmp_path: Path) -> None:
    lines = [
        *GOOD,
        "4 30 0 0 8 -1 -1 8 100 -1 5 1 1 -1 1 -1 -1 -1",  # cancelled: ran 0 s
        "5 40 0 -1 8 -1 -1 8 100 -1 5 1 1 -1 1 -1 -1 -1",  # run time unknown
        "6 50 0 60 -1 -1 -1 -1 100 -1 1 1 1 -1 1 -1 -1 -1",  # size unknown
        "7 -1 0 60 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1",  # submit unknown
    ]
    result = read_swf(write(tmp_path, lines))
    assert [job.jobid for job in result.jobs] == [1, 2, 3]
    assert len(result.skipped) == 4
    assert result.skipped[0].startswith(f"{tmp_path / 't.swf'}:6: job 4: run time 0")
    assert "size unknown" in result.skipped[2]
    assert "submit time unknown" in result.skipped[3]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("4 30 0 60 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1", "expected 18 fields, found 17"),
        (
            "4 30 0 abc 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1",
            "field 4 (run time): value 'abc' is not an integer",
        ),
        (
            "4 30 0 60.5 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1",
            "field 4 (run time): value '60.5' is not an integer",
        ),
        (
            "4 30 0 60 8 x -1 8 100 -1 1 1 1 -1 1 -1 -1 -1",
            "field 6 (average cpu time): value 'x' is not a number",
        ),
        (
            "4 30 0 60 8 -1 -1 8 -7 -1 1 1 1 -1 1 -1 -1 -1",
            "field 9 (requested time): value '-7' is out of range",
        ),
        (
            "4 30 0 60 8 -1 nan 8 100 -1 1 1 1 -1 1 -1 -1 -1",
            "field 7 (used memory): value 'nan' is out of range",
        ),
        (
            "4 30 0 60 8 -1 -1 8 100 -1 9 1 1 -1 1 -1 -1 -1",
            "field 11 (status): value '9' is not an SWF status",
        ),
        (
            "0 30 0 60 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1",
            "field 1 (job number): value '0' is not a job number",
        ),
        ("2 30 0 60 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1", "job number 2 repeats line 4"),
    ],
)
def test_malformed_lines_fail_strict_and_are_counted_lenient(
    tmp_path: Path, bad_line: str, message: str
) -> None:
    path = write(tmp_path, [*GOOD, bad_line], name="bad.swf")
    with pytest.raises(InputError) as caught:
        read_swf(path)
    assert str(caught.value).startswith(f"{path}:6: {message}")
    lenient = read_swf(path, lenient=True)
    assert [job.jobid for job in lenient.jobs] == [1, 2, 3]
    assert len(lenient.skipped) == 1 and lenient.skipped[0].startswith(f"{path}:6: {message}")


def test_field_names_follow_the_swf_definition() -> None:
    assert len(FIELD_NAMES) == 18
    assert FIELD_NAMES[8] == "requested time" and FIELD_NAMES[14] == "queue"


def test_bad_header_number_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, header="; UnixStartTime: soon\n")
    with pytest.raises(InputError, match=r"t\.swf:1: header UnixStartTime: value 'soon'"):
        read_swf(path)


def test_date_window_is_inclusive_start_exclusive_end(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    window = read_swf(path, start=1_000_010, end=1_000_020)
    assert [job.jobid for job in window.jobs] == [2]
    assert [j.jobid for j in read_swf(path, start=1_000_010).jobs] == [2, 3]
    assert [j.jobid for j in read_swf(path, end=1_000_010).jobs] == [1]
    assert window.skipped == []  # the window is a choice, not a data problem


def test_arrival_scale_stretches_gaps_from_the_first_kept_job(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    assert [j.submit_time for j in read_swf(path, arrival_scale=0.5).jobs] == [
        1_000_000,
        1_000_005,
        1_000_010,
    ]
    assert [j.submit_time for j in read_swf(path, arrival_scale=3).jobs] == [
        1_000_000,
        1_000_030,
        1_000_060,
    ]
    windowed = read_swf(path, start=1_000_010, arrival_scale=0.5)
    assert [j.submit_time for j in windowed.jobs] == [1_000_010, 1_000_015]
    # Run and requested times do not scale.
    assert [j.run_time for j in windowed.jobs] == [50, 70]


def test_rounding_ties_after_scaling_keep_job_id_order(tmp_path: Path) -> None:
    lines = [
        "9 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1",
        "5 1 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1",
    ]
    result = read_swf(write(tmp_path, lines), arrival_scale=0.1)
    assert [(j.jobid, j.submit_time) for j in result.jobs] == [(5, 1_000_000), (9, 1_000_000)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"estimate": "guess"}, "estimate 'guess'"),
        ({"processors_per_node": 0}, "processors_per_node 0"),
        ({"size": "used"}, "size 'used'"),
        ({"arrival_scale": 0}, "arrival_scale 0"),
        ({"arrival_scale": float("nan")}, "arrival_scale nan"),
        ({"start": 10, "end": 10}, "start 10 is not before end 10"),
    ],
)
def test_bad_options_are_input_errors(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_swf(write(tmp_path, GOOD), **options)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_swf(tmp_path / "absent.swf")


# ------------------------------------------------------------------------------ Intrepid list


def test_intrepid_list_small_file_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "list.txt"
    path.write_text(
        "Job_name Submit Runtime Nodes Comment Perc\n"
        "1 0 100 512 1 90\n"
        "2 5 0 512 1 90\n"
        "3 2 50 1024\n"
    )
    result = read_intrepid_list(path)
    assert [(j.jobid, j.submit_time - INTREPID_ORIGIN) for j in result.jobs] == [(1, 0), (3, 2)]
    assert result.skipped == [f"{path}:3: job 2: run time 0, nodes 512: nothing to replay"]
    with pytest.raises(InputError, match="only 'runtime'"):
        read_intrepid_list(path, estimate="requested")

    path.write_text("Job_name Submit Runtime Nodes Comment Perc\n1 0 100 5x2 1 90\n1 0 1\n")
    with pytest.raises(InputError, match=r"list.txt:2: column 4 \(nodes\): value '5x2'"):
        read_intrepid_list(path)
    lenient = read_intrepid_list(path, lenient=True)
    assert lenient.jobs == [] and len(lenient.skipped) == 2
    assert "expected at least 4 columns" in lenient.skipped[1]

    path.write_text("1 0 100 512 1 90\n")
    with pytest.raises(InputError, match="expected the header line"):
        read_intrepid_list(path)


@pytest.mark.parametrize("header", [HEADER, "; Computer: late start\n"], ids=["first", "late"])
@pytest.mark.parametrize(("start", "end", "scale"), [
    (1_000_010, 1_000_020, 1.0), (None, 1_000_015, 2.0), (1_000_005, None, 0.5), (15, 25, 1.0)])
def test_a_window_read_as_it_goes_is_the_window_of_the_whole_read(
        tmp_path: Path, header: str, start: int | None, end: int | None, scale: float) -> None:
    """read_swf drops the jobs outside a date window while reading; the origin it needs may
    come only after the jobs (the "late" file's UnixStartTime): same jobs either way."""
    lines = [*GOOD, "4 30 0 0 4 -1 -1 4 60 -1 5 8 3 -1 1 -1 -1 -1"]  # never ran: skipped
    if header != HEADER:
        lines.append("; UnixStartTime: 1000000")
    path = write(tmp_path, lines, header=header)
    whole = read_swf(path)
    windowed = read_swf(path, start=start, end=end, arrival_scale=scale)
    assert windowed.jobs == select_window(whole.jobs, start, end, scale)
    assert (windowed.skipped, windowed.origin) == (whole.skipped, whole.origin)
