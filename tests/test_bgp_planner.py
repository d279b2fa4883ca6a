"""The Blue Gene/P planner's per-block index of reservations (machine/bgp.py, `BGPPlanner`)
answers every question as the scan of the reservation list it replaces: the same earliest
start and block, the same place free now, on random plans with running jobs (overdue ones
too), admins' reservations with and without pass-through, zero-length jobs, touching and
overlapping reservations, `not_before`, place sets, failures, and copies of a planner."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_scheduler_properties import bgp_machine

from cobaltlite.machine.bgp import BGPMachine, BGPPlanner
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine

_INTREPID = build_machine(load_description("intrepid"))
_FIG1 = bgp_machine()

# Durations on a coarse grid so that reservations touch and overlap often; 0 is a job of zero
# requested time, planned on the list by both planners.
durations = st.sampled_from([0.0, 0.5, 5.0, 10.0, 10.0, 15.0, 20.0, 20.0, 35.0])
operations = st.lists(st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 8), durations,
              st.one_of(st.none(), st.sampled_from([0.0, 10.0, 20.0, 25.0])), st.booleans()),
    st.tuples(st.just("now"), st.integers(0, 8), durations, st.booleans()),
    st.tuples(st.just("plan_now"), st.integers(0, 8), durations, st.booleans()),
    st.tuples(st.just("book"), st.integers(0, 226), st.sampled_from([0.0, 5.0, 10.0, 20.0, 30.0]),
              durations, st.booleans()),
    st.tuples(st.just("copy"),),
), min_size=1, max_size=60)


def _apply(planner: BGPPlanner, op: tuple, machine: BGPMachine, allowed: frozenset[str]):
    kind = op[0]
    if kind == "copy":
        return None
    if kind == "book":
        _, block, start, length, wires = op
        planner.book(frozenset({machine.names[block % len(machine.names)]}), start,
                     start + length, wires)
        return None
    size = machine.sizes[op[1] % len(machine.sizes)]
    places = allowed if op[-1] else None
    if kind == "reserve":
        return planner.reserve_earliest(size, op[2], places, op[3])
    if kind == "now":
        return planner.location_now(size, op[2], places)
    return planner.plan_now(size, op[2], places)


@settings(max_examples=150, deadline=None)
@given(intrepid=st.sampled_from([False, False, True]),
       running=st.lists(st.tuples(st.integers(0, 226), st.sampled_from([-5, 0, 5, 10, 20, 30])),
                        max_size=6),
       failed=st.lists(st.integers(0, 226), max_size=2),
       allowed=st.lists(st.integers(0, 226), min_size=1, max_size=12), ops=operations)
def test_the_per_block_index_plans_as_the_reservation_list(
        intrepid: bool, running: list[tuple[int, int]], failed: list[int],
        allowed: list[int], ops: list[tuple]) -> None:
    machine = _INTREPID if intrepid else _FIG1
    names = machine.names
    now = 0.0
    try:
        for block in failed:
            machine.fail(names[block % len(names)])
        for k, (block, left) in enumerate(running):
            name = names[block % len(names)]
            if (machine._available >> machine.index[name]) & 1:
                machine.allocate(name, k, now + left)  # left <= 0: overdue
        places = frozenset(names[i % len(names)] for i in allowed)
        scan = machine.planner(now)
        scan.index_from = 10**9  # never indexed: every answer from the list
        indexed = machine.planner(now)
        indexed.index_from = 0  # indexed from the first reservation
        for op in ops:
            if op[0] == "copy":
                scan, indexed = scan.copy(), indexed.copy()
                scan.index_from, indexed.index_from = 10**9, 0
                continue
            assert _apply(scan, op, machine, places) == _apply(indexed, op, machine, places), op
            assert scan._reservations == indexed._reservations
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)
        for component in machine.failed_components():
            machine.unfail(component)


def test_a_reservation_starting_as_a_job_would_end_leaves_its_block_to_it() -> None:
    """The boundary case of both ways, which random plans rarely hit: a block booked over
    [5, 10) is free now for a job of 5 seconds, not for one of 6, and a 5-second job reserved
    behind the booking starts at 0 on it when that is the first such block."""
    for index_from in (0, 10**9):
        planner = _FIG1.planner(0.0)
        planner.index_from = index_from
        for block in ("A", "C", "D", "E", "F", "G", "H"):
            planner.book(frozenset({block}), 0.0, 40.0, wires=False)
        planner.book(frozenset({"B"}), 5.0, 10.0, wires=False)
        assert planner.location_now(512, 5.0) == "B"
        assert planner.location_now(512, 6.0) is None
        assert planner.reserve_earliest(512, 5.0) == (0.0, "B")
        assert planner.reserve_earliest(512, 5.0) == (10.0, "B")
