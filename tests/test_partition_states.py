"""Live partition states on the small 2-rack Blue Gene/P table, as partlist will show them."""

from __future__ import annotations

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.catalog import load_description


def states(machine: BGPMachine) -> dict[str, str]:
    return {b["name"]: b["state"] for b in machine.block_states()}


def test_holding_a_midplane_busies_it_and_blocks_its_relatives() -> None:
    machine = BGPMachine(load_description("bgp-2rack"))
    assert set(states(machine).values()) == {"idle"}
    machine.allocate("ANL-R00-M0-512", 7, 100.0)
    shown = states(machine)
    assert shown["ANL-R00-M0-512"] == "busy"
    # Parents share its node cards.
    assert shown["ANL-R00-1024"] == "blocked (ANL-R00-M0-512)"
    assert shown["ANL-R00-R01-2048"] == "blocked (ANL-R00-M0-512)"
    # Its sibling midplane shares no node card and no wire: still free.
    assert shown["ANL-R00-M1-512"] == "idle"
    machine.release(7)
    assert set(states(machine).values()) == {"idle"}


def test_a_rack_blocks_the_other_rack_through_the_wiring() -> None:
    machine = BGPMachine(load_description("bgp-2rack"))
    machine.allocate("ANL-R00-1024", 1, 100.0)
    # The two racks share no node card but their 1024-node tori use the same cables.
    assert states(machine)["ANL-R01-1024"] == "blocked-wiring (ANL-R00-1024)"
    assert machine.find_location(1024, 60, 0) is None


def test_an_offline_block_takes_no_job_and_says_so() -> None:
    machine = BGPMachine(load_description("bgp-2rack"))
    machine.set_usable("ANL-R00-M0-512", False)
    shown = states(machine)
    assert shown["ANL-R00-M0-512"] == "offline"
    # Blocks containing it cannot run jobs either (Cobalt: non-functional relatives).
    assert shown["ANL-R00-1024"].startswith("offline")
    assert shown["ANL-R00-R01-2048"].startswith("offline")
    assert machine.find_location(1024, 60, 0) == "ANL-R01-1024"
    machine.set_usable("ANL-R00-M0-512", True)
    assert set(states(machine).values()) == {"idle"}
