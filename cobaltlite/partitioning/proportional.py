"""Proportional partitioning (seed 002 eq. 7): P_q = CPUhr_q / Σ CPUhr · P, in whole nodes.

CPU hours (eq. 5) are the node-hours the history's jobs of a queue ran: Σ_j nodes_j · run_j.
Rounding to whole nodes (the paper does not say how; docs/hybrid-queues.md, D002-2): every
queue first gets its lower bound (at least its largest job, so every job of the history can run
in its own partition), the rest is shared by largest remainder of the proportional share, ties to
the queue listed first; the sizes always sum to P exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from cobaltlite.errors import InputError
from cobaltlite.partitioning.layout import PartitionedQueue
from cobaltlite.traces.model import TraceJob


def cpu_hours(jobs: Sequence[TraceJob]) -> float:
    """Seed 002 eq. 5: node-hours run."""
    return sum(job.nodes * job.run_time for job in jobs) / 3600.0


def smallest_partition(queue: PartitionedQueue, jobs: Sequence[TraceJob], admitted: bool) -> int:
    """The fewest nodes `queue` may own: the widest job its classes admit when `admitted` (so
    next month's jobs fit too, D002-24), else the widest of `jobs` (those it takes)."""
    if admitted:
        return queue.size_range[1]
    return max((j.nodes for j in jobs if queue.holds(j)), default=1)


def admits_limits(queues: Sequence[PartitionedQueue], total: int) -> bool:
    """Whether every queue can own the widest job its classes admit, all at once (D002-24)."""
    return sum(q.size_range[1] for q in queues) <= total


def whole_nodes(shares: Sequence[float], total: int, minimum: Sequence[int]) -> list[int]:
    """Whole node counts summing to `total`, each >= its minimum, otherwise in proportion to
    the (real) `shares`: a queue whose share is under its minimum gets the minimum, the others
    share what is left in the same proportions, and largest remainders round it."""
    if sum(minimum) > total:
        raise InputError(f"the queues' lower bounds need {sum(minimum)} nodes; the machine has "
                         f"{total}")
    pinned: set[int] = set()
    while True:
        free = [i for i in range(len(shares)) if i not in pinned]
        left = total - sum(minimum[i] for i in pinned)
        weight = sum(shares[i] for i in free)
        exact = {i: (shares[i] / weight * left if weight > 0 else left / len(free))
                 for i in free}
        under = {i for i in free if exact[i] < minimum[i]}
        if not under:
            break
        pinned |= under
    sizes = [minimum[i] if i in pinned else int(exact[i]) for i in range(len(shares))]
    order = sorted(free, key=lambda i: (-(exact[i] - sizes[i]), i))
    for k in range(total - sum(sizes)):
        sizes[order[k]] += 1
    return sizes


def proportional_sizes(hours: Sequence[float], total: int, minimum: Sequence[int]) -> list[int]:
    """Eq. 7 in whole nodes. Queues with no CPU hours get only their minimum."""
    if not hours:
        raise InputError("proportional partitioning needs at least one queue")
    whole = sum(hours)
    if whole <= 0:
        raise InputError("the history has no CPU hours to share the machine by")
    return whole_nodes([h / whole * total for h in hours], total, minimum)
