"""The system component's RPC faces.

`SystemAPI` listens on the component socket behind the shared secret and serves the queue
manager, the scheduler and the metrics monitor. `SystemControlAPI` listens on a user socket
(partadm, partlist, an external failure monitor): the caller is who the kernel says
(SO_PEERCRED), and failing components or setting the forecast needs root or the admin group.
Errors cross the wire as builtin exceptions whose message is meant for the user.
"""

from __future__ import annotations

import pwd
from typing import Any

import Pyro5.api

from cobaltlite.machine.wire import description_to_wire
from cobaltlite.rpc.transport import caller_credentials, uid_is_admin
from cobaltlite.system.admin import ACTIONS, OPTIONS
from cobaltlite.system.forecast import ForecastError
from cobaltlite.system.service import SystemService

MAX_LAYOUT_TEXT = 64 * 1024
"""Characters of a queue layout sent to set_queue_layout: some thousand job classes, far more
than any machine needs, while checking their overlaps (quadratic) stays quick."""


@Pyro5.api.expose
class SystemAPI:
    def __init__(self, service: SystemService) -> None:
        self._service = service

    def ping(self) -> str:
        return "system"

    def description(self) -> dict[str, Any]:
        return description_to_wire(self._service.description)

    def limits(self) -> dict[str, Any]:
        return self._service.limits()

    def allocations(self) -> list[dict[str, Any]]:
        return self._service.allocations()

    def machine_state(self, known_forecast: int) -> dict[str, Any]:
        return self._service.machine_state(known_forecast)

    def admin_state(self) -> dict[str, list[str]]:
        return self._service.admin_state()

    def partitions(self) -> list[dict[str, Any]]:
        return self._service.partitions()

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int:
        return self._service.launch(jobid, location, spec)

    def kill(self, jobid: int) -> bool:
        return self._service.kill(jobid)

    def job_status(self, jobid: int) -> str:
        return self._service.job_status(jobid)

    def queue_layout(self) -> str | None:
        """The active queue layout's YAML text, None without one: the queue manager routes
        submissions by it (cobaltlite/queue_manager/routing.py)."""
        return self._service.queue_layout()


def _components(value: Any) -> list[str]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(name, str) and name for name in value)):
        raise ValueError("give one or more component names")
    return value


@Pyro5.api.expose
class SystemControlAPI:
    """partadm's and partlist's face: listings for anyone; failures and forecasts for admins."""

    def __init__(self, service: SystemService, admin_group: str | None) -> None:
        self._service = service
        self._admin_group = admin_group

    def _require_admin(self, what: str) -> str:
        """The admin caller's name; PermissionError for anyone else."""
        _pid, uid, _gid = caller_credentials()
        if not uid_is_admin(uid, self._admin_group):
            raise PermissionError(f"{what} needs root or membership of the admin group")
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return str(uid)

    def partitions(self) -> list[dict[str, Any]]:
        return self._service.partitions()

    def description(self) -> dict[str, Any]:
        """The machine's description (partadm --xml): nothing in it is secret."""
        return description_to_wire(self._service.description)

    def failure_status(self) -> dict[str, Any]:
        """The failed components and where the forecast comes from (schedctl --status)."""
        return self._service.failure_status()

    def agents(self) -> list[dict[str, Any]]:
        """Each node agent: host, address, node, state (up or down) and why it is down."""
        return self._service.agent_listing()

    def fail(self, components: list[str]) -> dict[str, Any]:
        by = self._require_admin("partadm --fail")
        return self._service.fail(_components(components), by)

    def unfail(self, components: list[str]) -> dict[str, Any]:
        by = self._require_admin("partadm --unfail")
        return self._service.unfail(_components(components), by)

    def administer(self, action: str, places: list[str], queues: list[str],
                   force: bool) -> dict[str, Any]:
        """partadm's and nodeadm's changes (cobaltlite.system.admin); admin only."""
        if not isinstance(action, str) or action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        by = self._require_admin(OPTIONS[action])
        if not isinstance(queues, list) or not all(isinstance(q, str) and q for q in queues):
            raise ValueError("give queue names as a list of names")
        if not isinstance(force, bool):
            raise ValueError("force must be true or false")
        return self._service.administer(action, _components(places), queues, force, by)

    def set_queue_layout(self, yaml_text: str, dry_run: bool = False) -> dict[str, Any]:
        """Check a queue layout (partadm or cqadm --layout; YAML, docs/hybrid-queues.md) and,
        unless `dry_run`, make it the active one from the scheduler's next pass, kept across
        restarts. Blank text removes the layout. Admin only, a dry run too: partadm asks it
        before it creates queues, so a plain user is refused before anything changes. Returns
        each queue's nodes, the pool and the rest as node ranges."""
        if not isinstance(yaml_text, str) or len(yaml_text) > MAX_LAYOUT_TEXT:
            raise ValueError(f"give the queue layout as YAML text of at most "
                             f"{MAX_LAYOUT_TEXT} characters")
        by = self._require_admin("setting a queue layout (partadm/cqadm --layout)"
                                 if yaml_text.strip() else "partadm --layout-clear")
        if not isinstance(dry_run, bool):
            raise ValueError("dry_run must be true or false")
        return self._service.set_queue_layout(yaml_text, dry_run, by)

    def queue_layout(self) -> str | None:
        """The active queue layout's YAML text (partadm --layout-show); None: no layout."""
        return self._service.queue_layout()

    def set_forecast(self, entries: list[list[Any]]) -> int:
        """Replace the failure forecast with `entries` ([component, P_f] or [component, P_f,
        from, until], times in Unix seconds or ISO 8601); returns how many are active."""
        by = self._require_admin("setting the failure forecast")
        try:
            return self._service.set_forecast(entries, by)
        except ForecastError as exc:
            raise ValueError(f"{exc}; the previous forecast stays active") from None
