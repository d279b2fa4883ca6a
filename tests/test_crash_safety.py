"""Crash safety with the real daemons: kill -9 each component under load, restart it, lose nothing.

The main test (`test_kill_9_of_every_component_under_load_loses_no_job`) keeps a submitter
thread running `qsub` in a loop while the components are killed with SIGKILL one after the
other (system, queue manager, scheduler, metrics monitor; the pid in the pid file, that process
only) and restarted with `cobaltlite up`. Then it checks the database and the accounting log.

The reconciliation rule, as this test observes it (see RULE below for the text that goes into
the assertion messages):

* A submission is acknowledged (qsub exits 0 and prints the id) only after its commit; while the
  queue manager is down qsub fails with exit status 1 and nothing is stored. Every acknowledged
  id is in the database once, ids grow, and nothing is half-written.
* Job runners live in sessions of their own, so killing the system daemon kills no job. The
  restarted system re-reads its launch records: a runner that still lives is re-adopted (its
  nodes are held again), a runner that ended meanwhile left a status file whose exit status is
  reported; a runner gone without a status is reported with end reason "lost". End reports are
  retried until the queue manager acknowledges them, so an end that happens while the queue
  manager is down is delivered after its restart, with the runner's exit status and end time.
* The restarted queue manager settles jobs caught mid-transition before it serves anyone:
  `starting` becomes `running` if the system holds the job and goes back to `queued` if the
  system never launched it; `running`/`killing` jobs the system does not know end as "lost".
* The scheduler and the metrics monitor hold no state of their own: the scheduler rebuilds its
  view of the machine from the system at each pass, so its restart changes nothing but delay.
* In the runs made while writing this test no job ended "lost": every acknowledged job ran to
  completion and kept its script's exit status. The test accepts "lost" (with no exit status)
  for the windows that produce it, and names every such job in its report.

On a host whose pid 1 does not reap orphans (this container's init does not), a SIGKILLed daemon
stays a zombie. `cobaltlite up` does not mind (a component counts as running only while it holds
the lock on its pid file, which the kernel drops at death), but the fixture still makes this
process a child subreaper and reaps what it kills, as systemd or any ordinary init would, so
no zombie outlives the test.

The tests at the end reproduce bugs found on the way (stale pid files, a start record lost in a
restart, a runner whose pid was not yet recorded); they failed before the fixes.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import itertools
import json
import os
import random
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from live import Instance

from cobaltlite.config import load_config
from cobaltlite.machine.bits import ranges_to_mask
from cobaltlite.queue_manager.store import JobStore
from cobaltlite.system import procfs

MACHINE_NODES = 8
KILL_ORDER = ("system", "queue-manager", "scheduler", "metrics-monitor")
SLEEPS = (0.2, 0.5, 1.0, 1.5, 2.0)
EXIT_CODES = (0, 0, 0, 1, 3, 7)
SUBMIT_LEAD = 3.0  # seconds of load before the first kill
KILL_GAP = 3.0  # seconds between one component's restart and the next kill
DOWN_TIME = 1.0  # seconds a killed component stays down
DRAIN_TIMEOUT = 90.0
ACTIVE = {"queued", "starting", "running", "killing", "exiting"}
RULE = ("rule: acknowledged => committed; runners outlive the system and are re-adopted; ends "
        "are retried until acknowledged; starting -> running if the system holds the job, else "
        "queued; running unknown to the system -> done, end_reason 'lost', exit_status None")

PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def _zombie_children() -> list[int]:
    me = os.getpid()
    return [p.pid for p in procfs.processes() if p.state == "Z" and p.ppid == me]


def _reap(pid: int, timeout: float = 10.0) -> None:
    """Wait for `pid` to die, reaping it if it is (now) our child; fail if it lingers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:  # not our child: someone else reaps it, or it is gone
            if not Path(f"/proc/{pid}").exists():
                return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} did not go away within {timeout} s after SIGKILL")


def _reap_zombies() -> None:
    """Reap runners and daemons adopted while we were subreaper (only once no subprocess of ours
    is in flight: reaping one of those would hide its exit status from subprocess)."""
    for pid in _zombie_children():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


@pytest.fixture()
def instance() -> Iterator[Instance]:
    if not _set_subreaper(True):
        pytest.skip("cannot become a child subreaper (prctl failed)")
    running = None
    try:
        running = Instance(machine=f"flat:{MACHINE_NODES}",
                           settings={"scheduler_interval": 1, "kill_grace": 1}).start()
        yield running
    finally:
        if running is not None:
            daemons = [_read_pid(running, c) for c in KILL_ORDER]
            running.stop()
            for pid in daemons:
                if pid:
                    with contextlib.suppress(AssertionError):
                        _reap(pid, timeout=5)
        _reap_zombies()
        _set_subreaper(False)


def _read_pid(instance: Instance, component: str) -> int | None:
    try:
        return int((instance.state_dir / "run" / f"{component}.pid").read_text())
    except (OSError, ValueError):
        return None


def _count_states(instance: Instance) -> dict[str, int]:
    store = JobStore(load_config(instance.state_dir).database_url)
    try:
        counts: dict[str, int] = {}
        for row in store.jobs(states=sorted(ACTIVE)):
            counts[row["state"]] = counts.get(row["state"], 0) + 1
        return counts
    finally:
        store.close()


# ---- the submitter ------------------------------------------------------------------------


@dataclass
class Submitted:
    jobid: int
    nodes: int
    sleep: float
    exit_code: int
    acknowledged_at: float


@dataclass
class Submitter:
    instance: Instance
    script: Path
    seed: int = 20240601
    acknowledged: list[Submitted] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng = random.Random(self.seed)
        while not self.stop.is_set():
            nodes, sleep, code = rng.randint(1, 3), rng.choice(SLEEPS), rng.choice(EXIT_CODES)
            try:
                ran = self.instance.command("qsub", "-n", str(nodes), "-t", "00:01:00",
                                            str(self.script), str(sleep), str(code))
            except subprocess.TimeoutExpired:
                self.refused.append("timeout")
                continue
            out = ran.stdout.strip()
            if ran.returncode == 0 and out.isdigit():
                self.acknowledged.append(Submitted(int(out), nodes, sleep, code, time.time()))
            else:
                self.refused.append(f"exit {ran.returncode}: {ran.stderr.strip()[-200:]}")
                time.sleep(0.1)


# ---- the accounting log --------------------------------------------------------------------


def read_accounting(path: Path) -> dict[int, dict[str, list[dict[str, str]]]]:
    """{jobid: {record type: [fields, ...]}}; values are unquoted as format_record quotes them."""
    records: dict[int, dict[str, list[dict[str, str]]]] = {}
    for line in path.read_text().splitlines():
        parts = line.split(";", 3)
        if len(parts) < 4:
            continue
        _stamp, kind, ident, message = parts
        fields = dict(token.split("=", 1) for token in shlex.split(message))
        records.setdefault(int(ident), {}).setdefault(kind, []).append(fields)
    return records


def overlaps(intervals: list[tuple[int, float, float, int]]) -> list[str]:
    """Pairs of (jobid, start, end, node mask) that held a node at the same time (half-open)."""
    found = []
    ordered = sorted(intervals, key=lambda i: i[1])
    for k, (a, a_start, a_end, a_mask) in enumerate(ordered):
        for b, b_start, b_end, b_mask in ordered[k + 1:]:
            if b_start >= a_end:
                break
            if a_mask & b_mask and a_start < b_end:
                found.append(f"jobs {a} [{a_start}, {a_end}) and {b} [{b_start}, {b_end}) "
                             f"share nodes {bin(a_mask & b_mask)}")
    return found


# ---- the test ------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_of_every_component_under_load_loses_no_job(instance: Instance) -> None:
    began = time.monotonic()
    script = instance.jobs_dir / "work.sh"
    script.write_text('#!/bin/sh\nsleep "$1"\nexit "$2"\n')
    script.chmod(0o755)
    submitter = Submitter(instance, script)
    # One job sure to outlive the system's downtime, so a restart must re-adopt a runner.
    long_job = instance.qsub("-n", "1", "-t", "00:01:00", str(script), "8", "5")
    submitter.acknowledged.append(Submitted(long_job, 1, 8.0, 5, time.time()))
    instance.wait_for(long_job, {"running"})
    thread = threading.Thread(target=submitter.run, name="submitter", daemon=True)
    thread.start()
    events: list[str] = []
    listed_twice: list[str] = []
    try:
        time.sleep(SUBMIT_LEAD)
        for component in KILL_ORDER:
            pid = _read_pid(instance, component)
            assert pid is not None, f"{component} has no pid file"
            busy = _count_states(instance)
            os.kill(pid, signal.SIGKILL)  # that process only: runners have their own sessions
            _reap(pid)
            events.append(f"{time.monotonic() - began:5.1f}s kill -9 {component} (pid {pid}) "
                          f"with jobs {busy}")
            time.sleep(DOWN_TIME)
            ran = instance.cobaltlite("up")
            assert ran.returncode == 0, f"cobaltlite up after killing {component}:\n{ran.stdout}"
            assert f"{component}: started" in ran.stdout, ran.stdout
            new_pid = _read_pid(instance, component)
            events.append(f"{time.monotonic() - began:5.1f}s {component} restarted (pid "
                          f"{new_pid})")
            time.sleep(KILL_GAP / 2)
            shown = instance.command("qstat")
            if shown.returncode == 0:
                ids = [line.split()[0] for line in shown.stdout.splitlines()[2:] if line.strip()]
                if len(ids) != len(set(ids)):
                    listed_twice.append(shown.stdout)
            time.sleep(KILL_GAP / 2)
    finally:
        submitter.stop.set()
        thread.join(timeout=70)
    events.append(f"{time.monotonic() - began:5.1f}s submissions stopped")
    assert not thread.is_alive(), "the submitter did not stop"

    config = load_config(instance.state_dir)
    store = JobStore(config.database_url)
    try:
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while True:
            active = store.jobs(states=sorted(ACTIVE))
            if not active:
                break
            assert time.monotonic() < deadline, (
                f"jobs still active after {DRAIN_TIMEOUT:.0f} s: "
                f"{[(j['jobid'], j['state']) for j in active]}\n" + "\n".join(events))
            time.sleep(0.25)
        events.append(f"{time.monotonic() - began:5.1f}s every job done")
        rows = store.jobs(include_done=True)
    finally:
        store.close()
    status = instance.cobaltlite("status")
    assert status.returncode == 0, f"not every component answers after the test:\n{status.stdout}"

    readopted = []
    for line in (instance.state_dir / "log" / "system.log").read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if entry.get("event") == "job re-adopted":
                readopted.append(entry["jobid"])
    events.append(f"runners re-adopted by the restarted system: jobs {readopted}")
    story = "\n".join(events)
    assert long_job in readopted, (
        f"job {long_job} (running when the system was killed) was not re-adopted:\n{story}")
    acked = submitter.acknowledged
    assert len(acked) >= 20, f"too few submissions acknowledged ({len(acked)}):\n{story}"
    assert submitter.refused, "no qsub was refused: the queue manager's downtime went unnoticed"
    ack_ids = [s.jobid for s in acked]
    assert all(a < b for a, b in itertools.pairwise(ack_ids)), (
        f"acknowledged ids do not grow: {ack_ids}")
    db_ids = [row["jobid"] for row in rows]
    assert len(db_ids) == len(set(db_ids)), "a job id is stored twice"
    assert not listed_twice, f"qstat listed a job twice:\n{listed_twice[0]}"
    by_id = {row["jobid"]: row for row in rows}
    missing = [j for j in ack_ids if j not in by_id]
    assert not missing, f"acknowledged jobs missing from the database: {missing}\n{story}"
    unacknowledged = sorted(set(by_id) - set(ack_ids))
    assert all(by_id[j]["state"] == "done" for j in by_id), "a job is not done"

    lost, wrong = [], []
    for sub in acked:
        row = by_id[sub.jobid]
        if row["end_reason"] == "exited":
            if row["exit_status"] != sub.exit_code:
                wrong.append(f"job {sub.jobid}: script exited {sub.exit_code}, stored "
                             f"{row['exit_status']}")
        elif row["end_reason"] == "lost":
            lost.append(sub.jobid)
            if row["exit_status"] is not None:
                wrong.append(f"job {sub.jobid}: lost with exit status {row['exit_status']}")
        else:
            wrong.append(f"job {sub.jobid}: end reason {row['end_reason']!r} "
                         f"(exit {row['exit_status']}); expected 'exited' or 'lost'")
    summary = (f"{len(acked)} acknowledged, {len(submitter.refused)} refused, "
               f"{len(unacknowledged)} stored but unacknowledged {unacknowledged}, "
               f"{len(acked) - len(lost)} ran normally with their script's exit status, "
               f"{len(lost)} ended 'lost' {lost}; {RULE}\n{story}")
    assert not wrong, "\n".join(wrong) + "\n" + summary

    # Who held which nodes when: S records give start= and exec_host=, E records end=. A job
    # settled by the queue manager's restart (starting -> running) has no S record; its E
    # record carries start= and exec_host= as well.
    accounting = read_accounting(config.accounting_log)
    intervals, precise, no_start = [], [], []
    for jobid, row in by_id.items():
        kinds = accounting.get(jobid, {})
        for kind in ("Q", "S", "E"):
            assert len(kinds.get(kind, [])) <= 1, f"job {jobid} has {kind} records {kinds}"
        if row["starttime"] is None:
            assert row["end_reason"] in ("lost", "deleted"), f"job {jobid} never started: {row}"
            continue
        end = kinds.get("E")
        assert end, f"job {jobid} ran ({row['end_reason']}) but has no E record\n{summary}"
        start = kinds.get("S")
        if not start:
            no_start.append(jobid)
        first = (start or end)[0]
        assert first["exec_host"] == end[0]["exec_host"] == row["location"], (jobid, kinds)
        mask = ranges_to_mask(first["exec_host"])
        assert mask and mask >> MACHINE_NODES == 0, f"job {jobid} on {first['exec_host']}"
        assert mask.bit_count() == row["nodes"], f"job {jobid}: {row['nodes']} nodes, {mask:b}"
        intervals.append((jobid, int(first["start"]), int(end[0]["end"]), mask))
        precise.append((jobid, row["starttime"], row["endtime"], mask))
    # The log has whole seconds: a short job may show start == end and then proves nothing, so
    # the same check runs on the database's exact times too.
    clash = overlaps(intervals)
    assert not clash, "accounting log: " + "\n".join(clash) + "\n" + summary
    clash = overlaps(precise)
    assert not clash, "database times: " + "\n".join(clash) + "\n" + summary
    print(f"\n{summary}\njobs without an S record (settled by a restart): {no_start}\n"
          f"test body took {time.monotonic() - began:.1f} s")


# ---- bugs found on the way -------------------------------------------------------------------


def test_up_restarts_a_crashed_component_whose_pid_was_reused() -> None:
    """cobaltlite/cli.py `_pid`: a pid file left by a SIGKILLed daemon names a pid that may be a
    zombie (an init that does not reap, as in containers) or, later, another process. `up`
    then prints "already running" and the component stays down; `down` would SIGTERM a
    stranger. Here the pid is reused by a `sleep` of ours, which is what any host can see."""
    running = Instance(machine="flat:2").start()
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        pid = _read_pid(running, "metrics-monitor")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        (running.state_dir / "run" / "metrics-monitor.pid").write_text(f"{stranger.pid}\n")
        ran = running.cobaltlite("up")
        assert "metrics-monitor: started" in ran.stdout, ran.stdout
    finally:
        # The restarted monitor rewrote the pid file: `down` finds it there, so keep the file.
        running.stop()
        stranger.kill()
        stranger.wait()


class _FakeSystem:
    def __init__(self, status: str) -> None:
        self.status = status

    def limits(self) -> dict[str, Any]:
        return {"machine": "flat:4", "machine_nodes": 4, "min_block_size": 1,
                "max_job_nodes": 4}

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int:
        return 1

    def kill(self, jobid: int) -> bool:
        return True

    def job_status(self, jobid: int) -> str:
        return self.status

    def queue_layout(self) -> str | None:
        return None


def test_reconcile_of_a_launched_starting_job_writes_its_start_record(tmp_path: Path) -> None:
    """cobaltlite/queue_manager/manager.py reconcile(): a queue manager killed between
    system.launch() and the RUNNING update leaves the job `starting`; on restart reconcile()
    sets it running (starttime = the restart time) but never writes the S record that
    start_job() would have written, so the accounting log has an E without an S."""
    from cobaltlite.accounting import AccountingLog
    from cobaltlite.clock import WallClock
    from cobaltlite.queue_manager.manager import Caller, QueueManager

    store = JobStore(f"sqlite:///{tmp_path / 'q.db'}")
    store.init()
    log = io.StringIO()
    manager = QueueManager(store, WallClock(), AccountingLog(log), _FakeSystem("running"))
    jobid = manager.submit(Caller(0, 0, "root", True),
                           {"nodes": 1, "walltime": 60, "command": "/bin/true", "cwd": "/"})
    assert store.update_job(jobid, {"state": "starting", "location": "0"})
    manager.reconcile()
    assert store.job(jobid)["state"] == "running"
    assert f";S;{jobid};" in log.getvalue(), log.getvalue()


def test_a_runner_started_just_before_a_system_crash_is_readopted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cobaltlite/system/service.py launch(): the launch record is written without runner_pid,
    the runner is started, then the record is rewritten with its pid. A crash between the two
    writes leaves a record without a pid; _readopt() takes that for "never started", reports
    the job lost and does not hold its nodes, though the runner (its own session) runs the job
    on them. The runner's command line names the record, so a restart could find it in /proc."""
    from cobaltlite.clock import WallClock
    from cobaltlite.machine.catalog import load_description
    from cobaltlite.system import service as service_module

    class Crash(BaseException):
        pass

    started: list[subprocess.Popen[bytes]] = []
    real_popen, real_write = subprocess.Popen, service_module.write_json

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    def write_json(path: Path, data: dict[str, Any]) -> None:
        if "runner_pid" in data:
            raise Crash  # the daemon dies right after starting the runner
        real_write(path, data)

    monkeypatch.setattr(service_module.subprocess, "Popen", popen)
    monkeypatch.setattr(service_module, "write_json", write_json)
    description = load_description("flat:2")
    ends: list[tuple[int, str]] = []

    def report(jobid: int, status: int | None, reason: str, end: float) -> bool:
        ends.append((jobid, reason))
        return True

    first = service_module.SystemService(description, tmp_path, WallClock(), report)
    spec = {"jobid": 7, "uid": os.getuid(), "gid": os.getgid(), "user": "root",
            "command": "/bin/sleep", "args": ["5"], "cwd": str(tmp_path), "env": {},
            "umask": 0o022, "outputpath": str(tmp_path / "7.output"),
            "errorpath": str(tmp_path / "7.error"), "cobaltlog": str(tmp_path / "7.cobaltlog"),
            "walltime": 60, "nodes": 2}
    try:
        with pytest.raises(Crash):
            first.launch(7, "0-1", spec)
        assert started and started[0].poll() is None, "the runner should be running"
        monkeypatch.setattr(service_module, "write_json", real_write)
        restarted = service_module.SystemService(description, tmp_path, WallClock(), report)
        files = {p.name: p.read_text()[:200] for p in (tmp_path / "system").iterdir()}
        assert restarted.job_status(7) == "running", (
            f"runner alive: {started[0].poll() is None}, files: {files}")
        assert restarted.allocations() and restarted.allocations()[0]["jobid"] == 7
    finally:
        for runner in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        with contextlib.suppress(OSError):
            for line in (tmp_path / "7.cobaltlog").read_text().splitlines():
                if "job pid" in line:
                    job_pid = int(line.rsplit("job pid", 1)[1].strip(" )"))
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(job_pid, signal.SIGKILL)


def _fill(directory: Path) -> Path:
    """Fill the file system of `directory` until a write fails with ENOSPC."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 4096, 1):  # small writes may still fit in the last page
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_full_state_disk_loses_no_end_and_double_books_no_node(tmp_path: Path) -> None:
    """Issue 8.7: with the state disk full the runner died writing its status, the system
    reported the job "lost" and freed its nodes, and an OSError in a poll ended the poll thread
    for good. Here the system's state dir is a 2 MiB tmpfs, filled while a job runs; an I/O
    error is also injected into the polls meanwhile. The job must stay held (its node refused
    to another job) until space returns, its end then reported once with its exit status, the
    node refused until the queue manager acknowledges, and the poll thread alive throughout."""
    from cobaltlite.clock import WallClock
    from cobaltlite.machine.catalog import load_description
    from cobaltlite.system import service as service_module

    state = tmp_path / "state"
    state.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(state)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    calls: list[tuple[int, int | None, str]] = []
    acknowledged: list[int] = []
    queue_manager_up = threading.Event()

    def report(jobid: int, status: int | None, reason: str, end: float) -> bool:
        calls.append((jobid, status, reason))
        if queue_manager_up.is_set():
            acknowledged.append(jobid)
            return True
        return False

    stop = threading.Event()
    eio = threading.Event()
    service: Any = None
    try:
        service = service_module.SystemService(load_description("flat:2"), state, WallClock(),
                                               report)
        real_read = service._read_status

        def read_status(jobid: int) -> Any:
            if eio.is_set():
                raise OSError(5, "Input/output error")
            return real_read(jobid)

        service._read_status = read_status

        def poll() -> None:  # as cobaltlite/daemon.py runs it
            while not stop.wait(0.1):
                service.poll()

        poller = threading.Thread(target=poll, name="system poll", daemon=True)
        poller.start()
        spec = {"jobid": 7, "uid": os.getuid(), "gid": os.getgid(), "user": "root",
                "command": "/bin/sh", "args": ["-c", "sleep 2; exit 3"], "cwd": str(tmp_path),
                "env": {}, "umask": 0o022, "outputpath": str(tmp_path / "7.output"),
                "errorpath": str(tmp_path / "7.error"),
                "cobaltlog": str(tmp_path / "7.cobaltlog"), "walltime": 60, "nodes": 1}
        service.launch(7, "0", spec)
        deadline = time.monotonic() + 20
        while not (state / "system" / "7.started").exists():
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)
        filler = _fill(state)
        eio.set()
        time.sleep(4)  # the job ends meanwhile; its runner cannot write the status
        assert "ended: exited, exit status 3" in (tmp_path / "7.cobaltlog").read_text()
        assert poller.is_alive(), "an I/O error in a poll ended the poll thread"
        assert service.job_status(7) == "running", calls
        assert calls == [], "an end was reported while its status could not be written"
        with pytest.raises(ValueError):
            service.launch(8, "0", {**spec, "jobid": 8})
        eio.clear()
        filler.unlink()  # space returns; the queue manager is still down
        deadline = time.monotonic() + 20
        while not calls:
            assert time.monotonic() < deadline, "the end was never reported"
            time.sleep(0.05)
        assert calls[0] == (7, 3, "exited"), calls
        with pytest.raises(ValueError):  # not yet acknowledged: the node stays held
            service.launch(8, "0", {**spec, "jobid": 8})
        queue_manager_up.set()
        deadline = time.monotonic() + 20
        while service.allocations():
            assert time.monotonic() < deadline, "the node was never freed"
            time.sleep(0.05)
        time.sleep(0.5)
        assert acknowledged == [7], acknowledged
        assert set(calls) == {(7, 3, "exited")}, calls
        assert poller.is_alive()
        assert service.launch(8, "0", {**spec, "jobid": 8, "args": ["-c", "exit 0"]}) == 1
        deadline = time.monotonic() + 20
        while acknowledged != [7, 8]:
            assert time.monotonic() < deadline, f"job 8 never ended: {acknowledged}"
            time.sleep(0.05)
    finally:
        stop.set()
        if service is not None:
            for jobid, pid in list(service._runners.items()):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                service._popen[jobid].wait()
        if subprocess.run(["umount", str(state)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(state)], capture_output=True)
