"""The job state machine: every event a job can meet, and what it becomes.

One set of rules for the live queue manager and for Qsim (design notes: "Qsim reuses the real
queue/job logic"). A job's `JobStatus` is its stored state plus its holds; each event is a
function that returns the new status and the accounting record the change writes (Cobalt's
letters, reference §2.9), or raises `Refused` with Cobalt's reason for that job (reference §3.4:
"has already completed", "is already active", ...). Nothing here stores, signals or reads a
clock: the caller applies the outcome to its own store and runner.

Holds are three independent flags (reference §2.3): user_hold and admin_hold are set and cleared
by their own kind only; the dependency hold lasts while any dependency is not yet satisfied (the
parent has not ended with exit status 0). `dep_fail` marks a dependency that can no longer be
satisfied (the parent ended otherwise, was deleted, or never existed); the job stays held until
`release(..., "dependencies")`. `maxrun_hold` is not a hold of the job but of its queue (maxrunning,
maxtotaljobs): it is recomputed, never stored, and only the scheduler's start honours it (an
admin's run on a named place passes it by, as `cqadm --run` did).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from cobaltlite.jobs.states import (
    ACTIVE_STATES,
    DONE,
    EXITING,
    KILLING,
    QUEUED,
    RUNNING,
    STARTING,
    display_state,
)

HOLD_KINDS = ("user", "admin")
RELEASE_KINDS = ("user", "admin", "dependencies")


class Refused(Exception):
    """The event does not apply to the job in its state; the message is Cobalt's reason."""


class JobStatus(NamedTuple):
    """A job as the state machine sees it. A tuple: Qsim makes three transitions per job, and
    building and comparing tuples costs a fraction of a dataclass's."""

    state: str = QUEUED
    user_hold: bool = False
    admin_hold: bool = False
    waiting_on: frozenset[int] = frozenset()  # dependencies not satisfied yet
    dep_fail: bool = False
    maxrun_hold: bool = False

    @property
    def dep_hold(self) -> bool:
        return bool(self.waiting_on)

    @property
    def held(self) -> bool:
        return self.user_hold or self.admin_hold or bool(self.waiting_on)

    @property
    def runnable(self) -> bool:
        """What the scheduler may start."""
        return self.state == QUEUED and not self.held and not self.maxrun_hold

    def display(self) -> str:
        return display_state(self.state, self.user_hold, self.admin_hold, self.dep_hold,
                             self.dep_fail, self.maxrun_hold)


NEW = JobStatus()
"""A job just queued, without holds or dependencies."""


class Outcome(NamedTuple):
    status: JobStatus
    records: tuple[str, ...]  # the accounting record types the change writes, in order


def _remembered(event: Callable[[JobStatus], Outcome]) -> Callable[[JobStatus], Outcome]:
    """Remember an event's outcome for each status without dependencies (a handful of values),
    so a transition is a dictionary lookup (Qsim goes further: its start and launch are one
    lookup of the pair's result, qsim/engine.py's _LAUNCHED). Refusals are not remembered:
    they raise every time."""
    outcomes: dict[JobStatus, Outcome] = {}

    def remembered(status: JobStatus) -> Outcome:
        outcome = outcomes.get(status)
        if outcome is None:
            outcome = event(status)
            if not status.waiting_on:
                outcomes[status] = outcome
        return outcome

    remembered.__doc__ = event.__doc__
    return remembered


def _with_hold(status: JobStatus, kind: str, on: bool) -> JobStatus:
    if kind == "user":
        return status._replace(user_hold=on)
    return status._replace(admin_hold=on)


def _open(status: JobStatus) -> None:
    if status.state == DONE:
        raise Refused("has already completed")


def hold(status: JobStatus, kind: str) -> Outcome:
    """qhold / cqadm --user-hold, --admin-hold: only a queued job can be held (Cobalt ignores a
    hold of a started, non-preemptable job)."""
    if kind not in HOLD_KINDS:
        raise ValueError(f"hold kind {kind!r}: choose one of {', '.join(HOLD_KINDS)}")
    _open(status)
    if status.state != QUEUED:
        raise Refused("is already active")
    if getattr(status, f"{kind}_hold"):
        raise Refused(f"already in state '{kind} hold'")
    return Outcome(_with_hold(status, kind, True), ("HA",))


def release(status: JobStatus, kind: str) -> Outcome:
    """qrls / cqadm --user-release, --admin-release; "dependencies" drops the dependency hold
    and its list (qrls --dependencies)."""
    if kind not in RELEASE_KINDS:
        raise ValueError(f"release kind {kind!r}: choose one of {', '.join(RELEASE_KINDS)}")
    _open(status)
    if kind == "dependencies":
        if status.state != QUEUED:
            raise Refused("is already active")
        if not status.waiting_on and not status.dep_fail:
            raise Refused("does not have a 'dependency hold'")
        return Outcome(status._replace(waiting_on=frozenset(), dep_fail=False), ("HR",))
    if not getattr(status, f"{kind}_hold"):
        raise Refused(f"does not have a '{kind} hold'")
    return Outcome(_with_hold(status, kind, False), ("HR",))


def start(status: JobStatus, forced: bool = False) -> Outcome:
    """Queued -> starting: the scheduler's start (`forced` False) or an admin's run on a named
    place, which passes a queue's maxrun_hold by but no hold of the job."""
    return (_forced_start if forced else _start)(status)


def _start_checked(status: JobStatus, forced: bool) -> Outcome:
    _open(status)
    if status.state != QUEUED:
        raise Refused("is already active")
    if status.held:
        raise Refused(f"is held ({status.display()})")
    if status.maxrun_hold and not forced:
        raise Refused("is held by its queue's running-job limit (maxrun_hold)")
    return Outcome(status._replace(state=STARTING), ())


_start = _remembered(lambda status: _start_checked(status, False))
_forced_start = _remembered(lambda status: _start_checked(status, True))


@_remembered
def launched(status: JobStatus) -> Outcome:
    """The runner took the job: starting -> running, the S record."""
    if status.state != STARTING:
        raise Refused(f"is {status.state}, not starting")
    return Outcome(status._replace(state=RUNNING), ("S",))


def launch_failed(status: JobStatus) -> Outcome:
    """The runner refused the job: back to the queue, as if never started."""
    if status.state != STARTING:
        raise Refused(f"is {status.state}, not starting")
    return Outcome(status._replace(state=QUEUED), ())


def delete(status: JobStatus, force: bool = False) -> Outcome:
    """qdel: a queued job ends now; a started one is killed (SIGTERM, then SIGKILL after the
    grace period: the runner's part) and ends when the runner reports it. `force` (cqadm -f
    --kill) ends a started job now without waiting for the runner. A job already being killed
    is left as it is (no second D record) unless forced."""
    _open(status)
    if status.state == QUEUED:
        return Outcome(status._replace(state=DONE), ("D",))
    if force:
        # Ended now: the runner's later report finds the job done and writes nothing more.
        return Outcome(status._replace(state=DONE),
                       ("E",) if status.state in (KILLING, EXITING) else ("D", "E"))
    if status.state in (STARTING, RUNNING):
        return Outcome(status._replace(state=KILLING), ("D",))
    return Outcome(status, ())


@_remembered
def walltime_reached(status: JobStatus) -> Outcome:
    """The wall-time limit: a running job is killed, the A record (reason time_limit)."""
    if status.state not in (STARTING, RUNNING):
        raise Refused(f"is {status.state}, not running")
    return Outcome(status._replace(state=KILLING), ("A",))


@_remembered
def ended(status: JobStatus) -> Outcome:
    """The runner reports the end (any exit status): the E record, exactly once."""
    _open(status)
    if status.state not in ACTIVE_STATES:
        raise Refused("never started")
    return Outcome(status._replace(state=DONE), ("E",))


def requeued(status: JobStatus) -> Outcome:
    """A failed component killed the job and the site requeues such jobs: back to the queue
    with its original submit time, the R (rerun) record."""
    _open(status)
    if status.state not in ACTIVE_STATES:
        raise Refused("never started")
    return Outcome(status._replace(state=QUEUED), ("R",))


def parent_ended(status: JobStatus, parent: int, exit_status: int | None) -> Outcome:
    """A job this one depends on ended (or was deleted: exit_status None). Exit 0 satisfies the
    dependency; anything else can never satisfy it, so the job shows dep_fail at once (Cobalt
    found out on its 60 s check; the check remains for parents that never existed)."""
    if parent not in status.waiting_on or status.state == DONE:
        return Outcome(status, ())
    if exit_status == 0:
        waiting = status.waiting_on - {parent}
        # dep_fail speaks of the dependencies still pending: none left, nothing failed.
        return Outcome(status._replace(waiting_on=waiting, dep_fail=status.dep_fail and bool(
            waiting)), ())
    return Outcome(status._replace(dep_fail=True), ())


def parent_missing(status: JobStatus, parent: int) -> Outcome:
    """The periodic check: a dependency names no job the queue manager knows."""
    if parent not in status.waiting_on or status.dep_fail or status.state == DONE:
        return Outcome(status, ())
    return Outcome(status._replace(dep_fail=True), ())


EVENTS: dict[str, Callable[[JobStatus], Outcome]] = {
    "hold user": lambda s: hold(s, "user"),
    "hold admin": lambda s: hold(s, "admin"),
    "release user": lambda s: release(s, "user"),
    "release admin": lambda s: release(s, "admin"),
    "release dependencies": lambda s: release(s, "dependencies"),
    "run": start,
    "admin run": lambda s: start(s, forced=True),
    "launched": launched,
    "launch failed": launch_failed,
    "end 0": ended,
    "end 1": ended,
    "delete": delete,
    "force delete": lambda s: delete(s, force=True),
    "walltime": walltime_reached,
    "requeue": requeued,
}
"""Every event without an argument, by name: for tables, tests and traces of a job's life.
Parent events take the parent's id (parent_ended, parent_missing)."""
