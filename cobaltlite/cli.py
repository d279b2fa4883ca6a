"""`cobaltlite up | down | status`: start, stop and report one instance's components."""

from __future__ import annotations

import argparse
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
    load_config,
)
from cobaltlite.errors import CobaltliteError
from cobaltlite.rpc.peers import Peer, check_address
from cobaltlite.rpc.secret import create_secret

START_ORDER = ("system", "queue-manager", "scheduler", "metrics-monitor")
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0


def _pid(config: Config, component: str) -> int | None:
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
        if _pid(config, component) is not None:
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
        console.print(f"{component}: started (pid {_pid(config, component)})")
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


def down(config: Config, console: Console) -> int:
    failed = False
    for component in reversed(START_ORDER):
        pid = _pid(config, component)
        if pid is None:
            console.print(f"{component}: not running")
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _pid(config, component) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        if _pid(config, component) is not None:
            console.print(f"[red]{component}: still running after {STOP_TIMEOUT:.0f} s "
                          f"(pid {pid})[/red]")
            failed = True
        else:
            console.print(f"{component}: stopped")
    return 1 if failed else 0


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
        pid = _pid(config, component)
        failure = _ping_failure(config, component) if pid is not None else "not running"
        healthy &= failure is None
        table.add_row(component, str(pid or "-"), "yes" if failure is None else "[red]no[/red]",
                      _shown_address(config, component))
        if failure is not None and pid is not None:
            problems.append(f"{component}: {failure}")
    console.print(table)
    for problem in problems:
        console.print(problem, style="red", markup=False, highlight=False)
    console.print(f"machine: {config.machine}; database: {config.database_url}; "
                  f"user socket: {config.user_socket}")
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cobaltlite",
        description="Start, stop and report the components of one cobaltlite instance.",
        epilog="The instance is the state directory: --state-dir, else COBALTLITE_STATE_DIR, "
        f"else /var/lib/cobaltlite if it exists, else ~/.cobaltlite (now: {default_state_dir()}). "
        "Each component also runs in the foreground as `python -m cobaltlite.daemon NAME` "
        "(see etc/systemd/).")
    parser.add_argument("--state-dir", type=Path, help="the instance's state directory")
    sub = parser.add_subparsers(dest="command", required=True, metavar="up|down|status")
    sub.add_parser("up", help=f"start every component ({', '.join(COMPONENTS)}) in the background")
    sub.add_parser("down", help="stop every component (SIGTERM, then wait)")
    sub.add_parser("status", help="show which components run and answer")
    args = parser.parse_args(argv)
    console = Console()
    try:
        config = load_config(args.state_dir)
        return {"up": up, "down": down, "status": status}[args.command](config, console)
    except CobaltliteError as exc:
        Console(stderr=True).print(f"cobaltlite: error: {exc}", markup=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
