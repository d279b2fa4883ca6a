"""The Qsim event loop: a virtual clock, a stream of submissions and a heap of job ends.

Qsim answers for both the queue manager and the system, in-process, and drives the unmodified
`Scheduler`. Event order at one instant: every job that ends at t releases its place first, then
every job submitted at t joins the queue (in trace order), then one scheduling pass runs, then a
capacity sample is taken for loss of capacity (seed 000 eq. 4). A pass starts everything that can
start at t, so one pass per distinct event time suffices.

A job runs for min(run time, requested time): the scheduler plans with the requested time, and a
job that would run longer is killed at its limit, as a resource manager does.

The job and queue rules are the live queue manager's (cobaltlite.jobs): every job moves through
the same state machine (lifecycle), and with a queue configuration (`queues`) a submission is
admitted or refused by the same restrictions with the same messages, queue states decide what
is scheduled, maxrunning/maxtotaljobs/maxusernodes/totalnodes hold jobs back (maxrun_hold), and a
job with dependencies waits until each parent ended with exit status 0 (a parent that ended
otherwise, or that the trace does not hold, leaves it held for good: dep_fail). Without a queue
configuration every queue the trace names exists, runs, and restricts nothing. Refused jobs and
jobs still held at the end are listed in `ReplayResult.skipped` with the reason.

Failures (seed 003 §V, §VI-A3; docs/fault-aware.md) are a sorted list merged like the
submissions, so a replay without one pays a single float comparison per event. At one instant,
after the ends: components whose repair is over return to service, then each failure takes its
component out of service for the repair time and kills every job whose place includes it. A
killed job goes back to the queue at once and restarts from the beginning; it keeps its original
submission time, so the metrics count its response from its first submission and the policy
ranks it by its whole wait (under FCFS it is first again).

Reservations (`reservations`, from `qsim --reservations FILE`; cobaltlite/reservations) make
each period's start and end an event time, so a pass runs when a window opens or closes; the
scheduler keeps every other job off the reserved places over the window and starts the jobs of
the reservation's queue only inside it. A replay without reservations never looks at them.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

from cobaltlite.clock import VirtualClock
from cobaltlite.errors import InputError
from cobaltlite.jobs import lifecycle, queues
from cobaltlite.jobs.lifecycle import JobStatus
from cobaltlite.jobs.queues import QueueLoad, SettingError
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.policy.usage import DEFAULT_HALF_LIFE, UsageLedger
from cobaltlite.policy.utility import PassInputs, UtilityFunction
from cobaltlite.qsim.metrics import longest_periods, never_starts
from cobaltlite.qsim.outcome import CapacitySamples, JobOutcome
from cobaltlite.scheduler.scheduler import Backfill, Scheduler
from cobaltlite.traces.model import TraceJob

if TYPE_CHECKING:  # failures, queue layouts and reservations are imported where a replay uses them
    from cobaltlite.faults.sources import FailureEvent
    from cobaltlite.machine.partitions import QueuePartitions
    from cobaltlite.partitioning.layout import QueueLayout
    from cobaltlite.reservations.model import Reservation, Window
    from cobaltlite.scheduler.slack import SlackSettings

DEFAULT_REPAIR_TIME = 1200.0
"""Seconds a failed component is out of service: seed 003 §VI-A3's 20-minute reboot."""

_new_tuple = tuple.__new__  # makes a JobOutcome from all its fields without a Python call


@dataclass(slots=True, eq=False)
class SimJob:
    """A job inside Qsim. Its attribute names are the utility-function inputs, so scoring reads
    them directly."""

    jobid: int
    size: int
    wall_time: float
    run_time: float
    submit_time: float
    user_name: str
    project: str
    queue: str
    queue_priority: int = 0
    queued_time: float = 0.0
    score: float = 0.0
    threshold: float = 0.0
    start_time: float = -1.0
    location: str = ""
    allocated_nodes: int = 0
    dependencies: tuple[int, ...] = ()
    exit_status: int = 0  # what the trace says the job ended with, unless killed at its limit
    status: JobStatus = lifecycle.NEW
    end_time: float = 0.0  # when the current run ends, if nothing kills it
    failed_runs: int = 0
    lost_node_seconds: float = 0.0  # held by runs that failures killed


class ReplayObserver:
    """Hooks for output writers; the default does nothing, so a bare replay pays nothing."""

    def submitted(self, job: SimJob, now: float) -> None: ...

    def started(self, job: SimJob, now: float) -> None: ...

    def ended(self, job: SimJob, now: float, killed: bool) -> None: ...

    def failed(self, component: str, now: float, repaired_at: float, jobids: list[int]) -> None:
        """`component` failed at `now`, killing `jobids`; it returns at `repaired_at`."""

    def killed_by_failure(self, job: SimJob, now: float, component: str) -> None:
        """A failure of `component` killed `job`'s run; the job is back in the queue."""


class PassHook(Protocol):
    """Runs at every event time: before its (possible) pass and after it."""

    def before_pass(self, now: float) -> None: ...

    def after_pass(self, now: float) -> None: ...


@dataclass
class ReplayResult:
    """What a replay produced: each job's outcome, the capacity samples and the counts."""

    outcomes: list[JobOutcome]
    samples: CapacitySamples
    machine_nodes: int
    passes: int = 0
    events: int = 0
    skipped: list[str] = field(default_factory=list)
    failure_events: int | None = None
    """Failures that struck during the replay; None when no failure source was given."""


class Qsim:
    """The queue manager and the system of a replay, on a virtual clock."""

    def __init__(
        self,
        jobs: Sequence[TraceJob],
        machine: Machine,
        policy: UtilityFunction,
        backfill: Backfill = Backfill.EASY,
        observer: ReplayObserver | None = None,
        pass_runner: Callable[[], object] | None = None,
        queue_config: Sequence[Mapping[str, Any]] | None = None,
        policies: Mapping[str, UtilityFunction] | None = None,
        failures: Sequence[FailureEvent] | None = None,
        repair_time: float = DEFAULT_REPAIR_TIME,
        window: int = 1,
        usage_half_life: float = DEFAULT_HALF_LIFE,
        reservations: Sequence[Reservation] | None = None,
        slack: SlackSettings | None = None,
        queue_layout: QueueLayout | None = None,
        layout_source: str = "queue layout",
    ) -> None:
        """`pass_runner` runs one scheduling pass; by default the in-process scheduler's, over
        RPC a call to a scheduler daemon that reaches this Qsim through `qsim.server`.

        `queue_config`: the queues (cobaltlite.jobs.queues.load_queue_config), or None for
        unrestricted queues named by the trace; `policies` resolves the policy names the
        queues give (a queue without one uses `policy`).

        `failures` (sorted by time) strike the machine during the replay; each failed component
        is out of service for `repair_time` seconds. None: nothing ever fails.

        `window`: the scheduler's allocation window W (seed 000 §3.3; 1 = no reordering).

        `usage_half_life`: seconds, the decay of per-user usage; the usage is kept only when a
        policy reads it (`user_usage`, as the fairshare policy does).

        `reservations`: held over their periods (validated by the caller against `machine`);
        a reservation's own queue `R.<name>` exists for the replay.
        `slack`: seed 001's settings for `Backfill.SLACK` (None: Table 3's).
        `queue_layout` (seed 002; docs/hybrid-queues.md): each job goes to the layout queue
        whose job classes take it (its trace queue, size and requested time) and runs on that
        queue's partition, or on the common pool; InputError names a job no queue takes, and
        `layout_source` (the file) a layout the machine cannot hold.
        """
        self._machine = machine
        self.partitions: QueuePartitions | None = None
        """The layout's partitions and pool, as the scheduler reads them (None: none)."""
        if queue_layout is not None:
            from cobaltlite.machine.partitions import QueuePartitions

            self.partitions = QueuePartitions.from_layout(queue_layout, machine, layout_source)
            jobs = routed_jobs(jobs, queue_layout)
        self.queue_places: dict[str, PlaceSet] = {}
        """Queue name -> the places its jobs may run on (empty: every queue runs anywhere)."""
        self.policy = policy
        self.observer = observer or ReplayObserver()
        self.skipped: list[str] = []
        self._configured = queue_config is not None
        self._queues: dict[str, Mapping[str, Any]] = (
            {q["name"]: q for q in queue_config} if queue_config is not None
            else {name: queues.default_queue(name, policy.name)
                  for name in {tj.queue for tj in jobs}})
        self._reservations = list(reservations or ())
        # Queue -> its reservations' longest period: a job longer can never start, so the
        # capacity samples leave it out of _sizes (D000-9). Empty without reservations.
        self._periods = longest_periods((r.queue_name, r.duration) for r in self._reservations)
        self._windows: list[Window] = []
        self._windows_until = float("-inf")  # windows() recomputes from this time on
        for res in self._reservations:
            if res.queue_name not in self._queues:
                self._queues[res.queue_name] = queues.default_queue(res.queue_name, policy.name)
        self._policies = dict(policies or {})
        unresolved = sorted({q["policy"] for q in self._queues.values()
                             if self._configured and q["policy"] is not None}
                            - set(self._policies))
        if unresolved:
            raise InputError(f"queue policies {', '.join(unresolved)}: no utility function "
                             "given for them")
        # Running limits need the per-queue load; a replay without them keeps no load at all.
        self._limited = any(q["restrictions"] for q in self._queues.values())
        self._loads: dict[str, QueueLoad] = {}
        # The trace's jobs wait here, in arrival order, until they are submitted: each becomes a
        # SimJob only then, and nothing of it is kept once it has ended but its outcome (on a
        # 300,000-job trace, trace jobs and SimJobs side by side were a third of the peak).
        pending: deque[TraceJob] = deque()
        for tj in sorted(jobs, key=attrgetter("submit_time", "jobid")):
            if machine.allocation_size(tj.nodes) is None:
                self.skipped.append(
                    f"job {tj.jobid}: {tj.nodes} nodes fit no place on {machine.name}"
                )
                continue
            if self.partitions is not None and not self.partitions.could_hold(tj.queue, tj.nodes):
                self.skipped.append(
                    f"job {tj.jobid}: {tj.nodes} nodes fit neither queue {tj.queue}'s partition "
                    f"({self.partitions.largest(tj.queue)} nodes) nor the common pool "
                    f"({self.partitions.largest() if self.partitions.tau_pf is not None else 0})")
                continue
            pending.append(tj)
        self._pending = pending
        # Dependencies need every job id of the trace and every ended job's exit status; a trace
        # without any keeps neither.
        self._has_dependencies = any(tj.dependencies for tj in pending)
        self._known = {tj.jobid for tj in pending} if self._has_dependencies else set()
        self._failures = list(failures) if failures is not None else None
        first: list[float] = [pending[0].submit_time] if pending else []
        if self._failures:  # one before the first arrival still matters if its repair is not over
            first.append(self._failures[0].time)
        self._repair_time = repair_time
        self._repairs: list[tuple[float, str]] = []  # heap of (back in service at, component)
        self._repaired_at: dict[str, float] = {}  # failed component -> when it returns
        self._failure_events = 0
        self.clock = VirtualClock(min(first, default=0.0))
        self._queue: dict[int, SimJob] = {}
        # The sizes of the queued jobs, sorted: the capacity sample at every event asks whether
        # any queued job is smaller than the idle nodes, which is whether the first one is.
        self._sizes: list[int] = []
        # Under a fixed-order policy (UtilityFunction.rank_key) the queue is also kept in rank
        # order, new arrivals inserted, so a pass needs no scoring and no sort.
        self._ranked: list[SimJob] = []
        self._ranked_by: Callable[[SimJob], Any] | None = None
        self._held: dict[int, SimJob] = {}  # queued but not runnable: held, or queue not run
        self._dependants: dict[int, list[SimJob]] = {}
        self._exits: dict[int, int] = {}  # exit status of every job that ended (dependencies)
        self._running: dict[int, SimJob] = {}
        self._ends: list[tuple[float, int]] = []
        self._outcomes: list[JobOutcome] = []
        self._inputs = PassInputs(
            now=0.0, machine_size=machine.total_nodes, n_s=machine.min_block_size
        )
        self._usage: UsageLedger | None = None
        if any(p.needs_user_usage for p in (policy, *self._policies.values())):
            self._usage = UsageLedger(usage_half_life, self.clock.now)
            self._inputs.user_usage = self._usage.share_of(machine.total_nodes)
        self.scheduler = Scheduler(self, self, self.clock, backfill, window,
                                   self.windows if self._reservations else None, slack=slack)
        self._run_pass = pass_runner or self.scheduler.iterate
        self._in_process = pass_runner is None
        self.skip_futile_passes = True
        """Leave out the passes that would start nothing because every queued job is larger
        than the idle nodes, or without backfilling the first in a fixed order is (False: run
        them, the reference tests/test_futile_passes.py compares with)."""
        self.pass_hook: PassHook | None = None
        """Called around each event time's pass (adaptive tuning); None costs nothing."""

    def resume(self, now: float, running: Sequence[SimJob], queued: Sequence[SimJob]) -> None:
        """Start from a state instead of a trace: `running` jobs hold their `location` (on a
        machine with nothing else held) and end at start_time + run_time, `queued` wait. For
        forked replays (the fair start time); the trace given to the constructor is dropped."""
        self._pending.clear()
        self.clock.advance_to(now)
        for job in running:
            job.allocated_nodes = self._machine.allocate(
                job.location, job.jobid, job.start_time + job.wall_time)
            job.status = lifecycle.launched(lifecycle.start(job.status).status).status
            job.end_time = job.start_time + job.run_time
            self._running[job.jobid] = job
            heapq.heappush(self._ends, (job.end_time, job.jobid))
        for job in queued:
            self._enqueue(job)
        if self._limited:  # the queues' running limits count the resumed jobs too
            for job in running:
                self._load(job.queue).add(job.user_name, job.size, job.wall_time, running=True)
            for job in queued:
                self._load(job.queue).add(job.user_name, job.size, job.wall_time, running=False)

    # ---- the queue-manager interface ---------------------------------------------------

    def schedulable_jobs(self) -> list[SimJob]:
        now = self.clock.now()
        jobs = list(self._queue.values())
        if self._limited:
            loads, blocker = self._loads, queues.run_blocker
            jobs = [j for j in jobs if not blocker(self._queues[j.queue], j.user_name, j.size,
                                                   loads.get(j.queue))]
        for job in jobs:
            job.queued_time = now - job.submit_time
        self._inputs.now = now
        if not self._configured:
            self.policy.score_jobs(jobs, self._inputs)
        else:
            by_policy: dict[str | None, list[SimJob]] = {}
            for job in jobs:
                by_policy.setdefault(self._queues[job.queue]["policy"], []).append(job)
            for name, group in by_policy.items():
                policy = self.policy if name is None else self._policies.get(name, self.policy)
                policy.score_jobs(group, self._inputs)
        return jobs

    def ranked_jobs(self) -> list[SimJob] | None:
        """The queue in rank order under a fixed-order policy (unscored), else None. With a
        queue configuration jobs may be ranked by several policies and held back by running
        limits, so they are always scored."""
        key = None if self._configured else self.policy.rank_key
        if key is not self._ranked_by:  # the first pass, or a tuner changed the policy
            self._ranked_by = key
            self._ranked = [] if key is None else sorted(self._queue.values(), key=key)
        if key is None:
            return None
        if self.partitions is not None and self.partitions.pool:  # the pool's priority factor
            now = self.clock.now()
            for job in self._ranked:
                job.queued_time = now - job.submit_time
        return self._ranked

    def _enqueue(self, job: SimJob) -> None:
        """`job` waits in the queue, runnable."""
        self._queue[job.jobid] = job
        if not (self._periods and never_starts(job.queue, job.wall_time, self._periods)):
            insort(self._sizes, job.size)
        key = self._ranked_by
        if key is not None:
            ranked = self._ranked
            # Under fcfs every arrival ranks last: an append, without insort's bisection.
            if not ranked or key(ranked[-1]) <= key(job):
                ranked.append(job)
            else:
                insort(ranked, job, key=key)

    def _dequeue(self, job: SimJob) -> None:
        """`job` leaves the queue (it starts, or its queue died)."""
        del self._queue[job.jobid]
        # Forked replays (fork.py, fairness.py) also put jobs in _queue directly and run their
        # own loops, which never read _sizes: a size that is not there is no error.
        sizes = self._sizes
        i = bisect_left(sizes, job.size)
        if i < len(sizes) and sizes[i] == job.size and not (
                self._periods and never_starts(job.queue, job.wall_time, self._periods)):
            del sizes[i]
        key = self._ranked_by
        if key is not None:
            ranked = self._ranked
            # A start often takes the first job (in order) or the last (an arrival that fits
            # at once; together 70 % of SDSC-BLUE's starts): found by identity, without the
            # bisection's key calls.
            if ranked[-1] is job:
                ranked.pop()
            elif ranked[0] is job:
                del ranked[0]
            else:
                del ranked[bisect_left(ranked, key(job), key=key)]  # keys are unique (job id)

    def queued_jobs(self) -> list[SimJob]:
        """The jobs waiting now, unscored (for monitors)."""
        return list(self._queue.values())

    def running_jobs(self) -> list[SimJob]:
        """The jobs running now (with queued_jobs, what a forked replay starts from)."""
        return list(self._running.values())

    def start_job(self, jobid: int, location: str) -> bool:
        job = self._queue.get(jobid)
        if job is None:
            return False
        if self._limited and queues.run_blocker(
                self._queues[job.queue], job.user_name, job.size, self._loads.get(job.queue)):
            return False  # an earlier start of this pass reached the queue's running limit
        status = _LAUNCHED.get(job.status)
        job.status = status if status is not None else _launched(job.status)
        now = self.clock.now()
        job.allocated_nodes = self._machine.allocate(location, jobid, now + job.wall_time)
        self._dequeue(job)
        job.start_time = now
        job.location = location
        # Killed at its limit if it would run longer (min(run_time, wall_time) without a call).
        job.end_time = now + (job.wall_time if job.wall_time < job.run_time else job.run_time)
        self._running[jobid] = job
        if self._limited:
            self._loads[job.queue].started(job.user_name, job.size)
        if self._usage is not None:
            self._usage.started(job.user_name, job.size, now)
        heapq.heappush(self._ends, (job.end_time, jobid))
        self.observer.started(job, now)
        return True

    def _submit(self, job: SimJob, now: float) -> None:
        """A trace job arrives: admitted as the queue manager would, or refused (skipped)."""
        if self._configured:
            queue = self._queues.get(job.queue)
            if queue is None:
                refusal: str | None = f"trying to add job to non-existent queue '{job.queue}'"
            else:
                refusal = self._admission(job, queue)
            if refusal is not None:
                self.skipped.append(f"job {job.jobid}: {refusal}")
                self._never_exists(job)
                return
            job.queue_priority = self._queues[job.queue]["priority"]
        if self._limited:
            self._load(job.queue).add(job.user_name, job.size, job.wall_time, running=False)
        if job.dependencies:
            self._wait_for_parents(job)
        self.observer.submitted(job, now)
        status = job.status
        if (status is not lifecycle.NEW and status.held) or not self._scheduled(job):
            self._held[job.jobid] = job
        else:
            self._enqueue(job)

    def _admission(self, job: SimJob, queue: Mapping[str, Any]) -> str | None:
        """Cobalt's refusal of the job by its queue (as at qsub), or None."""
        try:
            job.wall_time = queues.walltime_for(queue, int(job.wall_time))
        except SettingError as exc:
            return str(exc)
        load = self._loads.get(job.queue)
        return queues.state_error(queue) or queues.admission_error(
            queue, job.user_name, (), job.size, int(job.wall_time),
            load.users.get(job.user_name) if load else None)

    def _never_exists(self, job: SimJob) -> None:
        """A refused job is no job: what waits for it can never run (dep_fail)."""
        self._known.discard(job.jobid)
        for child in self._dependants.pop(job.jobid, ()):
            child.status = lifecycle.parent_missing(child.status, job.jobid).status

    def _load(self, queue: str) -> QueueLoad:
        load = self._loads.get(queue)
        if load is None:
            load = self._loads[queue] = QueueLoad()
        return load

    def _scheduled(self, job: SimJob) -> bool:
        return self._queues[job.queue]["state"] in queues.SCHEDULED_STATES

    def _wait_for_parents(self, job: SimJob) -> None:
        """The dependency state at submission, as the queue manager derives it: satisfied by a
        parent that ended with 0, failed by one that ended otherwise or is not in the trace."""
        exits = self._exits
        waiting = frozenset(d for d in job.dependencies if exits.get(d) != 0)
        failed = any(d in exits or d not in self._known for d in waiting)
        job.status = JobStatus(waiting_on=waiting, dep_fail=failed)
        for parent in waiting:
            self._dependants.setdefault(parent, []).append(job)

    def windows(self) -> list[Window]:
        """The reservation periods that end after now (the scheduler's bookings). The list
        changes only when one of them ends, so it is kept until then."""
        now = self.clock.now()
        if now >= self._windows_until:
            self._windows = [w for res in self._reservations
                             for w in res.windows(now, self._machine)]
            self._windows_until = min((w.end for w in self._windows), default=float("inf"))
        return self._windows

    def _close_ended_reservations(self, now: float) -> None:
        """A one-off reservation that is over leaves its R.<name> queue dead, as the queue
        manager does: its jobs still queued never run (a reservation's job runs only inside)."""
        for res in self._reservations:
            name = res.queue_name
            if res.owns_queue and res.is_over(now) and self._queues[name]["state"] != "dead":
                self._queues[name] = {**self._queues[name], "state": "dead"}
                for job in [j for j in self._queue.values() if j.queue == name]:
                    self._dequeue(job)
                    self._held[job.jobid] = job

    def _reservations_give_up(self, t: float, other_events: bool, give_up: float) -> float:
        """When a run whose queue only reservations can still change stops: once each has
        ended, or (cyclic) gone round once more with nothing started; inf while other events
        (`other_events`) remain. `give_up` is the value so far."""
        if other_events:
            return float("inf")
        if give_up == float("inf"):
            return max(t + r.cycle + r.duration if r.cycle else r.end
                       for r in self._reservations)
        return give_up

    def _next_boundary(self, after: float) -> float:
        """The first reservation period start or end later than `after` (inf: none)."""
        best = float("inf")
        for res in self._reservations:
            for start, end in res.periods(after, count=2):
                best = min(best, start if start > after else end)
        return best

    # ---- the system interface ----------------------------------------------------------

    def machine(self) -> Machine:
        return self._machine

    def place_sets(self) -> Mapping[str, PlaceSet]:
        return self.queue_places

    def queue_partitions(self) -> QueuePartitions | None:
        return self.partitions

    def allocations(self) -> list[dict[str, float | int | str]]:
        return [{"jobid": job.jobid, "location": job.location,
                 "expected_end": job.start_time + job.wall_time}
                for job in sorted(self._running.values(), key=lambda j: j.jobid)]

    # ---- the event loop ----------------------------------------------------------------

    def run(
        self, progress: Callable[[int], None] | None = None, progress_every: int = 2000
    ) -> ReplayResult:
        """Replay to the end; `progress(jobs_finished)` is called every `progress_every` events."""
        pending, ends, queue, sizes = self._pending, self._ends, self._queue, self._sizes
        machine, clock, running = self._machine, self.clock, self._running
        iterate, hook = self._run_pass, self.pass_hook
        # Bound once: the loop below runs once per event time, its inner loops once per job.
        advance_to, finish, submit = clock.advance_to, self._finish, self._submit
        pop = heapq.heappop
        has_free_capacity, idle_nodes = machine.has_free_capacity, machine.idle_nodes
        samples = CapacitySamples()
        # One sample per event: appended to its columns here, not through a method call.
        sample_time, sample_idle, sample_fits = (
            samples.times.append, samples.idle.append, samples.fits.append)
        passes, events = 0, 0
        inf = float("inf")
        next_report = progress_every
        failures, repairs = self._failures or [], self._repairs
        next_f = 0
        next_fault = failures[0].time if failures else inf  # next failure or repair
        reserved = bool(self._reservations)
        next_window = self._next_boundary(clock.now()) if reserved else inf
        next_submit = pending[0].submit_time if pending else inf
        give_up = inf  # with only reservation boundaries left: one full cycle of them
        # A job starts only on a place of at least its size in idle nodes, so when every queued
        # job is larger than the idle nodes the pass would start nothing (19 % of SDSC-BLUE's
        # passes): it is not run, where a pass that starts nothing leaves nothing that a later
        # one reads. So under every scheme of the in-process scheduler but slack, whose memory
        # of expected starts each pass updates (a kept conservative plan is resumed only where
        # it holds, as after an event time without a pass). Not with reservations, whose queues'
        # jobs _sizes may leave out. It still counts as a pass (summary.json's
        # scheduling_passes): its outcome is known.
        skip_futile = (self.skip_futile_passes and self._in_process and not reserved
                       and self.scheduler.backfill is not Backfill.SLACK)
        # Without backfilling, a pass under a fixed order also starts nothing while the first
        # job is larger than the idle nodes (84 % of lublin_256's passes under none).
        in_order = skip_futile and self.scheduler.backfill is Backfill.NONE
        # Jobs left queued while a repair is pending wait for it: the replay is not over; jobs
        # left queued while a reservation is ahead wait for it too.
        while pending or ends or (queue and (
                repairs or (next_window < inf and next_window <= give_up))):
            t = next_submit
            if ends and ends[0][0] < t:
                t = ends[0][0]
            if next_fault <= t:
                t = next_fault
            if reserved:
                if next_window <= t:
                    t = next_window
                give_up = self._reservations_give_up(t, bool(pending or ends or repairs),
                                                     give_up)
                if t > give_up:
                    break
                next_window = self._next_boundary(t)
                self._close_ended_reservations(t)
            advance_to(t)
            while ends and ends[0][0] == t:
                finish(running.pop(pop(ends)[1]), t)
                events += 1
            if next_fault == t:
                next_f = self._strike(failures, next_f, t)
                events += 1
                next_fault = min(failures[next_f].time if next_f < len(failures) else inf,
                                 repairs[0][0] if repairs else inf)
            while next_submit == t:
                submit(_sim_job(pending.popleft()), t)
                events += 1
                next_submit = pending[0].submit_time if pending else inf
            if hook is not None:
                hook.before_pass(t)
            if queue and has_free_capacity():
                if not skip_futile or (sizes[0] <= idle_nodes()
                                       and not (in_order and self._first_waits())):
                    iterate()
                passes += 1
            idle = idle_nodes()
            fits = bool(sizes) and sizes[0] < idle  # a queued job smaller than the idle nodes
            sample_time(t)
            sample_idle(idle)
            sample_fits(fits)
            if hook is not None:
                hook.after_pass(t)
            if progress is not None and events >= next_report:
                progress(len(self._outcomes))
                next_report = events + progress_every
        for job in self._held.values():
            why = job.status.display() if job.status.held else \
                f"queue {job.queue} is {self._queues[job.queue]['state']}"
            self.skipped.append(f"job {job.jobid}: never ran ({why})")
        for job in queue.values() if reserved else ():
            self.skipped.append(f"job {job.jobid}: never ran (no reservation period of queue "
                                f"{job.queue} had room for it)")
        return ReplayResult(
            self._outcomes, samples, machine.total_nodes, passes, events, list(self.skipped),
            None if self._failures is None else self._failure_events,
        )

    def _first_waits(self) -> bool:
        """Whether a pass without backfilling would start nothing because the first job in
        the kept rank order is larger than the idle nodes: it starts jobs in order and stops at
        the first without a place. Not so with an allocation window above 1 (its step starts
        jobs behind the first) or a queue layout (each region has its own first job), nor with
        reservation periods (their jobs start first; the caller leaves those replays out); nor
        before the order is kept, or while it is kept for a policy a tuner has since replaced."""
        key = self._ranked_by
        return (key is not None and key is self.policy.rank_key and self.scheduler.window == 1
                and self.partitions is None
                and self._ranked[0].size > self._machine.idle_nodes())

    def _strike(self, failures: list[FailureEvent], next_f: int, now: float) -> int:
        """Repairs due at `now`, then the failures at `now`; return the next failure's index."""
        machine, repairs = self._machine, self._repairs
        while repairs and repairs[0][0] == now:
            _, component = heapq.heappop(repairs)
            if self._repaired_at.get(component) == now:  # not failed again meanwhile
                del self._repaired_at[component]
                machine.unfail(component)
        while next_f < len(failures) and failures[next_f].time == now:
            component = failures[next_f].component
            next_f += 1
            self._failure_events += 1
            back = now + self._repair_time
            killed = machine.fail(component)
            if self._repaired_at.get(component, -1.0) < back:
                self._repaired_at[component] = back
                heapq.heappush(repairs, (back, component))
            self.observer.failed(component, now, back, killed)
            for jobid in killed:
                self._kill(self._running.pop(jobid), now, component)
        return next_f

    def _kill(self, job: SimJob, now: float, component: str) -> None:
        """End `job`'s run at a failure and put it back in the queue to start over."""
        self._machine.release(job.jobid)
        self._ends.remove((job.end_time, job.jobid))
        heapq.heapify(self._ends)
        job.failed_runs += 1
        job.lost_node_seconds += job.allocated_nodes * (now - job.start_time)
        if self._usage is not None:
            self._usage.stopped(job.user_name, job.size, job.start_time, now)
        self.observer.killed_by_failure(job, now, component)
        job.status = lifecycle.requeued(job.status).status
        if self._limited:
            self._loads[job.queue].stopped(job.user_name, job.size)
        job.start_time = -1.0
        job.location = ""
        self._enqueue(job)

    def _finish(self, job: SimJob, now: float) -> None:
        self._machine.release(job.jobid)
        if self._usage is not None:
            self._usage.stopped(job.user_name, job.size, job.start_time, now)
        killed = job.run_time > job.wall_time
        if killed:
            job.status = lifecycle.walltime_reached(job.status).status
            job.exit_status = -1
        job.status = lifecycle.ended(job.status).status
        if self._limited:
            self._loads[job.queue].remove(job.user_name, job.size, job.wall_time, running=True)
        if self._has_dependencies:
            self._exits[job.jobid] = job.exit_status
            children = self._dependants.pop(job.jobid, None)
            if children:
                self._parent_ended(job, children)
        self.observer.ended(job, now, killed)
        # Every field in order, through tuple.__new__: the named tuple's own __new__ is a Python
        # function (and keywords cost three times as much again), once per job.
        self._outcomes.append(_new_tuple(JobOutcome, (
            job.jobid, job.submit_time, job.start_time, now, job.size, job.allocated_nodes,
            job.wall_time, job.location, killed, job.failed_runs, job.lost_node_seconds,
            job.user_name, job.project, job.queue)))

    def _parent_ended(self, parent: SimJob, children: list[SimJob]) -> None:
        for child in children:
            child.status = lifecycle.parent_ended(child.status, parent.jobid,
                                                  parent.exit_status).status
            if child.status.runnable and self._scheduled(child):
                del self._held[child.jobid]
                self._enqueue(child)


def routed_jobs(jobs: Sequence[TraceJob], layout: QueueLayout) -> list[TraceJob]:
    """`jobs` with their queue replaced by the layout queue that takes each; InputError
    naming the first job that no queue takes (its size, requested time and trace queue)."""
    out = []
    for job in jobs:
        name = layout.home(job)
        if name is None:
            raise InputError(
                f"job {job.jobid} ({job.nodes} nodes, {job.requested_time:g} s requested, "
                f"queue {job.queue!r}) belongs to no queue of the queue layout; give the "
                "layout a job class that takes it")
        out.append(replace(job, queue=name))
    return out


_LAUNCHED: dict[JobStatus, JobStatus] = {}
"""A queued job's status -> its status once started and launched, for the statuses met so far
(a handful): a replay starts every job, and one lookup replaces two transitions."""


def _launched(status: JobStatus) -> JobStatus:
    """`status` through the queue manager's start and launch (lifecycle raises Refused if the
    job may not start), remembered in _LAUNCHED."""
    running = lifecycle.launched(lifecycle.start(status).status).status
    if not status.waiting_on:  # as lifecycle remembers: statuses without dependencies
        _LAUNCHED[status] = running
    return running


def _sim_job(tj: TraceJob) -> SimJob:
    """The job Qsim replays for the trace's `tj`, made when it is submitted."""
    # The fields without defaults positionally (jobid, size, wall_time, run_time, submit_time,
    # user_name, project, queue): keywords made this cost two and a half times as much, and
    # the exit status as one more keyword half as much again, so it is set only when not 0.
    job = SimJob(tj.jobid, tj.nodes, tj.requested_time, tj.run_time, tj.submit_time, tj.user,
                 tj.project, tj.queue)
    exit_status = _trace_exit_status(tj)
    if exit_status:
        job.exit_status = exit_status
    if tj.dependencies:
        job.dependencies = tj.dependencies
    return job


def _trace_exit_status(job: TraceJob) -> int:
    """The exit status the trace recorded (accounting logs carry Exit_status), else 0."""
    text = job.extra.get("Exit_status")
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0
