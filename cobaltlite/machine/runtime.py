"""Build the runtime model that fits a description."""

from __future__ import annotations

from collections.abc import Iterable

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.description import BGPDescription, FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import FailureChance, Machine


def build_machine(
    description: BGPDescription | FlatDescription,
    failures: FailureChance | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
) -> Machine:
    """The runtime model; `failures`, `alpha` and `beta` set the allocation cost (seed 003
    §IV-B) and stay settable on the result."""
    if isinstance(description, FlatDescription):
        return FlatMachine(description, failures=failures, alpha=alpha, beta=beta)
    return BGPMachine(description, failures=failures, alpha=alpha, beta=beta)


def set_out_of_service(machine: Machine, failed: Iterable[str]) -> None:
    """Make `failed` exactly the machine's components out of service (a replica catching up)."""
    failed = set(failed)
    before = set(machine.failed_components())
    for name in before - failed:
        machine.unfail(name)
    for name in failed - before:
        machine.fail(name)


class AdminReplica:
    """The places an admin took out of scheduling (partadm, nodeadm: `unscheduled`, disabled or
    deleted; `inactive`, deactivated blocks), applied to a replica `machine` of the system's:
    the scheduler's and the start estimates' (else a job only such a place fits is started, or
    estimated to start, at once). Each `apply` changes only the places that changed since the
    last, which it remembers."""

    def __init__(self, machine: Machine) -> None:
        self._machine = machine
        self._unscheduled: set[str] = set()
        self._inactive: set[str] = set()

    def apply(self, unscheduled: Iterable[str], inactive: Iterable[str]) -> None:
        """Make `unscheduled` and `inactive` exactly the places out of scheduling."""
        machine, unscheduled, inactive = self._machine, set(unscheduled), set(inactive)
        for name in self._unscheduled.symmetric_difference(unscheduled):
            machine.set_scheduled(name, name not in unscheduled)
        self._unscheduled = unscheduled
        if isinstance(machine, BGPMachine):  # only blocks are deactivated
            for name in self._inactive.symmetric_difference(inactive):
                machine.set_usable(name, name not in inactive)
            self._inactive = inactive
