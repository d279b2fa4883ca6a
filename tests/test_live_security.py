"""Who may do what, end to end: real daemons, real Unix accounts, the kernel's word on identity.

alice submits; carol (a third account, not an admin) may not touch alice's jobs unless alice's
user list names her; bob is an admin through the configured admin group. The component sockets
take only callers holding the shared secret and are closed to other accounts by their mode; the
user socket ignores any identity a client claims.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import Pyro5.errors
import pytest
from live import Instance
from unix_users import ADMINS, ALICE, BOB, Accounts, as_account, ensure_test_users

from cobaltlite.config import load_config
from cobaltlite.rpc.client import connect
from cobaltlite.rpc.peers import component_uri

CAROL = "cltest-carol"  # an ordinary account: not in the admin group
ALIVE = {"queued", "starting", "running"}


def _ensure_carol() -> None:
    check = ["getent", "passwd", CAROL]
    if subprocess.run(check, capture_output=True).returncode == 0:
        return
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", CAROL],
        capture_output=True, text=True)
    # A concurrent test run may have created it in the meantime.
    if made.returncode != 0 and subprocess.run(check, capture_output=True).returncode != 0:
        pytest.fail(f"useradd {CAROL} failed: {made.stderr.strip()}")


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    found = ensure_test_users()
    _ensure_carol()
    admins = grp.getgrnam(ADMINS)
    assert CAROL not in admins.gr_mem and pwd.getpwnam(CAROL).pw_gid != admins.gr_gid
    return found


@pytest.fixture(scope="module")
def instance(accounts: Accounts) -> Iterator[Instance]:
    running = Instance(machine="flat:4", settings={"admin_group": ADMINS}).start_retrying()
    yield running
    running.stop()


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A fresh directory every account can traverse (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="cltest-sec-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)  # root writes it; every account may read and run it
    return path


def run_python_as(accounts: Accounts, account: str, instance: Instance, code: str
                  ) -> subprocess.CompletedProcess[str]:
    env = {**accounts.env, "COBALTLITE_STATE_DIR": str(instance.state_dir)}
    return subprocess.run([accounts.python, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60, cwd="/",
                          **as_account(account))


def sleeper_as_alice(instance: Instance, accounts: Accounts, *extra: str) -> int:
    job = script(instance.jobs_dir, "sleep.sh", "sleep 30")
    return instance.qsub("-n", "1", "-t", "5", *extra, str(job), account=ALICE, accounts=accounts)


def qstat_rows(instance: Instance) -> dict[str, list[str]]:
    shown = instance.command("qstat")
    assert shown.returncode == 0, shown.stderr
    return {line.split()[0]: line.split() for line in shown.stdout.splitlines()[2:]}


# ---- jobs: who runs them, who may delete them ------------------------------------------------


def test_a_job_runs_as_its_submitter(instance: Instance, accounts: Accounts) -> None:
    job = script(instance.jobs_dir, "whoami.sh", "id -u\nid -un")
    jobid = instance.qsub("-n", "1", "-t", "5", str(job), account=ALICE, accounts=accounts)
    done = instance.wait_for(jobid, {"done"})
    alice = pwd.getpwnam(ALICE)
    assert done["exit_status"] == 0
    assert (done["user"], done["uid"]) == (ALICE, alice.pw_uid)
    output = instance.jobs_dir / f"{jobid}.output"
    assert output.read_text().split() == [str(alice.pw_uid), ALICE]
    assert output.stat().st_uid == alice.pw_uid
    assert (instance.jobs_dir / f"{jobid}.error").stat().st_uid == alice.pw_uid


def test_another_user_cannot_delete_a_job_but_its_owner_can(
    instance: Instance, accounts: Accounts
) -> None:
    jobid = sleeper_as_alice(instance, accounts)
    refused = instance.command("qdel", str(jobid), account=CAROL, accounts=accounts)
    assert refused.returncode == 1, refused.stdout
    assert ALICE in refused.stderr and str(jobid) in refused.stderr
    assert "Deleted Jobs" not in refused.stdout
    assert instance.job(jobid)["state"] in ALIVE
    assert instance.job(jobid)["end_reason"] is None

    deleted = instance.command("qdel", str(jobid), account=ALICE, accounts=accounts)
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted Jobs" in deleted.stdout
    assert instance.wait_for(jobid, {"done"})["end_reason"] == "deleted"


def test_a_user_named_in_the_user_list_may_delete_the_job(
    instance: Instance, accounts: Accounts
) -> None:
    jobid = sleeper_as_alice(instance, accounts, "--user_list", f"{ALICE}:{CAROL}")
    assert set(instance.job(jobid)["user_list"]) == {ALICE, CAROL}
    deleted = instance.command("qdel", str(jobid), account=CAROL, accounts=accounts)
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted Jobs" in deleted.stdout and ALICE in deleted.stdout
    assert instance.wait_for(jobid, {"done"})["end_reason"] == "deleted"


def test_an_admin_group_member_may_delete_anyones_job(
    instance: Instance, accounts: Accounts
) -> None:
    jobid = sleeper_as_alice(instance, accounts)
    deleted = instance.command("qdel", str(jobid), account=BOB, accounts=accounts)
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted Jobs" in deleted.stdout
    assert instance.wait_for(jobid, {"done"})["end_reason"] == "deleted"


# ---- the scheduler's control socket -------------------------------------------------------------


def test_only_admins_may_stop_and_start_scheduling(
    instance: Instance, accounts: Accounts
) -> None:
    try:
        refused = instance.command("schedctl", "--stop", account=CAROL, accounts=accounts)
        assert refused.returncode != 0
        assert "admin" in refused.stderr
        status = instance.command("schedctl", "--status", account=CAROL, accounts=accounts)
        assert status.returncode == 0, status.stderr
        assert "Job Scheduling: ENABLED" in status.stdout

        stopped = instance.command("schedctl", "--stop", account=BOB, accounts=accounts)
        assert stopped.returncode == 0, stopped.stderr
        assert "DISABLED" in instance.command("schedctl", "--status").stdout
        refused = instance.command("schedctl", "--start", account=CAROL, accounts=accounts)
        assert refused.returncode != 0 and "admin" in refused.stderr
        assert "DISABLED" in instance.command("schedctl", "--status").stdout
        started = instance.command("schedctl", "--start", account=BOB, accounts=accounts)
        assert started.returncode == 0, started.stderr
        assert "Job Scheduling: ENABLED" in instance.command("schedctl", "--status").stdout
    finally:
        instance.command("schedctl", "--start")


# ---- the component sockets -----------------------------------------------------------------------


def test_a_component_socket_refuses_a_client_without_the_secret(instance: Instance) -> None:
    config = load_config(instance.state_dir)
    uri = component_uri(config, "queue-manager")
    for secret in (None, "x" * 64):
        with connect(uri, secret=secret, timeout=5) as proxy, \
                pytest.raises(Pyro5.errors.CommunicationError, match="secret refused"):
            proxy.jobs()
    assert instance.command("qstat").returncode == 0
    # With the secret the same call is served: the refusal above was the secret's doing.
    secret = config.secret_path.read_text().strip()
    with connect(uri, secret=secret, timeout=5) as proxy:
        assert proxy.ping() == "queue-manager"


def test_other_accounts_cannot_even_open_a_component_socket(
    instance: Instance, accounts: Accounts
) -> None:
    config = load_config(instance.state_dir)
    for component in ("queue-manager", "system", "scheduler"):
        mode = stat.S_IMODE(config.socket(component).stat().st_mode)
        assert mode == 0o600, f"{component} socket has mode {mode:o}"
    assert stat.S_IMODE(config.secret_path.stat().st_mode) == 0o600
    tried = run_python_as(accounts, CAROL, instance, f"""
        import Pyro5.errors
        from cobaltlite.rpc.client import connect
        try:
            with connect({component_uri(config, "queue-manager")!r}, timeout=5) as proxy:
                proxy.ping()
        except Pyro5.errors.CommunicationError as exc:
            print("refused:", exc)
        else:
            print("SERVED")
        try:
            open({str(config.secret_path)!r}).read()
        except PermissionError:
            print("secret unreadable")
    """)
    assert tried.returncode == 0, tried.stderr
    assert "SERVED" not in tried.stdout
    assert "Permission denied" in tried.stdout
    assert "secret unreadable" in tried.stdout
    assert instance.command("qstat").returncode == 0
    assert instance.command("qstat", account=CAROL, accounts=accounts).returncode == 0


# ---- identity on the user socket -----------------------------------------------------------------


def test_qstat_shows_the_submitter_whoever_asks(instance: Instance, accounts: Accounts) -> None:
    jobid = sleeper_as_alice(instance, accounts)
    try:
        row = qstat_rows(instance)[str(jobid)]  # root asks
        assert row[1] == ALICE
    finally:
        instance.command("qdel", str(jobid))
    instance.wait_for(jobid, {"done"})


def test_the_user_socket_ignores_any_claimed_identity(
    instance: Instance, accounts: Accounts
) -> None:
    """The user API has no parameter for a user name; identity fields in a submission are refused,
    and whoami reports the account the kernel saw."""
    config = load_config(instance.state_dir)
    carol = pwd.getpwnam(CAROL)
    tried = run_python_as(accounts, CAROL, instance, f"""
        import os
        from cobaltlite.rpc.client import connect
        uri = "PYRO:queue-manager-user@./u:{config.user_socket}"
        with connect(uri, timeout=10) as qm:
            print("whoami", qm.whoami())
            spec = {{"nodes": 1, "walltime": 60, "command": "/bin/true", "cwd": "/tmp"}}
            for claim in ({{"user": "root"}}, {{"uid": 0}}, {{"user": "{ALICE}", "uid": 0}}):
                try:
                    print("ACCEPTED", qm.submit({{**spec, **claim}}))
                except ValueError as exc:
                    print("refused", exc)
            try:
                print("ACCEPTED", qm.delete([1], "root"))
            except Exception as exc:
                print("refused", type(exc).__name__)
    """)
    assert tried.returncode == 0, tried.stderr
    lines = tried.stdout.splitlines()
    assert lines[0] == f"whoami {{'uid': {carol.pw_uid}, 'user': '{CAROL}', 'admin': False}}"
    assert "ACCEPTED" not in tried.stdout, tried.stdout
    assert all("unknown submission fields" in line for line in lines[1:4]), lines


def test_a_job_log_path_cannot_make_root_write_where_the_user_cannot(
    instance: Instance, accounts: Accounts, open_tmp: Path
) -> None:
    """carol's .cobaltlog is a symbolic link to a file only root may write; the runner (root)
    must not follow it."""
    private = open_tmp / "root-only"
    private.mkdir(mode=0o700)
    target = private / "target"
    carols = open_tmp / "carol"
    carols.mkdir()
    os.chown(carols, pwd.getpwnam(CAROL).pw_uid, pwd.getpwnam(CAROL).pw_gid)
    os.symlink(target, carols / "job.cobaltlog")
    job = script(instance.jobs_dir, "quick.sh", "true")
    jobid = instance.qsub("-n", "1", "-t", "5", "-O", str(carols / "job"), str(job),
                          account=CAROL, accounts=accounts)
    instance.wait_for(jobid, {"done"})
    if os.path.exists(target):
        pytest.fail(f"root wrote {target} through carol's symbolic link:\n{target.read_text()}")


def test_a_cobaltlog_sent_straight_to_the_server_is_not_written_as_root(
    instance: Instance, accounts: Accounts, open_tmp: Path
) -> None:
    private = open_tmp / "root-only"
    private.mkdir(mode=0o700)
    target = private / "planted"
    config = load_config(instance.state_dir)
    tried = run_python_as(accounts, CAROL, instance, f"""
        from cobaltlite.rpc.client import connect
        with connect("PYRO:queue-manager-user@./u:{config.user_socket}", timeout=10) as qm:
            print(qm.submit({{"nodes": 1, "walltime": 60, "command": "/bin/true",
                             "cwd": "/tmp", "outputpath": "/dev/null",
                             "errorpath": "/dev/null", "cobaltlog": {str(target)!r}}}))
    """)
    if tried.returncode != 0:
        return  # refused at submission: fine
    instance.wait_for(int(tried.stdout.strip()), {"done"})
    assert not target.exists(), f"root wrote {target} for carol: {target.read_text()!r}"


def test_idle_connections_of_one_user_do_not_lock_the_others_out(
    instance: Instance, accounts: Accounts
) -> None:
    config = load_config(instance.state_dir)
    env = {**accounts.env, "COBALTLITE_STATE_DIR": str(instance.state_dir)}
    holder = subprocess.Popen(
        [accounts.python, "-c", textwrap.dedent(f"""
            import time
            from cobaltlite.rpc.client import connect
            held = []
            for _ in range(100):
                proxy = connect("PYRO:queue-manager-user@./u:{config.user_socket}", timeout=5)
                try:
                    proxy.whoami()
                except Exception:
                    break
                held.append(proxy)
            print(len(held), flush=True)
            time.sleep(60)
        """)],
        env=env, cwd="/", stdout=subprocess.PIPE, text=True, **as_account(CAROL))
    try:
        assert holder.stdout is not None
        assert int(holder.stdout.readline()) > 0
        # Other users may wait a little for the server to drop idle connections, not for ever.
        deadline = time.monotonic() + 12
        while True:
            shown = instance.command("qstat", account=ALICE, accounts=accounts)
            if shown.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert shown.returncode == 0, shown.stderr
    finally:
        holder.kill()
        holder.wait()
        deadline = time.monotonic() + 10
        while instance.command("qstat").returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
