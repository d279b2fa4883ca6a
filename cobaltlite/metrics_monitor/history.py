"""The metrics monitor's history in the instance database, so a restart keeps it.

One general table, one row per metric per sample: `metric_samples(time, metric, value)`. Any
metric name fits (issue 16 adds Prometheus export and retention on the same table). The queue
manager stays the only writer of *its* tables; this table is the monitor's alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import (
    Column,
    Float,
    Index,
    MetaData,
    String,
    Table,
    delete,
    desc,
    insert,
    select,
)

from cobaltlite.queue_manager.store import make_engine

metadata = MetaData()
metric_samples = Table(
    "metric_samples",
    metadata,
    Column("time", Float, nullable=False),
    Column("metric", String(64), nullable=False),
    Column("value", Float, nullable=False),
    Index("metric_samples_by_time", "time"),
)


class MetricHistory:
    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        metadata.create_all(self.engine)

    def append(self, time: float, values: Mapping[str, float]) -> None:
        """Store one sample: every metric at `time`, in one transaction."""
        rows = [{"time": time, "metric": name, "value": float(value)}
                for name, value in values.items()]
        with self.engine.begin() as connection:
            connection.execute(insert(metric_samples), rows)

    def since(self, time: float, limit: int | None = None
              ) -> list[tuple[float, dict[str, float]]]:
        """Samples from `time` on (the last `limit` of them), oldest first, each as
        (time, {metric: value})."""
        times = select(metric_samples.c.time).where(metric_samples.c.time >= time).distinct()
        if limit is not None:
            first = (select(times.subquery().c.time).order_by(desc("time")).offset(limit - 1)
                     .limit(1))
            with self.engine.connect() as connection:
                cut = connection.execute(first).scalar()
            time = time if cut is None else cut
        query = (select(metric_samples.c.time, metric_samples.c.metric, metric_samples.c.value)
                 .where(metric_samples.c.time >= time).order_by(metric_samples.c.time))
        samples: dict[float, dict[str, float]] = {}
        with self.engine.connect() as connection:
            for when, metric, value in connection.execute(query):
                samples.setdefault(when, {})[metric] = value
        return list(samples.items())

    def forget_before(self, time: float) -> None:
        """Delete the samples older than `time` (the retention)."""
        with self.engine.begin() as connection:
            connection.execute(delete(metric_samples).where(metric_samples.c.time < time))

    def close(self) -> None:
        self.engine.dispose()
