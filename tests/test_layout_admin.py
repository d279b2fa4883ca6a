"""The pieces of partadm --layout without daemons (tests/test_layout_live.py runs them live):
the system's layout store on real files, the queue limits a layout sets, the listing, --since,
and the dry run's replays of a hand-made accounting log whose waits are worked by hand."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.accounting import format_record
from cobaltlite.commands.layout import layout_lines, queue_limits
from cobaltlite.errors import InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.model import Machine
from cobaltlite.machine.runtime import build_machine
from cobaltlite.partitioning.layout import parse_layout
from cobaltlite.partitioning.whatif import replay_layouts, since_moment
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.queue_manager.routing import LayoutRouter, Placement, RoutingError
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.system.layout_store import FILE_NAME, LayoutKeeper, laid_out

LAYOUT = """\
machine_nodes: 8
common_pool: 2
tau_pf: 3
queues:
  - name: small
    nodes: 2
    jobs: [{nodes: [1, 2], time: [0, 3600]}]
  - name: big
    nodes: 4
    priority: 2
    jobs: [{nodes: [3, 4], time: [600, 86400]}, {nodes: [5, 6]}]
"""


def machine(nodes: int = 8) -> Machine:
    return build_machine(load_description(f"flat:{nodes}"))


def test_the_store_activates_only_what_it_wrote_and_restores_it(tmp_path: Path) -> None:
    keeper = LayoutKeeper(machine(), tmp_path)
    assert keeper.text is None and keeper.wire is None
    partitions = keeper.change(LAYOUT)
    assert partitions is not None
    assert (tmp_path / FILE_NAME).read_text() == LAYOUT
    assert os.stat(tmp_path / FILE_NAME).st_mode & 0o777 == 0o600
    assert keeper.wire is not None and keeper.wire == partitions.to_wire()
    assert keeper.wire["own"] == {"small": "0-1", "big": "2-5"}
    assert keeper.wire["pool"] == "6-7" and keeper.wire["tau_pf"] == 3.0

    # Refused: nothing written, the active layout unchanged.
    with pytest.raises(InputError, match="queue layout: partitions and pool hold 10 nodes; "
                                         "the machine has 8"):
        keeper.change(LAYOUT.replace("nodes: 4\n", "nodes: 6\n"))
    assert (tmp_path / FILE_NAME).read_text() == LAYOUT and keeper.text == LAYOUT

    # Unwritable: OSError, the active layout unchanged.
    (tmp_path / (FILE_NAME + ".tmp")).mkdir()
    with pytest.raises(OSError):
        keeper.change(LAYOUT.replace("tau_pf: 3", "tau_pf: 4"))
    assert keeper.text == LAYOUT and keeper.wire == partitions.to_wire()

    assert LayoutKeeper(machine(), tmp_path).wire == partitions.to_wire()
    # Blank text removes the layout, on disk too.
    assert LayoutKeeper(machine(), tmp_path).change("\n") is None
    assert not (tmp_path / FILE_NAME).exists()
    assert LayoutKeeper(machine(), tmp_path).text is None
    (tmp_path / FILE_NAME).write_text(LAYOUT)
    # A machine the saved layout no longer fits starts without one, the file kept.
    assert LayoutKeeper(machine(6), tmp_path).text is None
    assert (tmp_path / FILE_NAME).read_text() == LAYOUT


@pytest.mark.parametrize(("text", "message"), [
    (LAYOUT.replace("machine_nodes: 8", "machine_nodes: 16"),
     "f.yaml: machine_nodes is 16; flat:8 has 8 nodes"),
    (LAYOUT.replace("[{nodes: [3, 4], time", "[{nodes: [2, 4], time"),
     "f.yaml: queues 'small' and 'big' both take some jobs"),
    (LAYOUT.replace("    nodes: 2\n", "    nodes: 0\n"),
     "f.yaml: queues[0] (small): nodes: 0: give a whole number of 1 or more"),
    (LAYOUT.replace("tau_pf: 3", "tau_pf: [3"), 'f.yaml: not YAML: while parsing a flow '
     'sequence\n  in "<unicode string>", line 3, column 9'),
    (LAYOUT.replace("priority: 2", "priority: high"),
     "f.yaml: queues[1] (big): priority 'high': give a number above 0"),
])
def test_a_bad_layout_names_the_file_and_the_key(text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        laid_out(text, "f.yaml", machine())


def test_a_layout_gives_its_queues_the_bounding_box_of_their_classes_as_limits() -> None:
    layout, _ = parse_layout(LAYOUT, "f.yaml")
    small, big = layout.queues
    assert queue_limits(small) == {"minnodes": None, "maxnodes": "2", "mintime": None,
                                   "maxtime": "01:00:00"}
    # big takes 3-4 nodes for 10 min to a day, and 5-6 nodes for any time: 3-6, any time.
    assert queue_limits(big) == {"minnodes": "3", "maxnodes": "6", "mintime": None,
                                 "maxtime": None}


def test_the_listing_shows_partitions_starvation_times_pool_and_the_other_queues() -> None:
    # Golden: small follows the layout's starvation time (12 h), big sets its own (30 min).
    text = LAYOUT.replace("tau_pf: 3\n", "tau_pf: 3\nstarvation_time: 43200\n").replace(
        "    priority: 2\n", "    priority: 2\n    starvation_time: 1800\n")
    layout, partitions = laid_out(text, "f.yaml", machine())
    golden = Path(__file__).parent / "golden" / "layout-show.txt"
    assert "\n".join(layout_lines(layout, partitions, 8)) + "\n" == golden.read_text()


def test_since_takes_a_span_back_from_now_or_a_date() -> None:
    assert since_moment("30d", now=100 * 86400) == 70 * 86400
    assert since_moment("12h", now=86400) == 43200
    assert since_moment("2026-10-01") == since_moment("2026-10-01T00:00:00Z")
    with pytest.raises(ValueError, match="--since 'lately': give a span back from now"):
        since_moment("lately")


T0 = 1_790_000_000


def accounting_log(path: Path) -> Path:
    """Three 1-node jobs of 100 s submitted together and a 3-node one asking 10 minutes, as
    the queue manager writes them (Q and E records)."""
    lines = []
    for jobid, nodes, walltime in ((1, 1, "00:01:40"), (2, 1, "00:01:40"), (3, 1, "00:01:40"),
                                   (4, 3, "00:10:00")):
        fields = {"queue": "default", "user": "alice", "qtime": T0,
                  "Resource_List": {"nodect": nodes, "walltime": walltime}}
        lines.append(format_record(T0, "Q", jobid, fields))
        lines.append(format_record(T0 + 100, "E", jobid, {
            **fields, "start": T0, "end": T0 + 100, "Exit_status": 0}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_dry_run_replays_the_log_under_each_layout(tmp_path: Path) -> None:
    log = accounting_log(tmp_path / "accounting.log")
    current = tmp_path / "current.yaml"
    current.write_text(LAYOUT.replace("common_pool: 2", "common_pool: 0"))
    new = tmp_path / "new.yaml"
    new.write_text(LAYOUT.replace("common_pool: 2", "common_pool: 0")
                   .replace("    nodes: 2\n", "    nodes: 3\n")
                   .replace("nodes: [1, 2], time", "nodes: [1, 1], time")
                   .replace("{nodes: [3, 4], time", "{nodes: [2, 4], time"))
    runs = replay_layouts(log, "flat:8", builtin_policy("fcfs"), Backfill.EASY, T0 - 1,
                          [("none", None), ("current", current), ("new", new)])
    waits = {run.label: {q: (f["jobs"], f["mean_wait"], f["max_wait"])
                         for q, f in run.metrics["by_queue"]["queues"].items()}
             for run in runs}
    # No layout: all four start at once. small's 2 nodes run the three 1-node jobs two at a
    # time; with 3 nodes, all at once.
    assert waits == {"none": {"default": (4, 0.0, 0.0)},
                     "current": {"small": (3, 100 / 3, 100.0), "big": (1, 0.0, 0.0)},
                     "new": {"small": (3, 0.0, 0.0), "big": (1, 0.0, 0.0)}}
    assert all(not run.skipped for run in runs)
    nodes = {run.label: {q: f["partition_nodes"] for q, f in run.metrics["by_queue"]["queues"]
                         .items()} for run in runs}
    assert nodes == {"none": {"default": 8}, "current": {"small": 2, "big": 4},
                     "new": {"small": 3, "big": 4}}


def test_a_dry_run_says_which_layout_cannot_take_a_job(tmp_path: Path) -> None:
    log = accounting_log(tmp_path / "accounting.log")
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text(LAYOUT.replace("[{nodes: [3, 4], time: [600, 86400]}, {nodes: [5, 6]}]",
                                     "[{nodes: [5, 6]}]"))
    with pytest.raises(InputError, match="replay under the new configuration: job 4 "):
        replay_layouts(log, "flat:8", builtin_policy("fcfs"), Backfill.EASY, T0 - 1,
                       [("new", narrow)])
    # A job larger than its partition (and no pool) never runs: the run says which and why.
    small_big = tmp_path / "small-big.yaml"
    small_big.write_text(LAYOUT.replace("common_pool: 2", "common_pool: 0")
                         .replace("nodes: 4\n", "nodes: 2\n"))
    run, = replay_layouts(log, "flat:8", builtin_policy("fcfs"), Backfill.EASY, T0 - 1,
                          [("new", small_big)])
    assert run.metrics["jobs"] == 3
    assert run.skipped == ("job 4: 3 nodes fit neither queue big's partition (2 nodes) nor the "
                           "common pool (0)",)
    with pytest.raises(InputError, match="no job submitted since"):
        replay_layouts(log, "flat:8", builtin_policy("fcfs"), Backfill.EASY, T0 + 1,
                       [("new", narrow)])


CHANGES = [LAYOUT, LAYOUT.replace("tau_pf: 3", "tau_pf: 5"),
           LAYOUT.replace("common_pool: 2", "common_pool: 0"), "", "  \n",
           LAYOUT.replace("nodes: 4\n", "nodes: 9\n"), "queues: [", "machine_nodes: 8\n"]


@given(st.lists(st.sampled_from(CHANGES), max_size=8))
@settings(max_examples=40, deadline=None)
def test_a_restart_always_finds_the_layout_that_is_active(changes: list[str]) -> None:
    """Whatever sequence of layouts, removals and refused files an admin sends, the layout a
    restarted system reads back is the one that was active, and a refused one changes nothing."""
    with tempfile.TemporaryDirectory() as directory:
        keeper = LayoutKeeper(machine(), Path(directory))
        for text in changes:
            before = keeper.text
            try:
                keeper.change(text)
            except InputError:
                assert keeper.text == before
            else:
                assert keeper.text == (text if text.strip() else None)
            assert LayoutKeeper(machine(), Path(directory)).text == keeper.text


def test_the_router_routes_from_default_and_the_named_sources_never_from_its_own_queues() -> None:
    # D002-28, with the rule Qsim routes by (QueueLayout.queue_for).
    text = LAYOUT.replace("{nodes: [5, 6]}", "{nodes: [5, 6], queues: [batch, small]}")
    layouts = iter([text, text, None])
    router = LayoutRouter(lambda: next(layouts))
    assert router.layout() is router.layout()  # the same text is parsed once
    layout = parse_layout(text, "f.yaml")[0]
    assert layout.routing_sources == {"default", "batch"}  # small is the layout's own
    assert LayoutRouter(lambda: text).place("default", 2, 600) == Placement("small", "default")
    assert LayoutRouter(lambda: text).place("batch", 6, 10) == Placement("big", "batch")
    assert LayoutRouter(lambda: text).place("small", 6, 10) == Placement("small", "")
    assert LayoutRouter(lambda: text).place("other", 6, 10) == Placement("other", "")
    with pytest.raises(RoutingError, match=re.escape(
            "no queue of the queue layout takes a job of 6 nodes and 00:00:10 from queue "
            "'default'; the layout's queues take small: 1-2 nodes, 00:00:00-01:00:00; big: "
            "3-4 nodes, 00:10:00-24:00:00 or 5-6 nodes, any time from batch/small")):
        LayoutRouter(lambda: text).place("default", 6, 10)
    assert router.place("default", 6, 10) == Placement("default", "")  # no layout any more
    # A layout whose classes all name their source queues does not route default's jobs.
    sourced = LAYOUT.replace("time: [0, 3600]}", "time: [0, 3600], queues: [a]}").replace(
        "time: [600, 86400]}", "time: [600, 86400], queues: [a]}").replace(
        "{nodes: [5, 6]}", "{nodes: [5, 6], queues: [a]}")
    assert parse_layout(sourced, "f.yaml")[0].routing_sources == {"a"}


def test_the_router_routes_by_the_last_answer_while_the_system_cannot_be_reached() -> None:
    down = ConnectionRefusedError("system down")
    # Each routing asks twice before it gives up (a broken connection fails one call).
    answers: list[str | Exception] = [down, down, down, LAYOUT, down, down]

    def active_layout() -> str | None:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    router = LayoutRouter(active_layout)
    with pytest.raises(ConnectionRefusedError):  # no answer yet: nothing to route by
        router.place("default", 1, 60)
    assert router.place("default", 1, 60) == Placement("small", "default")  # the second try
    assert router.place("default", 4, 3600) == Placement("big", "default")  # the last answer
    assert answers == []
