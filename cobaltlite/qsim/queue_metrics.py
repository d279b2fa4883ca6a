"""Per-queue figures of a replay under a queue layout (seed 002 §III; docs/hybrid-queues.md).

For each layout queue: its jobs, mean and maximum wait, mean bounded slowdown, the nodes of its
partition and their utilization (node-seconds its jobs ran there over the partition's capacity
from the first submission to the last end of the replay), how many of its jobs ran on the common
pool, and its *starvation*: the jobs that waited longer than the starvation time (24 h on the
paper's Cray, §III) and the time they waited beyond it (sum and maximum, D002-11). The pool gets
its nodes and utilization too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cobaltlite.machine.bits import ranges_to_mask
from cobaltlite.machine.partitions import QueuePartitions, node_mask
from cobaltlite.qsim.metrics import human_duration
from cobaltlite.qsim.outcome import JobOutcome

if TYPE_CHECKING:
    from rich.table import Table

STARVATION_TIME = 24 * 3600.0
"""Seconds of wait after which a job starves (seed 002 §III: the Cray's 24 hours)."""


def queue_metrics(outcomes: Sequence[JobOutcome], partitions: QueuePartitions,
                  slowdown_bound: float = 10.0,
                  starvation_time: float = STARVATION_TIME) -> dict[str, Any]:
    """{"starvation_time": s, "queues": {queue: figures}, "pool": {nodes, utilization}}."""
    span_start = min((o.submit_time for o in outcomes), default=0.0)
    span = max((o.end_time for o in outcomes), default=0.0) - span_start
    pool_mask = node_mask(partitions.pool)
    own_masks = {q: node_mask(p) for q, p in partitions.own.items()}
    rows: dict[str, dict[str, Any]] = {}
    pool_work = 0.0
    for queue, places in partitions.own.items():
        mine = [o for o in outcomes if o.queue == queue]
        waits = [o.wait for o in mine]
        own_work = on_pool = 0.0
        for o in mine:
            where = ranges_to_mask(o.location)
            run = o.run_time
            if where & pool_mask:
                on_pool += 1
                pool_work += (where & pool_mask).bit_count() * run
            own_work += (where & own_masks[queue]).bit_count() * run
        starving = [w - starvation_time for w in waits if w > starvation_time]
        rows[queue] = {
            "jobs": len(mine),
            "partition_nodes": len(places),
            "priority": partitions.priority.get(queue, 1.0),
            "mean_wait": sum(waits) / len(waits) if waits else None,
            "max_wait": max(waits, default=None),
            "mean_bounded_slowdown": (
                sum(max(1.0, o.response / max(o.run_time, slowdown_bound)) for o in mine)
                / len(mine) if mine else None),
            "utilization": own_work / (len(places) * span) if span > 0 and places else None,
            "jobs_on_pool": int(on_pool),
            "starving_jobs": len(starving),
            "starvation_seconds": sum(starving),
            "max_starvation_seconds": max(starving, default=0.0),
        }
    pool_nodes = len(partitions.pool)
    return {
        "starvation_time": starvation_time,
        "tau_pf": partitions.tau_pf,
        "queues": rows,
        "pool": {"nodes": pool_nodes,
                 "utilization": pool_work / (pool_nodes * span) if span > 0 and pool_nodes
                 else None},
    }


def queue_table(by_queue: Mapping[str, Any]) -> Table:
    """`queue_metrics`' figures as the table qsim prints after the replay's metrics."""
    from rich.table import Table

    pool = by_queue["pool"]
    used = "" if pool["utilization"] is None else f", {pool['utilization']:.1%} used"
    table = Table(title=f"Per queue (common pool {pool['nodes']} nodes{used}, tau_pf "
                        f"{by_queue['tau_pf']}; starving: waited over "
                        f"{human_duration(by_queue['starvation_time'])}), seed 002",
                  title_justify="left")
    for name in ("queue", "nodes", "priority", "jobs", "mean wait", "max wait", "mean BSD",
                 "utilization", "on pool", "starving", "starved beyond"):
        table.add_column(name, justify="left" if name == "queue" else "right")
    for queue, row in by_queue["queues"].items():
        mean, top = row["mean_wait"], row["max_wait"]
        table.add_row(
            queue, str(row["partition_nodes"]), f"{row['priority']:g}", f"{row['jobs']:,}",
            "-" if mean is None else human_duration(mean),
            "-" if top is None else human_duration(top),
            "-" if row["mean_bounded_slowdown"] is None else f"{row['mean_bounded_slowdown']:.2f}",
            "-" if row["utilization"] is None else f"{row['utilization']:.1%}",
            f"{row['jobs_on_pool']:,}", f"{row['starving_jobs']:,}",
            human_duration(row["starvation_seconds"]))
    return table
