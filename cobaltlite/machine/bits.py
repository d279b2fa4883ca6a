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


def lowest_bits(mask: int, count: int) -> int:
    """The `count` lowest set bits of `mask` (caller guarantees mask has at least that many).

    Binary search on a prefix length keeps this O(log n) big-int operations instead of one
    Python step per node, which matters for jobs of thousands of nodes.
    """
    lo, hi = count, mask.bit_length()
    while lo < hi:
        mid = (lo + hi) // 2
        if (mask & ((1 << mid) - 1)).bit_count() >= count:
            hi = mid
        else:
            lo = mid + 1
    return mask & ((1 << lo) - 1)


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
