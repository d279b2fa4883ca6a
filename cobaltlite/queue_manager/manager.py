"""The queue manager's logic, free of RPC: submission, queries, deletion, scoring, job ends.

Every method that changes a job commits before it returns, and every job state change is logged
with the job id. Identity (`Caller`) is decided by the transport from the kernel, never from
what a client sends. The clock is injected, so the same logic can run under Qsim.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import threading
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from cobaltlite.accounting import AccountingLog
from cobaltlite.clock import Clock
from cobaltlite.jobs import lifecycle, queues, records, states
from cobaltlite.jobs.lifecycle import JobStatus, Outcome, Refused
from cobaltlite.jobs.queues import QueueLoad, SettingError
from cobaltlite.machine.runtime import build_machine
from cobaltlite.machine.wire import description_from_wire
from cobaltlite.policy.budget import BudgetExceeded, run_with_budget
from cobaltlite.policy.registry import PolicyRegistry
from cobaltlite.policy.usage import DEFAULT_HALF_LIFE, UsageLedger
from cobaltlite.policy.utility import PassInputs, PolicyError
from cobaltlite.queue_manager import limits as lim
from cobaltlite.queue_manager.newest import NewestOnly
from cobaltlite.queue_manager.routing import LayoutRouter, Placement, RoutingError
from cobaltlite.queue_manager.store import JobStore
from cobaltlite.reservations.book import ReservationBook
from cobaltlite.reservations.cost import NO_DELAY
from cobaltlite.timefmt import format_hms

log = structlog.get_logger("queue-manager")

DEFAULT_DEP_FRAC = 0.5
"""The share of a parent's score a child inherits when the dependency is satisfied, unless
`schedctl --inherit` set the parent's own (Cobalt's [cqm] dep_frac, reference §2.4)."""
FAILURE_END_REASON = "component failure"
"""End reason of a job killed because a component under it failed (partadm --fail)."""


@dataclass(frozen=True)
class Caller:
    """Who is calling, as the kernel reported it."""

    uid: int
    gid: int
    user: str
    is_admin: bool


class SystemClient(Protocol):
    """What the queue manager needs of the system component."""

    def limits(self) -> dict[str, Any]: ...

    def description(self) -> dict[str, Any]: ...

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int: ...

    def kill(self, jobid: int) -> bool: ...

    def job_status(self, jobid: int) -> str: ...

    def queue_layout(self) -> str | None: ...


class SubmissionError(ValueError):
    """A submission the queue manager refuses; the message is shown to the user as is."""


@dataclass(slots=True)
class _Scored:
    """A queued job as the scheduler sees it; its attributes are the utility inputs."""

    jobid: int
    size: int
    wall_time: float
    queued_time: float
    user_name: str
    project: str
    queue: str
    queue_priority: int
    score: float = 0.0  # the previous pass's score until this pass scores the job
    threshold: float = 0.0


REQUIRED_SPEC = ("nodes", "walltime", "command", "cwd")
DEFAULTS: dict[str, Any] = {
    "jobname": "N/A",
    "queue": "default",
    "procs": 0,
    "mode": "script",
    "project": "N/A",
    "args": [],
    "env": {},
    "umask": 0o022,
    "outputpath": "",
    "errorpath": "",
    "cobaltlog": "",
    "user_hold": False,
    "dependencies": [],
    "user_list": [],
    "attrs": {},
    "notify": "",
    "inputfile": "",
    "debuglog": "",
    "geometry": "",
    "run_project": False,
    "preemptable": False,
    "disable_preboot": False,
}

ALTERABLE = {
    "walltime": "walltime", "nodes": "nodes", "procs": "procs", "project": "project",
    "mode": "mode", "notify": "notify", "outputpath": "outputpath", "errorpath": "errorpath",
    "user_list": "user_list", "dependencies": "dependencies", "attrs": "attrs",
    "geometry": "geometry",
}
"""qalter's changes that set a job field of the same name (walltime_delta and defer are the
others)."""
ALTER_KEYS = frozenset({*ALTERABLE, "walltime_delta", "defer"})


class ScoreWriter:
    """Writes the latest scores (shown by qstat) from a thread of its own.

    Writing 10,000 scores took as long as the rest of a pass; scores are recomputed at every
    pass, so only the newest set matters and a crash loses nothing worth keeping.
    """

    INTERVAL = 1.0
    """At most one write a second: passes come in bursts, and only the newest scores matter."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        self._written: dict[int, float] = {}
        self._worker = NewestOnly("score writer", self._write)

    def submit(self, scores: dict[int, float]) -> None:
        self._worker.submit(scores)

    def _write(self, scores: dict[int, float]) -> None:
        changed = {j: v for j, v in scores.items() if self._written.get(j) != v}
        try:
            self._store.set_scores(changed)
            self._written = scores
        except Exception as exc:  # the database is busy or gone: the next pass retries
            log.warning("scores not saved", error=str(exc))
        time.sleep(self.INTERVAL)


class QueueManager:
    def __init__(
        self,
        store: JobStore,
        clock: Clock,
        accounting: AccountingLog,
        system: SystemClient,
        wake_scheduler: Callable[[], None] = lambda: None,
        policies: PolicyRegistry | None = None,
        default_policy: str = "default",
        dep_frac: float = DEFAULT_DEP_FRAC,
        usage_half_life: float = DEFAULT_HALF_LIFE,
    ) -> None:
        self.store = store
        self.clock = clock
        self.accounting = accounting
        self.system = system
        self.wake_scheduler = wake_scheduler
        self.policies = policies or PolicyRegistry()
        self.default_policy = default_policy
        self.dep_frac = dep_frac
        self._lock = threading.RLock()
        self._limits: dict[str, Any] | None = None
        # Looked up at each call: the system's Peer gives each calling thread its own proxy.
        self.router = LayoutRouter(lambda: self.system.queue_layout())
        self._score_writer = ScoreWriter(store)
        self.estimated_starts: dict[int, float] = {}
        """{jobid: estimated start}: replaced whole by queue_manager/estimates.py after each
        scheduling pass, read by job_table (qstat -f, showstart)."""
        self.reservation_delays: dict[str, float] = dict(NO_DELAY)
        """The delays the reservations cause (reservations/cost.py), replaced with the
        estimates; the metrics monitor reads them with `reserved_capacity()`."""
        self._usage_half_life = usage_half_life
        self._usage: UsageLedger | None = None
        self.reservations = ReservationBook(
            store, accounting, clock,
            lambda: build_machine(description_from_wire(self.system.description())),
            default_policy, wake_scheduler)

    def reserved_capacity(self) -> dict[str, float]:
        """The nodes the reservations open now hold, and of those the nodes none of their
        jobs runs on (reservations/cost.py), counted now rather than at the last estimate: a
        scheduling pass may not have run since `cobaltlite up` or the last setres."""
        running = [row for row in self.store.jobs(states=list(states.ACTIVE_STATES),
                                                  fields=("nodes", "queue", "location"))
                   if row["location"]]
        return self.reservations.capacity_now(running)

    def limits(self) -> dict[str, Any]:
        if self._limits is None:
            self._limits = self.system.limits()
        return self._limits

    # ---- users: submission ---------------------------------------------------------------

    def submit(self, caller: Caller, spec: Mapping[str, Any]) -> int:
        """Validate, store and acknowledge a job; the id is returned only after the commit."""
        missing = [key for key in REQUIRED_SPEC if key not in spec]
        if missing:
            raise SubmissionError(f"the submission lacks {', '.join(missing)}")
        unknown = set(spec) - set(REQUIRED_SPEC) - set(DEFAULTS)
        if unknown:
            raise SubmissionError(f"unknown submission fields: {', '.join(sorted(unknown))}")
        job = {**DEFAULTS, **spec}
        _check_field_types(job)
        for key, suffix in (("outputpath", "output"), ("errorpath", "error"),
                            ("cobaltlog", "cobaltlog")):
            if not job[key] and isinstance(job["cwd"], str):
                job[key] = f"{job['cwd'].rstrip('/')}/$jobid.{suffix}"  # Cobalt's defaults
        _check_text_and_sizes(job)
        walltime = job["walltime"]
        if isinstance(walltime, int) and not isinstance(walltime, bool) and walltime == 0:
            try:  # -t 0: the named queue's maxtime (before routing, which needs the time)
                job["walltime"] = queues.walltime_for(self._submission_queue(job["queue"]), 0)
            except SettingError as exc:
                raise SubmissionError(str(exc)) from None
        self._check_job(job)
        placement = self._place(job["queue"], job["nodes"], job["walltime"])
        job["queue"], job["routed_from"] = placement.queue, placement.routed_from
        queue = self._submission_queue(job["queue"])
        refusal = queues.state_error(queue) or queues.admission_error(
            queue, caller.user, _group_names(caller.user, caller.gid), job["nodes"],
            job["walltime"], self._loads().get(queue["name"], QueueLoad()).users.get(caller.user))
        if refusal:
            raise SubmissionError(refusal)
        user_list = sorted({caller.user, *job["user_list"]})
        now = self.clock.now()
        with self._lock:
            jobid = self.store.add_job({
                **job,
                "user": caller.user, "uid": caller.uid, "gid": caller.gid,
                "state": states.QUEUED, "submittime": now, "score": 0.0,
                "admin_hold": False, "user_list": user_list,
            })
            stored = self.store.job(jobid)
        assert stored is not None
        self.accounting.write(now, "Q", jobid, records.queued_fields(_facts(stored)))
        if job["user_hold"]:
            self.accounting.write(now, "HA", jobid, {"type": "user", "requester": caller.user})
        log.info("job submitted", jobid=jobid, user=caller.user, nodes=job["nodes"],
                 queue=job["queue"], routed_from=job["routed_from"] or None)
        self.wake_scheduler()
        return jobid

    def _submission_queue(self, name: str) -> dict[str, Any]:
        queue = self.store.queue(name)
        if queue is None:
            raise SubmissionError(f"trying to add job to non-existent queue '{name}'")
        return queue

    def _place(self, named: str, nodes: int, walltime: int) -> Placement:
        """The queue a job named to queue `named` goes in, by the active queue layout
        (queue_manager/routing.py); SubmissionError when the layout's queues all refuse it."""
        try:
            return self.router.place(named, nodes, walltime)
        except RoutingError as exc:
            raise SubmissionError(str(exc)) from None

    def _check_job(self, job: dict[str, Any]) -> None:
        """The size, time, paths and dependencies of a job as submitted or altered make sense
        (after _check_text_and_sizes: every field is storable)."""
        nodes, walltime = job["nodes"], job["walltime"]
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes <= 0:
            raise SubmissionError(f"node count {nodes!r} must be a positive whole number")
        if nodes > lim.MAX_NODES:
            raise SubmissionError(f"node count {nodes} is over the limit of {lim.MAX_NODES}")
        limits = self.limits()
        if nodes > limits["max_job_nodes"]:
            raise SubmissionError(
                f"node count {nodes} is larger than any place on {limits['machine']} "
                f"(at most {limits['max_job_nodes']} nodes)")
        if not isinstance(walltime, int) or isinstance(walltime, bool) or walltime <= 0:
            raise SubmissionError(f"wall time {walltime!r} must be a positive number of seconds")
        if walltime > lim.MAX_WALLTIME:
            raise SubmissionError(
                f"wall time {walltime} seconds is over the limit of {lim.MAX_WALLTIME_MINUTES} "
                f"minutes ({lim.MAX_WALLTIME} seconds, one year)")
        for key in ("command", "cwd", "outputpath", "errorpath", "cobaltlog"):
            if not isinstance(job[key], str) or not job[key].startswith("/"):
                raise SubmissionError(f"{key} {job[key]!r} must be an absolute path")
        if job["inputfile"] and not (isinstance(job["inputfile"], str)
                                     and job["inputfile"].startswith("/")):
            raise SubmissionError(f"inputfile {job['inputfile']!r} must be an absolute path")
        for dep in job["dependencies"]:
            if not isinstance(dep, int) or isinstance(dep, bool) or not 0 < dep <= lim.MAX_JOBID:
                raise SubmissionError(f"dependency {dep!r} is not a job id "
                                      f"(a whole number from 1 to {lim.MAX_JOBID})")

    # ---- users: listings ---------------------------------------------------------------

    def jobs(
        self, jobids: Iterable[int] | None = None, fields: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """Jobs not yet done (or the named ones, done or not), with the state qstat shows."""
        names, rows = self.job_table(jobids, fields)
        return [dict(zip(names, row, strict=True)) for row in rows]

    DERIVED = ("display_state", "short_state", "dep_hold", "dep_fail", "maxrun_hold")
    """Columns the queue manager derives (from state, holds, dependencies and queue limits)."""
    _SOURCES = ("state", "user_hold", "admin_hold", "dependencies", "user", "queue", "nodes")

    ESTIMATED = "est_start"
    """The column of estimated start times: queued jobs the last estimate reached have one
    (queue_manager/estimates.py), every other row None."""

    def job_table(
        self, jobids: Iterable[int] | None = None, fields: Iterable[str] | None = None
    ) -> tuple[list[str], list[list[Any]]]:
        """`jobs` as (column names, value lists); only `fields` when given. The derived columns
        (DERIVED) and ESTIMATED travel only when asked for, or when no fields are named."""
        wanted = None if fields is None else set(fields)
        if wanted is not None and self.ESTIMATED not in wanted:
            return self._job_table(jobids, wanted)
        if wanted is not None:
            wanted.discard(self.ESTIMATED)
            wanted.add("state")
        names, rows = self._job_table(jobids, wanted)
        state, estimates = names.index("state"), self.estimated_starts
        return [*names, self.ESTIMATED], [
            [*row, estimates.get(row[0]) if row[state] == states.QUEUED else None]
            for row in rows]

    def _job_table(
        self, jobids: Iterable[int] | None, wanted: set[str] | None
    ) -> tuple[list[str], list[list[Any]]]:
        derived = wanted is None or not wanted.isdisjoint(self.DERIVED)
        fetch = wanted
        if wanted is not None:
            wanted -= set(self.DERIVED)
            if derived:
                fetch = wanted | set(self._SOURCES)
        names, rows = self.store.job_table(jobids=jobids, include_done=jobids is not None,
                                           fields=fetch)
        if not derived:
            return names, rows
        at = {name: names.index(name) for name in self._SOURCES}
        deps = self._dependency_states(
            {row[0]: row[at["dependencies"]] for row in rows if row[at["dependencies"]]})
        queue_rows = {q["name"]: q for q in self.store.queues()}
        # The per-user load matters only to running limits; without any, skip the scan.
        loads = self._loads() if any(q["restrictions"] for q in queue_rows.values()) else {}
        keep = [i for i, name in enumerate(names) if wanted is None or name in wanted
                or name == "jobid"]
        table = []
        for row in rows:
            status = self._status(row[at["state"]], row[at["user_hold"]], row[at["admin_hold"]],
                                  deps.get(row[0]), queue_rows.get(row[at["queue"]]),
                                  row[at["user"]], row[at["nodes"]], loads)
            shown = status.display()
            table.append([*(row[i] for i in keep), shown, states.short_code(shown),
                          status.dep_hold, status.dep_fail, status.maxrun_hold])
        return [*(names[i] for i in keep), *self.DERIVED], table

    def queues(self) -> list[dict[str, Any]]:
        return [queues.describe(q) for q in self.store.queues()]

    def waiting_jobs(self) -> dict[str, int]:
        """Queue name -> how many of its jobs are queued (not started), for every queue."""
        waiting = {q["name"]: 0 for q in self.store.queues()}
        for job in self.jobs(fields=("queue", "state")):
            if job["state"] == states.QUEUED:
                waiting[job["queue"]] = waiting.get(job["queue"], 0) + 1
        return waiting

    # ---- users: per-job operations ---------------------------------------------------------

    def delete(self, caller: Caller, jobids: Iterable[int],
               force: bool = False) -> list[dict[str, Any]]:
        """Delete jobs; each result says what happened, so qdel can speak for every id."""
        if force:
            _require_admin(caller, "a forced delete (cqadm -f --kill)")
        results = [self._delete_one(caller, jobid, force) for jobid in jobids]
        self.wake_scheduler()
        return results

    def _delete_one(self, caller: Caller, jobid: int, force: bool) -> dict[str, Any]:
        with self._lock:
            job = self.store.job(jobid)
            if job is None:
                return {"jobid": jobid, "ok": False, "result": "unknown",
                        "message": f"job {jobid} not found"}
            if job["state"] == states.DONE:
                return {"jobid": jobid, "ok": False, "result": "unknown", "user": job["user"],
                        "message": f"job {jobid} has already finished ({job['end_reason']})"}
            if not self._may_touch(caller, job):
                return {"jobid": jobid, "ok": False, "result": "refused", "user": job["user"],
                        "message": f"job {jobid} belongs to {job['user']}, not to {caller.user}"}
            before = job["state"]
            outcome = lifecycle.delete(self._job_status(job), force)
            if outcome.status.state == before:
                return {"jobid": jobid, "ok": True, "result": "ending", "user": job["user"],
                        "message": f"job {jobid} is already {before}"}
            now = self.clock.now()
            changes: dict[str, Any] = {"state": outcome.status.state}
            if outcome.status.state == states.DONE:
                changes.update(endtime=now, end_reason="deleted")
            if not self.store.update_job(jobid, changes, expect_states=[before]):
                # It started or ended meanwhile: decide again on its new state.
                return self._delete_one(caller, jobid, force)
            self._write(outcome.records, job, now, requester=caller.user)
            log.info("job deleted" if before == states.QUEUED else "job kill requested",
                     jobid=jobid, by=caller.user, state=before, force=force)
            if before != states.QUEUED:
                self.system.kill(jobid)
            if outcome.status.state == states.DONE:
                self._parent_left(job, None)
            result = "deleted" if outcome.status.state == states.DONE else "killing"
            return {"jobid": jobid, "ok": True, "result": result, "user": job["user"],
                    "message": f"Deleted job {jobid}" if result == "deleted"
                    else f"Killing job {jobid}"}

    def hold(self, caller: Caller, jobids: Iterable[int], kind: str) -> list[dict[str, Any]]:
        if kind not in lifecycle.HOLD_KINDS:
            raise ValueError(f"hold kind {kind!r}: choose one of "
                             f"{', '.join(lifecycle.HOLD_KINDS)}")
        if kind == "admin":
            _require_admin(caller, "an admin hold (cqadm --admin-hold)")
        return [self._event(caller, jobid, f"place {kind} hold on job {{}}",
                            f"Placed {kind} hold on",
                            lambda s: lifecycle.hold(s, kind), {"type": kind})
                for jobid in jobids]

    def release(self, caller: Caller, jobids: Iterable[int],
                kind: str) -> list[dict[str, Any]]:
        if kind not in lifecycle.RELEASE_KINDS:
            raise ValueError(f"release kind {kind!r}: choose one of "
                             f"{', '.join(lifecycle.RELEASE_KINDS)}")
        if kind == "admin":
            _require_admin(caller, "an admin release (cqadm --admin-release)")
        if kind == "dependencies":
            return [self._event(caller, jobid, "remove dependencies from job {}",
                                "Removed dependencies from",
                                lambda s: lifecycle.release(s, "dependencies"),
                                {"type": "dependencies"}, {"dependencies": []})
                    for jobid in jobids]
        results = [self._event(caller, jobid, f"remove {kind} hold on job {{}}",
                               f"Removed {kind} hold on",
                               lambda s: lifecycle.release(s, kind), {"type": kind})
                   for jobid in jobids]
        self.wake_scheduler()
        return results

    def _event(self, caller: Caller, jobid: int, verb: str, done: str,
               event: Callable[[JobStatus], Outcome], record_fields: dict[str, Any],
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Apply one state-machine event to a job the caller may touch; one result line."""
        with self._lock:
            job, not_yours = self._job_for(caller, jobid, verb)
            if job is None:
                return not_yours
            status = self._job_status(job)
            try:
                outcome = event(status)
            except Refused as exc:
                return _failed(jobid, verb, str(exc))
            changes = {**_status_changes(status, outcome.status), **(extra or {})}
            if not self.store.update_job(jobid, changes, expect_states=[status.state]):
                return _failed(jobid, verb, "its state changed meanwhile; try again")
            now = self.clock.now()
            self._write(outcome.records, job, now, requester=caller.user, **record_fields)
        log.info("job " + done.lower(), jobid=jobid, by=caller.user,
                 state=outcome.status.display())
        return {"jobid": jobid, "ok": True, "message": f"{done} job {jobid}"}

    def alter(self, caller: Caller, jobids: Iterable[int],
              changes: Mapping[str, Any]) -> list[dict[str, Any]]:
        unknown = set(changes) - ALTER_KEYS
        if unknown:
            raise ValueError(f"cannot alter {', '.join(sorted(unknown))}: choose from "
                             f"{', '.join(sorted(ALTER_KEYS))}")
        if "walltime" in changes and "walltime_delta" in changes:
            raise ValueError("give walltime or walltime_delta, not both")
        if "defer" in changes and type(changes["defer"]) is not bool:
            raise ValueError(f"defer {changes['defer']!r} must be true or false")
        if "walltime_delta" in changes and (type(changes["walltime_delta"]) is not int):
            raise ValueError(f"walltime_delta {changes['walltime_delta']!r} must be a whole "
                             "number of seconds")
        results = [self._alter_one(caller, jobid, changes) for jobid in jobids]
        self.wake_scheduler()
        return results

    def _alter_one(self, caller: Caller, jobid: int,
                   changes: Mapping[str, Any]) -> dict[str, Any]:
        verb = "alter job {}"
        with self._lock:
            job, not_yours = self._job_for(caller, jobid, verb)
            if job is None:
                return not_yours
            if job["state"] == states.DONE:
                return _failed(jobid, verb, "has already completed")
            if job["state"] != states.QUEUED:
                return _failed(jobid, verb,
                               "Modifying a job while running is currently not supported")
            new = dict(job)
            for key, field in ALTERABLE.items():
                if key in changes:
                    new[field] = changes[key]
            if "walltime_delta" in changes:
                new["walltime"] = job["walltime"] + changes["walltime_delta"]
                if new["walltime"] <= 0:
                    return _failed(jobid, verb, f"invalid wall time: {new['walltime']} seconds")
            try:
                _check_field_types(new)
                _check_text_and_sizes(new)
                self._check_job(new)
            except SubmissionError as exc:
                return _failed(jobid, verb, str(exc))
            if "user_list" in changes:  # the owner stays in it, as at submission
                new["user_list"] = sorted({job["user"], *new["user_list"]})
            if "dependencies" in changes:
                cycle = self._dependency_cycle(jobid, new["dependencies"])
                if cycle:
                    return _failed(jobid, verb, "dependencies would make a cycle: "
                                   + " -> ".join(map(str, cycle)))
            resized = bool({"walltime", "walltime_delta", "nodes"} & set(changes))
            if resized and job["routed_from"]:  # routed by a layout: routed again (D002-28)
                try:
                    placement = self._place(job["routed_from"], new["nodes"], new["walltime"])
                except SubmissionError as exc:
                    return _failed(jobid, verb, str(exc))
                if placement.routed_from:  # else the layout no longer routes: it stays
                    new["queue"] = placement.queue
            queue = self.store.queue(new["queue"])
            if queue is not None and resized:
                load = self._loads(excluding=jobid).get(new["queue"], QueueLoad())
                refusal = (new["queue"] != job["queue"] and queues.state_error(queue)) or \
                    queues.admission_error(
                        queue, job["user"], _group_names(job["user"], job["gid"]),
                        new["nodes"], new["walltime"], load.users.get(job["user"]))
                if refusal:
                    return _failed(jobid, verb, refusal)
            altered = {field: new[field] for field in {*ALTERABLE.values(), "walltime", "queue"}
                       if new[field] != job[field]}
            if changes.get("defer"):  # the score drops to 0 now; the policy's growth resumes
                altered["score"] = 0.0
                altered["score_adjust"] = job["score_adjust"] - job["score"]
            if not altered:
                return {"jobid": jobid, "ok": True, "message": f"job {jobid}: nothing to change"}
            if not self.store.update_job(jobid, altered, expect_states=[states.QUEUED]):
                return _failed(jobid, verb, "it started meanwhile; "
                               "Modifying a job while running is currently not supported")
            now = self.clock.now()
            visible = {k: v for k, v in altered.items() if k != "score_adjust"}
            self.accounting.write(now, "QA", jobid, {
                "requester": caller.user,
                **{k: (format_hms(v) if k == "walltime" else v) for k, v in visible.items()},
                **({"requested_queue": job["routed_from"]} if "queue" in altered else {})})
        lines = [f"{field} changed from {_shown(field, job.get(field))} to "
                 f"{_shown(field, value)}" for field, value in sorted(visible.items())]
        log.info("job altered", jobid=jobid, by=caller.user, fields=sorted(altered))
        return {"jobid": jobid, "ok": True, "message": "\n".join(lines)}

    def move(self, caller: Caller, jobids: Iterable[int], queue_name: str) -> list[dict[str, Any]]:
        layout = self.router.layout()
        if self.store.queue(queue_name) is None and \
                (layout is None or queue_name not in layout.routing_sources):
            raise LookupError(f"Error: queue '{queue_name}' does not exist")
        results = [self._move_one(caller, jobid, queue_name) for jobid in jobids]
        self.wake_scheduler()
        return results

    def _move_one(self, caller: Caller, jobid: int, queue_name: str) -> dict[str, Any]:
        """Move a queued job to `queue_name`, or where the layout routes it from there."""
        verb = "move job {} to queue '" + queue_name + "'"
        with self._lock:
            job, not_yours = self._job_for(caller, jobid, verb)
            if job is None:
                return not_yours
            if job["state"] == states.DONE:
                return _failed(jobid, verb, "has already completed")
            if job["state"] != states.QUEUED:
                return _failed(jobid, verb, f"job {jobid} is running; it cannot be moved")
            try:
                placement = self._place(queue_name, job["nodes"], job["walltime"])
            except SubmissionError as exc:
                return _failed(jobid, verb, str(exc))
            queue = self.store.queue(placement.queue)
            if queue is None:
                return _failed(jobid, verb, f"queue '{placement.queue}' does not exist")
            load = self._loads(excluding=jobid).get(queue["name"], QueueLoad())
            refusal = queues.state_error(queue) or queues.admission_error(
                queue, job["user"], _group_names(job["user"], job["gid"]), job["nodes"],
                job["walltime"], load.users.get(job["user"]))
            if refusal:
                return _failed(jobid, verb, refusal)
            if not self.store.update_job(
                    jobid, {"queue": queue["name"], "routed_from": placement.routed_from},
                    expect_states=[states.QUEUED]):
                return _failed(jobid, verb, f"job {jobid} is running; it cannot be moved")
            self.accounting.write(self.clock.now(), "QA", jobid,
                                  {"requester": caller.user, "queue": queue["name"],
                                   **({"requested_queue": queue_name}
                                      if placement.routed_from or job["routed_from"] else {})})
        log.info("job moved", jobid=jobid, by=caller.user, queue=queue["name"],
                 routed_from=placement.routed_from or None)
        return {"jobid": jobid, "ok": True,
                "message": f"moved job {jobid} to queue '{queue['name']}'"}

    def run(self, caller: Caller, jobids: Iterable[int], location: str) -> list[dict[str, Any]]:
        """cqadm --run: start queued jobs now on a named place, past the queue's running
        limits (but not past a hold)."""
        _require_admin(caller, "cqadm --run")
        results = []
        for jobid in jobids:
            verb = "run job {} on " + location
            job = self.store.job(jobid)
            if job is None:
                results.append(_failed(jobid, verb, "job not found"))
                continue
            try:
                lifecycle.start(self._job_status(job), forced=True)
            except Refused as exc:
                results.append(_failed(jobid, verb, str(exc)))
                continue
            if self.start_job(jobid, location, forced=True):
                results.append({"jobid": jobid, "ok": True,
                                "message": f"started job {jobid} on {location}"})
            else:
                results.append(_failed(jobid, verb, f"the system refused {location} (not a "
                                       "place of this machine, busy, or too small)"))
        return results

    def adjust_scores(self, caller: Caller, jobids: Iterable[int],
                      value: str) -> list[dict[str, Any]]:
        """schedctl --score: "+N" and "-N" change the score by N, "N" sets it."""
        _require_admin(caller, "schedctl --score")
        try:
            amount = float(value)
        except ValueError:
            raise ValueError(f"score {value!r}: give N, +N or -N") from None
        if amount != amount or amount in (float("inf"), float("-inf")):
            raise ValueError(f"score {value!r}: give a finite number")
        relative = value.strip()[:1] in "+-"
        results = []
        for jobid in jobids:
            with self._lock:
                job = self.store.job(jobid)
                if job is None or job["state"] != states.QUEUED:
                    results.append(_failed(jobid, "adjust the score of job {}",
                                           "job not found" if job is None else
                                           f"is {job['state']}, not queued"))
                    continue
                # The policy rescores every pass; the adjustment is what stays added to it.
                score = job["score"] + amount if relative else amount
                self.store.update_job(jobid, {
                    "score": score, "score_adjust": job["score_adjust"] + score - job["score"]},
                    expect_states=[states.QUEUED])
            log.info("job score set", jobid=jobid, by=caller.user, score=score)
            results.append({"jobid": jobid, "ok": True,
                            "message": f"score of job {jobid} set to {score:g}"})
        self.wake_scheduler()
        return results

    def set_dep_frac(self, caller: Caller, jobids: Iterable[int],
                     fraction: float) -> list[dict[str, Any]]:
        """schedctl --inherit: the share of this job's score its dependants inherit."""
        _require_admin(caller, "schedctl --inherit")
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction {fraction!r}: give a number from 0 to 1")
        results = []
        for jobid in jobids:
            job = self.store.job(jobid)
            if job is None or job["state"] == states.DONE:
                results.append(_failed(jobid, "set dep_frac of job {}",
                                       "job not found" if job is None else
                                       "has already completed"))
                continue
            self.store.update_job(jobid, {"dep_frac": float(fraction)})
            results.append({"jobid": jobid, "ok": True,
                            "message": f"dep_frac of job {jobid} set to {fraction:g}"})
        return results

    def set_next_jobid(self, caller: Caller, jobid: int) -> None:
        _require_admin(caller, "cqadm -j")
        if not 0 < jobid <= lim.MAX_JOBID:
            raise ValueError(f"job id {jobid}: give a whole number from 1 to {lim.MAX_JOBID}")
        if not self.store.set_next_jobid(jobid):
            raise ValueError(f"The new jobid must be greater than the next jobid "
                             f"({self.store.last_jobid() + 1})")
        log.info("next job id set", jobid=jobid, by=caller.user)

    def _job_for(self, caller: Caller, jobid: int, verb: str
                 ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """The job when it exists and the caller may change it, else (None, the refusal)."""
        job = self.store.job(jobid)
        if job is None:
            return None, _failed(jobid, verb, "job not found")
        if not self._may_touch(caller, job):
            return None, _failed(jobid, verb, f"job belongs to {job['user']}, not to {caller.user}")
        return job, {}

    def _may_touch(self, caller: Caller, job: Mapping[str, Any]) -> bool:
        return caller.is_admin or caller.user in job["user_list"]

    # ---- admins: queues ----------------------------------------------------------------

    def add_queues(self, caller: Caller, names: list[str]) -> None:
        _require_admin(caller, "cqadm --addq")
        for name in names:
            queues.check_queue_name(name)
        existing = {q["name"] for q in self.store.queues()}
        taken = [n for n in names if n in existing]
        if taken or len(set(names)) != len(names):
            raise ValueError(f"queue already exists: {', '.join(taken or names)}")
        # New queues run at once: Cobalt's default, stopped, left sites wondering why nothing
        # started (reference §10 item 10).
        self.store.add_queues(names, "running", self.default_policy)
        log.info("queues added", queues=names, by=caller.user)

    def delete_queues(self, caller: Caller, names: list[str], force: bool = False) -> None:
        """Delete empty queues; with `force`, the jobs still in them are deleted first (queued
        ones end, running ones are killed), as a forced qdel of each."""
        _require_admin(caller, "cqadm --delq")
        self._known_queues(names)
        jobs = [j for j in self.store.jobs(fields=["queue", "user"]) if j["queue"] in names]
        if jobs and not force:
            busy = sorted({j["queue"] for j in jobs})
            raise ValueError(f"queue(s) {', '.join(busy)} still hold {len(jobs)} job(s); "
                             "delete them first, or force the deletion")
        if jobs:
            self.delete(caller, [j["jobid"] for j in jobs], force=True)
        self.store.delete_queues(names)
        log.info("queues deleted", queues=names, by=caller.user, jobs_deleted=len(jobs))

    def set_queue_state(self, caller: Caller, names: list[str], state: str) -> None:
        _require_admin(caller, "cqadm --startq/--stopq/--drainq/--killq")
        queues.check_queue_state(state)
        self._known_queues(names)
        self.store.set_queues({name: {"state": state} for name in names})
        log.info("queue state set", queues=names, state=state, by=caller.user)
        self.wake_scheduler()

    def set_queue(self, caller: Caller, names: list[str], settings: Mapping[str, Any]) -> None:
        _require_admin(caller, "cqadm --setq")
        parsed = queues.parse_settings(settings)
        current = self._known_queues(names)
        changes: dict[str, dict[str, Any]] = {}
        for name in names:
            restrictions = dict(current[name]["restrictions"] or {})
            restrictions.update({k: v for k, v in parsed.items() if k != "priority"})
            try:
                queues.check_time_order(restrictions)
            except SettingError as exc:
                raise SettingError(f"queue {name}: {exc}") from None
            changes[name] = {"restrictions": restrictions}
            if "priority" in parsed:
                changes[name]["priority"] = parsed["priority"]
        self.store.set_queues(changes)
        log.info("queue settings changed", queues=names, settings=dict(settings), by=caller.user)
        self.wake_scheduler()

    def unset_queue(self, caller: Caller, names: list[str], keys: list[str]) -> None:
        _require_admin(caller, "cqadm --unsetq")
        chosen = queues.check_unset_keys(keys)
        current = self._known_queues(names)
        self.store.set_queues({
            name: {"restrictions": {k: v for k, v in (current[name]["restrictions"] or {}).items()
                                    if k not in chosen}} for name in names})
        log.info("queue settings unset", queues=names, keys=chosen, by=caller.user)
        self.wake_scheduler()

    def _known_queues(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """The named queues; LookupError naming every one that does not exist."""
        current = {q["name"]: q for q in self.store.queues()}
        missing = [n for n in names if n not in current]
        if missing:
            raise LookupError(f"queue(s) {', '.join(map(repr, missing))} do not exist "
                              f"(queues: {', '.join(sorted(current))})")
        return {n: current[n] for n in names}

    # ---- the scheduler ----------------------------------------------------------------

    def schedulable_jobs(self) -> list[list[Any]]:
        """Runnable queued jobs of scheduled queues, scored now by their queue's policy.

        A policy that fails on a job leaves that job its previous score; one that overruns the
        time budget is suspended until the next reload (its jobs keep their scores). Either way
        the other policies, and scheduling, go on.
        """
        now = self.clock.now()
        by_policy, adjusted, _queues = self.runnable_jobs(now)
        ready: list[_Scored] = []
        for name, jobs in by_policy.items():
            ready.extend(jobs)
            kept = self._score(name, jobs, self._inputs(now))
            if adjusted:
                for job in jobs:
                    if job.jobid in adjusted and job.jobid not in kept:
                        job.score += adjusted[job.jobid]
        self._score_writer.submit({j.jobid: j.score for j in ready})
        # Compact rows (jobid, size, wall_time, score, threshold, queue): a pass may carry
        # 10,000. The queue says where a job may run (queues mapped to places, reservations).
        return [[j.jobid, j.size, j.wall_time, j.score, j.threshold, j.queue] for j in ready]

    def runnable_jobs(self, now: float) -> tuple[dict[str, list[_Scored]], dict[int, float],
                                                 list[dict[str, Any]]]:
        """The jobs a pass at `now` may start, unscored, by policy name; their score
        adjustments (cqadm --score); and every queue (the scheduled ones decide what runs)."""
        every_queue = self.store.queues()
        queue_rows = {q["name"]: q for q in every_queue
                      if q["state"] in queues.SCHEDULED_STATES}
        candidates = [row for row in self.store.queued_for_scoring()
                      if row[6] in queue_rows and not row[8] and not row[9]]
        deps = self._dependency_states({row[0]: row[11] for row in candidates if row[11]})
        limited = any(q["restrictions"] for q in queue_rows.values())
        loads = self._loads() if limited else {}
        by_policy: dict[str, list[_Scored]] = {}
        adjusted: dict[int, float] = {}
        for (jobid, nodes, walltime, submit, user, project, queue_name, score, _user_hold,
             _admin_hold, adjust, _deps) in candidates:
            if jobid in deps and deps[jobid][0]:
                continue
            queue = queue_rows[queue_name]
            if limited and queues.run_blocker(queue, user, nodes, loads.get(queue_name)):
                continue
            by_policy.setdefault(queue["policy"], []).append(_Scored(
                jobid, nodes, float(walltime), now - submit, user, project, queue_name,
                queue["priority"], score, score))
            if adjust:
                adjusted[jobid] = adjust
        return by_policy, adjusted, every_queue

    def _inputs(self, now: float) -> PassInputs:
        limits = self.limits()
        return PassInputs(now, limits["machine_nodes"], limits["min_block_size"],
                          user_usage=self._ledger().share_of(limits["machine_nodes"]))

    def _ledger(self) -> UsageLedger:
        """The per-user usage (fairshare's `user_usage`), built on first use from the store:
        the finished usage it kept, then the jobs running now."""
        with self._lock:
            if self._usage is None:
                ledger = UsageLedger(self._usage_half_life, self.clock.now)
                ledger.restore(self.store.user_usage())
                for job in self.store.jobs(states=list(states.ACTIVE_STATES)):
                    if job["starttime"] is not None:
                        ledger.started(job["user"], job["nodes"], job["starttime"])
                self._usage = ledger
            return self._usage

    @contextlib.contextmanager
    def _charge(self, job: Mapping[str, Any], end_time: float
                ) -> Iterator[tuple[str, float, float] | None]:
        """Count the run of `job` (if it started) in its owner's usage and give the usage row
        to store with the job's change. If that change fails, the charge did not land: the
        usage is rebuilt from the store at its next use, so a repeated end is charged once."""
        if job["starttime"] is None:
            yield None
            return
        ledger = self._ledger()
        ledger.stopped(job["user"], job["nodes"], job["starttime"], end_time)
        try:
            yield ledger.finished(job["user"])
        except BaseException:
            self._usage = None
            raise

    def _score(self, name: str, jobs: list[_Scored], inputs: PassInputs) -> Container[int]:
        """Score `jobs` with policy `name`; return the ids of jobs that kept their previous
        score (the policy failed on them, or is suspended)."""
        registry = self.policies
        everyone = _Everyone()
        if name in registry.suspended:
            return everyone
        try:
            policy = registry.get(name)
            failures = run_with_budget(lambda: policy.score_jobs_keeping(jobs, inputs),
                                       registry.budget)
        except PolicyError as exc:
            registry.record_failure(name, str(exc))
            return everyone
        except BudgetExceeded:
            registry.record_failure(
                name, f"scoring {len(jobs)} jobs took more than the {registry.budget:g} s "
                "budget; suspended until the next reload", suspend=True)
            return everyone
        if failures:
            jobid, error = next(iter(failures.items()))
            registry.record_failure(
                name, f"failed on {len(failures)} job(s), first job {jobid}: {error}")
        return failures

    def queued_sample(self) -> tuple[list[_Scored], PassInputs]:
        """The current queued jobs and pass inputs, to validate a utility file against."""
        now = self.clock.now()
        jobs = [_Scored(r["jobid"], r["nodes"], float(r["walltime"]), now - r["submittime"],
                        r["user"], r["project"], r["queue"], 0)
                for r in self.store.jobs(states=[states.QUEUED])]
        return jobs, self._inputs(now)

    def reload_policies(self, requested_by: str, reread_config: bool = False) -> dict[str, Any]:
        jobs, inputs = self.queued_sample()
        return self.policies.reload(jobs, inputs, requested_by, reread_config)

    def set_queue_policy(self, queue: str, policy: str) -> None:
        self.policies.get(policy)  # raises PolicyError naming the known policies
        if not self.store.set_queue(queue, {"policy": policy}):
            raise LookupError(f"queue {queue!r} does not exist")
        log.info("queue policy set", queue=queue, policy=policy)
        self.wake_scheduler()

    def start_job(self, jobid: int, location: str, forced: bool = False) -> bool:
        """Mark the job starting (committed), launch it, mark it running; False if refused:
        the job is no longer runnable, its queue's running limits hold it (unless `forced`,
        an admin's run), or the system refused the place."""
        with self._lock:
            job = self.store.job(jobid)
            if job is None:
                return False
            try:
                outcome = lifecycle.start(self._job_status(job), forced)
            except Refused as exc:
                log.info("job start refused", jobid=jobid, reason=str(exc))
                return False
            usage = self._ledger()  # built before the start, so the start is counted once
            if not self.store.update_job(jobid, {"state": outcome.status.state,
                                                 "location": location},
                                         expect_states=[states.QUEUED]):
                return False
            job = self.store.job(jobid)
            assert job is not None
            try:
                self.system.launch(jobid, location, _launch_spec(job))
            except Exception as exc:
                self.store.update_job(jobid, {"state": states.QUEUED, "location": None},
                                      expect_states=[states.STARTING])
                log.warning("job start refused", jobid=jobid, location=location, error=str(exc))
                return False
            now = self.clock.now()
            self.store.update_job(jobid, {"state": states.RUNNING, "starttime": now},
                                  expect_states=[states.STARTING])
            usage.started(job["user"], job["nodes"], now)
        self._write(("S",), {**job, "starttime": now}, now)
        log.info("job started", jobid=jobid, location=location, forced=forced)
        return True

    def job_ended(self, jobid: int, exit_status: int | None, reason: str, end_time: float) -> bool:
        """The system reports an end; idempotent, so the system may repeat it after a crash."""
        with self._lock:
            job = self.store.job(jobid)
            if job is None or job["state"] == states.DONE:
                return True
            records_: tuple[str, ...] = lifecycle.ended(self._job_status(job)).records
            if reason == "walltime":
                records_ = ("A", *records_)
            with self._charge(job, end_time) as usage:
                self.store.update_job(jobid, {"state": states.DONE, "endtime": end_time,
                                              "exit_status": exit_status, "end_reason": reason},
                                      usage=usage)
        self._write(records_, job, end_time, exit_status=exit_status)
        log.info("job ended", jobid=jobid, exit_status=exit_status, reason=reason)
        self._parent_left(job, exit_status)
        self.wake_scheduler()
        return True

    def _parent_left(self, parent: Mapping[str, Any], exit_status: int | None) -> None:
        """A job ended or was deleted: its dependants' holds follow from the store (derived,
        so nothing to write for them), and on success those of the same project inherit a
        share of its score (reference §2.4)."""
        if exit_status != 0:
            for child in self._dependants(parent["jobid"]):
                log.info("job dependency failed", jobid=child["jobid"], parent=parent["jobid"])
            return
        frac = parent["dep_frac"] if parent["dep_frac"] is not None else self.dep_frac
        for child in self._dependants(parent["jobid"]):
            if child["project"] != parent["project"]:
                continue
            inherited = frac * parent["score"]
            if inherited > child["score"]:
                raise_by = inherited - child["score"]
                self.store.update_job(child["jobid"], {
                    "score": inherited, "score_adjust": child["score_adjust"] + raise_by},
                    expect_states=[states.QUEUED])
                log.info("job score inherited", jobid=child["jobid"], parent=parent["jobid"],
                         score=inherited)

    def _dependants(self, jobid: int) -> list[dict[str, Any]]:
        return [j for j in self.store.jobs(fields=["dependencies", "project", "score",
                                                   "score_adjust"])
                if jobid in j["dependencies"]]

    def job_killed_by_failure(self, jobid: int, component: str, end_time: float,
                              resubmit: bool) -> bool:
        """The system killed the job because `component`, under its place, failed.

        With `resubmit` the job goes back to its queue keeping its original submission time
        and restarts from the beginning (seed 003 §VI-A3); otherwise, or when its owner was
        deleting it, it ends. Either way its end reason is "component failure". Accounting, as
        Qsim's job log writes it: an A record (reason=failure, the component, the lost run),
        then R (queued again) or E. Idempotent, as job_ended: the system may repeat it."""
        with self._lock:
            job = self.store.job(jobid)
            if job is None or job["state"] not in states.ACTIVE_STATES:
                return True
            start = job["starttime"] or end_time
            self.accounting.write(end_time, "A", jobid, {
                "reason": "failure", "component": component,
                "lost_runtime": int(end_time - start), "lost_exec_host": job["location"] or ""})
            if not resubmit or job["state"] == states.KILLING:
                return self.job_ended(jobid, None, FAILURE_END_REASON, end_time)
            outcome = lifecycle.requeued(self._job_status(job))
            with self._charge(job, end_time) as usage:
                self.store.update_job(jobid, {"state": outcome.status.state, "location": None,
                                              "starttime": None,
                                              "end_reason": FAILURE_END_REASON},
                                      expect_states=[job["state"]], usage=usage)
        self._write(outcome.records, job, end_time)
        log.info("job requeued after a failure", jobid=jobid, component=component,
                 location=job["location"])
        self.wake_scheduler()
        return True

    def reconcile(self) -> None:
        """Settle jobs whose state the queue manager and the system may disagree on.

        starting -> running if the system holds it, else back to queued (it never launched);
        running/killing that the system does not know -> done with end reason "lost". Runs at
        start and periodically; it holds the lock `start_job` holds, so it never sees a job
        halfway through a start.
        """
        with self._lock:
            for job in self.store.jobs(states=list(states.ACTIVE_STATES)):
                status = self.system.job_status(job["jobid"])
                if job["state"] == states.STARTING:
                    if status == "unknown":
                        self.store.update_job(job["jobid"], {"state": states.QUEUED,
                                                             "location": None},
                                              expect_states=[states.STARTING])
                        log.info("job returned to queue after restart", jobid=job["jobid"])
                    else:
                        now = self.clock.now()
                        if self.store.update_job(job["jobid"], {"state": states.RUNNING,
                                                                "starttime": now},
                                                 expect_states=[states.STARTING]):
                            # The crash came between launch and the S record: write it now.
                            self._write(("S",), {**job, "starttime": now}, now)
                elif status == "unknown":
                    self.job_ended(job["jobid"], None, "lost", self.clock.now())

    # ---- the job's state, derived --------------------------------------------------------

    def _job_status(self, job: Mapping[str, Any]) -> JobStatus:
        """The state machine's view of a stored job: its state, holds, dependencies now, and
        whether its queue's running limits hold it."""
        deps = self._dependency_states({job["jobid"]: job["dependencies"]}) \
            if job["dependencies"] else {}
        queue = self.store.queue(job["queue"])
        limited = queue is not None and bool(queue["restrictions"])
        return self._status(job["state"], job["user_hold"], job["admin_hold"],
                            deps.get(job["jobid"]), queue, job["user"], job["nodes"],
                            self._loads(excluding=job["jobid"]) if limited else {})

    @staticmethod
    def _status(state: str, user_hold: bool, admin_hold: bool,
                deps: tuple[frozenset[int], bool] | None, queue: Mapping[str, Any] | None,
                user: str, nodes: int, loads: Mapping[str, QueueLoad]) -> JobStatus:
        waiting, failed = deps or (frozenset(), False)
        maxrun = state == states.QUEUED and queue is not None and queues.run_blocker(
            queue, user, nodes, loads.get(queue["name"]))
        return JobStatus(state, bool(user_hold), bool(admin_hold), waiting, failed, maxrun)

    def _dependency_states(
        self, deps_by_job: Mapping[int, list[int]]
    ) -> dict[int, tuple[frozenset[int], bool]]:
        """For each job: the dependencies not satisfied yet (the parent has not ended with exit
        status 0) and whether one never can be (dep_fail: the parent ended otherwise, was
        deleted, or does not exist). Derived from the store at every look, so a restart or a
        parent that never existed needs no periodic check to show dep_fail. One query for
        all parents."""
        parents = {d for deps in deps_by_job.values() for d in deps}
        if not parents:
            return {}
        _names, rows = self.store.job_table(jobids=parents, include_done=True,
                                           fields=["state", "exit_status"])
        found = {row[0]: (row[1], row[2]) for row in rows}
        result = {}
        for jobid, deps in deps_by_job.items():
            waiting = frozenset(d for d in deps if found.get(d) != (states.DONE, 0))
            failed = any(d not in found or found[d][0] == states.DONE for d in waiting)
            result[jobid] = (waiting, failed)
        return result

    def _dependency_cycle(self, jobid: int, deps: list[int]) -> list[int] | None:
        """The path back to `jobid` if it depended on `deps`, or None."""
        graph = {j["jobid"]: j["dependencies"] for j in self.store.jobs(fields=["dependencies"])}
        graph[jobid] = deps
        stack: list[tuple[int, list[int]]] = [(d, [jobid, d]) for d in deps]
        seen: set[int] = set()
        while stack:
            node, path = stack.pop()
            if node == jobid:
                return path
            if node in seen:
                continue
            seen.add(node)
            stack.extend((d, [*path, d]) for d in graph.get(node, []))
        return None

    def _loads(self, excluding: int | None = None) -> dict[str, QueueLoad]:
        """Per queue, what each user has unfinished and running (queue restrictions)."""
        loads: dict[str, QueueLoad] = {}
        # Columns come in the store's order: jobid, user, queue, state, nodes, walltime.
        _names, rows = self.store.job_table(fields=["user", "queue", "state", "nodes",
                                                    "walltime"])
        for jobid, user, queue, state, nodes, walltime in rows:
            if jobid == excluding:
                continue
            load = loads.get(queue)
            if load is None:
                load = loads[queue] = QueueLoad()
            load.add(user, nodes, walltime, state in states.ACTIVE_STATES)
        return loads

    def _write(self, kinds: Iterable[str], job: Mapping[str, Any], now: float,
               exit_status: int | None = None, **fields: Any) -> None:
        """The accounting records of one transition, with Cobalt's fields for each type."""
        for kind in kinds:
            if kind == "S":
                body = records.start_fields(_facts(job), now)
            elif kind == "E":
                body = records.end_fields(_facts(job), now, exit_status)
            elif kind == "A":
                body = {"reason": "time_limit"}
            elif kind == "R":  # queued again, keeping its first qtime
                body = records.queued_fields(_facts(job))
            else:  # D, HA, HR: who asked, and the hold's type
                body = fields
            self.accounting.write(now, kind, job["jobid"], body)


class _Everyone:
    """Contains every job id: a policy that scored no job this pass."""

    def __contains__(self, _item: object) -> bool:
        return True


def _require_admin(caller: Caller, what: str) -> None:
    if not caller.is_admin:
        raise PermissionError(f"{what} needs root or membership of the admin group")


def _failed(jobid: int, action: str, reason: str) -> dict[str, Any]:
    """A refused per-job request in Cobalt's shape; `action` names the job as `job {}`."""
    return {"jobid": jobid, "ok": False,
            "message": f"   Failed to {action.format(jobid)}: {reason}"}


def _status_changes(before: JobStatus, after: JobStatus) -> dict[str, Any]:
    return {name: getattr(after, name) for name in ("state", "user_hold", "admin_hold")
            if getattr(after, name) != getattr(before, name)}


def _shown(field: str, value: Any) -> str:
    if field == "walltime" and isinstance(value, int):
        return format_hms(value)
    if isinstance(value, list):
        return ":".join(map(str, value)) or "none"
    return str(value)


def _group_names(user: str, gid: int) -> set[str]:
    """The user's groups by name (the groups restriction): primary and supplementary."""
    try:
        gids = os.getgrouplist(user, gid)
    except (KeyError, OSError):
        gids = [gid]
    names = set()
    for g in gids:
        try:
            names.add(grp.getgrgid(g).gr_name)
        except KeyError:
            names.add(str(g))
    return names


def _facts(job: Mapping[str, Any]) -> records.JobFacts:
    try:
        group = grp.getgrgid(job["gid"]).gr_name
    except KeyError:
        group = str(job["gid"])
    return records.JobFacts(
        jobid=job["jobid"], user=job["user"], queue=job["queue"], project=job["project"],
        nodes=job["nodes"], walltime=job["walltime"], submittime=job["submittime"],
        jobname=job["jobname"], group=group, procs=job["procs"], mode=job["mode"],
        cwd=job["cwd"], command=job["command"], args=list(job["args"]),
        dependencies=list(job["dependencies"]), starttime=job["starttime"],
        location=job["location"] or "", requested_queue=job["routed_from"])


_TYPE_NAMES = {str: "text", int: "whole number", bool: "true or false", list: "list",
               dict: "mapping"}


def _check_field_types(job: Mapping[str, Any]) -> None:
    """Each optional field has its default's type (exactly: True is not a number of procs), and
    lists and mappings hold what the runner will use: the database would otherwise store, or
    refuse with a driver error, whatever a client sends."""
    for key, default in DEFAULTS.items():
        if type(job[key]) is not type(default):
            raise SubmissionError(f"{key} {job[key]!r} must be a {_TYPE_NAMES[type(default)]}")
    if job["procs"] < 0:
        raise SubmissionError(f"procs {job['procs']} must not be negative")
    if not 0 <= job["umask"] <= 0o777:
        raise SubmissionError(f"umask {job['umask']:o} is not a file mode mask (0 to 777)")
    for key in ("args", "user_list"):
        if not all(isinstance(item, str) for item in job[key]):
            raise SubmissionError(f"{key} {job[key]!r} must be a list of text")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in job["env"].items()):
        raise SubmissionError("env must map variable names to text values")


def _check_text(field: str, value: str) -> None:
    """Text must be storable and readable anywhere: refuse NUL and lone surrogates."""
    if "\0" in value:
        raise SubmissionError(f"{field} contains a NUL character, which cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SubmissionError(
            f"{field} contains {value[exc.start]!r} at position {exc.start}, a lone surrogate "
            "that is not valid Unicode text") from None


def _check_all_text(field: str, value: Any) -> None:
    if isinstance(value, str):
        _check_text(field, value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                _check_text(f"a {field} name", key)
            _check_all_text(f"{field}[{key!r}]" if _printable_key(key) else field, item)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_all_text(f"{field}[{i}]", item)


def _printable_key(key: Any) -> bool:
    return isinstance(key, str) and key.isprintable() and len(key) <= 64 and _encodes(key)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _over(field: str, what: str, size: int, limit: int) -> SubmissionError:
    return SubmissionError(f"{field} has {size} {what}, over the limit of {limit} {what}")


def _check_text_and_sizes(job: Mapping[str, Any]) -> None:
    """Every text of the submission is valid, and every field within its limit
    (cobaltlite.queue_manager.limits), the same on every database."""
    for key, limit in lim.TEXT_LIMITS.items():
        # command and cwd have no default, so no type yet: the path checks refuse non-text.
        if isinstance(job[key], str) and len(job[key]) > limit:
            raise _over(key, "characters", len(job[key]), limit)
    args, env = job["args"], job["env"]
    if len(args) > lim.MAX_ARGS:
        raise _over("args", "arguments", len(args), lim.MAX_ARGS)
    for i, arg in enumerate(args):
        if len(arg) > lim.MAX_ARG:
            raise _over(f"args[{i}]", "characters", len(arg), lim.MAX_ARG)
    total = sum(map(len, args))
    if total > lim.MAX_ARGS_TOTAL:
        raise _over("args", "characters in all", total, lim.MAX_ARGS_TOTAL)
    if len(env) > lim.MAX_ENV_VARS:
        raise _over("env", "variables", len(env), lim.MAX_ENV_VARS)
    for name, value in env.items():
        if len(name) > lim.MAX_ENV_NAME:
            raise _over("an env variable's name", "characters", len(name), lim.MAX_ENV_NAME)
        if len(value) > lim.MAX_ENV_VALUE:
            shown = name if _printable_key(name) else "an env variable"
            raise _over(f"env {shown}", "characters", len(value), lim.MAX_ENV_VALUE)
    total = sum(len(k) + len(v) for k, v in env.items())
    if total > lim.MAX_ENV_TOTAL:
        raise _over("env", "characters in all", total, lim.MAX_ENV_TOTAL)
    if len(job["dependencies"]) > lim.MAX_DEPENDENCIES:
        raise _over("dependencies", "job ids", len(job["dependencies"]), lim.MAX_DEPENDENCIES)
    if len(job["user_list"]) > lim.MAX_USER_LIST:
        raise _over("user_list", "names", len(job["user_list"]), lim.MAX_USER_LIST)
    for name in job["user_list"]:
        if len(name) > lim.MAX_USER_NAME:
            raise _over("a user_list name", "characters", len(name), lim.MAX_USER_NAME)
    if job["procs"] > lim.MAX_PROCS:
        raise SubmissionError(f"procs {job['procs']} is over the limit of {lim.MAX_PROCS}")
    for key in (*lim.TEXT_LIMITS, "args", "env", "user_list", "attrs"):
        _check_all_text(key, job[key])
    try:
        attrs = json.dumps(job["attrs"], allow_nan=False)
    except (TypeError, ValueError):
        raise SubmissionError("attrs must hold only text, numbers, lists and mappings") from None
    if len(attrs) > lim.MAX_ATTRS:
        raise _over("attrs", "characters as JSON", len(attrs), lim.MAX_ATTRS)


def _launch_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("jobid", "uid", "gid", "user", "command", "args", "cwd", "env", "umask",
            "outputpath", "errorpath", "inputfile", "cobaltlog", "walltime", "nodes")
    return {key: job[key] for key in keys}
