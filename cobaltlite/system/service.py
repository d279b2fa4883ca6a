"""The system component's logic: the live machine, launching runners, collecting their ends.

State on disk, under `<state-dir>/system/`: for each job a `<jobid>.json` launch record (spec,
location, runner pid), the runner's markers `<jobid>.started` and `<jobid>.cleanup`, and, once
the runner is done, `<jobid>.status`. All are written by atomic rename; a launch whose record
cannot be written, or whose runner cannot start, holds no place. On start the service re-reads
every launch record: a job whose runner still lives is re-adopted (its place is held again, in
the phase its markers say, and the runner, checked by its command line, is held by a pidfd,
through which kill() signals it); a job whose runner left a status file is reported ended; a
job whose runner is gone without a status is reported ended as "lost" (after the cleanup below,
if the job had started: without a `.started` marker it never ran, as the job process waits for
the marker before it runs the job). A job's files are removed only after the queue manager has
acknowledged its end.

A held place goes through three phases, which partitions() shows in place of the machine's
`busy` (Cobalt's partition states, reference §6.3):

* `allocated`: placed and the runner started, but the runner has not yet reported the job
  process (no `.started` marker);
* `busy`: the job runs;
* `cleanup`: the job's main process has ended with processes left behind, or a kill (qdel, wall
  time) was requested, and the runner is killing what is left (`.cleanup` marker); or the
  runner itself is gone without a status (killed outright, crashed) after it started the job,
  and the service kills what is left of the job in its place.

The place is released only when the status file exists, which the runner writes after the last
process of the job is gone, and the queue manager has acknowledged the job's end (until then the
place shows `cleanup`): nothing of one job ever runs beside the next job on the same nodes, and
the system never hands out nodes the queue manager still shows busy. A runner that cannot write
a file (a full state disk) retries until it can, so its place stays held meanwhile; a failed
poll (ENOSPC, EIO) is logged and retried at the next.
When the runner is gone without a status but its `.started` marker names the job's pid, which is
the job's process group (the job called setsid), the service does the runner's cleanup itself:
SIGTERM to every live member of that group it can tie to the job, then from `kill_grace` seconds
on SIGKILL at every poll until none is left; only then is the job reported "lost" and its place
released. Each poll advances this by one step, so it never holds up the poll loop or other jobs.
The markers are read on each poll and whenever partitions() is asked.

Failed components (partadm --fail) are kept in `<state-dir>/system/failed-components` (a JSON
list, written by atomic rename before anything is killed) and failed again at start, so they
stay out of service across restarts until partadm --unfail. A job running on a place over a
failed component is killed: the service writes `<jobid>.kill` (end reason "component failure"
and why) and sends the runner SIGTERM; the runner puts the reason in the job's .cobaltlog and
status. The failure forecast (P_f per component, cobaltlite/system/forecast.py) is re-read at
each poll when its file changed.

With node agents (`node_agents:`, cobaltlite/system/agents.py) a job is launched through the
agent of its place's launch host instead of a local runner; its launch record names the host
("agent") and the agent run's boot id ("boot"). Each poll asks every agent how its jobs are,
outside the lock. A job whose agent does not answer, restarted (another boot id) or does not
know it ends as "lost", with the reason in the log; the agent's node goes out of service while
it does not answer (`partlist` shows it `down`, `partlist --agents` says why) and comes back at
its next answer. A launch the agent refused, or that could not reach it, holds no place; one
whose answer was lost (a time out) is kept, and the next poll finds out whether it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from Pyro5.errors import CommunicationError

from cobaltlite.clock import Clock
from cobaltlite.errors import InputError, MachineError
from cobaltlite.machine.description import BGPDescription, FlatDescription
from cobaltlite.machine.runtime import build_machine
from cobaltlite.system import procfs
from cobaltlite.system.admin import CHECKED_WITH_QUEUES, PlaceKeeper
from cobaltlite.system.agents import NodeAgents, describe
from cobaltlite.system.files import write_json
from cobaltlite.system.forecast import ForecastKeeper
from cobaltlite.system.layout_store import LayoutKeeper
from cobaltlite.system.runner import start_runner

log = structlog.get_logger("system")

ALLOCATED, BUSY, CLEANUP = "allocated", "busy", "cleanup"
FAILURE_END = "component failure"
"""The end reason of a job killed because a component under it failed."""
_JOB_FILES = (".status", ".started", ".cleanup", ".kill", ".json")
"""A job's files, removed in this order: the launch record last, so a crash halfway leaves a
record that a restart reports again (the queue manager takes a repeated end report calmly)."""


@dataclass
class _Leftovers:
    """A started job whose runner is gone without a status: the service kills what is left."""

    job_pid: int  # the job's main process, and so its process group: the job called setsid
    kill_at: float | None = None  # clock time from which SIGKILL follows the first SIGTERM
    killing: bool = False  # whether SIGKILL has been sent (logged once, sent at every poll)


class SystemService:
    def __init__(
        self,
        description: BGPDescription | FlatDescription,
        state_dir: Path,
        clock: Clock,
        report_end: Callable[[int, int | None, str, float], bool],
        kill_grace: float = 10.0,
        forecast_file: Path | None = None,
        report_failure_kill: Callable[[int, str, float], bool] | None = None,
        waiting_jobs: Callable[[], Mapping[str, int]] | None = None,
        agents: NodeAgents | None = None,
    ) -> None:
        """`report_end(jobid, exit status, end reason, end time)` tells the queue manager a
        job ended; `report_failure_kill(jobid, failed component, end time)`, when given, tells
        it instead of a job killed because a component under it failed; `waiting_jobs()`
        asks it {queue: jobs waiting} to check queue mappings (None: not checked). With
        `agents`, jobs run through the compute hosts' node agents."""
        self.description = description
        self.machine = build_machine(description)
        self.clock = clock
        self.report_end = report_end
        self.report_failure_kill = report_failure_kill
        self.kill_grace = kill_grace
        self.dir = state_dir / "system"
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self._lock = threading.RLock()
        self._runners: dict[int, int] = {}  # jobid -> runner pid
        self._pidfds: dict[int, int] = {}  # jobid -> pidfd of a re-adopted runner
        self._leftovers: dict[int, _Leftovers] = {}  # held jobs the service is cleaning up
        self._phase: dict[int, str] = {}  # jobid -> ALLOCATED, BUSY or CLEANUP, while held
        self._ended: dict[int, dict[str, Any]] = {}  # jobid -> status awaiting acknowledgement
        self.agents = agents
        # One thread per host at most; each keeps its own proxies (Peer: one per thread).
        self._agent_pool = ThreadPoolExecutor(
            max_workers=min(32, len(agents.states)) if agents else 1,
            thread_name_prefix="agent poll")
        self._remote: dict[int, tuple[str, str]] = {}  # jobid -> (agent host, its boot id)
        self._remote_ended: dict[int, str] = {}  # ended remote jobs -> host, to forget there
        self.forecast = ForecastKeeper(self.machine, forecast_file, clock)
        self._refresh_forecast()
        self._readopt()
        self._fail_again()
        self._waiting_jobs = waiting_jobs
        self.places = PlaceKeeper(self.machine, self.dir / "places-admin")
        self.layout = LayoutKeeper(self.machine, self.dir)

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

    def machine_state(self, known_forecast: int) -> dict[str, Any]:
        """What a scheduler's replica of the machine needs at each pass, in one answer: the
        allocations, the failed components, and the forecast unless it is still version
        `known_forecast`."""
        with self._lock:
            return {"allocations": self.allocations(),
                    "failed": self.machine.failed_components(),
                    "forecast": self.forecast.wire(known_forecast),
                    **self._admin_state(),
                    "queue_places": self.places.place_map,
                    "queue_partitions": self.layout.wire}

    def admin_state(self) -> dict[str, list[str]]:
        """The places an admin took out of scheduling: `unscheduled` (deleted or disabled) and
        `inactive` (deactivated), as a replica of the machine needs them."""
        with self._lock:
            return self._admin_state()

    def _admin_state(self) -> dict[str, list[str]]:
        admin = self.places.state
        return {"unscheduled": sorted(admin.deleted | admin.disabled),
                "inactive": sorted(admin.inactive)}

    def partitions(self) -> list[dict[str, Any]]:
        """The machine's block states, each held place shown in its job's phase, with the
        failure chance now (`pf`) of every place the forecast gives one."""
        with self._lock:
            try:
                self._collect()
            except Exception as exc:  # a failing disk: show the phases as last known
                log.error("collect failed", error=repr(exc))
            rows: list[dict[str, Any]] = self.machine.block_states()
            now = self.clock.now()
            chance = self.forecast.active.chance
            admin = self.places.state
            down = {s.node for s in self.agents.states.values() if s.down} if self.agents else set()
            for row in rows:
                name = str(row["name"])
                row["queues"] = list(admin.queues.get(name, ()))
                row["managed"] = name not in admin.deleted
                row["scheduled"] = name not in admin.disabled
                row["functional"] = name not in admin.inactive
                if row["name"] in down:
                    row["state"] = "down"
                elif row["state"] == "busy":
                    # Every held place has a phase; were one missed, partlist must still work.
                    row["state"] = self._phase.get(row["jobid"], BUSY)
                row["pf"] = chance(str(row["name"]), now, now)
            return rows

    # ---- failures ----------------------------------------------------------------------

    def failure_status(self) -> dict[str, Any]:
        """The failed components and where the forecast comes from (schedctl --status)."""
        with self._lock:
            return {"failed": self.machine.failed_components(),
                    "forecast": self.forecast.status()}

    def fail(self, components: list[str], by: str) -> dict[str, Any]:
        """Take components out of service and kill the jobs running over them.

        All or nothing: an unknown component (ValueError naming it) or a failed-list that
        cannot be recorded changes nothing. Failing a failed component again is harmless."""
        with self._lock:
            before = self.machine.failed_components()
            hit: dict[int, str] = {}  # job -> the first named component under it
            try:
                for name in components:
                    for jobid in self.machine.fail(name):
                        hit.setdefault(jobid, name)
                self._save_failed()
            except (MachineError, OSError) as exc:
                for name in set(self.machine.failed_components()) - set(before):
                    self.machine.unfail(name)
                raise ValueError(f"nothing changed: {exc}") from None
            killed = [jobid for jobid, name in sorted(hit.items())
                      if self._kill_for_failure(jobid, name, f"component {name} failed "
                                                             f"(partadm --fail by {by})")]
            log.warning("components failed", components=components, by=by, killed=killed)
            return {"failed": self.machine.failed_components(), "killed": killed}

    def unfail(self, components: list[str], by: str) -> dict[str, Any]:
        """Return failed components to service; all or nothing, as fail()."""
        with self._lock:
            failed = self.machine.failed_components()
            unknown = [name for name in components if name not in failed]
            if unknown:
                raise ValueError(f"nothing changed: {', '.join(map(repr, unknown))} "
                                 f"{'is' if len(unknown) == 1 else 'are'} not failed (failed: "
                                 f"{', '.join(failed) or 'none'})")
            for name in components:
                self.machine.unfail(name)
            try:
                self._save_failed()
            except OSError as exc:
                for name in components:
                    self.machine.fail(name)
                raise ValueError(f"nothing changed: {exc}") from None
            log.warning("components back in service", components=components, by=by)
            return {"failed": self.machine.failed_components()}

    def _kill_for_failure(self, jobid: int, component: str, message: str) -> bool:
        """Kill a running job because of a failure, telling its runner why; False when the job
        is not running (its end is already on its way)."""
        why = {"reason": FAILURE_END, "message": message, "component": component}
        if jobid in self._remote:
            log.warning("job killed by a failure", jobid=jobid, why=message)
            return self._kill_remote(jobid, why)
        if jobid not in self._runners:
            return False
        try:
            write_json(self.dir / f"{jobid}.kill", why)
        except OSError as exc:  # the kill must still happen: it then ends as "deleted"
            log.error("kill reason not recorded", jobid=jobid, error=str(exc))
        log.warning("job killed by a failure", jobid=jobid, why=message)
        return self.kill(jobid)

    def _save_failed(self) -> None:
        # A node whose agent is down is out of service only until the agent answers again:
        # not the operator's failure, so not kept across restarts.
        down = {s.node for s in self.agents.states.values() if s.down} if self.agents else set()
        write_json(self.dir / "failed-components",
                   [name for name in self.machine.failed_components() if name not in down])

    def _fail_again(self) -> None:
        """Fail again the components failed before a restart; kill what runs over them (a
        crash may have come between recording the failure and the kill)."""
        path = self.dir / "failed-components"
        try:
            names = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("failed components unreadable, none restored", path=str(path),
                      error=str(exc))
            return
        for name in names:
            try:
                hit = self.machine.fail(name)
            except MachineError as exc:  # the machine description changed meanwhile
                log.error("failed component not restored", component=name, error=str(exc))
                continue
            for jobid in hit:
                self._kill_for_failure(jobid, name, f"component {name} failed (found at restart)")
        log.info("failed components restored", components=self.machine.failed_components())

    # ---- administration (partadm, nodeadm) ---------------------------------------------

    def administer(self, action: str, places: list[str], queues: list[str], force: bool,
                   by: str) -> dict[str, Any]:
        """One partadm/nodeadm change, all or nothing (PlaceKeeper.change); returns the new
        state as `PlaceAdmin.to_json` writes it."""
        waiting = None
        if self._waiting_jobs is not None and action in CHECKED_WITH_QUEUES:
            # Asked before taking the lock: the queue manager may be waiting on it (a launch).
            try:
                waiting = self._waiting_jobs()
            except Exception as exc:  # the queue manager down or failing: change nothing
                raise ValueError(f"nothing changed: cannot check queues with the queue "
                                 f"manager ({exc})") from None
        with self._lock:
            try:
                state = self.places.change(action, places, queues, force,
                                           self.machine.held_by(), waiting)
            except OSError as exc:
                raise ValueError(f"nothing changed: {exc}") from None
            log.warning("places administered", action=action, places=places, queues=queues,
                        force=force, by=by)
            return state.to_json()

    # ---- the queue layout (partadm --layout; seed 002, docs/hybrid-queues.md) ---------------

    def set_queue_layout(self, text: str, dry_run: bool, by: str) -> dict[str, Any]:
        """Check a queue layout's YAML on this machine (laid_out) and, unless `dry_run`, make
        it the active one, kept across restarts (LayoutKeeper): the scheduler places by it from
        its next pass (running jobs keep their nodes). Blank text removes the layout. Returns
        the partitions as node ranges (`QueuePartitions.listing`, empty without a layout);
        ValueError saying what is wrong, and nothing changes."""
        with self._lock:
            try:
                partitions = (self.layout.check(text) if dry_run else self.layout.change(text))
            except InputError as exc:
                raise ValueError(f"nothing changed: {exc}") from None
            except OSError as exc:
                raise ValueError(f"nothing changed: the layout cannot be recorded: {exc}"
                                 ) from None
            if not dry_run:
                log.warning("queue layout set", by=by, queues=sorted(partitions.own)
                            if partitions is not None else None)
            return {} if partitions is None else partitions.listing(self.machine.total_nodes)

    def queue_layout(self) -> str | None:
        """The active queue layout's YAML as it was given, or None."""
        with self._lock:
            return self.layout.text

    # ---- the failure forecast ------------------------------------------------------------

    def set_forecast(self, rows: Any, by: str) -> int:
        """A monitor's forecast replaces the active one; ForecastError if any entry is wrong."""
        with self._lock:
            count = self.forecast.set_entries(rows, by)
            self.machine.failures = self.forecast.source_for_machine()
            return count

    def _refresh_forecast(self) -> None:
        if self.forecast.refresh():
            self.machine.failures = self.forecast.source_for_machine()

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int:
        """Hold `location` for the job and start its runner; return the nodes held."""
        with self._lock:
            if jobid in self._runners:
                raise ValueError(f"job {jobid} is already running")
            if jobid in self._ended:  # a resubmitted job whose previous run is still ending
                raise ValueError(f"job {jobid}: its previous run has not finished ending")
            now = self.clock.now()
            try:
                nodes = self.machine.allocate(location, jobid, now + spec["walltime"])
            except MachineError as exc:
                raise ValueError(str(exc)) from None
            record = {
                **spec,
                "location": location,
                "kill_grace": self.kill_grace,
                "status_path": str(self.dir / f"{jobid}.status"),
                "started_path": str(self.dir / f"{jobid}.started"),
                "cleanup_path": str(self.dir / f"{jobid}.cleanup"),
                "kill_path": str(self.dir / f"{jobid}.kill"),
                "cobalt_env": {
                    "COBALT_JOBID": str(jobid),
                    "COBALT_PARTNAME": location,
                    "COBALT_PARTSIZE": str(nodes),
                    "COBALT_JOBSIZE": str(spec["nodes"]),
                },
            }
            path = self.dir / f"{jobid}.json"
            if self.agents is not None:
                return self._launch_remote(jobid, path, record, nodes)
            try:
                write_json(path, record)
                runner = start_runner(path)
            except OSError as exc:
                # No runner: give the place back, or it would stay held by a job no one runs.
                self.machine.release(jobid)
                path.unlink(missing_ok=True)
                raise ValueError(f"job {jobid}: cannot record its launch or start its runner: "
                                 f"{exc}") from None
            # The runner runs from here on: track it before anything else can fail.
            self._runners[jobid] = runner.pid
            self._expected_end[jobid] = now + spec["walltime"]
            self._phase[jobid] = ALLOCATED
            self._popen[jobid] = runner
            record["runner_pid"] = runner.pid
            try:
                write_json(path, record)
            except OSError as exc:  # a restart finds the runner by its command line instead
                log.warning("runner pid not recorded", jobid=jobid, error=str(exc))
            log.info("job launched", jobid=jobid, location=location, runner=runner.pid)
            return nodes

    def _launch_remote(self, jobid: int, path: Path, record: dict[str, Any], nodes: int) -> int:
        """launch() through the node agent of the place's launch host. Called with the lock,
        the place already held."""
        assert self.agents is not None
        location = record["location"]
        host, node_names = self.agents.placement(location)
        state = self.agents.states[host]
        if state.down:
            self.machine.release(jobid)
            raise ValueError(f"job {jobid}: the node agent on {host} is down ({state.down})")
        record.update(agent=host, nodes=node_names, boot="")
        try:
            write_json(path, record)
        except OSError as exc:
            self.machine.release(jobid)
            raise ValueError(f"job {jobid}: cannot record its launch: {exc}") from None
        try:
            record["boot"] = self.agents.call(host, "launch", jobid, record)
        except Exception as exc:
            # Exactly CommunicationError: the connection, TLS or the secret failed, before the
            # request was sent (cobaltlite.rpc.client); a refusal by the agent arrives as a
            # builtin error. Either way nothing runs. Anything else (a time out, a connection
            # closed after the request went) leaves it open: the next poll asks the agent.
            if type(exc) is CommunicationError or not isinstance(exc, CommunicationError):
                self.machine.release(jobid)
                path.unlink(missing_ok=True)
                log.error("launch failed", jobid=jobid, host=host, error=describe(exc))
                raise ValueError(f"job {jobid}: cannot launch on {host}: {describe(exc)}"
                                 ) from None
            log.warning("launch answer lost; the next poll asks the agent", jobid=jobid,
                        host=host, error=describe(exc))
        with contextlib.suppress(OSError):  # without the boot id a restart finds it lost
            write_json(path, record)
        now = self.clock.now()
        self._remote[jobid] = (host, record["boot"])
        self._expected_end[jobid] = now + record["walltime"]
        self._phase[jobid] = ALLOCATED
        log.info("job launched", jobid=jobid, location=location, agent=host)
        return nodes

    def _kill_remote(self, jobid: int, why: dict[str, Any] | None) -> bool:
        host, _boot = self._remote[jobid]
        try:
            killed = bool(self.agents.call(host, "kill", jobid, why))  # type: ignore[union-attr]
        except Exception as exc:  # the agent down: its next poll ends the job as lost
            log.warning("job kill not delivered", jobid=jobid, host=host, error=describe(exc))
            return False
        log.info("job kill sent", jobid=jobid, agent=host)
        return killed

    def kill(self, jobid: int) -> bool:
        if jobid in self._remote:
            return self._kill_remote(jobid, None)
        # The signal goes under the lock: a runner is forgotten under it once found ended, and
        # from then on its pid may be another process's.
        with self._lock:
            pid = self._runners.get(jobid)
            if pid is None:
                return False
            pidfd = self._pidfds.get(jobid)
            try:
                if pidfd is None:
                    # Our own child: its pid is its own until _collect reaps it (under the lock).
                    os.kill(pid, signal.SIGTERM)
                else:
                    # Re-adopted, not our child: only the pidfd is sure to name the runner.
                    signal.pidfd_send_signal(pidfd, signal.SIGTERM)
            except ProcessLookupError:
                return False
        log.info("job kill sent", jobid=jobid, runner=pid)
        return True

    def job_status(self, jobid: int) -> str:
        with self._lock:
            if jobid in self._ended:
                return "ended"
            if jobid in self._runners or jobid in self._leftovers or jobid in self._remote:
                return "running"
        return "unknown"

    # ---- the poll loop ----------------------------------------------------------------

    def poll(self) -> None:
        """Collect finished runners and report their ends; retried until acknowledged.

        Never raises: an error of one poll (a full or failing state disk: ENOSPC, EIO) is
        logged and the next poll tries again, so the poll thread never stops."""
        try:
            self._poll()
        except Exception as exc:
            log.error("poll failed, retried at the next poll", error=repr(exc))

    def _poll(self) -> None:
        if self.agents is not None:
            self._poll_agents()
        with self._lock:
            self._refresh_forecast()
            self._collect()
            pending = list(self._ended.items())
        for jobid, status in pending:
            try:
                if status["reason"] == FAILURE_END and self.report_failure_kill is not None:
                    acknowledged = self.report_failure_kill(jobid, status.get("component", "?"),
                                                            status["end_time"])
                else:
                    acknowledged = self.report_end(jobid, status["exit_status"],
                                                   status["reason"], status["end_time"])
            except Exception as exc:  # the queue manager may be down: try again next poll
                log.warning("end report failed", jobid=jobid, error=str(exc))
                return
            if acknowledged:
                # Only now is the place free: until the queue manager knows the job ended, it
                # shows the job's nodes busy, and no other job may be placed on them. The files
                # go under the lock and before the release: a resubmitted job may be launched
                # again as soon as its place is free, and its new files must not be removed.
                with self._lock:
                    if self._ended.pop(jobid, None) is None:
                        continue
                    host = self._remote_ended.pop(jobid, None)
                    if host is not None:
                        with contextlib.suppress(Exception):  # the agent's files: best effort
                            self.agents.call(host, "forget", jobid)  # type: ignore[union-attr]
                    for suffix in _JOB_FILES:
                        with contextlib.suppress(OSError):  # a failing disk: a restart retries
                            (self.dir / f"{jobid}{suffix}").unlink(missing_ok=True)
                    if jobid in self.machine.held_by():
                        self.machine.release(jobid)
                        self._expected_end.pop(jobid, None)
                        self._phase.pop(jobid, None)

    def _poll_agents(self) -> None:
        """Ask every node agent how it and its jobs are, all at once and outside the lock (a
        host that does not answer costs AGENT_TIMEOUT, not the sum over the hosts down), then
        act on the answers under the lock."""
        assert self.agents is not None
        with self._lock:
            jobs: dict[str, list[int]] = {host: [] for host in self.agents.states}
            for jobid, (host, _boot) in self._remote.items():
                jobs[host].append(jobid)
        for host, answer in zip(jobs, self._agent_pool.map(self._ask_agent, jobs.items()),
                                strict=True):
            with self._lock:
                if isinstance(answer, str):
                    self._agent_silent(host, answer)
                else:
                    self._agent_answered(host, *answer)

    def _ask_agent(self, asked: tuple[str, list[int]]) -> tuple[str, dict[str, Any]] | str:
        """(boot id, its jobs' states) from the agent of a host, or why it did not answer."""
        assert self.agents is not None
        host, jobids = asked
        try:
            hello = self.agents.call(host, "hello")
            return hello["boot"], self.agents.call(host, "status", jobids) if jobids else {}
        except Exception as exc:
            error = describe(exc)
            address = self.agents.states[host].address
            # A broken connection does not say where.
            return error if address in error else f"{address}: {error}"

    def _agent_silent(self, host: str, error: str) -> None:
        assert self.agents is not None
        state = self.agents.states[host]
        if state.down is None and state.node is not None and (
                state.node not in self.machine.failed_components()):
            self.machine.fail(state.node)
        if state.down != error:  # logged again when the cause changes: the admin wants the last
            log.error("node agent not answering: node out of service", host=host,
                      node=state.node, error=error)
            state.down = error
        for jobid in [j for j, (h, _) in self._remote.items() if h == host]:
            self._remote_lost(jobid, f"the node agent on {host} is not answering ({error})")

    def _agent_answered(self, host: str, boot: str, answers: dict[str, Any]) -> None:
        assert self.agents is not None
        state = self.agents.states[host]
        if state.down is not None:
            log.warning("node agent answers again: node back in service", host=host,
                        node=state.node, boot=boot)
            state.down = None
            if state.node is not None and state.node not in self._operator_failed():
                self.machine.unfail(state.node)
        state.boot = boot
        for jobid in [j for j, (h, _) in self._remote.items() if h == host]:
            launched_by = self._remote[jobid][1]
            answer = answers.get(str(jobid), {"state": "unknown"})
            if launched_by and launched_by != boot:
                self._remote_lost(jobid, f"the node agent on {host} restarted since the launch")
            elif answer["state"] == "unknown":
                self._remote_lost(jobid, f"the node agent on {host} does not know the job")
            elif answer["state"] == "running":
                self._remote[jobid] = (host, boot)
                if answer["phase"] != self._phase[jobid]:
                    self._phase[jobid] = answer["phase"]
                    log.info("job phase", jobid=jobid, phase=answer["phase"])
            else:
                del self._remote[jobid]
                self._remote_ended[jobid] = host
                self._release(jobid, answer["status"])

    def _operator_failed(self) -> set[str]:
        """The components failed by partadm --fail (recorded), as opposed to agents down."""
        try:
            return set(json.loads((self.dir / "failed-components").read_text()))
        except (OSError, ValueError):
            return set()

    def _remote_lost(self, jobid: int, why: str) -> None:
        host, _boot = self._remote.pop(jobid)
        log.error("job lost", jobid=jobid, host=host, why=why)
        self._release(jobid, self._lost(jobid))

    def agent_listing(self) -> list[dict[str, Any]]:
        """Each node agent: host, address, node, state (up or down), why it is down."""
        if self.agents is None:
            return []
        with self._lock:
            return self.agents.listing()

    def _collect(self) -> None:
        """Bring every held job's phase up to date from its runner's markers, release the
        places of jobs whose runner has written its status, clean up after those whose runner
        is gone without one, and release their places once nothing of the job is left. Called
        with the lock."""
        for jobid in list(self._runners):
            status = self._read_status(jobid)
            if status is None and self._runner_alive(jobid):
                self._update_phase(jobid)
                continue
            # The runner may have written its status just before it ended.
            status = status or self._read_status(jobid)
            if status is None:
                self._runner_gone(jobid)
            else:
                self._release(jobid, status)
        for jobid, leftovers in list(self._leftovers.items()):
            if not self._kill_leftovers(jobid, leftovers):
                untied = _group_members(leftovers.job_pid)
                if untied:
                    log.warning("processes of the job's process group that the service could "
                                "not tie to the job or signal: left alone",
                                jobid=jobid, pids=untied)
                self._release(jobid, self._lost(jobid))

    def _runner_gone(self, jobid: int) -> None:
        """The runner of held job `jobid` ended without a status. If it had started the job,
        processes of the job may still run on the place: they are killed before the release
        (phase cleanup, advanced at each poll by _kill_leftovers). Otherwise nothing ran, and
        the job is reported lost at once."""
        self._forget_runner(jobid)
        try:
            job_pid = int(json.loads((self.dir / f"{jobid}.started").read_text())["job_pid"])
        except (OSError, ValueError, KeyError, TypeError):
            self._release(jobid, self._lost(jobid))
            return
        self._leftovers[jobid] = _Leftovers(job_pid)
        self._phase[jobid] = CLEANUP
        log.info("job phase", jobid=jobid, phase=CLEANUP, reason="runner gone", job_pid=job_pid)

    def _kill_leftovers(self, jobid: int, leftovers: _Leftovers) -> bool:
        """One step of the runner's cleanup, done by the service: SIGTERM at the first call,
        nothing more during the grace period, SIGKILL at every call after it. Whether any
        process of the job was left at this step."""
        now = self.clock.now()
        signum: int
        if leftovers.kill_at is None:
            signum, leftovers.kill_at = signal.SIGTERM, now + self.kill_grace
        elif now >= leftovers.kill_at:
            signum = signal.SIGKILL
        else:
            signum = 0  # only look: the grace period runs
        left = _signal_job_group(jobid, leftovers.job_pid, signum)
        if left and signum == signal.SIGTERM:
            log.info("killing what is left of the job", jobid=jobid, processes=left,
                     signal="SIGTERM")
        elif left and signum == signal.SIGKILL and not leftovers.killing:
            leftovers.killing = True
            log.info("killing what is left of the job", jobid=jobid, processes=left,
                     signal="SIGKILL")
        return left > 0

    def _lost(self, jobid: int) -> dict[str, Any]:
        return {"jobid": jobid, "exit_status": None, "reason": "lost",
                "end_time": self.clock.now()}

    def _release(self, jobid: int, status: dict[str, Any]) -> None:
        self._forget_runner(jobid)
        self._leftovers.pop(jobid, None)
        # The place stays held (shown in cleanup) until poll() has the end acknowledged.
        self._phase[jobid] = CLEANUP
        self._ended[jobid] = status
        log.info("job finished", jobid=jobid, reason=status["reason"],
                 exit_status=status["exit_status"])
        if status.get("message"):
            log.warning("job failed to start", jobid=jobid, message=status["message"])

    def _runner_alive(self, jobid: int) -> bool:
        popen = self._popen.get(jobid)
        if popen is not None:
            return popen.poll() is None  # our own child: reap it, so it does not linger
        # A re-adopted runner is not our child: its pidfd turns readable once it has ended.
        ended = select.poll()
        ended.register(self._pidfds[jobid], select.POLLIN)
        return not ended.poll(0)

    def _forget_runner(self, jobid: int) -> None:
        """Stop tracking the runner of `jobid`, which has ended: from here on its pid may be
        reused, so kill() must no longer signal it."""
        self._runners.pop(jobid, None)
        self._popen.pop(jobid, None)
        pidfd = self._pidfds.pop(jobid, None)
        if pidfd is not None:
            os.close(pidfd)

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
        ended_at: dict[int, str] = {}  # ended, unacknowledged jobs -> their places
        for path in sorted(self.dir.glob("*.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                log.error("unreadable launch record", path=str(path), error=str(exc))
                continue
            jobid, pid = record["jobid"], record.get("runner_pid")
            if record.get("agent") and self.agents is not None:
                # Its agent's next answer tells whether it still runs.
                self.machine.allocate(record["location"], jobid,
                                      self.clock.now() + record["walltime"])
                self._expected_end[jobid] = self.clock.now() + record["walltime"]
                self._phase[jobid] = ALLOCATED
                self._remote[jobid] = (record["agent"], record.get("boot", ""))
                continue
            if pid is None and self._read_status(jobid) is None:
                # The crash may have come between starting the runner and recording its pid.
                pid = find_runner(path)
            pidfd = None if pid is None else _open_runner(pid, path)
            # Read after the look for the runner: one found gone wrote any status it ever will.
            status = self._read_status(jobid)
            if status is not None:
                if pidfd is not None:
                    os.close(pidfd)
                self._ended[jobid] = status
                ended_at[jobid] = record["location"]
                continue
            self.machine.allocate(record["location"], jobid,
                                  self.clock.now() + record["walltime"])
            self._expected_end[jobid] = self.clock.now() + record["walltime"]
            self._phase[jobid] = ALLOCATED
            if pidfd is None:
                # No runner: the crash came before it started (nothing ran, reported lost at
                # once), or it started the job and is gone since (cleaned up, then lost).
                self._runner_gone(jobid)
                continue
            self._runners[jobid] = pid
            self._pidfds[jobid] = pidfd
            self._update_phase(jobid)
            log.info("job re-adopted", jobid=jobid, runner=pid, location=record["location"],
                     phase=self._phase[jobid])
        # An ended job's place is held until its end is acknowledged, as in _release; after
        # the live jobs, which come first should state left by an older version overlap.
        for jobid, location in ended_at.items():
            try:
                self.machine.allocate(location, jobid, self.clock.now())
            except MachineError as exc:
                log.warning("ended job's place not held again", jobid=jobid, error=str(exc))
                continue
            self._phase[jobid] = CLEANUP


def _open_runner(pid: int, record: Path) -> int | None:
    """A pidfd of process `pid` if it is the live runner of launch record `record`, else None.

    The pid comes from the record or a scan, from before a restart of the service: the runner
    may have ended since and its pid gone to an unrelated process, or to the runner of a later
    job, so the command line is checked, after the pidfd is opened: the pidfd then names the
    very process checked, whatever becomes of the pid later."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    if _runner_cmdline(record) in _cmdline(pid):
        return pidfd
    os.close(pidfd)
    return None


_EXEC_SETTLE_SECONDS = 0.5


def _cmdline(pid: int) -> bytes:
    """/proc/<pid>/cmdline, b"" if the process is gone.

    A process that has just called exec shows an empty command line for a moment (the kernel
    sets up the new arguments after the point where Popen returns to the parent): read again
    until it is there, for a runner started just before a crash is exactly such a process.
    """
    deadline = time.monotonic() + _EXEC_SETTLE_SECONDS
    while True:
        text = _read_cmdline(pid)
        found = procfs.stat(pid)
        if text or found is None or found.ended or time.monotonic() >= deadline:
            return text
        time.sleep(0.01)


def _read_cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # it ended meanwhile
        return b""


def _group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    return [proc.pid for proc in procfs.processes() if not proc.ended and proc.pgrp == pgid]


def _signal_job_group(jobid: int, job_pid: int, signum: int) -> int:
    """Send `signum` (0: none, only look) to each live process of group `job_pid` that belongs
    to job `jobid`; return how many there were.

    The group id comes from the `.started` marker of a runner that is gone, maybe long ago (the
    system daemon may have been down meanwhile): once the job's group and session emptied, the
    pid could have been reused, and a stranger could lead a group of that id. So a process is
    signalled only if it is tied to the job by its environment: the runner puts
    COBALT_JOBID=<jobid> in the job's environment at exec, every descendant inherits it, and job
    ids are never reused, so a stranger does not carry it. (Start times would not do: the
    service records none, and a stranger's group is newer than the job too.) Only an account's
    own processes can carry an entry that account forged, and the kill would reach only
    processes that account may signal itself. The environment is read from /proc, which takes
    root or the process's own account, as the service has; a process whose environment cannot
    be read, or that cleared it (env -i), is not tied and is left alone, and a warning names it
    at release.

    The signal goes through a pidfd opened before the check, so it reaches the very process
    that was checked: were it to end and its pid be reused in between, the pidfd would refer to
    the ended process and the signal would go nowhere.
    """
    wanted = f"COBALT_JOBID={jobid}".encode()
    tied = 0
    for pid in _group_members(job_pid):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # it ended meanwhile; or no pidfd (Linux < 5.3): no safe way to signal
            continue
        try:
            if wanted in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                signal.pidfd_send_signal(pidfd, signum)
                tied += 1
        except OSError:  # it ended meanwhile, or its environment cannot be read: not tied
            continue
        finally:
            os.close(pidfd)
    return tied


def running_jobs(state_dir: Path) -> dict[int, int]:
    """Jobs whose runner is alive, as {jobid: runner pid}: what stopping the daemons leaves
    running (the next start of the system re-adopts them)."""
    found: dict[int, int] = {}
    for record in sorted((state_dir / "system").glob("*.json")):
        if not record.stem.isdigit():
            continue
        pid = find_runner(record)
        if pid is not None:
            found[int(record.stem)] = pid
    return found


def find_runner(record: Path) -> int | None:
    """The pid of a live runner started on `record`, found by its command line."""
    wanted = _runner_cmdline(record)
    deadline = time.monotonic() + _EXEC_SETTLE_SECONDS
    while True:
        settling = False
        for proc in procfs.processes():
            if proc.ended:
                continue
            text = _read_cmdline(proc.pid)
            if wanted in text:
                return proc.pid
            # An empty command line is a kernel thread (kthreadd, pid 2, and its children) or
            # a process in the middle of exec: maybe the runner (see _cmdline). Look again.
            settling |= not text and 2 not in (proc.pid, proc.ppid)
        if not settling or time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _runner_cmdline(record: Path) -> bytes:
    return f"cobaltlite.system.runner\0{record}\0".encode()
