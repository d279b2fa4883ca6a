"""With the daemons running, as two real Unix users: alice uses the machine, then under the
fairshare policy bob's job starts before alice's next one, even though she submitted first; the
usage that decides it is in the database and survives `cobaltlite down` / `up` (SQLite and
PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance, fresh_postgres_database, until
from unix_users import ALICE, BOB, Accounts, ensure_test_users

from cobaltlite.config import load_config
from cobaltlite.queue_manager.store import JobStore


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield ""  # the instance's own SQLite file
        return
    with fresh_postgres_database() as url:
        yield url


def stored_usage(instance: Instance) -> dict[str, float]:
    store = JobStore(load_config(instance.state_dir).database_url)
    try:
        return {user: usage for user, usage, _ref in store.user_usage()}
    finally:
        store.close()


def ok(instance: Instance, name: str, *args: str) -> None:
    ran = instance.command(name, *args)
    assert ran.returncode == 0, f"{name} {' '.join(args)}: {ran.stderr}"


@pytest.mark.slow
def test_bob_goes_before_alice_after_she_used_the_machine_across_a_restart(
        accounts: Accounts, database: str) -> None:
    instance = Instance(machine="flat:4", database=database,
                        settings={"usage_half_life": 86400.0}).start_retrying()
    try:
        script: Path = instance.jobs_dir / "work.sh"
        script.write_text("#!/bin/sh\nsleep 1\n")
        script.chmod(0o755)
        ok(instance, "cqadm", "--policy", "fairshare", "default")

        first = instance.qsub("-n", "4", "-t", "5", str(script), account=ALICE,
                              accounts=accounts)
        instance.wait_for(first, {"done"}, timeout=60)
        used = until(lambda: stored_usage(instance).get(ALICE), 10, "alice's usage row")
        # 4 nodes for about a second, a day's half-life: about 4 node-seconds.
        assert 3.0 < used < 20.0
        assert BOB not in stored_usage(instance)

        down = instance.cobaltlite("down")
        assert down.returncode == 0, down.stderr
        time.sleep(0.5)
        up = instance.cobaltlite("up")
        assert up.returncode == 0, up.stdout + up.stderr
        until(lambda: instance.command("qstat").returncode == 0, 20, "qstat after the restart")
        assert stored_usage(instance)[ALICE] == pytest.approx(used)

        # Alice submits first, bob second; both need the whole machine.
        ok(instance, "schedctl", "--stop")
        hers = instance.qsub("-n", "4", "-t", "5", str(script), account=ALICE, accounts=accounts)
        his = instance.qsub("-n", "4", "-t", "5", str(script), account=BOB, accounts=accounts)
        ok(instance, "schedctl", "--start")
        done = {j: instance.wait_for(j, {"done"}, timeout=60) for j in (hers, his)}
        assert done[his]["starttime"] < done[hers]["starttime"]
        assert set(stored_usage(instance)) == {ALICE, BOB}
    finally:
        instance.stop()
