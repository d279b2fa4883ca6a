"""The queue manager's two RPC faces.

`UserAPI` listens on the user socket: the caller is who the kernel says (SO_PEERCRED), never a
name the client sends. `ComponentAPI` listens on the component socket behind the shared secret
and serves the scheduler and the system. Errors cross the wire as builtin exceptions whose
message is meant for the user (ValueError: bad request; PermissionError: not allowed;
LookupError: no such thing).
"""

from __future__ import annotations

import pwd
from collections.abc import Callable
from typing import Any, TypeVar

import Pyro5.api

from cobaltlite.policy.utility import PolicyError
from cobaltlite.queue_manager import limits as lim
from cobaltlite.queue_manager.estimates import StartEstimator
from cobaltlite.queue_manager.manager import Caller, QueueManager, SubmissionError
from cobaltlite.reservations.model import ReservationError
from cobaltlite.rpc.transport import caller_credentials, uid_is_admin

T = TypeVar("T")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text, not {type(value).__name__}")
    return value


def _job_ids(value: Any, what: str = "job ids") -> list[int]:
    if not isinstance(value, list) or not all(
            isinstance(j, int) and not isinstance(j, bool) for j in value):
        raise ValueError(f"{what} must be a list of whole numbers")
    for jobid in value:
        # Past the job-id column's range no job can exist, and the database would refuse it.
        if not 0 <= jobid <= lim.MAX_JOBID:
            raise ValueError(f"job id {jobid} is out of range (0 to {lim.MAX_JOBID})")
    return value


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, not {type(value).__name__}")
    return value


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"{what} must be a list of names")
    return value


@Pyro5.api.expose
class UserAPI:
    """What users may ask over the user socket. Arguments come from any local account, so each
    is checked for its type here, before the queue manager sees it."""

    def __init__(self, manager: QueueManager, admin_group: str | None) -> None:
        self._qm = manager
        self._admin_group = admin_group

    def _caller(self) -> Caller:
        _pid, uid, gid = caller_credentials()
        return Caller(uid, gid, _user_name(uid), uid_is_admin(uid, self._admin_group))

    def whoami(self) -> dict[str, Any]:
        c = self._caller()
        return {"uid": c.uid, "user": c.user, "admin": c.is_admin}

    def submit(self, spec: dict[str, Any]) -> int:
        if not isinstance(spec, dict):
            raise ValueError("a submission must be a mapping of field: value")
        try:
            return self._qm.submit(self._caller(), spec)
        except SubmissionError as exc:
            raise ValueError(str(exc)) from None

    def jobs(self, jobids: list[int] | None = None,
             fields: list[str] | None = None) -> dict[str, Any]:
        """Jobs as {"columns": [...], "rows": [[...], ...]}, with only `fields` when given:
        one header instead of a key per value, and only the columns qstat shows, keep a
        10,000-job listing small."""
        columns, rows = self._qm.job_table(
            None if jobids is None else _job_ids(jobids),
            None if fields is None else _names(fields, "fields"))
        return {"columns": columns, "rows": rows}

    def delete(self, jobids: list[int], force: bool = False) -> list[dict[str, Any]]:
        """qdel; `force` (admin: cqadm -f --kill) ends a started job now, without waiting for
        the runner."""
        return self._qm.delete(self._caller(), _job_ids(jobids), _flag(force, "force"))

    def hold(self, jobids: list[int], kind: str) -> list[dict[str, Any]]:
        """qhold (kind "user": the owner or an admin), cqadm --admin-hold (kind "admin")."""
        return self._qm.hold(self._caller(), _job_ids(jobids), _text(kind, "hold kind"))

    def release(self, jobids: list[int], kind: str) -> list[dict[str, Any]]:
        """qrls (kind "user"), qrls --dependencies ("dependencies"), cqadm --admin-release
        ("admin")."""
        return self._qm.release(self._caller(), _job_ids(jobids), _text(kind, "release kind"))

    def alter(self, jobids: list[int], changes: dict[str, Any]) -> list[dict[str, Any]]:
        """qalter: the changes of docs/queue-manager-api.md, all or nothing per job."""
        if not isinstance(changes, dict) or not all(isinstance(k, str) for k in changes):
            raise ValueError("changes must be a mapping of field: value")
        return self._qm.alter(self._caller(), _job_ids(jobids), changes)

    def move(self, jobids: list[int], queue: str) -> list[dict[str, Any]]:
        """qmove / cqadm --queue."""
        return self._qm.move(self._caller(), _job_ids(jobids), _text(queue, "queue"))

    def run(self, jobids: list[int], location: str) -> list[dict[str, Any]]:
        """cqadm --run LOCATION (admin)."""
        return self._qm.run(self._caller(), _job_ids(jobids), _text(location, "location"))

    def adjust_scores(self, jobids: list[int], value: str) -> list[dict[str, Any]]:
        """schedctl --score [+|-]N (admin)."""
        return self._qm.adjust_scores(self._caller(), _job_ids(jobids), _text(value, "score"))

    def set_dep_frac(self, jobids: list[int], fraction: float) -> list[dict[str, Any]]:
        """schedctl --inherit F (admin)."""
        if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
            raise ValueError("the fraction must be a number from 0 to 1")
        return self._qm.set_dep_frac(self._caller(), _job_ids(jobids), float(fraction))

    def set_next_jobid(self, jobid: int) -> None:
        """cqadm -j N (admin)."""
        self._qm.set_next_jobid(self._caller(), _job_ids([jobid], "the job id")[0])

    def queues(self) -> list[dict[str, Any]]:
        """Every queue: name, state, policy, priority and every restriction (None if unset)."""
        return self._qm.queues()

    def add_queues(self, names: list[str]) -> None:
        """cqadm --addq (admin)."""
        self._qm.add_queues(self._caller(), _names(names, "queue names"))

    def delete_queues(self, names: list[str], force: bool = False) -> None:
        """cqadm --delq [-f] (admin)."""
        self._qm.delete_queues(self._caller(), _names(names, "queue names"),
                               _flag(force, "force"))

    def set_queue_state(self, names: list[str], state: str) -> None:
        """cqadm --startq/--stopq/--drainq/--killq (admin)."""
        self._qm.set_queue_state(self._caller(), _names(names, "queue names"),
                                 _text(state, "queue state"))

    def set_queue(self, names: list[str], settings: dict[str, str]) -> None:
        """cqadm --setq "k=v ..." split by the client into a mapping (admin)."""
        if not isinstance(settings, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in settings.items()):
            raise ValueError("settings must map setting names to text values")
        self._qm.set_queue(self._caller(), _names(names, "queue names"), settings)

    def unset_queue(self, names: list[str], keys: list[str]) -> None:
        """cqadm --unsetq "k ..." (admin)."""
        self._qm.unset_queue(self._caller(), _names(names, "queue names"),
                             _names(keys, "setting names"))

    def limits(self) -> dict[str, Any]:
        return self._qm.limits()

    def _require_admin(self, what: str) -> Caller:
        caller = self._caller()
        if not caller.is_admin:
            raise PermissionError(f"{what} needs root or membership of the admin group")
        return caller

    def reread_policy(self) -> dict[str, Any]:
        """Check and activate the utility file cobaltlite.yaml names now (schedctl
        --reread-policy)."""
        caller = self._require_admin("schedctl --reread-policy")
        try:
            return self._qm.reload_policies(caller.user, reread_config=True)
        except PolicyError as exc:
            raise ValueError(f"{exc}; the previous policies stay active") from None

    def set_queue_policy(self, queue: str, policy: str) -> None:
        """cqadm --policy NAME QUEUE."""
        self._require_admin("cqadm --policy")
        try:
            self._qm.set_queue_policy(_text(queue, "queue"), _text(policy, "policy"))
        except PolicyError as exc:
            raise ValueError(str(exc)) from None

    def policy_status(self) -> dict[str, Any]:
        return self._qm.policies.status()

    # ---- reservations (setres, releaseres, showres, userres) -------------------------------

    def add_reservation(self, request: dict[str, Any]) -> dict[str, Any]:
        """setres (admin)."""
        caller = self._require_admin("setres")
        return _reservation_call(lambda: self._qm.reservations.add(
            caller.user, _request(request)))

    def modify_reservation(self, request: dict[str, Any], defer: bool) -> dict[str, Any]:
        """setres -m [-D] (admin)."""
        caller = self._require_admin("setres -m")
        return _reservation_call(lambda: self._qm.reservations.modify(
            caller.user, _request(request), _flag(defer, "defer")))

    def release_reservations(self, names: list[str]) -> list[str]:
        """releaseres (admin)."""
        caller = self._require_admin("releaseres")
        return _reservation_call(lambda: self._qm.reservations.release(
            caller.user, _names(names, "reservation names")))

    def user_release_reservation(self, name: str) -> list[str]:
        """userres: a user listed in the reservation (or an admin) ends it, or skips to the
        next period of a cyclic one."""
        caller = self._caller()
        name = _text(name, "reservation name")
        return _reservation_call(lambda: self._qm.reservations.user_release(
            caller.user, name, caller.is_admin))

    def reservations(self) -> list[dict[str, Any]]:
        """showres: every reservation, for anyone."""
        return self._qm.reservations.listing()


def _request(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("a reservation request must be a mapping of option: value")
    return value


def _reservation_call(call: Callable[[], T]) -> T:
    """Run a reservation change; its refusals cross the wire as ValueError (a bad request)."""
    try:
        return call()
    except ReservationError as exc:
        raise ValueError(str(exc)) from None


@Pyro5.api.expose
class ComponentAPI:
    def __init__(self, manager: QueueManager, estimator: StartEstimator | None = None) -> None:
        self._qm = manager
        self._estimator = estimator

    @Pyro5.api.oneway
    def estimate_starts(self, backfill: str, window: int, failed: list[str],
                        places: dict[str, list[str]],
                        partitions: dict[str, Any] | None = None,
                        slack: dict[str, Any] | None = None) -> None:
        """After a scheduling pass: estimate the queued jobs' start times again, in the
        background (queue_manager/estimates.py), for the pass's settings, components out of
        service, queue -> places mappings, queue layout (its partitions as the system sends
        them; None: no layout) and slack scheme (the scheduler's settings and memory,
        `SlackState.to_wire`; None: not under slack backfilling)."""
        if self._estimator is not None:
            self._estimator.request(backfill, window, failed, places, partitions, slack)

    def ping(self) -> str:
        return "queue-manager"

    def now(self) -> float:
        return self._qm.clock.now()

    def schedulable_jobs(self) -> list[list[Any]]:
        return self._qm.schedulable_jobs()

    def start_job(self, jobid: int, location: str) -> bool:
        return self._qm.start_job(jobid, location)

    def job_ended(self, jobid: int, exit_status: int | None, reason: str, end_time: float) -> bool:
        return self._qm.job_ended(jobid, exit_status, reason, end_time)

    def job_killed_by_failure(self, jobid: int, component: str, end_time: float,
                              resubmit: bool) -> bool:
        return self._qm.job_killed_by_failure(jobid, component, end_time, resubmit)

    def jobs(self) -> list[dict[str, Any]]:
        return self._qm.jobs()

    def waiting_jobs(self) -> dict[str, int]:
        """Queue name -> jobs of it not yet started, for every queue (the system's check that
        a queue mapping leaves no waiting job without a place)."""
        return self._qm.waiting_jobs()

    def started_since(self, time: float) -> list[tuple[int, float, float]]:
        """(jobid, submittime, starttime) of the jobs started at `time` or later (the metrics
        monitor's wait statistics)."""
        return self._qm.store.started_since(float(time))

    def reservation_windows(self) -> list[list[Any]]:
        """The reservation periods ending after now, for the scheduler's pass."""
        return self._qm.reservations.windows()

    def reservation_cost(self) -> dict[str, float]:
        """What the reservations cost (reservations/cost.py), the metrics monitor's reservation
        metrics: the nodes they hold counted now, the delays as of the last estimate."""
        return {**self._qm.reserved_capacity(), **self._qm.reservation_delays}
