"""Cobalt's Blue Gene/P partition XML: read it into a `BGPDescription`, and write it back.

The format (Cobalt's `misc/partitions.xml`, `tools/local_sim/simulator.xml`, and what
`partadm --xml` prints)::

    <BG>
    <PartitionList>
       <Partition name='ANL-R00-M0-512'>
          <NodeCard id='R00-M0-N00' />
          <Switch id='X_R00-M0' />
          <Wire id='R00-M0X_R00-M0' />
       </Partition>
    </PartitionList>
    </BG>

Cobalt treats a partition's node cards, switches and wires as sets, and its files list them in
whatever order a Python set produced. The reader therefore returns each of the three sorted, so
equal tables read equal; blocks keep the order of the file. The XML carries no schedulable set:
that comes from a partition list (see `catalog.load_description`) or from our YAML format.

The BG/Q variant (`<BlockList><Block size=..>`) describes blocks down to a single node, which a
`BlockSpec` (32 nodes per node card) cannot express; it is refused with a clear message.

The reader drives expat directly rather than ElementTree because expat reports the line of every
element, so a semantic error (an empty partition, a duplicate name) can point at its line too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat
from xml.sax.saxutils import escape

from cobaltlite.errors import InputError
from cobaltlite.machine.description import BGPDescription, BlockSpec

_CHILD_TAGS = ("NodeCard", "Switch", "Wire")


@dataclass
class _OpenPartition:
    name: str
    line: int
    children: dict[str, list[str]] = field(default_factory=lambda: {t: [] for t in _CHILD_TAGS})


class _Reader:
    """expat callbacks that build the block list while checking the element structure."""

    def __init__(self, path: Path, parser: expat.XMLParserType) -> None:
        self.path = path
        self.parser = parser
        self.stack: list[str] = []
        self.blocks: list[BlockSpec] = []
        self.first_line: dict[str, int] = {}
        self.current: _OpenPartition | None = None

    @property
    def lineno(self) -> int:
        return self.parser.CurrentLineNumber

    def fail(self, message: str) -> InputError:
        return InputError(f"{self.path}:{self.lineno}: {message}")

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        parent = self.stack[-1] if self.stack else None
        self.stack.append(tag)
        if parent is None:
            if tag != "BG":
                raise self.fail(f"root element is <{tag}>, expected <BG>")
        elif parent == "BG":
            if tag == "BlockList":
                raise self.fail(
                    "this is a Blue Gene/Q block list (<BlockList>), which is not supported: "
                    "cobaltlite reads BG/P partition tables (<PartitionList>)"
                )
            if tag != "PartitionList":
                raise self.fail(f"unexpected <{tag}> in <BG>, expected <PartitionList>")
        elif parent == "PartitionList":
            if tag != "Partition":
                raise self.fail(f"unexpected <{tag}> in <PartitionList>, expected <Partition>")
            self.current = _OpenPartition(self._attribute(tag, attrs, "name"), self.lineno)
        elif parent == "Partition" and self.current is not None:
            if tag not in _CHILD_TAGS:
                expected = ", ".join(f"<{t}>" for t in _CHILD_TAGS)
                raise self.fail(
                    f"unexpected <{tag}> in partition {self.current.name!r}, expected {expected}"
                )
            self.current.children[tag].append(self._attribute(tag, attrs, "id"))
        else:
            raise self.fail(f"unexpected <{tag}> inside <{parent}>")

    def end(self, tag: str) -> None:
        self.stack.pop()
        if tag == "Partition":
            assert self.current is not None
            self.blocks.append(self._finish(self.current))
            self.current = None

    def _attribute(self, tag: str, attrs: dict[str, str], key: str) -> str:
        value = attrs.get(key, "")
        if not value:
            raise self.fail(f"<{tag}> has no {key}= attribute")
        return value

    def _finish(self, part: _OpenPartition) -> BlockSpec:
        where = f"{self.path}:{part.line}: partition {part.name!r}"
        if part.name in self.first_line:
            raise InputError(
                f"{where}: duplicate name (first at line {self.first_line[part.name]})"
            )
        self.first_line[part.name] = part.line
        sets: dict[str, tuple[str, ...]] = {}
        for tag, ids in part.children.items():
            unique = tuple(sorted(set(ids)))
            if len(unique) != len(ids):
                twice = sorted({i for i in ids if ids.count(i) > 1})
                raise InputError(f"{where}: <{tag}> listed twice: {', '.join(twice)}")
            sets[tag] = unique
        if not sets["NodeCard"]:
            raise InputError(f"{where}: no <NodeCard>, so it has no nodes")
        return BlockSpec(part.name, sets["NodeCard"], sets["Switch"], sets["Wire"])


def read_bgp_xml(path: str | os.PathLike[str]) -> BGPDescription:
    """Read a Cobalt BG/P partition XML file; the description is named after the file's stem."""
    path = Path(path)
    parser = expat.ParserCreate()
    reader = _Reader(path, parser)
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.buffer_text = True
    try:
        with path.open("rb") as stream:
            parser.ParseFile(stream)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except expat.ExpatError as exc:
        problem = expat.ErrorString(exc.code)
        raise InputError(
            f"{path}:{exc.lineno}: malformed XML: {problem} (column {exc.offset})"
        ) from exc
    if not reader.blocks:
        raise InputError(f"{path}: no <Partition> in the file")
    return BGPDescription(name=path.stem, blocks=tuple(reader.blocks), schedulable=None)


def write_bgp_xml(desc: BGPDescription, path: str | os.PathLike[str]) -> None:
    """Write `desc` in Cobalt's partition XML format (the schedulable set is not part of it)."""
    Path(path).write_text(bgp_xml_text(desc), encoding="utf-8")


def bgp_xml_text(desc: BGPDescription) -> str:
    """The XML of `desc`, laid out as Cobalt lays it out."""
    lines = ["<BG>", "<PartitionList>"]
    for block in desc.blocks:
        lines.append(f"   <Partition name={_attr(block.name)}>")
        for tag, ids in zip(
            _CHILD_TAGS, (block.nodecards, block.switches, block.wires), strict=True
        ):
            lines.extend(f"      <{tag} id={_attr(i)} />" for i in ids)
        lines.append("   </Partition>")
    lines += ["</PartitionList>", "</BG>", ""]
    return "\n".join(lines)


def _attr(value: str) -> str:
    # Cobalt's files quote attributes with apostrophes; keep that so diffs against them stay small.
    return "'" + escape(value, {"'": "&apos;", '"': "&quot;"}) + "'"
