"""Seed 002 §III's starvation rule (D002-13): while a queue has a job the pool could hold that has
waited longer than its queue's starvation time, the common pool serves only such starving
queues. A hand-worked schedule, the layout key's errors, and the rule in qsim's per-queue
figures (summary.json and the table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_queue_partitions import _qsim

from cobaltlite.errors import InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.partitioning.layout import layout_yaml, parse_layout
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

LAYOUT = """\
machine_nodes: 8
common_pool: 2
tau_pf: 0.5
starvation_time: 100
queues:
  - name: a
    nodes: 2
    jobs: [{nodes: [1, 8], queues: ["1"]}]
  - name: b
    nodes: 4
    starvation_time: 1000
    jobs: [{nodes: [1, 8], queues: ["2"]}]
"""
"""flat:8: a on nodes 0-1 (its jobs starve after 100 s), b on 2-5 (after 1000 s), the pool 6-7."""

JOBS = [  # jobid, submit, run = requested, nodes, trace queue
    (1, 0, 1000, 2, "1"),    # a's partition busy until 1000
    (2, 0, 1000, 4, "2"),    # b's partition busy until 1000
    (3, 0, 200, 2, "2"),     # b: priority factor 150 / 200 = 0.75 > τ_pf at 150
    (4, 10, 1000, 2, "1"),   # a: factor 140 / 1000 = 0.14 at 150, but waiting 140 s > 100 s
    (5, 150, 1000, 1, "2"),  # an arrival: the pass at 150
]


def _starts(layout_text: str) -> dict[int, tuple[float, str]]:
    layout, _ = parse_layout(layout_text, "layout.yaml")
    trace = [TraceJob(j, s, r, r, n, queue=q) for j, s, r, n, q in JOBS]
    result = Qsim(trace, build_machine(load_description("flat:8")), builtin_policy("fcfs"),
                  Backfill.EASY, queue_layout=layout).run()
    return {o.jobid: (o.start_time, o.location) for o in result.outcomes}


def test_a_starving_queue_takes_the_pool_before_another_queues_urgent_job() -> None:
    """At 150 job 3 (b, factor 0.75, ranked first) and job 4 (a, starving since 110) could both
    use the free pool: the rule gives it to job 4; job 3 waits for b's partition (1000)."""
    starts = _starts(LAYOUT)
    assert starts[4] == (150, "6-7")
    assert starts[3] == (1000, "2-3")
    assert starts[5] == (1000, "4")
    # Without the rule (a starving only after 10,000 s) job 3's factor wins the pool, and job 4
    # waits for its partition.
    lenient = _starts(LAYOUT.replace("starvation_time: 100\n", "starvation_time: 10000\n"))
    assert lenient[3] == (150, "6-7")
    assert lenient[4] == (1000, "0-1")


BAD = [
    ("starvation_time: 100\n", "starvation_time: -5\n", "layout.yaml: starvation_time: -5: "
     "give a number of seconds, 0 or more"),
    ("starvation_time: 100\n", "starvation_time: a day\n", "layout.yaml: starvation_time: "
     "'a day': give a number of seconds, 0 or more"),
    ("    starvation_time: 1000\n", "    starvation_time: true\n",
     "layout.yaml: queues[1] (b): starvation_time: True: give a number of seconds, 0 or more"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD)
def test_a_bad_starvation_time_names_the_file_and_key(old: str, new: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_layout(LAYOUT.replace(old, new), "layout.yaml")
    assert str(caught.value) == message


def test_the_starvation_times_survive_writing_the_layout_back() -> None:
    layout, nodes = parse_layout(LAYOUT, "layout.yaml")
    again, _ = parse_layout(layout_yaml(layout, nodes), "again.yaml")
    assert again == layout
    assert [again.starvation(q) for q in again.queues] == [100, 1000]
    default, _ = parse_layout(LAYOUT.replace("starvation_time: 100\n", ""), "d.yaml")
    assert "starvation_time: 86400" not in layout_yaml(default, nodes)
    assert default.starvation(default.queues[0]) == 86400


def test_qsim_reports_the_rule_per_queue_and_for_the_pool(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("".join(f"{j} {s} 0 {r} {n} -1 -1 {n} {r} -1 1 1 1 -1 {q} -1 -1 -1\n"
                             for j, s, r, n, q in JOBS))
    layout = tmp_path / "layout.yaml"
    layout.write_text(LAYOUT)
    done = _qsim("--trace", str(trace), "--machine", "flat:8", "--queue-layout", str(layout),
                 "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    by_queue = json.loads((tmp_path / "out" / "summary.json").read_text())["metrics"]["by_queue"]
    a, b = by_queue["queues"]["a"], by_queue["queues"]["b"]
    assert (a["starvation_time"], a["starving_jobs"], a["starvation_seconds"]) == (100, 1, 40)
    assert (b["starvation_time"], b["starving_jobs"]) == (1000, 0)
    assert by_queue["starvation_time"] is None  # the queues' differ
    # Job 4 starved over [110, 150): the pool was kept for queue a that long.
    assert by_queue["pool"]["starvation_rule_seconds"] == 40


def test_resizing_a_layout_keeps_its_starvation_times() -> None:
    """The configurators resize partitions (NLP's sizes, the hybrid carving's pool): the
    layout's and each queue's starvation time go with the layout they write."""
    from cobaltlite.partitioning.configure import sized

    layout, _ = parse_layout(LAYOUT, "layout.yaml")
    resized = sized(layout, [3, 3])
    assert [q.nodes for q in resized.queues] == [3, 3]
    assert resized.starvation_time == 100
    assert [resized.starvation(q) for q in resized.queues] == [100, 1000]
