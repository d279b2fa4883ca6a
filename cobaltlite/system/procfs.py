"""The processes of the machine as /proc/<pid>/stat shows them (Linux).

Shared by the system service and the per-job runner; the runner is started once per job, so
this module imports nothing beyond the standard library's basics.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple


class Stat(NamedTuple):
    pid: int
    state: str  # one letter: R running, S sleeping, T stopped, Z zombie, X dead, ...
    ppid: int
    pgrp: int

    @property
    def ended(self) -> bool:
        """Whether the process has exited (a zombie waiting for its parent has)."""
        return self.state in "ZX"


def stat(pid: int) -> Stat | None:
    """The process `pid`, or None if there is none (it ended, or never was)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            text = stream.read()
    except OSError:
        return None
    # After the command name, which may hold spaces or ')': state, ppid, pgrp.
    state, ppid, pgrp = text[text.rfind(")") + 2:].split()[:3]
    return Stat(pid, state, int(ppid), int(pgrp))


def processes() -> Iterator[Stat]:
    """Every process that exists while the scan reaches it."""
    for name in os.listdir("/proc"):
        if name.isdigit() and (found := stat(int(name))) is not None:
            yield found
