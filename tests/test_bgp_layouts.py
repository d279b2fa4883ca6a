"""Queue layouts on Blue Gene/P (seed 002 §III; docs/hybrid-queues.md, D002-25 to D002-27):
partitions of whole midplanes or named blocks, each region's jobs on the blocks wholly inside
it that share no wire with another region's, one pass per region on the one machine.

bgp-2rack: midplanes R00-M0, R00-M1, R01-M0, R01-M1 (512 nodes each); blocks ANL-R00-1024,
ANL-R01-1024 (each rack's torus: the two share Z cables), ANL-R00-R01-2048 and the four
midplane blocks."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_paths import TRACES

from cobaltlite.accounting import format_record
from cobaltlite.errors import InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.machine.runtime import build_machine
from cobaltlite.partitioning.layout import parse_layout
from cobaltlite.partitioning.whatif import replay_layouts
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.fork import estimate_start_times
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

TWO_RACKS = """\
machine_nodes: 2048
common_pool: 512
tau_pf: 0.5
queues:
  - name: a
    nodes: 1024
    blocks: [ANL-R00-1024]
    jobs: [{nodes: [1, 1024], queues: [a]}]
  - name: b
    nodes: 512
    jobs: [{nodes: [1, 512], queues: [b]}]
"""
"""a owns rack R00 (its blocks: ANL-R00-1024 and its midplanes), b the first free midplane
(R01-M0), the pool the next (R01-M1)."""

R00 = frozenset({"ANL-R00-1024", "ANL-R00-M0-512", "ANL-R00-M1-512"})


def machine():  # type: ignore[no-untyped-def]
    return build_machine(load_description("bgp-2rack"))


@cache
def intrepid():  # type: ignore[no-untyped-def]
    return build_machine(load_description("intrepid"))


def laid_out(text: str) -> QueuePartitions:
    layout, _ = parse_layout(text, "layout.yaml")
    return QueuePartitions.from_layout(layout, machine(), "layout.yaml")


def job(jobid: int, submit: float, nodes: int, wall: float, queue: str) -> TraceJob:
    return TraceJob(jobid, submit, wall, wall, nodes, queue=queue)


# ---- the layout on the machine ---------------------------------------------------------------

def test_named_blocks_then_whole_midplanes_in_table_order() -> None:
    parts = laid_out(TWO_RACKS)
    assert parts.own == {"a": R00, "b": frozenset({"ANL-R01-M0-512"})}
    assert parts.pool == frozenset({"ANL-R01-M1-512"})
    assert (parts.nodes("a"), parts.nodes("b"), parts.nodes()) == (1024, 512, 512)
    assert (parts.largest("a"), parts.largest("b"), parts.largest()) == (1024, 512, 512)
    assert QueuePartitions.from_wire(parts.to_wire()) == parts
    listing = parts.listing(2048)
    assert [(q["name"], q["places"]) for q in listing["queues"]] == [("a", "R00-M0 R00-M1"),
                                                                      ("b", "R01-M0")]
    assert (listing["pool"], listing["rest"], listing["rest_blocks"]) == ("R01-M1", "", [])


def test_counted_queues_take_midplanes_from_the_first_and_the_rest_keeps_its_blocks() -> None:
    parts = laid_out(TWO_RACKS.replace("    blocks: [ANL-R00-1024]\n", "")
                     .replace("common_pool: 512", "common_pool: 0"))
    assert parts.own["a"] == R00 and parts.own["b"] == frozenset({"ANL-R01-M0-512"})
    assert parts.pool == frozenset()
    assert parts.listing(2048)["rest_blocks"] == ["ANL-R01-M1-512"]


def test_blocks_sharing_a_wire_across_regions_are_nobodys() -> None:
    # The two racks' torus blocks share Z cables: with a rack each, neither queue may use its
    # rack block (a job there would block the other's), so a keeps only its midplanes.
    text = TWO_RACKS.replace("common_pool: 512", "common_pool: 0").replace(
        "    nodes: 512\n    jobs", "    nodes: 1024\n    blocks: [ANL-R01-1024]\n    jobs")
    parts = laid_out(text.replace("[1, 1024], queues: [a]", "[1, 512], queues: [a]"))
    assert parts.own["a"] == R00 - {"ANL-R00-1024"}
    with pytest.raises(InputError, match=(
            r"layout.yaml: queue 'a' takes jobs of up to 1024 nodes but its largest block has "
            r"512 nodes; ANL-R00-1024 share a wire with another region's blocks")):
        laid_out(text)


@pytest.mark.parametrize(("edit", "message"), [
    (("nodes: 512\n", "nodes: 300\n"), "queue 'b': 300 nodes is not a whole number of "
     r"midplanes \(512 nodes each\) on bgp-2rack"),
    (("[ANL-R00-1024]", "[ANL-R00-1024, ANL-R01-M0-512]"), "queue 'a' gives 1024 nodes but "
     "its blocks hold 1536"),
    (("[ANL-R00-1024]", "[ANL-R09-1024]"), "queue 'a': 'ANL-R09-1024' is not a block"),
    (("common_pool: 512", "common_pool: 512\npool_blocks: [ANL-R00-M1-512]"),
     "node card R00-M1-N00 is in both queue 'a' and the common pool"),
    (("[1, 512], queues: [b]", "[1, 1024], queues: [b]"), "queue 'b' takes jobs of up to "
     "1024 nodes but its largest block has 512 nodes; give it larger blocks"),
    (("[ANL-R00-1024]", "[ANL-R00-1024, ANL-R00-1024]"), "block 'ANL-R00-1024' is given twice"),
    (("[ANL-R00-1024]", "ANL-R00-1024"), r"queues\[0\] \(a\): blocks: give a list of block"),
])
def test_bad_layouts_are_refused_naming_the_queue(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        laid_out(TWO_RACKS.replace(*edit, 1))


# ---- where jobs run --------------------------------------------------------------------------

def test_each_queue_runs_on_its_blocks_and_a_late_job_on_the_pools() -> None:
    # Worked by hand, FCFS + EASY, τ_pf 0.5:
    #   t=0  b1, b2 (512 nodes, 100 s, queue b): b1 takes R01-M0 (b's only block); b2 waits,
    #        although rack R00 (a's) is idle.
    #   t=10 a3 (1024 nodes, queue a) takes ANL-R00-1024.
    #   t=70 a4 (512 nodes, queue a) arrives: a is full until 110. At this pass b2 has waited 70
    #        of its 100 s (priority factor 0.7 > 0.5): it takes the pool's block, R01-M1.
    #   t=110 a3 ends: a4 starts on a midplane of R00.
    layout, _ = parse_layout(TWO_RACKS, "layout.yaml")
    jobs = [job(1, 0, 512, 100, "b"), job(2, 0, 512, 100, "b"), job(3, 10, 1024, 100, "a"),
            job(4, 70, 512, 100, "a")]
    result = Qsim(jobs, machine(), builtin_policy("fcfs"), Backfill.EASY,
                  queue_layout=layout).run()
    assert not result.skipped
    assert {o.jobid: (o.start_time, o.location) for o in result.outcomes} == {
        1: (0, "ANL-R01-M0-512"), 2: (70, "ANL-R01-M1-512"), 3: (10, "ANL-R00-1024"),
        4: (110, "ANL-R00-M0-512")}


class _EstimateAtLastArrival:
    """A Qsim pass hook: at the last submission's pass, the start estimates of the queued jobs
    by a fork with the replay's partitions (what qstat's Est_Start_Time asks live)."""

    def __init__(self, qsim: Qsim, last: float, backfill: Backfill) -> None:
        self.qsim, self.last, self.backfill = qsim, last, backfill
        self.estimates: dict[int, float] | None = None

    def before_pass(self, now: float) -> None:
        pass

    def after_pass(self, now: float) -> None:
        if now == self.last:
            self.estimates = estimate_start_times(
                machine(), now, self.qsim.running_jobs(), self.qsim.queued_jobs(),
                builtin_policy("fcfs"), self.backfill, partitions=self.qsim.partitions)


@settings(max_examples=40, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(0, 300), st.sampled_from([100, 512, 1024]),
                               st.integers(10, 400), st.sampled_from("ab")),
                     min_size=1, max_size=12),
       backfill=st.sampled_from([Backfill.EASY, Backfill.CONSERVATIVE, Backfill.NONE]),
       pool=st.booleans())
def test_no_node_card_is_held_twice_and_no_job_leaves_its_partition_but_for_the_pool(
        jobs: list[tuple[int, int, int, str]], backfill: Backfill, pool: bool) -> None:
    text = TWO_RACKS if pool else TWO_RACKS.replace("tau_pf: 0.5\n", "")
    layout, _ = parse_layout(text, "layout.yaml")
    parts = QueuePartitions.from_layout(layout, machine())
    trace = [job(i + 1, submit, min(nodes, 512) if queue == "b" else nodes, wall, queue)
             for i, (submit, nodes, wall, queue) in enumerate(jobs)]
    qsim = Qsim(trace, machine(), builtin_policy("fcfs"), backfill, queue_layout=layout)
    hook = _EstimateAtLastArrival(qsim, max(j.submit_time for j in trace), backfill)
    qsim.pass_hook = hook
    result = qsim.run()
    assert not result.skipped and len(result.outcomes) == len(trace)
    cards = {b.name: set(b.nodecards) for b in load_description("bgp-2rack").blocks}
    for o in result.outcomes:
        assert o.location in parts.own[o.queue] or (pool and o.location in parts.pool), o
    for i, x in enumerate(result.outcomes):
        for y in result.outcomes[i + 1:]:
            if x.start_time < y.end_time and y.start_time < x.end_time:
                assert not cards[x.location] & cards[y.location], (x, y)
    assert hook.estimates == {o.jobid: o.start_time for o in result.outcomes
                              if o.start_time > hook.last}


# ---- qsim on the Intrepid slice -------------------------------------------------------------

INTREPID = """\
machine_nodes: 40960
common_pool: 2048
tau_pf: 0.5
queues:
  - name: large
    nodes: 32768
    jobs: [{nodes: [4097, 32768]}]
  - name: small
    nodes: 6144
    jobs: [{nodes: [1, 4096]}]
"""


def test_qsim_replays_the_intrepid_slice_under_a_layout_with_per_queue_figures(
        tmp_path: Path) -> None:
    layout = tmp_path / "layout.yaml"
    layout.write_text(INTREPID)
    ran = subprocess.run(
        [sys.executable, "-m", "cobaltlite.qsim.cli", "--quiet", "--trace",
         str(TRACES / "intrepid-2009-first3000.6col.txt.gz"), "--machine", "intrepid",
         "--queue-layout", str(layout), "--end", "2009-01-12", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    by_queue = summary["metrics"]["by_queue"]
    assert by_queue["queues"]["large"]["partition_nodes"] == 32768
    assert by_queue["queues"]["small"]["partition_nodes"] == 6144
    assert by_queue["pool"]["nodes"] == 2048
    assert sum(q["jobs"] for q in by_queue["queues"].values()) == summary["metrics"]["jobs"] > 0
    assert by_queue["queues"]["small"]["jobs_on_pool"] > 0
    # R00-R37 are large's, R40-R45 small's, R46-R47 the pool's.
    parts = QueuePartitions.from_layout(parse_layout(INTREPID, "l")[0], intrepid())
    assert parts.listing(40960)["queues"][1]["places"].split() == [
        f"R4{r}-M{m}" for r in range(6) for m in (0, 1)]
    # ANL-R44-R47-4096 spans small and the pool, so it is nobody's and its cables are free
    assert "ANL-R40-R43-4096" in parts.own["small"] and parts.largest() == 2048


@pytest.mark.parametrize(("command", "options"), [
    (["configure-queues"], ["--out", "september.yaml"]),
    ([], ["--queue-layout", "layout.yaml", "--reconfigure", "monthly", "--method", "pp",
          "--start", "2009-01-05", "--end", "2009-01-20"])])
def test_the_configurators_refuse_a_blue_gene_naming_what_to_do_instead(
        tmp_path: Path, command: list[str], options: list[str]) -> None:
    (tmp_path / "layout.yaml").write_text(INTREPID)
    ran = subprocess.run(
        [sys.executable, "-m", "cobaltlite.qsim.cli", *command, "--trace",
         str(TRACES / "intrepid-2009-first3000.6col.txt.gz"), "--machine", "intrepid",
         *options], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode != 0
    assert ("--machine intrepid: the configurators size partitions for flat clusters (flat:N) "
            "only; on Blue Gene/P write the layout yourself") in ran.stderr
    assert not (tmp_path / "september.yaml").exists()


def test_a_dry_run_on_a_blue_gene_replays_the_log_without_and_with_a_layout(
        tmp_path: Path) -> None:
    """partadm --layout FILE --dry-run's replays: three jobs of 512 nodes and one of 1024,
    submitted together, each running 100 s; without a layout the 512-node jobs take three
    midplanes and the 1024-node one waits 100 s for a rack, under the layout b's midplane runs
    its three jobs in turn while a's rack runs the wide one at once."""
    t0 = 1_790_000_000
    lines = []
    for jobid, nodes in ((1, 512), (2, 512), (3, 512), (4, 1024)):
        fields = {"queue": "default", "user": "alice", "qtime": t0,
                  "Resource_List": {"nodect": nodes, "walltime": "00:01:40"}}
        lines.append(format_record(t0, "Q", jobid, fields))
        lines.append(format_record(t0 + 100, "E", jobid, {
            **fields, "start": t0, "end": t0 + 100, "Exit_status": 0}))
    log = tmp_path / "accounting.log"
    log.write_text("\n".join(lines) + "\n")
    new = tmp_path / "new.yaml"
    new.write_text(TWO_RACKS.replace("common_pool: 512\ntau_pf: 0.5", "common_pool: 0")
                   .replace(", queues: [a]", "").replace("[1, 1024]", "[513, 1024]")
                   .replace(", queues: [b]", ""))
    runs = replay_layouts(log, "bgp-2rack", builtin_policy("fcfs"), Backfill.EASY, t0 - 1,
                          [("none", None), ("new", new)])
    figures = {run.label: {q: (f["jobs"], f["partition_nodes"], f["max_wait"])
                           for q, f in run.metrics["by_queue"]["queues"].items()}
               for run in runs}
    assert figures == {"none": {"default": (4, 2048, 100.0)},
                       "new": {"a": (1, 1024, 0.0), "b": (3, 512, 200.0)}}


def test_named_blocks_smaller_than_a_midplane_take_it_from_the_counted_queues() -> None:
    # Intrepid: x and z name 64-node blocks of R00-M0 and R00-M1; y's 79 midplanes cannot be
    # found among the 78 left whole.
    text = """\
machine_nodes: 40960
queues:
  - {name: x, nodes: 64, blocks: [ANL-R00-M0-N00-64], jobs: [{nodes: [1, 64]}]}
  - {name: y, nodes: 40448, jobs: [{nodes: [65, 512]}]}
  - {name: z, nodes: 64, blocks: [ANL-R00-M1-N00-64], jobs: [{nodes: [513, 600]}]}
"""
    layout, _ = parse_layout(text, "layout.yaml")
    with pytest.raises(InputError, match=r"layout.yaml: queue 'y': 40448 nodes of whole "
                       r"midplanes wanted, 39936 left on intrepid \(the named blocks hold "
                       r"parts of the others\)"):
        QueuePartitions.from_layout(layout, intrepid(), "layout.yaml")
    # With room for y, x's partition is 64 nodes of R00-M0 holding no schedulable block.
    fits = text.replace("40448", "39936")
    layout, _ = parse_layout(fits, "layout.yaml")
    with pytest.raises(InputError, match=r"queue 'x' takes jobs of up to 64 nodes but its "
                       r"partition \(R00-M0 \(2 of 16 node cards\)\) holds no schedulable block"):
        QueuePartitions.from_layout(layout, intrepid(), "layout.yaml")


def test_qsim_names_the_layout_file_a_blue_gene_cannot_hold_and_writes_nothing(
        tmp_path: Path) -> None:
    # small's R40-R43 and the pool's R44-R47 are cabled together: neither 4096 block is usable.
    layout = tmp_path / "layout.yaml"
    layout.write_text(INTREPID.replace("common_pool: 2048", "common_pool: 4096")
                      .replace("nodes: 6144", "nodes: 4096"))
    ran = subprocess.run(
        [sys.executable, "-m", "cobaltlite.qsim.cli", "--quiet", "--trace",
         str(TRACES / "intrepid-2009-first3000.6col.txt.gz"), "--machine", "intrepid",
         "--queue-layout", str(layout), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert ran.returncode != 0
    assert (f"--queue-layout {layout}: queue 'small' takes jobs of up to 4096 nodes but its "
            "largest block has 2048 nodes; ANL-R40-R43-4096, MESH-R40-R43-4096 share a wire"
            ) in ran.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


@settings(max_examples=25, deadline=None)
@given(midplanes=st.lists(st.integers(1, 30), min_size=1, max_size=4), pool=st.integers(0, 10))
def test_no_two_regions_blocks_share_a_node_card_or_a_wire(midplanes: list[int],
                                                           pool: int) -> None:
    """Any layout of whole midplanes on Intrepid: each region's blocks lie inside it, and no
    block of one region shares a node card or a wire with a block of another (D002-26)."""
    if sum(midplanes) + pool > 80:
        return
    queues = "".join(f"  - {{name: q{i}, nodes: {n * 512}, jobs: [{{nodes: [{i + 1}, {i + 1}]}}]}}"
                     "\n" for i, n in enumerate(midplanes))
    layout, _ = parse_layout(f"machine_nodes: 40960\ncommon_pool: {pool * 512}\nqueues:\n"
                             + queues, "layout.yaml")
    parts = QueuePartitions.from_layout(layout, intrepid())
    assert parts.blocks is not None
    specs = {b.name: b for b in intrepid().description.blocks}
    region_of = {b: r for r, blocks in parts.blocks.blocks.items() for b in blocks}
    assert sum(parts.nodes(q) for q in parts.own) == sum(midplanes) * 512
    assert parts.nodes() == pool * 512
    used: dict[str, str] = {}  # node card or wire -> region
    for block, region in region_of.items():
        for part in (*specs[block].nodecards, *specs[block].wires):
            assert used.setdefault(part, region) == region, (block, part)
