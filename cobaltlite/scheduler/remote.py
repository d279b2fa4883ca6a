"""The scheduler daemon's view of its peers over Pyro5: both interfaces in one adapter.

It keeps a replica of the machine model, built once from the system's description and brought
up to date from the system's allocation list at the start of each pass (one call). Starts the
queue manager confirms are applied to the replica at once, so the rest of the pass sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cobaltlite.clock import Clock
from cobaltlite.machine.model import Machine
from cobaltlite.machine.runtime import build_machine
from cobaltlite.machine.wire import description_from_wire


@dataclass(slots=True)
class RemoteJob:
    jobid: int
    size: int
    wall_time: float
    score: float
    threshold: float


class RemoteSite:
    def __init__(
        self, queue_manager: Any, system: Any, clock: Clock, alpha: float = 1.0, beta: float = 1.0
    ) -> None:
        """`alpha` and `beta` weigh the allocation cost the replica places by (seed 003 §IV-B)."""
        self.queue_manager = queue_manager
        self.system = system
        self.clock = clock
        self._machine = build_machine(description_from_wire(system.description()),
                                      alpha=alpha, beta=beta)
        self._held: dict[int, str] = {}
        self._walltime: dict[int, float] = {}

    def machine(self) -> Machine:
        current = {a["jobid"]: a for a in self.system.allocations()}
        for jobid in [j for j in self._held if j not in current]:
            self._machine.release(jobid)
            del self._held[jobid]
        for jobid, alloc in current.items():
            if self._held.get(jobid) != alloc["location"]:
                if jobid in self._held:
                    self._machine.release(jobid)
                self._machine.allocate(alloc["location"], jobid, alloc["expected_end"])
                self._held[jobid] = alloc["location"]
        return self._machine

    def schedulable_jobs(self) -> list[RemoteJob]:
        # Rows are (jobid, size, wall_time, score, threshold).
        jobs = [RemoteJob(*row) for row in self.queue_manager.schedulable_jobs()]
        self._walltime = {j.jobid: j.wall_time for j in jobs}
        return jobs

    def start_job(self, jobid: int, location: str) -> bool:
        if not self.queue_manager.start_job(jobid, location):
            return False
        self._machine.allocate(location, jobid, self.clock.now() + self._walltime[jobid])
        self._held[jobid] = location
        return True
