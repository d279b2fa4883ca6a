"""Seed 002's queue configurators on hand-made histories: proportional partitioning, the
split and merge rules of DQR, the NLP partitioner's constraints, and layout validation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cobaltlite.errors import InputError
from cobaltlite.partitioning.evaluate import PartitionEvaluator
from cobaltlite.partitioning.layout import (
    JobClass,
    PartitionedQueue,
    QueueLayout,
    layout_yaml,
    read_layout,
)
from cobaltlite.partitioning.nlp import epochs, nlp_sizes
from cobaltlite.partitioning.proportional import cpu_hours, proportional_sizes, whole_nodes
from cobaltlite.partitioning.reshape import (
    halves,
    may_merge,
    merged,
    split_by_cpu_hours,
    split_by_job_count,
    split_by_run_time,
)
from cobaltlite.traces.model import TraceJob

ANY = frozenset[str]()


def job(jobid: int, nodes: int, run: int, requested: int | None = None, submit: int = 0,
        queue: str = "q") -> TraceJob:
    return TraceJob(jobid, submit, run, requested or run, nodes, queue=queue)


def queue(name: str, nodes: int, *classes: JobClass, parent: str | None = None
          ) -> PartitionedQueue:
    return PartitionedQueue(name, classes or (JobClass(ANY, 1, 1000),), nodes, parent=parent)


def test_proportional_partitioning_shares_the_machine_by_cpu_hours() -> None:
    # CPU hours 10, 30 and 60 (eq. 5): eq. 7 gives 10, 30 and 60 of 100 nodes.
    history = {"a": [job(1, 10, 3600)], "b": [job(2, 30, 3600)], "c": [job(3, 20, 3 * 3600)]}
    hours = [cpu_hours(jobs) for jobs in history.values()]
    assert hours == [10.0, 30.0, 60.0]
    assert proportional_sizes(hours, 100, [1, 1, 1]) == [10, 30, 60]
    # A queue whose largest job needs 20 nodes gets 20; the others give up what it took.
    assert proportional_sizes(hours, 100, [20, 1, 1]) == [20, 27, 53]


@given(st.lists(st.floats(0.01, 1000), min_size=1, max_size=8), st.integers(8, 500))
def test_whole_nodes_always_sum_to_the_machine_and_keep_the_bounds(shares: list[float],
                                                                  total: int) -> None:
    minimum = [1] * len(shares)
    if len(shares) > total:
        return
    whole = sum(shares)
    sizes = whole_nodes([s / whole * total for s in shares], total, minimum)
    assert sum(sizes) == total
    assert all(n >= 1 for n in sizes)


def test_lower_bounds_beyond_the_machine_are_refused() -> None:
    with pytest.raises(InputError, match="need 120 nodes; the machine has 100"):
        proportional_sizes([1.0, 1.0], 100, [60, 60])


HISTORY = [job(1, 1, 600, 1000), job(2, 2, 600, 3000), job(3, 4, 3600, 3600),
           job(4, 8, 3600, 7200)]
"""Four jobs in one queue with a two-hour limit: CPU hours 1/6, 1/3, 4 and 8."""


def test_split_by_run_time_cuts_at_half_the_queue_limit() -> None:
    q = queue("q", 16, JobClass(ANY, 1, 8, 0, 7200))
    low, high = split_by_run_time(q, HISTORY) or ([], [])
    assert [[j.jobid for j in HISTORY if any(c.holds(j) for c in part)]
            for part in (low, high)] == [[1, 2], [3, 4]]


def test_split_by_cpu_hours_fills_the_first_half_to_half_the_hours() -> None:
    # Sorted by size the CPU hours add up to 1/6, 1/2, 4.5 and 12.5: only the last job, the
    # largest, reaches half (6.25), so every job lands in the first half: no split.
    q = queue("q", 16, JobClass(ANY, 1, 8, 0, 7200))
    assert split_by_cpu_hours(q, HISTORY) is None
    heavy_small = [*HISTORY, job(5, 1, 20 * 3600)]  # 20 CPU hours at size 1
    low, high = split_by_cpu_hours(queue("q", 16, JobClass(ANY, 1, 8)), heavy_small) or ([], [])
    assert (low[0].min_nodes, low[0].max_nodes, high[0].min_nodes) == (1, 1, 2)


def test_split_by_job_count_halves_the_jobs_by_size() -> None:
    q = queue("q", 16, JobClass(ANY, 1, 8))
    low, high = split_by_job_count(q, HISTORY) or ([], [])
    assert (low[0].max_nodes, high[0].min_nodes) == (2, 3)


def test_split_halves_share_the_parent_nodes_by_cpu_hours() -> None:
    # By job count: sizes 1-2 (1/2 CPU hour) and 3-8 (12 CPU hours). Of 30 nodes the first
    # half's share, 1.2, is under its largest job: it gets 2 and the second the other 28.
    q = queue("q", 30, JobClass(ANY, 1, 8))
    pair = halves(q, HISTORY, split_by_job_count(q, HISTORY) or ([], []))
    assert pair is not None
    assert [(p.name, p.nodes, p.parent) for p in pair] == [("q.1", 2, "q"), ("q.2", 28, "q")]
    # Halves that cannot each hold their largest job are refused.
    assert halves(queue("q", 9, JobClass(ANY, 1, 8)), HISTORY,
                  split_by_job_count(q, HISTORY) or ([], [])) is None


def test_merge_needs_adjacent_ranges_and_refuses_siblings() -> None:
    small = queue("small", 10, JobClass(ANY, 1, 8))
    medium = queue("medium", 10, JobClass(ANY, 9, 32))  # adjacent sizes: 8 and 9 touch
    large = queue("large", 10, JobClass(ANY, 64, 128))  # a gap from 32 to 64
    assert may_merge(small, medium)
    assert not may_merge(medium, large)
    short = queue("q.1", 10, JobClass(ANY, 1, 8, 0, 3599), parent="q")
    long = queue("q.2", 10, JobClass(ANY, 1, 8, 3600, 7200), parent="q")
    assert not may_merge(short, long)
    both = merged(small, medium, QueueLayout((small, medium)))
    assert (both.nodes, both.size_range) == (20, (1, 32))


def test_split_halves_keep_the_parents_priority_and_starvation_a_merge_the_stricter() -> None:
    # D002-11: a half is its parent's queue for its jobs; a merged queue promises each job of
    # either queue what its own did: the shorter starvation time (the layout's where a queue
    # sets none), the higher priority.
    q = replace(queue("q", 30, JobClass(ANY, 1, 8)), priority=2.0, starvation_time=600.0)
    pair = halves(q, HISTORY, split_by_job_count(q, HISTORY) or ([], []))
    assert pair is not None
    assert [(p.priority, p.starvation_time) for p in pair] == [(2.0, 600.0), (2.0, 600.0)]
    plain = queue("plain", 10, JobClass(ANY, 9, 32))
    layout = QueueLayout((q, plain), starvation_time=3600.0)
    both = merged(q, plain, layout)
    assert (both.priority, both.starvation_time) == (2.0, 600.0)
    assert merged(replace(q, starvation_time=7200.0), plain, layout).starvation_time == 3600.0
    # Neither sets one: the merged queue keeps following the layout's.
    assert merged(replace(q, starvation_time=None), plain, layout).starvation_time is None


def test_layout_validation_names_what_is_wrong(tmp_path: Path) -> None:
    a = queue("a", 50, JobClass(ANY, 1, 8))
    b = queue("b", 60, JobClass(ANY, 8, 16))
    with pytest.raises(InputError, match="'a' and 'b' both take some jobs"):
        QueueLayout((a, b)).check(200)
    b = queue("b", 60, JobClass(ANY, 9, 16))
    with pytest.raises(InputError, match="hold 110 nodes; the machine has 100"):
        QueueLayout((a, b)).check(100)
    path = tmp_path / "layout.yaml"
    path.write_text(layout_yaml(QueueLayout((a, b), pool=10), 200))
    assert read_layout(path) == (QueueLayout((a, b), pool=10), 200)
    path.write_text(layout_yaml(QueueLayout((a, b)), 200).replace("nodes: 60", "nodes: 0"))
    with pytest.raises(InputError, match=r"layout.yaml: queues\[1\] \(b\): nodes: 0"):
        read_layout(path)


def test_a_history_too_short_for_its_epochs_is_refused() -> None:
    with pytest.raises(InputError, match="too short for 3 epochs: epoch 2 of 3 holds no job"):
        epochs([job(1, 1, 10, submit=0), job(2, 1, 10, submit=100)], 3)


def test_a_partition_replay_is_qsim_on_a_machine_of_that_size() -> None:
    # Three 4-node jobs on an 8-node partition: the third waits for the first to end.
    jobs = [job(i, 4, 100, submit=0) for i in (1, 2, 3)]
    layout = QueueLayout((queue("q", 8, JobClass(ANY, 1, 8)),))
    score = PartitionEvaluator(jobs, 8).evaluate(layout)
    assert score.mean_wait == pytest.approx(100 / 3)
    assert score.max_wait == 100
    assert score.utilization == pytest.approx(1200 / (8 * 200))


def test_nlp_partitioner_meets_its_constraints() -> None:
    # Two busy queues of small jobs over ten days, the second with three times the CPU hours.
    jobs = [job(i, 1 + i % 2, 3600, submit=i * 600, queue="a") for i in range(600)]
    jobs += [job(1000 + i, 2 + i % 3, 3 * 3600, submit=i * 600, queue="b") for i in range(600)]
    layout = QueueLayout((queue("a", 1, JobClass(frozenset({"a"}), 1, 64)),
                          queue("b", 1, JobClass(frozenset({"b"}), 1, 64))))
    result = nlp_sizes(layout, jobs, 64, samples=20, tolerance=0.2)
    assert sum(result.sizes) == 64
    assert all(n >= lo for n, lo in zip(result.sizes, result.lower_bounds, strict=True))
    hours_a, hours_b = (cpu_hours([j for j in jobs if j.queue == q]) for q in "ab")
    # Eq. 6 as decided: the queue with more CPU hours gets at least (1 - 0.2) of its
    # proportional ratio, up to one node of rounding.
    assert (result.sizes[1] + 1) / result.sizes[0] >= 0.8 * hours_b / hours_a


def _swf(path: Path, rows: list[tuple[int, int, int, int, int]]) -> Path:
    """Rows of (job, submit, run, processors, queue) as a minimal SWF file."""
    lines = ["; UnixStartTime: 0"]
    for jobid, submit, run, procs, q in rows:
        lines.append(f"{jobid} {submit} 0 {run} {procs} -1 -1 {procs} {run} -1 1 1 1 -1 {q} "
                     "-1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_configure_queues_writes_a_layout_a_replay_can_read(tmp_path: Path) -> None:
    from cobaltlite.qsim.cli import main

    trace = _swf(tmp_path / "history.swf",
                 [(i, i * 300, 3600, 1 + i % 4, i % 2) for i in range(1, 200)])
    out = tmp_path / "layout.yaml"
    assert main(["configure-queues", "--trace", str(trace), "--machine", "flat:32",
                 "--method", "pp", "--out", str(out)]) == 0
    layout, nodes = read_layout(out)
    assert nodes == 32 and sum(q.nodes for q in layout.queues) == 32
    assert sorted(q.name for q in layout.queues) == ["0", "1"]


def test_configure_queues_says_why_a_history_cannot_be_partitioned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cobaltlite.qsim.cli import main

    # Both queues hold a whole-machine job: no partitioned layout can run them.
    trace = _swf(tmp_path / "history.swf", [(1, 0, 60, 32, 0), (2, 10, 60, 32, 1)])
    assert main(["configure-queues", "--trace", str(trace), "--machine", "flat:32",
                 "--method", "pp"]) == 1
    assert "lower bounds need 64 nodes; the machine has 32" in capsys.readouterr().err


def test_configure_queues_names_a_job_no_queue_takes_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cobaltlite.qsim.cli import main

    # The classes take 1-8 nodes; job 3 asks for 20 (as the study's classes leave out the
    # jobs wider than half the machine, D002-22).
    trace = _swf(tmp_path / "history.swf", [(1, 0, 60, 4, 0), (2, 10, 60, 8, 0),
                                            (3, 20, 60, 20, 0)])
    classes = tmp_path / "classes.yaml"
    classes.write_text("machine_nodes: 32\ncommon_pool: 0\nqueues:\n"
                       "  - {name: small, nodes: 32, jobs: [{nodes: [1, 8]}]}\n")
    out = tmp_path / "layout.yaml"
    assert main(["configure-queues", "--trace", str(trace), "--machine", "flat:32",
                 "--layout", str(classes), "--method", "pp", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "job 3 (20 nodes, 60 s requested, queue '0') belongs to no queue of the layout" in err
    assert "give the layout a job class that takes it" in err
    assert not out.exists()
