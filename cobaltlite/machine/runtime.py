"""Build the runtime model that fits a description."""

from __future__ import annotations

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.description import BGPDescription, FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import FailureChance, Machine


def build_machine(
    description: BGPDescription | FlatDescription, failures: FailureChance | None = None
) -> Machine:
    if isinstance(description, FlatDescription):
        return FlatMachine(description)
    return BGPMachine(description, failures=failures)
