"""End to end with the real daemons: submit, watch, run, delete, walltime, bad input."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance(machine="flat:4").start()
    yield running
    running.stop()


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_a_job_runs_and_its_output_and_exit_status_come_back(instance: Instance) -> None:
    job = script(instance.jobs_dir, "hello.sh",
                 'echo "hello from $COBALT_JOBID on $COBALT_PARTNAME size $COBALT_JOBSIZE"\n'
                 "echo oops >&2\nexit 3")
    jobid = instance.qsub("-n", "2", "-t", "5", str(job))
    done = instance.wait_for(jobid, {"done"})
    assert done["exit_status"] == 3
    output = (instance.jobs_dir / f"{jobid}.output").read_text()
    assert output == f"hello from {jobid} on {done['location']} size 2\n"
    assert (instance.jobs_dir / f"{jobid}.error").read_text() == "oops\n"
    assert "ended: exited, exit status 3" in (instance.jobs_dir / f"{jobid}.cobaltlog").read_text()
    log = (instance.state_dir / "log" / "accounting.log").read_text()
    assert f";Q;{jobid};" in log and f";S;{jobid};" in log and f";E;{jobid};" in log


def test_qstat_shows_queued_and_running_jobs(instance: Instance) -> None:
    sleeper = script(instance.jobs_dir, "sleep.sh", "sleep 30")
    running = instance.qsub("-n", "4", "-t", "5", str(sleeper))
    instance.wait_for(running, {"running"})
    queued = instance.qsub("-n", "4", "-t", "5", str(sleeper))
    shown = instance.command("qstat")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["JobID", "User", "WallTime", "Nodes", "State", "Location"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows[str(running)][4] == "running"
    assert rows[str(queued)][4] == "queued"
    # qdel of a queued job and of a running job
    deleted = instance.command("qdel", str(queued), str(running))
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted Jobs" in deleted.stdout
    assert instance.wait_for(queued, {"done"})["end_reason"] == "deleted"
    killed = instance.wait_for(running, {"done"}, timeout=20)
    assert killed["end_reason"] == "deleted"
    assert killed["exit_status"] != 0


def test_a_job_past_its_walltime_is_killed(instance: Instance) -> None:
    # -t takes minutes, HH:MM or HH:MM:SS; cobaltlite keeps the seconds Cobalt dropped.
    sleeper = script(instance.jobs_dir, "long.sh", "sleep 60")
    jobid = instance.qsub("-n", "1", "-t", "00:00:02", str(sleeper))
    done = instance.wait_for(jobid, {"done"}, timeout=30)
    assert done["end_reason"] == "walltime"
    log = (instance.state_dir / "log" / "accounting.log").read_text()
    assert f";A;{jobid};" in log


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "1", "-t", "5", "/no/such/script"], "not found"),
        (["-n", "99", "-t", "5", "/bin/true"], "node count"),
        (["-n", "1", "-t", "5", "-q", "nosuchqueue", "/bin/true"], "nosuchqueue"),
        (["-n", "0", "-t", "5", "/bin/true"], "node"),
        (["-n", "1", "-t", "5:99:00", "/bin/true"], "time"),
        (["-n", "1", "/bin/true"], "time"),
    ],
)
def test_bad_submissions_are_refused_clearly_and_the_daemons_keep_serving(
    instance: Instance, args: list[str], message: str
) -> None:
    ran = instance.command("qsub", *args)
    assert ran.returncode != 0
    assert message in ran.stderr.lower() or message in ran.stderr
    assert instance.command("qstat").returncode == 0


def test_a_script_that_is_not_executable_is_refused(instance: Instance) -> None:
    path = instance.jobs_dir / "noexec.sh"
    path.write_text("#!/bin/sh\ntrue\n")
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    ran = instance.command("qsub", "-n", "1", "-t", "5", str(path))
    assert ran.returncode != 0 and "executable" in ran.stderr


def test_qdel_of_an_unknown_job_says_so_and_fails(instance: Instance) -> None:
    ran = instance.command("qdel", "999999")
    assert ran.returncode != 0
    assert "999999" in ran.stderr


def test_cobalt_directives_in_a_script_are_honoured(instance: Instance) -> None:
    job = script(instance.jobs_dir, "directives.sh",
                 "#COBALT -n 3\n#COBALT -t 5\necho $COBALT_JOBSIZE")
    jobid = instance.qsub(str(job))
    instance.wait_for(jobid, {"done"})
    assert (instance.jobs_dir / f"{jobid}.output").read_text().strip() == "3"
    assert os.path.exists(instance.jobs_dir / f"{jobid}.cobaltlog")


def test_qsim_replays_the_live_accounting_log(instance: Instance, tmp_path: Path) -> None:
    """The queue manager's accounting log is a trace: every job that ran replays."""
    import subprocess
    import sys

    log = instance.state_dir / "log" / "accounting.log"
    ended = {line.split(";")[2] for line in log.read_text().splitlines() if ";E;" in line}
    ran = subprocess.run(
        [sys.executable, "-m", "cobaltlite.qsim.cli", "--trace", str(log), "--machine",
         "flat:4", "--out", str(tmp_path), "-q"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    import json

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["jobs_replayed"] == len(ended) > 0


def test_qstat_full_and_long_listings_show_every_column(instance: Instance) -> None:
    job = script(instance.jobs_dir, "named.sh", "sleep 20")
    jobid = instance.qsub("-n", "1", "-t", "5", "--jobname", "visible", str(job))
    full = instance.command("qstat", "-f", str(jobid))
    assert full.returncode == 0, full.stderr
    assert "visible" in full.stdout and "default" in full.stdout
    long = instance.command("qstat", "-f", "-l", str(jobid))
    assert "JobName" in long.stdout and "visible" in long.stdout
    assert instance.command("qdel", str(jobid)).returncode == 0


def test_the_metrics_monitor_samples_utilization_and_queue_depth(instance: Instance) -> None:
    """Seed 000's queue depth is the sum of the waits of all queued jobs."""
    import time as clock

    from cobaltlite.config import load_config
    from cobaltlite.rpc.peers import Peer

    sleeper = script(instance.jobs_dir, "hold4.sh", "sleep 15")
    running = instance.qsub("-n", "4", "-t", "5", str(sleeper))
    instance.wait_for(running, {"running"})
    queued = instance.qsub("-n", "2", "-t", "5", str(sleeper))
    clock.sleep(1.5)
    monitor = Peer(load_config(instance.state_dir), "metrics-monitor")
    sample = monitor.sample_now()
    assert sample["running"] == 1 and sample["queued"] == 1
    assert sample["utilization"] == 1.0  # 4 of 4 nodes busy
    assert sample["queue_depth"] >= 1.0  # the queued job has waited at least that long
    assert monitor.history(10)  # the periodic sampler (every second here) has run
    for jobid in (queued, running):
        instance.command("qdel", str(jobid))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("procs", "4", "procs '4' must be a whole number"),
    ("user_hold", 1, "user_hold 1 must be a true or false"),
    ("umask", 0o7777, "umask 7777 is not a file mode mask"),
    ("env", {"PATH": 5}, "env must map variable names to text values"),
    ("args", ["-v", 3], "args ['-v', 3] must be a list of text"),
    ("dependencies", "12", "dependencies '12' must be a list"),
])
def test_a_client_that_skips_qsub_cannot_store_mistyped_fields(
    instance: Instance, field: str, value: object, message: str
) -> None:
    """qsub checks its options, but any local program may call the user socket directly: the
    queue manager checks the types itself, so nothing mistyped reaches the database."""
    from cobaltlite.config import load_config
    from cobaltlite.rpc.client import connect

    socket = load_config(instance.state_dir).user_socket
    spec = {"nodes": 1, "walltime": 60, "command": "/bin/true", "cwd": "/tmp", field: value}
    with connect(f"PYRO:queue-manager-user@./u:{socket}") as api:
        before = len(api.jobs()["rows"])
        with pytest.raises(ValueError, match=message.replace("[", r"\[")):
            api.submit(spec)
        assert len(api.jobs()["rows"]) == before


def test_a_job_starts_with_no_signal_ignored(instance: Instance) -> None:
    """Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: a
    job's `producer | head` would then see write errors instead of ending quietly."""
    probe = script(instance.jobs_dir, "sigign.sh", "grep '^SigIgn' /proc/self/status")
    jobid = instance.qsub("-n", "1", "-t", "1", str(probe))
    instance.wait_for(jobid, {"done"})
    ignored = int((instance.jobs_dir / f"{jobid}.output").read_text().split()[1], 16)
    for signum in (13, 25):  # SIGPIPE, SIGXFSZ
        assert not ignored & (1 << (signum - 1)), f"signal {signum} is ignored in the job"
