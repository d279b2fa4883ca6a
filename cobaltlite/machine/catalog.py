"""Resolve a machine spec (what `qsim --machine` takes) into a description.

Specs:

* the name of a shipped machine: `intrepid` (the real 40-rack BG/P table), `bgp-2rack`, ...;
* `flat:N` or `flat:N:PPN`: a cluster of N nodes with PPN processors each (default 1);
* a path to Cobalt's partition XML (`.xml`) or to cobaltlite's YAML (`.yaml`, `.yml`).

Shipped machines live in `cobaltlite/_machines` inside an installed wheel, and in
`simulator/machines` beside the package in a source checkout or an editable install.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cobaltlite
from cobaltlite.errors import InputError
from cobaltlite.machine.description import BGPDescription, FlatDescription

YAML_SUFFIXES = (".yaml", ".yml")


def shipped_machines_dir() -> Path:
    """Where the shipped machine descriptions are, installed or in a checkout."""
    # A wheel force-includes simulator/machines as cobaltlite/_machines (see pyproject.toml).
    import importlib.resources  # here: a flat replay never asks, and its start-up counts

    installed = importlib.resources.files("cobaltlite") / "_machines"
    if isinstance(installed, Path) and installed.is_dir():
        return installed
    return Path(cobaltlite.__file__).resolve().parent.parent / "simulator" / "machines"


def list_shipped_machines() -> list[str]:
    """Names of the shipped machines, sorted: each one is a valid spec."""
    folder = shipped_machines_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.iterdir() if p.suffix in YAML_SUFFIXES)


def load_description(
    spec: str, *, schedulable: str | None = None
) -> BGPDescription | FlatDescription:
    """The description `spec` names; `schedulable` (BG/P only) replaces its schedulable set.

    `schedulable` is `all` (every non-service block) or a text file of block names, one a line
    (blank lines and `#` comments are skipped), like Cobalt's partition lists.
    """
    desc = _resolve(spec)
    if schedulable is None:
        return desc
    if isinstance(desc, FlatDescription):
        raise InputError(
            f"--schedulable {schedulable}: only a BG/P machine has blocks; {spec!r} is flat"
        )
    if schedulable == "all":
        return dataclasses.replace(desc, schedulable=None)
    return dataclasses.replace(desc, schedulable=_read_block_list(schedulable, desc))


def _resolve(spec: str) -> BGPDescription | FlatDescription:
    if spec.startswith("flat:"):
        return _flat(spec)
    # The Blue Gene/P readers (yaml, expat) are imported only for a BG/P machine: a flat
    # replay starts without them.
    from cobaltlite.machine.bgp_xml import read_bgp_xml
    from cobaltlite.machine.bgp_yaml import read_bgp_yaml

    shipped = list_shipped_machines()
    if spec in shipped:
        folder = shipped_machines_dir()
        return read_bgp_yaml(
            next(p for p in folder.iterdir() if p.stem == spec and p.suffix in YAML_SUFFIXES)
        )
    path = Path(spec)
    if path.suffix == ".xml":
        return read_bgp_xml(_existing(path))
    if path.suffix in YAML_SUFFIXES:
        return read_bgp_yaml(_existing(path))
    names = ", ".join(shipped) or "none found"
    raise InputError(
        f"machine {spec!r}: use a shipped machine ({names}), flat:N or flat:N:PPN, "
        "or a partition file ending in .xml, .yaml or .yml"
    )


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise InputError(f"machine file {path}: no such file")
    return path


def _flat(spec: str) -> FlatDescription:
    fields = spec.split(":")[1:]
    if len(fields) not in (1, 2) or not all(f.isdigit() and int(f) > 0 for f in fields):
        raise InputError(
            f"machine {spec!r}: expected flat:N or flat:N:PPN with positive whole numbers"
        )
    nodes = int(fields[0])
    ppn = int(fields[1]) if len(fields) == 2 else 1
    return FlatDescription(name=f"flat:{nodes}", nodes=nodes, processors_per_node=ppn)


def _read_block_list(path: str | Path, desc: BGPDescription) -> frozenset[str]:
    """Block names from a partition list file, each checked against `desc`."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(
            f"--schedulable {path}: no such file (give `all` or a file of block names)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    known = {b.name for b in desc.blocks}
    names: set[str] = set()
    for number, line in enumerate(lines, start=1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if name not in known:
            raise InputError(f"{path}:{number}: {name!r} is not a block of machine {desc.name!r}")
        names.add(name)
    if not names:
        raise InputError(f"{path}: lists no block")
    return frozenset(names)
