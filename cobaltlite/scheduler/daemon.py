"""The scheduler daemon: the same `Scheduler` class, run every interval and when woken.

Submissions and job ends wake it early through `wake()`. `schedctl` reaches `ControlAPI` on a
user socket; starting and stopping need admin rights, checked from the kernel's credentials.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import Pyro5.api
import structlog

from cobaltlite.clock import Clock
from cobaltlite.rpc.transport import caller_credentials, uid_is_admin
from cobaltlite.scheduler.scheduler import Backfill, Scheduler

log = structlog.get_logger("scheduler")


class SchedulerLoop:
    def __init__(self, make_site: Any, clock: Clock, backfill: Backfill, interval: float,
                 stopped_marker: Path | None = None) -> None:
        """`stopped_marker`: a file that exists while scheduling is stopped (schedctl --stop),
        so a stop survives a restart of the scheduler, as Cobalt's saved state kept it."""
        self._make_site = make_site
        self.clock = clock
        self.backfill = backfill
        self.interval = interval
        self._stopped_marker = stopped_marker
        self.active = stopped_marker is None or not stopped_marker.exists()
        self.passes = 0
        self.last_pass_seconds: float | None = None  # how long the last complete pass took
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._scheduler: Scheduler | None = None
        self._pass_lock = threading.Lock()

    def run_pass(self) -> list[tuple[int, str]]:
        """One pass now; peers that are down make it fail quietly until the next one."""
        with self._pass_lock:
            began = time.perf_counter()
            try:
                if self._scheduler is None:
                    site = self._make_site()
                    self._scheduler = Scheduler(site, site, self.clock, self.backfill)
                report = self._scheduler.iterate()
            except Exception as exc:  # a peer down or restarting: retried at the next pass
                self._scheduler = None
                if str(exc) != self.last_error:
                    log.warning("scheduling pass failed", error=str(exc))
                self.last_error = str(exc)
                return []
            self.last_error = None
            self.last_pass_seconds = time.perf_counter() - began
            self.passes += 1
            for jobid, where in report.started:
                log.info("job placed", jobid=jobid, location=where)
            return report.started

    def wake(self) -> None:
        self._wake.set()

    def set_active(self, active: bool) -> None:
        """Start or stop scheduling, and remember it across restarts."""
        marker = self._stopped_marker
        if marker is not None:
            if active:
                marker.unlink(missing_ok=True)
            else:
                marker.touch(mode=0o600)
        self.active = active

    def loop(self) -> None:
        """Run forever in a daemon thread; the process's exit ends it."""
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            if self.active:
                self.run_pass()


@Pyro5.api.expose
class ComponentAPI:
    def __init__(self, loop: SchedulerLoop) -> None:
        self._loop = loop

    def ping(self) -> str:
        return "scheduler"

    @Pyro5.api.oneway
    def wake(self) -> None:
        self._loop.wake()

    def run_pass(self) -> list[list[Any]]:
        return [[jobid, where] for jobid, where in self._loop.run_pass()]


@Pyro5.api.expose
class ControlAPI:
    """schedctl's face: status for anyone, start and stop for admins."""

    def __init__(self, loop: SchedulerLoop, admin_group: str | None) -> None:
        self._loop = loop
        self._admin_group = admin_group

    def _require_admin(self, what: str) -> None:
        _pid, uid, _gid = caller_credentials()
        if not uid_is_admin(uid, self._admin_group):
            raise PermissionError(f"{what} needs root or membership of the admin group")

    def status(self) -> dict[str, Any]:
        loop = self._loop
        return {"active": loop.active, "passes": loop.passes, "interval": loop.interval,
                "backfill": str(loop.backfill), "last_error": loop.last_error,
                "last_pass_seconds": loop.last_pass_seconds}

    def start(self) -> bool:
        self._require_admin("schedctl --start")
        self._loop.set_active(True)
        self._loop.wake()
        log.info("scheduling started")
        return True

    def stop(self) -> bool:
        self._require_admin("schedctl --stop")
        self._loop.set_active(False)
        log.info("scheduling stopped")
        return True
