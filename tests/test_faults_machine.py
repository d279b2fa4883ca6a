"""The machine under failures: fail/unfail a component, what is killed, what can be placed."""

from __future__ import annotations

import math

import pytest

from cobaltlite.errors import MachineError
from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.runtime import AdminReplica, build_machine


def states(machine: BGPMachine) -> dict[str, str]:
    return {str(b["name"]): str(b["state"]) for b in machine.block_states()}


def two_racks() -> BGPMachine:
    return BGPMachine(load_description("bgp-2rack"))


def test_a_replica_places_no_job_where_an_admin_took_places_out_and_again_once_back() -> None:
    """The scheduler's and the start estimates' replica (AdminReplica): a disabled block and a
    deactivated one get no job, nor does a block sharing node cards with the deactivated one;
    each state the system sends replaces the last, so a block enabled again takes jobs again."""
    machine = two_racks()
    admin = AdminReplica(machine)
    admin.apply(["ANL-R00-1024"], ["ANL-R01-M0-512"])
    assert machine.find_location(1024, 60, 0) is None  # R00 disabled, R01 shares M0's cards
    assert machine.find_location(512, 60, 0) == "ANL-R00-M0-512"  # disabling spares relatives
    admin.apply(["ANL-R00-1024"], [])
    assert machine.find_location(1024, 60, 0) == "ANL-R01-1024"
    admin.apply([], [])
    assert machine.find_location(2048, 60, 0) == "ANL-R00-R01-2048"


def test_a_failed_midplane_names_exactly_the_jobs_over_it_and_takes_its_blocks_out() -> None:
    machine = two_racks()
    machine.allocate("ANL-R00-M0-512", 1, 100.0)
    machine.allocate("ANL-R00-M1-512", 2, 100.0)
    machine.allocate("ANL-R01-M0-512", 3, 100.0)
    assert machine.fail("R00-M1") == [2]
    shown = states(machine)
    assert shown["ANL-R00-M1-512"] == "failed"
    assert shown["ANL-R00-1024"] == "failed"  # it contains the midplane
    assert shown["ANL-R00-M0-512"] == "busy"
    assert machine.failed_components() == ["R00-M1"]
    machine.release(2)
    # Released, the failed midplane is still not free; its sibling rack's free midplane is.
    assert machine.find_location(512, 60, 0) == "ANL-R01-M1-512"
    machine.allocate("ANL-R01-M1-512", 4, 100.0)
    assert machine.find_location(512, 60, 0) is None
    machine.unfail("R00-M1")
    assert machine.failed_components() == []
    assert machine.find_location(512, 60, 0) == "ANL-R00-M1-512"


def test_a_failed_node_card_takes_down_the_blocks_over_it_only() -> None:
    machine = BGPMachine(load_description("intrepid", schedulable="all"))
    machine.allocate("ANL-R00-M0-N04-64", 1, 100.0)
    machine.allocate("ANL-R00-M0-N00-64", 2, 100.0)
    assert machine.fail("R00-M0-N04") == [1]
    shown = states(machine)
    assert shown["ANL-R00-M0-N04-64"] == "failed"
    assert shown["ANL-R00-M0-512"] == "failed"
    assert shown["ANL-R00-M0-N06-64"] != "failed"
    assert "ANL-R00-M0-N04-64" in machine.places_over("R00-M0-N04")
    assert "ANL-R00-M1-512" not in machine.places_over("R00-M0-N04")


def test_failing_a_block_fails_all_its_node_cards() -> None:
    machine = two_racks()
    machine.fail("ANL-R00-1024")
    shown = states(machine)
    assert shown["ANL-R00-M0-512"] == shown["ANL-R00-M1-512"] == "failed"
    assert shown["ANL-R01-M0-512"] == "idle"


def test_a_planner_never_reserves_a_failed_place() -> None:
    machine = two_racks()
    machine.fail("R00-M0")
    machine.allocate("ANL-R01-1024", 1, 500.0)
    start, where = machine.planner(0.0).reserve_earliest(1024, 60)
    assert (start, where) == (500.0, "ANL-R01-1024")
    # No 2048-node block is in service: nothing is reserved rather than a failed block.
    assert machine.planner(0.0).reserve_earliest(2048, 60) == (math.inf, "")
    assert machine.planner(0.0).location_now(512, 60) == "ANL-R00-M1-512"


def test_an_unknown_component_is_refused_by_name() -> None:
    machine = two_racks()
    with pytest.raises(MachineError, match="R09-M3"):
        machine.fail("R09-M3")
    with pytest.raises(MachineError, match="nonsense"):
        machine.unfail("nonsense")
    flat = build_machine(FlatDescription("flat", 8))
    with pytest.raises(MachineError, match="'8'"):
        flat.fail("8")


def test_a_flat_machine_fails_nodes_and_never_places_on_them() -> None:
    machine = build_machine(FlatDescription("flat", 8))
    machine.allocate("0-3", 1, 100.0)
    assert machine.fail("2") == [1]
    assert machine.fail("5") == []
    assert machine.idle_nodes() == 3
    assert machine.find_location(3, 60, 0) == "4,6-7"
    assert machine.find_location(4, 60, 0) is None
    machine.release(1)
    assert machine.find_location(6, 60, 0) == "0-1,3-4,6-7"
    assert machine.planner(0.0).reserve_earliest(7, 60) == (math.inf, "")
    assert {b["name"]: b["state"] for b in machine.block_states()}["2"] == "failed"
    assert machine.failed_components() == ["2", "5"]
    machine.unfail("2")
    machine.unfail("5")
    assert machine.idle_nodes() == 8


class NodeChance:
    """P_f by node name, fixed: a stand-in predictor for the placement rule alone."""

    def __init__(self, chances: dict[str, float]) -> None:
        self.chances = chances

    def chance(self, location: str, start: float, end: float) -> float:
        return self.chances.get(location, 0.0)


def test_a_fault_aware_flat_machine_takes_the_nodes_least_likely_to_fail() -> None:
    machine = build_machine(FlatDescription("flat", 6), failures=NodeChance({"0": 0.6, "1": 0.6}))
    assert machine.find_location(3, 60, 0) == "2-4"
    machine.beta = 0.0  # ordinary allocation: the lowest-numbered nodes
    assert machine.find_location(3, 60, 0) == "0-2"
