"""The queue manager's durable state: jobs, queues and the job-id counter, through SQLAlchemy.

SQLite (WAL journal, synchronous=FULL so a commit survives power loss) is the embedded default;
PostgreSQL is used by URL. Every write is one transaction: a submission is acknowledged only
after its commit, and a crash at any moment leaves either the whole change or none of it.

The queue manager is the database's only writer, so its store (`sole_writer=True`) also keeps
every unfinished job in memory, updated after each commit: listing 10,000 jobs for qstat or for
a scheduling pass then reads no database at all. The database stays the record; the memory copy
is rebuilt from it at start, so a crash loses nothing that was acknowledged.

Being the only writer is claimed, not assumed: `init()` of a sole-writer store takes a lock that
lives exactly as long as this process holds the store, and refuses to start (DatabaseInUseError)
when another queue manager holds it, since two would hand out the same job ids and each serve a
stale copy. On PostgreSQL the lock is the session-level advisory lock WRITER_LOCK_KEY, taken on a
connection of its own; on SQLite it is an exclusive flock on `<database file>.writer-lock`. Both
vanish with the process, so a queue manager killed with SIGKILL can be restarted at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    event,
    false,
    func,
    insert,
    inspect,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from sqlalchemy.schema import CreateColumn
from sqlalchemy.util import asbool

from cobaltlite.errors import DatabaseInUseError, InputError
from cobaltlite.jobs.queues import QUEUE_STATES
from cobaltlite.jobs.states import DONE, QUEUED

metadata = MetaData()

jobs_table = Table(
    "jobs",
    metadata,
    Column("jobid", Integer, primary_key=True, autoincrement=False),
    Column("jobname", String(256), nullable=False),
    Column("user", String(64), nullable=False, index=True),
    Column("uid", Integer, nullable=False),
    Column("gid", Integer, nullable=False),
    Column("queue", String(64), nullable=False),
    Column("state", String(16), nullable=False, index=True),
    Column("nodes", Integer, nullable=False),
    Column("walltime", Integer, nullable=False),  # seconds
    Column("procs", Integer, nullable=False),
    Column("mode", String(16), nullable=False),
    Column("project", String(128), nullable=False),
    Column("command", Text, nullable=False),
    Column("args", JSON, nullable=False),
    Column("cwd", Text, nullable=False),
    Column("env", JSON, nullable=False),
    Column("umask", Integer, nullable=False),
    Column("outputpath", Text, nullable=False),
    Column("errorpath", Text, nullable=False),
    Column("cobaltlog", Text, nullable=False),
    Column("submittime", Float, nullable=False),
    Column("starttime", Float),
    Column("endtime", Float),
    Column("location", Text),
    Column("exit_status", Integer),
    Column("end_reason", String(32)),
    Column("score", Float, nullable=False, default=0.0),
    Column("user_hold", Boolean, nullable=False, default=False),
    Column("admin_hold", Boolean, nullable=False, default=False),
    Column("dependencies", JSON, nullable=False),
    Column("user_list", JSON, nullable=False),
    Column("attrs", JSON, nullable=False),
    # Added with the queue-manager commands (issue 10); _add_missing_columns adds them to a
    # database made before, with these defaults.
    Column("dep_frac", Float),  # schedctl --inherit; None: the configured dep_frac
    # Added to the policy's score at every pass: schedctl --score, qalter --defer, and the
    # share of a parent's score inherited on a satisfied dependency.
    Column("score_adjust", Float, nullable=False, server_default="0"),
    Column("notify", Text, nullable=False, server_default=""),
    Column("inputfile", Text, nullable=False, server_default=""),
    Column("debuglog", Text, nullable=False, server_default=""),
    Column("geometry", String(64), nullable=False, server_default=""),
    Column("run_project", Boolean, nullable=False, server_default=false()),
    Column("preemptable", Boolean, nullable=False, server_default=false()),
    Column("disable_preboot", Boolean, nullable=False, server_default=false()),
    # The queue a job was submitted or moved to when a queue layout routed it elsewhere
    # (queue_manager/routing.py); "": it is in the queue it named. qalter routes it again.
    Column("routed_from", String(64), nullable=False, server_default=""),
)

queues_table = Table(
    "queues",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("state", String(16), nullable=False),
    Column("policy", String(64), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("restrictions", JSON, nullable=False),
)

counters_table = Table(
    "counters",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("value", Integer, nullable=False),
)

# Each user's finished usage, decayed to `reference` (cobaltlite/policy/usage.py): what the
# fairshare input `user_usage` needs to survive a restart. Running jobs are rebuilt from jobs.
user_usage_table = Table(
    "user_usage",
    metadata,
    Column("user", String(64), primary_key=True),
    Column("usage", Float, nullable=False),  # decayed node-seconds at `reference`
    Column("reference", Float, nullable=False),  # seconds since the epoch
)

# setres's reservations (cobaltlite/reservations): the row is Reservation.to_row(), whole.
reservations_table = Table(
    "reservations",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("data", JSON, nullable=False),
)



_JSON_COLUMNS = frozenset(c.name for c in jobs_table.columns if isinstance(c.type, JSON))
JOB_FIELDS = tuple(c.name for c in jobs_table.columns)
_FIELD_AT = {name: i for i, name in enumerate(JOB_FIELDS)}


def _decode_json(text: Any) -> Any:
    """Decode a JSON column's text; the empty list and mapping, by far the commonest values,
    are built directly. PostgreSQL's driver hands over JSON already decoded."""
    if not isinstance(text, str):
        return text
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


SQLITE_FILE_MODE = 0o600
"""The mode of an SQLite database and its -wal and -shm files: they hold every job's
environment, and any account that can open -shm can hold a lock that stops the queue manager's
writes. SQLite gives -wal and -shm the database file's mode, so creating that file private is
what keeps all three private."""
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def sqlite_file(url: URL) -> str | None:
    """The file of an SQLite URL, or None for an in-memory database."""
    database = url.database
    if database and asbool(url.query.get("uri", False)):  # an SQLite URI filename: file:PATH
        database = unquote(urlsplit(database).path)
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        return None
    return database


def make_private(database: str) -> None:
    """Create the SQLite file `database` with mode 0600 if it is missing, and take group and
    other access away from it and its companion files (an instance made before this was 0644)."""
    # FileNotFoundError: the directory is missing, and SQLite will say so.
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SQLITE_FILE_MODE))
    for suffix in SQLITE_COMPANIONS:
        path = database + suffix
        # PermissionError: another account's file, which a reader cannot change (its owner's
        # queue manager does).
        with contextlib.suppress(FileNotFoundError, PermissionError):
            if os.stat(path).st_mode & 0o077:
                os.chmod(path, SQLITE_FILE_MODE)


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get WAL and full durability on every connection, and
    are private to the account that runs the store (make_private)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30})
        database = sqlite_file(make_url(url))
        if database is not None:
            make_private(database)  # before SQLite creates it with the umask's mode

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            if database is not None:
                make_private(database)
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()
            if database is not None:
                make_private(database)  # -wal and -shm, made by the journal mode just now

        return engine
    return create_engine(url, pool_pre_ping=True, connect_args=server_connect_args(url))


CONNECT_TIMEOUT = 10
"""Seconds to establish a connection to a database server. Without it, a server that accepts the
connection and then says nothing held the queue manager's start for ever."""


def server_connect_args(url: str) -> dict[str, Any]:
    """Driver arguments for a database server: libpq's connect_timeout for PostgreSQL."""
    return {"connect_timeout": CONNECT_TIMEOUT} if url.startswith("postgresql") else {}


WRITER_LOCK_NAME = "cobaltlite.queue-manager"
WRITER_LOCK_KEY = int.from_bytes(hashlib.sha256(WRITER_LOCK_NAME.encode()).digest()[:8], "big",
                                 signed=True)
"""PostgreSQL's advisory-lock key for the queue manager's claim: the first 8 bytes of the SHA-256
of WRITER_LOCK_NAME, signed: -3234385653004093519. pg_locks shows it as locktype `advisory`,
classid 3541903202, objid 2517776305, objsubid 1. Advisory locks are per database, so instances
on other databases of the same server do not meet it."""
SQLITE_LOCK_SUFFIX = ".writer-lock"


class WriterClaim(Protocol):
    """A queue manager's hold on its database (claim_sole_writer)."""

    def renew(self) -> bool:
        """Take the claim again if the database dropped it; True if it had to. Raises
        DatabaseInUseError if another queue manager took it meanwhile."""
        ...

    def release(self) -> None: ...


def claim_sole_writer(url: str) -> WriterClaim | None:
    """Claim the database at `url` for this process's queue manager, or return None when there
    is nothing to claim (an in-memory SQLite database, which no other process can reach).
    Raises DatabaseInUseError if another process holds the claim."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _claim_sqlite(parsed)
    if backend == "postgresql":
        return _claim_postgresql(parsed)
    raise InputError(f"database {parsed.render_as_string(hide_password=True)}: the queue "
                     "manager runs on SQLite or PostgreSQL only")


def _in_use(url: URL, lock: str) -> DatabaseInUseError:
    # Without its password (URL.set() ignores None, hence the NamedTuple's _replace).
    shown = url._replace(password=None).render_as_string(hide_password=False)
    return DatabaseInUseError(
        f"the database {shown} is already used by another queue manager (its lock, {lock}, "
        "is held); stop it, or give this instance a database of its own")


class _FileClaim:
    """An flock on a lock file: nothing but this process's death or release() ends it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def renew(self) -> bool:
        return False

    def release(self) -> None:
        os.close(self._fd)


def _claim_sqlite(url: URL) -> _FileClaim | None:
    database = sqlite_file(url)
    if database is None:
        return None
    # Next to the real file, so every spelling of its path (symbolic links, relative paths)
    # meets the same lock. A file of its own rather than the database itself: SQLite holds
    # POSIX locks on the database, and closing any descriptor of that file in this process would
    # silently drop them. Never deleted: unlinking a lock file lets a waiter lock a dead inode.
    # os.open's descriptor is not inherited across exec, so no job runner can keep it alive.
    lock_path = os.path.realpath(database) + SQLITE_LOCK_SUFFIX
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _in_use(url, lock_path) from None
    return _FileClaim(fd)


class _PostgresClaim:
    """A session-level advisory lock, which lasts as long as the session that took it.

    It needs a connection nobody else may close: an engine of its own without a pool. The
    store's pool closes and replaces its connections behind our back (pool_pre_ping after a
    failed ping, recycling, invalidation after a disconnect, dispose() at close), and a
    held-out pooled connection would still count against the pool. This one is never checked
    in: it ends at release, when this process dies and the server sees its socket close, or when
    the server restarts or an administrator ends the session. Then the lock is gone while the
    queue manager still runs, so the queue manager calls renew() periodically.
    """

    def __init__(self, url: URL) -> None:
        self._url = url
        self._connection = self._take()

    def _take(self) -> Connection:
        # AUTOCOMMIT keeps the session idle rather than "idle in transaction", which
        # idle_in_transaction_session_timeout would end, taking the lock with it.
        connection = create_engine(self._url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
                                   connect_args=server_connect_args(str(self._url))).connect()
        try:
            if (connection.dialect.server_version_info or (0,)) >= (14,):
                # A server-wide idle_session_timeout (PostgreSQL 14+) would end this session.
                connection.execute(text("SET idle_session_timeout = 0"))
            claimed = connection.execute(
                select(func.pg_try_advisory_lock(WRITER_LOCK_KEY))).scalar()
        except BaseException:
            connection.close()
            raise
        if not claimed:
            connection.close()
            raise _in_use(self._url, f"PostgreSQL advisory lock {WRITER_LOCK_KEY}")
        return connection

    def renew(self) -> bool:
        try:
            self._connection.execute(select(1))
            return False
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        # The session is gone, and the lock with it. A server that is still down makes _take
        # raise, and the next renew() tries again.
        with contextlib.suppress(DBAPIError):
            self._connection.close()
        self._connection = self._take()
        return True

    def release(self) -> None:
        self._connection.close()


def _claim_postgresql(url: URL) -> _PostgresClaim:
    return _PostgresClaim(url)


class JobStore:
    """Jobs, queues and the id counter in one database.

    `sole_writer`: this store is the only one writing the database (the queue manager's), so it
    claims the database at `init()` (claim_sole_writer; held until `close()`), then keeps
    unfinished jobs in memory and answers listings from there. Stores that share a database
    with a writer elsewhere (tests, tools) leave it off, claim nothing and always read the
    database.
    """

    def __init__(self, url: str, *, sole_writer: bool = False) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._sole_writer = sole_writer
        self._unfinished: _UnfinishedJobs | None = None
        self._claim: WriterClaim | None = None
        self._write_order = threading.Lock()

    def init(self, default_queue_state: str = "running", default_policy: str = "default") -> None:
        """Claim the database if this is the sole writer (DatabaseInUseError if another queue
        manager holds it), then create the schema if missing, the job-id counter and the
        `default` queue."""
        # Before anything is read: a copy built while another writer still runs would be stale.
        if self._sole_writer and self._claim is None:
            self._claim = claim_sole_writer(self.url)
        metadata.create_all(self.engine)
        _add_missing_columns(self.engine)
        with self.engine.begin() as conn:
            if (
                conn.execute(
                    select(counters_table.c.value).where(counters_table.c.name == "jobid")
                ).first()
                is None
            ):
                conn.execute(insert(counters_table).values(name="jobid", value=0))
            if (
                conn.execute(
                    select(queues_table.c.name).where(queues_table.c.name == "default")
                ).first()
                is None
            ):
                conn.execute(
                    insert(queues_table).values(
                        name="default",
                        state=default_queue_state,
                        policy=default_policy,
                        priority=0,
                        restrictions={},
                    )
                )
        if self._sole_writer:
            self._unfinished = _UnfinishedJobs(
                self._select_jobs(None, None, include_done=False, chosen=None))

    def close(self) -> None:
        self.engine.dispose()
        # Released last, once this store's own connections are gone.
        if self._claim is not None:
            self._claim.release()
            self._claim = None

    def renew_claim(self) -> bool:
        """Take the database claim again if the database dropped it (a PostgreSQL restart ends
        the session that held it); True if it had to. DatabaseInUseError if another queue
        manager claimed the database meanwhile: this one must stop."""
        if self._claim is None or not self._claim.renew():
            return False
        # Another queue manager may have written while the claim was down: start again from
        # the database, as at start-up.
        with self._writing():
            if self._unfinished is not None:
                self._unfinished.replace(
                    self._select_jobs(None, None, include_done=False, chosen=None))
        return True

    # ---- jobs -------------------------------------------------------------------------

    def add_job(self, fields: Mapping[str, Any]) -> int:
        """Insert a job with the next id; return the id once the transaction has committed.

        The id comes from a counter row updated in the same transaction: PostgreSQL locks the
        row and SQLite the database, so concurrent submissions get distinct, growing ids, and an
        id is never reused (a rolled-back id was never acknowledged).
        """
        with self._writing():
            jobid, row = self._insert_job(fields)
            if self._unfinished is not None:
                self._unfinished.add(row)
        return jobid

    def _insert_job(self, fields: Mapping[str, Any]) -> tuple[int, list[Any]]:
        with self.engine.begin() as conn:
            jobid = conn.execute(
                update(counters_table)
                .where(counters_table.c.name == "jobid")
                .values(value=counters_table.c.value + 1)
                .returning(counters_table.c.value)
            ).scalar_one()
            row = dict(fields)
            row["jobid"] = jobid
            for key in ("jobname", "outputpath", "errorpath", "cobaltlog"):
                row[key] = _expand_jobid(row[key], jobid)
            # Cobalt expands $jobid in environment values too (qsub --env): only the server
            # knows the id.
            row["env"] = {name: _expand_jobid(value, jobid)
                          for name, value in row.get("env", {}).items()}
            conn.execute(insert(jobs_table).values(**row))
            # Read back in the same transaction, so the memory copy holds what the database
            # holds (its column types, its defaults), not what the client sent.
            stored = _read_rows(conn, _select_columns(list(JOB_FIELDS))
                                .where(jobs_table.c.jobid == jobid), list(JOB_FIELDS))[0]
        return jobid, stored

    def jobs(
        self,
        *,
        jobids: Iterable[int] | None = None,
        states: Iterable[str] | None = None,
        include_done: bool = False,
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Jobs in id order, as dicts; with `fields`, only those columns (and the job id)."""
        names, rows = self.job_table(jobids=jobids, states=states, include_done=include_done,
                                     fields=fields)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def job_table(
        self,
        *,
        jobids: Iterable[int] | None = None,
        states: Iterable[str] | None = None,
        include_done: bool = False,
        fields: Iterable[str] | None = None,
    ) -> tuple[list[str], list[list[Any]]]:
        """Jobs in id order as (column names, value lists): the shape qstat's data travels in,
        so listing 10,000 jobs builds no dict per row."""
        if fields is None:
            names = list(JOB_FIELDS)
        else:
            unknown = set(fields) - _FIELD_AT.keys()
            if unknown:
                raise ValueError(f"unknown job field(s): {', '.join(sorted(unknown))}")
            names = [name for name in JOB_FIELDS if name in fields or name == "jobid"]
        state_set = None if states is None else set(states)
        unfinished = self._unfinished
        if unfinished is not None and not include_done and (
                state_set is None or DONE not in state_set):
            return names, unfinished.table(names, jobids, state_set)
        return names, self._select_jobs(jobids, state_set, include_done, names)

    def _select_jobs(
        self,
        jobids: Iterable[int] | None,
        states: set[str] | None,
        include_done: bool,
        chosen: list[str] | None,
    ) -> list[list[Any]]:
        """Rows of the `chosen` columns (all when None) from the database, in id order."""
        names = list(JOB_FIELDS) if chosen is None else chosen
        query = _select_columns(names).order_by(jobs_table.c.jobid)
        if jobids is not None:
            query = query.where(jobs_table.c.jobid.in_(list(jobids)))
        if states is not None:
            query = query.where(jobs_table.c.state.in_(list(states)))
        elif not include_done:
            query = query.where(jobs_table.c.state != DONE)
        with self.engine.connect() as conn:
            return _read_rows(conn, query, names)

    def started_since(self, time: float) -> list[tuple[int, float, float]]:
        """(jobid, submittime, starttime) of every job that started at `time` or later, ended
        or not (the metrics monitor's wait statistics)."""
        c = jobs_table.c
        query = (select(c.jobid, c.submittime, c.starttime).where(c.starttime >= time)
                 .order_by(c.starttime))
        with self.engine.connect() as conn:
            return [(int(jobid), float(submit), float(start))
                    for jobid, submit, start in conn.execute(query)]

    def queued_for_scoring(self) -> list[tuple[Any, ...]]:
        """Queued jobs as (jobid, nodes, walltime, submittime, user, project, queue, score,
        user_hold, admin_hold, score_adjust, dependencies): only what a pass reads, because
        loading whole rows dominated a pass over 10,000 jobs."""
        if self._unfinished is not None:
            return self._unfinished.scoring_inputs()
        c = jobs_table.c
        # Dependencies as raw text: decoding JSON for 10,000 rows that are almost all "[]"
        # cost a third of the query.
        deps_text = type_coerce(c.dependencies, Text)
        query = (select(*(c[name] for name in SCORING_FIELDS[:-1]), deps_text)
                 .where(c.state == QUEUED).order_by(c.jobid))
        with self.engine.connect() as conn:
            return [(*row[:11], _decode_json(row[11])) for row in conn.execute(query)]

    def job(self, jobid: int) -> dict[str, Any] | None:
        if self._unfinished is not None:
            row = self._unfinished.row(jobid)
            if row is not None:
                return dict(zip(JOB_FIELDS, row, strict=True))
        found = self.jobs(jobids=[jobid], include_done=True)
        return found[0] if found else None

    def update_job(
        self, jobid: int, changes: Mapping[str, Any], *, expect_states: Iterable[str] | None = None,
        usage: tuple[str, float, float] | None = None,
    ) -> bool:
        """Change a job; with `expect_states`, only if it is still in one of them.

        The state test is part of the UPDATE, so two components racing on one job cannot both
        win (for example a qdel and a start). `usage` (user, usage, reference) replaces that
        user's usage row in the same transaction, so a job's end and its charge land together.
        """
        stmt = update(jobs_table).where(jobs_table.c.jobid == jobid)
        if expect_states is not None:
            stmt = stmt.where(jobs_table.c.state.in_(list(expect_states)))
        with self._writing():
            with self.engine.begin() as conn:
                if conn.execute(stmt.values(**changes)).rowcount != 1:
                    return False
                if usage is not None:
                    _put_usage(conn, *usage)
            if self._unfinished is not None:
                self._unfinished.update(jobid, changes)
            return True

    def set_scores(self, scores: Mapping[int, float]) -> None:
        if not scores:
            return
        # Not under _writing(): writing 10,000 scores takes long enough to stall a pass that
        # waits for the lock, and it need not be ordered against other writes, which never
        # change a score (and scores come from one thread, the queue manager's ScoreWriter).
        with self.engine.begin() as conn:
            conn.execute(
                update(jobs_table)
                .where(jobs_table.c.jobid == bindparam("b_jobid"))
                .values(score=bindparam("b_score")),
                [{"b_jobid": j, "b_score": s} for j, s in scores.items()],
            )
        if self._unfinished is not None:
            self._unfinished.set_scores(scores)

    def _writing(self) -> Any:
        """Held from a write's start until the memory copy shows it, so the copy applies
        commits in the order they happened (a no-op without the copy). Not the copy's own
        lock: readers (qstat, a pass) must not wait for a commit's disk or network I/O."""
        return self._write_order if self._unfinished is not None else nullcontext()

    def user_usage(self) -> list[tuple[str, float, float]]:
        """Every user's (user, finished usage, reference time) as last charged."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(user_usage_table.c.user, user_usage_table.c.usage,
                                       user_usage_table.c.reference))
            return [(row[0], row[1], row[2]) for row in rows]

    # ---- queues -----------------------------------------------------------------------

    def queues(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(queues_table).order_by(queues_table.c.name))
            return [_plain(row) for row in rows]

    def queue(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(queues_table).where(queues_table.c.name == name)).first()
            return _plain(row) if row else None

    def set_queue(self, name: str, changes: Mapping[str, Any]) -> bool:
        return self.set_queues({name: changes})

    def set_queues(self, changes: Mapping[str, Mapping[str, Any]]) -> bool:
        """Change several queues in one transaction: all of them, or (a queue is missing)
        none, and False."""
        for change in changes.values():
            if "state" in change and change["state"] not in QUEUE_STATES:
                raise ValueError(
                    f"queue state {change['state']!r}: choose one of {', '.join(QUEUE_STATES)}")
        try:
            with self.engine.begin() as conn:
                for name, change in changes.items():
                    result = conn.execute(
                        update(queues_table).where(queues_table.c.name == name).values(**change))
                    if result.rowcount != 1:
                        raise _NoSuchQueue  # rolls the whole transaction back
        except _NoSuchQueue:
            return False
        return True

    def add_queues(self, names: Iterable[str], state: str, policy: str) -> None:
        """Create queues in one transaction (IntegrityError if one exists: none is made)."""
        with self.engine.begin() as conn:
            for name in names:
                conn.execute(insert(queues_table).values(
                    name=name, state=state, policy=policy, priority=0, restrictions={}))

    def delete_queues(self, names: Iterable[str]) -> None:
        with self.engine.begin() as conn:
            conn.execute(queues_table.delete().where(queues_table.c.name.in_(list(names))))

    # ---- the job-id counter -----------------------------------------------------------

    def last_jobid(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(counters_table.c.value)
                                    .where(counters_table.c.name == "jobid")).scalar_one())

    def set_next_jobid(self, jobid: int) -> bool:
        """The next submission gets `jobid`; False (nothing changed) unless it is above the
        next id, so ids never repeat. The test is part of the UPDATE: a concurrent submission
        cannot slip between check and change."""
        with self._writing(), self.engine.begin() as conn:
            c = counters_table.c
            return conn.execute(update(counters_table)
                                .where(c.name == "jobid", c.value + 1 < jobid)
                                .values(value=jobid - 1)).rowcount == 1


    # ---- reservations -----------------------------------------------------------------

    def reservations(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(reservations_table.c.data)
                                .order_by(reservations_table.c.name))
            return [_decode_json(row[0]) for row in rows]

    def save_reservations(self, rows: Iterable[Mapping[str, Any]], deleted: Iterable[str] = (),
                          queues: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """In one transaction: write `rows` (insert or replace, by name), delete the reservations
        named in `deleted`, and create or change `queues` (name -> state, restrictions): a
        reservation and its R.<name> queue change together or not at all."""
        table = reservations_table
        with self.engine.begin() as conn:
            for name in deleted:
                conn.execute(table.delete().where(table.c.name == name))
            for row in rows:
                conn.execute(table.delete().where(table.c.name == row["name"]))
                conn.execute(insert(table).values(name=row["name"], data=dict(row)))
            for name, change in (queues or {}).items():
                if conn.execute(update(queues_table).where(queues_table.c.name == name)
                                .values(**change)).rowcount != 1:
                    conn.execute(insert(queues_table).values(
                        **{"name": name, "policy": "default", "priority": 0,
                           "restrictions": {}, **change}))

    def next_reservation_id(self) -> int:
        """Cobalt's res_id: a counter that never repeats (made on first use)."""
        with self.engine.begin() as conn:
            c = counters_table.c
            if conn.execute(update(counters_table).where(c.name == "resid")
                            .values(value=c.value + 1)).rowcount != 1:
                conn.execute(insert(counters_table).values(name="resid", value=1))
            return int(conn.execute(select(c.value).where(c.name == "resid")).scalar_one())


def _put_usage(conn: Connection, user: str, usage: float, reference: float) -> None:
    """Replace `user`'s usage row: an UPDATE, else an INSERT (one writer: no race between)."""
    table = user_usage_table
    changed = conn.execute(update(table).where(table.c.user == user)
                           .values(usage=usage, reference=reference)).rowcount
    if not changed:
        conn.execute(insert(table).values(user=user, usage=usage, reference=reference))


class _NoSuchQueue(Exception):
    pass


def _expand_jobid(text: str, jobid: int) -> str:
    return text.replace("$jobid", str(jobid)).replace("$COBALT_JOBID", str(jobid))


def _add_missing_columns(engine: Engine) -> None:
    """Add the job columns a database made by an older release lacks, with their defaults: an
    instance keeps its jobs across the upgrade."""
    present = {c["name"] for c in inspect(engine).get_columns("jobs")}
    missing = [c for c in jobs_table.columns if c.name not in present]
    if not missing:
        return
    with engine.begin() as conn:
        for column in missing:
            ddl = CreateColumn(column).compile(dialect=engine.dialect)
            conn.execute(text(f"ALTER TABLE jobs ADD COLUMN {ddl}"))


def _select_columns(names: list[str]) -> Any:
    """SELECT of these job columns, JSON ones as text: _read_rows decodes them, where the
    common empty values skip the decoder (that halved the time to list 10,000 jobs)."""
    return select(*(type_coerce(jobs_table.c[name], Text) if name in _JSON_COLUMNS
                    else jobs_table.c[name] for name in names))


def _read_rows(conn: Connection, query: Any, names: list[str]) -> list[list[Any]]:
    json_at = [i for i, name in enumerate(names) if name in _JSON_COLUMNS]
    rows = []
    for row in conn.execute(query):
        values = list(row)
        for i in json_at:
            values[i] = _decode_json(values[i])
        rows.append(values)
    return rows


SCORING_FIELDS = ("jobid", "nodes", "walltime", "submittime", "user", "project", "queue", "score",
                  "user_hold", "admin_hold", "score_adjust", "dependencies")


class _UnfinishedJobs:
    """Every job not yet done, as value lists in JOB_FIELDS order, by id (ids only grow, so
    insertion order is id order). The store changes it only after a commit. `lock` is held
    only while the copy itself is read or changed, never across database I/O."""

    def __init__(self, rows: list[list[Any]]) -> None:
        self.lock = threading.Lock()
        self._rows: dict[int, list[Any]] = {row[0]: row for row in rows}

    def replace(self, rows: list[list[Any]]) -> None:
        with self.lock:
            self._rows = {row[0]: row for row in rows}

    def add(self, row: list[Any]) -> None:
        with self.lock:
            self._rows[row[0]] = row

    def update(self, jobid: int, changes: Mapping[str, Any]) -> None:
        with self.lock:
            if changes.get("state") == DONE:
                self._rows.pop(jobid, None)
                return
            row = self._rows.get(jobid)
            if row is not None:
                for name, value in changes.items():
                    row[_FIELD_AT[name]] = value

    def row(self, jobid: int) -> list[Any] | None:
        with self.lock:
            row = self._rows.get(jobid)
            return None if row is None else list(row)

    def set_scores(self, scores: Mapping[int, float]) -> None:
        at = _FIELD_AT["score"]
        with self.lock:
            rows = self._rows
            for jobid, score in scores.items():
                row = rows.get(jobid)
                if row is not None:  # it may have ended since the pass that scored it
                    row[at] = score

    def table(self, names: list[str], jobids: Iterable[int] | None,
              states: set[str] | None) -> list[list[Any]]:
        at = [_FIELD_AT[name] for name in names]
        state_at = _FIELD_AT["state"]
        with self.lock:
            if jobids is None:
                rows: Iterable[list[Any]] = self._rows.values()
            else:
                rows = sorted((self._rows[j] for j in set(jobids) if j in self._rows),
                              key=lambda row: row[0])
            if states is not None:
                rows = [row for row in rows if row[state_at] in states]
            # New lists: the caller may extend them (derived columns) without touching ours.
            return [[row[i] for i in at] for row in rows]

    def scoring_inputs(self) -> list[tuple[Any, ...]]:
        at = [_FIELD_AT[name] for name in SCORING_FIELDS]
        state_at = _FIELD_AT["state"]
        with self.lock:
            return [tuple(row[i] for i in at) for row in self._rows.values()
                    if row[state_at] == QUEUED]


def _plain(row: Any) -> dict[str, Any]:
    """A row as a dict with plain str keys (SQLAlchemy's quoted names do not serialize)."""
    return {str(key): value for key, value in row._mapping.items()}
