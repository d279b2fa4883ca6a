"""The new commands' pure parsing, without a server: qalter's wall-time changes and the
changes it sends, cqadm's --setq/--unsetq strings, schedctl --score, qselect's filters,
qsub's new options and the interactive job's node file. What the daemons do with them is
tested end to end in test_commands_golden_*.py.
"""

from __future__ import annotations

import argparse
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cobaltlite.commands import (
    common,
    cqadm,
    holds,
    interactive,
    qalter,
    qdel,
    qhold,
    qmove,
    qrls,
    qselect,
    qstat,
    qsub,
    schedctl,
)
from cobaltlite.commands.common import CommandError

NEW_COMMANDS = (qhold, qrls, qalter, qmove, qselect, cqadm, schedctl)


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a command tries to reach the queue manager: these refusals must
    happen before anything is sent."""

    def connect() -> None:
        raise AssertionError("the command contacted the queue manager")

    for module in (qalter, qmove, qselect, cqadm, schedctl, qsub):
        monkeypatch.setattr(module, "connect_queue_manager", connect)
    monkeypatch.setattr(holds, "connect_queue_manager", connect)


# ---- qalter -t -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "change"), [
    ("30", ("walltime", 1800)),
    ("01:00:00", ("walltime", 3600)),
    ("+30", ("walltime_delta", 1800)),
    ("+00:00:30", ("walltime_delta", 30)),
    ("-10", ("walltime_delta", -600)),
    ("-1:00:00:00", ("walltime_delta", -86400)),
])
def test_walltime_change_absolute_or_relative(text: str, change: tuple[str, int]) -> None:
    assert qalter.parse_walltime_change(text) == change


@pytest.mark.parametrize("text", ["+", "-", "+-5", "1:2:3:4:5", "ten", "+01:60", ""])
def test_bad_walltime_change_is_refused(text: str) -> None:
    with pytest.raises(CommandError, match="invalid time specification"):
        qalter.parse_walltime_change(text)


def test_negative_time_is_read_as_a_value_not_an_option() -> None:
    assert qalter.join_negative_times(["-t", "-10:00", "5"]) == ["-t-10:00", "5"]
    assert qalter.join_negative_times(["--time", "-5", "7"]) == ["--time=-5", "7"]
    assert qalter.join_negative_times(["-t", "+5", "7"]) == ["-t", "+5", "7"]
    args = qalter.build_parser().parse_args(qalter.join_negative_times(["-t", "-00:10:00", "3"]))
    assert args.time == "-00:10:00" and args.jobids == ["3"]


def _qalter_changes(*argv: str, cwd: str = "/tmp") -> dict[str, object]:
    return qalter.build_changes(qalter.build_parser().parse_args(
        qalter.join_negative_times(argv)), cwd)


def test_qalter_sends_each_option_under_its_contract_key(tmp_path: Path) -> None:
    changes = _qalter_changes(
        "-t", "+5", "-n", "2", "--proccount", "4", "-A", "proj", "--mode", "vn",
        "-M", "a@b.c", "-o", "out.txt", "-e", "err.txt", "--dependencies", "3:4",
        "--attrs", "x=1:flag", "--geometry", "1x2x3x4x2", "--defer", "--run_users", "root",
        cwd=str(tmp_path))
    assert changes == {
        "walltime_delta": 300, "nodes": 2, "procs": 4, "project": "proj", "mode": "vn",
        "notify": "a@b.c", "outputpath": str(tmp_path / "out.txt"),
        "errorpath": str(tmp_path / "err.txt"), "dependencies": [3, 4],
        "attrs": {"x": "1", "flag": "true"}, "geometry": "1x2x3x4x2", "defer": True,
        "user_list": ["root"],
    }
    assert _qalter_changes("--dependencies", "none") == {"dependencies": []}


@pytest.mark.parametrize(("argv", "message"), [
    ([], "no change given"),
    (["-n", "0"], "nodecount is 0 which is <= zero"),
    (["--mode", "turbo"], "Specified mode 'turbo' not valid"),
    (["--dependencies", "3:x"], "dependencies must be job ids"),
    (["-o", "/no/such/dir/out"], "directory /no/such/dir does not exist"),
    (["--run_users", "no-such-user-xyz"], "user no-such-user-xyz does not exist."),
])
def test_qalter_refuses_bad_changes_before_sending(argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _qalter_changes(*argv)


def test_qalter_bad_input_exits_before_contacting_the_server(
        no_server: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert qalter.main(["-t", "1:99", "5"]) == 1
    assert "qalter: invalid time specification" in capsys.readouterr().err
    assert qalter.main(["-t", "5", "five"]) == 1
    assert capsys.readouterr().err == "qalter: jobid must be an integer: five\n"
    assert qalter.main(["--walltime", "5", "1"]) == 2
    assert "unrecognized arguments: --walltime" in capsys.readouterr().err


# ---- cqadm --setq / --unsetq -----------------------------------------------------------------


def test_setq_splits_cobalts_string() -> None:
    assert cqadm.parse_setq("maxtime=60 users=alice:bob  maxrunning=2") == {
        "maxtime": "60", "users": "alice:bob", "maxrunning": "2"}
    assert cqadm.parse_setq("maxtime=01:00:00") == {"maxtime": "01:00:00"}


@pytest.mark.parametrize(("text", "token"), [
    ("maxtime", "maxtime"),
    ("maxtime=60 users", "users"),
    ("=60", "=60"),
    ("maxtime=", "maxtime="),
    ("maxtime = 60", "maxtime"),
])
def test_malformed_setq_names_the_bad_token(text: str, token: str) -> None:
    with pytest.raises(CommandError, match=f"malformed setting '{token}'"):
        cqadm.parse_setq(text)


def test_setq_refuses_a_key_given_twice_and_an_empty_string() -> None:
    with pytest.raises(CommandError, match="'maxtime' is given twice"):
        cqadm.parse_setq("maxtime=5 maxtime=6")
    with pytest.raises(CommandError, match="--setq needs"):
        cqadm.parse_setq("   ")


_KEY = st.text(string.ascii_lowercase, min_size=1, max_size=12)
_VALUE = st.text(string.ascii_letters + string.digits + ":*,.-_=", min_size=1, max_size=20)


@given(st.dictionaries(_KEY, _VALUE, min_size=1, max_size=8))
def test_setq_reads_back_what_was_written(settings: dict[str, str]) -> None:
    text = " ".join(f"{key}={value}" for key, value in settings.items())
    assert cqadm.parse_setq(text) == settings


def test_unsetq_takes_names_only() -> None:
    assert cqadm.parse_unsetq("maxtime  users") == ["maxtime", "users"]
    with pytest.raises(CommandError, match="not 'maxtime=5'"):
        cqadm.parse_unsetq("maxtime=5")
    with pytest.raises(CommandError, match="--unsetq needs"):
        cqadm.parse_unsetq("")


def test_malformed_setq_is_refused_before_anything_is_sent(
        no_server: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cqadm.main(["--setq", "maxtime=60 users", "default"]) == 1
    assert "cqadm: --setq: malformed setting 'users'" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "status", "message"), [
    (["--addq"], 1, "--addq needs at least one queue name"),
    (["--kill", "x"], 1, "jobid must be an integer: x"),
    (["--hold"], 1, "No Jobid(s) given"),
    (["-f", "--getq"], 1, "-f goes with --kill, --delq or --layout only"),
    (["--layout", "june.yaml", "default"], 1, "--layout takes no queue or job arguments"),
    (["--layout", "june.yaml", "--getq"], 2, "not allowed with argument"),
    (["--time", "1:99", "3"], 1, "invalid time specification"),
    (["-j", "5", "default"], 1, "-j takes no queue or job arguments"),
    (["--addq", "--delq", "q"], 2, "not allowed with argument"),
    ([], 2, "one of the arguments"),
])
def test_cqadm_command_line_errors(no_server: None, capsys: pytest.CaptureFixture[str],
                                   argv: list[str], status: int, message: str) -> None:
    assert cqadm.main(argv) == status
    assert message in capsys.readouterr().err


# ---- schedctl --score / --inherit ------------------------------------------------------------


@pytest.mark.parametrize("text", ["5", "+5", "-5", "2.5", "-0.5"])
def test_score_values_pass_through_with_their_sign(text: str) -> None:
    assert schedctl.parse_score(text) == text


@pytest.mark.parametrize(("argv", "message"), [
    (["--score", "ten", "1"], "--score must be a number"),
    (["--score", "nan", "1"], "--score must be a finite number"),
    (["--score", "5"], "At least one jobid must be supplied"),
    (["--score", "5", "x"], "jobid must be an integer, found 'x'"),
    (["--inherit", "1.5", "1"], "--inherit must be between 0 and 1"),
    (["--stop", "3"], "No arguments needed"),
])
def test_schedctl_job_options_refuse_bad_input(no_server: None,
                                               capsys: pytest.CaptureFixture[str],
                                               argv: list[str], message: str) -> None:
    assert schedctl.main(argv) == 1
    assert message in capsys.readouterr().err


# ---- qselect, qmove, qhold -------------------------------------------------------------------


def _selected(**filters: object) -> bool:
    defaults = {"state": None, "nodecount": None, "project": None, "queue": None,
                "mode": None, "user": None}
    row = {"jobid": 1, "user": "alice", "queue": "debug", "display_state": "user_hold",
           "short_state": "H", "nodes": 2, "walltime": 600, "project": "p", "mode": "smp"}
    walltime = filters.pop("walltime", None)
    return qselect.matches(row, argparse.Namespace(**{**defaults, **filters}),
                           walltime)


def test_qselect_filters_all_apply() -> None:
    assert _selected()
    assert _selected(state="user_hold", nodecount=2, project="p", queue="debug", mode="smp",
                     user="bob:alice", walltime=600)
    assert _selected(state="H")
    for mismatch in ({"state": "queued"}, {"nodecount": 4}, {"project": "q"},
                     {"queue": "default"}, {"mode": "vn"}, {"user": "bob"},
                     {"walltime": 300}):
        assert not _selected(**mismatch), mismatch


def test_qselect_takes_no_arguments(no_server: None,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert qselect.main(["5"]) == 1
    assert capsys.readouterr().err == "qselect: qselect takes no arguments\n"


def test_qmove_needs_a_queue_and_a_job(no_server: None,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert qmove.main(["debug"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("usage: qmove <queue> <jobid>")
    assert "qmove: need a queue and at least one job id" in err


def test_hold_and_release_need_job_ids(no_server: None,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    for module in (qhold, qrls):
        assert module.main([]) == 1
        assert capsys.readouterr().err == f"{module.PROG}: No Jobid(s) given\n"


def test_every_command_has_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    for module in (*NEW_COMMANDS, qsub, qstat, qdel):
        assert module.main(["--version"]) == 0
        assert capsys.readouterr().out == f"{module.PROG} 0.1.0\n"
        assert module.main(["--help"]) == 0
        text = capsys.readouterr().out
        for option in ("--help", "--version"):
            assert option in text, f"{module.PROG} --help does not list {option}"


def test_every_option_of_the_new_commands_is_explained() -> None:
    parsers = [qalter.build_parser(), qmove.build_parser(), qselect.build_parser(),
               cqadm.build_parser(), schedctl.build_parser(), qsub.build_parser(),
               holds.build_parser("qhold", "Hold jobs.")]
    for parser in parsers:
        for action in parser._actions:
            assert action.help, f"{parser.prog} {action.option_strings} has no help"


def test_report_results_prints_successes_and_failures(
        capsys: pytest.CaptureFixture[str]) -> None:
    status = common.report_results("qhold", [
        {"jobid": 1, "ok": True, "message": "   Placed user hold on jobs: 1"},
        {"jobid": 2, "ok": False, "message": "   Failed to place user hold on job 2: "
                                             "job is running"},
    ])
    out, err = capsys.readouterr()
    assert status == 1
    assert out == "   Placed user hold on jobs: 1\n"
    assert err == "qhold: Failed to place user hold on job 2: job is running\n"


# ---- qsub's new options ----------------------------------------------------------------------


def _submission(tmp_path: Path, *options: str) -> dict[str, object]:
    args, executable, is_script = qsub.parse_command_line(
        ["-n", "1", "-t", "5", "-d", str(tmp_path), *options])
    return qsub.build_submission(args, executable, is_script, {"PATH": "/bin"})


def test_qsub_new_options_reach_the_submission(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("data\n")
    spec = _submission(tmp_path, "-i", "in.txt", "--debuglog", "dbg.log", "--run_project",
                       "--preemptable", "--disable_preboot", "--env", "RUN=$jobid", "/bin/cat")
    assert spec["cwd"] == str(tmp_path)
    assert spec["inputfile"] == str(tmp_path / "in.txt")
    assert spec["cobaltlog"] == spec["debuglog"] == str(tmp_path / "dbg.log")
    assert spec["run_project"] is spec["preemptable"] is spec["disable_preboot"] is True
    # $jobid is left for the queue manager, which alone knows the id.
    assert spec["env"] == {"PATH": "/bin", "RUN": "$jobid"}


def test_plain_qsub_sends_none_of_the_new_fields(tmp_path: Path) -> None:
    spec = _submission(tmp_path, "/bin/true")
    assert not {"inputfile", "debuglog", "run_project", "preemptable",
                "disable_preboot"} & spec.keys()


def test_qsub_input_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"file .*/nope not found, or is not a file"):
        _submission(tmp_path, "-i", "nope", "/bin/cat")


def test_interactive_takes_no_executable_and_no_input_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="An executable may not be specified"):
        _submission(tmp_path, "-I", "/bin/true")
    with pytest.raises(CommandError, match="Cannot specify an input file"):
        _submission(tmp_path, "-I", "-i", "x")
    spec = _submission(tmp_path, "-I")
    assert spec["command"] == qsub.INTERACTIVE_PLACEHOLDER and spec["args"] == ["infinity"]


def test_interactive_node_file_and_environment() -> None:
    assert interactive.node_names("0-2,5") == ["0", "1", "2", "5"]
    assert interactive.node_names("ANL-R00-M0-512") == ["ANL-R00-M0-512"]
    env = interactive.shell_environment(
        {"location": "2-3", "nodes": 2, "env": {"X": "1"}}, 7, "/tmp/n", {"HOME": "/h"})
    assert env == {"HOME": "/h", "X": "1", "COBALT_JOBID": "7", "COBALT_NODEFILE": "/tmp/n",
                   "COBALT_PARTNAME": "2-3", "COBALT_JOBSIZE": "2", "COBALT_PARTSIZE": "2"}


@pytest.mark.parametrize("module", [qhold, qrls, qalter, qmove, cqadm, schedctl])
def test_dash_h_is_help(module: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert module.main(["-h"]) == 0  # type: ignore[attr-defined]
    assert capsys.readouterr().out.startswith("usage:")


def test_qselect_dash_h_is_a_state_filter() -> None:
    assert qselect.build_parser().parse_args(["-h", "queued"]).state == "queued"


def test_qsub_time_zero_is_left_to_the_queue(tmp_path: Path) -> None:
    args, executable, is_script = qsub.parse_command_line(["-n", "1", "-t", "0", "/bin/true"])
    assert qsub.build_submission(args, executable, is_script, {})["walltime"] == 0


@given(st.sampled_from(["", "+", "-"]),
       st.tuples(st.integers(0, 99), st.integers(0, 23), st.integers(0, 59),
                 st.integers(0, 59)).map(lambda t: "{}:{:02d}:{:02d}:{:02d}".format(*t)))
def test_relative_wall_time_is_the_absolute_one_signed(sign: str, spec: str) -> None:
    key, seconds = qalter.parse_walltime_change(sign + spec)
    assert key == ("walltime" if not sign else "walltime_delta")
    assert seconds == (-1 if sign == "-" else 1) * common.parse_time(spec)


@pytest.mark.parametrize("text", ["4x4x4x2", "1x2x3x4x2"])
def test_geometry_has_four_or_five_dimensions(text: str) -> None:
    assert qsub.parse_geometry(text) == text


@pytest.mark.parametrize("text", ["4x4", "4x4x4x4x4x4", "axbxcxd", "4x4x4x", "4X4X4X2"])
def test_bad_geometry_is_refused(text: str) -> None:
    with pytest.raises(CommandError, match=f"Invalid geometry entered: {text}"):
        qsub.parse_geometry(text)


def test_reverse_reverses_ties_too() -> None:
    rows = [{"jobid": j, "display_state": "queued"} for j in (3, 1, 2)]
    forward = qstat.sort_rows(rows, ["JobID", "State"], ["State"], qstat.JOB_COLUMNS, 0.0)
    backward = qstat.sort_rows(rows, ["JobID", "State"], ["State"], qstat.JOB_COLUMNS, 0.0,
                               reverse=True)
    assert [r["jobid"] for r in forward] == [3, 1, 2]
    assert backward == forward[::-1]
