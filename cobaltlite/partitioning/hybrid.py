"""The hybrid configuration (seed 002 §III): carve a common pool out of a partitioned layout.

Starting from a purely partitioned layout (DQR's), the queues are visited in increasing
partition size, round robin. A visit moves `chunk` nodes from the queue's partition into the
common pool and replays the history on the whole machine (partitions, pool and τ_pf, with EASY
inside each partition; `evaluate.replay_whole`). The move is kept when that queue's mean wait is
at most (1 + degradation) times its wait in the partitioned start; otherwise the queue is frozen
at its size. The carving stops when no queue can shrink (frozen, or its partition would no
longer hold its largest job) or when a move raises the overall mean wait above (1 + degradation)
times the start's (that move is undone).

Decisions (docs/hybrid-queues.md): the reference of both limits is the partitioned start, not
the previous step, so the degradation cannot compound (D002-20); the chunk is in nodes (D002-21);
a queue whose start wait is under a minute is held to a minute's rise, as a percentage of zero
would freeze it at once; τ_pf, when the layout has none, is half the median queue priority
(Table III sets 0.5 × the medium queue's priority).

Every step depends on the one before, so the carving replays one candidate at a time; the
replays of several histories (months) run in parallel one level up (monthly.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from cobaltlite.errors import InputError
from cobaltlite.partitioning.evaluate import Evaluation, replay_whole
from cobaltlite.partitioning.layout import PartitionedQueue, QueueLayout
from cobaltlite.partitioning.proportional import smallest_partition
from cobaltlite.traces.model import TraceJob

WAIT_FLOOR = 60.0
"""Seconds: the reference wait of a queue that hardly waited in the partitioned start."""


@dataclass(frozen=True, slots=True)
class Carving:
    layout: QueueLayout
    score: Evaluation
    start: Evaluation
    """The partitioned start's score, replayed the same way (the limits' reference)."""
    steps: list[str] = field(default_factory=list)
    """What each visit did, for the log."""


def default_tau_pf(layout: QueueLayout) -> float:
    """Half the median queue priority (seed 002 Table III: 0.5 × the medium queue's)."""
    return 0.5 * statistics.median(q.priority for q in layout.queues)


def carve_pool(layout: QueueLayout, jobs: Sequence[TraceJob], total: int, *,
               chunk: int, degradation: float, admitted: bool = False) -> Carving:
    """The hybrid layout carved from the partitioned `layout` over the history `jobs`; with
    `admitted`, no partition shrinks below the widest job its classes admit (D002-24)."""
    if chunk < 1:
        raise InputError(f"chunk {chunk}: give 1 node or more")
    if layout.pool:
        raise InputError(f"the hybrid carving starts from a partitioned layout; this one "
                         f"already has a common pool of {layout.pool} nodes")
    tau = layout.tau_pf if layout.tau_pf is not None else default_tau_pf(layout)
    current = QueueLayout(layout.queues, 0, tau, layout.extra)
    routed, _ = current.route(jobs)
    largest = {q.name: smallest_partition(q, routed[q.name], admitted) for q in layout.queues}
    start = replay_whole(jobs, current, total)
    score = start
    limit = (1 + degradation) * start.mean_wait
    queue_limit = {name: (1 + degradation) * max(run.mean_wait, WAIT_FLOOR)
                   for name, run in start.queues.items()}
    order = [q.name for q in sorted(layout.queues, key=lambda q: (q.nodes, q.name))]
    frozen: set[str] = set()
    steps: list[str] = []
    while True:
        movable = [name for name in order if name not in frozen
                   and current.queue(name).nodes - chunk >= largest[name]]
        if not movable:
            break
        for name in movable:
            candidate = _moved(current, name, chunk)
            result = replay_whole(jobs, candidate, total)
            if result.mean_wait > limit:
                steps.append(f"{name}: -{chunk} nodes raises the mean wait to "
                             f"{result.mean_wait:.0f} s (limit {limit:.0f} s); stop")
                return Carving(current, score, start, steps)
            if result.queues[name].mean_wait > queue_limit[name]:
                frozen.add(name)
                steps.append(f"{name}: -{chunk} nodes raises its wait to "
                             f"{result.queues[name].mean_wait:.0f} s; frozen")
                continue
            current, score = candidate, result
            steps.append(f"{name}: -{chunk} nodes to the pool ({current.pool}); mean wait "
                         f"{score.mean_wait:.0f} s")
    return Carving(current, score, start, steps)


def _moved(layout: QueueLayout, name: str, chunk: int) -> QueueLayout:
    queues = [PartitionedQueue(q.name, q.classes, q.nodes - chunk if q.name == name else q.nodes,
                               q.priority, q.parent) for q in layout.queues]
    return QueueLayout(tuple(queues), layout.pool + chunk, layout.tau_pf, layout.extra)
