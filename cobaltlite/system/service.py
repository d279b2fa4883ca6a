"""The system component's logic: the live machine, launching runners, collecting their ends.

State on disk, under `<state-dir>/system/`: for each job a `<jobid>.json` launch record (spec,
location, runner pid), the runner's markers `<jobid>.started` and `<jobid>.cleanup`, and, once
the runner is done, `<jobid>.status`. All are written by atomic rename. On start the service
re-reads every launch record: a job whose runner still lives is re-adopted (its place is held
again, in the phase its markers say); a job whose runner left a status file is reported ended;
a job whose runner is gone without a status is reported ended as "lost". A job's files are
removed only after the queue manager has acknowledged its end.

A held place goes through three phases, which partitions() shows in place of the machine's
`busy` (Cobalt's partition states, reference §6.3):

* `allocated`: placed and the runner started, but the runner has not yet reported the job
  process (no `.started` marker);
* `busy`: the job runs;
* `cleanup`: the job's main process has ended with processes left behind, or a kill (qdel, wall
  time) was requested, and the runner is killing what is left (`.cleanup` marker).

The place is released only when the status file exists, which the runner writes after the last
process of the job is gone: nothing of one job ever runs beside the next job on the same nodes.
The markers are read on each poll and whenever partitions() is asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from cobaltlite.clock import Clock
from cobaltlite.errors import MachineError
from cobaltlite.machine.description import BGPDescription, FlatDescription
from cobaltlite.machine.runtime import build_machine

log = structlog.get_logger("system")

ALLOCATED, BUSY, CLEANUP = "allocated", "busy", "cleanup"
_JOB_FILES = (".status", ".started", ".cleanup", ".json")
"""A job's files, removed in this order: the launch record last, so a crash halfway leaves a
record that a restart reports again (the queue manager takes a repeated end report calmly)."""


class SystemService:
    def __init__(
        self,
        description: BGPDescription | FlatDescription,
        state_dir: Path,
        clock: Clock,
        report_end: Callable[[int, int | None, str, float], bool],
        kill_grace: float = 10.0,
    ) -> None:
        self.description = description
        self.machine = build_machine(description)
        self.clock = clock
        self.report_end = report_end
        self.kill_grace = kill_grace
        self.dir = state_dir / "system"
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self._lock = threading.RLock()
        self._runners: dict[int, int] = {}  # jobid -> runner pid
        self._phase: dict[int, str] = {}  # jobid -> ALLOCATED, BUSY or CLEANUP, while held
        self._ended: dict[int, dict[str, Any]] = {}  # jobid -> status awaiting acknowledgement
        self._readopt()

    # ---- what others ask ----------------------------------------------------------------

    def limits(self) -> dict[str, Any]:
        m = self.machine
        largest = max(getattr(m, "sizes", [m.total_nodes]))
        return {"machine": m.name, "machine_nodes": m.total_nodes,
                "min_block_size": m.min_block_size, "max_job_nodes": largest}

    def allocations(self) -> list[dict[str, Any]]:
        with self._lock:
            held = self.machine.held_by()
            return [{"jobid": jobid, "location": where,
                     "expected_end": self._expected_end.get(jobid, 0.0)}
                    for jobid, where in sorted(held.items())]

    def partitions(self) -> list[dict[str, Any]]:
        """The machine's block states, each held place shown in its job's phase."""
        with self._lock:
            self._collect()
            rows: list[dict[str, Any]] = self.machine.block_states()
            for row in rows:
                if row["state"] == "busy":
                    row["state"] = self._phase[row["jobid"]]
            return rows

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int:
        """Hold `location` for the job and start its runner; return the nodes held."""
        with self._lock:
            if jobid in self._runners:
                raise ValueError(f"job {jobid} is already running")
            now = self.clock.now()
            try:
                nodes = self.machine.allocate(location, jobid, now + spec["walltime"])
            except MachineError as exc:
                raise ValueError(str(exc)) from None
            self._expected_end[jobid] = now + spec["walltime"]
            record = {
                **spec,
                "location": location,
                "kill_grace": self.kill_grace,
                "status_path": str(self.dir / f"{jobid}.status"),
                "started_path": str(self.dir / f"{jobid}.started"),
                "cleanup_path": str(self.dir / f"{jobid}.cleanup"),
                "cobalt_env": {
                    "COBALT_JOBID": str(jobid),
                    "COBALT_PARTNAME": location,
                    "COBALT_PARTSIZE": str(nodes),
                    "COBALT_JOBSIZE": str(spec["nodes"]),
                },
            }
            path = self.dir / f"{jobid}.json"
            _write_json(path, record)
            try:
                runner = subprocess.Popen(
                    [sys.executable, "-m", "cobaltlite.system.runner", str(path)],
                    start_new_session=True, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
            except OSError as exc:
                self.machine.release(jobid)
                path.unlink(missing_ok=True)
                raise ValueError(f"job {jobid}: cannot start its runner: {exc}") from None
            # The runner runs from here on: track it before anything else can fail.
            self._runners[jobid] = runner.pid
            self._phase[jobid] = ALLOCATED
            self._popen[jobid] = runner
            record["runner_pid"] = runner.pid
            try:
                _write_json(path, record)
            except OSError as exc:  # a restart finds the runner by its command line instead
                log.warning("runner pid not recorded", jobid=jobid, error=str(exc))
            log.info("job launched", jobid=jobid, location=location, runner=runner.pid)
            return nodes

    def kill(self, jobid: int) -> bool:
        with self._lock:
            pid = self._runners.get(jobid)
        if pid is None:
            return False
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return False
        log.info("job kill sent", jobid=jobid, runner=pid)
        return True

    def job_status(self, jobid: int) -> str:
        with self._lock:
            if jobid in self._ended:
                return "ended"
            if jobid in self._runners:
                return "running"
        return "unknown"

    # ---- the poll loop ----------------------------------------------------------------

    def poll(self) -> None:
        """Collect finished runners and report their ends; retried until acknowledged."""
        with self._lock:
            self._collect()
            pending = list(self._ended.items())
        for jobid, status in pending:
            try:
                acknowledged = self.report_end(jobid, status["exit_status"], status["reason"],
                                               status["end_time"])
            except Exception as exc:  # the queue manager may be down: try again next poll
                log.warning("end report failed", jobid=jobid, error=str(exc))
                return
            if acknowledged:
                with self._lock:
                    self._ended.pop(jobid, None)
                for suffix in _JOB_FILES:
                    (self.dir / f"{jobid}{suffix}").unlink(missing_ok=True)

    def _collect(self) -> None:
        """Bring every held job's phase up to date from its runner's markers, and release the
        places of jobs whose runner has written its status or is gone. Called with the lock."""
        for jobid, pid in list(self._runners.items()):
            status = self._read_status(jobid)
            record = self.dir / f"{jobid}.json"
            if status is None and not _alive(pid, self._popen.get(jobid), record):
                status = self._read_status(jobid) or {
                    "jobid": jobid, "exit_status": None, "reason": "lost",
                    "end_time": self.clock.now()}
            if status is None:
                self._update_phase(jobid)
                continue
            del self._runners[jobid]
            self._popen.pop(jobid, None)
            self._phase.pop(jobid, None)
            self.machine.release(jobid)
            self._expected_end.pop(jobid, None)
            self._ended[jobid] = status
            log.info("job finished", jobid=jobid, reason=status["reason"],
                     exit_status=status["exit_status"])

    def _update_phase(self, jobid: int) -> None:
        # Phases only move forward, so a job already in cleanup costs no look at the disk.
        phase = self._phase[jobid]
        if phase != CLEANUP and (self.dir / f"{jobid}.cleanup").exists():
            phase = CLEANUP
        elif phase == ALLOCATED and (self.dir / f"{jobid}.started").exists():
            phase = BUSY
        if phase != self._phase[jobid]:
            self._phase[jobid] = phase
            log.info("job phase", jobid=jobid, phase=phase)

    def _read_status(self, jobid: int) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / f"{jobid}.status").read_text())
        except (OSError, ValueError):
            return None

    def _readopt(self) -> None:
        self._expected_end: dict[int, float] = {}
        self._popen: dict[int, subprocess.Popen[bytes]] = {}
        for path in sorted(self.dir.glob("*.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                log.error("unreadable launch record", path=str(path), error=str(exc))
                continue
            jobid, pid = record["jobid"], record.get("runner_pid")
            status = self._read_status(jobid)
            if status is None and pid is None:
                # The crash may have come between starting the runner and recording its pid.
                pid = _find_runner(path)
            if status is None and pid is None:
                # Crashed between holding the place and starting the runner: nothing ran.
                status = {"jobid": jobid, "exit_status": None, "reason": "lost",
                          "end_time": self.clock.now()}
            if status is not None:
                self._ended[jobid] = status
                continue
            self.machine.allocate(record["location"], jobid,
                                  self.clock.now() + record["walltime"])
            self._expected_end[jobid] = self.clock.now() + record["walltime"]
            self._runners[jobid] = pid
            self._phase[jobid] = ALLOCATED
            self._update_phase(jobid)
            log.info("job re-adopted", jobid=jobid, runner=pid, location=record["location"],
                     phase=self._phase[jobid])


def _alive(pid: int, popen: subprocess.Popen[bytes] | None, record: Path) -> bool:
    if popen is not None:
        return popen.poll() is None  # our own child: reap it, so it does not linger as a zombie
    # A re-adopted runner is not our child; a zombie of it cannot exist here, but its pid could
    # have been reused by an unrelated process, or by the runner of a later job, so check it is
    # still the runner of this launch record.
    try:
        return _runner_cmdline(record) in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _find_runner(record: Path) -> int | None:
    """The pid of a live runner started on `record`, found by its command line."""
    wanted = _runner_cmdline(record)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if wanted in proc.joinpath("cmdline").read_bytes():
                return int(proc.name)
        except OSError:
            continue
    return None


def _runner_cmdline(record: Path) -> bytes:
    return f"cobaltlite.system.runner\0{record}\0".encode()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as stream:
        json.dump(data, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)
