"""The queue manager's memory copy of unfinished jobs always says what the database says.

The queue manager's store (`JobStore(url, sole_writer=True)`) answers qstat and the scheduler
from memory. After any sequence of submissions, starts, ends, holds and score writes, what it
answers must equal what a store reading the database answers, field for field, in the same
order: otherwise qstat would show, and the scheduler would start, something that is not so.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_persistence import database_url, job_fields  # noqa: F401 (database_url: a fixture)

from cobaltlite.queue_manager.store import JOB_FIELDS, JobStore

Operation = tuple[str, int, int]

operations = st.lists(
    st.tuples(st.sampled_from(["submit", "start", "run", "end", "hold", "release", "score",
                               "kill"]),
              st.integers(0, 30), st.integers(0, 1000)),
    max_size=40,
)


def apply(store: JobStore, ops: list[Operation]) -> None:
    """Run `ops` through the store as the queue manager would; the second number picks a
    job (among those submitted so far), the third is a value."""
    jobids: list[int] = []
    for name, pick, value in ops:
        if name == "submit" or not jobids:
            fields = job_fields(f"job{value}")
            fields.update(nodes=1 + value % 64, walltime=60 + value, submittime=float(value),
                          dependencies=[jobids[-1]] if jobids and value % 3 == 0 else [],
                          env={"N": str(value)} if value % 2 else {})
            jobids.append(store.add_job(fields))
            continue
        jobid = jobids[pick % len(jobids)]
        if name == "start":
            store.update_job(jobid, {"state": "starting", "location": str(value)},
                             expect_states=["queued"])
        elif name == "run":
            store.update_job(jobid, {"state": "running", "starttime": float(value)},
                             expect_states=["starting"])
        elif name == "kill":
            store.update_job(jobid, {"state": "killing"}, expect_states=["starting", "running"])
        elif name == "end":
            store.update_job(jobid, {"state": "done", "endtime": float(value),
                                     "exit_status": value % 3, "end_reason": "exited"})
        elif name in ("hold", "release"):
            store.update_job(jobid, {"user_hold": name == "hold"}, expect_states=["queued"])
        else:
            store.set_scores({j: float(value + j) for j in jobids[pick % len(jobids):]})


def assert_same(memory: JobStore, url: str) -> None:
    database = JobStore(url)
    try:
        assert memory.job_table() == database.job_table()
        assert memory.queued_for_scoring() == database.queued_for_scoring()
        some = ["user", "state", "score", "dependencies", "location"]
        assert memory.job_table(fields=some) == database.job_table(fields=some)
        for states in (["queued"], ["starting", "running", "killing"]):
            assert memory.job_table(states=states) == database.job_table(states=states)
        everything = database.job_table(include_done=True)[1]
        for row in everything:
            assert memory.job(row[0]) == dict(zip(JOB_FIELDS, row, strict=True))
        listed = memory.job_table(jobids=[r[0] for r in everything[::2]])
        assert listed == database.job_table(jobids=[r[0] for r in everything[::2]])
    finally:
        database.close()


@settings(max_examples=25, deadline=None)
@given(operations)
def test_the_memory_copy_matches_the_database_after_any_history(ops: list[Operation]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'jobs.db'}"
        store = JobStore(url, sole_writer=True)
        store.init()
        try:
            apply(store, ops)
            assert_same(store, url)
        finally:
            store.close()
        # A restarted queue manager rebuilds the copy from the database alone (once the first
        # is gone: a second writer on one database is refused, tests/test_single_writer.py).
        restarted = JobStore(url, sole_writer=True)
        restarted.init()
        try:
            assert_same(restarted, url)
        finally:
            restarted.close()


def test_the_memory_copy_matches_the_database_on_both_backends(database_url: str) -> None:  # noqa: F811
    rng = random.Random(7)
    ops: list[Any] = [(rng.choice(["submit", "submit", "start", "run", "end", "hold", "release",
                                   "score", "kill"]), rng.randrange(30), rng.randrange(1000))
                      for _ in range(120)]
    store = JobStore(database_url, sole_writer=True)
    store.init()
    try:
        apply(store, ops)
        assert_same(store, database_url)
    finally:
        store.close()


def test_the_copy_holds_what_the_database_stored_not_what_was_sent(tmp_path: Path) -> None:
    """SQLite turns "4" into 4 in an INTEGER column and 1 into True for a boolean: the copy
    must show the same, or qstat would change its answer after a restart."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    store = JobStore(url, sole_writer=True)
    store.init()
    try:
        fields = job_fields()
        fields.update(procs="4", user_hold=1)
        jobid = store.add_job(fields)
        assert store.job(jobid)["procs"] == 4
        assert store.job(jobid)["user_hold"] is True
        assert_same(store, url)
    finally:
        store.close()


def test_listings_do_not_wait_for_a_write_stuck_on_the_database(tmp_path: Path) -> None:
    """A write waiting for the database (here: another connection holds SQLite's write lock)
    must not hold qstat or a scheduling pass, which read the memory copy."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    store = JobStore(url, sole_writer=True)
    store.init()
    jobid = store.add_job(job_fields())
    blocker = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the database's write lock, held until COMMIT
        writer = threading.Thread(target=store.update_job,
                                  args=(jobid, {"state": "starting", "location": "0"}))
        writer.start()
        while not store._write_order.locked():  # the writer is inside its write now
            time.sleep(0.01)
        # Both return while the writer still waits for the database.
        assert [row[0] for row in store.job_table()[1]] == [jobid]
        assert [row[0] for row in store.queued_for_scoring()] == [jobid]
        assert writer.is_alive()
        blocker.execute("COMMIT")
        writer.join()
        assert store.job(jobid)["state"] == "starting"
    finally:
        blocker.close()
        store.close()
