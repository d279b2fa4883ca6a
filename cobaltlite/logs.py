"""structlog set-up: JSON lines in a daemon's log file, key=value on a terminal."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import structlog


def configure(component: str, log_file: Path | None) -> None:
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    if log_file is None:
        renderer: structlog.types.Processor = structlog.dev.ConsoleRenderer(colors=False)
        stream = sys.stderr
    else:
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
        stream = open(log_file, "a", buffering=1)  # noqa: SIM115 - lives as long as the daemon
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(component=component)
