"""Every metric the monitor samples, with its meaning: one list for the database history, the
Prometheus endpoint (`cobaltlite_` + name), cqmetrics and the example Grafana dashboard.

Definitions where seed 000 (§4.2) is not explicit are in docs/operator-guide.md, "Metrics
monitor", and docs/metric-aware.md for the tuning metrics (series.py).
"""

from __future__ import annotations

from cobaltlite.reservations.cost import COST_METRICS

WAIT_WINDOW = 3600.0
"""Seconds of the wait statistics' sliding window: the jobs that started in the last hour."""
LOSS_SPAN = 86400.0
"""Seconds the loss of capacity's time average reaches back (like utilization_24h)."""

METRICS: dict[str, str] = {
    "utilization": "busy nodes / machine nodes now",
    "utilization_1h": "time average of utilization over the last hour",
    "utilization_10h": "time average of utilization over the last 10 hours",
    "utilization_24h": "time average of utilization over the last 24 hours",
    "queued_jobs": "jobs queued and runnable (not held)",
    "waiting_jobs": "jobs in the queue, held ones included",
    "running_jobs": "jobs holding nodes (starting, running, killing)",
    "queue_depth": "sum of the waits so far of the queued jobs, in minutes (seed 000)",
    "wait_mean": "mean wait in seconds of the jobs that started in the last hour",
    "wait_max": "longest wait in seconds of the jobs that started in the last hour",
    "started_jobs": "jobs that started in the last hour",
    "loss_of_capacity": "idle nodes / machine nodes now when a queued job would fit in them, "
                        "else 0 (seed 000 eq. 4)",
    "loss_of_capacity_24h": "time average of loss_of_capacity over the last 24 hours",
    "out_of_service": "machine components out of service (failed: nodes, or midplanes on "
                      "Blue Gene/P)",
    "blocks_held": "places (blocks or node sets) held by jobs",
    **COST_METRICS,
    "reserved_idle_share": "reserved_idle_nodes / machine nodes: the capacity the reservations "
                           "hold idle now",
}
"""Name -> help text, in the order cqmetrics prints them."""

PROMETHEUS_PREFIX = "cobaltlite_"


def prometheus_name(metric: str) -> str:
    return PROMETHEUS_PREFIX + metric
