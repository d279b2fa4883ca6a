"""The policies a queue manager knows: the builtins, and the site's utility file once loaded.

Reloads are atomic: a new file replaces the old one only after it has passed every check of
`loader`; otherwise the previous functions stay active. Every reload is logged with the file's
hash, the functions found, the outcome and who asked. Run-time failures are logged once per
function per reload and kept for `schedctl --status`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from cobaltlite.errors import CobaltliteError
from cobaltlite.policy.loader import DEFAULT_BUDGET, PolicyFile, load_and_validate
from cobaltlite.policy.utility import (
    BUILTIN_FUNCTIONS,
    PassInputs,
    PolicyError,
    UtilityFunction,
    builtin_policy,
)

log = structlog.get_logger("policies")


class PolicyRegistry:
    def __init__(self, utility_file: Path | None = None, budget: float = DEFAULT_BUDGET,
                 configured: Callable[[], Path | None] | None = None) -> None:
        self.utility_file = utility_file
        # Reads the utility_file the configuration names now, for an explicit reread: an
        # operator who adds or changes `utility_file:` in a running instance needs no restart.
        self._configured = configured
        self.budget = budget
        self._builtins = {name: builtin_policy(name) for name in BUILTIN_FUNCTIONS}
        self._site: PolicyFile | None = None
        self._lock = threading.Lock()
        self.errors: dict[str, str] = {}
        self.suspended: set[str] = set()
        self.reloads: list[dict[str, Any]] = []

    def get(self, name: str) -> UtilityFunction:
        with self._lock:
            site = self._site.functions if self._site else {}
        if name in site:
            return site[name]
        builtin = self._builtins.get(name.lower())
        if builtin is None:
            raise PolicyError(f"unknown policy {name!r}; known: {', '.join(self.names())}")
        return builtin

    def names(self) -> list[str]:
        with self._lock:
            site = list(self._site.functions) if self._site else []
        return [*self._builtins, *site]

    def reload(self, jobs: Sequence[Any], inputs: PassInputs, requested_by: str,
               reread_config: bool = False) -> dict[str, Any]:
        """Check the utility file and activate it; raise PolicyError (previous file stays).

        With `reread_config`, the file is the one the configuration names now."""
        if reread_config and self._configured is not None:
            try:
                configured = self._configured()
            except CobaltliteError as exc:
                raise PolicyError(f"{exc}; the previous policies stay active") from None
            if configured != self.utility_file:
                log.info("utility file changed in the configuration",
                         previous=str(self.utility_file), now=str(configured))
                self.utility_file = configured
        if self.utility_file is None:
            raise PolicyError("no utility_file is configured (cobaltlite.yaml)")
        record: dict[str, Any] = {"time": time.time(), "file": str(self.utility_file),
                                  "requested_by": requested_by}
        try:
            loaded = load_and_validate(self.utility_file, jobs, inputs, self.budget)
        except PolicyError as exc:
            record.update(outcome="refused", error=str(exc))
            self._remember(record)
            log.error("utility file refused; previous policies stay active", **record)
            raise
        with self._lock:
            self._site = loaded
            self.errors.clear()
            self.suspended.clear()
        record.update(outcome="activated", sha256=loaded.sha256,
                      functions=sorted(loaded.functions))
        self._remember(record)
        log.info("utility file activated", **record)
        return record

    def record_failure(self, policy: str, message: str, *, suspend: bool = False) -> None:
        """Note a run-time failure; logged the first time per function since the last reload."""
        with self._lock:
            first = policy not in self.errors
            self.errors[policy] = message
            if suspend:
                self.suspended.add(policy)
        if first:
            log.error("utility function failed; affected jobs keep their previous score",
                      policy=policy, error=message, suspended=suspend)

    def status(self) -> dict[str, Any]:
        with self._lock:
            site = self._site
            return {
                "utility_file": str(self.utility_file) if self.utility_file else None,
                "sha256": site.sha256 if site else None,
                "site_functions": sorted(site.functions) if site else [],
                "builtin_functions": list(self._builtins),
                "errors": dict(self.errors),
                "suspended": sorted(self.suspended),
                "last_reload": self.reloads[-1] if self.reloads else None,
            }

    def _remember(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.reloads.append(record)
            del self.reloads[:-20]
