"""The metrics monitor: its history in the database across `cobaltlite down`/`up`, its
Prometheus endpoint scraped over HTTP and parsed by prometheus_client's own parser, cqmetrics'
output, and refused configurations."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance, until
from prometheus_client.parser import text_string_to_metric_families

from cobaltlite.commands import cqmetrics
from cobaltlite.metrics_monitor.catalog import METRICS, prometheus_name


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    port = _free_port()
    running = Instance(machine="flat:4",
                       settings={"prometheus_address": f"127.0.0.1:{port}"}).start_retrying()
    running.port = port  # type: ignore[attr-defined]
    yield running
    running.stop()


def _cqmetrics(instance: Instance, *args: str) -> subprocess.CompletedProcess[str]:
    return instance.command("cqmetrics", *args)


def _scrape(instance: Instance, path: str = "/metrics") -> tuple[int, str, str]:
    url = f"http://127.0.0.1:{instance.port}{path}"  # type: ignore[attr-defined]
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.headers["Content-Type"], answer.read().decode()


def test_prometheus_scrape_parses_and_shows_the_running_job(instance: Instance) -> None:
    sleeper = instance.jobs_dir / "sleep.sh"
    sleeper.write_text("#!/bin/sh\nsleep 30\n")
    sleeper.chmod(0o755)
    running = instance.qsub("-n", "3", "-t", "5", str(sleeper))
    instance.wait_for(running, {"running"})

    def gauges() -> dict[str, float] | None:
        status, kind, text = _scrape(instance)
        assert status == 200 and kind.startswith("text/plain; version=")
        found = {family.name: family.samples[0].value
                 for family in text_string_to_metric_families(text)}
        return found if found.get("cobaltlite_running_jobs") == 1 else None

    found = until(gauges, 15, "a sample with the job running")
    assert set(found) == {*map(prometheus_name, METRICS), "cobaltlite_sample_time_seconds"}
    assert found["cobaltlite_utilization"] == 0.75  # 3 of 4 nodes
    assert found["cobaltlite_blocks_held"] == 1
    assert found["cobaltlite_started_jobs"] >= 1
    assert abs(found["cobaltlite_sample_time_seconds"] - time.time()) < 10
    assert instance.command("qdel", str(running)).returncode == 0


def test_prometheus_endpoint_is_read_only(instance: Instance) -> None:
    url = f"http://127.0.0.1:{instance.port}/metrics"  # type: ignore[attr-defined]
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=10)
    assert posted.value.code == 501
    with pytest.raises(urllib.error.HTTPError) as elsewhere:
        _scrape(instance, "/admin")
    assert elsewhere.value.code == 404
    # A client that connects and says nothing does not stop the others (nor sampling).
    with socket.create_connection(("127.0.0.1", instance.port)):  # type: ignore[attr-defined]
        assert _scrape(instance)[0] == 200


def test_cqmetrics_prints_current_values_and_history(instance: Instance) -> None:
    until(lambda: len(json.loads(_cqmetrics(instance, "--json").stdout)["history"]) >= 2, 15,
          "two samples in the history")
    shown = _cqmetrics(instance)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("Metrics sampled at ")
    assert lines[1].split() == ["Metric", "Value", "Meaning"]
    assert [line.split()[0] for line in lines[3:3 + len(METRICS)]] == list(METRICS)
    assert any(line.startswith("History: ") for line in lines)
    data = json.loads(_cqmetrics(instance, "--json", "--since", "0").stdout)
    assert data["history"] == [] and set(data["current"]["values"]) == set(METRICS)
    bad = _cqmetrics(instance, "--since", "soon")
    assert (bad.returncode, bad.stderr) == (
        1, "cqmetrics: invalid time specification: illegal value 'soon' for minutes\n")
    helped = _cqmetrics(instance, "--help")
    assert helped.returncode == 0 and "--since TIME" in helped.stdout


def test_history_survives_down_and_up(instance: Instance) -> None:
    before = json.loads(_cqmetrics(instance, "--json", "--limit", "1000").stdout)["history"]
    assert before
    assert instance.cobaltlite("down").returncode == 0
    ran = instance.cobaltlite("up")
    assert ran.returncode == 0, ran.stderr
    after = until(lambda: json.loads(_cqmetrics(instance, "--json", "--limit", "1000").stdout),
                  15, "cqmetrics after the restart")["history"]
    times = {sample["time"] for sample in after}
    assert {sample["time"] for sample in before} <= times
    restarted = [s for s in after if s["time"] > before[-1]["time"]]
    assert restarted or after[-1] == before[-1]


def test_cqmetrics_golden_output() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    values = {name: 0.0 for name in METRICS}
    values.update(utilization=0.75, utilization_1h=0.5, queued_jobs=2, running_jobs=1,
                  queue_depth=12.5, wait_mean=30, loss_of_capacity=0.25)
    current = {"time": 1_700_000_000.0, "values": values}
    lines = cqmetrics.report(current, [current, {**current, "time": 1_700_000_030.0}])
    table = "\n".join(lines)
    expected = (Path(__file__).parent / "golden" / "cqmetrics.txt").read_text()
    assert table + "\n" == expected
    # Right after `cobaltlite up` the history holds one sample: said as one.
    assert "History: 1 sample from 2023-11-14 22:13:20" in cqmetrics.report(current, [current])


@pytest.mark.parametrize(("line", "message"), [
    ("metrics_retention_days: -1", "option metrics_retention_days: -1.0 must be a number of "
                                   "days greater than zero"),
    ("metrics_retention_days: soon", "option metrics_retention_days: 'soon' is not a float"),
    ("prometheus_address: nohost", "option prometheus_address: 'nohost' has no host and port"),
    ("prometheus_address: '127.0.0.1:99999'", "has port '99999': write a number from 1 to"),
    ("prometheus_address: 'example.org:9464'", "has host 'example.org', which is neither an IP"),
])
def test_bad_monitor_settings_stop_the_start_with_a_message(line: str, message: str) -> None:
    state = Path(tempfile.mkdtemp(prefix="cltest-metrics-", dir="/tmp"))
    try:
        (state / "cobaltlite.yaml").write_text(f"machine: flat:2\n{line}\n")
        ran = subprocess.run([sys.executable, "-m", "cobaltlite.cli", "--state-dir", str(state),
                              "up"], capture_output=True, text=True, timeout=60)
        assert ran.returncode != 0
        assert f"{state / 'cobaltlite.yaml'}: " in ran.stderr and message in ran.stderr, \
            ran.stderr
        assert not list((state / "run").glob("*.pid")) if (state / "run").exists() else True
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_the_grafana_dashboard_is_json_and_queries_only_published_metrics() -> None:
    dashboard = json.loads((Path(__file__).parent.parent / "etc" / "grafana-dashboard.json")
                           .read_text())
    queried = {target["expr"] for panel in dashboard["panels"] for target in panel["targets"]}
    assert queried == set(map(prometheus_name, METRICS))


def test_plain_users_read_metrics_and_start_estimates(instance: Instance) -> None:
    """cqmetrics and showstart need no rights: another account reads them through the user
    sockets (mode 0666), and the monitor's socket offers nothing that changes a thing."""
    from unix_users import ALICE, BOB, ensure_test_users

    accounts = ensure_test_users()
    shown = instance.command("cqmetrics", "--json", account=ALICE, accounts=accounts)
    assert shown.returncode == 0, shown.stderr
    assert set(json.loads(shown.stdout)["current"]["values"]) == set(METRICS)
    blocker = instance.jobs_dir / "block.sh"
    blocker.write_text("#!/bin/sh\nsleep 30\n")
    blocker.chmod(0o755)
    running = instance.qsub("-n", "4", "-t", "5", str(blocker), account=ALICE,
                            accounts=accounts)
    instance.wait_for(running, {"running"})
    waiting = instance.qsub("-n", "4", "-t", "5", str(blocker), account=ALICE,
                            accounts=accounts)
    start = until(lambda: (lambda ran: ran if ran.returncode == 0 else None)(
        instance.command("showstart", str(waiting), account=BOB, accounts=accounts)),
        15, "bob's showstart of alice's queued job")
    assert start.stdout.splitlines()[0] == f"job {waiting} requires 4 nodes for 00:05:00"
    for jobid in (waiting, running):
        assert instance.command("qdel", str(jobid)).returncode == 0


def test_a_prometheus_port_in_use_stops_the_monitor_with_the_reason() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        instance = Instance(machine="flat:2", settings={"prometheus_address":
                                                        f"127.0.0.1:{port}"})
        with pytest.raises(RuntimeError) as failed:
            instance.start()
    assert f"prometheus_address '127.0.0.1:{port}': cannot listen there: Address already in " \
           "use" in str(failed.value)
