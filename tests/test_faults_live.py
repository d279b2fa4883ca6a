"""Failures in the live system, with real daemons on a small Blue Gene/P table (bgp-2rack).

bgp-2rack has one 2048-node block over four midplanes, two 1024-node blocks and four 512-node
blocks (ANL-R00-M0-512 ... ANL-R01-M1-512). With nothing running, every 512-node block has
BLK = 2 (its two parents), so a 512-node job lands on the first by name, ANL-R00-M0-512.

`partadm --fail` takes a component out of service: a job on a block over it is killed and
resubmitted (or ended, `failed_jobs: end`), its owner reads why in `qstat -f -l` and the
.cobaltlog, and the scheduler places nothing over it until `partadm --unfail`. The failure
forecast (P_f per component) shows in partlist and steers the allocation cost (seed 003 §IV-B).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from live import Instance, fresh_postgres_database, until
from unix_users import ADMINS, ALICE, BOB, as_account, ensure_test_users

from cobaltlite.rpc.client import connect

FIRST_512 = "ANL-R00-M0-512"
FAILURE_END = "component failure"



def partitions(instance: Instance) -> dict[str, dict[str, str]]:
    """partlist's table as {block: {column: value}}."""
    ran = instance.command("partlist")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    header = lines[0].split()
    # Columns are left-justified at the header's positions; a state may hold blanks.
    starts = [lines[0].index(name) for name in header]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    rows = [{name: line[a:b].strip() for name, (a, b) in zip(header, bounds, strict=True)}
            for line in lines[2:]]
    return {row["Name"]: row for row in rows}


def qstat_long(instance: Instance, jobid: int) -> dict[str, str]:
    ran = instance.command("qstat", "-f", "-l", str(jobid))
    assert ran.returncode == 0, ran.stderr
    fields = {}
    for line in ran.stdout.splitlines()[1:]:
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


def start_instance(**settings: Any) -> Instance:
    return Instance(machine="bgp-2rack", settings=settings).start_retrying()


@pytest.fixture
def instance() -> Iterator[Instance]:
    running = start_instance()
    yield running
    running.stop()


def sleeper(instance: Instance, nodes: int = 512) -> int:
    return instance.qsub("-n", str(nodes), "-t", "10", "/bin/sleep", "300")


@pytest.fixture
def postgres_instance() -> Iterator[Instance]:
    """An instance whose queue manager keeps its jobs in a fresh PostgreSQL database: the
    resubmission writes the queue manager's store as no other change does."""
    with fresh_postgres_database() as url:
        running = Instance(machine="bgp-2rack", database=url).start_retrying()
        try:
            yield running
        finally:
            running.stop()


def test_fail_kills_the_job_resubmits_it_and_skips_the_block_until_unfail(
        postgres_instance: Instance) -> None:
    instance = postgres_instance
    jobid = sleeper(instance)
    job = instance.wait_for(jobid, {"running"})
    assert job["location"] == FIRST_512
    submitted = job["submittime"]

    ran = instance.command("partadm", "--fail", "R00-M0")
    assert ran.returncode == 0, ran.stderr
    assert f"killed job(s) {jobid}" in ran.stdout

    # Resubmitted with its original submission time, and started again away from the failure:
    # the sibling ANL-R00-M1-512 now blocks nothing (its parents are failed), so it wins.
    again = until(lambda: (j := instance.job(jobid))["state"] == "running"
                  and j["location"] != FIRST_512 and j, 30, "the job to run again")
    assert again["location"] == "ANL-R00-M1-512"
    assert again["submittime"] == submitted
    assert qstat_long(instance, jobid)["EndReason"] == FAILURE_END
    log = (instance.jobs_dir / f"{jobid}.cobaltlog").read_text()
    assert "killed: component R00-M0 failed (partadm --fail by root)" in log
    assert log.count("started on") == 2
    accounting = (instance.state_dir / "log" / "accounting.log").read_text()
    killed = next(line for line in accounting.splitlines() if f";A;{jobid};" in line)
    assert {"component=R00-M0", f"lost_exec_host={FIRST_512}", "reason=failure"} <= set(
        killed.split(";")[3].split())
    assert f";R;{jobid};" in accounting

    shown = partitions(instance)
    for block in (FIRST_512, "ANL-R00-1024", "ANL-R00-R01-2048"):
        assert shown[block]["State"] == "failed"

    # A job that only fits over the failed midplane waits, pass after pass, until --unfail.
    assert instance.command("qdel", str(jobid)).returncode == 0
    instance.wait_for(jobid, {"done"})
    whole = sleeper(instance, 2048)
    time.sleep(4)  # four scheduling passes (scheduler_interval: 1)
    assert instance.job(whole)["state"] == "queued"
    # Skipped by the scheduler itself (its replica knows the failure), not refused at launch.
    qm_log = (instance.state_dir / "log" / "queue-manager.log").read_text().splitlines()
    assert not [line for line in map(json.loads, qm_log)
                if line.get("event") == "job start refused" and line.get("jobid") == whole]
    ran = instance.command("partadm", "--unfail", "R00-M0")
    assert ran.returncode == 0, ran.stderr
    assert "failed now: none" in ran.stdout
    assert instance.wait_for(whole, {"running"})["location"] == "ANL-R00-R01-2048"


def test_failed_job_ends_when_so_configured_and_failures_survive_a_restart() -> None:
    instance = start_instance(failed_jobs="end")
    try:
        jobid = sleeper(instance)
        instance.wait_for(jobid, {"running"})
        ran = instance.command("partadm", "--fail", "R00-M0-N03")
        assert ran.returncode == 0, ran.stderr
        job = instance.wait_for(jobid, {"done"})
        assert job["end_reason"] == FAILURE_END
        assert qstat_long(instance, jobid)["EndReason"] == FAILURE_END
        assert "killed: component R00-M0-N03 failed" in (
            instance.jobs_dir / f"{jobid}.cobaltlog").read_text()
        accounting = (instance.state_dir / "log" / "accounting.log").read_text()
        assert "component=R00-M0-N03" in accounting and "reason=failure" in accounting
        assert f";R;{jobid};" not in accounting and f";E;{jobid};" in accounting

        assert instance.cobaltlite("down").returncode == 0
        assert instance.cobaltlite("up").returncode == 0
        assert partitions(instance)[FIRST_512]["State"] == "failed"
        status = instance.command("schedctl", "--status")
        assert "failed components: R00-M0-N03" in status.stdout, status.stdout
        # Placed around the failure after the restart too.
        second = sleeper(instance)
        assert instance.wait_for(second, {"running"})["location"] != FIRST_512
    finally:
        instance.stop()


def test_unknown_component_is_refused_and_nothing_changes(instance: Instance) -> None:
    jobid = sleeper(instance)
    instance.wait_for(jobid, {"running"})
    ran = instance.command("partadm", "--fail", "R00-M0", "R09-M7")
    assert ran.returncode == 1
    assert "R09-M7" in ran.stderr and "nothing changed" in ran.stderr
    assert all(row["State"] != "failed" for row in partitions(instance).values())
    assert instance.job(jobid)["state"] == "running"
    ran = instance.command("partadm", "--unfail", "R00-M1")
    assert ran.returncode == 1 and "'R00-M1' is not failed" in ran.stderr
    ran = instance.command("partadm", "--fail")  # Cobalt's message (reference §3.5)
    assert ran.returncode == 1 and "At least one partition must be supplied" in ran.stderr


def test_only_admins_may_fail_components() -> None:
    accounts = ensure_test_users()
    instance = start_instance(admin_group=ADMINS)
    try:
        ran = instance.command("partadm", "--fail", "R00-M0", account=ALICE, accounts=accounts)
        assert ran.returncode == 1
        assert "partadm --fail needs root or membership of the admin group" in ran.stderr
        assert all(row["State"] != "failed" for row in partitions(instance).values())
        # Nor may she set the failure forecast, as a monitor would.
        monitor = ("import sys; from cobaltlite.rpc.client import connect\n"
                   f"with connect('PYRO:system-control@./u:{instance.state_dir}/sockets/"
                   "system-user.sock') as system:\n"
                   "    system.set_forecast([['R00-M0', 0.5]])\n")
        ran = subprocess.run([accounts.python, "-c", monitor], env=accounts.env, text=True,
                             capture_output=True, timeout=60, **as_account(ALICE))
        assert ran.returncode != 0
        assert "setting the failure forecast needs root or membership" in ran.stderr
        # partlist is open to everyone; bob is in the admin group.
        assert instance.command("partlist", account=ALICE, accounts=accounts).returncode == 0
        ran = instance.command("partadm", "--fail", "R01-M1", account=BOB, accounts=accounts)
        assert ran.returncode == 0, ran.stderr
        assert partitions(instance)["ANL-R01-M1-512"]["State"] == "failed"
    finally:
        instance.stop()


def test_forecast_shows_in_partlist_steers_allocation_and_survives_a_bad_file() -> None:
    # A relative path is read from the state directory; a missing file is no forecast yet.
    instance = start_instance(failure_forecast="forecast.txt")
    try:
        forecast = instance.state_dir / "forecast.txt"
        forecast.write_text("# component  P_f\nR00-M0  0.9\n")
        until(lambda: "P_f" in instance.command("partlist").stdout, 10, "the forecast")
        shown = partitions(instance)
        assert shown[FIRST_512]["P_f"] == "0.900"
        assert shown["ANL-R00-1024"]["P_f"] == "0.900"
        assert shown["ANL-R01-M0-512"]["P_f"] == "-"
        # Without the forecast the job would take ANL-R00-M0-512 (first by name at equal cost).
        # With it, that block costs α·0.2 + β·0.9 = 1.1; its sibling, whose parents are the
        # unreliable ones, costs 0.2 and the R01 blocks 2.0 (seed 003 Fig. 1, G over E).
        jobid = sleeper(instance)
        assert instance.wait_for(jobid, {"running"})["location"] == "ANL-R00-M1-512"

        forecast.write_text("R00-M0  0.9\nR01-M1  1.5\n")
        status = until(lambda: "refused" in (out := instance.command(
            "schedctl", "--status").stdout) and out, 10, "the bad forecast to be refused")
        assert f"{forecast}:2: P_f 1.5 must be a number from 0 to 1" in status
        assert partitions(instance)[FIRST_512]["P_f"] == "0.900"  # the previous one holds

        # A monitor replaces the forecast over RPC (admin only, checked by the kernel's uid).
        with connect(f"PYRO:system-control@./u:{instance.state_dir}/sockets/"
                     "system-user.sock") as system:
            assert system.set_forecast([["R01-M1", 0.25]]) == 1
            with pytest.raises(ValueError, match=r"forecast entry 1: .*no component 'R99'"):
                system.set_forecast([["R99", 0.5]])
        shown = partitions(instance)
        assert shown["ANL-R01-M1-512"]["P_f"] == "0.250"
        assert shown[FIRST_512]["P_f"] == "-"
    finally:
        instance.stop()


# ---- the forecast file, read without daemons ---------------------------------------------------


def _machine() -> Any:
    from cobaltlite.machine.catalog import load_description
    from cobaltlite.machine.runtime import build_machine

    return build_machine(load_description("bgp-2rack"))


@pytest.mark.parametrize(("line", "error"), [
    ("R00-M0", "expected COMPONENT P_F [FROM UNTIL], found 1 fields"),
    ("R09-M0 0.5", "no component 'R09-M0'"),
    ("R00-M0 high", "P_f 'high' is not a number"),
    ("R00-M0 -0.1", "P_f -0.1 must be a number from 0 to 1"),
    ("R00-M0 0.5 2026-11-23T18:00:00Z", "found 3 fields"),
    ("R00-M0 0.5 tomorrow 2026-11-23T18:00:00Z", "'tomorrow' is neither epoch seconds nor ISO"),
    ("R00-M0 0.5 2000 1000", "UNTIL 1000 is not after FROM 2000"),
])
def test_a_malformed_forecast_names_file_line_and_value(tmp_path: Any, line: str,
                                                        error: str) -> None:
    from cobaltlite.system.forecast import ForecastError, parse_forecast_file

    path = tmp_path / "forecast.txt"
    path.write_text(f"# fine so far\nR01-M1 0.2\n{line}\n")
    with pytest.raises(ForecastError) as raised:
        parse_forecast_file(path, _machine())
    assert str(raised.value).startswith(f"{path}:3: ")
    assert error in str(raised.value)


def test_forecast_windows_and_independent_combination(tmp_path: Any) -> None:
    from cobaltlite.system.forecast import Forecast, parse_forecast_file

    path = tmp_path / "forecast.txt"
    path.write_text("R00-M0 0.5\nR00-M1-N04 0.5 1000 2000\n")
    machine = _machine()
    forecast = Forecast(machine, parse_forecast_file(path, machine))
    assert forecast.chance("ANL-R00-M0-512", 0, 10) == 0.5
    assert forecast.chance("ANL-R00-M1-512", 0, 999) == 0.0  # before the window
    assert forecast.chance("ANL-R00-M1-512", 1500, 3000) == 0.5
    assert forecast.chance("ANL-R00-1024", 1500, 1600) == 0.75  # 1 - 0.5 * 0.5
    assert forecast.chance("ANL-R01-M0-512", 0, 10**9) == 0.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["R00-M0", "R00-M1", "R01-M0-N07", "ANL-R01-1024"]),
                          st.floats(0, 1)), max_size=6),
       st.floats(0, 1e6), st.floats(0, 1e6))
def test_every_block_chance_is_a_probability_and_untouched_blocks_have_none(
        entries: list[tuple[str, float]], start: float, length: float) -> None:
    from cobaltlite.system.forecast import Forecast, entries_from_wire

    machine = _machine()
    forecast = Forecast(machine, entries_from_wire(machine, [list(e) for e in entries]))
    touched = {place for name, _ in entries for place in machine.places_over(name)}
    for block in machine.names:
        chance = forecast.chance(block, start, start + length)
        assert 0.0 <= chance <= 1.0
        if block not in touched:
            assert chance == 0.0


# ---- the scheduler's replica follows the system ------------------------------------------------

PARTS = ["R00-M0", "R00-M1", "R01-M0-N00", "R01-M1", "ANL-R01-1024"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("fail"), st.sampled_from(PARTS)),
    st.tuples(st.just("unfail"), st.sampled_from(PARTS)),
    st.tuples(st.just("forecast"), st.lists(st.tuples(st.sampled_from(PARTS), st.floats(0, 1)),
                                            max_size=3))), max_size=8))
def test_replica_knows_every_failure_and_forecast_and_places_around_failures(
        steps: list[tuple[str, Any]]) -> None:
    """Whatever partadm and a monitor did, after the replica's next look at the system (one
    machine_state call, as at the start of a pass) it has the system's failed components and
    P_f, and never offers a place over a failed component."""
    import tempfile

    from cobaltlite.clock import WallClock
    from cobaltlite.machine.catalog import load_description
    from cobaltlite.scheduler.remote import RemoteSite
    from cobaltlite.system.api import SystemAPI
    from cobaltlite.system.service import SystemService

    with tempfile.TemporaryDirectory() as state:
        service = SystemService(load_description("bgp-2rack"), Path(state), WallClock(),
                                lambda *_: True)
        site = RemoteSite(None, SystemAPI(service), WallClock())
        for action, value in steps:
            if action == "fail":
                service.fail([value], "test")
            elif action == "unfail" and value in service.machine.failed_components():
                service.unfail([value], "test")
            elif action == "forecast":
                service.set_forecast([list(entry) for entry in value], "test")
            replica = site.machine()
            assert replica.failed_components() == service.machine.failed_components()
            failed_places = {place for name in replica.failed_components()
                             for place in replica.places_over(name)}
            for size in (512, 1024, 2048):
                assert replica.find_location(size, 600, 0.0) not in failed_places
            for block in replica.names:
                assert replica.failures.chance(block, 0.0, 600.0) == \
                    service.machine.failures.chance(block, 0.0, 600.0)
