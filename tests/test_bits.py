"""A flat machine names the nodes it allocates in one walk over the free mask's runs
(`lowest_bits_ranges`): the same nodes, and the same text, as taking the lowest free nodes one
by one and writing them as `mask_to_ranges` does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cobaltlite.machine.bits import iter_bits, lowest_bits_ranges, mask_to_ranges, ranges_to_mask


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
