"""qhold, qrls, qalter, qmove and qselect against real daemons, as two real Unix users.

alice and bob are ordinary accounts (no admin group is configured, so only root is an admin).
Jobs that must stay queued go to the queue `parked`, which takes jobs but runs none (state
stopped). Every refusal is checked three ways: the message, the exit status, and that the job
is exactly as it was.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from live import Instance
from unix_users import ALICE, BOB, Accounts, ensure_test_users

PARKED = "parked"


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture(scope="module")
def instance(accounts: Accounts) -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    try:
        for action in (["--addq", PARKED, "spare", "closed", "short"],
                       ["--stopq", PARKED, "spare", "short"], ["--killq", "closed"],
                       ["--setq", "maxtime=00:20:00", "short"]):
            ran = running.command("cqadm", *action)
            assert ran.returncode == 0, ran.stderr
        yield running
    finally:
        running.stop()


def as_user(instance: Instance, accounts: Accounts, account: str, command: str,
            *args: str) -> subprocess.CompletedProcess[str]:
    return instance.command(command, *args, account=account, accounts=accounts)


def submit(instance: Instance, accounts: Accounts, account: str, *options: str) -> int:
    return instance.qsub("-q", PARKED, "-n", "1", "-t", "10", *options, "/bin/true",
                         account=account, accounts=accounts)



def test_owner_holds_and_releases(instance: Instance, accounts: Accounts) -> None:
    jobid = submit(instance, accounts, ALICE)
    held = as_user(instance, accounts, ALICE, "qhold", str(jobid))
    assert (held.returncode, held.stdout, held.stderr) == \
        (0, f"Placed user hold on job {jobid}\n", "")
    assert instance.long_listing(jobid)["State"] == "user_hold"

    again = as_user(instance, accounts, ALICE, "qhold", str(jobid), "99999")
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == (
        f"qhold: Failed to place user hold on job {jobid}: already in state 'user hold'\n"
        "qhold: Failed to place user hold on job 99999: job not found\n")

    released = as_user(instance, accounts, ALICE, "qrls", str(jobid))
    assert (released.returncode, released.stdout, released.stderr) == \
        (0, f"Removed user hold on job {jobid}\n", "")
    assert instance.long_listing(jobid)["State"] == "queued"

    not_held = as_user(instance, accounts, ALICE, "qrls", str(jobid))
    assert (not_held.returncode, not_held.stderr) == \
        (1, f"qrls: Failed to remove user hold on job {jobid}: does not have a 'user hold'\n")


def test_a_user_cannot_touch_another_users_job(instance: Instance, accounts: Accounts) -> None:
    jobid = submit(instance, accounts, ALICE)
    before = instance.long_listing(jobid)
    for command, *args in (["qhold"], ["qrls"], ["qalter", "-t", "+5"], ["qalter", "-n", "2"],
                           ["qmove", "spare"], ["qdel"]):
        argv = [*args, str(jobid)]
        if command == "qmove":
            argv = ["spare", str(jobid)]
        ran = as_user(instance, accounts, BOB, command, *argv)
        assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
        assert ran.stderr.startswith(f"{command}: ") and str(jobid) in ran.stderr
        assert f"belongs to {ALICE}, not to {BOB}" in ran.stderr, ran.stderr
        assert instance.long_listing(jobid) == before, command
    # A user list that names bob lets him.
    shared = submit(instance, accounts, ALICE, "--run_users", BOB)
    held = as_user(instance, accounts, BOB, "qhold", str(shared))
    assert held.returncode == 0, held.stderr
    assert instance.long_listing(shared)["State"] == "user_hold"


def test_qalter_changes_wall_time_nodes_and_project(instance: Instance,
                                                   accounts: Accounts) -> None:
    jobid = submit(instance, accounts, ALICE)
    steps = [(["-t", "+5"], "00:15:00"), (["-t", "-00:03:00"], "00:12:00"),
             (["--time=-2"], "00:10:00"), (["-t", "45"], "00:45:00")]
    for argv, walltime in steps:
        was = instance.long_listing(jobid)["WallTime"]
        ran = as_user(instance, accounts, ALICE, "qalter", *argv, str(jobid))
        assert (ran.returncode, ran.stdout, ran.stderr) == \
            (0, f"walltime changed from {was} to {walltime}\n", ""), argv
        assert instance.long_listing(jobid)["WallTime"] == walltime, argv
    ran = as_user(instance, accounts, ALICE, "qalter", "-n", "2", "-A", "physics",
                  "--mode", "vn", str(jobid))
    assert ran.returncode == 0, ran.stderr
    fields = instance.long_listing(jobid)
    assert (fields["Nodes"], fields["Project"], fields["Mode"]) == ("2", "physics", "vn")

    # Taking off more than the job has: refused, nothing changed.
    before = instance.long_listing(jobid)
    ran = as_user(instance, accounts, ALICE, "qalter", "-t", "-60", str(jobid))
    assert ran.returncode == 1
    assert ran.stderr.startswith(f"qalter: Failed to alter job {jobid}: invalid wall time")
    assert instance.long_listing(jobid) == before


def test_qalter_of_a_running_job_is_refused(instance: Instance, accounts: Accounts) -> None:
    jobid = instance.qsub("-n", "1", "-t", "10", "/bin/sleep", "60", account=ALICE,
                          accounts=accounts)
    instance.wait_for(jobid, {"running"})
    before = instance.long_listing(jobid)
    for argv in (["-t", "+5"], ["-n", "2"]):
        ran = as_user(instance, accounts, ALICE, "qalter", *argv, str(jobid))
        assert ran.returncode == 1 and str(jobid) in ran.stderr, ran.stderr
    held = as_user(instance, accounts, ALICE, "qhold", str(jobid))
    assert held.returncode == 1
    after = instance.long_listing(jobid)
    assert {k: after[k] for k in ("WallTime", "Nodes", "User_Hold")} == \
        {k: before[k] for k in ("WallTime", "Nodes", "User_Hold")}
    assert instance.command("qdel", str(jobid)).returncode == 0


def test_qmove_checks_the_target_queue(instance: Instance, accounts: Accounts) -> None:
    jobid = submit(instance, accounts, ALICE)
    for queue, message in (
            ("nosuchqueue", "qmove: Error: queue 'nosuchqueue' does not exist\n"),
            ("closed", f"qmove: Failed to move job {jobid} to queue 'closed': The 'closed' "
                       "queue is dead\n")):
        ran = as_user(instance, accounts, ALICE, "qmove", queue, str(jobid))
        assert (ran.returncode, ran.stdout, ran.stderr) == (1, "", message)
        assert instance.long_listing(jobid)["Queue"] == PARKED
    moved = as_user(instance, accounts, ALICE, "qmove", "spare", str(jobid))
    assert (moved.returncode, moved.stdout, moved.stderr) == \
        (0, f"moved job {jobid} to queue 'spare'\n", "")
    assert instance.long_listing(jobid)["Queue"] == "spare"


def test_qrls_dependencies_drops_them(instance: Instance, accounts: Accounts) -> None:
    parent = submit(instance, accounts, ALICE)
    child = submit(instance, accounts, ALICE, "--dependencies", str(parent))
    assert instance.long_listing(child)["State"] == "dep_hold"
    ran = as_user(instance, accounts, ALICE, "qrls", "--dependencies", str(child))
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stdout
    fields = instance.long_listing(child)
    assert (fields["State"], fields["Dependencies"]) == ("queued", "-")


def test_qselect_lists_matching_job_ids(instance: Instance, accounts: Accounts) -> None:
    wanted = submit(instance, accounts, BOB, "-A", "qselect-project", "-h")
    submit(instance, accounts, BOB, "-A", "qselect-project")
    ran = as_user(instance, accounts, ALICE, "qselect", "-A", "qselect-project", "-h",
                  "user_hold")
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout == f"   The following jobs matched your query:\n      {wanted}\n"
    none = as_user(instance, accounts, ALICE, "qselect", "-A", "no-such-project")
    assert (none.returncode, none.stdout) == (1, "")
    assert none.stderr == "qselect: Failed to match any jobs\n"


def test_bad_input_is_refused_and_changes_nothing(instance: Instance,
                                                  accounts: Accounts) -> None:
    jobid = submit(instance, accounts, ALICE)
    other = submit(instance, accounts, ALICE, "--dependencies", str(jobid))
    before = {j: instance.long_listing(j) for j in (jobid, other)}
    for argv, status, message in (
        (["qalter", "--mode", "turbo", str(jobid)], 1, "Specified mode 'turbo' not valid"),
        (["qalter", "-t", "1:99", str(jobid)], 1, "invalid time specification"),
        (["qalter", "-n", "two", str(jobid)], 2, "invalid int value: 'two'"),
        (["qalter", "--dependencies", str(other), str(jobid)], 1, "cycle"),
        (["qalter", "-n", "99", str(jobid)], 1, str(jobid)),
        (["qhold", "abc"], 1, "jobid must be an integer: abc"),
        (["qrls", "--bogus", str(jobid)], 2, "unrecognized arguments: --bogus"),
        (["qmove", PARKED], 1, "need a queue and at least one job id"),
        (["qselect", "-n", "many"], 2, "invalid int value: 'many'"),
    ):
        ran = as_user(instance, accounts, ALICE, *argv)
        assert ran.returncode == status, (argv, ran.stdout, ran.stderr)
        assert message in ran.stderr, (argv, ran.stderr)
    assert {j: instance.long_listing(j) for j in (jobid, other)} == before


def test_queue_restrictions_are_checked_again_at_qalter_and_qmove(
        instance: Instance, accounts: Accounts) -> None:
    limit = "Walltime greater than the 'short' queue max walltime of 00:20:00"
    long_job = submit(instance, accounts, ALICE, "-t", "45")
    ran = as_user(instance, accounts, ALICE, "qmove", "short", str(long_job))
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr.startswith(f"qmove: Failed to move job {long_job} to queue 'short'")
    assert limit in ran.stderr
    assert instance.long_listing(long_job)["Queue"] == PARKED

    short_job = instance.qsub("-q", "short", "-n", "1", "-t", "10", "/bin/true",
                              account=ALICE, accounts=accounts)
    ran = as_user(instance, accounts, ALICE, "qalter", "-t", "+15", str(short_job))
    assert ran.returncode == 1 and limit in ran.stderr, ran.stderr
    assert instance.long_listing(short_job)["WallTime"] == "00:10:00"
