"""Per-queue figures of a replay under a queue layout (seed 002 §III; docs/hybrid-queues.md).

For each layout queue: its jobs, mean and maximum wait, mean bounded slowdown, the nodes of its
partition and their utilization (node-seconds its jobs ran there over the partition's capacity
from the first submission to the last end of the replay), how many of its jobs ran on the common
pool, and its *starvation*: the jobs that waited longer than its starvation time (the layout's
`starvation_time`, 24 h by default as on the paper's Cray, §III) and the time they waited beyond
it (sum and maximum, D002-11). The pool gets its nodes and utilization too, and how long the
starvation rule kept it for starving queues (D002-13).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cobaltlite.qsim.metrics import human_duration
from cobaltlite.qsim.outcome import JobOutcome

if TYPE_CHECKING:
    from rich.table import Table

    from cobaltlite.machine.partitions import QueuePartitions


def queue_metrics(outcomes: Sequence[JobOutcome], partitions: QueuePartitions,
                  slowdown_bound: float = 10.0) -> dict[str, Any]:
    """{"starvation_time": s (None when the queues' differ), "queues": {queue: figures},
    "pool": {nodes, utilization, starvation_rule_seconds}}."""
    span_start = min((o.submit_time for o in outcomes), default=0.0)
    span = max((o.end_time for o in outcomes), default=0.0) - span_start
    on_pool_nodes = partitions.counter(partitions.pool)
    rows: dict[str, dict[str, Any]] = {}
    pool_work = 0.0
    for queue, places in partitions.own.items():
        mine = [o for o in outcomes if o.queue == queue]
        waits = [o.wait for o in mine]
        own_work = on_pool = 0.0
        on_own_nodes = partitions.counter(places)
        for o in mine:
            run = o.run_time
            pooled = on_pool_nodes(o.location)
            if pooled:
                on_pool += 1
                pool_work += pooled * run
            own_work += on_own_nodes(o.location) * run
        starvation_time = partitions.starvation_time(queue)
        starving = [w - starvation_time for w in waits if w > starvation_time]
        rows[queue] = {
            "jobs": len(mine),
            "partition_nodes": partitions.nodes(queue),
            "priority": partitions.priority.get(queue, 1.0),
            "mean_wait": sum(waits) / len(waits) if waits else None,
            "max_wait": max(waits, default=None),
            "mean_bounded_slowdown": (
                sum(max(1.0, o.response / max(o.run_time, slowdown_bound)) for o in mine)
                / len(mine) if mine else None),
            "utilization": own_work / (partitions.nodes(queue) * span) if span > 0 and places
            else None,
            "jobs_on_pool": int(on_pool),
            "starvation_time": starvation_time,
            "starving_jobs": len(starving),
            "starvation_seconds": sum(starving),
            "max_starvation_seconds": max(starving, default=0.0),
        }
    pool_nodes = partitions.nodes()
    times = {row["starvation_time"] for row in rows.values()}
    return {
        "starvation_time": times.pop() if len(times) == 1 else None,
        "tau_pf": partitions.tau_pf,
        "queues": rows,
        "pool": {"nodes": pool_nodes,
                 "utilization": pool_work / (pool_nodes * span) if span > 0 and pool_nodes
                 else None,
                 "starvation_rule_seconds": _starvation_rule_seconds(outcomes, partitions)},
    }


def _starvation_rule_seconds(outcomes: Sequence[JobOutcome], partitions: QueuePartitions
                             ) -> float:
    """How long the pool was kept for starving queues (D002-13): the time during which some
    job of a layout queue that the pool could hold waited beyond its queue's starvation time
    (the union of those jobs' [submit + starvation time, start) spans); 0 without a pool the
    jobs may reach (no τ_pf)."""
    if partitions.tau_pf is None or not partitions.pool:
        return 0.0
    largest = partitions.largest()
    spans = sorted((o.submit_time + partitions.starvation_time(o.queue), o.start_time)
                   for o in outcomes if o.queue in partitions.own and o.nodes <= largest
                   and o.wait > partitions.starvation_time(o.queue))
    total, reached = 0.0, float("-inf")
    for start, end in spans:
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def queue_table(by_queue: Mapping[str, Any]) -> Table:
    """`queue_metrics`' figures as the table qsim prints after the replay's metrics."""
    from rich.table import Table

    pool = by_queue["pool"]
    used = "" if pool["utilization"] is None else f", {pool['utilization']:.1%} used"
    kept = pool.get("starvation_rule_seconds", 0.0)
    rule = f", kept for starving queues {human_duration(kept)}" if kept else ""
    table = Table(title=f"Per queue (common pool {pool['nodes']} nodes{used}{rule}, tau_pf "
                        f"{by_queue['tau_pf']}; starving: waited over the queue's starvation "
                        "time), seed 002",
                  title_justify="left")
    for name in ("queue", "nodes", "priority", "jobs", "mean wait", "max wait", "mean BSD",
                 "utilization", "on pool", "starves after", "starving", "starved beyond"):
        table.add_column(name, justify="left" if name == "queue" else "right")
    for queue, row in by_queue["queues"].items():
        mean, top = row["mean_wait"], row["max_wait"]
        table.add_row(
            queue, str(row["partition_nodes"]), f"{row['priority']:g}", f"{row['jobs']:,}",
            "-" if mean is None else human_duration(mean),
            "-" if top is None else human_duration(top),
            "-" if row["mean_bounded_slowdown"] is None else f"{row['mean_bounded_slowdown']:.2f}",
            "-" if row["utilization"] is None else f"{row['utilization']:.1%}",
            f"{row['jobs_on_pool']:,}", human_duration(row["starvation_time"]),
            f"{row['starving_jobs']:,}",
            human_duration(row["starvation_seconds"]))
    return table
