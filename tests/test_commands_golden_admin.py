"""cqadm and schedctl --score/--inherit against real daemons on PostgreSQL: root is the
admin, alice an ordinary user. Refused requests change nothing, which is checked by listing
afterwards.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from live import Instance, fresh_postgres_database
from unix_users import ALICE, Accounts, ensure_test_users

from cobaltlite.commands.common import CommandError, connect_queue_manager
from cobaltlite.commands.cqadm import GETQ_HEADER


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture(scope="module")
def instance(accounts: Accounts) -> Iterator[Instance]:
    """On the PostgreSQL server (the user commands' golden tests run on SQLite): queue
    settings, holds and scores go through the other store too."""
    with fresh_postgres_database() as database:
        running = Instance(machine="flat:4", database=database).start_retrying()
        yield running
        running.stop()


def cqadm(instance: Instance, *args: str) -> subprocess.CompletedProcess[str]:
    return instance.command("cqadm", *args)


def getq(instance: Instance, *queues: str) -> dict[str, dict[str, str]]:
    """--getq as {queue: {column: value}}; the columns split on their `=` underline."""
    ran = cqadm(instance, "--getq", *queues)
    assert ran.returncode == 0, ran.stderr
    header, rule, *rows = ran.stdout.splitlines()
    starts = [header.index(name) for name in GETQ_HEADER]
    assert header.split() == list(GETQ_HEADER) and set(rule) == {"="}
    table = {}
    for row in rows:
        cells = [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        table[cells[0]] = dict(zip(GETQ_HEADER, cells, strict=True))
    return table



def test_queue_life_cycle(instance: Instance) -> None:
    added = cqadm(instance, "--addq", "debug", "long")
    assert (added.returncode, added.stderr) == (0, "")
    assert added.stdout == "Added Queues\n    debug\n    long\n"
    assert getq(instance, "debug")["debug"]["State"] == "running"

    again = cqadm(instance, "--addq", "debug")
    assert again.returncode == 1 and "debug" in again.stderr

    setq = cqadm(instance, "--setq", "maxtime=01:00:00 users=alice:bob maxrunning=2", "debug")
    assert setq.returncode == 0, setq.stderr
    debug = getq(instance, "debug")["debug"]
    assert (debug["MaxTime"], debug["Users"], debug["MaxRunning"]) == \
        ("01:00:00", "alice:bob", "2")

    unset = cqadm(instance, "--unsetq", "users", "debug")
    assert unset.returncode == 0, unset.stderr
    assert getq(instance, "debug")["debug"]["Users"] == "None"

    for option, state in (("--startq", "running"), ("--drainq", "draining"),
                          ("--killq", "dead"), ("--stopq", "stopped")):
        ran = cqadm(instance, option, "long")
        assert ran.returncode == 0, (option, ran.stderr)
        assert getq(instance, "long")["long"]["State"] == state

    # A stopped queue keeps its job queued, so the queue is not empty when it is deleted.
    assert cqadm(instance, "--stopq", "debug").returncode == 0
    jobid = instance.qsub("-q", "debug", "-n", "1", "-t", "5", "/bin/true")
    busy = cqadm(instance, "--delq", "debug")
    assert busy.returncode == 1 and "debug" in busy.stderr
    assert "debug" in getq(instance)
    forced = cqadm(instance, "-f", "--delq", "debug", "long")
    assert forced.returncode == 0, forced.stderr
    assert not {"debug", "long"} & set(getq(instance))
    # -f deleted the job with its queue.
    assert instance.wait_for(jobid, {"done"})["end_reason"] == "deleted"


def test_bad_queue_requests_change_nothing(instance: Instance, accounts: Accounts) -> None:
    assert cqadm(instance, "--addq", "steady").returncode == 0
    before = getq(instance)
    for argv, says in (
        (["--setq", "maxtime=60 users", "steady"], "malformed setting 'users'"),
        (["--setq", "maxtime=60 bogus=1", "steady"], "bogus"),
        (["--setq", "maxtime=never", "steady"], "never"),
        (["--setq", "maxtime=60", "steady", "nosuchqueue"], "nosuchqueue"),
        (["--unsetq", "bogus", "steady"], "bogus"),
        (["--startq", "nosuchqueue"], "nosuchqueue"),
        (["--policy", "nosuchpolicy", "steady"], "nosuchpolicy"),
    ):
        ran = cqadm(instance, *argv)
        assert ran.returncode == 1, (argv, ran.stdout)
        assert ran.stderr.startswith("cqadm: ") and says in ran.stderr, ran.stderr
        assert getq(instance) == before, argv
    # An ordinary user may look but not change.
    refused = instance.command("cqadm", "--addq", "mine", account=ALICE, accounts=accounts)
    assert refused.returncode == 1 and "admin" in refused.stderr
    looked = instance.command("cqadm", "--getq", account=ALICE, accounts=accounts)
    assert looked.returncode == 0, looked.stderr
    assert getq(instance) == before


def test_admin_job_actions(instance: Instance, accounts: Accounts) -> None:
    # A stopped queue takes jobs but starts none: they stay queued for the admin to act on.
    assert cqadm(instance, "--addq", "jobs").returncode == 0
    assert cqadm(instance, "--stopq", "jobs").returncode == 0
    jobid = instance.qsub("-q", "jobs", "-n", "1", "-t", "5", "/bin/true", account=ALICE,
                          accounts=accounts)
    held = cqadm(instance, "--admin-hold", str(jobid))
    assert held.returncode == 0, held.stderr
    assert instance.long_listing(jobid)["Admin_Hold"] == "True"
    # The owner cannot lift an admin hold, nor place one.
    qrls = instance.command("qrls", str(jobid), account=ALICE, accounts=accounts)
    assert qrls.returncode == 1
    own = instance.command("cqadm", "--admin-release", str(jobid), account=ALICE,
                           accounts=accounts)
    assert own.returncode == 1 and "admin" in own.stderr
    assert instance.long_listing(jobid)["Admin_Hold"] == "True"
    assert cqadm(instance, "--release", str(jobid)).returncode == 0
    assert instance.long_listing(jobid)["Admin_Hold"] == "False"

    assert cqadm(instance, "--time", "01:30:00", str(jobid)).returncode == 0
    assert instance.long_listing(jobid)["WallTime"] == "01:30:00"
    assert cqadm(instance, "--addq", "other").returncode == 0
    assert cqadm(instance, "--stopq", "other").returncode == 0
    assert cqadm(instance, "--queue", "other", str(jobid)).returncode == 0
    assert instance.long_listing(jobid)["Queue"] == "other"

    scored = instance.command("schedctl", "--score", "+50", str(jobid))
    assert scored.returncode == 0, scored.stderr
    assert instance.long_listing(jobid)["Score"] == "50.0"
    assert instance.command("schedctl", "--score", "-20", str(jobid)).returncode == 0
    assert instance.long_listing(jobid)["Score"] == "30.0"
    assert instance.command("schedctl", "--inherit", "0.8", str(jobid)).returncode == 0
    assert instance.long_listing(jobid)["dep_frac"] == "0.8"
    for argv in (["--score", "5", str(jobid)], ["--inherit", "0.1", str(jobid)]):
        ran = instance.command("schedctl", *argv, account=ALICE, accounts=accounts)
        assert ran.returncode == 1, argv
    assert instance.long_listing(jobid)["Score"] == "30.0"

    started = cqadm(instance, "--run", "2-3", str(jobid))
    assert started.returncode == 0, started.stderr
    done = instance.wait_for(jobid, {"done"})
    assert done["location"] == "2-3" and done["exit_status"] == 0


def test_force_kill_and_next_jobid(instance: Instance) -> None:
    jobid = instance.qsub("-n", "1", "-t", "5", "/bin/sleep", "60")
    instance.wait_for(jobid, {"running"})
    killed = cqadm(instance, "-f", "--kill", str(jobid))
    assert killed.returncode == 0, killed.stderr
    assert instance.wait_for(jobid, {"done"}, timeout=5)["end_reason"] == "deleted"

    too_low = cqadm(instance, "-j", str(jobid))
    assert too_low.returncode == 1 and "greater" in too_low.stderr
    assert cqadm(instance, "-j", "5000").returncode == 0
    assert instance.qsub("-h", "-n", "1", "-t", "5", "/bin/true") == 5000


def test_a_daemon_without_a_method_is_named_not_a_traceback(
        instance: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command newer than the running daemons says so (the RPC layer checks the exposed
    methods before calling)."""
    monkeypatch.setenv("COBALTLITE_STATE_DIR", str(instance.state_dir))
    with connect_queue_manager() as qm, pytest.raises(CommandError) as refused:
        qm._call("hold_forever", [1])
    assert "does not offer 'hold_forever'" in str(refused.value)
