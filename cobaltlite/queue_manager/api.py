"""The queue manager's two RPC faces.

`UserAPI` listens on the user socket: the caller is who the kernel says (SO_PEERCRED), never a
name the client sends. `ComponentAPI` listens on the component socket behind the shared secret
and serves the scheduler and the system. Errors cross the wire as builtin exceptions whose
message is meant for the user (ValueError: bad request; PermissionError: not allowed;
LookupError: no such thing).
"""

from __future__ import annotations

import pwd
from typing import Any

import Pyro5.api

from cobaltlite.policy.utility import PolicyError
from cobaltlite.queue_manager.manager import Caller, QueueManager, SubmissionError
from cobaltlite.rpc.transport import caller_credentials, uid_is_admin


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@Pyro5.api.expose
class UserAPI:
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
        try:
            return self._qm.submit(self._caller(), spec)
        except SubmissionError as exc:
            raise ValueError(str(exc)) from None

    def jobs(self, jobids: list[int] | None = None,
             fields: list[str] | None = None) -> dict[str, Any]:
        """Jobs as {"columns": [...], "rows": [[...], ...]}, with only `fields` when given:
        one header instead of a key per value, and only the columns qstat shows, keep a
        10,000-job listing small."""
        columns, rows = self._qm.job_table(jobids, fields)
        return {"columns": columns, "rows": rows}

    def delete(self, jobids: list[int]) -> list[dict[str, Any]]:
        return self._qm.delete(self._caller(), [int(j) for j in jobids])

    def queues(self) -> list[dict[str, Any]]:
        return self._qm.queues()

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
            self._qm.set_queue_policy(queue, policy)
        except PolicyError as exc:
            raise ValueError(str(exc)) from None

    def policy_status(self) -> dict[str, Any]:
        return self._qm.policies.status()


@Pyro5.api.expose
class ComponentAPI:
    def __init__(self, manager: QueueManager) -> None:
        self._qm = manager

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

    def jobs(self) -> list[dict[str, Any]]:
        return self._qm.jobs()
