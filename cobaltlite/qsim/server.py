"""Qsim over Pyro5: one replay answering for both the queue manager and the system.

`serve_qsim` puts a `Qsim` at the component addresses of a state directory, under the names the
scheduler daemon looks for (`queue-manager`, `system`). The scheduler daemon, unchanged and
configured with `scheduler_clock: queue-manager`, reads the virtual time from here. The replay
drives it through the scheduler's `run_pass()`, one pass per event time, exactly where the
in-process replay calls `Scheduler.iterate()`; the two give identical job logs.
"""

from __future__ import annotations

from typing import Any

import Pyro5.api

from cobaltlite.config import Config
from cobaltlite.machine.wire import description_to_wire
from cobaltlite.qsim.engine import Qsim
from cobaltlite.rpc.peers import serve_component


@Pyro5.api.expose
class QsimQueueManagerAPI:
    def __init__(self, qsim: Qsim) -> None:
        self._qsim = qsim

    def ping(self) -> str:
        return "queue-manager"

    def now(self) -> float:
        return self._qsim.clock.now()

    def schedulable_jobs(self) -> list[list[Any]]:
        """Rows (jobid, size, wall_time, score, threshold, queue), as the queue manager sends
        them."""
        return [[j.jobid, j.size, j.wall_time, j.score, j.threshold, j.queue]
                for j in self._qsim.schedulable_jobs()]

    def start_job(self, jobid: int, location: str) -> bool:
        return self._qsim.start_job(jobid, location)

    def jobs(self) -> list[dict[str, Any]]:
        """The queued jobs' ids and submission times: what the scheduler daemon reads for a
        job's queued time (the common pool's priority factor, seed 002)."""
        return [{"jobid": j.jobid, "submittime": j.submit_time}
                for j in self._qsim.queued_jobs()]

    def reservation_windows(self) -> list[list[Any]]:
        return [w.to_row() for w in self._qsim.windows()]


@Pyro5.api.expose
class QsimSystemAPI:
    def __init__(self, qsim: Qsim) -> None:
        self._qsim = qsim

    def ping(self) -> str:
        return "system"

    def description(self) -> dict[str, Any]:
        return description_to_wire(self._qsim.machine().description)

    def allocations(self) -> list[dict[str, Any]]:
        return self._qsim.allocations()

    def machine_state(self, known_forecast: int) -> dict[str, Any]:
        """What the scheduler's replica reads at each pass (cobaltlite/scheduler/remote.py).
        Qsim's failure chances come from its own predictor, in process only: none is sent."""
        return {"allocations": self._qsim.allocations(),
                "failed": self._qsim.machine().failed_components(), "forecast": None,
                "unscheduled": [], "inactive": [],
                "queue_places": {"queues": {q: sorted(p) for q, p in
                                            self._qsim.queue_places.items()}, "open": None},
                "queue_partitions": (None if self._qsim.partitions is None
                                     else self._qsim.partitions.to_wire())}


def serve_qsim(qsim: Qsim, config: Config) -> list:
    """Serve `qsim` at the instance's queue-manager and system addresses; return the daemons."""
    return [serve_component(config, "queue-manager", QsimQueueManagerAPI(qsim)),
            serve_component(config, "system", QsimSystemAPI(qsim))]
