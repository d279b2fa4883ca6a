"""A real cobaltlite instance for end-to-end tests: every component a separate process.

`Instance.start()` writes a config into a fresh state directory under /tmp (world-traversable,
so other test accounts can reach the user socket), runs `cobaltlite up`, and `stop()` runs
`cobaltlite down` and kills any job runner left behind. Commands run as real subprocesses,
as root or as another account.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from unix_users import Accounts, as_account

POSTGRES_URL = os.environ.get(
    "COBALTLITE_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def postgres_admin_connection() -> Any:
    """An autocommit psycopg connection to POSTGRES_URL's server (to create and drop test
    databases); the calling test is skipped when the server cannot be reached."""
    import pytest
    from sqlalchemy.engine import make_url

    psycopg = pytest.importorskip("psycopg")
    url = make_url(POSTGRES_URL)
    try:
        return psycopg.connect(host=url.host, port=url.port or 5432, user=url.username,
                               password=url.password, dbname=url.database, autocommit=True,
                               connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {url.host}:{url.port} is unreachable ({exc}); "
                    "set COBALTLITE_TEST_POSTGRES to a reachable server")


@contextlib.contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """The URL of a new, empty database on POSTGRES_URL's server, dropped afterwards (with any
    connection still open to it)."""
    from sqlalchemy.engine import make_url

    name = f"cltest_{uuid.uuid4().hex[:12]}"
    with postgres_admin_connection() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with postgres_admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Instance:
    machine: str = "flat:4"
    database: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    state_dir: Path = field(init=False)

    def start(self) -> Instance:
        self.state_dir = Path(tempfile.mkdtemp(prefix="cltest-live-", dir="/tmp"))
        self.state_dir.chmod(0o755)
        self.jobs_dir = self.state_dir / "jobs"
        self.jobs_dir.mkdir()
        self.jobs_dir.chmod(0o1777)  # any account may write its job output here
        config = {"machine": self.machine, "database": self.database, "scheduler_interval": 1,
                  "metrics_interval": 1, "kill_grace": 2, **self.settings}
        (self.state_dir / "cobaltlite.yaml").write_text(yaml.safe_dump(config))
        ran = self.cobaltlite("up")
        if ran.returncode != 0:
            logs = "\n".join(p.read_text() for p in (self.state_dir / "log").glob("*.log"))
            self.stop()  # a fixture that fails here never reaches its teardown
            raise RuntimeError(f"cobaltlite up failed:\n{ran.stdout}\n{ran.stderr}\n{logs}")
        return self

    def start_retrying(self) -> Instance:
        """Start, once more if `cobaltlite up` lost the pid-file race (test_daemon_pidfile.py);
        a failed start has already cleaned up after itself."""
        try:
            return self.start()
        except RuntimeError:
            return self.start()

    def stop(self) -> None:
        self.cobaltlite("down")
        for record in (self.state_dir / "system").glob("*.json"):
            pid = json.loads(record.read_text()).get("runner_pid")
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "COBALTLITE_STATE_DIR": str(self.state_dir)}

    def cobaltlite(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cobaltlite.cli", *args],
                              env=self.env, capture_output=True, text=True, timeout=120)

    def command(self, name: str, *args: str, account: str | None = None,
                accounts: Accounts | None = None, cwd: Path | None = None
                ) -> subprocess.CompletedProcess[str]:
        """Run qsub, qstat, qdel or schedctl as root, or as `account`."""
        module = f"cobaltlite.commands.{name}"
        cwd = cwd or self.jobs_dir
        if account is None:
            return subprocess.run([sys.executable, "-m", module, *args], env=self.env,
                                  capture_output=True, text=True, timeout=60, cwd=cwd)
        assert accounts is not None
        env = {**accounts.env, "COBALTLITE_STATE_DIR": str(self.state_dir)}
        return subprocess.run([accounts.python, "-m", module, *args], env=env,
                              capture_output=True, text=True, timeout=60, cwd=cwd,
                              **as_account(account))

    def qsub(self, *args: str, **kwargs: Any) -> int:
        ran = self.command("qsub", *args, **kwargs)
        assert ran.returncode == 0, f"qsub failed ({ran.returncode}): {ran.stderr}"
        return int(ran.stdout.strip())

    def job(self, jobid: int) -> dict[str, Any]:
        """The job's row as the queue manager stores it (read from the database directly)."""
        from cobaltlite.config import load_config
        from cobaltlite.queue_manager.store import JobStore

        store = JobStore(load_config(self.state_dir).database_url)
        try:
            found = store.job(jobid)
        finally:
            store.close()
        assert found is not None, f"job {jobid} is not in the database"
        return found

    def long_listing(self, jobid: int) -> dict[str, str]:
        """`qstat -f -l JOBID` as field: value, without the fields that change with the clock
        (QueuedTime, RunTime, TimeRemaining), so two listings of an unchanged job are equal."""
        shown = self.command("qstat", "-f", "-l", str(jobid))
        assert shown.returncode == 0, shown.stderr
        fields = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
                  for line in shown.stdout.splitlines()[1:] if line}
        for name in ("QueuedTime", "RunTime", "TimeRemaining"):
            fields.pop(name)
        return fields

    def wait_for(self, jobid: int, states: set[str], timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(jobid)
            if job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {jobid} stayed {job['state']}, wanted {states}")
            time.sleep(0.2)


def ok(ran: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that must have succeeded, silently."""
    assert ran.returncode == 0, f"exit {ran.returncode}: {ran.stderr}"
    assert ran.stderr == ""
    return ran.stdout


def until(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Wait for `condition()` to be true (a file, a state) and return it; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)
