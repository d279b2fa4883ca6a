"""Static descriptions of machines: what exists, before anything is allocated.

A description is plain, immutable data. The runtime models (`bgp.BGPMachine`,
`flat.FlatMachine`) are built from it once and keep the mutable allocation state.
"""

from __future__ import annotations

from dataclasses import dataclass

NODES_PER_NODECARD = 32
"""Blue Gene/P: 32 compute nodes on a node card; 16 node cards make a 512-node midplane."""


def is_service_block(name: str) -> bool:
    """Service blocks (diagnostics, service actions) exist in the table but never run jobs."""
    return name.startswith(("_DIAGS_", "_SAD_"))


@dataclass(frozen=True)
class BlockSpec:
    """One Blue Gene/P partition (block): the node cards it spans and the wires it uses."""

    name: str
    nodecards: tuple[str, ...]
    switches: tuple[str, ...] = ()
    wires: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return NODES_PER_NODECARD * len(self.nodecards)


@dataclass(frozen=True)
class BGPDescription:
    """A Blue Gene/P partition table.

    `schedulable` names the blocks jobs may be placed on; None means every block that is not a
    service block. Blocks outside it still exist (they show in partlist and take part in the
    relations) but never receive a job.
    """

    name: str
    blocks: tuple[BlockSpec, ...]
    schedulable: frozenset[str] | None = None

    def is_schedulable(self, block: BlockSpec) -> bool:
        if is_service_block(block.name):
            return False
        return self.schedulable is None or block.name in self.schedulable

    @property
    def size(self) -> int:
        """Total compute nodes: 32 x the distinct node cards of all blocks."""
        cards = {card for block in self.blocks for card in block.nodecards}
        return NODES_PER_NODECARD * len(cards)


@dataclass(frozen=True)
class FlatDescription:
    """A cluster without a torus: N interchangeable nodes, non-contiguous allocation."""

    name: str
    nodes: int
    processors_per_node: int = 1

