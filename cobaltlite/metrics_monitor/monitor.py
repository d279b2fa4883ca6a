"""Sampling: instant utilization, queue depth and job counts (seed 000 §4), kept in the database.

Queue depth is seed 000's: the sum of the waits of all queued jobs at the sampling instant. A
sample carries the raw figures (queue_depth in seconds, as before) and `monitored`: the values of
every metric a tuning rule may name (metrics_monitor/series.py: queue depth in minutes, instant
and 1 h / 10 h / 24 h rolling utilization). With a `MetricHistory`, every sample is stored and a
restarted monitor reloads the last day, so its rolling averages and history survive; samples
older than the retention (`metrics_retention_days`) are deleted as new ones come. Every metric
is listed, with its meaning, in catalog.py; the sample's `values` hold them all.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Any

import Pyro5.api
import structlog

from cobaltlite.clock import Clock
from cobaltlite.metrics_monitor.catalog import LOSS_SPAN, WAIT_WINDOW
from cobaltlite.metrics_monitor.history import MetricHistory
from cobaltlite.metrics_monitor.series import (
    MONITORED_METRICS,
    ROLLING_UTILIZATION,
    StepSeries,
    monitored_values,
)
from cobaltlite.qsim.metrics import longest_periods, never_starts
from cobaltlite.reservations.cost import COST_METRICS
from cobaltlite.reservations.model import Window

log = structlog.get_logger("metrics-monitor")

_RELOAD_SPAN = max(ROLLING_UTILIZATION.values())
"""A restart reloads this much history: what the longest rolling average reads."""


class Monitor:
    def __init__(self, queue_manager: Any, system: Any, clock: Clock, keep: int = 2880,
                 history: MetricHistory | None = None, retention: float | None = None) -> None:
        """`retention`: seconds of history the database keeps (None: all of it)."""
        self.queue_manager = queue_manager
        self.system = system
        self.clock = clock
        self.samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self.utilization = StepSeries()
        self.loss = StepSeries()
        self._history = history
        self._retention = retention
        self._forecast_version = -1  # the system sends its forecast only when this is stale
        self._lock = threading.Lock()
        if history is not None:
            for when, values in history.since(clock.now() - _RELOAD_SPAN):
                self._remember(when, values)

    def sample(self) -> dict[str, Any]:
        now = self.clock.now()
        jobs = self.queue_manager.jobs()
        limits = self.system.limits()
        state = self.system.machine_state(self._forecast_version)
        if state["forecast"] is not None:
            self._forecast_version = state["forecast"]["version"]
        started = self.queue_manager.started_since(now - WAIT_WINDOW)
        reservation_cost = self.queue_manager.reservation_cost()
        periods = longest_periods((w.queue, w.end - w.start) for w in map(
            Window.from_row, self.queue_manager.reservation_windows()))
        queued = [j for j in jobs if j["state"] == "queued"]
        runnable = [j for j in queued if j["display_state"] == "queued"]
        running = [j for j in jobs if j["state"] in ("starting", "running", "killing")]
        busy = sum(j["nodes"] for j in running)
        depth = sum(now - j["submittime"] for j in runnable)
        nodes = limits["machine_nodes"]
        utilization = busy / nodes if nodes else 0.0
        idle = max(0, nodes - busy)
        # Seed 000 eq. 4's delta_i, as Qsim samples it (qsim/engine.py): a queued job smaller
        # than the idle nodes could have used them, unless it can never start (D000-9).
        wasted = idle / nodes if nodes and any(
            j["nodes"] < idle and not (periods and never_starts(j["queue"], j["walltime"],
                                                                periods))
            for j in runnable) else 0.0
        waits = [start - submit for _jobid, submit, start in started]
        with self._lock:
            self.utilization.record(now, utilization)
            self.loss.record(now, wasted)
            values = {**monitored_values(now, self.utilization, depth, len(runnable)),
                      "waiting_jobs": float(len(queued)),
                      "running_jobs": float(len(running)),
                      "wait_mean": sum(waits) / len(waits) if waits else 0.0,
                      "wait_max": max(waits, default=0.0),
                      "started_jobs": float(len(waits)),
                      "loss_of_capacity": wasted,
                      "loss_of_capacity_24h": self.loss.average(now, LOSS_SPAN),
                      "out_of_service": float(len(state["failed"])),
                      "blocks_held": float(len(state["allocations"])),
                      **{name: float(reservation_cost.get(name, 0.0)) for name in COST_METRICS}}
            values["reserved_idle_share"] = \
                values["reserved_idle_nodes"] / nodes if nodes else 0.0
            if self._history is not None:
                self._history.append(now, values)
                if self._retention is not None:
                    self._history.forget_before(now - self._retention)
            return self._remember(now, values, record=False)

    def _remember(self, now: float, values: dict[str, float], record: bool = True
                  ) -> dict[str, Any]:
        if record:
            self.utilization.record(now, values["utilization"])
            self.loss.record(now, values.get("loss_of_capacity", 0.0))
        sample = {
            "time": now,
            "queued": int(values["queued_jobs"]),
            "running": int(values["running_jobs"]),
            "queue_depth": values["queue_depth"] * 60.0,
            "utilization": values["utilization"],
            "blocks_held": int(values["blocks_held"]),
            "monitored": {k: v for k, v in values.items() if k in MONITORED_METRICS},
            "values": dict(values),
        }
        self.samples.append(sample)
        return sample

    def history(self, count: int) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.samples)[-count:]

    def since(self, time: float, limit: int) -> list[dict[str, Any]]:
        """The last `limit` samples taken at `time` or later, oldest first, each as
        {"time", "values"}: from the database when there is one (it reaches back past the
        restart and the memory's `keep` samples), else from memory."""
        if self._history is None:
            with self._lock:
                found = [(s["time"], s["values"]) for s in self.samples if s["time"] >= time]
            found = found[-limit:]
        else:
            found = self._history.since(time, limit)
        return [{"time": when, "values": values} for when, values in found]


@Pyro5.api.expose
class MonitorAPI:
    def __init__(self, monitor: Monitor) -> None:
        self._monitor = monitor

    def ping(self) -> str:
        return "metrics-monitor"

    def latest(self) -> dict[str, Any] | None:
        found = self._monitor.history(1)
        return found[0] if found else None

    def history(self, count: int = 100) -> list[dict[str, Any]]:
        return self._monitor.history(count)

    def sample_now(self) -> dict[str, Any]:
        return self._monitor.sample()

    def since(self, time: float, limit: int = 1000) -> list[dict[str, Any]]:
        return self._monitor.since(float(time), int(limit))


@Pyro5.api.expose
class MetricsUserAPI:
    """cqmetrics' face on the monitor's user socket: read-only, for any local account."""

    MAX_LIMIT = 100_000
    """Samples one answer may carry: a month at the default 30 s interval."""

    def __init__(self, monitor: Monitor) -> None:
        self._monitor = monitor

    def latest(self) -> dict[str, Any] | None:
        found = self._monitor.history(1)
        return {"time": found[0]["time"], "values": found[0]["values"]} if found else None

    def since(self, time: float, limit: int = 1000) -> list[dict[str, Any]]:
        if isinstance(time, bool) or not isinstance(time, int | float) or not math.isfinite(time):
            raise ValueError(f"since: {time!r} is not a time in seconds")
        if isinstance(limit, bool) or not isinstance(limit, int) or not \
                1 <= limit <= self.MAX_LIMIT:
            raise ValueError(f"limit: {limit!r} must be a whole number from 1 to "
                             f"{self.MAX_LIMIT}")
        return self._monitor.since(float(time), limit)
