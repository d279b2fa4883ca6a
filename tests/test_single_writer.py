"""Only one queue manager at a time writes a database; a second one refuses to start.

The queue manager's store (`JobStore(url, sole_writer=True)`) serves listings from its memory
copy and hands out job ids, which is only right while it is the database's only writer. Its
`init()` claims the database (a PostgreSQL advisory lock on a connection of its own, or a flock
on `<file>.writer-lock` beside a SQLite file) and keeps the claim until `close()` or its
process's death. Every test but the in-memory one runs on SQLite and on PostgreSQL (the
`database_url` fixture).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live import Instance
from sqlalchemy import text
from sqlalchemy.engine import make_url
from test_persistence import (  # noqa: F401 (database_url: a fixture)
    database_url,
    job_fields,
    qstat_ids,
)

from cobaltlite.config import load_config
from cobaltlite.errors import DatabaseInUseError
from cobaltlite.queue_manager.store import SQLITE_LOCK_SUFFIX, WRITER_LOCK_KEY, JobStore

IN_USE = "is already used by another queue manager"


def refusal(url: str) -> str:
    """The start of the message a refused queue manager gives: the database without password."""
    shown = make_url(url)._replace(password=None).render_as_string(hide_password=False)
    return f"the database {shown} {IN_USE}"


def claim(url: str) -> JobStore:
    store = JobStore(url, sole_writer=True)
    try:
        store.init()
    except BaseException:
        store.close()
        raise
    return store


def test_a_second_sole_writer_is_refused_until_the_first_closes(database_url: str) -> None:  # noqa: F811
    first = claim(database_url)
    try:
        first.add_job(job_fields("first"))
        with pytest.raises(DatabaseInUseError) as refused:
            claim(database_url)
        assert str(refused.value).startswith(refusal(database_url))
        assert str(refused.value).endswith(
            "stop it, or give this instance a database of its own")
        # Stores that are not the writer (tools, tests) claim nothing and still work.
        reader = JobStore(database_url)
        reader.init()
        assert [job["jobname"] for job in reader.jobs()] == ["first"]
        reader.close()
    finally:
        first.close()
    successor = claim(database_url)
    try:
        assert successor.add_job(job_fields("second")) == 2
    finally:
        successor.close()


def test_the_claim_is_the_lock_the_docs_name(database_url: str) -> None:  # noqa: F811
    """SQLite: `<file>.writer-lock`, mode 0600. PostgreSQL: advisory lock WRITER_LOCK_KEY, which
    pg_locks shows as classid 3541903202, objid 2517776305 (its two halves), objsubid 1."""
    assert WRITER_LOCK_KEY == -3234385653004093519
    store = claim(database_url)
    try:
        if database_url.startswith("sqlite"):
            lock = Path(make_url(database_url).database + SQLITE_LOCK_SUFFIX)
            assert stat.S_IMODE(lock.stat().st_mode) == 0o600
            with pytest.raises(DatabaseInUseError) as refused:
                claim(database_url)
            assert f"its lock, {lock}, is held" in str(refused.value)
            return
        held = _advisory_locks(database_url, "classid, objid, objsubid, granted")
        assert held == [(3541903202, 2517776305, 1, True)]
    finally:
        store.close()


def test_an_in_memory_sqlite_database_has_nothing_to_claim() -> None:
    """Each store's in-memory database is its own: no other process can reach it."""
    stores = [claim("sqlite://"), claim("sqlite://")]
    for store in stores:
        assert store.add_job(job_fields()) == 1
        store.close()


CHILD = """
import sys, time
from cobaltlite.queue_manager.store import JobStore
JobStore(sys.argv[1], sole_writer=True).init()
print("claimed", flush=True)
time.sleep(600)
"""


def test_the_claim_dies_with_its_process(database_url: str) -> None:  # noqa: F811
    child = subprocess.Popen([sys.executable, "-c", CHILD, database_url],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "claimed\n"
        with pytest.raises(DatabaseInUseError, match=IN_USE):
            claim(database_url)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    if database_url.startswith("sqlite"):
        claim(database_url).close()  # the kernel dropped the flock as the process died
        return
    # PostgreSQL ends the session, and its lock, when the server process reads the closed
    # socket: a moment, not a timeout (in practice the very first try succeeds).
    deadline = time.monotonic() + 5
    while True:
        try:
            claim(database_url).close()
            return
        except DatabaseInUseError:
            assert time.monotonic() < deadline, "the dead queue manager's lock outlived it"
            time.sleep(0.05)


def test_a_second_instance_on_the_same_database_refuses_to_start(database_url: str) -> None:  # noqa: F811
    first = Instance(settings={"database": database_url}).start_retrying()
    try:
        # The first instance's own database URL, whatever it is (a SQLite file: that file).
        shared = load_config(first.state_dir).database_url
        assert shared == database_url
        with pytest.raises(RuntimeError) as failed:
            Instance(settings={"database": shared}).start()  # it stops what it started
        # `cobaltlite up` exits non-zero naming the queue manager and its log, where the daemon
        # wrote why (Instance.start() quotes up's output and every log).
        report = str(failed.value)
        assert "queue-manager: exited with status 1" in report
        assert f"cobaltlite queue-manager: cannot start: {refusal(shared)}" in report

        # The first one noticed nothing. (Held: a queued job stays in qstat's listing.)
        jobid = first.qsub("-h", "-n", "1", "-t", "5", "/bin/true")
        assert jobid in qstat_ids(first)
    finally:
        first.stop()
    # Once it is stopped, an instance on the same database starts and takes over its jobs.
    successor = Instance(settings={"database": shared}).start_retrying()
    try:
        assert jobid in qstat_ids(successor)
        assert successor.qsub("-h", "-n", "1", "-t", "5", "/bin/true") == jobid + 1
    finally:
        successor.stop()


def _end_the_claims_session(url: str) -> None:
    """What a PostgreSQL restart does to the claim: the session holding the lock ends."""
    assert _advisory_locks(url, "pg_terminate_backend(pid)", "AND objid = 2517776305") == [
        (True,)]


def _advisory_locks(url: str, columns: str, condition: str = "") -> list[tuple[object, ...]]:
    """SELECT `columns` from pg_locks for the advisory locks of this database."""
    reader = JobStore(url)
    try:
        with reader.engine.connect() as conn:
            rows = conn.execute(text(
                f"SELECT {columns} FROM pg_locks WHERE locktype = 'advisory' {condition} AND "
                "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )).all()
            conn.commit()
    finally:
        reader.close()
    return [tuple(row) for row in rows]


def test_a_claim_the_database_dropped_is_taken_again(database_url: str) -> None:  # noqa: F811
    store = claim(database_url)
    try:
        assert store.renew_claim() is False  # held: nothing to do
        if database_url.startswith("sqlite"):
            return  # an flock ends only with its process or release()
        _end_the_claims_session(database_url)
        # Meanwhile a second queue manager could have started; renewing closes that window.
        assert store.renew_claim() is True
        with pytest.raises(DatabaseInUseError):
            claim(database_url)
        assert store.renew_claim() is False
        assert store.add_job(job_fields("after")) == 1
    finally:
        store.close()


def test_a_queue_manager_whose_claim_was_taken_must_step_down(database_url: str) -> None:  # noqa: F811
    if database_url.startswith("sqlite"):
        pytest.skip("an flock cannot be lost while its process lives")
    store = claim(database_url)
    try:
        _end_the_claims_session(database_url)
        successor = claim(database_url)  # the window a dropped claim leaves open
        try:
            with pytest.raises(DatabaseInUseError) as refused:
                store.renew_claim()
            assert str(refused.value).startswith(refusal(database_url))
        finally:
            successor.close()
    finally:
        store.close()


def test_after_taking_its_claim_again_a_queue_manager_sees_what_was_written_meanwhile(
    database_url: str,  # noqa: F811
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("an flock cannot be lost while its process lives")
    store = claim(database_url)
    try:
        store.add_job(job_fields("before"))
        _end_the_claims_session(database_url)
        interloper = claim(database_url)  # started in the window, took a job, stopped
        interloper.add_job(job_fields("meanwhile"))
        interloper.close()
        assert store.renew_claim() is True
        assert [job["jobname"] for job in store.jobs()] == ["before", "meanwhile"]
        assert [row[0] for row in store.queued_for_scoring()] == [1, 2]
    finally:
        store.close()
