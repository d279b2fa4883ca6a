"""Hardening of the queue manager's store and submissions (issue 8.2, 8.4, 8.5), end to end.

SQLite files are private to the queue manager's account; text that cannot be stored or that
would drive another user's terminal is refused or shown escaped; every field of a submission has
a limit, refused with the same message on SQLite and PostgreSQL, and the daemon keeps serving.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import Pyro5.errors
import Pyro5.serializers
import pytest
from live import Instance, fresh_postgres_database
from sqlalchemy.engine import make_url
from unix_users import ALICE, Accounts, as_account, ensure_test_users

from cobaltlite.config import load_config
from cobaltlite.queue_manager import limits as lim
from cobaltlite.queue_manager.store import JobStore
from cobaltlite.rpc.client import connect


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()




@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def instance(request: pytest.FixtureRequest, accounts: Accounts) -> Iterator[Instance]:
    if request.param == "sqlite":
        running = Instance(machine="flat:4").start_retrying()
        yield running
        running.stop()
        return
    with fresh_postgres_database() as url:
        running = Instance(machine="flat:4", database=url).start_retrying()
        yield running
        running.stop()


@pytest.fixture(scope="module")
def sqlite_instance(accounts: Accounts) -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    yield running
    running.stop()


def _user_api(instance: Instance) -> Any:
    socket = load_config(instance.state_dir).user_socket
    return connect(f"PYRO:queue-manager-user@./u:{socket}", timeout=30)


def _spec(instance: Instance, **overrides: Any) -> dict[str, Any]:
    return {"nodes": 1, "walltime": 60, "command": "/bin/true", "cwd": str(instance.jobs_dir),
            "user_hold": True, **overrides}


@pytest.fixture
def hostile_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send calls as JSON with ASCII escapes, as any client may: Pyro's own encoder cannot
    send a lone surrogate, but the server decodes "\\ud800" into one."""

    def dumps_call(self: Any, obj: Any, method: str, vargs: Any, kwargs: Any) -> bytes:
        data = {"object": obj, "method": method, "params": vargs, "kwargs": kwargs}
        return json.dumps(data, ensure_ascii=True, default=self.default).encode()

    monkeypatch.setattr(Pyro5.serializers.JsonSerializer, "dumpsCall", dumps_call)


def _refused(api: Any, spec: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as caught:
        api.submit(spec)
    return str(caught.value)


# ---- 8.2: private SQLite files ----------------------------------------------------------------


def test_sqlite_files_are_private_to_the_queue_manager(
        sqlite_instance: Instance, accounts: Accounts) -> None:
    instance = sqlite_instance
    jobid = instance.qsub("-n", "1", "-t", "5", "--env", "SECRET=hunter2", "/bin/true",
                          account=ALICE, accounts=accounts)
    database = Path(make_url(load_config(instance.state_dir).database_url).database or "")
    files = [database, Path(f"{database}-wal"), Path(f"{database}-shm")]
    for path in files:
        assert path.exists(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} is not private"
    # The state directory stays traversable: the user socket must be reachable.
    assert stat.S_IMODE(instance.state_dir.stat().st_mode) == 0o755
    probe = ("import sys\n"
             "for p in sys.argv[1:]:\n"
             "    try:\n"
             "        open(p, 'rb').close(); print('OPENED', p)\n"
             "    except PermissionError:\n"
             "        print('DENIED', p)\n")
    ran = subprocess.run([accounts.python, "-c", probe, *map(str, files)], env=accounts.env,
                         capture_output=True, text=True, timeout=30, cwd="/",
                         **as_account(ALICE))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [w for p in files for w in ("DENIED", str(p))], ran.stdout
    # ... while alice still reaches the queue manager through the user socket.
    shown = instance.command("qstat", "-f", str(jobid), account=ALICE, accounts=accounts)
    assert shown.returncode == 0 and str(jobid) in shown.stdout, shown.stderr


def test_an_existing_world_readable_database_is_made_private(tmp_path: Path) -> None:
    database = tmp_path / "cobaltlite.db"
    old = sqlite3.connect(database)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE t (x)")
    old.commit()
    old.close()
    os.chmod(database, 0o644)
    assert stat.S_IMODE(database.stat().st_mode) == 0o644
    store = JobStore(f"sqlite:///{database}", sole_writer=True)
    try:
        store.init()
        assert store.queue("default") is not None
        for suffix in ("", "-wal", "-shm"):
            path = Path(f"{database}{suffix}")
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        store.close()


# ---- 8.4: unencodable and control text --------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("jobname", "bad\ud800name"),
    ("project", "nul\0project"),
    ("args", ["ok", "a\udcffb"]),
    ("env", {"GOOD": "x", "BAD": "lone\ud800"}),
    ("env", {"K\0EY": "x"}),
    ("user_list", ["\ud800"]),
    ("cwd", "/tmp/\ud800"),
    ("attrs", {"a": ["\0"]}),
])
def test_unencodable_text_is_refused_naming_the_field(
        instance: Instance, accounts: Accounts, hostile_client: None, field: str,
        value: Any) -> None:
    with _user_api(instance) as api:
        message = _refused(api, _spec(instance, **{field: value}))
    assert field in message, message
    assert "NUL" in message or "surrogate" in message, message
    for account in (None, ALICE):
        shown = instance.command("qstat", "-lf", account=account, accounts=accounts)
        assert shown.returncode == 0, shown.stderr


def test_qstat_full_shows_control_characters_escaped(
        sqlite_instance: Instance, accounts: Accounts) -> None:
    instance = sqlite_instance
    with _user_api(instance) as api:
        jobid = api.submit(_spec(instance, jobname="evil\x1b[2Jname",
                                 env={"TITLE": "\x1b]0;pwned\x07"}, args=["a\rb"]))
    for account in (None, ALICE):
        for flags in (["-f"], ["-lf"]):
            shown = instance.command("qstat", *flags, str(jobid), account=account,
                                     accounts=accounts)
            assert shown.returncode == 0, shown.stderr
            assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
            assert "\r" not in shown.stdout
            assert "evil\\x1b[2Jname" in shown.stdout, shown.stdout
            if "-lf" in flags:
                assert "\\x1b]0;pwned\\x07" in shown.stdout, shown.stdout


# ---- 8.5: limits ------------------------------------------------------------------------------

BIG_ARG = "a" * lim.MAX_ARG

LIMIT_CASES: list[tuple[str, dict[str, Any], str, int]] = [
    ("jobname", {"jobname": "j" * (lim.MAX_JOBNAME + 1)}, "jobname", lim.MAX_JOBNAME),
    ("queue", {"queue": "q" * (lim.MAX_QUEUE + 1)}, "queue", lim.MAX_QUEUE),
    ("project", {"project": "p" * (lim.MAX_PROJECT + 1)}, "project", lim.MAX_PROJECT),
    ("mode", {"mode": "m" * (lim.MAX_MODE + 1)}, "mode", lim.MAX_MODE),
    ("command", {"command": "/" + "c" * lim.MAX_PATH}, "command", lim.MAX_PATH),
    ("cwd", {"cwd": "/" + "d" * lim.MAX_PATH}, "cwd", lim.MAX_PATH),
    ("outputpath", {"outputpath": "/" + "o" * lim.MAX_PATH}, "outputpath", lim.MAX_PATH),
    ("errorpath", {"errorpath": "/" + "e" * lim.MAX_PATH}, "errorpath", lim.MAX_PATH),
    ("cobaltlog", {"cobaltlog": "/" + "l" * lim.MAX_PATH}, "cobaltlog", lim.MAX_PATH),
    ("args-count", {"args": ["x"] * (lim.MAX_ARGS + 1)}, "args", lim.MAX_ARGS),
    ("arg-size", {"args": [BIG_ARG + "a"]}, "args[0]", lim.MAX_ARG),
    ("args-total", {"args": [BIG_ARG] * (lim.MAX_ARGS_TOTAL // lim.MAX_ARG + 1)}, "args",
     lim.MAX_ARGS_TOTAL),
    ("env-count", {"env": {f"V{i}": "" for i in range(lim.MAX_ENV_VARS + 1)}}, "env",
     lim.MAX_ENV_VARS),
    ("env-name", {"env": {"N" * (lim.MAX_ENV_NAME + 1): "x"}}, "env", lim.MAX_ENV_NAME),
    ("env-value", {"env": {"BIG": BIG_ARG + "a"}}, "env BIG", lim.MAX_ENV_VALUE),
    ("env-total", {"env": {f"V{i}": BIG_ARG for i in range(lim.MAX_ENV_TOTAL // lim.MAX_ARG)}},
     "env", lim.MAX_ENV_TOTAL),
    ("dependencies-count", {"dependencies": list(range(1, lim.MAX_DEPENDENCIES + 2))},
     "dependencies", lim.MAX_DEPENDENCIES),
    ("dependency-id", {"dependencies": [2**62]}, "dependency", lim.MAX_JOBID),
    ("user_list-count", {"user_list": [f"u{i}" for i in range(lim.MAX_USER_LIST + 1)]},
     "user_list", lim.MAX_USER_LIST),
    ("user_list-name", {"user_list": ["u" * (lim.MAX_USER_NAME + 1)]}, "user_list",
     lim.MAX_USER_NAME),
    ("attrs", {"attrs": {"blob": "b" * lim.MAX_ATTRS}}, "attrs", lim.MAX_ATTRS),
    ("nodes", {"nodes": 2**62}, "node count", lim.MAX_NODES),
    ("procs", {"procs": 2**62}, "procs", lim.MAX_PROCS),
    ("walltime", {"walltime": 2**62}, "wall time", lim.MAX_WALLTIME_MINUTES),
    ("walltime-just-over", {"walltime": lim.MAX_WALLTIME + 1}, "wall time",
     lim.MAX_WALLTIME_MINUTES),
]


def test_every_limit_is_refused_with_its_field_and_limit(instance: Instance,
                                                         accounts: Accounts) -> None:
    """All cases on one instance per back end: each refusal names the field and the limit, no
    database error reaches the user, and the daemon keeps serving after all of them."""
    failures = []
    with _user_api(instance) as api:
        for case, overrides, field, limit in LIMIT_CASES:
            try:
                api.submit(_spec(instance, **overrides))
            except ValueError as exc:
                message = str(exc)
                if field not in message or str(limit) not in message:
                    failures.append(f"{case}: {message[:300]}")
            except Pyro5.errors.PyroError as exc:
                failures.append(f"{case}: {type(exc).__name__}: {str(exc)[:300]}")
            except Exception as exc:  # a database error crossing the wire
                failures.append(f"{case}: {type(exc).__name__}: {str(exc)[:300]}")
            else:
                failures.append(f"{case}: accepted")
        for key in ("command", "cwd"):  # required fields of the wrong type, before any limit
            message = _refused(api, _spec(instance, **{key: 5}))
            assert key in message and "absolute path" in message, message
        # At the limit is accepted, and the daemon still serves.
        at_limit = _spec(instance, jobname="j" * lim.MAX_JOBNAME,
                         project="p" * lim.MAX_PROJECT, walltime=lim.MAX_WALLTIME,
                         dependencies=list(range(1, lim.MAX_DEPENDENCIES + 1)))
        jobid = api.submit(at_limit)
    assert not failures, "\n".join(failures)
    assert instance.job(jobid)["jobname"] == "j" * lim.MAX_JOBNAME
    for account in (None, ALICE):
        shown = instance.command("qstat", "-lf", account=account, accounts=accounts)
        assert shown.returncode == 0 and str(jobid) in shown.stdout, shown.stderr
