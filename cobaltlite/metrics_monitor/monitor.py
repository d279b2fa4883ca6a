"""Sampling: instant utilization, queue depth and job counts (seed 000 §4).

Queue depth is seed 000's: the sum of the waits of all queued jobs at the sampling instant.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import Pyro5.api
import structlog

from cobaltlite.clock import Clock

log = structlog.get_logger("metrics-monitor")


class Monitor:
    def __init__(self, queue_manager: Any, system: Any, clock: Clock, keep: int = 2880) -> None:
        self.queue_manager = queue_manager
        self.system = system
        self.clock = clock
        self.samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def sample(self) -> dict[str, Any]:
        now = self.clock.now()
        jobs = self.queue_manager.jobs()
        limits = self.system.limits()
        held = self.system.allocations()
        queued = [j for j in jobs if j["state"] == "queued"]
        running = [j for j in jobs if j["state"] in ("starting", "running", "killing")]
        busy = sum(j["nodes"] for j in running)
        sample = {
            "time": now,
            "queued": len(queued),
            "running": len(running),
            "queue_depth": sum(now - j["submittime"] for j in queued),
            "utilization": busy / limits["machine_nodes"] if limits["machine_nodes"] else 0.0,
            "blocks_held": len(held),
        }
        with self._lock:
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
