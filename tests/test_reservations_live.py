"""setres, showres, releaseres and userres against real daemons (SQLite), as root (an admin)
and as two real Unix users; and the live scheduler honouring a reservation: its jobs run
inside it and nowhere else, others never overlap it, a cyclic one rolls."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator

import pytest
from live import Instance, until
from unix_users import ALICE, BOB, Accounts, ensure_test_users

from cobaltlite.commands.showres import TIME_FORMAT

FUTURE = "2030_06_01-12:00"
FUTURE_SHOWN = time.strftime(TIME_FORMAT, time.strptime(FUTURE, "%Y_%m_%d-%H:%M"))


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture(scope="module")
def instance(accounts: Accounts) -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    yield running
    running.stop()


def run(instance: Instance, name: str, *args: str, account: str | None = None,
        accounts: Accounts | None = None) -> subprocess.CompletedProcess[str]:
    return instance.command(name, *args, account=account, accounts=accounts)


def showres(instance: Instance, *args: str) -> list[str]:
    ran = run(instance, "showres", *args)
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    return ran.stdout.splitlines()


def cells(line: str) -> list[str]:
    """A showres line's cells (columns are separated by two blanks or more)."""
    return re.split(r"  +", line.strip())


def accounting(instance: Instance) -> list[tuple[str, str]]:
    """(record type, reservation name) of every reservation record so far."""
    found = []
    for line in (instance.state_dir / "log" / "accounting.log").read_text().splitlines():
        kind, body = line.split(";")[1], line.split(";", 3)[3]
        name = re.search(r"(?:^| )name=(\S+)", body)
        if kind in {"B", "F", "K", "k", "Y", "U", "YA"} and name:
            found.append((kind, name.group(1)))
    return found


def test_commands_have_help(instance: Instance) -> None:
    for name in ("setres", "releaseres", "showres", "userres"):
        ran = run(instance, name, "--help")
        assert ran.returncode == 0 and ran.stdout.startswith(f"usage: {name}"), ran.stderr
        assert "Exit status" in ran.stdout


def test_admin_makes_lists_and_releases_a_reservation(instance: Instance,
                                                      accounts: Accounts) -> None:
    made = run(instance, "setres", "-n", "maint", "-s", FUTURE, "-d", "02:00:00", "-p", "0:1",
               "-A", "ops")
    assert (made.returncode, made.stdout, made.stderr) == (
        0, "Reservation 'maint' made: queue R.maint, places 0:1\n", "")
    lines = showres(instance)
    assert cells(lines[0]) == ["Reservation", "Queue", "User", "Start", "Duration",
                               "Passthrough", "Partitions", "Remaining", "T-Minus"]
    assert set(lines[1]) == {"="} and len(lines) == 3 and len(lines[1]) == len(lines[2])
    row = cells(lines[2])
    assert row[:8] == ["maint", "R.maint", "*", FUTURE_SHOWN, "02:00", "Blocked", "0:1", "-"]
    assert re.fullmatch(r"\d+:\d\d", row[8]), row  # hours:minutes until it begins
    long = showres(instance, "-l", "-x")
    assert cells(long[0]) == ["Reservation", "Queue", "User", "Start", "Duration", "End Time",
                              "Cycle Time", "Passthrough", "Partitions", "Remaining", "T-Minus",
                              "Project", "ResID", "CycleID"]
    row = cells(long[2])
    assert row[5:7] == [time.strftime(TIME_FORMAT, time.localtime(
        time.mktime(time.strptime(FUTURE, "%Y_%m_%d-%H:%M")) + 7200)), "-"]
    assert row[11] == "ops" and row[12].isdigit() and row[13] == "-"
    # R.maint runs only inside the reservation: nodelist does not offer it on every node.
    assert {cells(line)[1] for line in run(instance, "nodelist").stdout.splitlines()[2:]} == {
        "default"}

    # A plain user may look, not change.
    for name, args in (("setres", ["-n", "mine", "-s", FUTURE, "-d", "10", "2"]),
                       ("releaseres", ["maint"])):
        refused = run(instance, name, *args, account=ALICE, accounts=accounts)
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == f"{name}: {name} needs root or membership of the admin group\n"
    looked = run(instance, "showres", account=ALICE, accounts=accounts)
    assert looked.returncode == 0 and looked.stdout.splitlines()[2] == showres(instance)[2]

    released = run(instance, "releaseres", "maint", "nosuch")
    assert (released.returncode, released.stdout) == (
        0, "Reservation subset matched\nReleased reservation 'maint' for partitions: 0:1\n")
    assert showres(instance) == []
    # Released, R.maint is dead: its jobs run nowhere, nodelist names no node for it.
    assert {cells(line)[1] for line in run(instance, "nodelist").stdout.splitlines()[2:]} == {
        "default"}
    again = run(instance, "releaseres", "maint")
    assert (again.returncode, again.stderr) == (1, "releaseres: No Reservations matched\n")
    assert [r for r in accounting(instance) if r[1] == "maint"] == [("Y", "maint"),
                                                                     ("k", "maint")]


@pytest.mark.parametrize(("args", "says"), [
    (["-n", "b", "-s", FUTURE, "-d", "30", "-p", "1"],
     "reservation 'b' overlaps reservation(s) keep on the same places at the same time"),
    (["-n", "b", "-s", "2001_01_01-00:00", "-d", "30", "-p", "2"], "already in the past"),
    (["-n", "b", "-s", FUTURE, "-d", "30", "-p", "7"], "unknown node(s) on flat:4: 7"),
    (["-n", "b", "-s", FUTURE, "-d", "30", "-p", "2", "-u", "nosuchuser"],
     "unknown user(s): nosuchuser"),
    (["-n", "b", "-s", FUTURE, "-d", "30"], "Must supply either -p with value or partitions"),
    (["-n", "b", "-s", FUTURE, "-p", "2"], "Must supply a duration time"),
    (["-n", "b", "-s", FUTURE, "-d", "30", "-p", "2", "-q", "nosuchqueue"],
     "queue 'nosuchqueue' does not exist"),
    (["-m", "-n", "nosuch", "-d", "30"], "cannot find reservation named 'nosuch'"),
    (["-m", "-D", "-n", "keep"], "Cannot use -D on a non-cyclic reservation"),
])
def test_bad_setres_requests_change_nothing(instance: Instance, args: list[str],
                                            says: str) -> None:
    if not showres(instance):
        assert run(instance, "setres", "-n", "keep", "-s", FUTURE, "-d", "60", "-p", "0:1"
                   ).returncode == 0
    before = showres(instance)
    ran = run(instance, "setres", *args)
    assert (ran.returncode, ran.stdout) == (1, ""), ran.stderr
    assert ran.stderr.startswith("setres: ") and says in ran.stderr, ran.stderr
    assert showres(instance) == before
    forced = run(instance, "setres", "-f", "-n", "forced", "-s", FUTURE, "-d", "30", "-p", "1")
    if args[:2] == ["-n", "b"] and "overlaps" in says:
        assert forced.returncode == 0
        assert forced.stderr == ("setres: Warning: reservation 'forced' overlaps reservation "
                                 "'keep'\n")
        assert run(instance, "releaseres", "forced").returncode == 0
    else:
        assert run(instance, "releaseres", "forced").returncode == 0


def test_userres_lets_a_listed_user_give_a_reservation_back(instance: Instance,
                                                            accounts: Accounts) -> None:
    assert run(instance, "setres", "-n", "bobs", "-s", FUTURE, "-d", "10", "-p", "3",
               "-u", BOB).returncode == 0
    refused = run(instance, "userres", "bobs", account=ALICE, accounts=accounts)
    assert (refused.returncode, refused.stderr) == (
        1, "userres: You are not a user of reservation 'bobs' and so cannot alter it.\n")
    assert run(instance, "setres", "-n", "alices", "-s", FUTURE, "-d", "10", "-p", "2",
               "-u", ALICE).returncode == 0
    given = run(instance, "userres", "alices", account=ALICE, accounts=accounts)
    assert (given.returncode, given.stdout) == (
        0, "Released reservation 'alices' for partitions: 2\n")
    assert [line.split()[0] for line in showres(instance)[2:]] == ["bobs", "keep"]
    assert run(instance, "releaseres", "bobs", "keep").returncode == 0


def test_the_live_scheduler_keeps_a_reservation(instance: Instance, accounts: Accounts) -> None:
    made = run(instance, "setres", "-n", "live", "-s", "now", "-d", "5", "-p", "2:3",
               "-u", ALICE)
    assert made.returncode == 0, made.stderr
    # A non-member needing all 4 nodes for 10 minutes would overlap it: it waits.
    big = instance.qsub("-n", "4", "-t", "10", "/bin/sleep", "1")
    # A non-member of 2 nodes runs at once, on the nodes not reserved (backfilled: it ends
    # before the reservation does, so it cannot delay the big job).
    small = instance.qsub("-n", "2", "-t", "4", "/bin/sleep", "2")
    # The reservation's jobs: one runs on its nodes, one that would outlast it never starts.
    inside = instance.qsub("-q", "R.live", "-n", "2", "-t", "2", "/bin/sleep", "2",
                           account=ALICE, accounts=accounts)
    too_long = instance.qsub("-q", "R.live", "-n", "1", "-t", "6", "/bin/true",
                             account=ALICE, accounts=accounts)
    assert instance.wait_for(small, {"running", "done"})["location"] == "0-1"
    assert instance.wait_for(inside, {"running", "done"})["location"] == "2-3"
    instance.wait_for(inside, {"done"})
    time.sleep(2)  # a few more passes: neither waiting job may start meanwhile
    assert instance.job(big)["state"] == "queued"
    assert instance.job(too_long)["state"] == "queued"
    row = next(cells(line) for line in showres(instance)[2:] if line.startswith("live "))
    assert re.fullmatch(r"00:0\d", row[7]) and row[8] == "-", row
    # Released: the big job runs; the queue R.live is dead, so its leftover job never runs.
    assert run(instance, "releaseres", "live").returncode == 0
    assert instance.wait_for(big, {"running", "done"}, timeout=30)["location"] == "0-3"
    time.sleep(2)
    assert instance.job(too_long)["state"] == "queued"
    assert [r for r in accounting(instance) if r[1] == "live"] == [
        ("Y", "live"), ("B", "live"), ("k", "live")]


def test_a_live_cyclic_reservation_rolls(instance: Instance) -> None:
    # Periods of 1 minute every 2 minutes, the first 3 minutes ago: two are over already.
    first = (int(time.time()) // 60 - 3) * 60
    start = time.strftime("%Y_%m_%d-%H:%M", time.localtime(first))
    made = run(instance, "setres", "-n", "cyc", "-s", start, "-d", "1", "-c", "2", "-p", "3")
    assert made.returncode == 0, made.stderr
    row = cells(until(lambda: [r for r in showres(instance, "-l", "-x")[2:]
                               if r.startswith("cyc")], 10, "showres to list cyc")[0])
    # Rolled to its next period, with a new res_id; the cycle id stays the first res_id.
    assert row[3] == time.strftime(TIME_FORMAT, time.localtime(first + 240)), row
    assert row[6] == "00:02" and int(row[12]) == int(row[13]) + 1, row
    records = [r[0] for r in accounting(instance) if r[1] == "cyc"]
    assert records == ["Y", "F"], records
    assert run(instance, "releaseres", "cyc").returncode == 0


def test_cqmetrics_shows_what_a_live_maintenance_window_costs() -> None:
    """A maintenance window booked with setres on nodes 2-3 of an idle 4-node machine holds
    them idle and pushes a queued 4-node job back to the window's end: cqmetrics shows both
    (the nodes, the share of the machine, the job and its delay), and after releaseres the job
    runs and the cost is gone."""
    instance = Instance(machine="flat:4").start_retrying()
    try:
        def current() -> dict[str, float]:
            shown = run(instance, "cqmetrics", "--json", "--since", "0")
            assert shown.returncode == 0, shown.stderr
            return dict(json.loads(shown.stdout)["current"]["values"])

        before = until(lambda: (lambda v: v if "reserved_nodes" in v else None)(current()), 20,
                       "a first sample")
        assert before["reserved_nodes"] == before["reservation_delayed_jobs"] == 0
        booked = time.time()
        made = run(instance, "setres", "-n", "maint", "-s", "now", "-d", "5", "-p", "2:3")
        assert made.returncode == 0, made.stderr
        big = instance.qsub("-n", "4", "-t", "10", "/bin/true")
        cost = until(lambda: (lambda v: v if v["reservation_delayed_jobs"] == 1 else None)(
            current()), 20, "the maintenance window's cost in a sample")
        assert cost["reserved_nodes"] == cost["reserved_idle_nodes"] == 2
        assert cost["reserved_idle_share"] == 0.5
        # Without the window the job starts now; with it, when the window ends (5 minutes
        # after it was booked, less the time the sample took to come).
        assert 300 - (time.time() - booked) - 3 <= cost["reservation_delay_mean"] <= 300 + 3
        assert cost["reservation_delay_max"] == cost["reservation_delay_mean"]
        text = run(instance, "cqmetrics", "--since", "0").stdout
        assert re.search(r"^Reservations: 2 nodes reserved now, 2 of them held idle \(50\.0 % "
                         r"of the machine\); 1 queued job starts later because of them, by "
                         r"00:0[45]:\d\d on average, 00:0[45]:\d\d at most$", text, re.M), text
        assert instance.job(big)["state"] == "queued"

        assert run(instance, "releaseres", "maint").returncode == 0
        instance.wait_for(big, {"running", "exiting", "done"}, timeout=30)
        after = until(lambda: (lambda v: v if v["reserved_nodes"] == 0 else None)(current()),
                      20, "a sample after releaseres")
        assert after["reservation_delayed_jobs"] == after["reserved_idle_nodes"] == 0
        # The history is the before/after view: nothing held, held, nothing held again.
        shown = run(instance, "cqmetrics", "--json", "--since", "10", "--limit", "1000")
        idle = [s["values"]["reserved_idle_nodes"] for s in json.loads(shown.stdout)["history"]]
        assert idle[0] == 0 and 2 in idle and idle[-1] == 0, idle
    finally:
        instance.stop()
