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
