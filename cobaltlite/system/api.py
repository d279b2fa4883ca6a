"""The system component's RPC face (component socket, shared secret)."""

from __future__ import annotations

from typing import Any

import Pyro5.api

from cobaltlite.machine.wire import description_to_wire
from cobaltlite.system.service import SystemService


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

    def partitions(self) -> list[dict[str, Any]]:
        return self._service.partitions()

    def launch(self, jobid: int, location: str, spec: dict[str, Any]) -> int:
        return self._service.launch(jobid, location, spec)

    def kill(self, jobid: int) -> bool:
        return self._service.kill(jobid)

    def job_status(self, jobid: int) -> str:
        return self._service.job_status(jobid)
