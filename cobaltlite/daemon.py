"""`python -m cobaltlite.daemon COMPONENT --state-dir DIR`: run one component in the foreground.

`cobaltlite up` starts each component this way in the background; a systemd unit runs it
directly (etc/systemd/). SIGTERM and SIGINT stop it cleanly: the sockets close, the pid file goes.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from cobaltlite import logs
from cobaltlite.clock import Clock, WallClock
from cobaltlite.config import (
    COMPONENTS,
    Config,
    check_config_secrecy,
    ensure_layout,
    load_config,
)
from cobaltlite.errors import DatabaseInUseError, InputError
from cobaltlite.rpc.peers import Peer, serve_component
from cobaltlite.rpc.secret import create_secret
from cobaltlite.rpc.transport import USER_SOCKET_MODE, serve, serve_in_thread, shutdown

log = structlog.get_logger("daemon")

RECONCILE_INTERVAL = 30.0
UTILITY_POLL_INTERVAL = 1.0
USER_IDLE_TIMEOUT = 10.0
"""Seconds an idle user connection may hold a server worker; without it one user could take
every worker with idle connections and lock everyone else out."""


def _serve_users(path: Path, api: object, object_id: str, service: str):
    """A 0666 socket whose callers the kernel identifies; no secret, rights checked per call.

    `service` names the daemon to users in the message of an internal error."""
    daemon, _uri = serve(api, unix_socket=path, socket_mode=USER_SOCKET_MODE,
                         object_id=object_id, secret=None, peer_credentials=True,
                         idle_timeout=USER_IDLE_TIMEOUT, service=service)
    serve_in_thread(daemon)
    return daemon


def _watch_utility_file(manager: Any, config: Config, stop: threading.Event) -> None:
    """Load the utility file at start, then (utility_reload: auto) whenever it changes. The file
    is the registry's: one that `schedctl --reread-policy` found newly configured is watched too."""
    seen: tuple[int, int, int] | None = None
    watched: Path | None = None
    first = True
    while True:
        path = manager.policies.utility_file
        current: tuple[int, int, int] | None = None
        if path is not None:
            try:
                info = path.stat()
                current = (info.st_mtime_ns, info.st_size, info.st_ino)
            except OSError:
                current = None
        # A file newly named (by a reread, which loaded it) is not a change of the file.
        changed = current != seen and path == watched
        if path is not None and (first or (config.utility_reload == "auto" and changed)):
            try:
                manager.reload_policies("startup" if first else "file change (auto reload)")
            except Exception as exc:  # refused: logged by the registry; old policies stay
                log.warning("utility file not activated", error=str(exc))
        first = False
        seen, watched = current, path
        if stop.wait(UTILITY_POLL_INTERVAL):
            return


def run_queue_manager(config: Config, stop: threading.Event) -> list:
    from cobaltlite.accounting import AccountingLog
    from cobaltlite.policy.registry import PolicyRegistry
    from cobaltlite.queue_manager.api import ComponentAPI, UserAPI
    from cobaltlite.queue_manager.estimates import StartEstimator
    from cobaltlite.queue_manager.manager import QueueManager
    from cobaltlite.queue_manager.store import JobStore

    store = JobStore(config.database_url, sole_writer=True)
    store.init(default_policy=config.default_policy)
    accounting = AccountingLog(config.accounting_log, append=True, line_buffered=True)
    scheduler = Peer(config, "scheduler", timeout=5.0)

    def wake() -> None:
        # The scheduler may be down; its own timer catches up when it is back.
        with contextlib.suppress(Exception):
            scheduler.wake()

    def configured_utility_file() -> Path | None:
        named = load_config(config.state_dir).utility_file
        return Path(named) if named else None

    registry = PolicyRegistry(Path(config.utility_file) if config.utility_file else None,
                              config.utility_budget, configured=configured_utility_file)
    manager = QueueManager(store, WallClock(), accounting, Peer(config, "system"), wake,
                           registry, default_policy=config.default_policy,
                           usage_half_life=config.usage_half_life)
    threading.Thread(target=_watch_utility_file, args=(manager, config, stop),
                     name="utility file", daemon=True).start()

    def reconcile() -> None:
        # At start, then every RECONCILE_INTERVAL: a system that was down catches up, and a
        # database claim that a PostgreSQL restart dropped is taken again.
        while True:
            try:
                if store.renew_claim():
                    log.warning("database claim taken again: the database had dropped it")
            except DatabaseInUseError as exc:
                # Another queue manager holds the database now; two writers would corrupt
                # each other's view, so this one steps down.
                log.error("database claimed by another queue manager; stopping", error=str(exc))
                stop.set()
                return
            except Exception as exc:  # the database is still down: try again later
                log.warning("database claim not renewed", error=str(exc))
            try:
                manager.reconcile()
            except Exception as exc:  # the system is down or restarting: try again later
                log.warning("reconciliation postponed", error=str(exc))
            if stop.wait(RECONCILE_INTERVAL):
                return

    threading.Thread(target=reconcile, name="reconcile", daemon=True).start()
    estimator = StartEstimator(manager, Peer(config, "system"))
    return [serve_component(config, "queue-manager", ComponentAPI(manager, estimator)),
            _serve_users(config.user_socket, UserAPI(manager, config.admin_group),
                         "queue-manager-user", "the queue manager")]


def run_system(config: Config, stop: threading.Event) -> list:
    from cobaltlite.machine.catalog import load_description
    from cobaltlite.system.api import SystemAPI, SystemControlAPI
    from cobaltlite.system.service import SystemService

    queue_manager = Peer(config, "queue-manager", timeout=10.0)
    def report_end(jobid: int, exit_status: int | None, reason: str, end_time: float) -> bool:
        # Looked up per call: the queue manager may start after the system.
        return queue_manager.job_ended(jobid, exit_status, reason, end_time)

    def report_failure_kill(jobid: int, component: str, end_time: float) -> bool:
        return queue_manager.job_killed_by_failure(jobid, component, end_time,
                                                   config.failed_jobs == "resubmit")

    description = load_description(config.machine)
    agents = None
    if config.node_agents:
        from cobaltlite.system.agents import NodeAgents

        agents = NodeAgents(config, description)
    service = SystemService(description, config.state_dir, WallClock(),
                            report_end, kill_grace=config.kill_grace, agents=agents,
                            report_failure_kill=report_failure_kill,
                            waiting_jobs=lambda: queue_manager.waiting_jobs(),
                            forecast_file=config.state_dir / config.failure_forecast
                            if config.failure_forecast else None)
    daemons = [serve_component(config, "system", SystemAPI(service)),
               _serve_users(config.system_admin_socket,
                            SystemControlAPI(service, config.admin_group), "system-control",
                            "the system")]

    def poll() -> None:
        while not stop.wait(0.5):
            service.poll()

    threading.Thread(target=poll, name="system poll", daemon=True).start()
    return daemons


def run_scheduler(config: Config, stop: threading.Event) -> list:
    from cobaltlite.scheduler.daemon import ComponentAPI, ControlAPI, SchedulerLoop
    from cobaltlite.scheduler.remote import RemoteSite
    from cobaltlite.scheduler.scheduler import Backfill, Scheduler

    clock: Clock = WallClock()
    if config.scheduler_clock == "queue-manager":
        clock = PeerClock(Peer(config, "queue-manager"))
    elif config.scheduler_clock != "wall":
        raise InputError(f"{config.config_path}: scheduler_clock {config.scheduler_clock!r}: "
                         "choose wall or queue-manager")

    def make_site() -> RemoteSite:
        return RemoteSite(Peer(config, "queue-manager"), Peer(config, "system"), clock,
                          alpha=config.allocation_alpha, beta=config.allocation_beta)

    monitor = Peer(config, "metrics-monitor")

    def read_metrics() -> dict[str, float] | None:
        try:
            latest = monitor.latest()
        except Exception as exc:  # the monitor down: no check now, the next pass tries again
            log.warning("metrics monitor unreachable for tuning", error=str(exc))
            return None
        return None if latest is None else latest["monitored"]

    estimates = Peer(config, "queue-manager")

    def ask_for_estimates(scheduler: Scheduler, site: RemoteSite) -> None:
        # One way: the queue manager estimates in its own thread; this pass does not wait.
        try:
            estimates.estimate_starts(str(scheduler.backfill), scheduler.window,
                                      site.failed_components(),
                                      {queue: sorted(places)
                                       for queue, places in site.place_sets().items()},
                                      site.partitions_wire(),
                                      # The slack deadlines hang on the scheduler's memory.
                                      scheduler.slack_state().to_wire()
                                      if scheduler.backfill is Backfill.SLACK else None)
        except Exception as exc:  # the queue manager down: the next pass asks again
            log.warning("start estimates not requested", error=str(exc))

    loop = SchedulerLoop(make_site, clock, Backfill(config.backfill), config.scheduler_interval,
                         stopped_marker=Path(config.state_dir) / "scheduler-stopped",
                         tuning=config.tuning, read_metrics=read_metrics,
                         after_pass=ask_for_estimates, slack=config.slack)
    daemons = [serve_component(config, "scheduler", ComponentAPI(loop)),
               _serve_users(config.admin_socket, ControlAPI(loop, config.admin_group),
                            "scheduler-control", "the scheduler")]
    # A daemon thread: a pass cut short by exit loses nothing, each start is committed by the
    # queue manager on its own.
    threading.Thread(target=loop.loop, name="scheduling", daemon=True).start()
    return daemons


class PeerClock:
    """The time as a peer tells it: a scheduler driven by Qsim lives on Qsim's virtual clock."""

    def __init__(self, peer: Peer) -> None:
        self._peer = peer

    def now(self) -> float:
        return self._peer.now()


def run_metrics_monitor(config: Config, stop: threading.Event) -> list:
    from cobaltlite.metrics_monitor.history import MetricHistory
    from cobaltlite.metrics_monitor.monitor import MetricsUserAPI, Monitor, MonitorAPI
    from cobaltlite.metrics_monitor.prometheus import serve_prometheus

    monitor = Monitor(Peer(config, "queue-manager"), Peer(config, "system"), WallClock(),
                      history=MetricHistory(config.database_url),
                      retention=config.metrics_retention_days * 86400.0)
    endpoint = config.prometheus_endpoint
    if endpoint is not None:
        def latest() -> dict | None:
            found = monitor.history(1)
            return found[0] if found else None

        try:
            serve_prometheus(*endpoint, latest)
        except OSError as exc:
            raise InputError(f"{config.config_path}: prometheus_address "
                             f"{config.prometheus_address!r}: cannot listen there: "
                             f"{exc.strerror or exc}") from None
    daemons = [serve_component(config, "metrics-monitor", MonitorAPI(monitor)),
               _serve_users(config.metrics_user_socket, MetricsUserAPI(monitor),
                            "metrics-user", "the metrics monitor")]

    def sample() -> None:
        # The first sample at once: cqmetrics and a scrape have something from the start.
        while True:
            try:
                monitor.sample()
            except Exception as exc:  # a peer down: keep sampling when it is back
                log.warning("metrics sample failed", error=str(exc))
            if stop.wait(config.metrics_interval):
                return

    threading.Thread(target=sample, name="sampling", daemon=True).start()
    return daemons


def hold_pid_file(path: Path) -> int | None:
    """Write our pid and hold an exclusive lock on the file for the life of the process.

    The kernel drops the lock the moment the process dies (before it is reaped), so "the file
    is locked" means "the component runs", whatever pid the file names; None if another live
    process holds it.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


RUNNERS: dict[str, Callable[[Config, threading.Event], list]] = {
    "queue-manager": run_queue_manager,
    "system": run_system,
    "scheduler": run_scheduler,
    "metrics-monitor": run_metrics_monitor,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cobaltlite-daemon", description=__doc__.splitlines()[0])
    parser.add_argument("component", choices=COMPONENTS)
    parser.add_argument("--state-dir", type=Path, help="the instance's state directory")
    parser.add_argument("--log-to-terminal", action="store_true",
                        help="readable key=value lines on stderr instead of the JSON log file")
    args = parser.parse_args(argv)
    return run_foreground(args.component, args.state_dir, args.log_to_terminal,
                          lambda config, stop: RUNNERS[args.component](config, stop))


def run_node_agent(state_dir: Path | None, host: str, listen: str,
                   log_to_terminal: bool) -> int:
    """`cobaltlite node-agent`: serve this compute host's node agent in the foreground."""
    from cobaltlite.config import TcpAddress, parse_address
    from cobaltlite.system.agent import serve_agent

    try:
        address = parse_address(listen)
    except ValueError as exc:
        print(f"cobaltlite node-agent: cannot start: --listen {listen!r} {exc}", file=sys.stderr)
        return 1
    if not isinstance(address, TcpAddress):
        print(f"cobaltlite node-agent: cannot start: --listen {listen!r}: the system reaches "
              "agents over TCP: write tcp:HOST:PORT", file=sys.stderr)
        return 1

    def start(config: Config, _stop: threading.Event) -> list:
        if config.tls is None and not address.is_loopback:
            raise InputError(f"--listen {listen}: not a loopback address and {config.config_path} "
                             "has no tls: option; the component secret would cross the network "
                             "in clear (docs/multi-host.md)")
        return [serve_agent(config, host, address)]

    return run_foreground("node-agent", state_dir, log_to_terminal, start)


def run_foreground(name: str, state_dir: Path | None, log_to_terminal: bool,
                   start: Callable[[Config, threading.Event], list]) -> int:
    """Run a daemon until SIGTERM or SIGINT: its config read and checked, its pid file held,
    `start` serving; a start that fails prints why and exits 1."""
    try:
        config = load_config(state_dir)
        check_config_secrecy(config)
    except InputError as exc:
        print(f"cobaltlite {name}: cannot start: {exc}", file=sys.stderr)
        return 1
    ensure_layout(config)
    if not config.secret_path.exists():
        # Components started together by systemd race to create it; the link is atomic.
        with contextlib.suppress(InputError):
            create_secret(config.secret_path)
    logs.configure(name, None if log_to_terminal else config.log_file(name))
    stop = threading.Event()
    pid_lock = hold_pid_file(config.pid_file(name))
    if pid_lock is None:
        print(f"cobaltlite {name}: already running in {config.state_dir}", file=sys.stderr)
        return 1
    try:
        daemons = start(config, stop)
    except Exception as exc:
        log.error("component failed to start", error=str(exc))
        print(f"cobaltlite {name}: cannot start: {exc}", file=sys.stderr)
        config.pid_file(name).unlink(missing_ok=True)
        return 1
    # Only now: until its daemons run, SIGTERM keeps its default action, so `cobaltlite down`
    # stops a component whose start hangs (a database server that never answers, say).
    # Killing it there is safe: a start writes nothing that a restart does not settle.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info("component started", pid=os.getpid(), state_dir=str(config.state_dir))
    stop.wait()
    for daemon in daemons:
        shutdown(daemon)
    config.pid_file(name).unlink(missing_ok=True)
    os.close(pid_lock)
    log.info("component stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
