"""The Blue Gene/P planner's per-block index of reservations (machine/bgp.py, `BGPPlanner`)
answers every question as the scan of the reservation list it replaces: the same earliest
start and block, the same place free now, on random plans with running jobs (overdue ones
too), admins' reservations with and without pass-through, zero-length jobs, touching and
overlapping reservations, `not_before`, place sets, failures, jobs started on a plan, holds
of a given block, and copies of a planner; also far from time 0, where a sum of a time and a
duration is rounded. A planner moved to a later present answers as a new one holding its
reservations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scheduler_properties import bgp_machine

from cobaltlite.errors import MachineError
from cobaltlite.machine.bgp import BGPMachine, BGPPlanner
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine

_INTREPID = build_machine(load_description("intrepid"))
_FIG1 = bgp_machine()

# Durations on a coarse grid so that reservations touch and overlap often, with a few lengths
# of other binary exponents (the index sorts its blocks' gaps by exponent); 0 is a job of zero
# requested time, planned on the list by both planners.
durations = st.sampled_from([0.0, 0.5, 5.0, 10.0, 10.0, 15.0, 20.0, 20.0, 35.0, 0.1, 1.0, 2.5,
                             64.0, 100.0])
# Times from now; "book" takes them from 0 (some are past at a later now).
offsets = st.sampled_from([0.0, 5.0, 10.0, 20.0, 25.0, 30.0, 2.5])
operations = st.lists(st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 8), durations,
              st.one_of(st.none(), st.sampled_from([-5.0, 0.0, 10.0, 20.0, 25.0])), st.booleans()),
    st.tuples(st.just("now"), st.integers(0, 8), durations, st.booleans()),
    st.tuples(st.just("plan_now"), st.integers(0, 8), durations, st.booleans()),
    st.tuples(st.just("start"), st.integers(0, 8), durations, st.booleans()),
    st.tuples(st.just("earliest"), st.integers(0, 2**227 - 1), durations,
              st.one_of(st.none(), st.sampled_from([0.0, 15.0]))),
    st.tuples(st.just("hold"), st.integers(0, 226), offsets, durations),
    st.tuples(st.just("book"), st.integers(0, 226), offsets, durations, st.booleans()),
    st.tuples(st.just("copy"),),
), min_size=1, max_size=60)


def _apply(planner: BGPPlanner, op: tuple, machine: BGPMachine, allowed: frozenset[str],
           now: float):
    kind = op[0]
    names = machine.names
    if kind == "book":
        _, block, start, length, wires = op
        planner.book(frozenset({names[block % len(names)]}), start, start + length, wires)
        return None
    if kind == "hold":
        _, block, start, length = op
        planner.hold(block % len(names), now + start, length)
        return None
    if kind == "earliest":
        _, blocks, length, not_before = op
        return planner.earliest_on(blocks & ((1 << len(names)) - 1), length,
                                   None if not_before is None else now + not_before)
    size = machine.sizes[op[1] % len(machine.sizes)]
    places = allowed if op[-1] else None
    if kind == "reserve":
        return planner.reserve_earliest(size, op[2], places,
                                        None if op[3] is None else now + op[3])
    if kind == "now":
        return planner.location_now(size, op[2], places)
    if kind == "start":  # a job started on the plan, as the scheduler's passes do
        location = planner.location_now(size, op[2], places)
        if location is not None:
            planner.commit(location, op[2])
        return location
    return planner.plan_now(size, op[2], places)


@settings(max_examples=200, deadline=None)
@given(intrepid=st.sampled_from([False, False, True]),
       now=st.sampled_from([0.0, 0.0, 10.0, 1e9 + 0.3]),
       running=st.lists(st.tuples(st.integers(0, 226), st.sampled_from([-5, 0, 5, 10, 20, 30])),
                        max_size=6),
       failed=st.lists(st.integers(0, 226), max_size=2),
       allowed=st.lists(st.integers(0, 226), min_size=1, max_size=12), ops=operations,
       tails_from=st.sampled_from([0, 0, 5]))
def test_the_per_block_index_plans_as_the_reservation_list(
        intrepid: bool, now: float, running: list[tuple[int, int]], failed: list[int],
        allowed: list[int], ops: list[tuple], tails_from: int) -> None:
    machine = _INTREPID if intrepid else _FIG1
    names = machine.names
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
        indexed.tails_from = tails_from  # tails read from the first, or after some walks
        for op in ops:
            if op[0] == "copy":
                scan, indexed = scan.copy(), indexed.copy()
                scan.index_from, indexed.index_from, indexed.tails_from = 10**9, 0, tails_from
                continue
            assert (_apply(scan, op, machine, places, now)
                    == _apply(indexed, op, machine, places, now)), op
            assert scan._reservations == indexed._reservations
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)
        for component in machine.failed_components():
            machine.unfail(component)


@settings(max_examples=100, deadline=None)
@given(intrepid=st.sampled_from([False, False, True]),
       running=st.lists(st.tuples(st.integers(0, 226), st.sampled_from([5, 10, 20, 30])),
                        max_size=6),
       plan=st.lists(st.tuples(st.sampled_from(["reserve", "start", "hold"]),
                               st.integers(0, 226), offsets, durations), max_size=30),
       later=st.sampled_from([2.5, 5.0, 10.0, 20.0]), ops=operations)
def test_a_planner_moved_to_a_later_present_plans_as_a_new_one_holding_its_reservations(
        intrepid: bool, running: list[tuple[int, int]], plan: list[tuple[str, int, float, float]],
        later: float, ops: list[tuple]) -> None:
    """`BGPPlanner.advance`: a plan made at 0 (reservations, and jobs started on it, which
    the machine holds from then on), moved to `later` once the jobs ending by then have given
    their blocks back, answers as `machine.planner(later)` holding the same reservations."""
    machine = _INTREPID if intrepid else _FIG1
    names = machine.names
    ends: dict[int, float] = {}
    try:
        for k, (block, left) in enumerate(running):
            name = names[block % len(names)]
            if (machine._available >> machine.index[name]) & 1:
                machine.allocate(name, k, float(left))
                ends[k] = float(left)
        planner = machine.planner(0.0)
        for k, (kind, block, start, length) in enumerate(plan, start=len(running)):
            size = machine.sizes[block % len(machine.sizes)]
            if kind == "reserve":
                planner.reserve_earliest(size, length)
            elif kind == "hold":
                planner.hold(block % len(names), start, length)
            else:  # a job started on the plan, as the scheduler's passes start one
                location = planner.location_now(size, length)
                if location is not None:
                    machine.allocate(location, k, length)
                    planner.commit(location, length)
                    ends[k] = length
        for jobid, end in ends.items():
            if end <= later:
                machine.release(jobid)
        planner.advance(later)
        fresh = machine.planner(later)
        for start, stop, mask in planner._reservations:
            fresh._hold(start, stop, mask)
        places = frozenset(names[:40])
        for op in ops:
            if op[0] != "copy":
                assert (_apply(planner, op, machine, places, later)
                        == _apply(fresh, op, machine, places, later)), op
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)


@settings(max_examples=100, deadline=None)
@given(intrepid=st.sampled_from([False, True]),
       running=st.lists(st.tuples(st.integers(0, 226), st.sampled_from([-5, 5, 10, 20])),
                        max_size=6),
       held=st.lists(st.tuples(st.integers(0, 226), offsets, durations), max_size=30),
       ops=operations)
def test_a_planner_given_its_reservations_at_once_plans_as_one_holding_them(
        intrepid: bool, running: list[tuple[int, int]], held: list[tuple[int, float, float]],
        ops: list[tuple]) -> None:
    """`BGPPlanner.holding` (the reservations kept as a list, indexed only at the next
    reservation, however many they are) answers every question as a planner given the same
    reservations one by one with `hold`, before and after it reserves more."""
    machine = _INTREPID if intrepid else _FIG1
    names = machine.names
    now = 10.0
    try:
        for k, (block, left) in enumerate(running):
            name = names[block % len(names)]
            if (machine._available >> machine.index[name]) & 1:
                machine.allocate(name, k, now + left)
        reservations = [(block % len(names), now + start, length)
                        for block, start, length in held]
        given = BGPPlanner.holding(machine, now, [
            (start, start + length, machine.conflict[block])
            for block, start, length in reservations])
        one_by_one = machine.planner(now)
        for block, start, length in reservations:
            one_by_one.hold(block, start, length)
        places = frozenset(names[:40])
        for op in ops:
            if op[0] == "copy":
                given, one_by_one = given.copy(), one_by_one.copy()
                continue
            assert (_apply(given, op, machine, places, now)
                    == _apply(one_by_one, op, machine, places, now)), op
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)


def test_a_reservation_starting_as_a_job_would_end_leaves_its_block_to_it() -> None:
    """The boundary case of both ways, which random plans rarely hit: a block booked over
    [5, 10) is free now for a job of 5 seconds, not for one of 6, and a 5-second job reserved
    behind the booking starts at 0 on it when that is the first such block."""
    for index_from in (0, 10**9):
        planner = _FIG1.planner(0.0)
        planner.index_from = planner.tails_from = index_from
        for block in ("A", "C", "D", "E", "F", "G", "H"):
            planner.book(frozenset({block}), 0.0, 40.0, wires=False)
        planner.book(frozenset({"B"}), 5.0, 10.0, wires=False)
        assert planner.location_now(512, 5.0) == "B"
        assert planner.location_now(512, 6.0) is None
        assert planner.reserve_earliest(512, 5.0) == (0.0, "B")
        assert planner.reserve_earliest(512, 5.0) == (10.0, "B")


def test_a_gap_is_found_however_the_blocks_tails_fall() -> None:
    """A job that fits a gap before every block's tail starts in the gap, on the first block
    in name order that has one, and a job too long for any gap starts at the first lowest tail;
    once a long job has been refused by a block's gaps, a short one still finds them."""
    for index_from in (0, 10**9):
        planner = _FIG1.planner(0.0)
        planner.index_from = planner.tails_from = index_from
        for block in ("A", "B", "C", "D", "E", "F", "G", "H"):
            planner.book(frozenset({block}), 0.0, 10.0, wires=False)
        planner.book(frozenset({"C"}), 30.0, 50.0, wires=False)  # C: a gap [10, 30)
        planner.book(frozenset({"F"}), 25.0, 60.0, wires=False)  # F: a gap [10, 25)
        planner.book(frozenset({"A", "B", "D", "E", "G", "H"}), 10.0, 40.0, wires=False)
        assert planner.earliest_on(_FIG1.size_mask[512], 25.0) == (40.0, _FIG1.index["A"])
        assert planner.earliest_on(_FIG1.size_mask[512], 20.0) == (10.0, _FIG1.index["C"])
        assert planner.reserve_earliest(512, 15.0) == (10.0, "C")
        assert planner.reserve_earliest(512, 15.0) == (10.0, "F")
        assert planner.reserve_earliest(512, 15.0) == (40.0, "A")


def test_a_reservation_ending_before_it_starts_is_refused() -> None:
    planner = _FIG1.planner(0.0)
    with pytest.raises(MachineError, match="cannot end"):
        planner.hold(0, 10.0, -1.0)
    assert planner._reservations == []


def test_a_job_started_on_the_plan_moves_its_relatives_tails() -> None:
    """A job started now (`commit`) holds its block and relatives until it ends, also for a
    planner already answering from its blocks' tails."""
    for index_from in (0, 10**9):
        planner = _FIG1.planner(0.0)
        planner.index_from = planner.tails_from = index_from
        planner.book(frozenset({"H"}), 0.0, 10.0, wires=False)
        assert planner.reserve_earliest(512, 5.0) == (0.0, "A")
        location = planner.location_now(512, 30.0)
        assert location == "B"
        planner.commit(location, 30.0)
        assert planner.earliest_on(1 << _FIG1.index["B"], 5.0) == (30.0, _FIG1.index["B"])
        assert planner.earliest_on(1 << _FIG1.index["AB"], 5.0) == (30.0, _FIG1.index["AB"])


def test_a_job_fits_a_gap_as_the_rounded_sum_says() -> None:
    """Far from time 0 a job slightly longer than a gap fits it when now + duration rounds to
    the gap's end (the walk's test); the gap bounds must not rule such a block out."""
    now = 1e9
    longer = 1.0 + 1e-8  # now + longer rounds to now + 1.0
    assert now + longer == now + 1.0
    for index_from, asked_before in ((0, True), (0, False), (10**9, True)):
        planner = _FIG1.planner(now)
        planner.index_from = planner.tails_from = index_from
        for block in ("A", "B", "C", "E", "F", "G", "H"):
            planner.book(frozenset({block}), now, now + 60.0, wires=False)
        planner.book(frozenset({"D"}), now, now + 50.0, wires=False)
        if asked_before:  # the index's gap bounds exist when the gap appears
            assert planner.earliest_on(_FIG1.size_mask[512], 5.0) == (now + 50.0,
                                                                       _FIG1.index["D"])
        planner.book(frozenset({"D"}), now + 51.0, now + 80.0, wires=False)  # D: [50, 51) free
        assert planner.reserve_earliest(512, longer) == (now + 50.0, "D")
        assert planner.reserve_earliest(512, longer) == (now + 60.0, "A")


@settings(max_examples=40, deadline=None)
@given(now=st.sampled_from([0.0, 1e9 + 0.3]),
       running=st.lists(st.tuples(st.integers(0, 226), st.integers(1, 4000)), max_size=20),
       jobs=st.lists(st.tuples(st.sampled_from([512, 512, 512, 1024, 2048, 4096, 8192, 16384]),
                               st.floats(1.0, 5000.0), st.integers(0, 9)),
                     min_size=20, max_size=300))
def test_a_long_conservative_plan_on_intrepid_as_the_reservation_list(
        now: float, running: list[tuple[int, int]], jobs: list[tuple[int, float, int]]) -> None:
    """A pass that reserves far down a queue, as the conservative estimates on Intrepid do:
    hundreds of reservations of a few sizes and durations of any length, so that blocks gather
    many pieces and gaps, bounds are lowered by long jobs and met again by short ones, and a
    job now and then starts on the plan."""
    machine = _INTREPID
    names = machine.names
    try:
        for k, (block, left) in enumerate(running):
            name = names[block]
            if (machine._available >> machine.index[name]) & 1:
                machine.allocate(name, k, now + left)
        scan = machine.planner(now)
        scan.index_from = 10**9
        indexed = machine.planner(now)
        for size, duration, chance in jobs:
            if chance == 0:  # a job that may start now, as the pass asks first
                where = scan.location_now(size, duration)
                assert indexed.location_now(size, duration) == where
                if where is not None:
                    scan.commit(where, duration)
                    indexed.commit(where, duration)
                    continue
            assert (scan.reserve_earliest(size, duration)
                    == indexed.reserve_earliest(size, duration)), (size, duration)
    finally:
        for jobid in list(machine.held_by()):
            machine.release(jobid)
