"""Small helpers for sets kept as Python integers (bit i set = member i).

Python ints are arbitrary-precision bitsets with C-speed `&`, `|` and `bit_count`, which makes
them the fastest portable set representation for a few thousand members.
"""

from __future__ import annotations

from collections.abc import Iterator


def iter_bits(mask: int) -> Iterator[int]:
    """The indices of the set bits, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def lowest_bits_ranges(mask: int, count: int) -> tuple[int, str]:
    """The `count` lowest set bits of `mask` (caller guarantees mask has at least that many),
    and `mask_to_ranges` of them.

    One step per run of set bits taken, each a few big-int operations: the runs are the text's
    parts, so naming the nodes costs no more than finding them (a flat machine's allocation).
    """
    parts: list[str] = []
    rest = mask
    while True:
        low = rest & -rest
        start = low.bit_length() - 1
        above = rest + low  # the carry clears the run that starts at `start`
        run = (rest ^ above).bit_length() - 1 - start
        if run >= count:
            end = start + count
            parts.append(str(start) if count == 1 else f"{start}-{end - 1}")
            return mask & ((1 << end) - 1), ",".join(parts)
        parts.append(str(start) if run == 1 else f"{start}-{start + run - 1}")
        count -= run
        rest &= above


def mask_to_ranges(mask: int) -> str:
    """Render a node set as `0-15,32,40-47`: compact, stable, and what users read in qstat."""
    parts: list[str] = []
    while mask:
        start = (mask & -mask).bit_length() - 1
        # Adding the lowest set bit carries through the run of ones that starts there.
        run_end = ((mask + (1 << start)) & ~mask).bit_length() - 1
        parts.append(str(start) if run_end - 1 == start else f"{start}-{run_end - 1}")
        mask &= ~((1 << run_end) - 1)
    return ",".join(parts)


def ranges_to_mask(text: str) -> int:
    """Inverse of `mask_to_ranges`; raises ValueError on anything else."""
    mask = 0
    if not text:
        return mask
    for part in text.split(","):
        first, _, last = part.partition("-")
        lo = int(first)
        hi = int(last) if last else lo
        if lo < 0 or hi < lo:
            raise ValueError(f"bad node range {part!r}")
        mask |= ((1 << (hi - lo + 1)) - 1) << lo
    return mask
