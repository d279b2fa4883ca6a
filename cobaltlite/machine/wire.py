"""Machine descriptions as plain data, so Pyro5's default serializer can carry them."""

from __future__ import annotations

from typing import Any

from cobaltlite.machine.description import BGPDescription, BlockSpec, FlatDescription


def description_to_wire(description: BGPDescription | FlatDescription) -> dict[str, Any]:
    if isinstance(description, FlatDescription):
        return {"kind": "flat", "name": description.name, "nodes": description.nodes,
                "processors_per_node": description.processors_per_node}
    return {
        "kind": "bgp",
        "name": description.name,
        "blocks": [[b.name, list(b.nodecards), list(b.switches), list(b.wires)]
                   for b in description.blocks],
        "schedulable": None if description.schedulable is None
        else sorted(description.schedulable),
    }


def description_from_wire(data: dict[str, Any]) -> BGPDescription | FlatDescription:
    if data["kind"] == "flat":
        return FlatDescription(data["name"], data["nodes"], data["processors_per_node"])
    blocks = tuple(BlockSpec(name, tuple(cards), tuple(switches), tuple(wires))
                   for name, cards, switches, wires in data["blocks"])
    schedulable = data["schedulable"]
    return BGPDescription(data["name"], blocks,
                          None if schedulable is None else frozenset(schedulable))
