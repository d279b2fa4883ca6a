"""qsub, qstat and qdel without a server: parsing, validation, formatting, exit codes.

The queue manager is replaced by `FakeQueueManager`, which answers like the user API does;
end-to-end runs against live daemons are tested elsewhere.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import Pyro5.errors
import pytest

from cobaltlite.commands import common, qdel, qstat, qsub
from cobaltlite.commands.common import CommandError, format_table, parse_time

NOW = 1_700_000_000.0


class FakeQueueManager:
    """Answers like cobaltlite.queue_manager.api.UserAPI, from fixed rows."""

    def __init__(self, jobs: list[dict[str, Any]] | None = None,
                 queues: list[dict[str, Any]] | None = None) -> None:
        self.job_rows = jobs or []
        self.queue_rows = queues if queues is not None else [queue_row("default")]
        self.submitted: list[dict[str, Any]] = []
        self.deleted: list[int] = []

    def submit(self, spec: dict[str, Any]) -> int:
        self.submitted.append(spec)
        return 41 + len(self.submitted)

    def jobs(self, jobids: list[int] | None = None,
             fields: list[str] | None = None) -> list[dict[str, Any]]:
        if jobids is None:
            return [j for j in self.job_rows if j["state"] != "done"]
        return [j for j in self.job_rows if j["jobid"] in jobids]

    def delete(self, jobids: list[int]) -> list[dict[str, Any]]:
        self.deleted.extend(jobids)
        return [{"jobid": j, "result": "deleted", "user": "alice"} for j in jobids]

    def queues(self) -> list[dict[str, Any]]:
        return self.queue_rows

    def limits(self) -> dict[str, Any]:
        return {"machine": "flat:4", "machine_nodes": 4, "min_block_size": 1, "max_job_nodes": 4}


def job_row(jobid: int, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "jobid": jobid, "jobname": "N/A", "user": "alice", "queue": "default", "state": "queued",
        "display_state": "queued", "short_state": "Q", "nodes": 1, "walltime": 600, "procs": 1,
        "mode": "smp", "project": "N/A", "command": "/bin/true", "args": [], "cwd": "/home/a",
        "env": {}, "umask": 0o22, "outputpath": f"/home/a/{jobid}.output",
        "errorpath": f"/home/a/{jobid}.error", "cobaltlog": f"/home/a/{jobid}.cobaltlog",
        "submittime": NOW - 100, "starttime": None, "endtime": None, "location": None,
        "exit_status": None, "end_reason": None, "score": 0.0, "user_hold": False,
        "admin_hold": False, "dependencies": [], "user_list": ["alice"], "attrs": {},
        "dep_hold": False, "dep_frac": None, "preemptable": False, "inputfile": None,
        "geometry": "", "notify": "",
    }
    row.update(fields)
    return row


def queue_row(name: str, state: str = "running", **restrictions: Any) -> dict[str, Any]:
    unset = dict.fromkeys(("maxtime", "mintime", "users", "groups", "maxqueued", "maxnodehours",
                           "maxrunning", "maxtotaljobs", "maxusernodes", "totalnodes"))
    return {"name": name, "state": state, "policy": "default", "priority": 0,
            **unset, **restrictions}


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeQueueManager]:
    """Make every command talk to one FakeQueueManager instead of the user socket."""
    fake = FakeQueueManager()

    @contextmanager
    def connect() -> Iterator[FakeQueueManager]:
        yield fake

    for module in (qsub, qstat, qdel):
        monkeypatch.setattr(module, "connect_queue_manager", connect)
    yield fake


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a command tries to reach the queue manager."""

    def connect() -> None:
        raise AssertionError("the command contacted the queue manager")

    for module in (qsub, qstat, qdel):
        monkeypatch.setattr(module, "connect_queue_manager", connect)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# ---- time specifications ---------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "seconds"), [
    ("5", 300),
    ("90", 5400),
    ("1:30", 5400),
    ("01:00:59", 3659),
    ("00:00:59", 59),  # Cobalt dropped the seconds: 0, "queue maximum"
    ("1:02:03:04", 93784),
    ("48:00", 172800),
])
def test_time_specs_keep_seconds(spec: str, seconds: int) -> None:
    assert parse_time(spec) == seconds


@pytest.mark.parametrize(("spec", "message"), [
    ("", "illegal value '' for minutes"),
    ("ten", "illegal value 'ten' for minutes"),
    ("-5", "illegal value '-5' for minutes"),
    ("1:2:3:4:5", "time may be specified as minutes, HH:MM, HH:MM:SS, or DD:HH:MM:SS"),
    ("1:60", "minutes value '60' outside range [0, 59]"),
    ("1:00:60", "seconds value '60' outside range [0, 59]"),
    ("1:24:00:00", "hours value '24' outside range [0, 23]"),
    ("1:x:00", "illegal value 'x' for minutes"),
])
def test_bad_time_specs_are_rejected(spec: str, message: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_time(spec)
    assert str(err.value) == f"invalid time specification: {message}"


# ---- tables -----------------------------------------------------------------------------------


def test_print_tabular_matches_cobalt_example() -> None:
    header = ("JobID", "User", "WallTime", "Nodes", "State", "Location")
    lines = format_table(header, [("100", "land", "00:05:00", "512", "*", "/tmp")])
    assert lines == [
        "JobID  User  WallTime  Nodes  State  Location  ",
        "=" * 47,
        "100    land  00:05:00  512    *      /tmp      ",
    ]


def test_print_tabular_widens_columns_for_long_cells() -> None:
    lines = format_table(("JobID", "User"), [("1", "a-long-name")])
    assert lines == ["JobID  User         ", "=" * 20, "1      a-long-name  "]


def test_vertical_layout_follows_cobalt() -> None:
    lines = common.format_vertical(("JobID", "User", "WallTime"), [("7", "bob", "00:01:00")])
    assert lines == ["JobID: 7", "    User     : bob", "    WallTime : 00:01:00", ""]


# ---- qsub -------------------------------------------------------------------------------------


def test_env_escapes_and_merging() -> None:
    env = qsub.parse_env([r"A=1:B=x\:y\=z", "C=a=b", "A=2"])
    assert env == {"A": "2", "B": "x:y=z", "C": "a=b"}


@pytest.mark.parametrize("bad", ["NOVALUE", "=x", "A=1:"])
def test_env_rejects_items_without_name_and_value(bad: str) -> None:
    with pytest.raises(CommandError, match="Improperly formatted argument to env : "):
        qsub.parse_env([bad])


def test_attrs_flags_and_values() -> None:
    assert qsub.parse_attrs(["location=R00:fast:no_slow", "x=1"]) == {
        "location": "R00", "fast": "true", "slow": "false", "x": "1"}


@pytest.mark.parametrize(("text", "value"), [("022", 0o22), ("77", 0o77), ("0", 0)])
def test_umask_is_octal(text: str, value: int) -> None:
    assert qsub.parse_umask(text) == value


@pytest.mark.parametrize("text", ["999", "abc", "1000"])
def test_bad_umask(text: str) -> None:
    with pytest.raises(CommandError, match=f"Invalid umask value {text}"):
        qsub.parse_umask(text)


def test_unknown_run_user_is_rejected() -> None:
    with pytest.raises(CommandError, match=r"user no-such-user-x does not exist\."):
        qsub.parse_user_list("root:no-such-user-x")


def _script(directory: Path, body: str, name: str = "job.sh") -> Path:
    path = directory / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def test_cobalt_directives_apply_before_the_command_line(tmp_path: Path) -> None:
    script = _script(tmp_path, "#!/bin/sh\n"
                               "#COBALT -n 2 -t 00:10:30 -q debug\n"
                               "#COBALT --env 'A=1:B=2' --jobname fromscript  # a comment\n"
                               "# COBALT -n 99 (not a directive: a space after #)\n"
                               "echo hi\n")
    argv = ["--cwd", str(tmp_path), "-t", "1:00:00", "--env", "B=3", str(script), "x", "-n", "5"]
    args, executable, is_script = qsub.parse_command_line(argv)
    assert (executable, is_script) == (str(script), True)
    assert args.nodecount == 2  # from the script
    assert args.time == "1:00:00"  # the command line wins
    assert args.queue == "debug"
    assert qsub.parse_env(args.env) == {"A": "1", "B": "3"}
    spec = qsub.build_submission(args, executable, is_script, {})
    assert spec["mode"] == "script"
    assert spec["args"] == ["x", "-n", "5"]
    assert spec["jobname"] == "fromscript"
    assert spec["walltime"] == 3600


def test_directives_may_not_name_an_executable(tmp_path: Path) -> None:
    script = _script(tmp_path, "#!/bin/sh\n#COBALT -n 1 /bin/true\n")
    with pytest.raises(CommandError, match="may hold only options"):
        qsub.parse_command_line([str(script)])


def test_bad_directive_option_is_a_usage_error(tmp_path: Path, no_server: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, "#!/bin/sh\n#COBALT --bogus\n")
    assert qsub.main(["-n", "1", "-t", "5", str(script)]) == 2
    assert "in the #COBALT directives of" in capsys.readouterr().err


def test_binary_submission_defaults(tmp_path: Path) -> None:
    exe = _script(tmp_path, "\x7fELF not a script", name="a.out")
    args, executable, is_script = qsub.parse_command_line(
        ["-n", "2", "-t", "5", "--cwd", str(tmp_path), "a.out", "--flag"])
    spec = qsub.build_submission(args, executable, is_script, {"PATH": "/bin", "HOME": "/h"})
    assert spec == {
        "nodes": 2, "walltime": 300, "command": str(exe), "args": ["--flag"],
        "cwd": str(tmp_path), "jobname": "N/A", "queue": "default", "procs": 2, "mode": "smp",
        "env": {"PATH": "/bin"}, "umask": 0o22,
        "outputpath": f"{tmp_path}/$jobid.output", "errorpath": f"{tmp_path}/$jobid.error",
        "cobaltlog": f"{tmp_path}/$jobid.cobaltlog", "user_hold": False, "attrs": {},
    }


def test_output_prefix_names_files_and_job(tmp_path: Path) -> None:
    args, executable, is_script = qsub.parse_command_line(
        ["-n", "1", "-t", "5", "--cwd", str(tmp_path), "-O", "run7", "-e", "/tmp/e.txt", "-h",
         "--env", "PATH=/opt/bin", "-M", "a@b.c", "-A", "proj", "--dependencies", "3:4",
         "/bin/true"])
    spec = qsub.build_submission(args, executable, is_script, {"PATH": "/bin"})
    assert spec["outputpath"] == f"{tmp_path}/run7.output"
    assert spec["errorpath"] == "/tmp/e.txt"
    assert spec["cobaltlog"] == f"{tmp_path}/run7.cobaltlog"
    assert spec["jobname"] == "run7"
    assert spec["env"] == {"PATH": "/opt/bin"}
    assert spec["user_hold"] is True
    assert spec["notify"] == "a@b.c" and spec["attrs"] == {}
    assert spec["project"] == "proj"
    assert spec["dependencies"] == [3, 4]


@pytest.mark.parametrize(("argv", "message"), [
    (["-n", "1", "/bin/true"], "'time' not provided"),
    (["-t", "5", "/bin/true"], "'nodecount' not provided"),
    (["-n", "0", "-t", "5", "/bin/true"], "nodecount is 0 which is <= zero"),
    (["-n", "1", "-t", "5", "--mode", "turbo", "/bin/true"], "Specified mode 'turbo' not valid"),
    (["-n", "1", "-t", "5", "-o", "/no/such/dir/out", "/bin/true"],
     "directory /no/such/dir does not exist"),
    (["-n", "1", "-t", "5", "--dependencies", "3:x", "/bin/true"], "dependencies must be job ids"),
])
def test_submission_checks(argv: list[str], message: str) -> None:
    args, executable, is_script = qsub.parse_command_line(argv)
    with pytest.raises(CommandError, match=message):
        qsub.build_submission(args, executable, is_script, {})


def test_executable_checks(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=f"command {tmp_path}/nope not found, or is not a file"):
        qsub.locate_executable("nope", str(tmp_path))
    plain = tmp_path / "plain"
    plain.write_text("data")
    with pytest.raises(CommandError, match=f"command {plain} is not executable"):
        qsub.locate_executable("plain", str(tmp_path))
    found_in_path = shutil.which("true")
    assert found_in_path is not None
    assert qsub.locate_executable("true", str(tmp_path)) == os.path.abspath(found_in_path)


def test_qsub_main_prints_only_the_job_id(fake_server: FakeQueueManager,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert qsub.main(["-n", "1", "-t", "5", "/bin/echo", "hi"]) == 0
    assert capsys.readouterr().out == "42\n"
    assert fake_server.submitted[0]["args"] == ["hi"]


def test_qsub_node_count_out_of_range(fake_server: FakeQueueManager,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert qsub.main(["-n", "5", "-t", "5", "/bin/true"]) == 1
    assert capsys.readouterr().err.startswith("qsub: node count out of realistic range")
    assert fake_server.submitted == []


def test_qsub_warns_about_unknown_dependencies(fake_server: FakeQueueManager,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.job_rows = [job_row(3)]
    assert qsub.main(["-n", "1", "-t", "5", "--dependencies", "3:9", "/bin/true"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "42\n"
    assert captured.err == ("qsub: WARNING: dependencies 9 do not match jobs currently in "
                            "the queue\n")


def test_qsub_usage_errors(no_server: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert qsub.main(["--bogus", "/bin/true"]) == 2
    assert "qsub: error: unrecognized arguments: --bogus" in capsys.readouterr().err
    assert qsub.main(["-n", "1", "-t", "5"]) == 1
    assert capsys.readouterr().err == "qsub: No executable or script specified\n"


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    for module in (qsub, qstat, qdel):
        assert module.main(["--help"]) == 0
        text = capsys.readouterr().out
        for action in module.build_parser()._actions:
            assert action.help, f"{module.PROG} {action.option_strings} has no help"
            for option in action.option_strings:
                assert option in text
    assert "-h, --held" in (qsub.build_parser().format_help())


# ---- qstat ------------------------------------------------------------------------------------


def _rows() -> list[dict[str, Any]]:
    return [
        job_row(9, user="bob", score=12.5),
        job_row(10, state="running", display_state="running", short_state="R",
                starttime=NOW - 30, location="node0-1", nodes=2, score=3_400_000.0),
        job_row(11, display_state="user_hold", short_state="H", user_hold=True, walltime=59),
        job_row(12, state="done", display_state="done", short_state="E", starttime=NOW - 90,
                endtime=NOW - 20, exit_status=0),
    ]


def _render(header: list[str], rows: list[dict[str, Any]], sort: list[str] | None = None,
            reverse: bool = False) -> list[str]:
    ordered = qstat.sort_rows(rows, header, sort, qstat.JOB_COLUMNS, NOW, reverse)
    return qstat.render(ordered, header, qstat.JOB_COLUMNS, NOW)


def test_default_listing() -> None:
    assert _render(list(qstat.DEFAULT_HEADER), _rows()) == [
        "JobID  User   WallTime  Nodes  State      Location  ",
        "=" * 52,
        "9      bob    00:10:00  1      queued     -         ",
        "10     alice  00:10:00  2      running    node0-1   ",
        "11     alice  00:00:59  1      user_hold  -         ",
        "12     alice  00:10:00  1      done       -         ",
    ]


def test_derived_times() -> None:
    header = ["JobID", "QueuedTime", "RunTime", "TimeRemaining", "S"]
    assert _render(header, _rows())[2:] == [
        "9      00:01:40    N/A       N/A            Q  ",
        "10     00:01:10    00:00:30  00:09:30       R  ",
        "11     00:01:40    N/A       N/A            H  ",
        "12     00:00:10    00:01:10  N/A            E  ",
    ]


def test_score_column_formats_and_sorts() -> None:
    assert [qstat.format_score(s) for s in (0.0, 12.345, 999.9, 1500.0, 3_400_000.0, 5e9)] == [
        "  0.0", " 12.3", "999.9", "  1.5K", "  3.4M", "  5.0G"]
    lines = _render(["JobID", "Score"], _rows())
    assert [line.split()[0] for line in lines[2:]] == ["11", "12", "9", "10"]


def test_sort_is_numeric_and_reversible() -> None:
    rows = [job_row(10), job_row(9), job_row(100)]
    assert [r["jobid"] for r in qstat.sort_rows(rows, ["JobID"], None, qstat.JOB_COLUMNS, NOW)] \
        == [9, 10, 100]
    by_walltime = qstat.sort_rows(_rows(), ["JobID"], ["walltime", "JobID"], qstat.JOB_COLUMNS,
                                  NOW, reverse=True)
    assert [r["jobid"] for r in by_walltime] == [12, 10, 9, 11]


def test_unknown_column_is_an_error() -> None:
    with pytest.raises(CommandError, match="unknown column"):
        _render(["JobID", "Colour"], _rows())


def test_long_listing_is_vertical_and_complete(utc: None) -> None:
    row = job_row(10, state="running", display_state="running", short_state="R",
                  starttime=NOW - 30, args=["a b", "c"], env={"PATH": "/bin", "X": "1"},
                  notify="a@b.c", dependencies=[3, 4])
    lines = qstat.render([row], list(qstat.LONG_HEADER), qstat.JOB_COLUMNS, NOW, vertical=True)
    assert lines[0] == "JobID: 10"
    fields = {k.strip(): v for k, _, v in (line.partition(": ") for line in lines[1:-1])}
    assert fields["StartTime"] == "Tue Nov 14 22:12:50 2023 +0000 (UTC)"
    assert fields["Args"] == "'a b' c"
    assert fields["Envs"] == "PATH=/bin:X=1"
    assert fields["Path"] == "/bin"
    assert fields["Notify"] == "a@b.c"
    assert fields["Dependencies"] == "3:4"
    assert fields["Preemptable"] == "False"
    assert fields["EndTime"] == "-"
    assert lines[-1] == ""


def test_header_choice() -> None:
    args = qstat.build_parser().parse_args([])
    assert qstat.choose_header(args, {}) == list(qstat.DEFAULT_HEADER)
    assert qstat.choose_header(args, {"QSTAT_HEADER": "JobID:S"}) == ["JobID", "S"]
    full = qstat.build_parser().parse_args(["-f"])
    assert qstat.choose_header(full, {"QSTAT_HEADER": "JobID"}) == list(qstat.FULL_HEADER)
    assert qstat.choose_header(full, {"QSTAT_HEADER_FULL": "JobID:Queue"}) == ["JobID", "Queue"]
    assert qstat.choose_header(qstat.build_parser().parse_args(["-fl"]), {}) == list(
        qstat.LONG_HEADER)
    explicit = qstat.build_parser().parse_args(["-f", "--header", "User:jobid"])
    assert qstat.choose_header(explicit, {"QSTAT_HEADER_FULL": "JobID"}) == ["User", "jobid"]


def test_full_header_is_cobalts_with_the_estimated_start() -> None:
    assert " ".join(qstat.FULL_HEADER) == (
        "JobID JobName User WallTime QueuedTime RunTime TimeRemaining Nodes State Location Mode "
        "Procs Preemptable Queue StartTime Index Est_Start_Time")


def test_qstat_no_jobs_prints_header_only(fake_server: FakeQueueManager,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert qstat.main([]) == 0
    assert capsys.readouterr().out == (
        "JobID  User  WallTime  Nodes  State  Location  \n" + "=" * 47 + "\n")


def test_qstat_reports_unmatched_ids_and_queues(fake_server: FakeQueueManager,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.job_rows = _rows()
    fake_server.queue_rows = [queue_row("default"), queue_row("empty")]
    assert qstat.main(["--header", "JobID:Queue", "12", "77", "nope", "empty"]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[2:] == ["12     default  "]  # a finished job, by id
    assert captured.err == ("qstat: job 77 not found\n"
                            "qstat: nope is not a valid jobid or queue name\n")
    assert qstat.main(["empty"]) == 0


def test_qstat_filters_by_user_and_queue(fake_server: FakeQueueManager,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.job_rows = [*_rows(), job_row(13, queue="debug", user="bob")]
    fake_server.queue_rows = [queue_row("default"), queue_row("debug")]
    assert qstat.main(["--header", "JobID", "-u", "bob"]) == 0
    assert capsys.readouterr().out.split()[2:] == ["9", "13"]
    assert qstat.main(["--header", "JobID", "debug"]) == 0
    assert capsys.readouterr().out.split()[2:] == ["13"]


def test_qstat_queues(fake_server: FakeQueueManager, capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.queue_rows = [queue_row("default"),
                           queue_row("debug", "stopped", maxtime=3600, users="alice:bob")]
    assert qstat.main(["-Q"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Name     Users      Groups  MinTime  MaxTime   MaxRunning  MaxQueued  MaxUserNodes  "
        "MaxNodeHours  TotalNodes  State    ",
        "=" * 119,
        "debug    alice:bob  None    None     01:00:00  None        None       None          "
        "None          None        stopped  ",
        "default  None       None    None     None      None        None       None          "
        "None          None        running  ",
    ]
    assert qstat.main(["-Q", "nope"]) == 1
    assert capsys.readouterr().err == "qstat: nope is not a valid queue name\n"


# ---- qdel -------------------------------------------------------------------------------------


def test_qdel_rejects_non_integer_ids_before_contacting_the_server(
        no_server: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert qdel.main(["12", "x1"]) == 1
    assert capsys.readouterr().err == "qdel: jobid must be an integer: x1\n"
    assert qdel.main([]) == 1
    assert capsys.readouterr().err == "qdel: No Jobid(s) given\n"


def test_qdel_ids_are_deduplicated_in_order() -> None:
    assert qdel.parse_jobids(["5", "3", "5"]) == [5, 3]


def test_qdel_report(capsys: pytest.CaptureFixture[str]) -> None:
    status = qdel.report([
        {"jobid": 11, "result": "deleted", "user": "bob"},
        {"jobid": 12, "result": "unknown", "message": "job 12 not found"},
        {"jobid": 13, "result": "refused", "user": "alice",
         "message": "job 13 belongs to alice, not to bob"},
        {"jobid": 140, "result": "killing", "user": "bob"},
    ])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out.splitlines() == [
        "      Deleted Jobs", "JobID  User  ", "=" * 13, "11     bob   ", "140    bob   "]
    assert captured.err == ("qdel: job 12 not found\n"
                            "qdel: job 13 belongs to alice, not to bob\n")


def test_qdel_of_an_ending_job_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    status = qdel.report([{"jobid": 7, "result": "ending", "user": "bob",
                           "message": "job 7 is already killing"}])
    captured = capsys.readouterr()
    assert (status, captured.out, captured.err) == (0, "", "qdel: job 7 is already killing\n")


def test_qdel_main(fake_server: FakeQueueManager, capsys: pytest.CaptureFixture[str]) -> None:
    assert qdel.main(["4", "4", "2"]) == 0
    assert fake_server.deleted == [4, 2]
    assert capsys.readouterr().out.splitlines()[0] == "      Deleted Jobs"


# ---- the connection ------------------------------------------------------------------------------


class _FailingProxy:
    def __init__(self, error: Exception) -> None:
        self._error = error

    def jobs(self, _jobids: list[int] | None, _fields: Any = None) -> list[dict[str, Any]]:
        raise self._error


def test_connection_failures_name_the_socket_and_the_instance() -> None:
    client = common.QueueManagerClient(
        _FailingProxy(Pyro5.errors.CommunicationError("cannot connect: [Errno 2] gone")),
        "/state/sockets/user.sock", "COBALTLITE_STATE_DIR=/state")
    with pytest.raises(CommandError) as err:
        client.jobs()
    assert str(err.value) == ("cannot reach the queue manager at /state/sockets/user.sock: "
                              "cannot connect: [Errno 2] gone (is `cobaltlite up` running? "
                              "COBALTLITE_STATE_DIR=/state)")


@pytest.mark.parametrize("error", [ValueError("the 'debug' queue is dead"),
                                   PermissionError("the 'debug' queue is dead"),
                                   LookupError("the 'debug' queue is dead")])
def test_server_refusals_become_messages(error: Exception) -> None:
    client = common.QueueManagerClient(_FailingProxy(error), "/s", "")
    with pytest.raises(CommandError, match=r"^the 'debug' queue is dead$"):
        client.jobs()


def test_qstat_asks_only_for_the_fields_its_header_reads() -> None:
    from cobaltlite.commands.qstat import needed_fields

    default = ["JobID", "User", "WallTime", "Nodes", "State", "Location"]
    assert needed_fields(default, None) == sorted(
        {"jobid", "user", "walltime", "nodes", "display_state", "location"})
    # Derived columns bring the fields they are computed from; sort keys count too.
    assert {"starttime", "endtime", "walltime"} <= set(needed_fields(["TimeRemaining"], None))
    assert "submittime" in needed_fields(default, ["SubmitTime"])


def test_qstat_prints_each_value_as_itself_even_when_values_compare_equal() -> None:
    """qstat formats each distinct value once; 0.0 and -0.0, or True and 1, are equal in
    Python but print differently, and each row must show its own."""
    from cobaltlite.commands.qstat import JOB_COLUMNS, render

    rows = [{"jobid": 1, "score": 0.0, "user_hold": True},
            {"jobid": 2, "score": -0.0, "user_hold": 1},
            {"jobid": 3, "score": 0.0, "user_hold": True}]
    lines = render(rows, ["JobID", "Score", "User_Hold"], JOB_COLUMNS, 0.0)
    cells = [line.split() for line in lines[2:]]
    assert cells == [["1", "0.0", "True"], ["2", "-0.0", "1"], ["3", "0.0", "True"]]
