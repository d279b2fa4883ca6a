"""The scheduler daemon's view of its peers over Pyro5: both interfaces in one adapter.

It keeps a replica of the machine model, built once from the system's description and brought
up to date at the start of each pass from the system's machine state (one call): the
allocations, the failed components (never placed on until they are back), and the failure
forecast that gives P_f to the allocation cost (sent only when it changed). Starts the queue
manager confirms are applied to the replica at once, so the rest of the pass sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cobaltlite.clock import Clock
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.machine.runtime import AdminReplica, build_machine, set_out_of_service
from cobaltlite.machine.wire import description_from_wire
from cobaltlite.policy.utility import PassInputs, UtilityFunction, builtin_policy
from cobaltlite.reservations.model import Window
from cobaltlite.system.admin import allowed_places
from cobaltlite.system.forecast import ForecastEntry, failure_source
from cobaltlite.tuning.apply import with_balance_factor


@dataclass(slots=True)
class RemoteJob:
    jobid: int
    size: int
    wall_time: float
    score: float
    threshold: float
    # Read only when the scheduler ranks by the balanced priority itself (balance_factor set)
    # or for the common pool's priority factor (a queue layout with a pool).
    queued_time: float = 0.0
    user_name: str = ""
    project: str = ""
    queue: str = ""
    queue_priority: int = 0


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
        self._forecast_version = -1  # none received yet
        self._place_map: dict[str, Any] = {"queues": {}, "open": None}
        self._queues: set[str] = set()  # of this pass's jobs
        self._partitions: QueuePartitions | None = None
        self._partitions_wire: dict[str, Any] | None = None
        self._admin = AdminReplica(self._machine)
        self.balance_factor: float | None = None
        """Set by adaptive tuning (seed 000): rank by the balanced priority with this BF instead
        of the queues' scores; None: the queue manager's scores, as they come."""
        self._balanced: UtilityFunction | None = None

    def machine(self) -> Machine:
        state = self.system.machine_state(self._forecast_version)
        self._sync_failures(state["failed"], state["forecast"])
        self._admin.apply(state["unscheduled"], state["inactive"])
        self._place_map = state["queue_places"]
        wire = state.get("queue_partitions")
        if wire != self._partitions_wire:
            self._partitions_wire = wire
            self._partitions = None if wire is None else QueuePartitions.from_wire(wire)
        current = {a["jobid"]: a for a in state["allocations"]}
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

    @property
    def replica(self) -> Machine:
        """The machine replica as of this pass (no call to the system)."""
        return self._machine

    def place_sets(self) -> dict[str, PlaceSet]:
        """Where each queue of this pass's jobs may run, by the mapping the system sent with
        the machine state (partadm --queue); empty when there is no mapping."""
        if not self._place_map["queues"] and self._place_map["open"] is None:
            return {}
        places = {}
        for queue in self._queues:
            allowed = allowed_places(self._place_map, queue)
            if allowed is not None:
                places[queue] = allowed
        return places

    def queue_partitions(self) -> QueuePartitions | None:
        """The system's queue layout as partitions, sent with the machine state."""
        return self._partitions

    def partitions_wire(self) -> dict[str, Any] | None:
        """`queue_partitions` as the system sent them (for the start estimates)."""
        return self._partitions_wire

    def _sync_failures(self, failed: list[str], forecast: dict[str, Any] | None) -> None:
        machine = self._machine
        set_out_of_service(machine, failed)
        if forecast is not None:
            entries = [ForecastEntry.from_wire(row) for row in forecast["entries"]]
            machine.failures = failure_source(machine, entries)
            self._forecast_version = forecast["version"]

    def ranked_jobs(self) -> None:
        """The daemon's queue manager sends scored jobs: the scheduler ranks them."""
        return None

    def failed_components(self) -> list[str]:
        """The components out of service as this pass saw them."""
        return self._machine.failed_components()

    def schedulable_jobs(self) -> list[RemoteJob]:
        # Rows are (jobid, size, wall_time, score, threshold, queue).
        jobs = [RemoteJob(jobid, size, wall_time, score, threshold, queue=queue)
                for jobid, size, wall_time, score, threshold, queue
                in self.queue_manager.schedulable_jobs()]
        self._queues = {job.queue for job in jobs}
        self._walltime = {j.jobid: j.wall_time for j in jobs}
        pool = self._partitions is not None and self._partitions.tau_pf is not None \
            and bool(self._partitions.pool)
        if jobs and (pool or self.balance_factor is not None):
            self._set_queued_times(jobs)  # the pool's priority factor or the balanced priority
        if self.balance_factor is not None and jobs:
            self._rank_balanced(jobs, self.balance_factor)
        return jobs

    def _set_queued_times(self, jobs: list[RemoteJob]) -> None:
        now = self.clock.now()
        submitted = {j["jobid"]: j["submittime"] for j in self.queue_manager.jobs()}
        for job in jobs:
            job.queued_time = now - submitted.get(job.jobid, now)

    def _rank_balanced(self, jobs: list[RemoteJob], bf: float) -> None:
        """Score `jobs` with seed 000's balanced priority (eqs. 1-3) and `bf` (bare scores)."""
        now = self.clock.now()
        if self._balanced is None or self._balanced.options.get("balance_factor") != bf:
            self._balanced = with_balance_factor(builtin_policy("balanced"), bf)
        inputs = PassInputs(now, self._machine.total_nodes, self._machine.min_block_size)
        self._balanced.score_jobs(jobs, inputs)

    def reservations(self) -> list[Window]:
        """The reservation periods ending after now (one call per pass; the queue manager
        keeps them, and moves them on in time as it answers)."""
        return [Window.from_row(row) for row in self.queue_manager.reservation_windows()]

    def start_job(self, jobid: int, location: str) -> bool:
        if not self.queue_manager.start_job(jobid, location):
            return False
        self._machine.allocate(location, jobid, self.clock.now() + self._walltime[jobid])
        self._held[jobid] = location
        return True
