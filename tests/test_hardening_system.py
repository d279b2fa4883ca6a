"""Hardening of the system component (issue 8): a job whose output file cannot be opened says
why, in the file it could open, its .cobaltlog and the system's log; a failing poll never stops
the poll loop; a place stays held until the job's end is acknowledged."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import Instance
from unix_users import ALICE, Accounts, ensure_test_users

from cobaltlite.clock import WallClock
from cobaltlite.machine.catalog import load_description
from cobaltlite.system import service as service_module


def _spec(tmp_path: Path, jobid: int, command: str, *args: str) -> dict[str, Any]:
    return {"jobid": jobid, "uid": os.getuid(), "gid": os.getgid(), "user": "root",
            "command": command, "args": list(args), "cwd": str(tmp_path), "env": {},
            "umask": 0o022, "outputpath": str(tmp_path / f"{jobid}.output"),
            "errorpath": str(tmp_path / f"{jobid}.error"),
            "cobaltlog": str(tmp_path / f"{jobid}.cobaltlog"), "walltime": 60, "nodes": 2}


def _poll_until(service: service_module.SystemService, condition: Any,
                timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        service.poll()
        if condition():
            return
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_poll_that_fails_with_an_io_error_is_logged_and_retried(tmp_path: Path) -> None:
    """An OSError (EIO, ENOSPC) in one poll used to escape poll() and end the poll thread."""
    ends: list[int] = []
    service = service_module.SystemService(load_description("flat:2"), tmp_path, WallClock(),
                                           lambda jobid, *_: ends.append(jobid) or True)
    real_collect = service._collect
    failures = [OSError(errno.EIO, "Input/output error"), OSError(errno.ENOSPC, "full")]

    def collect() -> None:
        if failures:
            raise failures.pop(0)
        real_collect()

    service._collect = collect  # type: ignore[method-assign]
    service.poll()  # must not raise
    service.poll()
    service.launch(3, "0-1", _spec(tmp_path, 3, "/bin/true"))
    _poll_until(service, lambda: ends == [3])


def test_a_place_is_held_until_the_queue_manager_acknowledges_the_end(tmp_path: Path) -> None:
    """The place used to be released when the runner's status was read, before the end was
    reported: with the queue manager down, the system handed out nodes it still showed busy."""
    acknowledge = False
    reports: list[int] = []

    def report(jobid: int, *_: Any) -> bool:
        reports.append(jobid)
        return acknowledge

    service = service_module.SystemService(load_description("flat:2"), tmp_path, WallClock(),
                                           report)
    service.launch(4, "0-1", _spec(tmp_path, 4, "/bin/true"))
    _poll_until(service, lambda: reports != [])
    assert service.job_status(4) == "ended"
    with pytest.raises(ValueError):
        service.launch(5, "0-1", _spec(tmp_path, 5, "/bin/true"))
    assert [row["state"] for row in service.partitions()] == ["cleanup", "cleanup"]
    acknowledge = True
    service.poll()
    assert service.allocations() == []
    service.launch(5, "0-1", _spec(tmp_path, 5, "/bin/true"))
    _poll_until(service, lambda: service.allocations() == [])
    assert reports.count(4) >= 2 and reports.count(5) == 1


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture()
def instance(accounts: Accounts) -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    yield running
    running.stop()


def test_an_output_path_the_user_cannot_write_ends_the_job_with_the_reason(
        instance: Instance, accounts: Accounts) -> None:
    """The job used to end with exit status 127 and the reason written to the runner's stderr,
    which is /dev/null: the user, the .error file and the system's log said nothing."""
    work = Path(tempfile.mkdtemp(prefix="cltest-hard-", dir="/tmp"))
    try:
        work.chmod(0o755)
        closed = work / "closed"
        closed.mkdir(mode=0o755)  # root's: alice may not create files in it
        (work / "open").mkdir()
        shutil.chown(work / "open", ALICE)
        job = work / "job.sh"
        job.write_text("#!/bin/sh\necho hello\n")
        job.chmod(0o755)
        output = closed / "x.output"
        jobid = instance.qsub("-n", "1", "-t", "5", "-o", str(output),
                              "-e", str(work / "open" / "x.error"),
                              "-O", str(work / "open" / "x"), str(job),
                              account=ALICE, accounts=accounts, cwd=work / "open")
        ended = instance.wait_for(jobid, {"done"}, timeout=60)
        assert ended["exit_status"] == 127, ended
        wanted = f"cannot open output file {output}: Permission denied"
        error_text = (work / "open" / "x.error").read_text()
        cobaltlog = (work / "open" / "x.cobaltlog").read_text()
        assert wanted in error_text, error_text
        assert wanted in cobaltlog, cobaltlog
        system_log = (instance.state_dir / "log" / "system.log").read_text()
        assert wanted in system_log, system_log[-2000:]
        assert not output.exists()
    finally:
        shutil.rmtree(work, ignore_errors=True)



def test_a_restarted_system_holds_the_place_of_an_unacknowledged_end(tmp_path: Path) -> None:
    """A restart used to queue an ended, unacknowledged job's end without holding its place."""
    acknowledge = False
    reports: list[int] = []

    def report(jobid: int, *_: Any) -> bool:
        reports.append(jobid)
        return acknowledge

    description = load_description("flat:2")
    first = service_module.SystemService(description, tmp_path, WallClock(), report)
    first.launch(4, "0-1", _spec(tmp_path, 4, "/bin/true"))
    _poll_until(first, lambda: reports != [])
    restarted = service_module.SystemService(description, tmp_path, WallClock(), report)
    assert restarted.allocations()[0]["jobid"] == 4
    with pytest.raises(ValueError):
        restarted.launch(5, "0", _spec(tmp_path, 5, "/bin/true"))
    acknowledge = True
    restarted.poll()
    assert restarted.allocations() == []
    assert not list((tmp_path / "system").iterdir())


def test_a_job_deleted_while_the_disk_refuses_its_started_record_never_runs(
        tmp_path: Path) -> None:
    """The runner used to die when its started record could not be written (full disk); now it
    retries, and a qdel meanwhile ends the job before it runs, with a "deleted" status once
    the disk takes it."""
    state = tmp_path / "state"
    state.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(state)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    ran = tmp_path / "ran"
    spec = {**_spec(tmp_path, 6, "/bin/sh", "-c", f"touch {ran}"),
            "kill_grace": 2, "cobalt_env": {"COBALT_PARTNAME": "0"},
            "status_path": str(state / "6.status"), "started_path": str(state / "6.started"),
            "cleanup_path": str(state / "6.cleanup")}
    record = tmp_path / "6.json"
    record.write_text(json.dumps(spec))
    runner = None
    try:
        filler = state / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
        os.close(fd)
        runner = subprocess.Popen([sys.executable, "-m", "cobaltlite.system.runner",
                                   str(record)], start_new_session=True)
        time.sleep(2)
        assert runner.poll() is None, "the runner died on the full disk"
        assert not ran.exists(), "the job ran before its started record was written"
        runner.terminate()  # qdel
        time.sleep(1.5)
        assert runner.poll() is None, "the runner gave up its status"
        filler.unlink()
        assert runner.wait(timeout=10) == 0
        status = json.loads((state / "6.status").read_text())
        assert status["reason"] == "deleted" and status["exit_status"] is None, status
        assert not ran.exists()
    finally:
        if runner is not None and runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        if subprocess.run(["umount", str(state)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(state)], capture_output=True)
