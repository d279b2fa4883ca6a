"""The monitor's history table: `since` with a limit and the retention, against real SQLite."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.metrics_monitor.history import MetricHistory


@settings(max_examples=25, deadline=None)
@given(times=st.lists(st.integers(0, 1000), min_size=1, max_size=30, unique=True),
       since=st.integers(0, 1000), limit=st.integers(1, 40), cut=st.integers(0, 1000))
def test_since_returns_the_latest_samples_in_order_and_retention_drops_only_old_ones(
        times: list[int], since: int, limit: int, cut: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        history = MetricHistory(f"sqlite:///{Path(folder) / 'history.db'}")
        try:
            for t in times:
                history.append(float(t), {"utilization": t / 1000, "queued_jobs": float(t)})
            expected = sorted(t for t in times if t >= since)[-limit:]
            found = history.since(float(since), limit)
            assert [when for when, _ in found] == expected
            assert all(values == {"utilization": when / 1000, "queued_jobs": when}
                       for when, values in found)
            history.forget_before(float(cut))
            assert [when for when, _ in history.since(0.0)] == sorted(t for t in times
                                                                      if t >= cut)
        finally:
            history.close()
