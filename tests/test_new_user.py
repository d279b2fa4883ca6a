"""A new user's first hour (issue 12): the mistakes a newcomer makes get clear messages and
exit codes, through the real commands as subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance
from shared_paths import TRACES

REPO = Path(__file__).resolve().parent.parent
LUBLIN = TRACES / "lublin_256.swf.gz"


def run(module: str, *args: str, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def cobaltlite(*args: str) -> subprocess.CompletedProcess[str]:
    return run("cobaltlite.cli", *args)


def qsim(*args: str) -> subprocess.CompletedProcess[str]:
    return run("cobaltlite.qsim.cli", *args)


def no_traceback(ran: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in ran.stderr, ran.stderr


# ---- 1. an unusable state directory or --out is an error naming the option, not a traceback --


def test_state_dir_that_is_a_file_is_an_error(tmp_path: Path) -> None:
    regular = tmp_path / "afile"
    regular.write_text("")
    ran = cobaltlite("--state-dir", str(regular), "up")
    no_traceback(ran)
    assert ran.returncode == 1
    assert f"--state-dir: state directory {regular}: exists and is not a directory" in ran.stderr


def test_state_dir_that_cannot_be_made_is_an_error() -> None:
    ran = cobaltlite("--state-dir", "/proc/nope", "up")
    no_traceback(ran)
    assert ran.returncode == 1
    assert "--state-dir: state directory /proc/nope: cannot create it" in ran.stderr


@pytest.mark.parametrize(("out", "message"), [
    (REPO / "README.md", "exists and is not a directory"),
    (Path("/proc/nope"), "cannot create the directory"),
])
def test_qsim_out_that_cannot_be_a_directory_is_an_error(out: Path, message: str) -> None:
    ran = qsim("--trace", str(LUBLIN), "--machine", "flat:256", "--out", str(out), "-q")
    no_traceback(ran)
    assert ran.returncode == 1
    assert f"qsim: error: --out {out}: {message}" in ran.stderr


# ---- 2. global options after the subcommand; up/down --help say what they do ----------------


def test_state_dir_after_the_subcommand(tmp_path: Path) -> None:
    ran = cobaltlite("down", "--state-dir", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    assert "system: not running" in ran.stdout
    ran = cobaltlite("status", "--state-dir", str(tmp_path))
    assert str(tmp_path) in ran.stdout.replace("\n", "")


def test_up_and_down_help_describe_what_they_do() -> None:
    up = cobaltlite("up", "--help")
    assert up.returncode == 0 and "start every component" in " ".join(up.stdout.split())
    assert "--state-dir" in up.stdout
    down = cobaltlite("down", "--help")
    text = " ".join(down.stdout.split())
    assert down.returncode == 0 and "SIGTERM" in text
    assert "found through their pid files" in text


# ---- 3. configuration: intervals that would spin; down with a broken cobaltlite.yaml ---------


@pytest.mark.parametrize("line", ["scheduler_interval: -1", "metrics_interval: 0"])
def test_intervals_that_would_spin_are_refused(tmp_path: Path, line: str) -> None:
    (tmp_path / "cobaltlite.yaml").write_text(line + "\n")
    ran = cobaltlite("--state-dir", str(tmp_path), "status")
    assert ran.returncode == 1
    key, value = line.split(": ")
    assert f"{tmp_path / 'cobaltlite.yaml'}: option {key}: {float(value)!r}" in ran.stderr
    assert "greater than zero" in ran.stderr


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance().start()
    yield running
    running.stop()


def test_down_stops_the_daemons_even_with_a_broken_config() -> None:
    live = Instance().start()
    try:
        pids = [int(p.read_text()) for p in (live.state_dir / "run").glob("*.pid")]
        assert len(pids) == 4
        (live.state_dir / "cobaltlite.yaml").write_text("machine: [\n")
        ran = live.cobaltlite("down")
        assert ran.returncode == 1
        assert "configuration is broken" in ran.stderr
        assert "not valid YAML" in ran.stderr
        deadline = time.monotonic() + 20
        while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
    finally:
        (live.state_dir / "cobaltlite.yaml").write_text("machine: flat:4\n")
        live.stop()


def test_showstart_help_says_what_a_jobid_that_is_not_a_number_exits_with() -> None:
    ran = run("cobaltlite.commands.showstart", "abc")
    assert (ran.returncode, ran.stderr) == (1, "showstart: jobid must be an integer: abc\n")
    assert "1 no such job, a JOBID that is not an integer" in \
        run("cobaltlite.commands.showstart", "--help").stdout.replace("\n", " ")


def test_status_prints_each_setting_whole_on_its_line(instance: Instance) -> None:
    """`cobaltlite up`/`status` end with the machine, the database URL and the user socket: on
    an 80-column terminal the URL was broken after "database:", so it could not be copied."""
    ran = run("cobaltlite.cli", "status", env={**instance.env, "COLUMNS": "60"})
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert "machine: flat:4" in lines
    assert f"database: sqlite:///{instance.state_dir}/cobaltlite.db" in lines
    assert f"user socket: {instance.state_dir}/sockets/user.sock" in lines


# ---- 4. a reader that leaves the pipe is not an unreachable scheduler -------------------------


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_schedctl_status_into_a_closed_pipe_exits_quietly(instance: Instance,
                                                          unbuffered: str) -> None:
    env = {**instance.env, "PYTHONUNBUFFERED": unbuffered}
    child = subprocess.Popen([sys.executable, "-m", "cobaltlite.commands.schedctl", "--status"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the first line is written
    err = child.stderr.read()
    assert child.wait(timeout=60) == 141
    assert err == ""


# ---- 5. exit codes as --help says ----------------------------------------------------------


@pytest.mark.parametrize("directive", ['#COBALT -n "1', "#COBALT -n 1 /bin/true",
                                       "#COBALT --bogus"])
def test_every_malformed_cobalt_line_is_a_usage_error(tmp_path: Path, directive: str) -> None:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n{directive}\n")
    script.chmod(0o755)
    ran = run("cobaltlite.commands.qsub", "-t", "5", str(script),
              env={**os.environ, "COBALTLITE_STATE_DIR": str(tmp_path)})
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith("usage: qsub")


def test_qsub_help_documents_the_exit_codes() -> None:
    ran = run("cobaltlite.commands.qsub", "--help")
    text = " ".join(ran.stdout.split())
    assert "2 a command line or #COBALT line that cannot be parsed" in text
    assert "a missing -t or -n" in text


def test_cqadm_getq_of_a_missing_queue_is_an_error(instance: Instance) -> None:
    ran = instance.command("cqadm", "--getq", "nosuchq")
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert "cqadm: queue nosuchq does not exist" in ran.stderr
    ran = instance.command("cqadm", "--getq", "default")
    assert ran.returncode == 0 and "default" in ran.stdout


# ---- 6. messages name what the user typed ---------------------------------------------------


def test_schedctl_try_names_against(tmp_path: Path) -> None:
    site = tmp_path / "site.py"
    site.write_text("def mine(queued_time):\n    return queued_time\n")
    site.chmod(0o644)
    ran = run("cobaltlite.commands.schedctl", "--try", str(site), "--policy", "mine",
              "--against", "/missing.log", "--current", "fcfs", "--machine", "flat:4")
    assert ran.returncode == 1
    assert ran.stderr == "schedctl: --against /missing.log: no such file\n"


def test_qsim_trace_directory_says_directory(tmp_path: Path) -> None:
    ran = qsim("--trace", str(tmp_path), "--machine", "flat:4")
    assert ran.returncode == 1
    assert f"--trace {tmp_path}: is a directory" in ran.stderr


# ---- 7. a replay of nothing is not a success -------------------------------------------------


def test_qsim_replaying_no_job_warns_and_fails() -> None:
    ran = qsim("--trace", str(LUBLIN), "--machine", "flat:256", "--start", "2099-01-01", "-q")
    assert ran.returncode == 1
    assert "qsim: warning: no job was replayed (fcfs)" in ran.stderr


# ---- 8. README and .gitignore ---------------------------------------------------------------


def test_readme_commands_and_out_layout() -> None:
    readme = (REPO / "README.md").read_text()
    assert "--stop / --start" not in readme
    assert "\nschedctl --stop " in readme and "\nschedctl --start " in readme
    assert "DIR/POLICY/summary.json" in readme
    assert "DIR/POLICY/" in qsim("--help").stdout


def test_job_output_files_are_ignored() -> None:
    names = ["1.output", "1.error", "1.cobaltlog"]
    ran = subprocess.run(["git", "check-ignore", *names], cwd=REPO, capture_output=True,
                         text=True)
    assert ran.stdout.split() == names


# ---- 9. -h is help everywhere but qsub -------------------------------------------------------


@pytest.mark.parametrize("module", ["cobaltlite.commands.qstat", "cobaltlite.commands.qdel",
                                    "cobaltlite.commands.schedctl", "cobaltlite.commands.cqadm",
                                    "cobaltlite.cli", "cobaltlite.qsim.cli"])
def test_dash_h_is_help(module: str) -> None:
    ran = run(module, "-h")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("usage:")


def test_qsub_dash_h_still_holds() -> None:
    ran = run("cobaltlite.commands.qsub", "--help")
    assert "-h, --held" in ran.stdout


# ---- 7, 10, 11. Names, tables in files, the papers --------------------------------------------


def test_a_flat_machine_is_named_as_it_is_written() -> None:
    ran = qsim("--trace", str(LUBLIN), "--machine", "flat:4", "-q")
    assert "flat-4" not in ran.stdout + ran.stderr


def test_a_comparison_piped_to_a_file_keeps_its_width_its_best_marks_and_names_the_papers(
) -> None:
    ran = qsim("--trace", str(LUBLIN), "--machine", "flat:256", "--policy", "fcfs,wfp3")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    header = next(line for line in lines if "fcfs" in line and "wfp3" in line)
    assert "(*: best)" in ran.stdout
    # Each row is whole on one line, and the best value of a row is starred, not only bold.
    assert any(line.startswith("│ mean wait") and " * │" in line for line in lines), header
    assert 'Tang, Lan, Desai, Buettner, "Fault-Aware, Utility-Based Job Scheduling' in ran.stdout
    assert "Toward balanced and sustainable job scheduling" in ran.stdout


# ---- 5. down says which jobs go on, and can end them ----------------------------------------


def test_down_lists_running_jobs_and_kill_jobs_ends_them() -> None:
    live = Instance().start()
    try:
        script = live.jobs_dir / "long.sh"
        script.write_text("#!/bin/sh\nsleep 300\n")
        script.chmod(0o755)
        jobid = live.qsub("-n", "1", "-t", "10", str(script))
        live.wait_for(jobid, {"running"})
        ran = live.cobaltlite("down")
        assert ran.returncode == 0, ran.stderr
        assert f"1 job(s) still running: {jobid}" in ran.stdout
        assert "--kill-jobs" in ran.stdout
        ran = live.cobaltlite("down", "--kill-jobs")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"ended 1 job(s): {jobid}" in ran.stdout
        assert live.cobaltlite("up").returncode == 0
        ended = live.wait_for(jobid, {"done"})
        assert ended["exit_status"] != 0
    finally:
        live.stop()


# ---- 4. --reread-policy reads utility_file from the configuration as it is now --------------


def test_reread_policy_finds_a_utility_file_added_to_a_running_instance(tmp_path: Path) -> None:
    import yaml

    live = Instance().start()
    try:
        policy_dir = Path(tempfile.mkdtemp(prefix="cltest-policy-", dir="/tmp"))
        policy = policy_dir / "site.py"
        policy.write_text("def newest_first(queued_time):\n    return -queued_time\n")
        policy.chmod(0o644)
        refused = live.command("schedctl", "--reread-policy")
        assert refused.returncode == 1 and "no utility_file is configured" in refused.stderr
        config_path = live.state_dir / "cobaltlite.yaml"
        config = yaml.safe_load(config_path.read_text())
        config_path.write_text(yaml.safe_dump({**config, "utility_file": str(policy)}))
        ran = live.command("schedctl", "--reread-policy")
        assert ran.returncode == 0, ran.stderr
        assert "activated" in ran.stdout and "newest_first" in ran.stdout
        assert live.command("cqadm", "--policy", "newest_first", "default").returncode == 0
    finally:
        live.stop()
        shutil.rmtree(policy_dir, ignore_errors=True)
