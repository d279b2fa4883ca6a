"""Score a partitioned queue layout by replaying it (seed 002 §II: "evaluated by simulation").

In a purely partitioned layout the queues share nothing, so the replay of the whole machine is
exactly one replay per queue, each on a flat machine the size of its partition, with FCFS and
EASY backfilling inside the partition as the paper's simulator does (§III). That makes two
things cheap that the configurators do thousands of times:

* a queue's replay depends only on its jobs and its node count, so it is cached on
  (job classes, nodes): a split re-replays two queues, not all of them;
* the replays are independent, so a batch of layouts runs on a process pool.

The replay is Qsim's own engine with the real Scheduler; only the machine is cut up.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from cobaltlite.errors import InputError
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.partitioning.layout import (
    JobClass,
    PartitionedQueue,
    QueueLayout,
    unrouted_error,
)
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

SLOWDOWN_BOUND = 10.0
"""Seconds; the same bound as Qsim's metrics (seed 002 gives none)."""


@dataclass(frozen=True, slots=True)
class QueueRun:
    """What one queue's replay on its partition gave."""

    jobs: int
    total_wait: float
    max_wait: float
    total_slowdown: float
    work: float  # node-seconds run
    first_submit: float
    last_end: float

    @property
    def mean_wait(self) -> float:
        return self.total_wait / self.jobs if self.jobs else 0.0

    @property
    def mean_slowdown(self) -> float:
        return self.total_slowdown / self.jobs if self.jobs else 0.0


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A layout's score: the overall figures (what the configurators minimise is `mean_wait`)
    and each queue's."""

    mean_wait: float
    max_wait: float
    mean_slowdown: float
    utilization: float
    queues: dict[str, QueueRun]


def replay_partition(jobs: Sequence[TraceJob], nodes: int) -> QueueRun:
    """Replay `jobs` alone on `nodes` nodes, FCFS with EASY backfilling."""
    if not jobs:
        return QueueRun(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    machine = FlatMachine(FlatDescription("partition", nodes))
    result = Qsim(jobs, machine, builtin_policy("fcfs"), Backfill.EASY).run()
    if result.skipped:
        raise InputError(f"a partition of {nodes} nodes cannot run {result.skipped[0]}")
    return queue_run(result.outcomes)


def queue_run(outcomes: Sequence[JobOutcome]) -> QueueRun:
    """The figures of one queue's jobs as a replay ran them."""
    if not outcomes:
        return QueueRun(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    total_wait = max_wait = slowdown = work = 0.0
    for o in outcomes:
        wait = o.start_time - o.submit_time
        total_wait += wait
        max_wait = max(max_wait, wait)
        run = o.end_time - o.start_time
        slowdown += max(1.0, (o.end_time - o.submit_time) / max(run, SLOWDOWN_BOUND))
        work += o.allocated_nodes * run
    return QueueRun(len(outcomes), total_wait, max_wait, slowdown, work,
                    min(o.submit_time for o in outcomes), max(o.end_time for o in outcomes))


def replay_whole(jobs: Sequence[TraceJob], layout: QueueLayout, machine_nodes: int
                 ) -> Evaluation:
    """Replay `jobs` on the whole machine under `layout` (partitions and common pool, seed 002
    §III) with FCFS and EASY inside each partition: what scores a layout with a pool, which the
    per-partition replays cannot."""
    machine = FlatMachine(FlatDescription("layout", machine_nodes))
    result = Qsim(jobs, machine, builtin_policy("fcfs"), Backfill.EASY,
                  queue_layout=layout).run()
    if result.skipped:
        raise InputError(f"the layout cannot run {result.skipped[0]}")
    by_queue: dict[str, list[JobOutcome]] = {q.name: [] for q in layout.queues}
    for o in result.outcomes:
        by_queue.setdefault(o.queue, []).append(o)
    return score({name: queue_run(runs) for name, runs in by_queue.items()}, machine_nodes)


class PartitionEvaluator:
    """Scores layouts over one set of jobs on a machine of `machine_nodes` nodes."""

    def __init__(self, jobs: Sequence[TraceJob], machine_nodes: int, workers: int = 1) -> None:
        self.jobs = list(jobs)
        self.machine_nodes = machine_nodes
        self.workers = workers
        self.replays = 0  # replays actually run (the rest came from the cache)
        self._cache: dict[tuple[tuple[JobClass, ...], int], QueueRun] = {}

    def evaluate(self, layout: QueueLayout) -> Evaluation:
        return self.evaluate_all([layout])[0]

    def evaluate_all(self, layouts: Sequence[QueueLayout]) -> list[Evaluation]:
        routed = [layout.route(self.jobs) for layout in layouts]
        for layout, (_, unrouted) in zip(layouts, routed, strict=True):
            if layout.pool == 0 and unrouted:
                raise unrouted_error(unrouted[0])
        missing: dict[tuple[tuple[JobClass, ...], int], list[TraceJob]] = {}
        for layout, (by_queue, _) in zip(layouts, routed, strict=True):
            for q in layout.queues:
                key = (q.classes, q.nodes)
                if key not in self._cache:
                    missing[key] = by_queue[q.name]
        self._run(missing)
        return [self._score(layout) for layout in layouts]

    def queue_runs(self, queue: PartitionedQueue, sizes: Sequence[int]) -> list[QueueRun]:
        """`queue` replayed alone on each of `sizes` nodes (the lower-bound search)."""
        jobs = [job for job in self.jobs if queue.holds(job)]
        self._run({(queue.classes, n): jobs for n in sizes
                   if (queue.classes, n) not in self._cache})
        return [self._cache[(queue.classes, n)] for n in sizes]

    def _run(self, missing: dict[tuple[tuple[JobClass, ...], int], list[TraceJob]]) -> None:
        keys = list(missing)
        if self.workers > 1 and len(keys) > 1:
            with ProcessPoolExecutor(self.workers) as pool:
                runs = list(pool.map(replay_partition, [missing[k] for k in keys],
                                     [k[1] for k in keys], chunksize=1))
        else:
            runs = [replay_partition(missing[k], k[1]) for k in keys]
        self._cache.update(zip(keys, runs, strict=True))
        self.replays += len(keys)

    def _score(self, layout: QueueLayout) -> Evaluation:
        return score({q.name: self._cache[(q.classes, q.nodes)] for q in layout.queues},
                     self.machine_nodes)


def score(queues: dict[str, QueueRun], machine_nodes: int) -> Evaluation:
    """The overall figures of the queues' runs on a machine of `machine_nodes` nodes."""
    ran = [r for r in queues.values() if r.jobs]
    jobs = sum(r.jobs for r in ran)
    if not jobs:
        return Evaluation(0.0, 0.0, 0.0, 0.0, queues)
    span = max(r.last_end for r in ran) - min(r.first_submit for r in ran)
    return Evaluation(
        mean_wait=sum(r.total_wait for r in ran) / jobs,
        max_wait=max(r.max_wait for r in ran),
        mean_slowdown=sum(r.total_slowdown for r in ran) / jobs,
        utilization=(sum(r.work for r in ran) / (machine_nodes * span) if span > 0 else 0.0),
        queues=queues)
