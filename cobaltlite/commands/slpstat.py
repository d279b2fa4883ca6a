"""slpstat: the instance's components and where they listen (Cobalt's slpstat, reference §3.5).

Cobalt's service-location registry listed Name, Location, Update Time for every registered
component. cobaltlite has no registry: a component is registered while its daemon runs (it holds
its pid file, as `cobaltlite status` checks), its Location is its address from cobaltlite.yaml
(`addresses:`) or its Unix socket, and its Update Time is when it started (the pid file's
time). A component that does not run is not listed, as Cobalt's registry forgot components
that stopped registering; with none running, slpstat says so and exits 1.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from cobaltlite.cli import START_ORDER, running_pid
from cobaltlite.commands.common import CommandError, format_table, run_listing
from cobaltlite.config import load_config
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
        if running_pid(config, component) is None:
            continue
        started = config.pid_file(component).stat().st_mtime
        rows.append([component, str(config.address(component)), time.ctime(started)])
    if not rows:
        raise CommandError(f"no component of the instance in {config.state_dir} is running "
                           "(start them with `cobaltlite up`)")
    return format_table(["Name", "Location", "Update Time"], rows)


if __name__ == "__main__":
    sys.exit(main())
