"""slpstat: the instance's components and where they listen (Cobalt's slpstat, reference §3.5).

Cobalt's service-location registry listed Name, Location, Update Time for every registered
component. cobaltlite has no registry: a component is registered while its daemon runs (it holds
its pid file, as `cobaltlite status` checks), its Location is its address from cobaltlite.yaml
(`addresses:`) or its Unix socket, and its Update Time is when it started (the pid file's
time). A component that does not run is not listed, as Cobalt's registry forgot components
that stopped registering; with none running, slpstat says so and exits 1.

The pid files sit in STATE_DIR/run, which only the daemons' account may enter (a user holding a
lock on a pid file could keep a daemon from starting). For any other user a component runs when
its user socket (the one its commands reach, mode 0666) accepts a connection, and its Update
Time is when that socket was made, at the daemon's start.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from cobaltlite.cli import START_ORDER, running_pid
from cobaltlite.commands.common import CommandError, format_table, run_listing
from cobaltlite.config import Config, load_config
from cobaltlite.errors import CobaltliteError

PROG = "slpstat"


def main(argv: Sequence[str] | None = None) -> int:
    return run_listing(PROG, "List the running components of this cobaltlite instance "
                       "(COBALTLITE_STATE_DIR): Name, Location (address), Update Time (when it "
                       "started).", argv, _lines)


def _lines() -> list[str]:
    try:
        config = load_config()
    except CobaltliteError as exc:
        raise CommandError(str(exc)) from None
    rows = []
    for component in START_ORDER:
        started = _started(config, component)
        if started is not None:
            rows.append([component, str(config.address(component)), time.ctime(started)])
    if not rows:
        raise CommandError(f"no component of the instance in {config.state_dir} is running "
                           "(start them with `cobaltlite up`)")
    return format_table(["Name", "Location", "Update Time"], rows)


def _started(config: Config, component: str) -> float | None:
    """When `component` started, or None if it does not run."""
    pid_file = config.pid_file(component)
    if os.access(pid_file.parent, os.X_OK):
        return pid_file.stat().st_mtime if running_pid(config, component) is not None else None
    user_socket = config.user_socket_of(component)
    return user_socket.stat().st_mtime if _accepts(user_socket) else None


def _accepts(path: Path) -> bool:
    """Whether a daemon listens on the Unix socket at `path` (a stale file refuses)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(3.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
