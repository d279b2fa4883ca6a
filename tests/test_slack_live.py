"""Slack-based backfilling (seed 001) in the live scheduler daemon: real daemons, backfill: slack
set in cobaltlite.yaml, jobs submitted with qsub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live import Instance


@pytest.fixture
def instance() -> Iterator[Instance]:
    running = Instance(machine="flat:10", settings={
        "backfill": "slack", "slack": {"goal": "utilization", "lookahead": 5}}).start_retrying()
    yield running
    running.stop()


@pytest.mark.slow  # starting and stopping the daemons takes most of it
def test_slack_backfilling_starts_a_job_that_conservative_backfilling_would_hold(
        instance: Instance) -> None:
    sleeper = instance.jobs_dir / "sleep.sh"
    sleeper.write_text("#!/bin/sh\nsleep 600\n")
    sleeper.chmod(0o755)
    # R holds 6 of 10 nodes for up to 1000 s; A (8 nodes) can start when R's wall time ends.
    r = instance.qsub("-n", "6", "-t", "00:16:40", str(sleeper))
    instance.wait_for(r, {"running"})
    a = instance.qsub("-n", "8", "-t", "00:08:20", str(sleeper))
    # B fits the 4 idle nodes but runs 1050 s: it would push A back by about 50 s. Conservative
    # backfilling keeps B waiting; A's slack (F_min = 1.1 of its ~1000 s expected wait, about
    # 100 s) lets the slack scheme start B now, the goal being utilization (G2).
    b = instance.qsub("-n", "3", "-t", "00:17:30", str(sleeper))
    assert instance.wait_for(b, {"running"}, timeout=20)["state"] == "running"
    assert instance.job(a)["state"] == "queued"
    shown = instance.command("schedctl", "--status")
    assert shown.returncode == 0 and "slack" in shown.stdout, shown.stdout + shown.stderr
    assert instance.command("qdel", str(r), str(a), str(b)).returncode == 0
