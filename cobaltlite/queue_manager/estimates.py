"""Estimated start times (qstat -f's Est_Start_Time, showstart), one estimate per scheduling pass.

After each pass the scheduler asks (a one-way call with its backfilling, its window W and the
components out of service); the queue manager runs the estimate in a thread of its own and keeps
the answer in memory, so qstat reads a dictionary and never waits for a replay. Requests that
arrive while one runs are merged: only the newest matters (newest.py).

The estimate is a forked replay (qsim/fork.py) with the real `Scheduler`: the runnable queued
jobs of `QueueManager.runnable_jobs`, scored by their queues' policies at each virtual pass; the
running jobs hold their places until start + requested wall time; no new arrivals; every job runs
for its requested time; reservations (setres) hold their places over their periods, as the
scheduler sees them; under a live queue layout the fork schedules by its partitions and pool,
as the scheduler does (seed 002); the places an admin took out of scheduling (partadm, nodeadm)
stay out. Held jobs, and jobs of stopped queues, get none. Decisions in
docs/architecture.md, "Estimated start times". With a reservation booked, the queue is estimated
once more without the reservations, which gives the delays they cause
(`QueueManager.reservation_delays`, reservations/cost.py; the metrics monitor samples them).
"""

from __future__ import annotations

from typing import Any

import structlog

from cobaltlite.jobs import states
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.machine.runtime import AdminReplica, build_machine, set_out_of_service
from cobaltlite.machine.wire import description_from_wire
from cobaltlite.qsim.engine import SimJob
from cobaltlite.qsim.fork import estimate_start_times
from cobaltlite.queue_manager.newest import NewestOnly
from cobaltlite.reservations.cost import NO_DELAY, reservation_delays
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.scheduler import Backfill, check_window
from cobaltlite.scheduler.slack import SlackState

log = structlog.get_logger("start-estimates")

_HOLDING = (states.STARTING, states.RUNNING, states.KILLING, states.EXITING)
_Request = tuple[Backfill, int, list[str], dict[str, PlaceSet], QueuePartitions | None,
                 SlackState | None]
"""What an estimate is asked for: backfilling, window, failed components, queue places, the
queue layout's partitions and the scheduler's slack settings and memory."""
_RUNNING_FIELDS = ("nodes", "walltime", "submittime", "user", "project", "queue", "starttime",
                   "location")


class StartEstimator:
    def __init__(self, manager: Any, system: Any) -> None:
        """`manager`: the QueueManager whose `estimated_starts` this keeps; `system`: the system
        component (for the machine's description, read once)."""
        self._manager = manager
        self._system = system
        self._machine: Machine | None = None
        self._admin: AdminReplica | None = None  # of self._machine
        self.last_error: str | None = None
        self._worker: NewestOnly[_Request] = NewestOnly("start estimates",
                                                        self._estimate_and_keep)

    def request(self, backfill: str, window: int, failed: list[str],
                places: dict[str, list[str]], partitions: dict[str, Any] | None = None,
                slack: dict[str, Any] | None = None) -> None:
        """Estimate again (soon, in the estimator's thread) for a scheduler with these
        settings, these components out of service, these queue -> places mappings, this
        queue layout's partitions (`QueuePartitions.to_wire`; None: no layout) and this slack
        state (`SlackState.to_wire`; None: not under slack backfilling).
        Raises ValueError on bad settings."""
        try:
            laid_out = None if partitions is None else QueuePartitions.from_wire(partitions)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"queue partitions: not as QueuePartitions.to_wire gives them: "
                             f"{exc!r}") from None
        try:
            remembered = None if slack is None else SlackState.from_wire(slack)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"slack state: not as SlackState.to_wire gives it: {exc!r}"
                             ) from None
        self._worker.submit((
            Backfill(backfill), check_window(window), [str(name) for name in failed],
            {str(queue): frozenset(map(str, where)) for queue, where in places.items()},
            laid_out, remembered))

    def _estimate_and_keep(self, request: _Request) -> None:
        try:
            self._manager.estimated_starts, self._manager.reservation_delays = \
                self.estimate_with_delays(*request)
            self.last_error = None
        except Exception as exc:  # a peer down, a policy failing: the next pass retries
            if str(exc) != self.last_error:
                log.warning("start times not estimated", error=str(exc))
            self.last_error = str(exc)

    def estimate(self, backfill: Backfill, window: int, failed: list[str],
                 places: dict[str, PlaceSet], partitions: QueuePartitions | None = None,
                 slack: SlackState | None = None) -> dict[int, float]:
        """{jobid: estimated start} for the runnable queued jobs, now."""
        return self.estimate_with_delays(backfill, window, failed, places, partitions,
                                         slack)[0]

    def estimate_with_delays(self, backfill: Backfill, window: int, failed: list[str],
                             places: dict[str, PlaceSet],
                             partitions: QueuePartitions | None = None,
                             slack: SlackState | None = None
                             ) -> tuple[dict[int, float], dict[str, float]]:
        """The estimates, and the delays the reservations cause (reservations/cost.py): with a
        reservation booked, the queue is estimated a second time without any. With
        `partitions` (the live queue layout's) the fork schedules by them, as the scheduler
        does; with `slack` (the scheduler's) it starts from the slack scheme's memory."""
        manager = self._manager
        now = manager.clock.now()
        by_policy, _adjusted, queue_rows = manager.runnable_jobs(now)
        registry = manager.policies
        policies = {name: registry.get(name)
                    for name in {q["policy"] for q in queue_rows} | {manager.default_policy}}
        queued = [SimJob(j.jobid, j.size, j.wall_time, j.wall_time, now - j.queued_time,
                         j.user_name, j.project, j.queue, queue_priority=j.queue_priority)
                  for jobs in by_policy.values() for j in jobs]
        queued.sort(key=lambda j: j.jobid)
        rows = [row for row in manager.store.jobs(states=_HOLDING, fields=_RUNNING_FIELDS)
                if row["location"]]
        running = [SimJob(row["jobid"], row["nodes"], float(row["walltime"]),
                          float(row["walltime"]), row["submittime"], row["user"],
                          row["project"], row["queue"],
                          start_time=now if row["starttime"] is None else row["starttime"],
                          location=row["location"])
                   for row in rows]
        reservations = [Reservation.from_row(row) for row in manager.reservations.listing()]
        machine = self._what_if_machine(failed)

        def estimate(jobs: list[SimJob], holding: list[Reservation]) -> dict[int, float]:
            return estimate_start_times(machine, now, running, jobs,
                                        policies[manager.default_policy], backfill, window,
                                        queue_rows, policies, places, holding,
                                        partitions=partitions, slack=slack)

        starts = estimate(queued, reservations)
        if not reservations:
            return starts, dict(NO_DELAY)
        # Without the reservations their own jobs would not be there either.
        own = {r.queue_name for r in reservations}
        without = estimate([job for job in queued if job.queue not in own], [])
        return starts, reservation_delays(reservations,
                                          {job.jobid: job.queue for job in queued}, starts,
                                          without)

    def _what_if_machine(self, failed: list[str]) -> Machine:
        """An empty model of the machine (built once) with `failed` out of service and the
        places an admin disabled, deleted or deactivated (partadm, nodeadm) unusable, as the
        scheduler's replica has them: else a job only such a place fits is estimated to start
        at once, pass after pass."""
        if self._machine is None:
            self._machine = build_machine(description_from_wire(self._system.description()))
            self._admin = AdminReplica(self._machine)
        assert self._admin is not None
        set_out_of_service(self._machine, failed)
        admin = self._system.admin_state()
        self._admin.apply(admin["unscheduled"], admin["inactive"])
        return self._machine
