"""The queue manager's logic, free of RPC: submission, queries, deletion, scoring, job ends.

Every method that changes a job commits before it returns, and every job state change is logged
with the job id. Identity (`Caller`) is decided by the transport from the kernel, never from
what a client sends. The clock is injected, so the same logic can run under Qsim.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from cobaltlite.accounting import AccountingLog
from cobaltlite.clock import Clock
from cobaltlite.policy.budget import BudgetExceeded, run_with_budget
from cobaltlite.policy.registry import PolicyRegistry
from cobaltlite.policy.utility import PassInputs, PolicyError
from cobaltlite.queue_manager import limits as lim
from cobaltlite.queue_manager import states
from cobaltlite.queue_manager.store import JobStore
from cobaltlite.timefmt import format_hms

log = structlog.get_logger("queue-manager")

FAILURE_END_REASON = "component failure"
"""End reason of a job killed because a component under it failed (partadm --fail)."""
ACCEPTING_QUEUE_STATES = frozenset({"running", "stopped"})
SCHEDULED_QUEUE_STATES = frozenset({"running", "draining"})


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

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int: ...

    def kill(self, jobid: int) -> bool: ...

    def job_status(self, jobid: int) -> str: ...


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
}


class ScoreWriter:
    """Writes the latest scores (shown by qstat) from a thread of its own.

    Writing 10,000 scores took as long as the rest of a pass; scores are recomputed at every
    pass, so only the newest set matters and a crash loses nothing worth keeping.
    """

    INTERVAL = 1.0
    """At most one write a second: passes come in bursts, and only the newest scores matter."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        self._latest: dict[int, float] | None = None
        self._written: dict[int, float] = {}
        self._ready = threading.Condition()
        threading.Thread(target=self._run, name="score writer", daemon=True).start()

    def submit(self, scores: dict[int, float]) -> None:
        with self._ready:
            self._latest = scores
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while self._latest is None:
                    self._ready.wait()
                scores, self._latest = self._latest, None
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
    ) -> None:
        self.store = store
        self.clock = clock
        self.accounting = accounting
        self.system = system
        self.wake_scheduler = wake_scheduler
        self.policies = policies or PolicyRegistry()
        self._lock = threading.RLock()
        self._limits: dict[str, Any] | None = None
        self._score_writer = ScoreWriter(store)

    def limits(self) -> dict[str, Any]:
        if self._limits is None:
            self._limits = self.system.limits()
        return self._limits

    # ---- users --------------------------------------------------------------------------

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
        queue = self.store.queue(job["queue"])
        if queue is None:
            names = ", ".join(q["name"] for q in self.store.queues())
            raise SubmissionError(f"queue {job['queue']!r} does not exist (queues: {names})")
        if queue["state"] not in ACCEPTING_QUEUE_STATES:
            raise SubmissionError(f"the {job['queue']!r} queue is {queue['state']}")
        _check_restrictions(queue, caller.user, walltime)
        for key in ("command", "cwd", "outputpath", "errorpath", "cobaltlog"):
            if not isinstance(job[key], str) or not job[key].startswith("/"):
                raise SubmissionError(f"{key} {job[key]!r} must be an absolute path")
        for dep in job["dependencies"]:
            if not isinstance(dep, int) or isinstance(dep, bool) or not 0 < dep <= lim.MAX_JOBID:
                raise SubmissionError(f"dependency {dep!r} is not a job id "
                                      f"(a whole number from 1 to {lim.MAX_JOBID})")
        user_list = sorted({caller.user, *job["user_list"]})
        now = self.clock.now()
        with self._lock:
            jobid = self.store.add_job({
                **job,
                "user": caller.user, "uid": caller.uid, "gid": caller.gid,
                "state": states.QUEUED, "submittime": now, "score": 0.0,
                "admin_hold": False, "user_list": user_list,
            })
        self.accounting.write(now, "Q", jobid, {
            "queue": job["queue"], "user": caller.user, "account": job["project"],
            "Resource_List.nodect": nodes,
            "Resource_List.walltime": format_hms(walltime),
        })
        log.info("job submitted", jobid=jobid, user=caller.user, nodes=nodes, queue=job["queue"])
        self.wake_scheduler()
        return jobid

    def jobs(
        self, jobids: Iterable[int] | None = None, fields: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """Jobs not yet done (or the named ones, done or not), with the state qstat shows."""
        names, rows = self.job_table(jobids, fields)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def job_table(
        self, jobids: Iterable[int] | None = None, fields: Iterable[str] | None = None
    ) -> tuple[list[str], list[list[Any]]]:
        """`jobs` as (column names, value lists); only `fields` when given. The shown state
        (display_state, short_state) is derived here from state, holds and dependencies, which
        travel only when asked for themselves."""
        derived_names = ["display_state", "short_state"]
        sources = ["state", "user_hold", "admin_hold", "dependencies"]
        wanted = None if fields is None else set(fields)
        derived = wanted is None or not wanted.isdisjoint(derived_names)
        fetch = wanted
        if wanted is not None:
            wanted -= set(derived_names)
            if derived:
                fetch = wanted | set(sources)
        names, rows = self.store.job_table(jobids=jobids, include_done=jobids is not None,
                                           fields=fetch)
        if not derived:
            return names, rows
        state_at, user_at, admin_at, deps_at = (names.index(name) for name in sources)
        keep = [i for i, name in enumerate(names) if wanted is None or name in wanted
                or name == "jobid"]
        table = []
        for row in rows:
            deps = row[deps_at]
            shown = states.display_state(row[state_at], row[user_at], row[admin_at],
                                         bool(deps) and self._dep_held({"dependencies": deps}))
            out = [row[i] for i in keep]
            out.append(shown)
            out.append(states.short_code(shown))
            table.append(out)
        return [*(names[i] for i in keep), *derived_names], table

    def delete(self, caller: Caller, jobids: Iterable[int]) -> list[dict[str, Any]]:
        """Delete jobs; each result says what happened, so qdel can speak for every id."""
        results = []
        for jobid in jobids:
            results.append(self._delete_one(caller, jobid))
        self.wake_scheduler()
        return results

    def _delete_one(self, caller: Caller, jobid: int) -> dict[str, Any]:
        with self._lock:
            job = self.store.job(jobid)
            if job is None:
                return {"jobid": jobid, "result": "unknown", "message": f"job {jobid} not found"}
            if job["state"] == states.DONE:
                return {"jobid": jobid, "result": "unknown", "user": job["user"],
                        "message": f"job {jobid} has already finished ({job['end_reason']})"}
            if not (caller.is_admin or caller.user in job["user_list"]):
                return {"jobid": jobid, "result": "refused", "user": job["user"],
                        "message": f"job {jobid} belongs to {job['user']}, not to {caller.user}"}
            now = self.clock.now()
            if job["state"] == states.QUEUED:
                if self.store.update_job(jobid, {"state": states.DONE, "endtime": now,
                                                 "end_reason": "deleted"},
                                         expect_states=[states.QUEUED]):
                    self.accounting.write(now, "D", jobid, {"requester": caller.user})
                    log.info("job deleted", jobid=jobid, by=caller.user, state="queued")
                    return {"jobid": jobid, "result": "deleted", "user": job["user"]}
                job = self.store.job(jobid) or job  # it started meanwhile: kill it below
            if job["state"] in (states.STARTING, states.RUNNING):
                self.store.update_job(jobid, {"state": states.KILLING},
                                      expect_states=[states.STARTING, states.RUNNING])
                self.accounting.write(now, "D", jobid, {"requester": caller.user})
                log.info("job kill requested", jobid=jobid, by=caller.user)
                self.system.kill(jobid)
                return {"jobid": jobid, "result": "killing", "user": job["user"]}
            return {"jobid": jobid, "result": "ending", "user": job["user"],
                    "message": f"job {jobid} is already {job['state']}"}

    def queues(self) -> list[dict[str, Any]]:
        return self.store.queues()

    # ---- the scheduler ----------------------------------------------------------------

    def schedulable_jobs(self) -> list[list[Any]]:
        """Runnable queued jobs of scheduled queues, scored now by their queue's policy.

        A policy that fails on a job leaves that job its previous score; one that overruns the
        time budget is suspended until the next reload (its jobs keep their scores). Either way
        the other policies, and scheduling, go on.
        """
        now = self.clock.now()
        queues = {q["name"]: q for q in self.store.queues()
                  if q["state"] in SCHEDULED_QUEUE_STATES}
        by_policy: dict[str, list[_Scored]] = {}
        for (jobid, nodes, walltime, submit, user, project, queue_name, score, user_hold,
             admin_hold, deps) in self.store.queued_for_scoring():
            queue = queues.get(queue_name)
            if queue is None or user_hold or admin_hold or (deps and self._dep_held(
                    {"dependencies": deps})):
                continue
            by_policy.setdefault(queue["policy"], []).append(_Scored(
                jobid, nodes, float(walltime), now - submit, user, project, queue_name,
                queue["priority"], score, score))
        ready: list[_Scored] = []
        for name, jobs in by_policy.items():
            ready.extend(jobs)
            self._score(name, jobs, self._inputs(now))
        self._score_writer.submit({j.jobid: j.score for j in ready})
        # Compact rows (jobid, size, wall_time, score, threshold): a pass may carry 10,000.
        return [[j.jobid, j.size, j.wall_time, j.score, j.threshold] for j in ready]

    def _inputs(self, now: float) -> PassInputs:
        limits = self.limits()
        return PassInputs(now, limits["machine_nodes"], limits["min_block_size"])

    def _score(self, name: str, jobs: list[_Scored], inputs: PassInputs) -> None:
        registry = self.policies
        if name in registry.suspended:
            return
        try:
            policy = registry.get(name)
            failures = run_with_budget(lambda: policy.score_jobs_keeping(jobs, inputs),
                                       registry.budget)
        except PolicyError as exc:
            registry.record_failure(name, str(exc))
        except BudgetExceeded:
            registry.record_failure(
                name, f"scoring {len(jobs)} jobs took more than the {registry.budget:g} s "
                "budget; suspended until the next reload", suspend=True)
        else:
            if failures:
                jobid, error = next(iter(failures.items()))
                registry.record_failure(
                    name, f"failed on {len(failures)} job(s), first job {jobid}: {error}")

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

    def start_job(self, jobid: int, location: str) -> bool:
        """Mark the job starting (committed), launch it, mark it running; False if refused."""
        with self._lock:
            if not self.store.update_job(jobid, {"state": states.STARTING, "location": location},
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
        self._write_start(job, location, now)
        log.info("job started", jobid=jobid, location=location)
        return True

    def _write_start(self, job: Mapping[str, Any], location: str, now: float) -> None:
        self.accounting.write(now, "S", job["jobid"], {
            "queue": job["queue"], "user": job["user"], "account": job["project"],
            "qtime": int(job["submittime"]), "start": int(now), "exec_host": location,
            "Resource_List.nodect": job["nodes"],
            "Resource_List.walltime": format_hms(job["walltime"]),
        })

    def job_ended(self, jobid: int, exit_status: int | None, reason: str, end_time: float) -> bool:
        """The system reports an end; idempotent, so the system may repeat it after a crash."""
        with self._lock:
            job = self.store.job(jobid)
            if job is None or job["state"] == states.DONE:
                return True
            self.store.update_job(jobid, {"state": states.DONE, "endtime": end_time,
                                          "exit_status": exit_status, "end_reason": reason})
        start = job["starttime"] or end_time
        if reason == "walltime":
            self.accounting.write(end_time, "A", jobid, {"reason": "time_limit"})
        self.accounting.write(end_time, "E", jobid, {
            "queue": job["queue"], "user": job["user"], "account": job["project"],
            "qtime": int(job["submittime"]), "start": int(start), "end": int(end_time),
            "exec_host": job["location"] or "", "runtime": int(end_time - start),
            "Exit_status": -1 if exit_status is None else exit_status,
            "Resource_List.nodect": job["nodes"],
            "Resource_List.walltime": format_hms(job["walltime"]),
        })
        log.info("job ended", jobid=jobid, exit_status=exit_status, reason=reason)
        self.wake_scheduler()
        return True

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
            self.store.update_job(jobid, {"state": states.QUEUED, "location": None,
                                          "starttime": None, "end_reason": FAILURE_END_REASON},
                                  expect_states=[job["state"]])
        self.accounting.write(end_time, "R", jobid, {
            "queue": job["queue"], "user": job["user"], "account": job["project"],
            "qtime": int(job["submittime"]), "Resource_List.nodect": job["nodes"],
            "Resource_List.walltime": format_hms(job["walltime"])})
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
                            self._write_start(job, job["location"], now)
                elif status == "unknown":
                    self.job_ended(job["jobid"], None, "lost", self.clock.now())

    def _dep_held(self, row: Mapping[str, Any]) -> bool:
        deps = row["dependencies"]
        if not deps:
            return False
        done = {j["jobid"]: j for j in self.store.jobs(jobids=deps, include_done=True)}
        return not all(d in done and done[d]["state"] == states.DONE
                       and done[d]["exit_status"] == 0 for d in deps)


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


def _check_restrictions(queue: Mapping[str, Any], user: str, walltime: int) -> None:
    """Queue restrictions with Cobalt's messages (reference §2.7)."""
    restrictions = queue["restrictions"] or {}
    name = queue["name"]
    if "maxtime" in restrictions and walltime > int(restrictions["maxtime"]):
        raise SubmissionError(f"Walltime greater than the '{name}' queue max walltime of "
                              f"{format_hms(int(restrictions['maxtime']))}")
    if "mintime" in restrictions and walltime < int(restrictions["mintime"]):
        raise SubmissionError(f"Walltime less than the '{name}' queue min walltime of "
                              f"{format_hms(int(restrictions['mintime']))}")
    users = restrictions.get("users")
    if users and users != "*" and user not in str(users).split(":"):
        raise SubmissionError(f"You are not allowed to submit to the '{name}' queue")


def _launch_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("jobid", "uid", "gid", "user", "command", "args", "cwd", "env", "umask",
            "outputpath", "errorpath", "cobaltlog", "walltime", "nodes")
    return {key: job[key] for key in keys}
