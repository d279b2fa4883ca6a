"""Cobalt's partition phases in the live system, with real runners and real job processes.

A held block is `allocated` until its runner reports the job process started, `busy` while the
job runs, and `cleanup` while the runner kills what the job left behind (or what a qdel or the
wall time ends); it is freed only once no process of the job remains. The tests watch this as a
user would, through the system's partitions() (partlist), and check the processes in /proc.

A runner killed outright (SIGKILL) cannot clean up: the system service does it in its place,
killing what is left of the job's process group, and only of it, before it frees the block.

Leftover processes are made with `(trap '' TERM; exec sleep 300) &`: an ignored SIGTERM stays
ignored across exec, so such a process survives the runner's SIGTERM and dies only of the
SIGKILL sent `kill_grace` seconds later. That guarantees a cleanup phase at least that long,
which the tests observe without depending on timing luck.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import Instance, until

from cobaltlite.clock import WallClock
from cobaltlite.config import load_config
from cobaltlite.machine.catalog import load_description
from cobaltlite.rpc.peers import Peer
from cobaltlite.system import procfs
from cobaltlite.system.service import SystemService

KILL_GRACE = 3.0
PR_SET_CHILD_SUBREAPER = 36
LEFTOVER = "(trap '' TERM; exec sleep 300) &\necho $! > {pidfile}\n"



def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def exists(pid: int) -> bool:
    """Whether the process exists at all, zombie included: a leftover must be gone and reaped."""
    return Path(f"/proc/{pid}").exists()


def read_pid(path: Path) -> int:
    return int(until(lambda: path.exists() and path.read_text().strip(), 20, f"{path}"))


def group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    return [p.pid for p in procfs.processes() if not p.ended and p.pgrp == pgid]


def process_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


def states(rows: list[dict[str, Any]]) -> dict[str, str]:
    return {row["name"]: row["state"] for row in rows}


def settled(service: SystemService) -> dict[str, str]:
    """The block states after a poll: a place is freed only once its end is acknowledged."""
    service.poll()
    return states(service.partitions())


def phases(samples: list[dict[str, tuple[str, int | None]]], block: str) -> list[tuple[str, Any]]:
    """The successive distinct (state, jobid) of one block over the samples."""
    seen: list[tuple[str, Any]] = []
    for sample in samples:
        if not seen or seen[-1] != sample[block]:
            seen.append(sample[block])
    return seen


class Sampler:
    """Reads partitions() over and over in a thread, as a user running partlist in a loop."""

    def __init__(self, instance: Instance) -> None:
        self._system = Peer(load_config(instance.state_dir), "system")
        self.samples: list[dict[str, tuple[str, int | None]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="partlist", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rows = self._system.partitions()
            self.samples.append({r["name"]: (r["state"], r["jobid"]) for r in rows})
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# ---- the runner on its own ----------------------------------------------------------------


def runner_spec(tmp_path: Path, command: Path, walltime: float = 60) -> Path:
    spec = {
        "jobid": 5, "uid": os.getuid(), "gid": os.getgid(), "command": str(command),
        "args": [], "cwd": str(tmp_path), "env": {}, "umask": 0o022,
        "outputpath": str(tmp_path / "5.output"), "errorpath": str(tmp_path / "5.error"),
        "cobaltlog": str(tmp_path / "5.cobaltlog"), "walltime": walltime,
        "kill_grace": KILL_GRACE, "cobalt_env": {"COBALT_PARTNAME": "0"},
        "status_path": str(tmp_path / "5.status"), "started_path": str(tmp_path / "5.started"),
        "cleanup_path": str(tmp_path / "5.cleanup"),
    }
    path = tmp_path / "5.json"
    path.write_text(json.dumps(spec))
    return path


@contextlib.contextmanager
def runner(spec: Path) -> Iterator[subprocess.Popen[bytes]]:
    started = subprocess.Popen([sys.executable, "-m", "cobaltlite.system.runner", str(spec)],
                               start_new_session=True)
    try:
        yield started
    finally:
        if started.poll() is None:  # a failed test: end the job as qdel would, not orphan it
            started.terminate()
        started.wait(timeout=KILL_GRACE + 20)


def test_the_runner_kills_what_the_job_left_behind_before_it_writes_the_status(
        tmp_path: Path) -> None:
    # One leftover stays in the job's process group and ignores SIGTERM; another escapes the
    # group with setsid, as daemons do. Both must be gone before the status file exists.
    job = script(tmp_path / "job.sh",
                 LEFTOVER.format(pidfile=tmp_path / "stubborn.pid")
                 + f"setsid sleep 300 &\necho $! > {tmp_path / 'escaped.pid'}\nexit 3")
    status_path = tmp_path / "5.status"
    with runner(runner_spec(tmp_path, job)) as process:
        stubborn, escaped = read_pid(tmp_path / "stubborn.pid"), read_pid(tmp_path / "escaped.pid")
        until((tmp_path / "5.cleanup").exists, 20, "the cleanup marker")
        # The stubborn leftover ignores SIGTERM: it lives on through the grace period, and as
        # long as it does the runner must not report the end.
        assert exists(stubborn) and not status_path.exists()
        until(status_path.exists, KILL_GRACE + 20, "the status file")
        assert not exists(stubborn) and not exists(escaped), "a leftover outlived the job"
        assert process.wait(timeout=20) == 0
    status = json.loads(status_path.read_text())
    assert (status["exit_status"], status["reason"]) == (3, "exited")  # the main script's
    started = json.loads((tmp_path / "5.started").read_text())
    assert not exists(started["job_pid"])
    log = (tmp_path / "5.cobaltlog").read_text()
    assert "cleaning up (exited): signalling 2 process(es)" in log, log
    assert "ended: exited, exit status 3" in log, log


def test_the_runner_keeps_the_jobs_main_process_unreaped_until_nothing_of_the_job_is_left(
        tmp_path: Path) -> None:
    # The runner signals the job's process group by the main process's pid: were it to reap
    # the main process early, the pid could go to a stranger leading a group of that id while
    # the escapee below, outside the group, is still being killed.
    job = script(tmp_path / "job.sh",
                 f"(trap '' TERM; exec setsid sleep 300) &\necho $! > {tmp_path / 'escaped.pid'}"
                 "\nexit 3")
    status_path = tmp_path / "5.status"
    with runner(runner_spec(tmp_path, job)) as process:
        escaped = read_pid(tmp_path / "escaped.pid")
        until((tmp_path / "5.cleanup").exists, 20, "the cleanup marker")
        main = json.loads((tmp_path / "5.started").read_text())["job_pid"]
        # The escapee ignores SIGTERM, so the cleanup lasts the grace period: time to look.
        assert procfs.stat(escaped) is not None and not status_path.exists()
        assert procfs.stat(main) == (main, "Z", process.pid, main), (
            "the job's main process should stay the runner's zombie through the cleanup")
        until(status_path.exists, KILL_GRACE + 20, "the status file")
        assert not exists(escaped), "the escapee outlived the job, or was left a zombie"
        assert process.wait(timeout=20) == 0
        assert not exists(main)
    status = json.loads(status_path.read_text())
    assert (status["exit_status"], status["reason"]) == (3, "exited")  # the main script's


def test_a_runner_killed_before_it_records_the_start_leaves_the_job_unrun(
        tmp_path: Path, orphans: list[int]) -> None:
    # The runner writes the started marker through `5.started.tmp`: a FIFO there, which no one
    # reads, holds the runner in open() right after the fork, before the marker exists.
    os.mkfifo(tmp_path / "5.started.tmp")
    ran = tmp_path / "ran"
    job = script(tmp_path / "job.sh", f"touch {ran}")
    with runner(runner_spec(tmp_path, job)) as process:
        forked = until(lambda: [p.pid for p in procfs.processes() if p.ppid == process.pid],
                       20, "the runner to fork the job process")
        orphans.extend(forked)  # this test process adopts it once the runner is gone
        time.sleep(0.5)  # time for the job process to run the job, were it to go on its own
        process.kill()
    (job_process,) = forked
    _, wait_status = os.waitpid(job_process, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 127
    assert not ran.exists(), "the job ran though the system was never told it started"
    assert not (tmp_path / "5.started").exists()


def test_procfs_reads_a_command_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    # The command name, between parentheses in /proc/<pid>/stat, is the program's file name.
    odd = tmp_path / "a) b (c"
    odd.symlink_to("/bin/sleep")
    sleeper = subprocess.Popen([str(odd), "300"], start_new_session=True)
    try:
        until(lambda: Path(f"/proc/{sleeper.pid}/comm").read_text() == "a) b (c\n", 10,
              "the exec")
        found = procfs.stat(sleeper.pid)
        assert found is not None and found[2:] == (os.getpid(), sleeper.pid), found
        assert found.state in "RS" and not found.ended
        assert sleeper.pid in [proc.pid for proc in procfs.processes()]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert procfs.stat(sleeper.pid) is None


def test_a_job_that_leaves_nothing_behind_ends_without_a_cleanup_phase(tmp_path: Path) -> None:
    job = script(tmp_path / "job.sh", "exit 0")
    with runner(runner_spec(tmp_path, job)) as process:
        assert process.wait(timeout=20) == 0
    assert json.loads((tmp_path / "5.status").read_text())["exit_status"] == 0
    assert (tmp_path / "5.started").exists() and not (tmp_path / "5.cleanup").exists()


def test_a_fifo_for_the_cobaltlog_does_not_hold_the_runner_before_the_job_starts(
        tmp_path: Path) -> None:
    # The user names the .cobaltlog (qsub -O); a FIFO with no reader must not block the runner
    # (root) in open(), which would keep the block `allocated` out of reach of qdel.
    os.mkfifo(tmp_path / "5.cobaltlog")
    job = script(tmp_path / "job.sh", "exit 4")
    with runner(runner_spec(tmp_path, job)) as process:
        assert process.wait(timeout=20) == 0
    assert json.loads((tmp_path / "5.status").read_text())["exit_status"] == 4


def test_a_kill_request_to_the_runner_ends_the_whole_job_then_reports_it(tmp_path: Path) -> None:
    job = script(tmp_path / "job.sh",
                 LEFTOVER.format(pidfile=tmp_path / "stubborn.pid") + "sleep 300")
    with runner(runner_spec(tmp_path, job)) as process:
        stubborn = read_pid(tmp_path / "stubborn.pid")
        main = json.loads(until(lambda: (tmp_path / "5.started").exists()
                                and (tmp_path / "5.started").read_text(), 20, "start"))["job_pid"]
        os.kill(process.pid, signal.SIGTERM)  # what the system's kill() sends (qdel)
        until((tmp_path / "5.cleanup").exists, 20, "the cleanup marker")
        until((tmp_path / "5.status").exists, KILL_GRACE + 20, "the status file")
        assert not exists(main) and not exists(stubborn)
        assert process.wait(timeout=20) == 0
    status = json.loads((tmp_path / "5.status").read_text())
    assert status["reason"] == "deleted"
    assert status["exit_status"] == -signal.SIGTERM  # the main script died of the SIGTERM


def test_the_wall_time_ends_the_job_through_the_cleanup_phase(tmp_path: Path) -> None:
    job = script(tmp_path / "job.sh",
                 LEFTOVER.format(pidfile=tmp_path / "stubborn.pid") + "sleep 300")
    with runner(runner_spec(tmp_path, job, walltime=1)) as process:
        stubborn = read_pid(tmp_path / "stubborn.pid")
        assert process.wait(timeout=KILL_GRACE + 20) == 0
        assert not exists(stubborn)
    assert json.loads((tmp_path / "5.cleanup").read_text())["reason"] == "walltime"
    assert json.loads((tmp_path / "5.status").read_text())["reason"] == "walltime"


# ---- the system service in-process, with real runners ---------------------------------------


def job_spec(tmp_path: Path, jobid: int, command: Path, nodes: int) -> dict[str, Any]:
    return {"jobid": jobid, "uid": os.getuid(), "gid": os.getgid(), "user": "root",
            "command": str(command), "args": [], "cwd": str(tmp_path), "env": {},
            "umask": 0o022, "outputpath": str(tmp_path / f"{jobid}.output"),
            "errorpath": str(tmp_path / f"{jobid}.error"),
            "cobaltlog": str(tmp_path / f"{jobid}.cobaltlog"), "walltime": 60, "nodes": nodes}


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie waiting for its parent counts as ended)."""
    try:
        return process_state(pid) in "ZX"
    except OSError:
        return True


def end_runners(state_dir: Path) -> None:
    """Stop every runner still recorded, the way qdel does, so no job process outlives a test."""
    pids = [json.loads(r.read_text()).get("runner_pid")
            for r in (state_dir / "system").glob("*.json")]
    for pid in filter(None, pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # a stopped runner would hold the SIGTERM pending
            os.kill(pid, signal.SIGTERM)
    for pid in filter(None, pids):
        until(functools.partial(gone, pid), KILL_GRACE + 20, f"runner {pid} to end")


@pytest.fixture()
def services(tmp_path: Path) -> Iterator[list[SystemService]]:
    """System services on bgp-2rack over one state dir; their runners end with the test."""
    made: list[SystemService] = []
    yield made
    end_runners(tmp_path)
    for service in made:
        for popen in service._popen.values():
            popen.wait(timeout=20)


def new_service(services: list[SystemService], tmp_path: Path,
                ends: list[tuple[int, int | None, str]]) -> SystemService:
    def report(jobid: int, exit_status: int | None, reason: str, _end: float) -> bool:
        ends.append((jobid, exit_status, reason))
        return True

    service = SystemService(load_description("bgp-2rack"), tmp_path, WallClock(), report,
                            kill_grace=KILL_GRACE)
    services.append(service)
    return service


def test_a_block_is_allocated_until_the_runner_reports_the_job_started(
        tmp_path: Path, services: list[SystemService]) -> None:
    ends: list[tuple[int, int | None, str]] = []
    service = new_service(services, tmp_path, ends)
    job = script(tmp_path / "job.sh", "sleep 300")
    assert service.launch(1, "ANL-R00-1024", job_spec(tmp_path, 1, job, 1024)) == 1024
    # Freeze the runner at once: a new Python process needs far longer to reach its fork than
    # this takes, and while it is stopped nothing can move the block out of `allocated`.
    runner_pid = json.loads((tmp_path / "system" / "1.json").read_text())["runner_pid"]
    os.kill(runner_pid, signal.SIGSTOP)
    until(lambda: process_state(runner_pid) == "T", 10, "the runner to stop")
    assert not (tmp_path / "system" / "1.started").exists(), "the runner forked before SIGSTOP"
    service.poll()
    shown = states(service.partitions())
    assert shown == {
        "ANL-R00-1024": "allocated",
        "ANL-R00-M0-512": "blocked (ANL-R00-1024)",
        "ANL-R00-M1-512": "blocked (ANL-R00-1024)",
        "ANL-R00-R01-2048": "blocked (ANL-R00-1024)",
        "ANL-R01-1024": "blocked-wiring (ANL-R00-1024)",
        "ANL-R01-M0-512": "idle",
        "ANL-R01-M1-512": "idle",
    }
    assert service.job_status(1) == "running"
    os.kill(runner_pid, signal.SIGCONT)
    until(lambda: states(service.partitions())["ANL-R00-1024"] == "busy", 20, "busy")
    assert service.kill(1)
    until(lambda: states(service.partitions())["ANL-R00-1024"] == "cleanup", 20, "cleanup")
    assert states(service.partitions())["ANL-R01-1024"] == "blocked-wiring (ANL-R00-1024)"
    until(lambda: set(settled(service).values()) == {"idle"}, KILL_GRACE + 20,
          "every block idle")
    service.poll()
    assert ends == [(1, -signal.SIGTERM, "deleted")]
    assert not list((tmp_path / "system").iterdir()), "a job file outlived the acknowledged end"


def test_a_restarted_system_shows_each_readopted_block_in_its_phase(
        tmp_path: Path, services: list[SystemService]) -> None:
    ends: list[tuple[int, int | None, str]] = []
    first = new_service(services, tmp_path, ends)
    running = script(tmp_path / "run.sh", "sleep 300")
    ending = script(tmp_path / "end.sh", LEFTOVER.format(pidfile=tmp_path / "left.pid"))
    first.launch(1, "ANL-R00-M0-512", job_spec(tmp_path, 1, running, 512))
    first.launch(2, "ANL-R01-M1-512", job_spec(tmp_path, 2, ending, 512))
    until(lambda: states(first.partitions())["ANL-R00-M0-512"] == "busy", 20, "job 1 busy")
    until(lambda: states(first.partitions())["ANL-R01-M1-512"] == "cleanup", 20, "job 2 cleanup")
    # The system daemon dies (its runners live on in their own sessions) and starts again.
    restarted = new_service(services, tmp_path, ends)
    shown = states(restarted.partitions())
    assert shown["ANL-R00-M0-512"] == "busy"
    assert shown["ANL-R01-M1-512"] == "cleanup"
    assert shown["ANL-R01-1024"] == "blocked (ANL-R01-M1-512)"
    leftover = read_pid(tmp_path / "left.pid")
    until(lambda: settled(restarted)["ANL-R01-M1-512"] == "idle", KILL_GRACE + 20,
          "job 2's block freed")
    assert not exists(leftover)
    restarted.poll()
    assert ends == [(2, 0, "exited")]
    assert sorted(p.name for p in (tmp_path / "system").iterdir()) == ["1.json", "1.started"]


def test_a_launch_whose_record_cannot_be_written_leaves_no_place_held(
        tmp_path: Path, services: list[SystemService]) -> None:
    # A full disk would do; as root no permission stops the write, but a directory where the
    # record's temporary copy goes makes its open() fail.
    ends: list[tuple[int, int | None, str]] = []
    service = new_service(services, tmp_path, ends)
    (tmp_path / "system" / "1.json.tmp").mkdir()
    job = script(tmp_path / "job.sh", "exit 0")
    with pytest.raises(ValueError, match="job 1: cannot record its launch"):
        service.launch(1, "ANL-R00-1024", job_spec(tmp_path, 1, job, 1024))
    assert set(states(service.partitions()).values()) == {"idle"}
    assert service.allocations() == [] and service.job_status(1) == "unknown"
    assert not (tmp_path / "system" / "1.json").exists()
    # The place is free for the next job, which runs.
    (tmp_path / "system" / "1.json.tmp").rmdir()
    assert service.launch(2, "ANL-R00-1024", job_spec(tmp_path, 2, job, 1024)) == 1024
    until(lambda: ends or service.poll(), 20, "job 2's end")
    assert ends == [(2, 0, "exited")]


def test_a_restarted_system_signals_its_readopted_runners_and_never_a_stranger_with_their_pid(
        tmp_path: Path, services: list[SystemService]) -> None:
    ends: list[tuple[int, int | None, str]] = []
    first = new_service(services, tmp_path, ends)
    running = script(tmp_path / "run.sh", "sleep 300")
    # Job 2's runner dies before it forks (stopped at once: see the first test of the service)
    # while the system is down, and its pid goes to a stranger (written into the record below:
    # a real reuse cannot be timed).
    first.launch(2, "ANL-R01-M1-512", job_spec(tmp_path, 2, running, 512))
    runner_pid = runner_of(tmp_path, 2)
    os.kill(runner_pid, signal.SIGSTOP)
    until(lambda: process_state(runner_pid) == "T", 10, "the runner to stop")
    assert not (tmp_path / "system" / "2.started").exists(), "the runner forked before SIGSTOP"
    os.kill(runner_pid, signal.SIGKILL)
    until(functools.partial(gone, runner_pid), 20, "the runner to die")
    first.launch(1, "ANL-R00-1024", job_spec(tmp_path, 1, running, 1024))
    until(lambda: states(first.partitions())["ANL-R00-1024"] == "busy", 20, "job 1 busy")
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        record = tmp_path / "system" / "2.json"
        record.write_text(json.dumps({**json.loads(record.read_text()),
                                      "runner_pid": stranger.pid}))
        restarted = new_service(services, tmp_path, ends)
        assert not restarted.kill(2), "job 2 has no runner any more: there is nothing to kill"
        assert restarted.kill(1)  # qdel of the re-adopted job reaches its runner
        until(lambda: settled(restarted)["ANL-R00-1024"] == "idle",
              KILL_GRACE + 20, "job 1's block freed")
        restarted.poll()
        assert sorted(ends) == [(1, -signal.SIGTERM, "deleted"), (2, None, "lost")]
        time.sleep(0.2)  # time for a signal, had one been sent, to take effect
        assert stranger.poll() is None, "the service signalled a process that is not a runner"
    finally:
        stranger.kill()
        stranger.wait()


# ---- the live system, every component a process ---------------------------------------------


@pytest.fixture()
def bgp() -> Iterator[Instance]:
    running = Instance(machine="bgp-2rack", settings={"kill_grace": KILL_GRACE}).start()
    try:
        yield running
    finally:
        # Instance.stop() SIGKILLs leftover runners, which would orphan their jobs.
        end_runners(running.state_dir)
        running.stop()


def test_a_block_is_freed_only_after_the_processes_its_job_left_behind_are_gone(
        bgp: Instance) -> None:
    leftover_file = bgp.jobs_dir / "leftover.pid"
    job = script(bgp.jobs_dir / "leaves.sh",
                 LEFTOVER.format(pidfile=leftover_file) + "sleep 1\nexit 3")
    with Sampler(bgp) as sampler:
        jobid = bgp.qsub("-n", "1024", "-t", "5", str(job))
        done = bgp.wait_for(jobid, {"done"}, timeout=KILL_GRACE + 30)
        # The end is reported only after the release; one more read shows the block freed.
        until(lambda: sampler.samples and sampler.samples[-1]["ANL-R00-1024"][0] == "idle", 10,
              "a sample after the end")
    assert (done["exit_status"], done["end_reason"]) == (3, "exited")
    assert done["location"] == "ANL-R00-1024"
    assert not exists(int(leftover_file.read_text())), "the leftover outlived its job"
    seen = phases(sampler.samples, "ANL-R00-1024")
    held = [state for state, holder in seen if holder == jobid]
    assert held[-2:] == ["busy", "cleanup"] and set(held) <= {"allocated", "busy", "cleanup"}, seen
    assert seen[-1] == ("idle", None), seen
    # While the leftover was being killed, the neighbours stayed blocked by the held block.
    during = [s for s in sampler.samples if s["ANL-R00-1024"] == ("cleanup", jobid)]
    assert len(during) > 1, "cleanup lasts at least the kill grace: the sampler should see it"
    for sample in during:
        assert sample["ANL-R01-1024"] == ("blocked-wiring (ANL-R00-1024)", None)
        assert sample["ANL-R00-M0-512"] == ("blocked (ANL-R00-1024)", None)
        assert sample["ANL-R00-R01-2048"] == ("blocked (ANL-R00-1024)", None)
    assert "cleaning up (exited)" in (bgp.jobs_dir / f"{jobid}.cobaltlog").read_text()


def test_qdel_frees_the_block_after_cleanup_and_no_queued_job_starts_there_before(
        bgp: Instance) -> None:
    first_leftover = bgp.jobs_dir / "first.pid"
    first = script(bgp.jobs_dir / "first.sh",
                   LEFTOVER.format(pidfile=first_leftover) + "sleep 300")
    # The second job records, as its first act, whether the first job's leftover still exists.
    second = script(bgp.jobs_dir / "second.sh",
                    f'if [ -e /proc/$(cat {first_leftover}) ]; then echo alive; '
                    f'else echo gone; fi > {bgp.jobs_dir / "second.saw"}')
    whole = "ANL-R00-R01-2048"
    holder = bgp.qsub("-n", "2048", "-t", "5", str(first))
    bgp.wait_for(holder, {"running"})
    leftover = read_pid(first_leftover)
    waiting = bgp.qsub("-n", "2048", "-t", "5", str(second))
    with Sampler(bgp) as sampler:
        until(lambda: sampler.samples, 10, "a first sample")
        assert bgp.job(waiting)["state"] == "queued"
        deleted = bgp.command("qdel", str(holder))
        assert deleted.returncode == 0, deleted.stderr
        killed = bgp.wait_for(holder, {"done"}, timeout=KILL_GRACE + 30)
        ran = bgp.wait_for(waiting, {"done"}, timeout=30)
        until(lambda: sampler.samples[-1][whole] == ("idle", None), 10, "the block idle again")
    assert killed["end_reason"] == "deleted"
    assert not exists(leftover)
    assert (bgp.jobs_dir / "second.saw").read_text() == "gone\n", (
        "the queued job started while the deleted job's leftover still ran on the block")
    assert ran["exit_status"] == 0 and ran["starttime"] >= killed["endtime"]
    seen = phases(sampler.samples, whole)
    first_cleanup = seen.index(("cleanup", holder))
    assert seen[first_cleanup - 1] == ("busy", holder), seen
    after = seen[first_cleanup + 1]
    # The block is idle before anything else: the sampler sees that instant unless the
    # scheduler placed the queued job within one sample period; it never sees it earlier.
    assert after == ("idle", None) or (after[1] == waiting and after[0] in {"allocated", "busy"}), (
        seen)
    assert all(holder_ != waiting for _, holder_ in seen[:first_cleanup + 1]), seen
    assert seen[-1] == ("idle", None), seen
    # Every other block stayed blocked by the held block until it was freed.
    for sample in sampler.samples:
        if sample[whole] == ("cleanup", holder):
            assert sample["ANL-R00-1024"] == (f"blocked ({whole})", None)


# ---- a runner killed outright: the system service cleans up in its place --------------------


@pytest.fixture()
def orphans() -> Iterator[list[int]]:
    """The processes of jobs whose runner a test kills. This process adopts them as child
    subreaper while the test runs (this container's pid 1 reaps no orphan: each would stay a
    zombie for good), kills any the system failed to end (a failed test), and reaps them all."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip("cannot become a child subreaper (prctl failed)")
    pids: list[int] = []
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def runner_of(tmp_path: Path, jobid: int) -> int:
    return json.loads((tmp_path / "system" / f"{jobid}.json").read_text())["runner_pid"]


def polled_state(service: SystemService, block: str) -> str:
    """One turn of the system daemon's poll loop, then the block's state as partlist shows it."""
    service.poll()
    return states(service.partitions())[block]


def start_job_with_leftover(service: SystemService, tmp_path: Path, jobid: int, block: str,
                            orphans: list[int]) -> tuple[int, list[int]]:
    """Launch on `block` (1024 nodes) a job that runs `sleep 300` beside a leftover that ignores
    SIGTERM; once all three processes run, return the leftover's pid and every process of the
    job, which `orphans` gets to reap."""
    pidfile = tmp_path / f"{jobid}.leftover"
    job = script(tmp_path / f"{jobid}.sh", LEFTOVER.format(pidfile=pidfile) + "sleep 300")
    service.launch(jobid, block, job_spec(tmp_path, jobid, job, 1024))
    stubborn = read_pid(pidfile)
    started = tmp_path / "system" / f"{jobid}.started"
    job_pid = json.loads(until(lambda: started.exists() and started.read_text(), 20,
                               "the started marker"))["job_pid"]

    def all_three() -> list[int]:
        members = group(job_pid)  # the shell, its `sleep 300` and the leftover
        return members if len(members) == 3 else []

    members = until(all_three, 20, "the job's three processes")
    orphans.extend(members)
    return stubborn, members


def watch_cleanup(service: SystemService, block: str, jobid: int,
                  ends: list[tuple[int, int | None, str]], members: list[int]) -> float:
    """Run the poll loop until the job's end is reported. The block must stay in cleanup while
    any process of the job lives, be freed only once none does, and the end come only after
    that; no poll may wait for the processes to die. Return when the block was seen freed."""
    freed: float | None = None
    deadline = time.monotonic() + KILL_GRACE + 20
    while not any(ended == jobid for ended, _, _ in ends):
        assert time.monotonic() < deadline, f"job {jobid}'s end was never reported"
        began = time.monotonic()
        service.poll()
        took = time.monotonic() - began
        assert took < KILL_GRACE / 3, f"a poll took {took:.1f} s: it waited for the kill"
        reported = any(ended == jobid for ended, _, _ in ends)
        state = states(service.partitions())[block]
        alive = [pid for pid in members if not gone(pid)]  # read after the state: see below
        if state == "cleanup":
            assert not reported, "the end was reported while the block was in cleanup"
        else:
            # Processes do not come back to life: any alive now was alive when the block was
            # freed, which must not happen.
            assert state == "idle" and not alive, (state, alive)
            freed = freed or time.monotonic()
        time.sleep(0.1)
    assert freed is not None
    return freed


def test_the_system_kills_what_a_killed_runner_left_before_it_frees_the_block(
        tmp_path: Path, services: list[SystemService], orphans: list[int]) -> None:
    ends: list[tuple[int, int | None, str]] = []
    service = new_service(services, tmp_path, ends)
    block = "ANL-R00-1024"
    stubborn, members = start_job_with_leftover(service, tmp_path, 1, block, orphans)
    # Another job, on a block of its own, ends during the cleanup: its end must not wait.
    go = tmp_path / "go"
    other = script(tmp_path / "other.sh", f"while [ ! -e {go} ]; do sleep 0.05; done")
    service.launch(2, "ANL-R01-M1-512", job_spec(tmp_path, 2, other, 512))
    killed = time.monotonic()
    os.kill(runner_of(tmp_path, 1), signal.SIGKILL)  # the runner cannot clean up
    until(lambda: polled_state(service, block) == "cleanup", 20, "the block in cleanup")
    assert service.job_status(1) == "running" and ends == []
    assert not gone(stubborn), "the leftover ignores SIGTERM: it lives through the grace period"
    go.touch()
    freed = watch_cleanup(service, block, 1, ends, members)
    assert ends == [(2, 0, "exited"), (1, None, "lost")]
    assert freed - killed >= KILL_GRACE, "the leftover died before the SIGKILL was due"
    assert set(states(service.partitions()).values()) == {"idle"}
    assert not list((tmp_path / "system").iterdir()), "a job file outlived the acknowledged end"


@pytest.mark.parametrize("restart", ["while the system is down", "during the cleanup"])
def test_a_restarted_system_kills_what_a_killed_runner_left_before_it_frees_the_block(
        tmp_path: Path, services: list[SystemService], orphans: list[int], restart: str) -> None:
    ends: list[tuple[int, int | None, str]] = []
    first = new_service(services, tmp_path, ends)
    block = "ANL-R00-1024"
    stubborn, members = start_job_with_leftover(first, tmp_path, 1, block, orphans)
    runner_pid = runner_of(tmp_path, 1)
    os.kill(runner_pid, signal.SIGKILL)
    if restart == "during the cleanup":
        until(lambda: polled_state(first, block) == "cleanup", 20, "the block in cleanup")
    else:
        # The system daemon died first (the first service never polls again): the runner is
        # gone by the time the system starts again.
        until(functools.partial(gone, runner_pid), 20, "the runner to die")
    restarted = new_service(services, tmp_path, ends)
    assert polled_state(restarted, block) == "cleanup"
    assert restarted.job_status(1) == "running" and ends == []
    assert not gone(stubborn)
    watch_cleanup(restarted, block, 1, ends, members)
    assert ends == [(1, None, "lost")]
    assert set(states(restarted.partitions()).values()) == {"idle"}


def test_a_started_marker_naming_a_stranger_never_gets_the_stranger_signalled(
        tmp_path: Path, services: list[SystemService]) -> None:
    ends: list[tuple[int, int | None, str]] = []
    service = new_service(services, tmp_path, ends)
    block = "ANL-R00-1024"
    # The worst case of a reused pid: the stranger leads a process group of that id, and it
    # even carries a job id, another job's (11, which begins like 1).
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True,
                                env={**os.environ, "COBALT_JOBID": "11"})
    try:
        job = script(tmp_path / "job.sh", "sleep 300")
        service.launch(1, block, job_spec(tmp_path, 1, job, 1024))
        # Stop the runner before it forks (see the first test above), forge its started marker,
        # and kill it: the service finds a runner gone and a started job it must clean up.
        runner_pid = runner_of(tmp_path, 1)
        os.kill(runner_pid, signal.SIGSTOP)
        until(lambda: process_state(runner_pid) == "T", 10, "the runner to stop")
        started = tmp_path / "system" / "1.started"
        assert not started.exists(), "the runner forked before SIGSTOP"
        started.write_text(json.dumps({"jobid": 1, "job_pid": stranger.pid}))
        os.kill(runner_pid, signal.SIGKILL)
        until(lambda: polled_state(service, block) == "idle", 20, "the block freed")
        service.poll()
        assert ends == [(1, None, "lost")]
        time.sleep(0.2)  # time for a signal, had one been sent, to take effect
        assert stranger.poll() is None and process_state(stranger.pid) in "RS", (
            "the service signalled a process that is not the job's")
    finally:
        stranger.kill()
        stranger.wait()
