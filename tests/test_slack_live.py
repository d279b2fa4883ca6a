"""Slack-based backfilling (seed 001) in the live scheduler daemon: real daemons, backfill: slack
set in cobaltlite.yaml, jobs submitted with qsub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live import Instance
from test_live_jobs import script
from test_start_estimates import assert_starts_follow, estimates_of


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
    assert shown.returncode == 0 and "backfilling: slack" in shown.stdout, (
        shown.stdout + shown.stderr)
    # The settings in force, as cobaltlite.yaml gave them and Table 3 fills them in.
    assert "lookahead 5, goal utilization" in shown.stdout and "slack_min 1.1" in shown.stdout
    assert instance.command("qdel", str(r), str(a), str(b)).returncode == 0


@pytest.mark.slow
def test_live_start_estimates_under_slack_equal_the_starts(instance: Instance) -> None:
    """The queue manager's fork starts from the scheduler's slack settings and memory
    (tests/test_slack_estimates.py): jobs ended at their wall time start when estimated, to
    within the daemons' polling."""
    sleeper = script(instance.jobs_dir, "outlive.sh", "sleep 60")
    first = instance.qsub("-n", "10", "-t", "00:00:06", str(sleeper))
    instance.wait_for(first, {"running"})
    queued = [instance.qsub("-n", str(n), "-t", "00:00:05", str(sleeper)) for n in (8, 4, 2)]
    assert_starts_follow(instance, queued, estimates_of(instance, queued), (1, 2, 1))
