"""Dynamic queue reconfiguration, DQR (seed 002 §II-B): split queues, then merge them, while the
simulated average wait drops.

Split. The queues are visited in order of their size range, then time range (the paper's
"adjacent ranges" order). Each is split three ways and the best half-pair is simulated:

* by run time: jobs asking for less than half the queue's time limit against the rest;
* by CPU hours: the jobs sorted by size fill the first half until it holds at least half the
  queue's CPU hours; jobs of the last one's size join it;
* by job count: the same, halving the number of jobs.

If the best split lowers the overall average wait, the queue is replaced by its halves and the
first half is tried again; otherwise the next queue is. The parent's nodes go to the halves in
proportion to their CPU hours, each at least its largest job.

Merge. Two queues may merge when their size ranges and their time ranges each overlap or touch
(a gap of one node or one second counts as touching, docs/hybrid-queues.md D002-4) and they are
not the two halves of one split. Every feasible merge is simulated and the best is kept if it
lowers the average wait; repeat until none does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cobaltlite.partitioning.evaluate import Evaluation, PartitionEvaluator
from cobaltlite.partitioning.layout import NO_TIME_LIMIT, JobClass, PartitionedQueue, QueueLayout
from cobaltlite.partitioning.proportional import cpu_hours, smallest_partition, whole_nodes
from cobaltlite.traces.model import TraceJob

MAX_QUEUES = 12
"""Splitting stops at this many queues (the paper sets no cap; each split costs replays)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One change DQR made, for the log a configurator prints."""

    action: str  # "split by run time", "split by CPU hours", "split by job count", "merge"
    before: tuple[str, ...]
    after: tuple[str, ...]
    mean_wait: float


Halves = tuple[list[JobClass], list[JobClass]]
SplitRule = Callable[[PartitionedQueue, Sequence[TraceJob]], Halves | None]


def _cut(queue: PartitionedQueue, by: str, last_low: int
         ) -> Halves | None:
    low: list[JobClass] = []
    high: list[JobClass] = []
    for c in queue.classes:
        a, b = c.cut_nodes(last_low) if by == "nodes" else c.cut_time(last_low)
        if a is not None:
            low.append(a)
        if b is not None:
            high.append(b)
    return (low, high) if low and high else None


def split_by_run_time(queue: PartitionedQueue, jobs: Sequence[TraceJob]
                      ) -> Halves | None:
    """Jobs asking for less than half the queue's time limit (its longest job's request when
    it has none) against the rest."""
    limit = queue.time_range[1]
    if limit == NO_TIME_LIMIT:
        limit = max((j.requested_time for j in jobs), default=0)
    half = -(-limit // 2)  # "under half the limit": requested < limit/2, in whole seconds
    return _cut(queue, "time", half - 1) if half > 0 else None


def _size_cut(jobs: Sequence[TraceJob], weight: Callable[[TraceJob], float]
              ) -> int | None:
    ordered = sorted(jobs, key=lambda j: j.nodes)
    whole = sum(weight(j) for j in ordered)
    if not ordered or whole <= 0:
        return None
    held = 0.0
    for job in ordered:
        held += weight(job)
        if held >= whole / 2:
            return job.nodes  # every job of this size joins the first half
    return ordered[-1].nodes


def split_by_cpu_hours(queue: PartitionedQueue, jobs: Sequence[TraceJob]
                       ) -> Halves | None:
    last = _size_cut(jobs, lambda j: j.nodes * j.run_time)
    return None if last is None else _cut(queue, "nodes", last)


def split_by_job_count(queue: PartitionedQueue, jobs: Sequence[TraceJob]
                       ) -> Halves | None:
    last = _size_cut(jobs, lambda j: 1.0)
    return None if last is None else _cut(queue, "nodes", last)


SPLIT_RULES: tuple[tuple[str, SplitRule], ...] = (
    ("split by run time", split_by_run_time),
    ("split by CPU hours", split_by_cpu_hours),
    ("split by job count", split_by_job_count),
)


def halves(queue: PartitionedQueue, jobs: Sequence[TraceJob],
           classes: Halves, admitted: bool = False) -> tuple[PartitionedQueue, ...] | None:
    """The two queues of a split, with the parent's nodes shared by CPU hours and its priority
    and starvation time (D002-11); None when a half would take no job or the nodes cannot hold
    each half's largest job (with `admitted`, the widest job its classes admit, D002-24)."""
    parts = [PartitionedQueue(f"{queue.name}.{i + 1}", tuple(c), 1, queue.priority, queue.name,
                              queue.starvation_time)
             for i, c in enumerate(classes)]
    mine = [[j for j in jobs if p.holds(j)] for p in parts]
    if not all(mine):
        return None
    minimum = [smallest_partition(p, m, admitted) for p, m in zip(parts, mine, strict=True)]
    if sum(minimum) > queue.nodes:
        return None
    hours = [cpu_hours(m) for m in mine]
    whole = sum(hours)
    shares = ([h / whole * queue.nodes for h in hours] if whole > 0
              else [queue.nodes / 2, queue.nodes / 2])
    sizes = whole_nodes(shares, queue.nodes, minimum)
    return tuple(replace(p, nodes=n) for p, n in zip(parts, sizes, strict=True))


def _touch(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return max(a[0], b[0]) <= min(a[1], b[1]) + 1


def may_merge(a: PartitionedQueue, b: PartitionedQueue) -> bool:
    """Seed 002 §II-B's feasibility: adjacent or overlapping size and time ranges, not
    siblings of one split."""
    if a.parent is not None and a.parent == b.parent:
        return False
    return _touch(a.size_range, b.size_range) and _touch(a.time_range, b.time_range)


def merged(a: PartitionedQueue, b: PartitionedQueue, layout: QueueLayout) -> PartitionedQueue:
    """One queue of both: the higher priority and the shorter starvation time of the two
    (`layout`'s where a queue sets none; None, the layout's, when neither sets one), so no job
    of either is served later than its own queue promised (D002-11)."""
    starvation = (None if a.starvation_time is None and b.starvation_time is None
                  else min(layout.starvation(a), layout.starvation(b)))
    return PartitionedQueue(f"{a.name}+{b.name}", a.classes + b.classes, a.nodes + b.nodes,
                            max(a.priority, b.priority), starvation_time=starvation)


def _ordered(layout: QueueLayout) -> list[PartitionedQueue]:
    return sorted(layout.queues, key=lambda q: (q.size_range, q.time_range, q.name))


def reshape(layout: QueueLayout, evaluator: PartitionEvaluator, max_queues: int = MAX_QUEUES,
            admitted: bool = False) -> tuple[QueueLayout, Evaluation, list[Step]]:
    """Split then merge (DQR) from `layout`; the final layout, its score and the steps taken.
    `admitted`: every queue keeps room for the widest job its classes admit (D002-24)."""
    current = evaluator.evaluate(layout)
    steps: list[Step] = []
    queues = _ordered(layout)
    i = 0
    while i < len(queues) and len(queues) < max_queues:
        queue = queues[i]
        routed, _ = layout.with_queues([queue]).route(evaluator.jobs)
        jobs = routed[queue.name]
        options: list[tuple[str, list[PartitionedQueue]]] = []
        for action, rule in SPLIT_RULES:
            classes = rule(queue, jobs)
            pair = halves(queue, jobs, classes, admitted) if classes is not None else None
            if pair is not None:
                options.append((action, queues[:i] + list(pair) + queues[i + 1:]))
        scores = evaluator.evaluate_all([layout.with_queues(q) for _, q in options])
        best = min(range(len(options)), key=lambda k: scores[k].mean_wait, default=None)
        if best is not None and scores[best].mean_wait < current.mean_wait:
            action, queues = options[best]
            current = scores[best]
            steps.append(Step(action, (queue.name,), (queues[i].name, queues[i + 1].name),
                              current.mean_wait))
        else:
            i += 1
    while True:
        pairs = [(a, b) for k, a in enumerate(queues) for b in queues[k + 1:] if may_merge(a, b)]
        merges = [[q for q in queues if q is not a and q is not b] + [merged(a, b, layout)]
                  for a, b in pairs]
        scores = evaluator.evaluate_all([layout.with_queues(q) for q in merges])
        best = min(range(len(merges)), key=lambda k: scores[k].mean_wait, default=None)
        if best is None or scores[best].mean_wait >= current.mean_wait:
            break
        a, b = pairs[best]
        queues = merges[best]
        current = scores[best]
        steps.append(Step("merge", (a.name, b.name), (queues[-1].name,), current.mean_wait))
    return layout.with_queues(queues), current, steps
