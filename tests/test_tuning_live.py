"""Adaptive tuning in the real daemons: the monitor's history in the database, the scheduler
switching W on a burst of submissions, schedctl showing it, an admin pinning and releasing W."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from live import Instance
from test_live_jobs import script
from unix_users import ALICE, Accounts, ensure_test_users

from cobaltlite.config import load_config
from cobaltlite.rpc.peers import Peer

# W = 3 while more than 2 jobs wait, else 1; checked every second.
TUNING = {"check_interval": 1, "rules": [
    {"name": "w-by-queue", "tunable": "w", "initial": 1, "delta": 2, "metric": "queued_jobs",
     "when": "above", "threshold": 2}]}


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance(machine="flat:4", settings={"tuning": TUNING}).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


def status(instance: Instance) -> str:
    ran = instance.command("schedctl", "--status")
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def wait_for_text(instance: Instance, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        shown = status(instance)
        if text in shown:
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"schedctl --status never showed {text!r}; last:\n{shown}")
        time.sleep(0.5)


def test_a_burst_switches_w_and_schedctl_says_why(instance: Instance) -> None:
    assert "W = 1;" in status(instance) or "W = 1 " in status(instance)
    sleeper = script(instance.jobs_dir, "burst.sh", "sleep 30")
    holder = instance.qsub("-n", "4", "-t", "5", str(sleeper))
    instance.wait_for(holder, {"running"})
    burst = [instance.qsub("-n", "1", "-t", "5", str(sleeper)) for _ in range(4)]
    shown = wait_for_text(instance, "W = 3")
    assert "last change: W 1 -> 3" in shown and "w-by-queue (queued_jobs=" in shown, shown
    for jobid in [*burst, holder]:
        instance.command("qdel", str(jobid))
    shown = wait_for_text(instance, "W 3 -> 1")   # the queue drained: back to W = 1
    assert "w-by-queue (queued_jobs=" in shown


def test_an_admin_pins_and_releases_w_checked_on_the_server(
        instance: Instance, accounts: Accounts) -> None:
    pinned = instance.command("schedctl", "--set", "w=5")
    assert pinned.returncode == 0, pinned.stderr
    assert "W = 5 (pinned)" in pinned.stdout and "pinned by an admin" in pinned.stdout
    assert "W = 5 (pinned)" in status(instance)

    refused = instance.command("schedctl", "--set", "w=2", account=ALICE, accounts=accounts)
    assert refused.returncode != 0 and "admin" in refused.stderr, refused
    too_big = instance.command("schedctl", "--set", "w=12")
    assert too_big.returncode != 0 and "outside W's bounds [1, 6]" in too_big.stderr, too_big
    not_live = instance.command("schedctl", "--set", "bf=0.5")
    assert not_live.returncode != 0 and "W only" in not_live.stderr, not_live
    assert "W = 5 (pinned)" in status(instance)  # the daemon kept running and kept the pin

    released = instance.command("schedctl", "--unset", "w")
    assert released.returncode == 0, released.stderr
    assert "(pinned)" not in released.stdout and "pin released" in released.stdout


def test_the_monitor_history_survives_a_restart(instance: Instance) -> None:
    monitor = Peer(load_config(instance.state_dir), "metrics-monitor")
    before = monitor.sample_now()
    assert set(before["monitored"]) >= {"queue_depth", "utilization_1h", "utilization_24h"}
    down = instance.cobaltlite("down")
    assert down.returncode == 0, down.stderr
    up = instance.cobaltlite("up")
    assert up.returncode == 0, up.stderr + up.stdout
    monitor = Peer(load_config(instance.state_dir), "metrics-monitor")
    times = [sample["time"] for sample in monitor.history(10_000)]
    assert before["time"] in times, "the sample taken before the restart is gone"


def test_a_live_bf_rule_is_refused_at_start() -> None:
    bad = {"rules": ["bf-queue-depth"]}
    with pytest.raises(RuntimeError, match="live rules may set W only"):
        Instance(machine="flat:4", settings={"tuning": bad}).start()
