"""Seed 002's hybrid pool carving (§III) and monthly reconfiguration in a replay (§IV-A), on
hand-made histories replayed by the real Qsim and scheduler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.errors import InputError
from cobaltlite.machine.partitions import node_range
from cobaltlite.partitioning.configure import ConfigureSettings
from cobaltlite.partitioning.hybrid import carve_pool
from cobaltlite.partitioning.layout import JobClass, PartitionedQueue, QueueLayout
from cobaltlite.partitioning.monthly import (
    month_starts,
    plan_months,
    previous_month,
    replay_monthly,
)
from cobaltlite.qsim.cli import main
from cobaltlite.traces.model import TraceJob

ANY = frozenset[str]()
DAY = 86400
JAN, FEB, MAR, APR = 0, 31 * DAY, 59 * DAY, 90 * DAY
"""1970's month starts: an SWF file with UnixStartTime 0 submits in them."""


def two_queues(a: int, b: int, pool: int = 0) -> QueueLayout:
    return QueueLayout((PartitionedQueue("a", (JobClass(frozenset({"a"}), 1, 16),), a),
                        PartitionedQueue("b", (JobClass(frozenset({"b"}), 1, 16),), b)), pool)


def steady(first: int, count: int, gap: int, nodes: int, run: int, queue: str,
           start: int = 0) -> list[TraceJob]:
    return [TraceJob(first + i, start + i * gap, run, run, nodes, queue=queue)
            for i in range(count)]


def test_a_lightly_loaded_layout_gives_its_spare_nodes_to_the_pool() -> None:
    # Each queue runs one 2-node job at a time on its 8 nodes: 6 nodes of each are spare.
    jobs = steady(1, 20, 1000, 2, 500, "a") + steady(100, 20, 1000, 2, 500, "b")
    carved = carve_pool(two_queues(8, 8), jobs, 16, chunk=2, degradation=0.3)
    assert carved.layout.pool == 12
    assert [q.nodes for q in carved.layout.queues] == [2, 2]
    assert carved.score.mean_wait == carved.start.mean_wait == 0
    assert carved.layout.tau_pf == 0.5  # half the median priority (1)


def test_a_queue_whose_wait_would_rise_past_the_limit_is_frozen() -> None:
    # Queue a is saturated on its 4 nodes (a 4-node hour arrives every hour, and 1-node jobs
    # between); b is idle. Shrinking a raises its wait beyond 0 % degradation: a stays at 4.
    jobs = steady(1, 24, 3600, 4, 3500, "a") + steady(200, 24, 3600, 1, 60, "a", start=1800)
    jobs += steady(500, 5, 7200, 1, 60, "b")
    carved = carve_pool(two_queues(4, 12), jobs, 16, chunk=2, degradation=0.0)
    assert carved.layout.queue("a").nodes == 4
    assert carved.layout.queue("b").nodes == 2  # b shrank to its largest job, 1, in chunks of 2
    assert carved.layout.pool == 10
    assert carved.score.queues["a"].mean_wait <= max(carved.start.queues["a"].mean_wait, 60)


def test_carving_refuses_a_layout_that_already_has_a_pool() -> None:
    with pytest.raises(InputError, match="already has a common pool of 4 nodes"):
        carve_pool(two_queues(6, 6, pool=4), steady(1, 2, 10, 1, 10, "a"), 16, chunk=2,
                   degradation=0.3)


def test_months_are_cut_at_calendar_boundaries() -> None:
    assert month_starts(JAN + 5 * DAY, MAR + DAY) == [JAN + 5 * DAY, FEB, MAR, MAR + DAY]
    assert previous_month(FEB + 3 * DAY) == JAN
    assert previous_month(JAN) == -31 * DAY  # December 1969
    with pytest.raises(InputError, match="is not after --start"):
        month_starts(FEB, FEB)


def shifting_load() -> list[TraceJob]:
    """January and February busy in queue a, March busy in queue b (1-node jobs each hour,
    4-node jobs of the busy queue twice an hour)."""
    jobs = []
    for k, (first, busy) in enumerate(((JAN, "a"), (FEB, "a"), (MAR, "b"))):
        quiet = "b" if busy == "a" else "a"
        jobs += steady(10000 * k + 1, 600, 1800, 4, 1700, busy, start=first)
        jobs += steady(10000 * k + 5000, 300, 3600, 1, 600, quiet, start=first)
    return jobs


def test_each_month_is_configured_from_the_month_before() -> None:
    plan = plan_months(shifting_load(), two_queues(8, 8), 16, FEB, APR, "pp",
                       ConfigureSettings())
    assert plan.bounds == [FEB, MAR, APR]
    feb, mar = plan.layouts
    assert feb is not None and mar is not None
    # February from January's log (a busy), March from February's (a busy still): proportional.
    assert feb.queue("a").nodes > feb.queue("b").nodes
    static = plan_months(shifting_load(), two_queues(8, 8), 16, FEB, APR, "static",
                         ConfigureSettings())
    assert static.layouts == [feb, feb]
    assert plan_months(shifting_load(), two_queues(8, 8), 16, FEB, APR, "whole",
                       ConfigureSettings()).layouts == [None, None]


def test_the_layout_switches_at_the_month_boundary() -> None:
    # Hand-made plan: February gives a 12 nodes, March gives b 12; every job runs inside its
    # queue's partition of the month it started in, and waiting jobs follow the switch.
    start = two_queues(8, 8)
    jobs = shifting_load()
    from cobaltlite.partitioning.monthly import MonthPlan

    plan = MonthPlan([FEB, MAR, APR], [two_queues(12, 4), two_queues(4, 12)])
    result = replay_monthly(jobs, start, plan, 16)
    assert not result.skipped
    by_id = {j.jobid: j for j in jobs}
    for o in result.outcomes:
        layout = plan.layouts[0 if o.start_time < MAR else 1]
        assert layout is not None
        first = 0 if by_id[o.jobid].queue == "a" else layout.queue("a").nodes
        own = node_range(first, layout.queue(by_id[o.jobid].queue).nodes)
        used = set()
        for part in o.location.split(","):
            low, _, high = part.partition("-")
            used |= {str(n) for n in range(int(low), int(high or low) + 1)}
        assert used <= own, (o.jobid, o.location, o.start_time)
    months = result.report["months"]
    assert [m["month"] for m in months] == ["1970-02", "1970-03"]
    assert sum(m["jobs"] for m in months) == len(result.outcomes)
    assert set(months[0]["queues"]) == {"a", "b"}
    assert months[1]["layout"] == {"pool": 0, "tau_pf": None, "queues": {"a": 4, "b": 12}}


def _swf(path: Path, jobs: list[TraceJob]) -> Path:
    lines = ["; UnixStartTime: 0"]
    for j in jobs:
        lines.append(f"{j.jobid} {j.submit_time} 0 {j.run_time} {j.nodes} -1 -1 {j.nodes} "
                     f"{j.requested_time} -1 1 1 1 -1 {1 if j.queue == 'a' else 2} -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


START_YAML = """\
machine_nodes: 16
queues:
  - {name: a, nodes: 8, jobs: [{nodes: [1, 16], queues: ["1"]}]}
  - {name: b, nodes: 8, jobs: [{nodes: [1, 16], queues: ["2"]}]}
"""


def test_qsim_reconfigure_monthly_reports_per_month_and_queue(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _swf(tmp_path / "t.swf", shifting_load())
    (tmp_path / "start.yaml").write_text(START_YAML)
    out = tmp_path / "out"
    assert main(["--trace", str(trace), "--machine", "flat:16", "--queue-layout",
                 str(tmp_path / "start.yaml"), "--reconfigure", "monthly", "--method", "pp",
                 "--start", "1970-02-01", "--end", "1970-04-01", "--out", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [m["month"] for m in summary["months"]] == ["1970-02", "1970-03"]
    for m in summary["months"]:
        assert set(m["queues"]) == {"a", "b"}
        assert {"mean_wait", "max_wait", "mean_bounded_slowdown", "utilization"} <= set(m)
    assert sorted(p.name for p in (out / "layouts").iterdir()) == ["1970-02.yaml",
                                                                   "1970-03.yaml"]
    printed = capsys.readouterr().out
    assert "1970-03  b" in printed and "mean wait h" in printed


@pytest.mark.parametrize(("start_yaml", "extra", "message"), [
    (START_YAML, ["--start", "1970-01-01"],
     "no job submitted in 1969-12 (an empty month configures nothing"),
    (START_YAML, ["--method", "nlp", "--epochs", "2000"],
     "configuring 1970-02 from the jobs of 1970-01: the history is too short for 2000 epochs"),
    (START_YAML.replace("nodes: 8, jobs", "nodes: 9, jobs"), [],
     "partitions and pool hold 18 nodes; the machine has 16"),
    (START_YAML.replace("machine_nodes: 16", "machine_nodes: 20"), [],
     "machine_nodes 20, but --machine flat:16 has 16 nodes"),
    (START_YAML.replace('queues: ["2"]', 'queues: ["1", "2"]'), [],
     "queues 'a' and 'b' both take some jobs"),
])
def test_bad_reconfiguration_input_is_refused_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], start_yaml: str,
        extra: list[str], message: str) -> None:
    trace = _swf(tmp_path / "t.swf", shifting_load())
    (tmp_path / "start.yaml").write_text(start_yaml)
    out = tmp_path / "out"
    args = ["--trace", str(trace), "--machine", "flat:16", "--queue-layout",
            str(tmp_path / "start.yaml"), "--reconfigure", "monthly", "--method", "pp",
            "--start", "1970-02-01", "--end", "1970-04-01", "--out", str(out), "-q"]
    assert main(args + extra) == 1
    assert message in capsys.readouterr().err
    assert not (out / "summary.json").exists()


def test_configure_queues_hybrid_writes_a_pool(tmp_path: Path) -> None:
    jobs = steady(1, 60, 1000, 2, 500, "a") + steady(100, 60, 1000, 2, 500, "b")
    trace = _swf(tmp_path / "t.swf", jobs)
    (tmp_path / "start.yaml").write_text(START_YAML)
    out = tmp_path / "hybrid.yaml"
    assert main(["configure-queues", "--trace", str(trace), "--machine", "flat:16", "--layout",
                 str(tmp_path / "start.yaml"), "--method", "hybrid", "--samples", "10",
                 "--chunk", "2", "--out", str(out)]) == 0
    from cobaltlite.partitioning.layout import read_layout

    layout, _ = read_layout(out)
    assert layout.pool > 0 and layout.tau_pf is not None
    assert layout.nodes == 16


def test_lower_bounds_beyond_the_machine_fall_back_to_the_widest_jobs() -> None:
    from cobaltlite.partitioning.nlp import fit_bounds

    # Eq. 4 asks 60 + 60 of 100 nodes; the widest jobs need 20 and 40: those are the bounds,
    # leaving 40 nodes for the samples to share.
    assert fit_bounds([60, 60], [20, 40], 100) == [20, 40]
    assert fit_bounds([30, 60], [20, 40], 100) == [30, 60]
    with pytest.raises(InputError, match="need 120 nodes; the machine has 100"):
        fit_bounds([60, 60], [60, 60], 100)


def test_a_partition_keeps_room_for_the_widest_job_its_class_admits() -> None:
    # January's jobs of queue b are 1 node wide, February's 8: b's class admits 8, and the 4 + 8
    # nodes the classes admit fit the machine, so February's b partition holds 8 (D002-24).
    layout = QueueLayout((PartitionedQueue("a", (JobClass(frozenset({"a"}), 1, 4),), 8),
                          PartitionedQueue("b", (JobClass(frozenset({"b"}), 1, 8),), 8)))
    jobs = steady(1, 600, 1800, 4, 1700, "a", start=JAN) + steady(1000, 30, 3600, 1, 60, "b",
                                                                  start=JAN)
    jobs += steady(2000, 30, 3600, 8, 600, "b", start=FEB)
    for method in ("pp", "dqr"):
        plan = plan_months(jobs, layout, 16, FEB, MAR, method, ConfigureSettings(samples=10))
        feb = plan.layouts[0]
        assert feb is not None and feb.queue("b").nodes >= 8
        assert not replay_monthly(jobs, layout, plan, 16).skipped


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 6), st.integers(60, 3000),
                          st.integers(0, 20000)), min_size=1, max_size=30),
       st.integers(6, 10), st.integers(1, 3))
def test_carving_keeps_the_machine_whole_and_every_largest_job_at_home(
        rows: list[tuple[str, int, int, int]], a_nodes: int, chunk: int) -> None:
    jobs = [TraceJob(i + 1, submit, run, run, nodes, queue=q)
            for i, (q, nodes, run, submit) in enumerate(rows)]
    carved = carve_pool(two_queues(a_nodes, 16 - a_nodes), jobs, 16, chunk=chunk,
                        degradation=0.3)
    assert carved.layout.nodes == 16
    assert carved.layout.pool % chunk == 0
    for q in carved.layout.queues:
        widest = max((j.nodes for j in jobs if q.holds(j)), default=1)
        assert q.nodes >= widest
    assert carved.score.mean_wait <= 1.3 * carved.start.mean_wait + 1e-9
