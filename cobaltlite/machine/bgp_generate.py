"""Generate a Blue Gene/P partition table from the machine's geometry.

Hardware, named as on Intrepid: racks `Rxy` (x = row, y = column, one digit each), two
midplanes `M0`/`M1` per rack, sixteen node cards `N00`..`N15` of 32 nodes per midplane.

Blocks, named as on Intrepid (`ANL` is the default prefix):

* below a midplane, down to `smallest_block`: aligned groups of 1, 2, 4 or 8 node cards,
  `ANL-R00-M0-N04-128` (named after the first card);
* every midplane `ANL-R00-M0-512` and rack `ANL-R00-1024`;
* aligned runs of 2, 4, 8 racks along a row, `ANL-R00-R03-4096` (first and last rack);
* the whole machine, `ANL-R00-R11-4096` for two rows of two racks, when it is not already
  one of the above.

Wiring model. The torus of a BG/P is cabled as rings of switches, one switch per midplane and
dimension (`X_R00-M0`, `Y_R00-M0`, `Z_R00-M0`). A *wire* is one directed cable segment of a
ring, named after the switches at its two ends (`Z_R00-M1Z_R01-M1`), plus, for every midplane,
the two links between the midplane and each of its own switches (`R00-M0X_R00-M0`,
`X_R00-M0R00-M0`). The rings, as on Intrepid:

* Z: the four midplanes of a rack pair (R00, R01), cabled R00-M0 > R00-M1 > R01-M1 > R01-M0 >
  back (a lone last rack in a row: its two midplanes);
* Y: for each position inside a rack pair, the pairs of a row; the ring visits the pairs in
  Gray-code order (0, 1, 3, 2 for four pairs, as Intrepid's folded cabling does) when their
  number is a power of two, else in order;
* X: for each rack column and midplane, the rows.

A block uses its midplanes' switches and links. Where it holds two or more midplanes of a ring
it must close its torus along that ring, and a torus shorter than the ring closes by passing
through the switches of the midplanes it does not own: so it uses *every* wire and switch of
that ring. A block with a single midplane in a ring loops back inside the midplane and uses no
cable of it. Hence two disjoint blocks that both span part of one ring share its wires and
conflict through the wiring, exactly the Intrepid cases: ANL-R00-1024 with ANL-R01-1024 (one Z
ring), ANL-R00-R03-4096 with ANL-R04-R07-4096 (the Y rings of row 0); while ANL-R00-R01-2048 and
ANL-R02-R03-2048 own whole Z rings and stay independent. For the blocks inside one row this
reproduces Intrepid's table wire for wire; Intrepid's X cabling across rows is more involved,
so whole-machine blocks spanning rows differ from it there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.machine.bgp_xml import write_bgp_xml
from cobaltlite.machine.bgp_yaml import bgp_yaml_text, write_bgp_yaml
from cobaltlite.machine.description import NODES_PER_NODECARD, BGPDescription, BlockSpec

CARDS_PER_MIDPLANE = 16
MIDPLANE_NODES = NODES_PER_NODECARD * CARDS_PER_MIDPLANE
MAX_ROWS = MAX_COLUMNS = 10  # one decimal digit each in a rack name

Midplane = tuple[int, int, int]  # row, column, midplane in rack


def generate_bgp(
    name: str, racks: int, rows: int = 1, smallest_block: int = 512, *, prefix: str = "ANL"
) -> BGPDescription:
    """A BG/P table of `racks` racks in `rows` equal rows; every block is schedulable.

    `smallest_block` (32, 64, 128, ... nodes) drops the blocks below it, except the whole
    machine, which is always there. Raises InputError for a geometry that cannot be named.
    """
    _check(racks, rows, smallest_block)
    columns = racks // rows
    geometry = _Geometry(rows, columns)
    blocks: list[BlockSpec] = []

    def torus_block(label: str, midplanes: list[Midplane]) -> None:
        cards = tuple(
            sorted(f"{_mp(mid)}-N{n:02d}" for mid in midplanes for n in range(CARDS_PER_MIDPLANE))
        )
        size = NODES_PER_NODECARD * len(cards)
        blocks.append(BlockSpec(f"{prefix}-{label}-{size}", cards, *geometry.wiring(midplanes)))

    for row in range(rows):
        for col in range(columns):
            for m in (0, 1):
                mp = _mp((row, col, m))
                # Sub-midplane blocks have no switches or wires of their own (as on Intrepid).
                for per_block in (1, 2, 4, 8):
                    size = NODES_PER_NODECARD * per_block
                    if size < smallest_block:
                        continue
                    for first in range(0, CARDS_PER_MIDPLANE, per_block):
                        cards = tuple(f"{mp}-N{n:02d}" for n in range(first, first + per_block))
                        blocks.append(BlockSpec(f"{prefix}-{mp}-N{first:02d}-{size}", cards))
                if smallest_block <= MIDPLANE_NODES:
                    torus_block(mp, [(row, col, m)])
        span = 1
        while span <= columns:
            if 2 * MIDPLANE_NODES * span >= smallest_block:
                for first in range(0, columns - span + 1, span):
                    last = first + span - 1
                    label = _rack(row, first)
                    if span > 1:
                        label += f"-{_rack(row, last)}"
                    torus_block(
                        label, [(row, c, m) for c in range(first, last + 1) for m in (0, 1)]
                    )
            span *= 2
    total = racks * 2 * MIDPLANE_NODES
    if not any(b.size == total for b in blocks):
        label = _rack(0, 0) if racks == 1 else f"{_rack(0, 0)}-{_rack(rows - 1, columns - 1)}"
        torus_block(label, [(r, c, m) for r in range(rows) for c in range(columns) for m in (0, 1)])
    blocks.sort(key=lambda b: (-b.size, b.name))
    return BGPDescription(name, tuple(blocks), schedulable=None)


def _check(racks: int, rows: int, smallest_block: int) -> None:
    if racks < 1 or rows < 1:
        raise InputError(f"racks={racks}, rows={rows}: both must be at least 1")
    if racks % rows:
        raise InputError(f"racks={racks} cannot be split into rows={rows} equal rows")
    if rows > MAX_ROWS or racks // rows > MAX_COLUMNS:
        raise InputError(
            f"racks={racks}, rows={rows}: rack names Rxy (one digit for the row, one for the "
            f"column) allow at most {MAX_ROWS} rows of {MAX_COLUMNS} racks"
        )
    if smallest_block < NODES_PER_NODECARD or smallest_block & (smallest_block - 1):
        raise InputError(
            f"smallest_block={smallest_block}: use a power of two from {NODES_PER_NODECARD} "
            "(one node card) up"
        )


def _rack(row: int, col: int) -> str:
    return f"R{row}{col}"


def _mp(mid: Midplane) -> str:
    return f"{_rack(mid[0], mid[1])}-M{mid[2]}"


class _Geometry:
    """The rings of the machine (see the module docstring), indexed by the midplanes on them."""

    def __init__(self, rows: int, columns: int) -> None:
        rings: list[tuple[str, list[Midplane]]] = []
        for row in range(rows):
            for first in range(0, columns, 2):
                if first + 1 < columns:
                    z = [(row, first, 0), (row, first, 1), (row, first + 1, 1), (row, first + 1, 0)]
                else:
                    z = [(row, first, 0), (row, first, 1)]
                rings.append(("Z", z))
            pairs = _ring_order((columns + 1) // 2)
            for side in (0, 1):
                for m in (0, 1):
                    y = [(row, 2 * p + side, m) for p in pairs if 2 * p + side < columns]
                    rings.append(("Y", y))
        for col in range(columns):
            for m in (0, 1):
                rings.append(("X", [(row, col, m) for row in range(rows)]))
        self.rings = rings
        self.rings_of: dict[Midplane, list[int]] = {}
        for i, (_, stations) in enumerate(rings):
            for mid in stations:
                self.rings_of.setdefault(mid, []).append(i)

    def wiring(self, midplanes: Sequence[Midplane]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        switches: set[str] = set()
        wires: set[str] = set()
        for mid in midplanes:
            mp = _mp(mid)
            for dim in "XYZ":
                switches.add(f"{dim}_{mp}")
                wires.update((f"{mp}{dim}_{mp}", f"{dim}_{mp}{mp}"))
        own = set(midplanes)
        touched = {i for mid in midplanes for i in self.rings_of[mid]}
        for i in touched:
            dim, stations = self.rings[i]
            if len(own.intersection(stations)) < 2:
                continue
            ends = [f"{dim}_{_mp(mid)}" for mid in stations]
            switches.update(ends)
            wires.update(f"{a}{b}" for a, b in zip(ends, ends[1:] + ends[:1], strict=True))
        return tuple(sorted(switches)), tuple(sorted(wires))


def _ring_order(count: int) -> list[int]:
    if count & (count - 1) == 0:
        return [i ^ (i >> 1) for i in range(count)]
    return list(range(count))


# ---- command line ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cobaltlite.machine.bgp_generate",
        description="Write a Blue Gene/P partition table generated from the machine's geometry: "
        "racks Rxy (row x, column y) of two 512-node midplanes, blocks from SMALLEST nodes up "
        "to the whole machine, wired like Intrepid (see the module documentation).",
        epilog="example: --racks 8 --rows 2 --smallest-block 64 --out bgp-8rack.yaml",
    )
    parser.add_argument(
        "--racks", type=int, required=True, help="number of racks (1024 nodes each)"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=1,
        help="rows the racks stand in, equally many per row (default 1)",
    )
    parser.add_argument(
        "--smallest-block",
        type=int,
        default=512,
        metavar="SMALLEST",
        help="smallest block in nodes: 32, 64, 128, 256, 512 (default), 1024, ...",
    )
    parser.add_argument("--name", help="the machine's name (default bgp-<racks>rack)")
    parser.add_argument("--prefix", default="ANL", help="block name prefix (default ANL)")
    parser.add_argument(
        "--out",
        type=Path,
        help="output file; .xml writes Cobalt's partition XML, anything else "
        "cobaltlite's YAML (default: YAML on standard output)",
    )
    args = parser.parse_args(argv)
    name = args.name or f"bgp-{args.racks}rack"
    try:
        desc = generate_bgp(name, args.racks, args.rows, args.smallest_block, prefix=args.prefix)
        header = "generated by: python -m cobaltlite.machine.bgp_generate " + " ".join(
            sys.argv[1:] if argv is None else argv
        )
        if args.out is None:
            sys.stdout.write(bgp_yaml_text(desc, header=header))
        elif args.out.suffix == ".xml":
            write_bgp_xml(desc, args.out)
        else:
            write_bgp_yaml(desc, args.out, header=header)
    except (CobaltliteError, OSError) as exc:
        print(f"bgp_generate: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
