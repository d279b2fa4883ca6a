"""Sampling: instant utilization, queue depth and job counts (seed 000 §4), kept in the database.

Queue depth is seed 000's: the sum of the waits of all queued jobs at the sampling instant. A
sample carries the raw figures (queue_depth in seconds, as before) and `monitored`: the values of
every metric a tuning rule may name (metrics_monitor/series.py: queue depth in minutes, instant
and 1 h / 10 h / 24 h rolling utilization). With a `MetricHistory`, every sample is stored and a
restarted monitor reloads the last day, so its rolling averages and history survive.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import Pyro5.api
import structlog

from cobaltlite.clock import Clock
from cobaltlite.metrics_monitor.history import MetricHistory
from cobaltlite.metrics_monitor.series import ROLLING_UTILIZATION, StepSeries, monitored_values

log = structlog.get_logger("metrics-monitor")

_RELOAD_SPAN = max(ROLLING_UTILIZATION.values())
"""A restart reloads this much history: what the longest rolling average reads."""


class Monitor:
    def __init__(self, queue_manager: Any, system: Any, clock: Clock, keep: int = 2880,
                 history: MetricHistory | None = None) -> None:
        self.queue_manager = queue_manager
        self.system = system
        self.clock = clock
        self.samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self.utilization = StepSeries()
        self._history = history
        self._lock = threading.Lock()
        if history is not None:
            for when, values in history.since(clock.now() - _RELOAD_SPAN):
                self._remember(when, values)

    def sample(self) -> dict[str, Any]:
        now = self.clock.now()
        jobs = self.queue_manager.jobs()
        limits = self.system.limits()
        held = self.system.allocations()
        queued = [j for j in jobs if j["state"] == "queued"]
        running = [j for j in jobs if j["state"] in ("starting", "running", "killing")]
        busy = sum(j["nodes"] for j in running)
        depth = sum(now - j["submittime"] for j in queued)
        utilization = busy / limits["machine_nodes"] if limits["machine_nodes"] else 0.0
        with self._lock:
            self.utilization.record(now, utilization)
            values = {**monitored_values(now, self.utilization, depth, len(queued)),
                      "running_jobs": float(len(running)), "blocks_held": float(len(held))}
            if self._history is not None:
                self._history.append(now, values)
            return self._remember(now, values, record=False)

    def _remember(self, now: float, values: dict[str, float], record: bool = True
                  ) -> dict[str, Any]:
        if record:
            self.utilization.record(now, values["utilization"])
        sample = {
            "time": now,
            "queued": int(values["queued_jobs"]),
            "running": int(values["running_jobs"]),
            "queue_depth": values["queue_depth"] * 60.0,
            "utilization": values["utilization"],
            "blocks_held": int(values["blocks_held"]),
            "monitored": {k: v for k, v in values.items()
                          if k not in ("running_jobs", "blocks_held")},
        }
        self.samples.append(sample)
        return sample

    def history(self, count: int) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.samples)[-count:]


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
