"""The queue manager's store keeps every acknowledged job, on SQLite and on PostgreSQL.

Each test gets a database of its own: a SQLite file in a temporary directory, or a fresh
PostgreSQL database `cltest_<random>` created and dropped around it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import Pyro5.errors
import pytest
from live import Instance, fresh_postgres_database
from sqlalchemy import func, select

from cobaltlite.config import load_config
from cobaltlite.queue_manager.store import JobStore, jobs_table
from cobaltlite.rpc.client import connect


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.db'}"
        return
    with fresh_postgres_database() as url:
        yield url


def job_fields(name: str = "job") -> dict[str, Any]:
    return {
        "jobname": name, "user": "root", "uid": 0, "gid": 0, "queue": "default",
        "state": "queued", "nodes": 1, "walltime": 60, "procs": 1, "mode": "script",
        "project": "N/A", "command": "/bin/true", "args": [], "cwd": "/tmp", "env": {},
        "umask": 0o022, "outputpath": "/tmp/$jobid.output", "errorpath": "/tmp/$jobid.error",
        "cobaltlog": "/tmp/$jobid.cobaltlog", "submittime": 0.0, "score": 0.0,
        "user_hold": False, "admin_hold": False, "dependencies": [], "user_list": ["root"],
        "attrs": {},
    }


def row_counts(url: str) -> dict[int, int]:
    """How many rows the jobs table holds per job id, read straight from the database."""
    store = JobStore(url)
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(select(jobs_table.c.jobid, func.count())
                                .group_by(jobs_table.c.jobid))
            return {jobid: count for jobid, count in rows}
    finally:
        store.close()


# ---- the store --------------------------------------------------------------------------------


def test_job_ids_only_grow_across_store_instances(database_url: str) -> None:
    first = JobStore(database_url)
    first.init()
    ids = [first.add_job(job_fields(f"j{i}")) for i in range(3)]
    first.close()
    assert ids == [1, 2, 3]

    second = JobStore(database_url)
    second.init()  # a restarted queue manager runs init() again: the counter must survive it
    try:
        assert second.add_job(job_fields("after restart")) == 4
        stored = second.jobs(include_done=True)
        assert [job["jobid"] for job in stored] == [1, 2, 3, 4]
        assert stored[0]["outputpath"] == "/tmp/1.output"
    finally:
        second.close()


def test_concurrent_submissions_from_separate_stores_get_distinct_ids(database_url: str) -> None:
    JobStore(database_url).init()
    threads, per_thread = 4, 15
    barrier = threading.Barrier(threads)

    def submit(worker: int) -> list[int]:
        store = JobStore(database_url)
        try:
            barrier.wait()
            return [store.add_job(job_fields(f"w{worker}-{i}")) for i in range(per_thread)]
        finally:
            store.close()

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(submit, range(threads)))
    acknowledged = [jobid for ids in results for jobid in ids]
    total = threads * per_thread
    assert sorted(acknowledged) == list(range(1, total + 1))
    for ids in results:
        assert ids == sorted(ids)  # each submitter sees its own ids grow
    assert row_counts(database_url) == dict.fromkeys(range(1, total + 1), 1)
    names = {job["jobid"]: job["jobname"] for job in JobStore(database_url).jobs()}
    for worker, ids in enumerate(results):
        assert [names[j] for j in ids] == [f"w{worker}-{i}" for i in range(per_thread)]


# ---- a live queue manager killed and restarted ------------------------------------------------


@pytest.fixture
def instance(database_url: str) -> Iterator[Instance]:
    running = Instance(machine="flat:4", database=database_url).start_retrying()
    yield running
    running.stop()



def queue_manager_pid(instance: Instance) -> int:
    return int((instance.state_dir / "run" / "queue-manager.pid").read_text())


def kill_queue_manager(instance: Instance) -> None:
    pid = queue_manager_pid(instance)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    # Gone, not merely dead: `cobaltlite up` takes a not yet reaped zombie for a live process.
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"queue manager {pid} survived SIGKILL"
        time.sleep(0.05)


def restart(instance: Instance) -> None:
    """`cobaltlite up` starts the missing queue manager. Its exit status is not trusted here: it
    races with the new daemon's pid file (see test_daemon_pidfile.py); the new pid and a working
    qstat are what count."""
    old = queue_manager_pid(instance)
    ran = instance.cobaltlite("up")
    assert "queue-manager: started" in ran.stdout, ran.stdout + ran.stderr
    deadline = time.monotonic() + 10
    while True:
        try:
            new = queue_manager_pid(instance)
        except (OSError, ValueError):
            new = old
        if new != old and instance.command("qstat").returncode == 0:
            return
        assert time.monotonic() < deadline, f"queue manager not back:\n{ran.stdout}"
        time.sleep(0.1)


def qstat_ids(instance: Instance) -> list[int]:
    shown = instance.command("qstat")
    assert shown.returncode == 0, shown.stderr
    return sorted(int(line.split()[0]) for line in shown.stdout.splitlines()[2:])


def submit(instance: Instance) -> int | None:
    """qsub a short job; its id if qsub acknowledged it, else None."""
    ran = instance.command("qsub", "-n", "1", "-t", "5", "/bin/true")
    return int(ran.stdout) if ran.returncode == 0 else None


def test_acknowledged_jobs_survive_a_killed_queue_manager(instance: Instance) -> None:
    stopped = instance.command("schedctl", "--stop")
    assert stopped.returncode == 0, stopped.stderr
    with ThreadPoolExecutor(4) as pool:
        acknowledged = list(pool.map(lambda _: submit(instance), range(20)))
    assert sorted(jobid or 0 for jobid in acknowledged) == list(range(1, 21))

    kill_queue_manager(instance)
    assert instance.command("qstat").returncode != 0  # it really is gone
    restart(instance)
    assert qstat_ids(instance) == list(range(1, 21))
    assert row_counts(load_database_url(instance)) == dict.fromkeys(
        range(1, 21), 1)
    assert {instance.job(j)["state"] for j in range(1, 21)} == {"queued"}
    # The id counter went on where it stopped.
    assert submit(instance) == 21


def test_a_kill_during_submissions_loses_no_acknowledged_job(instance: Instance) -> None:
    """Four clients keep submitting (straight to the user socket, for speed) while the queue
    manager is killed and restarted: every id acknowledged is stored once; the others failed
    loudly."""
    stopped = instance.command("schedctl", "--stop")
    assert stopped.returncode == 0, stopped.stderr
    uri = f"PYRO:queue-manager-user@./u:{load_config(instance.state_dir).user_socket}"
    spec = {"nodes": 1, "walltime": 300, "command": "/bin/true", "cwd": "/tmp"}
    acknowledged: list[int] = []
    refused = 0
    lock = threading.Lock()
    killing, back = threading.Event(), threading.Event()

    def keep_submitting() -> None:
        nonlocal refused
        proxy = connect(uri, timeout=10)
        deadline = time.monotonic() + 40
        while (not back.is_set() or len(acknowledged) < 60) and time.monotonic() < deadline:
            try:
                jobid = proxy.submit(spec)
            except Pyro5.errors.CommunicationError:
                with lock:
                    refused += 1
                proxy._pyroRelease()
                proxy = connect(uri, timeout=10)
                time.sleep(0.02)
                continue
            with lock:
                acknowledged.append(jobid)
                if len(acknowledged) == 20:
                    killing.set()
        proxy._pyroRelease()

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(keep_submitting) for _ in range(4)]
        try:
            assert killing.wait(30)
            kill_queue_manager(instance)
            restart(instance)
        finally:
            back.set()
        for future in futures:
            future.result(timeout=60)
    assert refused > 0, "no submission met the dead queue manager; the test proved nothing"
    assert len(set(acknowledged)) == len(acknowledged), "an id was acknowledged twice"
    counts = row_counts(load_config(instance.state_dir).database_url)
    assert set(counts.values()) == {1}
    missing = sorted(set(acknowledged) - set(counts))
    assert not missing, f"acknowledged but lost: {missing}"
    # At most the submissions cut off between their commit and their reply are stored without
    # having been acknowledged (one per client).
    assert len(counts) - len(acknowledged) <= 4
    assert set(acknowledged) <= set(qstat_ids(instance))


def load_database_url(instance: Instance) -> str:
    return load_config(instance.state_dir).database_url


def test_the_instance_really_uses_the_backend_it_was_given(
    instance: Instance, database_url: str
) -> None:
    assert load_database_url(instance) == database_url
    jobid = submit(instance)
    assert jobid is not None
    assert jobid in row_counts(database_url)
    # The SQLite default file of the state directory is not used behind the URL's back.
    if database_url.startswith("postgresql"):
        assert not (instance.state_dir / "cobaltlite.db").exists()



def test_a_database_made_before_the_queue_commands_gains_their_columns(
    database_url: str,
) -> None:
    """An instance upgraded from the release before issue 10 keeps its jobs: the store adds
    the new job columns (dep_frac, score_adjust, notify, ..., routed_from of issue 17) with
    their defaults at start."""
    from sqlalchemy import Column, MetaData, Table, create_engine, insert

    added = {"dep_frac", "score_adjust", "notify", "inputfile", "debuglog", "geometry",
             "run_project", "preemptable", "disable_preboot", "routed_from"}
    old = MetaData()
    Table("jobs", old, *(Column(c.name, c.type, primary_key=c.primary_key,
                                nullable=c.nullable, autoincrement=False)
                         for c in jobs_table.columns if c.name not in added))
    engine = create_engine(database_url)
    old.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(old.tables["jobs"]).values(jobid=1, **job_fields("before")))
    engine.dispose()
    store = JobStore(database_url)
    try:
        store.init()
        job = store.job(1)
        assert job is not None and job["jobname"] == "before"
        assert (job["score_adjust"], job["dep_frac"], job["notify"], job["preemptable"],
                job["routed_from"]) == (0.0, None, "", False, "")
    finally:
        store.close()
