"""Where each queue's jobs may run under a queue layout (seed 002 §III): partitions and a pool.

A queue of the layout owns a partition (a set of nodes) and its jobs run there; when a job's
priority factor (its slowdown times its queue's priority) exceeds τ_pf and it does not start in
its own partition, it may run on the common pool instead (pool nodes only, never a mix of both:
docs/hybrid-queues.md, D002-9). A queue the layout does not name is non-partitioned: its jobs
run on the nodes that no partition owns and that are not the pool (D002-10).

`QueuePartitions.from_layout` lays a layout out on a flat machine: the partitions as contiguous
node ranges in the layout's queue order from node 0, the pool the next `layout.pool` nodes. On
Blue Gene/P a region is a set of node cards (whole midplanes, or a queue's named blocks) and its
places are the blocks a job may run on (cobaltlite/machine/block_layout.py): `blocks` then holds
what a flat machine's node sets tell by themselves (node counts, block sizes, the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.machine.bits import iter_bits, mask_to_ranges, ranges_to_mask
from cobaltlite.machine.block_layout import POOL, REST, BlockRegions, lay_out_blocks
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.partitioning.layout import STARVATION_TIME, QueueLayout


def node_range(first: int, count: int) -> PlaceSet:
    """The flat machine's nodes first .. first+count-1, as a place set."""
    return frozenset(str(n) for n in range(first, first + count))


@dataclass(frozen=True, slots=True)
class QueuePartitions:
    """Where each queue's jobs may run (seed 002 §III). Places are node numbers on a flat
    machine, block names on Blue Gene/P (`blocks` set)."""

    own: Mapping[str, PlaceSet]    # queue -> the places of its partition
    pool: PlaceSet                 # the common pool's places (empty: none)
    tau_pf: float | None           # a job whose priority factor exceeds it may use the pool
    priority: Mapping[str, float]  # queue -> queue priority (the pf's factor)
    starvation: Mapping[str, float] = field(default_factory=dict)
    """queue -> seconds of wait after which its jobs starve (missing: STARVATION_TIME)."""
    blocks: BlockRegions | None = None
    """Blue Gene/P: the regions' node counts and blocks (None: a flat machine)."""

    @classmethod
    def from_layout(cls, layout: QueueLayout, machine: Machine,
                    where: str = "queue layout") -> QueuePartitions:
        """Partitions as contiguous node ranges in the layout's queue order from node 0, the
        pool the next `layout.pool` nodes (on Blue Gene/P: `lay_out_blocks`); InputError if the
        machine cannot hold them."""
        layout.check(machine.total_nodes, where)
        description = machine.description
        if not isinstance(description, FlatDescription):
            regions = lay_out_blocks(layout, description, where)
            return cls({q.name: regions.blocks[q.name] for q in layout.queues},
                       regions.blocks[POOL], layout.tau_pf,
                       {q.name: q.priority for q in layout.queues},
                       {q.name: layout.starvation(q) for q in layout.queues}, regions)
        named = next((q.name for q in layout.queues if q.blocks), None)
        if named is not None or layout.pool_blocks:
            which = f"queue {named!r}" if named is not None else "pool_blocks"
            raise InputError(f"{where}: {which} names blocks, but {machine.name} is a flat "
                             "machine (blocks are Blue Gene/P's); give nodes only")
        own: dict[str, PlaceSet] = {}
        first = 0
        for q in layout.queues:
            own[q.name] = node_range(first, q.nodes)
            first += q.nodes
        partitions = cls(own, node_range(first, layout.pool), layout.tau_pf,
                         {q.name: q.priority for q in layout.queues},
                         {q.name: layout.starvation(q) for q in layout.queues})
        partitions.check(machine)
        return partitions

    @classmethod
    def whole_machine(cls, queues: Iterable[str], machine: Machine) -> QueuePartitions:
        """Every queue on the whole machine and no pool: what a replay without a layout
        reports per queue (`partadm --layout --dry-run` with no active layout)."""
        description = machine.description
        if isinstance(description, FlatDescription):
            everywhere = node_range(0, machine.total_nodes)
            return cls(dict.fromkeys(queues, everywhere), frozenset(), None, {})
        sizes = {b.name: b.size for b in description.blocks if description.is_schedulable(b)}
        names = list(queues)
        everywhere = frozenset(sizes)
        regions = BlockRegions(
            {**dict.fromkeys(names, everywhere), POOL: frozenset(), REST: frozenset()},
            {**dict.fromkeys(names, machine.total_nodes), POOL: 0, REST: 0},
            {**dict.fromkeys(names, "the whole machine"), POOL: "", REST: ""}, sizes)
        return cls(dict.fromkeys(names, everywhere), frozenset(), None, {}, blocks=regions)

    def starvation_time(self, queue: str) -> float:
        """Seconds of wait after which a job of `queue` (a layout queue) starves."""
        return self.starvation.get(queue, STARVATION_TIME)

    def nodes(self, queue: str | None = None) -> int:
        """The nodes of `queue`'s partition (None: of the pool)."""
        if self.blocks is not None:
            return self.blocks.nodes[POOL if queue is None else queue]
        return len(self.pool if queue is None else self.own[queue])

    def largest(self, queue: str | None = None) -> int:
        """The widest job `queue`'s partition (None: the pool) can run."""
        if self.blocks is not None:
            return self.blocks.largest(POOL if queue is None else queue)
        return len(self.pool if queue is None else self.own[queue])

    def counter(self, places: PlaceSet) -> Callable[[str], int]:
        """A function telling how many of the nodes a job holds at a location lie on
        `places` (a partition's or the pool's)."""
        if self.blocks is not None:
            block_nodes = self.blocks.block_nodes
            return lambda location: block_nodes[location] if location in places else 0
        mask = node_mask(places)
        return lambda location: (ranges_to_mask(location) & mask).bit_count()

    def could_hold(self, queue: str, nodes: int) -> bool:
        """Whether a job of `nodes` nodes of `queue` (a layout queue) could ever run: in its
        partition, or on the pool when there is a τ_pf to reach."""
        return nodes <= self.largest(queue) or (self.tau_pf is not None
                                                 and nodes <= self.largest())

    def check(self, machine: Machine, where: str = "queue partitions") -> None:
        """InputError naming the queue unless every partition has a node of the machine and no
        node belongs to two partitions or to a partition and the pool (flat machines: on Blue
        Gene/P `lay_out_blocks` checks as it lays out)."""
        names = {str(n) for n in range(machine.total_nodes)}
        seen: dict[str, str] = {}
        for name, places in [*self.own.items(), ("the common pool", self.pool)]:
            label = name if name == "the common pool" else f"queue {name!r}"
            if not places and name != "the common pool":
                raise InputError(f"{where}: {label} has no node")
            outside = sorted(places - names, key=_node_order)
            if outside:
                raise InputError(f"{where}: {label} names node {outside[0]}, beyond the "
                                 f"machine's {machine.total_nodes} nodes")
            for place in sorted(places, key=_node_order):
                if place in seen:
                    raise InputError(f"{where}: node {place} is in both {seen[place]} and "
                                     f"{label}; partitions must not overlap")
                seen[place] = label

    def to_wire(self) -> dict[str, Any]:
        """Plain data for Pyro5, with node ranges as `0-15,32` (what users read too); on Blue
        Gene/P block names, and the regions' node counts under `blocks`."""
        if self.blocks is not None:
            regions = self.blocks
            return {"own": {q: sorted(p) for q, p in self.own.items()}, "pool": sorted(self.pool),
                    "tau_pf": self.tau_pf, "priority": dict(self.priority),
                    "starvation": dict(self.starvation),
                    "blocks": {"rest": sorted(regions.blocks[REST]),
                               "nodes": dict(regions.nodes), "hardware": dict(regions.hardware),
                               "block_nodes": dict(regions.block_nodes)}}
        return {"own": {q: _ranges(p) for q, p in self.own.items()}, "pool": _ranges(self.pool),
                "tau_pf": self.tau_pf, "priority": dict(self.priority),
                "starvation": dict(self.starvation)}

    def listing(self, machine_nodes: int) -> dict[str, Any]:
        """What an admin reads: each queue's nodes, the pool, and the rest (no partition's:
        where the queues the layout does not name run), as node ranges; on Blue Gene/P as
        midplanes, with each region's blocks."""
        if self.blocks is not None:
            regions = self.blocks
            return {"queues": [{"name": q, "nodes": regions.nodes[q],
                                "places": regions.hardware[q], "blocks": sorted(p),
                                "priority": self.priority.get(q, 1.0)}
                               for q, p in self.own.items()],
                    "pool": regions.hardware[POOL], "pool_blocks": sorted(self.pool),
                    "tau_pf": self.tau_pf, "rest": regions.hardware[REST],
                    "rest_blocks": sorted(regions.blocks[REST])}
        taken = node_mask(self.pool.union(*self.own.values()))
        return {"queues": [{"name": q, "nodes": len(p), "places": _ranges(p),
                            "priority": self.priority.get(q, 1.0)} for q, p in self.own.items()],
                "pool": _ranges(self.pool), "tau_pf": self.tau_pf,
                "rest": mask_to_ranges(((1 << machine_nodes) - 1) & ~taken)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> QueuePartitions:
        wired = data.get("blocks")
        if wired is not None:
            own = {q: frozenset(p) for q, p in data["own"].items()}
            pool = frozenset(data["pool"])
            regions = BlockRegions({**own, POOL: pool, REST: frozenset(wired["rest"])},
                                   dict(wired["nodes"]), dict(wired["hardware"]),
                                   dict(wired["block_nodes"]))
            return cls(own, pool, data["tau_pf"], dict(data["priority"]),
                       dict(data.get("starvation", {})), regions)
        return cls({q: _names(p) for q, p in data["own"].items()}, _names(data["pool"]),
                   data["tau_pf"], dict(data["priority"]), dict(data.get("starvation", {})))


def _node_order(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (-1, name)


def node_mask(places: PlaceSet) -> int:
    """A flat machine's node names as a mask."""
    return sum(1 << int(name) for name in places)


def _ranges(places: PlaceSet) -> str:
    return mask_to_ranges(node_mask(places))


def _names(ranges: str) -> PlaceSet:
    return frozenset(str(n) for n in iter_bits(ranges_to_mask(ranges)))
