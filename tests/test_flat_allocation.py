"""A flat machine names the nodes it allocates in one walk over the free mask's runs
(`lowest_bits_ranges`): the same nodes, and the same text, as taking the lowest free nodes one
by one and writing them as `mask_to_ranges` does. Allocating a place checks it with one test
when it is free, and still says why one is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cobaltlite.errors import MachineError
from cobaltlite.machine.bits import iter_bits, lowest_bits_ranges, mask_to_ranges, ranges_to_mask
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.flat import FlatMachine


@st.composite
def masks_and_counts(draw: st.DrawFn) -> tuple[int, int]:
    # Runs of free and held nodes, from single nodes (a fragmented pool) to long runs, on
    # machines up to a few thousand nodes (CEA-Curie's 5,544 included).
    mask, at = 0, draw(st.integers(0, 40))
    for free, held in draw(st.lists(st.tuples(st.integers(1, 700), st.integers(1, 300)),
                                    min_size=1, max_size=12)):
        mask |= ((1 << free) - 1) << at
        at += free + held
    count = draw(st.integers(1, mask.bit_count()))
    return mask, count


@given(masks_and_counts())
def test_the_lowest_free_nodes_and_their_name(case: tuple[int, int]) -> None:
    mask, count = case
    chosen = 0
    for node in list(iter_bits(mask))[:count]:
        chosen |= 1 << node
    assert lowest_bits_ranges(mask, count) == (chosen, mask_to_ranges(chosen))
    assert ranges_to_mask(mask_to_ranges(chosen)) == chosen


def test_single_nodes_and_runs_are_named_as_in_qstat() -> None:
    pool = ranges_to_mask("3,5-9,12-20")
    assert lowest_bits_ranges(pool, 1) == (1 << 3, "3")
    assert lowest_bits_ranges(pool, 2) == (ranges_to_mask("3,5"), "3,5")
    assert lowest_bits_ranges(pool, 6) == (ranges_to_mask("3,5-9"), "3,5-9")
    assert lowest_bits_ranges(pool, 7) == (ranges_to_mask("3,5-9,12"), "3,5-9,12")
    assert lowest_bits_ranges(pool, 15) == (pool, "3,5-9,12-20")


def test_allocation_takes_the_place_found_and_refuses_what_is_not_free() -> None:
    machine = FlatMachine(FlatDescription("m", 16))
    assert machine.allocate("0-3", 1, 100.0) == 4
    where = machine.find_location(5, 50.0, 0.0)
    assert where == "4-8"
    assert machine.allocate(where, 2, 50.0) == 5
    assert machine.idle_nodes() == 7 and machine.held_by() == {1: "0-3", 2: "4-8"}
    machine.fail("15")
    for location, jobid, why in [
        ("9-16", 3, "names nodes beyond 16"),
        ("14-15", 3, "nodes 15 are out of service"),
        ("8-9", 3, "nodes 8 are held"),
        ("9", 2, "job 2 already holds nodes"),
        ("9-x", 3, "bad location"),
    ]:
        with pytest.raises(MachineError, match=why):
            machine.allocate(location, jobid, 10.0)
    assert machine.idle_nodes() == 6 and machine.held_by() == {1: "0-3", 2: "4-8"}
    machine.release(1)
    assert machine.find_location(6, 10.0, 0.0) == "0-3,9-10"


@given(nodes=st.integers(1, 40),
       running=st.lists(st.tuples(st.integers(1, 12),
                                  st.sampled_from([5.0, 7.5, 10.0, 30.0, 90.0])), max_size=12),
       asked=st.integers(1, 45))
def test_first_free_is_the_start_a_planner_reserves(
        nodes: int, running: list[tuple[int, float]], asked: int) -> None:
    """`first_free`, which the EASY pass reads instead of making a planner: the time is the
    start a planner made now reserves for the nodes, and the count the nodes free then."""
    machine = FlatMachine(FlatDescription("m", nodes))
    now = 1.0
    held = []  # (size, expected end) of the jobs that found room
    for jobid, (size, end) in enumerate(running):
        where = machine.find_location(size, end - now, now)
        if where is not None:
            machine.allocate(where, jobid, end)
            held.append((size, end))
    found = machine.first_free(asked, now)
    if asked > nodes:
        assert found is None
        return
    start, _ = machine.planner(now).reserve_earliest(asked, 1.0)
    assert found == (start, nodes - sum(size for size, end in held if end > start))
