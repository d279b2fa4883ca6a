"""The per-job runner: `python -m cobaltlite.system.runner SPEC.json`.

The system component starts one runner per job in a session of its own, so the job outlives a
crash of the system daemon. The runner forks the job (as the submitter when it runs as root)
into a session and process group of its own, and reports each step to the system by a file
written by atomic rename beside the launch record:

* `<jobid>.started` (with the job's pid) once the job process exists: the block goes from
  `allocated` to `busy`. The job process waits for this record before it runs the job, and
  exits without running it if the runner dies first, so a job the system never saw started
  never ran;
* `<jobid>.cleanup` when the job's main process has ended with processes of the job left
  behind, or when a kill (SIGTERM to the runner: qdel) or the wall time ends the job: the block
  shows `cleanup`. The runner then signals every process of the job (SIGTERM, then SIGKILL
  after the grace period, again until none is left);
* `<jobid>.status` (exit status of the main process, end reason) only once no process of the
  job remains, so the system never hands the nodes to another job while this one still runs.

A kill is a SIGTERM to the runner. It ends the job as `deleted` (qdel), unless the system wrote
`<jobid>.kill` first ({"reason", "message"}: a component under the job failed), whose reason
becomes the end reason and whose message goes to the job's .cobaltlog.

The job's processes are its process group plus any descendant that left the group (a daemon
that called setsid) and was orphaned: the runner is a child subreaper, so such orphans become
its children, and it reaps them as they exit. The job's main process alone is reaped last,
once nothing of the job is left: until then it stays a zombie, which keeps its pid, and so the
job's process group id, from being given to another process that the runner's signals to the
group would reach.

A started or status record the state disk will not take (ENOSPC, EIO) is retried every
second, the runner living on meanwhile so the system keeps the job's place held; a qdel while
the started record waits ends the job unrun. The `.cleanup` marker is best effort. Why a job
could not start (e.g. an output file the user cannot open) goes to whichever of its output and
error files could be opened, to its .cobaltlog, and into the status as `message`, which the
system logs.

A restarted system daemon re-adopts running jobs by their runner pid and collects their status
files, which is the reconciliation rule in docs/operator-guide.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cobaltlite.system import procfs


def start_runner(record: Path) -> subprocess.Popen[bytes]:
    """Start a runner on launch record `record` in a session of its own, so that it, and the
    job, outlive whoever started it (the system daemon, or a node agent)."""
    return subprocess.Popen(
        [sys.executable, "-m", "cobaltlite.system.runner", str(record)],
        start_new_session=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


KILL_GRACE_SECONDS = 10.0
POLL_SECONDS = 0.05
PR_SET_CHILD_SUBREAPER = 36


def _open_cobaltlog(spec: dict[str, Any]) -> int | None:
    """Open the job's .cobaltlog with the job owner's rights, never root's.

    The user chose the path, so the runner (root) takes on the user's uid, gid and groups just
    for the open, and refuses to follow a symbolic link; otherwise a user could make root
    create or append to any file. O_NONBLOCK because the user could also make the path a FIFO:
    a blocking open (or write) would stall the runner before the job starts, holding the block
    `allocated` beyond the reach of qdel and the wall time. None if the user may not write there.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
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


def _kill_record(spec: dict[str, Any]) -> dict[str, Any]:
    """Why the runner was told to kill the job: the system's `.kill` record ({"reason", and for
    a failure "message" for the .cobaltlog and "component"}), else a qdel's {"reason":
    "deleted"}."""
    path = spec.get("kill_path")  # absent in the records of an older system
    if path:
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(Path(path).read_text())
            if isinstance(record, dict) and isinstance(record.get("reason"), str):
                return record
    return {"reason": "deleted"}


def _status(jobid: int, exit_status: int | None, kill: dict[str, Any], reason: str
            ) -> dict[str, Any]:
    """The status record; a failure's kill adds the failed component, which the system reports."""
    status = {"jobid": jobid, "exit_status": exit_status, "reason": reason,
              "end_time": time.time()}
    if "component" in kill:
        status["component"] = kill["component"]
    return status


def _end_unrun(spec: dict[str, Any], cobaltlog: int | None) -> None:
    """A kill came before the job ran: record its end without running it."""
    jobid = spec["jobid"]
    kill = _kill_record(spec)
    _log(cobaltlog, f"job {jobid} {kill['reason']} before it started"
         + (f": {kill['message']}" if kill.get("message") else ""))
    _write_until_done(Path(spec["status_path"]), _status(jobid, None, kill, kill["reason"]))


def _read_start_failure(fd: int) -> str:
    """What the job process wrote on its failure pipe before it gave up ("" if it exec'd)."""
    try:
        data = b""
        while chunk := os.read(fd, 4096):
            data += chunk
        return data.decode(errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _open_output(path: str, what: str) -> tuple[int | None, str]:
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666), ""
    except OSError as exc:
        return None, f"cannot open {what} file {path}: {exc.strerror}"


def _open_input(path: str, outputs: tuple[int, int]) -> int:
    """The job's stdin (qsub -i), opened as the user. O_NONBLOCK so that a FIFO without a writer
    cannot hang the start; the job then reads it blocking, as from any file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        message = f"cannot open input file {path}: {exc.strerror}"
        for out in outputs:
            with contextlib.suppress(OSError):
                os.write(out, f"cobaltlite: cannot start job: {message}\n".encode())
        raise OSError(message) from None
    os.set_blocking(fd, True)
    return fd


def _exec_job(spec: dict[str, Any], go: int, failed: int) -> None:
    """In the forked child: wait for the runner's go on pipe `go`, become the user, open the
    output files as the user, exec. Why the job could not start goes to pipe `failed`, for the
    runner to put in the .cobaltlog and the status (the system logs it), and to whichever of
    the output and error files could be opened."""
    try:
        # The runner's kill handler must not survive into the job before exec replaces it, and
        # the job gets the dispositions any shell gives it: Python ignores SIGPIPE and SIGXFSZ,
        # and an ignored signal stays ignored across exec (`yes | head` would never end well).
        for signum in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signum, signal.SIG_DFL)
        os.setsid()
        # Run nothing before the runner has written the started record: a runner that died
        # before it would leave the system sure the job never ran, and free its nodes under
        # it. End of file without the go byte means the runner is gone.
        if not os.read(go, 1):
            os._exit(127)
        if os.getuid() == 0 and spec["uid"] != 0:
            import pwd

            name = pwd.getpwuid(spec["uid"]).pw_name
            os.initgroups(name, spec["gid"])
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
        os.umask(spec["umask"])
        os.chdir(spec["cwd"])
        out, out_problem = _open_output(spec["outputpath"], "output")
        err, err_problem = _open_output(spec["errorpath"], "error")
        if out is None or err is None:
            message = "; ".join(p for p in (out_problem, err_problem) if p)
            for fd in (err, out):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.write(fd, f"cobaltlite: cannot start job: {message}\n".encode())
            raise OSError(message)
        os.dup2(_open_input(spec.get("inputfile") or os.devnull, (out, err)), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        env = dict(spec["env"])
        env.update(spec["cobalt_env"])
        os.execvpe(spec["command"], [spec["command"], *spec["args"]], env)
    except BaseException as exc:  # anything before exec: report it and fail
        try:
            with contextlib.suppress(OSError):
                os.write(failed, f"cannot start job: {exc}\n".encode())
            os.write(2, f"cobaltlite: cannot start job: {exc}\n".encode())
        finally:
            os._exit(127)


def run(spec_path: Path) -> int:
    kill_requested = False

    def _request_kill(_signum: int, _frame: Any) -> None:
        # Only noted here: the loop below acts on it, whatever phase the job is in.
        nonlocal kill_requested
        kill_requested = True

    signal.signal(signal.SIGTERM, _request_kill)
    # An inherited SIG_IGN would let the kernel reap the job unseen and lose its exit status.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _become_subreaper()
    spec = json.loads(spec_path.read_text())
    jobid, grace = spec["jobid"], spec.get("kill_grace", KILL_GRACE_SECONDS)
    cobaltlog = _open_cobaltlog(spec)
    if kill_requested:  # killed while the runner was starting: the job never runs
        _end_unrun(spec, cobaltlog)
        return 0
    go_read, go_write = os.pipe()
    # Close-on-exec: the job process writes why it could not start; a successful exec closes it.
    failed_read, failed_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_write)  # or the child would never see the end of file of a dead runner
        os.close(failed_read)
        _exec_job(spec, go_read, failed_write)
    os.close(go_read)
    os.close(failed_write)
    if not _write_until_done(Path(spec["started_path"]), {"jobid": jobid, "job_pid": pid},
                             lambda: kill_requested):
        # Deleted while the disk would not take the started record: the job process has not
        # run the job, and exits without running it once its go pipe closes.
        os.close(go_write)
        os.close(failed_read)
        os.waitpid(pid, 0)
        _end_unrun(spec, cobaltlog)
        return 0
    # A job process that died before its go (BrokenPipeError) ends in the loop below as any.
    with contextlib.suppress(BrokenPipeError):
        os.write(go_write, b"\0")
    os.close(go_write)
    _log(cobaltlog, f"job {jobid} started on {spec['cobalt_env']['COBALT_PARTNAME']} "
               f"(runner pid {os.getpid()}, job pid {pid})")
    deadline = time.monotonic() + spec["walltime"]
    reason = "exited"
    kill: dict[str, Any] = {}  # why a kill was asked for, once it was
    kill_at: float | None = None  # set when the cleanup begins
    while True:
        main_ended = _reap_orphans(pid)
        now = time.monotonic()
        if kill_at is None and not main_ended:
            if kill_requested:
                kill = _kill_record(spec)
                reason = kill["reason"]
                if kill.get("message"):
                    _log(cobaltlog, f"job {jobid} killed: {kill['message']}")
            elif now >= deadline:
                reason = "walltime"
            else:
                time.sleep(POLL_SECONDS)
                continue
        # The main process has ended or must end: nothing of the job may outlive the runner.
        left, children = _job_processes(pid)
        if main_ended and not left:
            break
        if kill_at is None:
            # Shown as the block's phase only: a full disk must not hold up the kill.
            with contextlib.suppress(OSError):
                _write_atomic(Path(spec["cleanup_path"]), {"jobid": jobid, "reason": reason})
            _log(cobaltlog, f"job {jobid} cleaning up ({reason}): signalling "
                            f"{len(left)} process(es) of the job")
            _signal_job(pid, children, signal.SIGTERM)
            kill_at = now + grace
        elif now >= kill_at:
            # Repeated at every turn: a process may have forked since the last signal.
            _signal_job(pid, children, signal.SIGKILL)
        time.sleep(POLL_SECONDS)
    # Nothing of the job is left to signal: only now may the job's pid and group id go free.
    _, status = os.waitpid(pid, 0)
    exit_status = os.waitstatus_to_exitcode(status)
    status_record = _status(jobid, exit_status, kill, reason)
    message = _read_start_failure(failed_read)
    if message:
        _log(cobaltlog, f"job {jobid}: {message}")
        status_record["message"] = message
    _log(cobaltlog, f"job {jobid} ended: {reason}, exit status {exit_status}")
    _write_until_done(Path(spec["status_path"]), status_record)
    return 0


def _become_subreaper() -> None:
    """Make orphaned descendants of the job children of this runner (Linux), so the runner can
    find them when they leave the job's process group, and reap them when they die."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_orphans(job_pid: int) -> bool:
    """Reap the adopted orphans that have exited, and tell whether the job's main process has.
    Orphans are reaped as they exit, so a long job that keeps starting daemons does not fill
    the pid space with zombies; the main process is left a zombie (WNOWAIT), to be reaped by
    run() at the very end."""
    while True:
        ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if ended is None:
            return False
        if ended.si_pid == job_pid:
            # waitid may keep picking it over other exited children from now on: those are
            # reaped by the scan of _job_processes, which runs at every turn of the cleanup.
            return True
        os.waitpid(ended.si_pid, 0)


def _job_processes(job_pid: int) -> tuple[list[int], list[int]]:
    """The job's live (not zombie) processes, and those among them that are this runner's
    children. The job is its process group, which is `job_pid` since the job called setsid,
    plus the orphans this runner adopted as subreaper, which may have left the group. Exited
    orphans found on the way are reaped."""
    me, live, children = os.getpid(), [], []
    for proc in procfs.processes():
        if proc.ended:
            if proc.ppid == me and proc.pid != job_pid:
                os.waitpid(proc.pid, os.WNOHANG)
            continue
        if proc.pgrp != job_pid and proc.ppid != me:
            continue
        live.append(proc.pid)
        if proc.ppid == me:
            children.append(proc.pid)
    return live, children


def _signal_job(job_pid: int, children: list[int], signum: int) -> None:
    """Signal the job's process group, and each of this runner's children on its own: adopted
    orphans outside the group, and the job's main process if it has not yet called setsid.
    Only children are signalled by pid: their pids cannot be reused until this runner reaps
    them, whereas a group member's pid could belong to a stranger by the time of the kill."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job_pid, signum)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


WRITE_RETRY_SECONDS = 1.0


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):  # a half-written copy holds space for nothing
            tmp.unlink()
        raise


def _write_until_done(path: Path, data: dict[str, Any],
                      give_up: Callable[[], bool] = lambda: False) -> bool:
    """Write a record the system must see (started, status), retrying while the state disk is
    full or failing (ENOSPC, EIO): the runner lives on meanwhile, so the system keeps the job's
    place held, and the end is reported once the disk takes the record. False if `give_up`
    said so before the write succeeded."""
    while True:
        try:
            _write_atomic(path, data)
            return True
        except OSError:
            if give_up():
                return False
            time.sleep(WRITE_RETRY_SECONDS)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
