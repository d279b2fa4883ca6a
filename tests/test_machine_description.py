"""The BG/P description layer: Cobalt's XML, our YAML, the generator, the catalog."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobaltlite.errors import InputError
from cobaltlite.machine import bgp_generate, bgp_yaml
from cobaltlite.machine.bgp_generate import generate_bgp
from cobaltlite.machine.bgp_xml import bgp_xml_text, read_bgp_xml, write_bgp_xml
from cobaltlite.machine.bgp_yaml import (
    bgp_yaml_text,
    compact_names,
    expand_pattern,
    read_bgp_yaml,
    write_bgp_yaml,
)
from cobaltlite.machine.catalog import list_shipped_machines, load_description
from cobaltlite.machine.description import (
    BGPDescription,
    BlockSpec,
    FlatDescription,
    is_service_block,
)
from tests.shared_paths import MACHINES

INTREPID_XML = MACHINES / "intrepid-partitions.xml"
INTREPID_PARTLIST = MACHINES / "intrepid-partlist-R00-R47.txt"
SHIPPED = Path(__file__).resolve().parents[1] / "simulator" / "machines"

INTREPID_SIZES = {
    64: 640, 128: 320, 256: 160, 512: 82, 1024: 81, 2048: 21, 4096: 27,
    8192: 8, 16384: 4, 24576: 1, 32768: 2, 40960: 1,
}  # fmt: skip


@pytest.fixture(scope="module")
def intrepid() -> BGPDescription:
    return read_bgp_xml(INTREPID_XML)


@pytest.fixture(scope="module")
def partlist() -> frozenset[str]:
    return frozenset(INTREPID_PARTLIST.read_text().split())


def _by_name(desc: BGPDescription) -> dict[str, BlockSpec]:
    return {b.name: b for b in desc.blocks}


def _wiring_conflicts(blocks: list[BlockSpec]) -> set[frozenset[str]]:
    """Pairs of blocks with no node card in common that share a wire."""
    pairs = set()
    for i, a in enumerate(blocks):
        for b in blocks[i + 1 :]:
            if set(a.wires) & set(b.wires) and not set(a.nodecards) & set(b.nodecards):
                pairs.add(frozenset((a.name, b.name)))
    return pairs


# ---- Cobalt's XML ---------------------------------------------------------------------------


def test_intrepid_xml_has_the_real_table(intrepid: BGPDescription) -> None:
    assert len(intrepid.blocks) == 1467
    service = [b for b in intrepid.blocks if is_service_block(b.name)]
    sizes = Counter(b.size for b in intrepid.blocks if not is_service_block(b.name))
    assert dict(sizes) == INTREPID_SIZES
    assert len(service) == 1467 - sum(INTREPID_SIZES.values())
    assert intrepid.size == 40960
    assert len({w for b in intrepid.blocks for w in b.wires}) == 768
    assert sum(len(b.wires) for b in intrepid.blocks) == 8812
    block = _by_name(intrepid)["ANL-R00-1024"]
    assert block.nodecards == tuple(sorted(block.nodecards))
    assert "Z_R00-M1Z_R01-M1" in block.wires


def test_xml_round_trip_is_identity(intrepid: BGPDescription, tmp_path: Path) -> None:
    write_bgp_xml(intrepid, tmp_path / "again.xml")
    again = read_bgp_xml(tmp_path / "again.xml")
    assert again.blocks == intrepid.blocks
    assert again.schedulable is None


def test_xml_writer_keeps_cobalts_layout() -> None:
    text = bgp_xml_text(generate_bgp("two", 2))
    assert text.startswith(
        "<BG>\n<PartitionList>\n   <Partition name='ANL-R00-R01-2048'>\n"
        "      <NodeCard id='R00-M0-N00' />\n"
    )
    assert text.endswith("   </Partition>\n</PartitionList>\n</BG>\n")


def _bad_xml(tmp_path: Path, body: str) -> str:
    path = tmp_path / "broken.xml"
    path.write_text(body)
    with pytest.raises(InputError) as caught:
        read_bgp_xml(path)
    return str(caught.value)


def test_xml_errors_name_file_and_line(tmp_path: Path) -> None:
    message = _bad_xml(tmp_path, "<BG>\n<PartitionList>\n<Partition name='a'>\n</BG>\n")
    assert message.startswith(f"{tmp_path / 'broken.xml'}:4: malformed XML")

    empty = (
        "<BG>\n<PartitionList>\n  <Partition name='lonely'>\n  </Partition>\n</PartitionList></BG>"
    )
    message = _bad_xml(tmp_path, empty)
    assert "broken.xml:3:" in message and "'lonely'" in message and "no <NodeCard>" in message

    twice = (
        "<BG><PartitionList>\n<Partition name='p'><NodeCard id='R00-M0-N00'/></Partition>\n"
        "<Partition name='p'><NodeCard id='R00-M0-N01'/></Partition>\n</PartitionList></BG>"
    )
    assert "broken.xml:3:" in _bad_xml(tmp_path, twice)

    stray = "<BG><PartitionList>\n<Partition name='p'>\n<Cable/></Partition></PartitionList></BG>"
    assert "broken.xml:3: unexpected <Cable>" in _bad_xml(tmp_path, stray)

    nameless = "<BG><PartitionList>\n<Partition><NodeCard id='a'/></Partition></PartitionList></BG>"
    assert "broken.xml:2: <Partition> has no name=" in _bad_xml(tmp_path, nameless)

    assert "no <Partition>" in _bad_xml(tmp_path, "<BG><PartitionList/></BG>")


def test_bgq_block_lists_are_refused_clearly(tmp_path: Path) -> None:
    bgq = "<BG>\n<BlockList>\n<Block name='R00-M0-N00-J00-1' size='1'><NodeCard id='x'/></Block>"
    message = _bad_xml(tmp_path, bgq + "</BlockList></BG>")
    assert "broken.xml:2:" in message and "Blue Gene/Q" in message and "not supported" in message


def test_missing_xml_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nowhere\.xml: cannot read"):
        read_bgp_xml(tmp_path / "nowhere.xml")


# ---- our YAML ------------------------------------------------------------------------------


def test_yaml_round_trip_of_intrepid(
    intrepid: BGPDescription, partlist: frozenset[str], tmp_path: Path
) -> None:
    desc = dataclasses.replace(intrepid, schedulable=partlist)
    write_bgp_yaml(desc, tmp_path / "i.yaml", header="a header\nover two lines")
    text = (tmp_path / "i.yaml").read_text()
    assert text.startswith("# a header\n# over two lines\nkind: bgp\n")
    assert "nodecards: R[00-07,10-17,20-27,30-37,40-47]-M[0-1]-N[00-15]\n" in text
    assert read_bgp_yaml(tmp_path / "i.yaml") == desc


def test_shipped_intrepid_is_the_xml_plus_the_partition_list(
    intrepid: BGPDescription, partlist: frozenset[str]
) -> None:
    shipped = read_bgp_yaml(SHIPPED / "intrepid.yaml")
    assert shipped.name == "intrepid"
    assert shipped.schedulable == partlist and len(partlist) == 227
    assert sorted(shipped.blocks, key=lambda b: b.name) == sorted(
        intrepid.blocks, key=lambda b: b.name
    )
    assert "ido/cobalt @ 45b99619" in (SHIPPED / "intrepid.yaml").read_text()[:2000]


def test_yaml_accepts_lists_ranges_and_continued_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: bgp\nname: tiny\nschedulable: [big]\nblocks:\n"
        "  - name: big\n"
        "    nodecards: R00-M0-N[00-03,08]\n"
        "      R00-M0-N[09-10]\n"
        "    wires: [w1, 'w[2-3]']\n"
        "  - name: small\n"
        "    nodecards:\n      - R00-M0-N00\n"
    )
    desc = read_bgp_yaml(path)
    big, small = desc.blocks
    assert big.nodecards == tuple(f"R00-M0-N{n:02d}" for n in (0, 1, 2, 3, 8, 9, 10))
    assert big.wires == ("w1", "w2", "w3") and big.switches == ()
    assert small.size == 32
    assert desc.schedulable == frozenset({"big"})
    assert not desc.is_schedulable(small)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N0\n    color: red\n",
         "bad.yaml:6: a block: unknown key 'color'"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N[3-1]\n",
         "bad.yaml:5: block 'a' nodecards: bad range '3-1'"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N[1-x]\n",
         "bad.yaml:5: block 'a' nodecards: bad range '1-x'"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N[01-7]\n",
         "give both bounds the same width"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N[1\n",
         "bad.yaml:5: block 'a' nodecards: unbalanced bracket"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N0\n"
         "  - name: a\n    nodecards: N1\n",
         "bad.yaml:6: block 'a' defined twice (first at line 4)"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    switches: S0\n",
         "bad.yaml:4: block 'a' has no node cards"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N[0-1] N1\n",
         "bad.yaml:5: block 'a' nodecards: N1 listed twice"),
        ("kind: bgp\nname: x\nschedulable:\n  - a\n  - b\n"
         "blocks:\n  - name: a\n    nodecards: N0\n",
         "bad.yaml:5: schedulable: 'b' is not a block of this file"),
        ("kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: [N0\n",
         "bad.yaml:6: not valid YAML"),
        ("kind: bgq\nname: x\nblocks:\n  - name: a\n    nodecards: N0\n",
         "bad.yaml:1: kind 'bgq' is not supported"),
        ("kind: bgp\nname: x\nmachine: y\nblocks: []\n", "bad.yaml:3: the file: unknown key"),
        ("kind: bgp\nname: x\n", "bad.yaml:1: missing key 'blocks'"),
        ("kind: bgp\nname: x\nblocks: []\n", "bad.yaml:3: blocks must be a non-empty list"),
        ("", "bad.yaml: the file is empty"),
    ],
)  # fmt: skip
def test_yaml_errors_name_file_and_line(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as caught:
        read_bgp_yaml(path)
    assert expected in str(caught.value)
    assert str(caught.value).startswith(str(path))


def test_yaml_reader_works_without_libyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bgp_yaml, "_Loader", yaml.SafeLoader)
    desc = dataclasses.replace(generate_bgp("two", 2), schedulable=frozenset({"ANL-R00-1024"}))
    write_bgp_yaml(desc, tmp_path / "two.yaml")
    assert read_bgp_yaml(tmp_path / "two.yaml") == desc
    (tmp_path / "bad.yaml").write_text(
        "kind: bgp\nname: x\nblocks:\n  - name: a\n    nodecards: N[\n"
    )
    with pytest.raises(InputError, match=r"bad.yaml:5: block 'a' nodecards: unbalanced"):
        read_bgp_yaml(tmp_path / "bad.yaml")


def test_yaml_writer_refuses_names_the_notation_cannot_carry(tmp_path: Path) -> None:
    desc = BGPDescription("x", (BlockSpec("a", ("N 0",)),))
    with pytest.raises(ValueError, match="cannot be written"):
        write_bgp_yaml(desc, tmp_path / "x.yaml")


# ---- range notation -------------------------------------------------------------------------


def test_range_notation_expands_left_to_right() -> None:
    assert expand_pattern("R0[0-1]-M[0-1]") == ["R00-M0", "R00-M1", "R01-M0", "R01-M1"]
    assert expand_pattern("N[00-02,07]") == ["N00", "N01", "N02", "N07"]
    assert expand_pattern("n[8-10]") == ["n8", "n9", "n10"]
    assert expand_pattern("plain") == ["plain"]


def test_compaction_folds_whole_midplanes_and_racks() -> None:
    cards = [f"R{r}-M{m}-N{n:02d}" for r in ("00", "01", "10") for m in (0, 1) for n in range(16)]
    assert compact_names(cards) == ["R[00-01,10]-M[0-1]-N[00-15]"]
    assert compact_names(["a7", "a8", "a9", "a10", "a010", "b"]) == ["a[7-10,010]", "b"]
    assert compact_names([]) == []


NAME_CHARS = "ab-_.0129"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(NAME_CHARS, min_size=1, max_size=7), max_size=30))
def test_compaction_expands_back_to_the_same_names(names: list[str]) -> None:
    expanded = [n for pattern in compact_names(names) for n in expand_pattern(pattern)]
    assert expanded == names


# ---- round trips over arbitrary descriptions ------------------------------------------------

_ids = st.lists(st.text(NAME_CHARS + ":#R", min_size=1, max_size=8), unique=True, max_size=12)


@st.composite
def descriptions(draw: st.DrawFn) -> BGPDescription:
    """Descriptions as readers return them: node cards, switches and wires sorted."""
    block_name = st.text(NAME_CHARS, min_size=1, max_size=10)
    names = draw(st.lists(block_name, min_size=1, max_size=8, unique=True))
    blocks = tuple(
        BlockSpec(
            name,
            tuple(sorted(draw(_ids.filter(bool)))),
            tuple(sorted(draw(_ids))),
            tuple(sorted(draw(_ids))),
        )
        for name in names
    )
    schedulable = draw(st.none() | st.frozensets(st.sampled_from(names)))
    machine = draw(st.text("abcXYZ 09-#:", min_size=1, max_size=12))
    return BGPDescription(machine, blocks, schedulable)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(descriptions())
def test_yaml_round_trip_of_any_description(tmp_path: Path, desc: BGPDescription) -> None:
    write_bgp_yaml(desc, tmp_path / "d.yaml")
    assert read_bgp_yaml(tmp_path / "d.yaml") == desc


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(descriptions())
def test_xml_round_trip_of_any_description(tmp_path: Path, desc: BGPDescription) -> None:
    write_bgp_xml(desc, tmp_path / "d.xml")
    again = read_bgp_xml(tmp_path / "d.xml")
    assert again == BGPDescription("d", desc.blocks, None)


@pytest.mark.parametrize(
    ("racks", "rows", "smallest"),
    [(1, 1, 32), (2, 1, 64), (3, 1, 512), (4, 2, 256), (6, 3, 2048), (8, 1, 512)],
)
def test_generated_descriptions_round_trip(
    tmp_path: Path, racks: int, rows: int, smallest: int
) -> None:
    desc = generate_bgp("gen", racks, rows, smallest)
    write_bgp_yaml(desc, tmp_path / "g.yaml")
    assert read_bgp_yaml(tmp_path / "g.yaml") == desc
    write_bgp_xml(desc, tmp_path / "gen.xml")
    assert read_bgp_xml(tmp_path / "gen.xml") == desc


# ---- the generator --------------------------------------------------------------------------


def test_generator_one_rack() -> None:
    desc = generate_bgp("one", 1, smallest_block=64)
    sizes = Counter(b.size for b in desc.blocks)
    assert dict(sizes) == {64: 16, 128: 8, 256: 4, 512: 2, 1024: 1}
    assert desc.blocks[0].name == "ANL-R00-1024"
    assert "ANL-R00-M1-N12-128" in _by_name(desc)
    assert _by_name(desc)["ANL-R00-M0-N08-256"].nodecards[-1] == "R00-M0-N15"
    assert desc.size == 1024 and desc.schedulable is None


def test_generator_two_racks_is_cobalts_small_table() -> None:
    desc = generate_bgp("two", 2)
    assert [b.name for b in desc.blocks] == [
        "ANL-R00-R01-2048", "ANL-R00-1024", "ANL-R01-1024",
        "ANL-R00-M0-512", "ANL-R00-M1-512", "ANL-R01-M0-512", "ANL-R01-M1-512",
    ]  # fmt: skip
    blocks = _by_name(desc)
    assert blocks["ANL-R00-M0-512"].switches == ("X_R00-M0", "Y_R00-M0", "Z_R00-M0")
    # The two racks close their tori through one Z ring, so they conflict through the wiring.
    assert _wiring_conflicts(list(desc.blocks)) == {frozenset(("ANL-R00-1024", "ANL-R01-1024"))}


def test_generator_four_racks() -> None:
    desc = generate_bgp("four", 4, smallest_block=32)
    sizes = Counter(b.size for b in desc.blocks)
    assert dict(sizes) == {32: 128, 64: 64, 128: 32, 256: 16, 512: 8, 1024: 4, 2048: 2, 4096: 1}
    assert "ANL-R02-R03-2048" in _by_name(desc) and desc.blocks[0].name == "ANL-R00-R03-4096"
    assert "ANL-R03-M1-N15-32" in _by_name(desc)
    assert desc.size == 4096


def test_generator_whole_machine_blocks() -> None:
    assert generate_bgp("m", 3).blocks[0].name == "ANL-R00-R02-3072"
    rows = generate_bgp("m", 4, rows=2)
    assert [b.name for b in rows.blocks[:3]] == [
        "ANL-R00-R11-4096",
        "ANL-R00-R01-2048",
        "ANL-R10-R11-2048",
    ]
    assert [b.name for b in generate_bgp("m", 2, smallest_block=4096).blocks] == [
        "ANL-R00-R01-2048"
    ]


def test_generator_reproduces_intrepid_within_rows(intrepid: BGPDescription) -> None:
    generated = generate_bgp("intrepid-like", 40, rows=5, smallest_block=64, prefix="ANL")
    real = _by_name(intrepid)
    in_rows = [b for b in generated.blocks if b.size <= 8192]
    assert all(b.name in real and real[b.name].nodecards == b.nodecards for b in in_rows)
    # Row 0 matches switch for switch and wire for wire. (Intrepid runs the Z rings of rows 1
    # and 2 the other way round, which names the same cables in reverse.)
    assert all(real[b.name] == b for b in in_rows if b.name.startswith("ANL-R0"))
    # And the wiring conflicts the generator creates are exactly Intrepid's among these blocks.
    torus = [b for b in in_rows if b.size >= 512]
    assert _wiring_conflicts(torus) == _wiring_conflicts([real[b.name] for b in torus])
    assert frozenset(("ANL-R00-R03-4096", "ANL-R04-R07-4096")) in _wiring_conflicts(torus)


@pytest.mark.parametrize(
    ("racks", "rows", "smallest", "expected"),
    [
        (0, 1, 512, "at least 1"),
        (5, 2, 512, "equal rows"),
        (11, 1, 512, "at most 10 rows of 10 racks"),
        (2, 1, 96, "power of two"),
        (2, 1, 16, "power of two"),
    ],
)
def test_generator_refuses_impossible_geometry(
    racks: int, rows: int, smallest: int, expected: str
) -> None:
    with pytest.raises(InputError, match=expected):
        generate_bgp("bad", racks, rows, smallest)


def test_generator_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.yaml"
    assert bgp_generate.main(["--racks", "2", "--smallest-block", "512", "--out", str(out)]) == 0
    assert read_bgp_yaml(out) == generate_bgp("bgp-2rack", 2)
    assert out.read_text().startswith("# generated by: python -m cobaltlite.machine.bgp_generate")

    assert bgp_generate.main(["--racks", "1", "--name", "r", "--out", str(tmp_path / "r.xml")]) == 0
    assert read_bgp_xml(tmp_path / "r.xml").blocks == generate_bgp("r", 1).blocks

    assert bgp_generate.main(["--racks", "1", "--name", "solo"]) == 0
    assert "name: solo\n" in capsys.readouterr().out

    assert bgp_generate.main(["--racks", "3", "--rows", "2"]) == 2
    assert "equal rows" in capsys.readouterr().err


def test_shipped_two_rack_table_is_the_generated_one() -> None:
    assert read_bgp_yaml(SHIPPED / "bgp-2rack.yaml") == generate_bgp("bgp-2rack", 2)


def test_yaml_text_of_a_generated_table_is_compact() -> None:
    text = bgp_yaml_text(generate_bgp("two", 2))
    assert "  - name: ANL-R00-1024\n    nodecards: R00-M[0-1]-N[00-15]\n" in text
    assert "switches: X_R00-M[0-1] Y_R00-M[0-1] Z_R[00-01]-M[0-1]\n" in text
    assert max(len(line) for line in text.splitlines()) <= 100


# ---- the catalog ----------------------------------------------------------------------------


def test_catalog_shipped_machines(partlist: frozenset[str]) -> None:
    assert {"intrepid", "bgp-2rack"} <= set(list_shipped_machines())
    desc = load_description("intrepid")
    assert isinstance(desc, BGPDescription)
    assert desc.schedulable == partlist and desc.size == 40960
    assert load_description("bgp-2rack") == generate_bgp("bgp-2rack", 2)


def test_catalog_flat_specs() -> None:
    assert load_description("flat:256") == FlatDescription("flat:256", 256, 1)
    assert load_description("flat:128:8") == FlatDescription("flat:128", 128, 8)
    for bad in ("flat:", "flat:0", "flat:x", "flat:4:2:1", "flat:-3"):
        with pytest.raises(InputError, match="flat:N or flat:N:PPN"):
            load_description(bad)


def test_catalog_files(tmp_path: Path) -> None:
    desc = generate_bgp("m", 2)
    write_bgp_yaml(desc, tmp_path / "m.yml")
    write_bgp_xml(desc, tmp_path / "m.xml")
    assert load_description(str(tmp_path / "m.yml")) == desc
    assert load_description(str(tmp_path / "m.xml")) == desc
    with pytest.raises(InputError, match=r"missing\.yaml: no such file"):
        load_description(str(tmp_path / "missing.yaml"))


def test_catalog_unknown_spec_lists_what_it_accepts() -> None:
    with pytest.raises(InputError) as caught:
        load_description("mira")
    message = str(caught.value)
    assert (
        "'mira'" in message and "intrepid" in message and "flat:N" in message and ".yaml" in message
    )


def test_catalog_schedulable_override(tmp_path: Path) -> None:
    full = load_description("bgp-2rack", schedulable="all")
    assert isinstance(full, BGPDescription) and full.schedulable is None
    names = tmp_path / "list.txt"
    names.write_text("ANL-R00-1024\n\n# the other rack\nANL-R01-M0-512\n")
    chosen = load_description("bgp-2rack", schedulable=str(names))
    assert isinstance(chosen, BGPDescription)
    assert chosen.schedulable == frozenset({"ANL-R00-1024", "ANL-R01-M0-512"})

    names.write_text("ANL-R00-1024\nANL-R09-1024\n")
    with pytest.raises(InputError, match=r"list.txt:2: 'ANL-R09-1024' is not a block"):
        load_description("bgp-2rack", schedulable=str(names))
    with pytest.raises(InputError, match="no such file"):
        load_description("bgp-2rack", schedulable=str(tmp_path / "nope.txt"))
    with pytest.raises(InputError, match="flat"):
        load_description("flat:4", schedulable="all")


def test_catalog_intrepid_with_the_real_partition_list(partlist: frozenset[str]) -> None:
    desc = load_description("intrepid", schedulable=str(INTREPID_PARTLIST))
    assert isinstance(desc, BGPDescription) and desc.schedulable == partlist
