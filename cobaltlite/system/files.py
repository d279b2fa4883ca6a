"""Files of the system component's state directory."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any) -> None:
    """Replace `path` with `data` as JSON, atomically and durably (mode 0600); OSError leaves
    the old file as it was."""
    write_text(path, json.dumps(data))


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text`, atomically and durably (mode 0600); OSError leaves the old
    file as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except OSError:
        # A half-written copy (a full disk) would hold space for nothing.
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
