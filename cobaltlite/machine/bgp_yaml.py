"""cobaltlite's readable YAML format for Blue Gene/P partition tables: read and write.

A file looks like this::

    kind: bgp                       # required; the only kind so far
    name: bgp-2rack                 # required; the machine's name in reports
    schedulable: all                # optional; `all` (the default) = every non-service block,
                                    # else block names/patterns jobs may be placed on
    blocks:                         # required; one entry per partition
      - name: ANL-R00-R01-2048
        nodecards: R0[0-1]-M[0-1]-N[00-15]
        switches: X_R0[0-1]-M[0-1] Y_R0[0-1]-M[0-1] Z_R0[0-1]-M[0-1]
        wires: R00-M0X_R00-M0 Z_R00-M0Z_R00-M1
          Z_R00-M1Z_R01-M1          # a long value may go on over indented lines
      - name: ANL-R00-M0-512
        nodecards:                  # a YAML list works too
          - R00-M0-N[00-07]
          - R00-M0-N[08-15]

`nodecards`, `switches`, `wires` and `schedulable` each hold names separated by white space
(or a YAML list of them), and every name may use the range notation: a bracket holds numbers
and ranges separated by commas, a range keeps the zero padding of its bounds, and several
brackets expand left to right, the rightmost varying fastest. `R0[0-1]-M[0-1]-N[00-15]` is the
64 node cards of racks R00 and R01; `N[00-03,08]` is N00, N01, N02, N03 and N08.

Node cards, switches and wires are sets: the reader returns them sorted, and the writer writes
them in the order the description holds, so a description read from a file writes back to the
same description. Blocks keep the order of the file. Every error names the file and the line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import product
from pathlib import Path

import yaml

from cobaltlite.errors import InputError
from cobaltlite.machine.description import BGPDescription, BlockSpec

# libyaml's composer is several times faster than the pure-Python one on the 1,467-block table.
_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KIND = "bgp"
_TOP_KEYS = ("kind", "name", "schedulable", "blocks")
_BLOCK_KEYS = ("name", "nodecards", "switches", "wires")
_WIDTH = 100
_CONTINUATION = " " * 6
# A value that may be written as a plain YAML scalar: nothing YAML could take for an indicator
# first (`-`, `[`, `#`, ...), never `: ` or ` #`. Anything else is written double-quoted.
_PLAIN = re.compile(r"[A-Za-z0-9_(/+][A-Za-z0-9_.()/+\-\[\], ]*")
_BRACKET = re.compile(r"\[([^\[\]]*)\]")


# ---- the range notation ---------------------------------------------------------------------


def expand_pattern(pattern: str) -> list[str]:
    """The names a pattern stands for, in order; ValueError says what is wrong with it."""
    texts: list[str] = []
    choices: list[list[str]] = []
    pos = 0
    for match in _BRACKET.finditer(pattern):
        texts.append(pattern[pos : match.start()])
        choices.append(_expand_bracket(match.group(1), pattern))
        pos = match.end()
    texts.append(pattern[pos:])
    if any("[" in t or "]" in t for t in texts):
        raise ValueError(f"unbalanced bracket in {pattern!r}")
    if not choices:
        return [pattern]
    names = []
    for combination in product(*choices):
        parts = [texts[0]]
        for value, text in zip(combination, texts[1:], strict=True):
            parts += (value, text)
        names.append("".join(parts))
    return names


def _expand_bracket(body: str, pattern: str) -> list[str]:
    values: list[str] = []
    for item in body.split(","):
        low, dash, high = item.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"bad range {item.strip()!r} in {pattern!r}: use N, N-M or N,M-P")
        if not dash:
            values.append(low)
            continue
        if int(low) > int(high):
            raise ValueError(f"bad range {item.strip()!r} in {pattern!r}: it runs backwards")
        if len(low) == len(high):
            width = len(low)
        elif _unpadded(low) and _unpadded(high):
            width = 0
        else:
            raise ValueError(
                f"bad range {item.strip()!r} in {pattern!r}: give both bounds the same width"
            )
        values.extend(str(v).zfill(width) for v in range(int(low), int(high) + 1))
    return values


def _unpadded(digits: str) -> bool:
    return digits == str(int(digits))


def compact_names(names: Sequence[str]) -> list[str]:
    """Patterns that expand, in order, to exactly `names` (sorted input gives the fewest).

    Names are split into text and digit runs. Neighbours that differ only in their last digit
    run merge into one bracket; then, from right to left, neighbours that differ only in an
    earlier run merge the same way. Merging a run is only order-preserving while every run to
    its left is still a single value, which the right-to-left sweep guarantees.
    """
    items: list[list[str | list[str]]] = []
    for name in names:
        parts = re.split(r"(\d+)", name)
        items.append([[p] if i % 2 else p for i, p in enumerate(parts)])
    most_runs = max((len(item) // 2 for item in items), default=0)
    for k in range(1, most_runs + 1):
        merged: list[list[str | list[str]]] = []
        for item in items:
            j = len(item) - 2 * k
            last = merged[-1] if merged else None
            if (
                j > 0
                and last is not None
                and len(last) == len(item)
                and all(a == b for i, (a, b) in enumerate(zip(last, item, strict=True)) if i != j)
            ):
                last[j] = [*last[j], *item[j]]
            else:
                merged.append(list(item))
        items = merged
    return ["".join(p if isinstance(p, str) else _bracket(p) for p in item) for item in items]


def _bracket(values: list[str]) -> str:
    if len(values) == 1:
        return values[0]
    runs: list[list[str]] = []
    for value in values:
        if runs and _continues(runs[-1][-1], value):
            runs[-1].append(value)
        else:
            runs.append([value])
    return "[" + ",".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) + "]"


def _continues(previous: str, value: str) -> bool:
    """Whether `value` can extend a range ending at `previous` and expand back unchanged."""
    if int(value) != int(previous) + 1:
        return False
    return len(value) == len(previous) or (_unpadded(previous) and _unpadded(value))


# ---- reading --------------------------------------------------------------------------------


class _Context:
    """The file being read, so every message starts with `path:line:`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, node: yaml.Node, message: str) -> InputError:
        return InputError(f"{self.path}:{node.start_mark.line + 1}: {message}")

    def mapping(self, node: yaml.Node, allowed: Sequence[str], what: str) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping of {', '.join(allowed)}")
        fields: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.scalar(key_node, f"a key of {what}")
            if key not in allowed:
                raise self.error(
                    key_node, f"{what}: unknown key {key!r}; expected {', '.join(allowed)}"
                )
            if key in fields:
                raise self.error(key_node, f"{what}: key {key!r} given twice")
            fields[key] = value_node
        return fields

    def scalar(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{what} must be a single value")
        # The raw text, not the resolved value: a block called 1024 is a name, not a number.
        return node.value

    def names(self, node: yaml.Node, what: str) -> Iterator[tuple[str, yaml.Node]]:
        """Each name a names-field stands for, with the node it came from."""
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for item in items:
            text = self.scalar(item, f"each entry of {what}")
            for pattern in text.split():
                try:
                    expanded = expand_pattern(pattern)
                except ValueError as exc:
                    raise self.error(item, f"{what}: {exc}") from None
                for name in expanded:
                    yield name, item

    def name_set(self, node: yaml.Node, what: str) -> tuple[str, ...]:
        seen: set[str] = set()
        for name, item in self.names(node, what):
            if name in seen:
                raise self.error(item, f"{what}: {name} listed twice")
            seen.add(name)
        return tuple(sorted(seen))


def read_bgp_yaml(path: str | os.PathLike[str]) -> BGPDescription:
    """Read a BG/P description in cobaltlite's YAML format (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: not valid YAML: {problem}") from exc
    if root is None:
        raise InputError(f"{path}: the file is empty; expected kind, name and blocks")
    ctx = _Context(path)
    top = ctx.mapping(root, _TOP_KEYS, "the file")
    for key in ("kind", "name", "blocks"):
        if key not in top:
            raise ctx.error(root, f"missing key {key!r}")
    kind = ctx.scalar(top["kind"], "kind")
    if kind != KIND:
        raise ctx.error(top["kind"], f"kind {kind!r} is not supported; expected {KIND!r}")
    blocks = _read_blocks(ctx, top["blocks"])
    schedulable = None
    if "schedulable" in top:
        schedulable = _read_schedulable(ctx, top["schedulable"], {b.name for b in blocks})
    return BGPDescription(ctx.scalar(top["name"], "name"), tuple(blocks), schedulable)


def _read_blocks(ctx: _Context, node: yaml.Node) -> list[BlockSpec]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise ctx.error(node, "blocks must be a non-empty list")
    blocks: list[BlockSpec] = []
    first_line: dict[str, int] = {}
    for item in node.value:
        fields = ctx.mapping(item, _BLOCK_KEYS, "a block")
        if "name" not in fields:
            raise ctx.error(item, "a block has no name")
        name = ctx.scalar(fields["name"], "a block's name")
        if name in first_line:
            raise ctx.error(
                fields["name"], f"block {name!r} defined twice (first at line {first_line[name]})"
            )
        first_line[name] = item.start_mark.line + 1
        what = f"block {name!r}"
        parts = {
            key: ctx.name_set(fields[key], f"{what} {key}") if key in fields else ()
            for key in _BLOCK_KEYS[1:]
        }
        if not parts["nodecards"]:
            raise ctx.error(fields.get("nodecards", item), f"{what} has no node cards")
        blocks.append(BlockSpec(name, parts["nodecards"], parts["switches"], parts["wires"]))
    return blocks


def _read_schedulable(ctx: _Context, node: yaml.Node, known: set[str]) -> frozenset[str] | None:
    if isinstance(node, yaml.ScalarNode) and not node.style and node.value == "all":
        return None
    names = set()
    for name, item in ctx.names(node, "schedulable"):
        if name not in known:
            raise ctx.error(item, f"schedulable: {name!r} is not a block of this file")
        names.add(name)
    return frozenset(names)


# ---- writing --------------------------------------------------------------------------------


def write_bgp_yaml(
    desc: BGPDescription, path: str | os.PathLike[str], *, header: str | None = None
) -> None:
    """Write `desc` in the YAML format; `header` becomes a comment at the top of the file."""
    Path(path).write_text(bgp_yaml_text(desc, header=header), encoding="utf-8")


def bgp_yaml_text(desc: BGPDescription, *, header: str | None = None) -> str:
    """The YAML text of `desc`: node cards, switches and wires compacted, in the order held."""
    lines = [f"# {line}".rstrip() for line in (header or "").splitlines()]
    lines += [f"kind: {KIND}", f"name: {_scalar(desc.name)}"]
    if desc.schedulable is None:
        lines.append("schedulable: all")
    else:
        # A set, so any order will do: grouping names of one shape (digits aside) lets whole
        # families such as ANL-R[00-07]-1024 collapse into one pattern.
        names = sorted(desc.schedulable, key=lambda n: (re.sub(r"\d", "0", n), n))
        lines += _field("", "schedulable", names)
    lines.append("blocks:")
    for block in desc.blocks:
        lines.append(f"  - name: {_scalar(block.name)}")
        for key, ids in zip(
            _BLOCK_KEYS[1:], (block.nodecards, block.switches, block.wires), strict=True
        ):
            if ids or key == "nodecards":
                lines += _field("    ", key, ids)
    return "\n".join(lines) + "\n"


def _field(indent: str, key: str, ids: Sequence[str]) -> list[str]:
    for name in ids:
        if not name or any(c.isspace() or c in "[]," for c in name):
            raise ValueError(f"{key}: {name!r} cannot be written: no spaces, brackets or commas")
    if not ids:
        return [f"{indent}{key}: []"]
    value = " ".join(compact_names(ids))
    # A single name `all` is quoted so that it does not read back as the keyword.
    if not _PLAIN.fullmatch(value) or value == "all":
        return [f"{indent}{key}: {json.dumps(value, ensure_ascii=False)}"]
    return list(_wrapped(f"{indent}{key}: ", indent + _CONTINUATION, value.split(" ")))


def _wrapped(first: str, rest: str, words: Iterable[str]) -> Iterator[str]:
    # A plain scalar may go on over more-indented lines; YAML folds each break into one space.
    line = first
    fresh = True
    for word in words:
        if not fresh and len(line) + 1 + len(word) > _WIDTH:
            yield line
            line, fresh = rest, True
        line += word if fresh else " " + word
        fresh = False
    yield line


def _scalar(text: str) -> str:
    if _PLAIN.fullmatch(text) and " " not in text:
        return text
    return json.dumps(text, ensure_ascii=False)
