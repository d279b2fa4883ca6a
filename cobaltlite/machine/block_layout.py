"""A queue layout laid out on a Blue Gene/P machine (seed 002 §III; docs/hybrid-queues.md,
D002-25 to D002-27).

A region (a queue's partition, the common pool, or the *rest* that neither holds) is a set of
node cards: the node cards of the blocks a queue names (`blocks:`), or else whole midplanes in
the table's order (R00-M0, R00-M1, R01-M0, ...), as many as its `nodes:` count asks, from the
midplanes no region took yet. A region's jobs run on the schedulable blocks whose node cards
all lie in it (never on a block spanning two regions, as D002-9 keeps a job on one region on a
flat machine), except a block sharing a wire with a block of another region: a job there would
block that region's block, so neither region may use either (D002-26). Each queue must keep a
block for its largest job class (D002-27).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cobaltlite.errors import InputError
from cobaltlite.machine.description import NODES_PER_NODECARD, BGPDescription, BlockSpec
from cobaltlite.partitioning.layout import QueueLayout

POOL = "(pool)"
REST = "(rest)"
"""The regions besides the queues' partitions: the common pool and the nodes of neither."""


@dataclass(frozen=True, slots=True)
class BlockRegions:
    """Each region's schedulable blocks, and what a flat machine's node sets tell by
    themselves: how many nodes a region and a block hold, and which hardware a region is."""

    blocks: Mapping[str, frozenset[str]]  # region (queue, POOL, REST) -> its blocks
    nodes: Mapping[str, int]              # region -> the nodes of its node cards
    hardware: Mapping[str, str]           # region -> its midplanes, as admins read them
    block_nodes: Mapping[str, int]        # each block of a region -> its nodes

    def largest(self, region: str) -> int:
        """The nodes of the region's largest block (0: it has none)."""
        return max((self.block_nodes[b] for b in self.blocks.get(region, ())), default=0)


def midplane(card: str) -> str:
    """`R00-M0-N04` -> `R00-M0`."""
    return card.rpartition("-")[0]


def lay_out_blocks(layout: QueueLayout, description: BGPDescription,
                   where: str = "queue layout") -> BlockRegions:
    """The regions of `layout` on `description` (see the module docstring); InputError naming
    `where`, the queue and the block or count at fault."""
    by_name = {b.name: b for b in description.blocks}
    midplanes: dict[str, set[str]] = {}
    for block in description.blocks:
        for card in block.nodecards:
            midplanes.setdefault(midplane(card), set()).add(card)
    owner: dict[str, str] = {}  # node card -> region
    labels = {q.name: f"queue {q.name!r}" for q in layout.queues} | {POOL: "the common pool"}

    def take(region: str, cards: Iterable[str]) -> None:
        for card in sorted(cards):
            if card in owner:
                raise InputError(f"{where}: node card {card} is in both {labels[owner[card]]} "
                                 f"and {labels[region]}; partitions must not overlap")
            owner[card] = region

    named = [(q.name, q.blocks, q.nodes) for q in layout.queues if q.blocks]
    if layout.pool_blocks:
        named.append((POOL, layout.pool_blocks, layout.pool))
    for region, names, nodes in named:
        cards = _cards_of(names, by_name, f"{where}: {labels[region]}")
        if len(cards) * NODES_PER_NODECARD != nodes:
            raise InputError(f"{where}: {labels[region]} gives {nodes} nodes but its blocks "
                             f"hold {len(cards) * NODES_PER_NODECARD}")
        take(region, cards)
    counted = [(q.name, q.nodes) for q in layout.queues if not q.blocks]
    if layout.pool and not layout.pool_blocks:
        counted.append((POOL, layout.pool))
    free = [m for m in sorted(midplanes) if not midplanes[m] & owner.keys()]
    for region, nodes in counted:
        chosen: list[str] = []
        held = 0
        while held < nodes and free:
            chosen.append(free.pop(0))
            held += len(midplanes[chosen[-1]]) * NODES_PER_NODECARD
        if held > nodes:
            size = len(midplanes[sorted(midplanes)[0]]) * NODES_PER_NODECARD
            raise InputError(f"{where}: {labels[region]}: {nodes} nodes is not a whole number "
                             f"of midplanes ({size} nodes each) on {description.name}; give a "
                             "multiple of it or name its blocks (blocks:)")
        if held < nodes:
            raise InputError(f"{where}: {labels[region]}: {nodes} nodes of whole midplanes "
                             f"wanted, {held} left on {description.name} (the named blocks "
                             "hold parts of the others); name its blocks (blocks:)")
        take(region, (card for m in chosen for card in midplanes[m]))
    cards_of: dict[str, set[str]] = {region: set() for region in [*labels, REST]}
    for card in (c for m in midplanes.values() for c in m):
        cards_of[owner.get(card, REST)].add(card)
    inside = _blocks_inside(description, owner)
    kept = _wire_isolated(inside)
    blocks = {region: frozenset(b.name for b in kept if inside[b] == region)
              for region in cards_of}
    regions = BlockRegions(
        blocks, {r: len(c) * NODES_PER_NODECARD for r, c in cards_of.items()},
        {r: _hardware(c, midplanes) for r, c in cards_of.items()},
        {b.name: b.size for b in kept})
    _check_blocks(layout, regions, inside, kept, labels, where)
    return regions


def _cards_of(names: Iterable[str], by_name: Mapping[str, BlockSpec], where: str) -> set[str]:
    cards: set[str] = set()
    for name in names:
        block = by_name.get(name)
        if block is None:
            raise InputError(f"{where}: {name!r} is not a block of this machine")
        cards.update(block.nodecards)
    return cards


def _blocks_inside(description: BGPDescription, owner: Mapping[str, str]
                   ) -> dict[BlockSpec, str]:
    """Each schedulable block whose node cards all lie in one region -> that region."""
    inside: dict[BlockSpec, str] = {}
    for block in description.blocks:
        if not description.is_schedulable(block):
            continue
        regions = {owner.get(card, REST) for card in block.nodecards}
        if len(regions) == 1:
            inside[block] = regions.pop()
    return inside


def _wire_isolated(inside: Mapping[BlockSpec, str]) -> list[BlockSpec]:
    """The blocks of `inside` that share no wire with a block of another region (D002-26)."""
    users: dict[str, set[str]] = {}
    for block, region in inside.items():
        for wire in block.wires:
            users.setdefault(wire, set()).add(region)
    return [b for b, region in inside.items()
            if all(users[w] == {region} for w in b.wires)]


def _hardware(cards: set[str], midplanes: Mapping[str, set[str]]) -> str:
    """Whole midplanes by name; a midplane held in part as `R00-M0 (8 of 16 node cards)`."""
    parts = []
    for name in sorted(midplanes):
        held = len(midplanes[name] & cards)
        if held == len(midplanes[name]):
            parts.append(name)
        elif held:
            parts.append(f"{name} ({held} of {len(midplanes[name])} node cards)")
    return " ".join(parts)


def _check_blocks(layout: QueueLayout, regions: BlockRegions, inside: Mapping[BlockSpec, str],
                  kept: list[BlockSpec], labels: Mapping[str, str], where: str) -> None:
    """Every queue has a block that holds its largest job class (D002-27); the message names
    the blocks lost to wiring, if any."""
    usable = set(kept)
    lost = [b for b in inside if b not in usable]
    for q in layout.queues:
        largest = regions.largest(q.name)
        widest = q.size_range[1]
        if largest >= widest:
            continue
        mine = sorted(b.name for b in lost if inside[b] == q.name)
        wiring = (f"; {', '.join(mine[:3])} share a wire with another region's blocks, so no "
                  "job may use them (align partitions with the cabling)" if mine else "")
        have = (f"its largest block has {largest} nodes" if largest
                else f"its partition ({regions.hardware[q.name]}) holds no schedulable block")
        raise InputError(f"{where}: {labels[q.name]} takes jobs of up to {widest} nodes but "
                         f"{have}{wiring}; give it larger blocks or narrow its job classes")
