"""The scheduler daemon: the same `Scheduler` class, run every interval and when woken.

Submissions and job ends wake it early through `wake()`. `schedctl` reaches `ControlAPI` on a
user socket; starting and stopping need admin rights, checked from the kernel's credentials.

With a tuning scheme (the `tuning:` option), the same `Tuner` Qsim runs checks before a pass
once C_i has passed since the last check, reading the metrics monitor's latest sample, and sets
the pass's window W and balance factor BF (seed 000 §3.4). While BF is tuned (a BF rule, or an
admin's pin) the scheduler ranks the queue by seed 000's balanced priority with that BF itself,
over every queue, instead of the queue manager's scores (docs/metric-aware.md, D000-8).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import Pyro5.api
import structlog

from cobaltlite.clock import Clock
from cobaltlite.errors import InputError, MachineError
from cobaltlite.rpc.transport import caller_credentials, uid_is_admin
from cobaltlite.scheduler.scheduler import Backfill, Scheduler
from cobaltlite.scheduler.slack import SlackSettings
from cobaltlite.tuning.apply import apply_window
from cobaltlite.tuning.scheme import TUNABLE_BOUNDS, TuningScheme, parse_scheme_text
from cobaltlite.tuning.tuner import Change, Tuner

log = structlog.get_logger("scheduler")


class SchedulerLoop:
    def __init__(self, make_site: Any, clock: Clock, backfill: Backfill, interval: float,
                 stopped_marker: Path | None = None, tuning: TuningScheme | None = None,
                 read_metrics: Callable[[], Mapping[str, float] | None] | None = None,
                 after_pass: Callable[[Scheduler, Any], None] | None = None,
                 slack: SlackSettings | None = None) -> None:
        """`stopped_marker`: a file that exists while scheduling is stopped (schedctl --stop),
        so a stop survives a restart of the scheduler, as Cobalt's saved state kept it.
        `read_metrics` returns the metrics monitor's latest values (None when it has none).
        `after_pass(scheduler, site)` runs after each complete pass (start estimates).
        `slack`: the settings of `Backfill.SLACK` (seed 001)."""
        self._make_site = make_site
        self.clock = clock
        self.backfill = backfill
        self.slack = slack
        self.interval = interval
        self._stopped_marker = stopped_marker
        self.active = stopped_marker is None or not stopped_marker.exists()
        self.passes = 0
        self.last_pass_seconds: float | None = None  # how long the last complete pass took
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._scheduler: Scheduler | None = None
        self._pass_lock = threading.Lock()
        self.tuner = Tuner(tuning, clock.now())
        self._read_metrics = read_metrics
        self._after_pass = after_pass
        self._site: Any = None
        self.drain_window: dict[str, Any] | None = None
        """The last pass's drain as partlist shows it: {"until": when the top job's block
        frees, "blocks": the blocks sharing its node cards}; None without a drain on blocks."""

    def run_pass(self) -> list[tuple[int, str]]:
        """One pass now; peers that are down make it fail quietly until the next one."""
        with self._pass_lock:
            began = time.perf_counter()
            try:
                if self._scheduler is None:
                    self._site = self._make_site()
                    self._scheduler = Scheduler(self._site, self._site, self.clock,
                                                self.backfill,
                                                reservations=self._site.reservations,
                                                slack=self.slack)
                self._tune()
                apply_window(self._scheduler, self.tuner.values)
                self._site.balance_factor = (self.tuner.values["bf"] if self._tunes_bf()
                                             else None)
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
            self.drain_window = self._drain_window(report.drain)
            if self._after_pass is not None:
                self._after_pass(self._scheduler, self._site)
            for jobid, where in report.started:
                log.info("job placed", jobid=jobid, location=where)
            return report.started

    def _drain_window(self, drain: tuple[int, str, float] | None) -> dict[str, Any] | None:
        if drain is None or drain[2] == float("inf"):
            return None
        try:  # a flat machine's drain names a node count, not a place: nothing to show
            blocks = self._site.replica.places_over(drain[1])
        except MachineError:
            return None
        return {"until": drain[2], "blocks": blocks}

    def _tune(self) -> None:
        """Algorithm 1's check, when due, on the monitor's latest sample."""
        now = self.clock.now()
        if self._read_metrics is None or not self.tuner.due(now):
            return
        values = self._read_metrics()
        if values is None:
            return  # no sample yet: check again at the next pass
        for change in self.tuner.check(now, values):
            _log_change(change)

    def _tunes_bf(self) -> bool:
        scheme = self.tuner.scheme
        return "bf" in self.tuner.pins or (
            scheme is not None and any(rule.tunable == "bf" for rule in scheme.rules))

    def pin(self, tunable: str, value: float) -> list[Change]:
        if tunable not in TUNABLE_BOUNDS:
            raise ValueError(f"{tunable!r}: the tunables are bf and w")
        with self._pass_lock:
            changes = self.tuner.pin(self.clock.now(), tunable, value)
        for change in changes:
            _log_change(change)
        return changes

    def unpin(self, tunable: str) -> list[Change]:
        with self._pass_lock:
            changes = self.tuner.unpin(self.clock.now(), tunable)
        for change in changes:
            _log_change(change)
        return changes

    def replace_scheme(self, scheme: TuningScheme) -> None:
        """Run `scheme` from the next check on (schedctl --tuning); pins and values stay."""
        with self._pass_lock:
            self.tuner.replace_scheme(scheme)
        log.info("tuning scheme replaced", scheme=scheme.describe())

    def tuning_status(self) -> dict[str, Any]:
        tuner = self.tuner
        last = tuner.changes[-1] if tuner.changes else None
        return {"scheme": tuner.scheme.describe() if tuner.scheme else None,
                "values": dict(tuner.values), "pins": dict(tuner.pins),
                "last_change": None if last is None else {**last.as_record(),
                                                          "reason": last.reason()}}

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


def _log_change(change: Change) -> None:
    log.info("tunable changed", tunable=change.tunable, old=change.old, new=change.new,
             cause=change.cause, metrics=dict(change.metrics))


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
                "last_pass_seconds": loop.last_pass_seconds, "tuning": loop.tuning_status(),
                "drain_window": loop.drain_window,
                "slack": (loop.slack or SlackSettings()).by_name()
                if loop.backfill is Backfill.SLACK else None}

    def set_tunable(self, tunable: str, value: float) -> dict[str, Any]:
        """Pin a tunable (admin): rules keep running but do not move it until it is released."""
        self._require_admin("schedctl --set")
        if not isinstance(tunable, str) or isinstance(value, bool) or not isinstance(
                value, int | float):
            raise ValueError("schedctl --set takes NAME=NUMBER, e.g. w=3")
        self._loop.pin(tunable.lower(), float(value))
        self._loop.wake()
        return self._loop.tuning_status()

    def unset_tunable(self, tunable: str) -> dict[str, Any]:
        """Release a pin (admin): the tunable returns to what its rule says."""
        self._require_admin("schedctl --unset")
        if not isinstance(tunable, str) or tunable.lower() not in TUNABLE_BOUNDS:
            raise ValueError(f"schedctl --unset {tunable!r}: the tunables are bf and w")
        self._loop.unpin(tunable.lower())
        self._loop.wake()
        return self._loop.tuning_status()

    def load_tuning(self, text: str, path: str) -> dict[str, Any]:
        """Run a new tuning scheme (admin): `text` is the YAML of the file `path`, read by
        schedctl as the admin. It passes every check of a scheme in cobaltlite.yaml first; one
        that fails changes nothing, and the previous scheme stays active."""
        self._require_admin("schedctl --tuning")
        if not isinstance(text, str) or not isinstance(path, str):
            raise ValueError("schedctl --tuning sends a file's text and its name")
        try:
            scheme = parse_scheme_text(text, Path(path))
        except InputError as exc:
            raise ValueError(f"{exc} (the previous tuning scheme stays active)") from None
        self._loop.replace_scheme(scheme)
        self._loop.wake()
        return self._loop.tuning_status()

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
