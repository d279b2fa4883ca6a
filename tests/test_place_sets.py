"""Queues mapped to places (partadm --queue): a mapped queue's jobs run only on its places, on
Blue Gene/P and on flat machines, in every backfilling scheme; unmapped queues are unchanged.
And what admins set on places: where each queue may run, and how the system keeps it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_scheduler_properties import BGP, FLAT8, SCHEMES, SETTINGS, MachineKind, workloads

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.bits import ranges_to_mask
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.system.admin import PlaceAdmin, PlaceKeeper, allowed_places
from cobaltlite.traces.model import TraceJob

R01 = frozenset({"ANL-R01-M0-512", "ANL-R01-M1-512", "ANL-R01-1024"})


def two_racks() -> BGPMachine:
    return BGPMachine(load_description("bgp-2rack"))


def test_a_bgp_job_goes_only_to_blocks_of_its_set() -> None:
    machine = two_racks()
    assert machine.find_location(512, 60, 0) == "ANL-R00-M0-512"
    assert machine.find_location(512, 60, 0, R01) == "ANL-R01-M0-512"
    machine.allocate("ANL-R01-M0-512", 1, 100.0)
    machine.allocate("ANL-R01-M1-512", 2, 200.0)
    assert machine.find_location(512, 60, 0, R01) is None
    planner = machine.planner(0.0)
    assert planner.location_now(512, 60, R01) is None
    assert planner.location_now(512, 60) == "ANL-R00-M0-512"
    # The drain waits for the set's first block to come free, not the idle rack 0.
    assert planner.reserve_earliest(512, 60, R01) == (100.0, "ANL-R01-M0-512")
    assert planner.reserve_earliest(1024, 60, R01) == (200.0, "ANL-R01-1024")


def test_a_set_of_large_blocks_still_runs_small_jobs_on_them() -> None:
    machine = two_racks()
    racks = frozenset({"ANL-R00-1024", "ANL-R01-1024"})
    assert machine.find_location(100, 60, 0, racks) == "ANL-R00-1024"
    assert machine.planner(0.0).reserve_earliest(2048, 60, racks) == (float("inf"), "")
    assert machine.find_location(100, 60, 0, frozenset({"no-such-block"})) is None


def test_a_flat_job_goes_only_to_nodes_of_its_set() -> None:
    machine = FlatMachine(FlatDescription("flat", 8))
    upper = frozenset(str(n) for n in range(4, 8))
    assert machine.find_location(2, 60, 0, upper) == "4-5"
    machine.allocate("4-6", 1, 100.0)
    assert machine.find_location(2, 60, 0, upper) is None
    assert machine.find_location(2, 60, 0) == "0-1"
    planner = machine.planner(0.0)
    assert planner.location_now(1, 60, upper) == "7"
    # Five nodes are free now, but only one of the set: the set's nodes come free at 100.
    assert planner.reserve_earliest(2, 60, upper) == (100.0, "2 nodes")
    assert planner.reserve_earliest(5, 60, upper) == (float("inf"), "")


def _replay(jobs: list[TraceJob], kind: MachineKind, backfill: str,
            places: dict[str, frozenset[str]]) -> list[tuple[int, float, str]]:
    qsim = Qsim(jobs, kind.build(), builtin_policy("fcfs"), Backfill(backfill))
    qsim.queue_places = places
    return sorted((o.jobid, o.start_time, o.location) for o in qsim.run().outcomes)


def _on_places(location: str, kind: MachineKind, places: frozenset[str]) -> bool:
    if not kind.is_flat:
        return location in places
    allowed = 0
    for name in places:
        allowed |= 1 << int(name)
    return ranges_to_mask(location) & ~allowed == 0


FLAT_PLACES = frozenset({"2", "3", "4", "5"})
BGP_PLACES = frozenset({"B", "C", "D", "CD", "A-0", "A-1"})


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT8, BGP]), backfill=st.sampled_from(SCHEMES))
def test_a_mapped_queue_starts_its_jobs_only_on_its_places(data, kind, backfill) -> None:
    jobs = data.draw(workloads(kind))
    mapped = data.draw(st.sets(st.sampled_from([j.jobid for j in jobs])))
    jobs = [TraceJob(j.jobid, j.submit_time, j.run_time, j.requested_time, j.nodes,
                     queue="mapped" if j.jobid in mapped else "default") for j in jobs]
    places = FLAT_PLACES if kind.is_flat else BGP_PLACES
    for jobid, _start, location in _replay(jobs, kind, backfill, {"mapped": places}):
        if jobid in mapped:
            assert _on_places(location, kind, places), f"job {jobid} ran on {location}"


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT8, BGP]), backfill=st.sampled_from(SCHEMES))
def test_a_mapping_of_a_queue_without_jobs_changes_no_schedule(data, kind, backfill) -> None:
    jobs = data.draw(workloads(kind))
    places = FLAT_PLACES if kind.is_flat else BGP_PLACES
    assert _replay(jobs, kind, backfill, {"other": places}) == _replay(jobs, kind, backfill, {})


# ---- what admins set (partadm, nodeadm) and how the system keeps it ---------------------------

PLACES = [str(n) for n in range(6)]
QUEUES = ["default", "prod", "debug"]


@st.composite
def admin_changes(draw):
    steps = draw(st.lists(st.tuples(
        st.sampled_from(["enable", "disable", "queue", "appq", "rmq"]),
        st.sets(st.sampled_from(PLACES), min_size=1),
        st.lists(st.sampled_from(QUEUES), min_size=1, max_size=2)), max_size=8))
    state = PlaceAdmin()
    for action, places, queues in steps:
        state = state.changed(action, sorted(places), queues)
    return state


@SETTINGS
@given(state=admin_changes(), queue=st.sampled_from([*QUEUES, "other"]))
def test_a_queue_runs_where_it_is_listed_else_on_places_listing_none(state, queue) -> None:
    allowed = allowed_places(state.place_map(PLACES), queue)
    listing = {p for p in PLACES if queue in state.queues.get(p, ())}
    if not state.queues:
        assert allowed is None
    elif listing:
        assert allowed == listing
    else:
        assert allowed == {p for p in PLACES if p not in state.queues}
    assert PlaceAdmin.from_json(json.loads(json.dumps(state.to_json()))) == state


def _keeper(path):
    machine = FlatMachine(FlatDescription("flat", 6))
    return machine, PlaceKeeper(machine, path)


def test_the_system_keeps_changes_across_a_restart_and_refuses_bad_ones(tmp_path) -> None:
    path = tmp_path / "places-admin"
    waiting = {"default": 1, "prod": 0}
    machine, keeper = _keeper(path)
    keeper.change("disable", ["0", "1"], [], False, {}, waiting)
    keeper.change("queue", ["5"], ["prod"], False, {}, waiting)
    assert machine.find_location(1, 60, 0) == "2"
    saved = path.read_text()
    for action, places, queues, why in (
            ("disable", ["2", "6"], [], "no node '6'"),
            ("queue", ["2"], ["nope"], "'nope' is not an existing queue"),
            ("delete", ["2"], [], "a flat machine has no blocks to delete"),
            ("queue", ["0", "1", "2", "3", "4"], ["prod"],
             "queue default (1 waiting) would be left")):
        with pytest.raises(ValueError, match=re.escape(why)):
            keeper.change(action, places, queues, False, {}, waiting)
        assert path.read_text() == saved
    # Down nodes still count as a place (they come back); forced, no node is left to default.
    keeper.change("queue", ["2", "3", "4"], ["prod"], False, {}, waiting)
    keeper.change("queue", ["0", "1"], ["prod"], True, {}, waiting)

    machine, again = _keeper(path)
    assert again.state == keeper.state
    assert machine.find_location(1, 60, 0) == "2"
    assert {b["name"]: b["state"] for b in machine.block_states()}["1"] == "down"
    assert again.place_map == {"queues": {"prod": PLACES}, "open": []}


def test_an_unreadable_file_leaves_the_machine_as_described(tmp_path) -> None:
    path = tmp_path / "places-admin"
    path.write_text('{"disabled": "everything"}')
    machine, keeper = _keeper(path)
    assert keeper.state == PlaceAdmin()
    assert machine.find_location(6, 60, 0) == "0-5"


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT8, BGP]), backfill=st.sampled_from(SCHEMES))
def test_a_disabled_block_or_down_node_never_gets_a_job(data, kind, backfill) -> None:
    jobs = data.draw(workloads(kind))
    machine = kind.build()
    names = [str(n) for n in range(kind.nodes)] if kind.is_flat else machine.names
    disabled = data.draw(st.sets(st.sampled_from(names), max_size=len(names) // 2))
    for name in disabled:
        machine.set_scheduled(name, False)
    outcomes = Qsim(jobs, machine, builtin_policy("fcfs"), Backfill(backfill)).run().outcomes
    for outcome in outcomes:
        held = ({str(n) for n in range(kind.nodes) if ranges_to_mask(outcome.location) >> n & 1}
                if kind.is_flat else {outcome.location})
        assert not held & disabled, f"job {outcome.jobid} ran on {outcome.location}"


def test_qsim_runs_a_mapped_queue_only_on_its_places(tmp_path: Path) -> None:
    """`qsim --queue-places` gives a replay the mapping partadm --queue gives the daemons."""
    from cobaltlite.qsim.cli import main

    trace = tmp_path / "two-queues.swf"
    trace.write_text("".join(
        f"{i} {i * 10} 0 100 2 -1 -1 2 100 -1 1 1 1 -1 {i % 2} -1 -1 -1\n" for i in range(1, 21)))
    out = tmp_path / "out"
    assert main(["--trace", str(trace), "--machine", "flat:8", "--queue-places", "1=6-7",
                 "--out", str(out), "--quiet"]) == 0
    ends = [line for line in (out / "accounting.log").read_text().splitlines() if ";E;" in line]
    mapped = [line for line in ends if " queue=1 " in line]
    assert len(mapped) == 10
    assert all(" exec_host=6-7 " in line for line in mapped)
    assert json.loads((out / "summary.json").read_text())["metrics"]["jobs"] == 20
    assert main(["--trace", str(trace), "--machine", "flat:8", "--queue-places", "1=6-9",
                 "--quiet"]) == 1
