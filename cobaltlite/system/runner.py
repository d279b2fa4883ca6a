"""The per-job runner: `python -m cobaltlite.system.runner SPEC.json`.

The system component starts one runner per job in a session of its own, so the job outlives a
crash of the system daemon. The runner forks the job (as the submitter when it runs as root),
enforces the wall time (SIGTERM, then SIGKILL after a grace period), forwards a kill request
(SIGTERM to the runner) the same way, and finally writes the exit status to a JSON file by
atomic rename. A restarted system daemon re-adopts running jobs by their runner pid and collects
their status files, which is the reconciliation rule in docs/operator-guide.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

KILL_GRACE_SECONDS = 10.0


def _open_cobaltlog(spec: dict[str, Any]) -> int | None:
    """Open the job's .cobaltlog with the job owner's rights, never root's.

    The user chose the path, so the runner (root) takes on the user's uid, gid and groups just
    for the open, and refuses to follow a symbolic link; otherwise a user could make root
    create or append to any file. None if the user may not write there.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
    if os.geteuid() != 0 or spec["uid"] == 0:
        try:
            return os.open(spec["cobaltlog"], flags, 0o644)
        except OSError:
            return None
    import pwd

    saved_groups = os.getgroups()
    os.setgroups(os.getgrouplist(pwd.getpwuid(spec["uid"]).pw_name, spec["gid"]))
    os.setegid(spec["gid"])
    os.seteuid(spec["uid"])
    try:
        return os.open(spec["cobaltlog"], flags, 0o644)
    except OSError:
        return None
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(saved_groups)


def _log(fd: int | None, message: str) -> None:
    """Append to the job's .cobaltlog; a missing or unwritable log never stops the job."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n".encode())


def _exec_job(spec: dict[str, Any]) -> None:
    """In the forked child: become the user, open the output files as the user, exec."""
    try:
        os.setsid()
        if os.getuid() == 0 and spec["uid"] != 0:
            import pwd

            name = pwd.getpwuid(spec["uid"]).pw_name
            os.initgroups(name, spec["gid"])
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
        os.umask(spec["umask"])
        os.chdir(spec["cwd"])
        out = os.open(spec["outputpath"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        err = os.open(spec["errorpath"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        env = dict(spec["env"])
        env.update(spec["cobalt_env"])
        os.execvpe(spec["command"], [spec["command"], *spec["args"]], env)
    except BaseException as exc:  # anything before exec: report it on stderr and fail
        try:
            os.write(2, f"cobaltlite: cannot start job: {exc}\n".encode())
        finally:
            os._exit(127)


def run(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    status_path = Path(spec["status_path"])
    cobaltlog = _open_cobaltlog(spec)
    pid = os.fork()
    if pid == 0:
        _exec_job(spec)
    reason = "exited"
    kill_at: float | None = None
    deadline = time.monotonic() + spec["walltime"]

    def _request_kill(_signum: int, _frame: Any) -> None:
        nonlocal reason, kill_at
        if kill_at is None:
            reason = "deleted"
            _signal_job(pid, signal.SIGTERM)
            kill_at = time.monotonic() + spec.get("kill_grace", KILL_GRACE_SECONDS)

    signal.signal(signal.SIGTERM, _request_kill)
    _log(cobaltlog, f"job {spec['jobid']} started on {spec['cobalt_env']['COBALT_PARTNAME']} "
               f"(runner pid {os.getpid()}, job pid {pid})")
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done:
            break
        now = time.monotonic()
        if kill_at is None and now >= deadline:
            reason = "walltime"
            _signal_job(pid, signal.SIGTERM)
            kill_at = now + spec.get("kill_grace", KILL_GRACE_SECONDS)
        elif kill_at is not None and now >= kill_at:
            _signal_job(pid, signal.SIGKILL)
            kill_at = float("inf")
        time.sleep(0.05)
    exit_status = os.waitstatus_to_exitcode(status)
    _log(cobaltlog, f"job {spec['jobid']} ended: {reason}, exit status {exit_status}")
    tmp = status_path.with_name(status_path.name + ".tmp")
    tmp.write_text(json.dumps({"jobid": spec["jobid"], "exit_status": exit_status,
                               "reason": reason, "end_time": time.time()}))
    os.replace(tmp, status_path)
    return 0


def _signal_job(pid: int, signum: int) -> None:
    """Signal the job's whole process group (it called setsid), so its children go too."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
