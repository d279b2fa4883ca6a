"""The node agent: `cobaltlite node-agent`, one per compute host, driven by the system component.

As Cobalt's forkers did, the agent starts jobs where they run, on behalf of the system on the
service host. It listens on TCP (TLS and the shared secret, as components do; see
cobaltlite.rpc.tls) and runs each job through the same per-job runner as a local launch
(cobaltlite.system.runner): as the submitting user, in a session of its own, with the wall time
and kill handling that runner gives. The runner's records live in `<state-dir>/agent/`.

The system asks the agent, at each of its polls, for `hello()` and the state of its jobs. The
agent's answer carries a boot id, drawn afresh at every start: a job belongs to the agent run
that launched it, and a restarted agent does not know it. At start the agent ends every runner
a previous run of it left (SIGTERM, as qdel; the system has ended those jobs as lost, since the
boot id changed) and only then serves, so a node returned to service runs nothing of an old job,
and no job runs twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import Pyro5.api
import structlog

from cobaltlite.config import Config, TcpAddress
from cobaltlite.system.agents import AGENT_OBJECT
from cobaltlite.system.runner import start_runner
from cobaltlite.system.service import find_runner, write_json

log = structlog.get_logger("node-agent")

_RECORD_KEYS = ("jobid", "uid", "gid", "command", "args", "cwd", "env", "umask", "outputpath",
                "errorpath", "cobaltlog", "walltime", "cobalt_env", "nodes")
_LEFTOVER_WAIT = 5.0
"""Seconds beyond the kill grace a previous run's runner gets to end at start."""


@Pyro5.api.expose
class NodeAgentAPI:
    """What the system calls on a compute host. Errors are ValueError or LookupError with a
    message naming the host and the job."""

    def __init__(self, host: str, state_dir: Path, kill_grace: float) -> None:
        self.host = host
        self.boot = secrets.token_hex(8)
        self.kill_grace = kill_grace
        self.dir = state_dir / "agent"
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._runners: dict[int, subprocess.Popen[bytes]] = {}

    def hello(self) -> dict[str, str]:
        return {"host": self.host, "boot": self.boot}

    def launch(self, jobid: int, record: dict[str, Any]) -> str:
        """Start job `jobid`'s runner here; returns this run's boot id. A job this agent has
        already launched is refused, so a repeated launch never runs a job twice."""
        missing = [key for key in _RECORD_KEYS if key not in record]
        if missing:
            raise ValueError(f"{self.host}: job {jobid}: launch record lacks {', '.join(missing)}")
        with self._lock:
            path = self.dir / f"{jobid}.json"
            if jobid in self._runners or path.exists():
                raise ValueError(f"{self.host}: job {jobid} was already launched here")
            nodefile = self.dir / f"{jobid}.nodes"
            local = {
                **{key: record[key] for key in _RECORD_KEYS},
                "kill_grace": self.kill_grace,
                "status_path": str(self.dir / f"{jobid}.status"),
                "started_path": str(self.dir / f"{jobid}.started"),
                "cleanup_path": str(self.dir / f"{jobid}.cleanup"),
                "kill_path": str(self.dir / f"{jobid}.kill"),
                "cobalt_env": {**record["cobalt_env"], "COBALT_NODEFILE": str(nodefile)},
            }
            try:
                nodefile.write_text("".join(f"{node}\n" for node in record["nodes"]))
                nodefile.chmod(0o644)  # the job, running as its user, reads it
                # The directory stays 0700 but for traversal: the job must reach its nodefile.
                os.chmod(self.dir, 0o711)
                write_json(path, local)
                self._runners[jobid] = start_runner(path)
            except OSError as exc:
                self._forget_files(jobid)
                raise ValueError(f"{self.host}: job {jobid}: cannot start its runner: "
                                 f"{exc}") from None
        log.info("job launched", jobid=jobid, runner=self._runners[jobid].pid,
                 user=record["uid"], nodes=record["nodes"])
        return self.boot

    def status(self, jobids: list[int]) -> dict[str, dict[str, Any]]:
        """Each job's state here: {"state": "running", "phase": ...}, {"state": "ended",
        "status": the runner's status record}, or {"state": "unknown"} (not launched by this
        run of the agent). Keys are job ids as text (JSON has no other keys)."""
        return {str(jobid): self._status(int(jobid)) for jobid in jobids}

    def _status(self, jobid: int) -> dict[str, Any]:
        with self._lock:
            runner = self._runners.get(jobid)
        if runner is None:
            return {"state": "unknown"}
        status = _read(self.dir / f"{jobid}.status")
        if status is None and runner.poll() is None:
            phase = ("cleanup" if (self.dir / f"{jobid}.cleanup").exists() else
                     "busy" if (self.dir / f"{jobid}.started").exists() else "allocated")
            return {"state": "running", "phase": phase}
        status = status or _read(self.dir / f"{jobid}.status")
        if status is None:  # the runner died without a word (killed outright)
            log.error("job lost: its runner ended without a status", jobid=jobid)
            status = {"jobid": jobid, "exit_status": None, "reason": "lost",
                      "end_time": time.time()}
        return {"state": "ended", "status": status}

    def kill(self, jobid: int, why: dict[str, Any] | None = None) -> bool:
        """SIGTERM the job's runner (qdel, or a failure when `why` gives the runner's kill
        record); False if the job does not run here."""
        with self._lock:
            runner = self._runners.get(jobid)
            if runner is None or runner.poll() is not None:
                return False
            if why is not None:
                with contextlib.suppress(OSError):  # the kill still happens, as "deleted"
                    write_json(self.dir / f"{jobid}.kill", why)
            runner.send_signal(signal.SIGTERM)
        log.info("job kill sent", jobid=jobid, runner=runner.pid)
        return True

    def forget(self, jobid: int) -> None:
        """The system has recorded the job's end: drop its files."""
        with self._lock:
            runner = self._runners.get(jobid)
            if runner is not None and runner.poll() is None:
                raise ValueError(f"{self.host}: job {jobid} still runs; kill it first")
            self._runners.pop(jobid, None)
            self._forget_files(jobid)

    def _forget_files(self, jobid: int) -> None:
        for suffix in (".status", ".started", ".cleanup", ".kill", ".nodes", ".json"):
            with contextlib.suppress(OSError):
                (self.dir / f"{jobid}{suffix}").unlink(missing_ok=True)

    def _end_previous_run(self) -> None:
        """End every runner a previous run of this agent left, and drop its files."""
        records = sorted(self.dir.glob("*.json"))
        ended: list[int] = []
        for record in records:
            jobid = int(record.stem)
            pid = find_runner(record)
            if pid is not None:
                _write_kill(self.dir / f"{jobid}.kill", self.host)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + self.kill_grace + _LEFTOVER_WAIT
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _alive(pid):
                    log.error("runner of a previous run did not end; its files are kept",
                              jobid=jobid, runner=pid)
                    continue
            self._forget_files(jobid)
            ended.append(jobid)
        if ended:
            log.warning("jobs of the previous agent run ended (the system has reported them "
                        "lost)", jobids=ended)


def _write_kill(path: Path, host: str) -> None:
    with contextlib.suppress(OSError):
        write_json(path, {"reason": "lost", "message": f"the node agent on {host} restarted; "
                                                       "the system ended this job as lost"})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def serve_agent(config: Config, host: str, listen: TcpAddress) -> Any:
    """Start serving this host's agent at `listen` (after ending what a previous run left);
    returns the daemon."""
    from cobaltlite.rpc.peers import serve_component

    api = NodeAgentAPI(host, config.state_dir, config.kill_grace)
    api._end_previous_run()
    daemon = serve_component(config, AGENT_OBJECT, api, address=listen)
    log.info("node agent serving", host=host, address=str(listen), boot=api.boot,
             tls=config.tls is not None)
    return daemon
