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
    assert "BF = 1, W = 1;" in status(instance)
    sleeper = script(instance.jobs_dir, "burst.sh", "sleep 30")
    holder = instance.qsub("-n", "4", "-t", "5", str(sleeper))
    instance.wait_for(holder, {"running"})
    burst = [instance.qsub("-n", "1", "-t", "5", str(sleeper)) for _ in range(4)]
    shown = wait_for_text(instance, "W = 3;")
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
    unknown = instance.command("schedctl", "--set", "alpha=1")
    assert unknown.returncode != 0 and "the tunables are bf and w" in unknown.stderr, unknown
    assert "W = 5 (pinned)" in status(instance)  # the daemon kept running and kept the pin
    bf = instance.command("schedctl", "--set", "bf=0.25")
    assert bf.returncode == 0 and "BF = 0.25 (pinned)" in bf.stdout, bf
    assert instance.command("schedctl", "--unset", "bf").returncode == 0

    released = instance.command("schedctl", "--unset", "w")
    assert released.returncode == 0, released.stderr
    assert "(pinned)" not in released.stdout and "pin released" in released.stdout


def test_an_admin_loads_a_new_scheme_and_a_bad_one_leaves_the_old_active(
        instance: Instance, accounts: Accounts) -> None:
    bad_window = instance.jobs_dir / "bad-window.yaml"
    bad_window.write_text("check_interval: 1\nrules:\n  - tunable: w\n    initial: 1\n"
                          "    delta: 11\n    metric: queued_jobs\n    when: above\n"
                          "    threshold: 2\n")
    bad_metric = instance.jobs_dir / "bad-metric.yaml"
    bad_metric.write_text("rules:\n  - example: bf-queue-depth\n    metric: coffee\n")
    good = instance.jobs_dir / "bf.yaml"
    good.write_text("tuning:\n  check_interval: 1\n  rules:\n    - example: bf-queue-depth\n"
                    "      threshold: 1000\n")
    for path, line, message in ((bad_window, 5, "initial + delta = 12 leaves W's bounds [1, 6]"),
                                (bad_metric, 3, "unknown metric 'coffee'")):
        refused = instance.command("schedctl", "--tuning", str(path))
        assert refused.returncode != 0, refused.stdout
        assert f"{path}:{line}: " in refused.stderr and message in refused.stderr, refused.stderr
        assert "previous tuning scheme stays active" in refused.stderr
    not_admin = instance.command("schedctl", "--tuning", str(good), account=ALICE,
                                 accounts=accounts)
    assert not_admin.returncode != 0 and "admin" in not_admin.stderr, not_admin
    missing = instance.command("schedctl", "--tuning", str(instance.jobs_dir / "none.yaml"))
    assert missing.returncode != 0 and "cannot read the tuning scheme" in missing.stderr
    assert "tuning: w-by-queue" in status(instance)  # the daemon kept serving the old scheme

    loaded = instance.command("schedctl", "--tuning", str(good))
    assert loaded.returncode == 0, loaded.stderr
    assert "tuning: bf-queue-depth (every 1 s): BF = 0.5 while queue_depth above 1000" in \
        loaded.stdout, loaded.stdout
    assert "tuning: bf-queue-depth" in status(instance)


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


def test_a_burst_pushes_queue_depth_over_th_and_bf_changes_the_start_order() -> None:
    # BF = 0.5 while the queue depth exceeds 0.05 min (3 s of waiting in all), checked every
    # second. A 4-node job holds the machine for 12 s; a long job (60 min asked) then a short
    # one (2 min asked), both needing the whole machine, queue behind it. Their waits push the
    # queue depth over Th, BF drops to 0.5, and when the machine frees the short job scores
    # 0.5·S_w + 0.5·100 ≈ 100 against the long one's 0.5·100 + 0 = 50: it starts first,
    # although FCFS (BF = 1) would start the long one, which came first.
    tuning = {"check_interval": 1, "rules": [{"example": "bf-queue-depth", "threshold": 0.05}]}
    instance = Instance(machine="flat:4", settings={"tuning": tuning}).start()
    try:
        hold = script(instance.jobs_dir, "hold.sh", "sleep 12")
        quick = script(instance.jobs_dir, "quick.sh", "sleep 4")
        holder = instance.qsub("-n", "4", "-t", "5", str(hold))
        instance.wait_for(holder, {"running"})
        long = instance.qsub("-n", "4", "-t", "60", str(quick))
        short = instance.qsub("-n", "4", "-t", "2", str(quick))
        shown = wait_for_text(instance, "BF = 0.5, W")
        assert "last change: BF 1 -> 0.5" in shown and "bf-queue-depth (queue_depth=" in shown
        instance.wait_for(short, {"running"}, timeout=40)
        assert instance.job(long)["state"] == "queued", "the long job started first"
        instance.wait_for(long, {"running"}, timeout=40)
    finally:
        instance.stop()
