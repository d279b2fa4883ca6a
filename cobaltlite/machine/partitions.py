"""Where each queue's jobs may run under a queue layout (seed 002 §III): partitions and a pool.

A queue of the layout owns a partition (a set of nodes) and its jobs run there; when a job's
priority factor (its slowdown times its queue's priority) exceeds τ_pf and it does not start in
its own partition, it may run on the common pool instead (pool nodes only, never a mix of both:
docs/hybrid-queues.md, D002-9). A queue the layout does not name is non-partitioned: its jobs
run on the nodes that no partition owns and that are not the pool (D002-10).

`QueuePartitions.from_layout` lays a layout out on a flat machine: the partitions as contiguous
node ranges in the layout's queue order from node 0, the pool the next `layout.pool` nodes.
Blue Gene/P layouts are not supported (a partition there would be a set of blocks; not built).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.machine.bits import iter_bits, mask_to_ranges, ranges_to_mask
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.partitioning.layout import QueueLayout


def node_range(first: int, count: int) -> PlaceSet:
    """The flat machine's nodes first .. first+count-1, as a place set."""
    return frozenset(str(n) for n in range(first, first + count))


@dataclass(frozen=True, slots=True)
class QueuePartitions:
    """Where each queue's jobs may run (seed 002 §III)."""

    own: Mapping[str, PlaceSet]    # queue -> the places of its partition
    pool: PlaceSet                 # the common pool's places (empty: none)
    tau_pf: float | None           # a job whose priority factor exceeds it may use the pool
    priority: Mapping[str, float]  # queue -> queue priority (the pf's factor)

    @classmethod
    def from_layout(cls, layout: QueueLayout, machine: Machine) -> QueuePartitions:
        """Partitions as contiguous node ranges in the layout's queue order from node 0, the
        pool the next `layout.pool` nodes; InputError if the machine cannot hold them."""
        if not isinstance(machine.description, FlatDescription):
            raise InputError(f"queue layout: machine {machine.name!r} is a Blue Gene/P; queue "
                             "partitions are laid out on flat machines only")
        layout.check(machine.total_nodes)
        own: dict[str, PlaceSet] = {}
        first = 0
        for q in layout.queues:
            own[q.name] = node_range(first, q.nodes)
            first += q.nodes
        partitions = cls(own, node_range(first, layout.pool), layout.tau_pf,
                         {q.name: q.priority for q in layout.queues})
        partitions.check(machine)
        return partitions

    def could_hold(self, queue: str, nodes: int) -> bool:
        """Whether a job of `nodes` nodes of `queue` (a layout queue) could ever run: in its
        partition, or on the pool when there is a τ_pf to reach."""
        return nodes <= len(self.own[queue]) or (self.tau_pf is not None
                                                  and nodes <= len(self.pool))

    def check(self, machine: Machine, where: str = "queue partitions") -> None:
        """InputError naming the queue unless every partition has a node of the machine and no
        node belongs to two partitions or to a partition and the pool."""
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
        """Plain data for Pyro5, with node ranges as `0-15,32` (what users read too)."""
        return {"own": {q: _ranges(p) for q, p in self.own.items()}, "pool": _ranges(self.pool),
                "tau_pf": self.tau_pf, "priority": dict(self.priority)}

    def listing(self, machine_nodes: int) -> dict[str, Any]:
        """What an admin reads: each queue's nodes, the pool, and the rest (no partition's:
        where the queues the layout does not name run), as node ranges."""
        taken = node_mask(self.pool.union(*self.own.values()))
        return {"queues": [{"name": q, "nodes": len(p), "places": _ranges(p),
                            "priority": self.priority.get(q, 1.0)} for q, p in self.own.items()],
                "pool": _ranges(self.pool), "tau_pf": self.tau_pf,
                "rest": mask_to_ranges(((1 << machine_nodes) - 1) & ~taken)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> QueuePartitions:
        return cls({q: _names(p) for q, p in data["own"].items()}, _names(data["pool"]),
                   data["tau_pf"], dict(data["priority"]))


def _node_order(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (-1, name)


def node_mask(places: PlaceSet) -> int:
    """A flat machine's node names as a mask."""
    return sum(1 << int(name) for name in places)


def _ranges(places: PlaceSet) -> str:
    return mask_to_ranges(node_mask(places))


def _names(ranges: str) -> PlaceSet:
    return frozenset(str(n) for n in iter_bits(ranges_to_mask(ranges)))
