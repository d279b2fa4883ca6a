"""qsub and qstat against real daemons: interactive jobs, the new qsub options, qstat -f -l.

The interactive shell is scripted: SHELL=/bin/sh reads its commands from qsub's stdin, as a user
would type them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance

from cobaltlite.commands.qstat import FULL_HEADER, LONG_HEADER


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    yield running
    running.stop()


def _qsub(instance: Instance, *args: str, stdin: str = "", shell: str = "/bin/sh"
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.commands.qsub", *args],
                          env={**instance.env, "SHELL": shell}, input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=instance.jobs_dir)


def test_interactive_job_opens_a_shell_in_the_job_and_ends_with_it(instance: Instance) -> None:
    commands = ('echo "job=$COBALT_JOBID size=$COBALT_JOBSIZE part=$COBALT_PARTNAME"\n'
                'echo "nodes=$(tr "\\n" " " < "$COBALT_NODEFILE")"\n'
                'echo "greeting=$GREETING cwd=$(pwd)"\n'
                "exit 3\n")
    ran = _qsub(instance, "-I", "-n", "2", "-t", "5", "--env", "GREETING=hi", stdin=commands)
    # The shell's exit status is qsub's.
    assert ran.returncode == 3, ran.stderr
    jobid_line, job_line, nodes_line, env_line = ran.stdout.splitlines()
    jobid = int(jobid_line)
    assert job_line == f"job={jobid} size=2 part=0-1"
    assert nodes_line == "nodes=0 1 "
    assert env_line == f"greeting=hi cwd={instance.jobs_dir}"
    assert f"Wait for job {jobid} to start" in ran.stderr
    # The job ended with the shell, long before its wall time, and its node file is gone.
    done = instance.wait_for(jobid, {"done"}, timeout=20)
    assert done["end_reason"] == "deleted"
    assert not list(Path(tempfile.gettempdir()).glob(f"cobalt-{jobid}-*.nodes"))


def test_interactive_refuses_an_executable(instance: Instance) -> None:
    ran = _qsub(instance, "-I", "-n", "1", "-t", "5", "/bin/true")
    assert ran.returncode == 1
    assert ran.stderr == "qsub: An executable may not be specified if using the interactive " \
                         "option.\n"


def test_long_listing_shows_every_field_of_the_header(instance: Instance) -> None:
    jobid = instance.qsub("-h", "-n", "1", "-t", "5", "--jobname", "longjob", "/bin/true")
    shown = instance.command("qstat", "-f", "-l", str(jobid))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"JobID: {jobid}"
    names = [line.split(":", 1)[0].strip() for line in lines[1:] if line]
    assert names == list(LONG_HEADER[1:])
    fields = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
              for line in lines[1:] if line}
    assert fields["JobName"] == "longjob"
    assert fields["State"] == "user_hold" and fields["S"] == "H"
    assert fields["User_Hold"] == "True" and fields["Admin_Hold"] == "False"
    assert fields["Kernel"] == "-"  # a Blue Gene field cobaltlite does not keep
    instance.command("qdel", str(jobid))


def test_reverse_reverses_the_whole_list(instance: Instance) -> None:
    jobids = [instance.qsub("-h", "-n", "1", "-t", "5", "/bin/true") for _ in range(3)]
    forward = instance.command("qstat", "--header", "JobID:State", *map(str, jobids))
    backward = instance.command("qstat", "--reverse", "--header", "JobID:State",
                                *map(str, jobids))
    assert forward.returncode == backward.returncode == 0
    rows = forward.stdout.splitlines()[2:]
    assert [row.split()[0] for row in rows] == [str(j) for j in jobids]
    assert backward.stdout.splitlines()[2:] == rows[::-1]
    # Sorted on a column where all three tie: --reverse still gives the list backwards.
    tied = [instance.command("qstat", *flags, "--sort", "State", "--header", "JobID:State",
                             *map(str, jobids)).stdout.splitlines()[2:]
            for flags in ([], ["--reverse"])]
    assert tied[1] == tied[0][::-1] and tied[0] != tied[1]
    full = instance.command("qstat", "-f", *map(str, jobids))
    assert full.returncode == 0, full.stderr
    assert full.stdout.split("\n", 1)[0].split() == list(FULL_HEADER)
    assert [line.split()[0] for line in full.stdout.splitlines()[2:]] == list(map(str, jobids))
    assert instance.command("qdel", *map(str, jobids)).returncode == 0


def test_new_qsub_options_are_kept_and_shown(instance: Instance) -> None:
    workdir = instance.jobs_dir / "work"
    workdir.mkdir(exist_ok=True)
    (workdir / "input.txt").write_text("from the input file\n")
    jobid = instance.qsub("-h", "-n", "1", "-t", "5", "-d", str(workdir), "-i", "input.txt",
                          "--debuglog", "debug.log", "--preemptable", "--run_project",
                          "--disable_preboot", "--env", "RUN=out.$jobid", "-M", "me@site",
                          "--geometry", "4x4x4x2", "/bin/cat")
    fields = instance.long_listing(jobid)
    assert fields["OutputDir"] == str(workdir)
    assert fields["InputFile"] == str(workdir / "input.txt")
    assert fields["CobaltLog"] == str(workdir / "debug.log")
    assert fields["Preemptable"] == "True"
    assert (fields["Notify"], fields["Geometry"]) == ("me@site", "4x4x4x2")
    altered = instance.command("qalter", "-M", "you@site", str(jobid))
    assert altered.stdout == "notify changed from me@site to you@site\n", altered.stderr
    assert instance.long_listing(jobid)["Notify"] == "you@site"
    # $jobid in an --env value is the job's id, filled in by the queue manager.
    assert f"RUN=out.{jobid}" in fields["Envs"].split(":")
    instance.command("qdel", str(jobid))


def test_the_input_file_is_the_jobs_stdin(instance: Instance) -> None:
    workdir = instance.jobs_dir / "stdin"
    workdir.mkdir(exist_ok=True)
    (workdir / "input.txt").write_text("line one\nline two\n")
    jobid = instance.qsub("-n", "1", "-t", "5", "-d", str(workdir), "-i", "input.txt", "/bin/cat")
    done = instance.wait_for(jobid, {"done"}, timeout=30)
    assert done["exit_status"] == 0
    assert (workdir / f"{jobid}.output").read_text() == "line one\nline two\n"
    # An input file that is gone by the start fails the start and says why.
    (workdir / "gone.txt").write_text("")
    held = instance.qsub("-h", "-n", "1", "-t", "5", "-d", str(workdir), "-i", "gone.txt",
                         "/bin/cat")
    (workdir / "gone.txt").unlink()
    instance.command("qrls", str(held))
    instance.wait_for(held, {"done"}, timeout=30)
    assert f"cannot open input file {workdir / 'gone.txt'}" in (
        workdir / f"{held}.error").read_text()


def test_bad_qsub_options_exit_non_zero_and_submit_nothing(instance: Instance) -> None:
    before = instance.command("qstat").stdout
    for argv, status, message in (
        (["-i", "no-such-input", "/bin/cat"], 1, "not found, or is not a file"),
        (["-d", "/no/such/dir", "/bin/true"], 1, "directory /no/such/dir does not exist"),
        (["--preemptable=yes", "/bin/true"], 2, "--preemptable"),
        (["--geometry", "4x4", "/bin/true"], 1, "Invalid geometry entered: 4x4"),
        (["-q", "nosuchqueue", "/bin/true"], 1, "nosuchqueue"),
    ):
        ran = instance.command("qsub", "-n", "1", "-t", "5", *argv)
        assert ran.returncode == status, (argv, ran.stderr)
        assert message in ran.stderr and ran.stdout == ""
    assert instance.command("qstat").stdout == before



def test_time_zero_is_the_queues_maximum(instance: Instance) -> None:
    refused = instance.command("qsub", "-n", "1", "-t", "0", "/bin/true")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == ('qsub: No Max Walltime default or for queue "default" defined. '
                              "Please contact system administrator\n")
    for action in (["--addq", "capped"], ["--stopq", "capped"],
                   ["--setq", "maxtime=00:40:00", "capped"]):
        assert instance.command("cqadm", *action).returncode == 0
    jobid = instance.qsub("-q", "capped", "-n", "1", "-t", "0", "/bin/true")
    assert instance.long_listing(jobid)["WallTime"] == "00:40:00"
