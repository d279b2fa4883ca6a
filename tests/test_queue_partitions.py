"""Queue partitions and the common pool (seed 002 §III): where each job may run, EASY inside
each partition on its own, τ_pf for the pool, and a purely partitioned replay equal to one
replay per partition (cobaltlite/partitioning/evaluate.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_paths import TRACES

from cobaltlite.errors import InputError
from cobaltlite.faults.sources import FailureEvent
from cobaltlite.machine.bits import ranges_to_mask
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.partitions import QueuePartitions, node_mask
from cobaltlite.partitioning.evaluate import replay_partition
from cobaltlite.partitioning.layout import JobClass, PartitionedQueue, QueueLayout
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim, ReplayObserver, SimJob
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob
from cobaltlite.traces.swf import read_swf


def flat(nodes: int) -> FlatMachine:
    return FlatMachine(FlatDescription("m", nodes))


def queue(name: str, low: int, high: int, nodes: int, priority: float = 1.0,
          source: str | None = None) -> PartitionedQueue:
    sources = frozenset() if source is None else frozenset({source})
    return PartitionedQueue(name, (JobClass(sources, low, high),), nodes, priority)


def by_source(*queues: tuple[str, int, float], pool: int = 0,
              tau_pf: float | None = None) -> QueueLayout:
    """Queues taking the jobs of the trace queue of their own name, of any size."""
    return QueueLayout(tuple(queue(name, 1, 10_000, nodes, priority, source=name)
                             for name, nodes, priority in queues), pool, tau_pf)


def job(jobid: int, submit: int, nodes: int, wall: int, q: str, run: int | None = None
        ) -> TraceJob:
    return TraceJob(jobid, submit, wall if run is None else run, wall, nodes, queue=q)


def replay(jobs: list[TraceJob], nodes: int, layout: QueueLayout,
           backfill: Backfill = Backfill.EASY, **kw: object) -> dict[int, tuple[float, str]]:
    result = Qsim(jobs, flat(nodes), builtin_policy("fcfs"), backfill, queue_layout=layout,
                  **kw).run()  # type: ignore[arg-type]
    assert not result.skipped
    return {o.jobid: (o.start_time, o.location) for o in result.outcomes}


# ---- the layout on the machine ---------------------------------------------------------------

def test_partitions_are_contiguous_ranges_in_queue_order_then_the_pool() -> None:
    parts = QueuePartitions.from_layout(by_source(("a", 3, 1), ("b", 2, 2), pool=2, tau_pf=1),
                                        flat(10))
    assert parts.own == {"a": frozenset({"0", "1", "2"}), "b": frozenset({"3", "4"})}
    assert parts.pool == frozenset({"5", "6"})
    assert (parts.tau_pf, parts.priority) == (1.0, {"a": 1.0, "b": 2.0})
    assert QueuePartitions.from_wire(parts.to_wire()) == parts


def test_a_layout_larger_than_the_machine_is_refused() -> None:
    with pytest.raises(InputError, match="hold 9 nodes; the machine has 8"):
        QueuePartitions.from_layout(by_source(("a", 4, 1), ("b", 3, 1), pool=2), flat(8))


def test_blocks_are_refused_on_a_flat_machine() -> None:
    layout = by_source(("a", 4, 1))
    layout = layout.with_queues([replace(layout.queues[0], blocks=("ANL-R00-1024",))])
    with pytest.raises(InputError, match="queue 'a' names blocks, but m is a flat machine"):
        QueuePartitions.from_layout(layout, flat(8))


@pytest.mark.parametrize(("own", "pool", "message"), [
    ({"a": {"0", "1"}, "b": {"1", "2"}}, set(), "node 1 is in both queue 'a' and queue 'b'"),
    ({"a": {"0", "1"}}, {"1"}, "node 1 is in both queue 'a' and the common pool"),
    ({"a": {"0"}, "b": set()}, set(), "queue 'b' has no node"),
    ({"a": {"0", "8"}}, set(), "queue 'a' names node 8, beyond the machine's 8 nodes"),
])
def test_overlapping_empty_or_outside_partitions_are_refused(
        own: dict[str, set[str]], pool: set[str], message: str) -> None:
    parts = QueuePartitions({q: frozenset(p) for q, p in own.items()}, frozenset(pool), None,
                            {q: 1.0 for q in own})
    with pytest.raises(InputError, match=message):
        parts.check(flat(8))


# ---- where jobs run --------------------------------------------------------------------------

def test_a_blocked_top_job_in_one_partition_holds_back_no_other_partition_easy() -> None:
    # 8 nodes: a = 0-3, b = 4-7. Worked by hand, FCFS + EASY inside each partition:
    #   t=0 a1 (4 nodes) fills a until 100; b0 (2 nodes) holds half of b until 100.
    #   t=1 a2 (4 nodes) is a's top job: reserved at 100 in a.
    #   t=2 b1 (4 nodes) is b's top job: reserved at 100 in b (b0 ends then).
    #   t=3 b2 (2 nodes, 500 s) fits b now but would delay b1: it waits until b1 ends (200).
    #   t=4 b3 (2 nodes, 50 s) fits b now and ends before 100: it backfills at once, although
    #       two top jobs (a2, b1) are ahead of it and a2's partition is full.
    jobs = [job(1, 0, 4, 100, "a"), job(2, 0, 2, 100, "b"), job(3, 1, 4, 100, "a"),
            job(4, 2, 4, 100, "b"), job(5, 3, 2, 500, "b"), job(6, 4, 2, 50, "b")]
    got = replay(jobs, 8, by_source(("a", 4, 1), ("b", 4, 1)))
    assert {j: start for j, (start, _) in got.items()} == {
        1: 0, 2: 0, 3: 100, 4: 100, 5: 200, 6: 4}
    assert got[6][1] == "6-7" and got[3][1] == "0-3" and got[4][1] == "4-7"


def test_without_backfilling_a_waiting_job_of_one_partition_holds_back_no_other() -> None:
    # a's second job waits for a; b's job, behind it in rank order, starts at once on b.
    jobs = [job(1, 0, 2, 100, "a"), job(2, 1, 2, 100, "a"), job(3, 2, 2, 100, "b")]
    got = replay(jobs, 4, by_source(("a", 2, 1), ("b", 2, 1)), Backfill.NONE)
    assert {j: start for j, (start, _) in got.items()} == {1: 0, 2: 100, 3: 2}


@pytest.mark.parametrize(("priority", "pool_start"), [(1.0, 150), (2.0, 60)])
def test_a_job_uses_the_pool_only_once_its_priority_factor_passes_tau(
        priority: float, pool_start: int) -> None:
    # a = 0-1, b = 2-3, pool = 4-5, tau_pf = 1. a2 waits behind a1 (a's partition, 1000 s);
    # its pf = wait / 100 s x priority passes 1 after 100 s (priority 1) or 50 s (priority 2).
    # b's short jobs make events at 20, 60 and 150; the pool is idle all along.
    jobs = [job(1, 0, 2, 1000, "a"), job(2, 0, 2, 100, "a"),
            job(3, 20, 1, 10, "b"), job(4, 60, 1, 10, "b"), job(5, 150, 1, 10, "b")]
    layout = by_source(("a", 2, priority), ("b", 2, 1), pool=2, tau_pf=1.0)
    got = replay(jobs, 6, layout)
    assert got[2] == (pool_start, "4-5")
    assert all(ranges_to_mask(got[j][1]) & 0b001100 == ranges_to_mask(got[j][1])
               for j in (3, 4, 5))  # b's jobs stay in b although the pool is idle


def test_without_tau_the_pool_is_never_used() -> None:
    jobs = [job(1, 0, 2, 1000, "a"), job(2, 0, 2, 100, "a"), job(3, 500, 1, 10, "b")]
    got = replay(jobs, 6, by_source(("a", 2, 1), ("b", 2, 1), pool=2))
    assert got[2] == (1000, "0-1")


def test_queues_the_layout_does_not_name_run_on_the_rest() -> None:
    # a owns 0-1; a Qsim without routing (the live case) has queue "other" outside the layout:
    # it runs on 2-3, the nodes no partition owns, never on a's.
    machine = flat(4)
    qsim = Qsim([job(1, 0, 2, 100, "other"), job(2, 0, 2, 100, "other")], machine,
                builtin_policy("fcfs"))
    qsim.partitions = QueuePartitions({"a": frozenset({"0", "1"})}, frozenset(), None, {"a": 1})
    outcomes = {o.jobid: (o.start_time, o.location) for o in qsim.run().outcomes}
    assert outcomes == {1: (0, "2-3"), 2: (100, "2-3")}


def test_a_job_no_queue_takes_stops_the_replay_naming_it() -> None:
    layout = QueueLayout((queue("small", 1, 4, 4),))
    with pytest.raises(InputError, match=r"job 2 \(6 nodes, 100 s requested, queue 'x'\) "
                                         "belongs to no queue"):
        Qsim([job(1, 0, 2, 100, "x"), job(2, 0, 6, 100, "x")], flat(8),
             builtin_policy("fcfs"), queue_layout=layout)


def test_a_job_larger_than_its_partition_and_the_pool_is_skipped_with_the_reason() -> None:
    layout = QueueLayout((queue("q", 1, 8, 4),), pool=2, tau_pf=1.0)
    result = Qsim([job(1, 0, 6, 100, "x")], flat(8), builtin_policy("fcfs"),
                  queue_layout=layout).run()
    assert result.skipped == ["job 1: 6 nodes fit neither queue q's partition (4 nodes) nor "
                              "the common pool (2)"]


class _Places(ReplayObserver):
    """Every run's place and start, to check them against the layout; and the nodes held at
    each instant, which no start may take twice."""

    def __init__(self) -> None:
        self.runs: list[tuple[SimJob, int, float]] = []
        self.held = 0
        self._masks: dict[int, int] = {}

    def started(self, job: SimJob, now: float) -> None:
        mask = ranges_to_mask(job.location)
        assert mask and not mask & self.held, f"job {job.jobid} took held nodes at {now}"
        self.held |= mask
        self._masks[job.jobid] = mask
        self.runs.append((job, mask, now))

    def ended(self, job: SimJob, now: float, killed: bool) -> None:
        self.held &= ~self._masks.pop(job.jobid)

    def killed_by_failure(self, job: SimJob, now: float, component: str) -> None:
        self.ended(job, now, True)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       pool=st.integers(0, 4), tau=st.one_of(st.none(), st.floats(0, 3)),
       backfill=st.sampled_from([Backfill.EASY, Backfill.CONSERVATIVE, Backfill.NONE]),
       specs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 400), st.integers(1, 6),
                                st.integers(10, 300), st.integers(1, 300)),
                      min_size=1, max_size=40),
       failures=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 25)), max_size=4))
def test_jobs_run_only_in_their_partition_or_the_pool_and_no_node_twice(
        sizes: list[int], pool: int, tau: float | None, backfill: Backfill,
        specs: list[tuple[int, int, int, int, int]], failures: list[tuple[int, int]]) -> None:
    names = [f"q{i}" for i in range(len(sizes))]
    layout = by_source(*[(n, s, 1 + i % 2) for i, (n, s) in enumerate(zip(names, sizes,
                                                                          strict=True))],
                       pool=pool, tau_pf=tau)
    nodes = sum(sizes) + pool + 2  # two nodes of no partition: queues not named run there
    jobs = [job(i + 1, submit, size, wall, names[q % len(names)], run)
            for i, (q, submit, size, wall, run) in enumerate(specs)]
    events = sorted((FailureEvent(t, str(n % nodes)) for t, n in failures),
                    key=lambda f: f.time)
    observer = _Places()
    qsim = Qsim(jobs, flat(nodes), builtin_policy("fcfs"), backfill, observer,
                failures=events, repair_time=100, queue_layout=layout)
    parts = qsim.partitions
    assert parts is not None
    qsim.run()  # the observer checks every start against the nodes held then
    pool_mask = node_mask(parts.pool)
    for sim, where, start in observer.runs:
        own = node_mask(parts.own[sim.queue])
        if where & ~own:
            assert where & ~pool_mask == 0, f"job {sim.jobid} mixes or leaves its places"
            factor = (start - sim.submit_time) / sim.wall_time * parts.priority[sim.queue]
            assert tau is not None and factor > tau


def test_a_purely_partitioned_replay_equals_one_replay_per_partition() -> None:
    # SDSC-SP2, ten days, 4 size classes: the same waits job by job as evaluate.py's replays
    # of each queue alone on a machine the size of its partition.
    day = datetime(1998, 7, 1, tzinfo=UTC).timestamp()
    trace = read_swf(TRACES / "SDSC-SP2-1998-4.2-cln.swf.gz", start=day,
                     end=day + 10 * 86400).jobs
    layout = QueueLayout((queue("tiny", 1, 2, 12), queue("small", 3, 8, 20),
                          queue("medium", 9, 32, 32), queue("large", 33, 64, 64)))
    jobs = [j for j in trace if j.nodes <= 64]
    result = Qsim(jobs, flat(128), builtin_policy("fcfs"), Backfill.EASY,
                  queue_layout=layout).run()
    waits = {o.jobid: o.wait for o in result.outcomes}
    routed, unrouted = layout.route(jobs)
    assert not unrouted and len(waits) == len(jobs) > 300
    for q in layout.queues:
        alone = replay_partition(routed[q.name], q.nodes)
        mine = [waits[j.jobid] for j in routed[q.name]]
        assert (alone.jobs, alone.total_wait, alone.max_wait) == (
            len(mine), sum(mine), max(mine, default=0.0)), q.name
        # and job by job: the partition alone, as replay_partition replays it
        by_itself = Qsim(routed[q.name], flat(q.nodes), builtin_policy("fcfs"),
                         Backfill.EASY).run()
        assert {o.jobid: o.wait for o in by_itself.outcomes} == {
            j.jobid: waits[j.jobid] for j in routed[q.name]}, q.name


# ---- qsim --queue-layout ---------------------------------------------------------------------

def _qsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--quiet", *args],
                          capture_output=True, text=True, timeout=120)


def _swf(path: Path, rows: list[tuple[int, int, int, int, int]]) -> Path:
    """SWF lines: job, submit, run, nodes (= processors), requested time; queue 1."""
    path.write_text("".join(f"{j} {s} 0 {r} {n} -1 -1 {n} {t} -1 1 1 1 -1 1 -1 -1 -1\n"
                            for j, s, r, n, t in rows))
    return path


def test_qsim_queue_layout_writes_per_queue_figures(tmp_path: Path) -> None:
    trace = _swf(tmp_path / "t.swf", [(1, 0, 100, 2, 100), (2, 0, 100, 2, 100),
                                     (3, 10, 50, 4, 60)])
    layout = tmp_path / "layout.yaml"
    layout.write_text("machine_nodes: 8\ncommon_pool: 2\ntau_pf: 0.5\nqueues:\n"
                      "  - {name: small, nodes: 2, jobs: [{nodes: [1, 2]}]}\n"
                      "  - {name: big, nodes: 4, priority: 2, jobs: [{nodes: [3, 8]}]}\n")
    done = _qsim("--trace", str(trace), "--machine", "flat:8", "--queue-layout", str(layout),
                 "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["queue_layout"] == "layout.yaml"
    by_queue = summary["metrics"]["by_queue"]
    small, big = by_queue["queues"]["small"], by_queue["queues"]["big"]
    # small's second job waits for its partition (busy until 100); its pf (wait / 100 s)
    # passes 0.5 after 50 s, so the next pass, at 60 (job 3's end), starts it on the pool.
    assert (small["jobs"], small["jobs_on_pool"], small["max_wait"]) == (2, 1, 60)
    assert (big["jobs"], big["partition_nodes"], big["mean_wait"]) == (1, 4, 0)
    assert by_queue["pool"] == {"nodes": 2, "utilization": 200 / (2 * 160),
                                "starvation_rule_seconds": 0.0}
    assert by_queue["starvation_time"] == small["starvation_time"] == 86400


def test_qsim_queue_layout_refuses_an_unrouted_job_and_writes_nothing(tmp_path: Path) -> None:
    trace = _swf(tmp_path / "t.swf", [(1, 0, 100, 2, 100), (2, 5, 100, 7, 3600)])
    layout = tmp_path / "layout.yaml"
    layout.write_text("machine_nodes: 8\nqueues:\n  - {name: small, nodes: 8, "
                      "jobs: [{nodes: [1, 4]}]}\n")
    out = tmp_path / "out"
    done = _qsim("--trace", str(trace), "--machine", "flat:8", "--queue-layout", str(layout),
                 "--out", str(out))
    assert done.returncode == 1
    assert "job 2 (7 nodes, 3600 s requested, queue '1') belongs to no queue" in done.stderr
    assert not out.exists()  # the directory qsim made is taken away again
    out.mkdir()  # one the user made stays, empty
    done = _qsim("--trace", str(trace), "--machine", "flat:8", "--queue-layout", str(layout),
                 "--out", str(out))
    assert done.returncode == 1 and out.is_dir() and not any(out.iterdir())


def test_qsim_queue_layout_must_match_the_machine(tmp_path: Path) -> None:
    trace = _swf(tmp_path / "t.swf", [(1, 0, 100, 2, 100)])
    layout = tmp_path / "layout.yaml"
    layout.write_text("machine_nodes: 16\nqueues:\n  - {name: q, nodes: 8, "
                      "jobs: [{nodes: [1, 8]}]}\n")
    done = _qsim("--trace", str(trace), "--machine", "flat:8", "--queue-layout", str(layout))
    assert done.returncode == 1
    assert f"--queue-layout {layout}: machine_nodes is 16; the machine" in done.stderr


def test_a_reservation_keeps_the_jobs_of_the_partition_it_covers_off_its_nodes() -> None:
    # A maintenance window on a's nodes 0-3 over [100, 500): a's 200-s job cannot start at 0
    # (it would run into the window) and starts at its end; b (4-7) is untouched.
    maintenance = Reservation("maint", start=100, duration=400,
                              places=tuple(str(n) for n in range(4)))
    jobs = [job(1, 0, 4, 200, "a"), job(2, 0, 4, 200, "b"), job(3, 0, 2, 50, "a")]
    got = replay(jobs, 8, by_source(("a", 4, 1), ("b", 4, 1)), reservations=[maintenance])
    assert {j: start for j, (start, _) in got.items()} == {1: 500, 2: 0, 3: 0}
