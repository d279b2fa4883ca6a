"""`cobaltlite up | down | status`: start, stop and report one instance's components."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cobaltlite.config import (
    COMPONENTS,
    Config,
    UnixAddress,
    default_state_dir,
    ensure_layout,
    instance_paths,
    load_config,
)
from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.rpc.peers import Peer, check_address
from cobaltlite.rpc.secret import create_secret

START_ORDER = ("system", "queue-manager", "scheduler", "metrics-monitor")
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0


def running_pid(config: Config, component: str) -> int | None:
    """The component's pid if it runs: its daemon holds a lock on the pid file while alive."""
    try:
        fd = os.open(config.pid_file(component), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # nobody holds it: a stale file left by a dead daemon
    finally:
        os.close(fd)


def _answers(config: Config, component: str) -> bool:
    return _ping_failure(config, component) is None


def _ping_failure(config: Config, component: str) -> str | None:
    """None if the component answers at its address, else why not (for `status`)."""
    try:
        answer = Peer(config, component, timeout=3.0).ping()
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return None if answer == component else f"another component answers there ({answer!r})"


def up(config: Config, console: Console) -> int:
    ensure_layout(config)
    # Each daemon checks its own address too; checking all of them first starts nothing when
    # one is unusable.
    for component in START_ORDER:
        check_address(config.address(component))
    if not config.secret_path.exists():
        create_secret(config.secret_path)
    for component in START_ORDER:
        if running_pid(config, component) is not None:
            console.print(f"{component}: already running")
            continue
        log = open(config.log_file(component), "a")  # noqa: SIM115 - handed to the child
        daemon = subprocess.Popen(
            [sys.executable, "-m", "cobaltlite.daemon", component,
             "--state-dir", str(config.state_dir)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            close_fds=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(config, component):
            if daemon.poll() is not None:
                # e.g. its address is taken: say so now rather than after START_TIMEOUT.
                console.print(f"[red]{component}: exited with status {daemon.returncode}; "
                              f"see {config.log_file(component)}[/red]")
                reason = _start_failure(config, component)
                if reason:
                    console.print(reason, markup=False, highlight=False)
                return 1
            if time.monotonic() > deadline:
                console.print(f"[red]{component}: did not answer within {START_TIMEOUT:.0f} s; "
                              f"see {config.log_file(component)}[/red]")
                return 1
            time.sleep(0.1)
        console.print(f"{component}: started (pid {running_pid(config, component)})")
    return status(config, console)


def _start_failure(config: Config, component: str) -> str | None:
    """The reason the daemon printed when it could not start (the last such line of its log),
    so the operator reads it here rather than in the log."""
    marker = f"cobaltlite {component}: cannot start:"
    try:
        lines = config.log_file(component).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((line for line in reversed(lines) if line.startswith(marker)), None)


def down(config: Config, console: Console, kill_jobs: bool = False) -> int:
    failed = False
    for component in reversed(START_ORDER):
        pid = running_pid(config, component)
        if pid is None:
            console.print(f"{component}: not running")
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while running_pid(config, component) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        if running_pid(config, component) is not None:
            console.print(f"[red]{component}: still running after {STOP_TIMEOUT:.0f} s "
                          f"(pid {pid})[/red]")
            failed = True
        else:
            console.print(f"{component}: stopped")
    return 1 if failed or not _jobs_left(config, console, kill_jobs) else 0


def _jobs_left(config: Config, console: Console, kill_jobs: bool) -> bool:
    """Say which jobs go on without the daemons, or end them; False if some would not end."""
    from cobaltlite.system.service import running_jobs  # only `down` needs /proc scans

    jobs = running_jobs(config.state_dir)
    if not jobs:
        return True
    listed = ", ".join(map(str, sorted(jobs)))
    if not kill_jobs:
        console.print(f"{len(jobs)} job(s) still running: {listed}. They go on without the "
                      "daemons and the next `cobaltlite up` collects them; `cobaltlite down "
                      "--kill-jobs` ends them.", markup=False, highlight=False)
        return True
    for pid in jobs.values():
        # The runner ends its job as qdel does: SIGTERM, then SIGKILL after kill_grace.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    wait = config.kill_grace + STOP_TIMEOUT
    deadline = time.monotonic() + wait
    while running_jobs(config.state_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = running_jobs(config.state_dir)
    if left:
        console.print(f"[red]job(s) still running after {wait:.0f} s: "
                      f"{', '.join(map(str, sorted(left)))}[/red]")
        return False
    console.print(f"ended {len(jobs)} job(s): {listed}; the next `cobaltlite up` records "
                  "their ends", markup=False, highlight=False)
    return True


def status(config: Config, console: Console) -> int:
    table = Table(title=f"cobaltlite instance {config.state_dir}",
                  caption="relative paths are in the instance directory")
    for column in ("component", "pid", "answers"):
        table.add_column(column)
    # Folded, not cut short: a path is no use with its end replaced by an ellipsis.
    table.add_column("address", overflow="fold")
    healthy = True
    problems: list[str] = []  # why a running component does not answer
    for component in START_ORDER:
        pid = running_pid(config, component)
        failure = _ping_failure(config, component) if pid is not None else "not running"
        healthy &= failure is None
        table.add_row(component, str(pid or "-"), "yes" if failure is None else "[red]no[/red]",
                      _shown_address(config, component))
        if failure is not None and pid is not None:
            problems.append(f"{component}: {failure}")
    console.print(table)
    for problem in problems:
        console.print(problem, style="red", markup=False, highlight=False)
    # One setting a line, unwrapped: a path broken at the terminal's edge cannot be copied.
    for name, value in (("machine", config.machine), ("database", config.database_url),
                        ("user socket", config.user_socket)):
        console.print(f"{name}: {value}", soft_wrap=True, markup=False, highlight=False)
    if healthy:
        console.print("all components are up; try: qsub -n 1 -t 5 /bin/hostname && qstat")
    return 0 if healthy else 1


def _shown_address(config: Config, component: str) -> str:
    """The address, with a socket inside the instance directory shown relative to it: the
    absolute path would not fit an 80-column terminal, and the title names the directory."""
    address = config.address(component)
    if isinstance(address, UnixAddress) and address.path.is_relative_to(config.state_dir):
        return f"unix:{address.path.relative_to(config.state_dir)}"
    return str(address)


def _state_dir_source(given: Path | None) -> str:
    """Where the state directory came from, for error messages about it."""
    if given is not None:
        return "--state-dir"
    if os.environ.get("COBALTLITE_STATE_DIR"):
        return "COBALTLITE_STATE_DIR"
    return "the default state directory"


UP_DESCRIPTION = (
    "Create the instance's state directory if needed (with a default cobaltlite.yaml), then "
    f"start every component ({', '.join(START_ORDER)}) as a background daemon, wait until each "
    "answers, and show the status table. Components already running are left alone. Daemon "
    "logs go to STATE_DIR/log/COMPONENT.log.")
DOWN_DESCRIPTION = (
    "Stop every running component of the instance (SIGTERM, then wait up to "
    f"{STOP_TIMEOUT:.0f} s each), in the reverse order of `up`. The daemons are found through "
    "their pid files in STATE_DIR/run/, so `down` works even when cobaltlite.yaml is broken. "
    "Jobs already running go on without the daemons: `down` lists them, and the next `up` "
    "collects them; with --kill-jobs it ends them first (SIGTERM, then SIGKILL after "
    "kill_grace), as qdel would.")
STATUS_DESCRIPTION = "Show which components run and answer at their addresses; exit 1 if any " \
    "does not."


NODE_AGENT_DESCRIPTION = (
    "Run the node agent of a compute host in the foreground (systemd: "
    "etc/systemd/cobaltlite-node-agent.service). The system component launches each job on the "
    "first node of its allocation through that host's agent, as the submitting user, and "
    "signals it there on qdel and at its wall time. The state directory holds this host's "
    "cobaltlite.yaml (its tls: certificate, key and CA), the instance's secret, copied from "
    "the service host, and the agent's job records (agent/). SIGTERM stops the agent; jobs go "
    "on, and the next start of the agent ends them (the system has reported them lost).")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cobaltlite",
        description="Start, stop and report the components of one cobaltlite instance.",
        epilog="The instance is the state directory: --state-dir, else COBALTLITE_STATE_DIR, "
        f"else /var/lib/cobaltlite if it exists, else ~/.cobaltlite (now: {default_state_dir()}). "
        "--state-dir may be given before or after the subcommand. "
        "Each component also runs in the foreground as `python -m cobaltlite.daemon NAME` "
        "(see etc/systemd/).")
    parser.add_argument("--state-dir", type=Path, help="the instance's state directory")
    # The same option after the subcommand (`cobaltlite up --state-dir X`); SUPPRESS keeps an
    # absent one from overwriting the value given before the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", type=Path, default=argparse.SUPPRESS,
                        help="the instance's state directory")
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="up|down|status|node-agent")
    sub.add_parser("up", parents=[common], description=UP_DESCRIPTION,
                   help=f"start every component ({', '.join(COMPONENTS)}) in the background")
    down_parser = sub.add_parser("down", parents=[common], description=DOWN_DESCRIPTION,
                                 help="stop every component (SIGTERM, then wait)")
    down_parser.add_argument("--kill-jobs", action="store_true",
                             help="also end every job still running")
    sub.add_parser("status", parents=[common], description=STATUS_DESCRIPTION,
                   help="show which components run and answer")
    agent = sub.add_parser(
        "node-agent", parents=[common], description=NODE_AGENT_DESCRIPTION,
        help="run this compute host's node agent in the foreground (docs/multi-host.md)")
    agent.add_argument("--host", required=True,
                       help="this host's name as the system's node_agents: option gives it")
    agent.add_argument("--listen", required=True, metavar="tcp:HOST:PORT",
                       help="where the system reaches this agent (its node_agents: entry)")
    agent.add_argument("--log-to-terminal", action="store_true",
                       help="readable lines on stderr instead of log/node-agent.log")
    args = parser.parse_args(argv)
    if args.command == "node-agent":
        from cobaltlite.daemon import run_node_agent

        return run_node_agent(args.state_dir, args.host, args.listen, args.log_to_terminal)
    console = Console()
    err = Console(stderr=True, soft_wrap=True)
    try:
        if args.command == "down":
            return down_anyway(args.state_dir, console, err, args.kill_jobs)
        config = load_config(args.state_dir)
        if args.command == "up":
            try:
                ensure_layout(config)
            except CobaltliteError as exc:
                raise InputError(f"{_state_dir_source(args.state_dir)}: {exc}") from None
        return {"up": up, "status": status}[args.command](config, console)
    except CobaltliteError as exc:
        err.print(f"cobaltlite: error: {exc}", markup=False, highlight=False)
        return 1


def down_anyway(state_dir: Path | None, console: Console, err: Console,
                kill_jobs: bool = False) -> int:
    """`down`, also when cobaltlite.yaml is broken: the daemons are found by their pid files,
    which depend on the state directory alone, so a bad edit never leaves them running."""
    try:
        config = load_config(state_dir)
    except CobaltliteError as exc:
        err.print(f"cobaltlite: warning: {exc}", markup=False, highlight=False)
        err.print("cobaltlite: the configuration is broken; stopping the daemons found by "
                  "their pid files anyway", markup=False, highlight=False)
        down(instance_paths(state_dir), console, kill_jobs)
        return 1
    return down(config, console, kill_jobs)


if __name__ == "__main__":
    sys.exit(main())
