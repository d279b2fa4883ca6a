"""The active queue layout on disk (partadm --layout), beside partadm's other state.

`<state-dir>/system/queue-layout.yaml` holds the YAML text the system last accepted, written
by atomic rename (mode 0600) before the layout takes effect, so a layout the system answers
with is always one a restart finds again: it survives `cobaltlite down`/`up` and a crash. The
system reads it back when it starts; a file that cannot be read, or no longer fits the machine
(its description changed meanwhile), is logged and left in place, and the system starts with
no layout.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from cobaltlite.system.files import write_text

log = structlog.get_logger("system")

FILE_NAME = "queue-layout.yaml"


class LayoutStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def saved(self) -> str | None:
        """The layout saved before a restart; None when there is none or it cannot be read
        (logged)."""
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.error("queue layout unreadable, none restored", path=str(self.path),
                      error=str(exc))
            return None

    def save(self, text: str) -> None:
        """Keep `text` as the active layout; OSError leaves the previous one on disk."""
        write_text(self.path, text)
