"""The live system's queue layout (partadm --layout; seed 002): checked, kept on disk, laid out.

`<state-dir>/system/queue-layout.yaml` holds the YAML text the system last accepted, beside
partadm's places-admin and failed-components. A new layout is checked whole (read_layout's
rules, then `QueuePartitions.from_layout` on this machine: errors name the key), written by
atomic rename (mode 0600), and only then made active; so a layout the system answers with is
the one a restart finds again, and a refused or unwritable one leaves the active layout as it
was. At start the file is read back; one that cannot be read or no longer fits the machine (its
description changed meanwhile) is logged and left in place, and the system starts without a
layout until an admin sets one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from cobaltlite.errors import InputError
from cobaltlite.machine.model import Machine
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.partitioning.layout import QueueLayout, parse_layout
from cobaltlite.system.files import write_text

log = structlog.get_logger("system")

FILE_NAME = "queue-layout.yaml"
WHERE = "queue layout"
"""How errors name a layout sent as text (partadm names the file before it sends it)."""


def laid_out(text: str, where: str, machine: Machine) -> tuple[QueueLayout, QueuePartitions]:
    """Layout `text` on `machine`: read_layout's rules, its machine_nodes the machine's, its
    partitions and pool laid out (QueuePartitions.from_layout); InputError naming `where` (the
    file) and the key. What partadm checks before it sends a layout, and the system after."""
    layout, nodes = parse_layout(text, where)
    if nodes != machine.total_nodes:
        raise InputError(f"{where}: machine_nodes is {nodes}; {machine.name} has "
                         f"{machine.total_nodes} nodes")
    return layout, QueuePartitions.from_layout(layout, machine, where)


class LayoutKeeper:
    def __init__(self, machine: Machine, directory: Path) -> None:
        self.machine = machine
        self.path = directory / FILE_NAME
        self.text: str | None = None
        self.partitions: QueuePartitions | None = None
        self.wire: dict[str, Any] | None = None
        """The partitions as the scheduler's replica reads them (machine_state)."""
        self._restore()

    def _restore(self) -> None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            log.error("queue layout unreadable, none restored", path=str(self.path),
                      error=str(exc))
            return
        try:
            self._adopt(text, laid_out(text, WHERE, self.machine)[1])
        except InputError as exc:
            log.error("queue layout no longer fits the machine, none restored",
                      path=str(self.path), error=str(exc))
            return
        log.info("queue layout restored", queues=sorted(self.partitions.own)
                 if self.partitions else [])

    def check(self, text: str) -> QueuePartitions | None:
        """The partitions of layout `text` on this machine (None: blank text, no layout);
        InputError naming the key."""
        return laid_out(text, WHERE, self.machine)[1] if text.strip() else None

    def change(self, text: str) -> QueuePartitions | None:
        """Check, write and activate layout `text` (blank: remove the layout, here and on
        disk); InputError or OSError: nothing changed."""
        partitions = self.check(text)
        if partitions is None:
            self.path.unlink(missing_ok=True)
            self.text = self.partitions = self.wire = None
            return None
        write_text(self.path, text)
        self._adopt(text, partitions)
        return partitions

    def _adopt(self, text: str, partitions: QueuePartitions) -> None:
        self.text = text
        self.partitions = partitions
        self.wire = partitions.to_wire()
