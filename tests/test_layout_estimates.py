"""Start estimates under a queue layout (seed 002; issue 17): the forked replay schedules by the
same partitions and pool as the scheduler, so with nothing new arriving and every job running
for its requested time the estimate is the start, in Qsim and with the live daemons."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from live import Instance, ok, until
from test_layout_live import LAYOUT
from test_live_jobs import script
from test_start_estimates import _estimate

from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.machine.runtime import build_machine
from cobaltlite.partitioning.layout import parse_layout
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim, SimJob
from cobaltlite.qsim.fork import estimate_start_times
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

HYBRID = """\
machine_nodes: 8
common_pool: 2
tau_pf: 0.5
starvation_time: 30
queues:
  - name: small
    nodes: 2
    jobs: [{nodes: [1, 2]}]
  - name: big
    nodes: 4
    priority: 2
    jobs: [{nodes: [3, 4]}]
"""
"""flat:8: small on nodes 0-1, big on 2-5, the pool 6-7, which jobs of 1-2 nodes reach when
their priority factor passes 0.5, or when they starve (30 s)."""


class _EstimateAfterLastArrival:
    """A Qsim pass hook: at the last submission's pass, estimate every queued job's start with
    the replay's partitions."""

    def __init__(self, qsim: Qsim, last_arrival: float, policy: str, backfill: Backfill
                 ) -> None:
        self.qsim, self.last_arrival = qsim, last_arrival
        self.policy, self.backfill = builtin_policy(policy), backfill
        self.estimates: dict[int, float] | None = None

    def before_pass(self, now: float) -> None:
        pass

    def after_pass(self, now: float) -> None:
        if now == self.last_arrival:
            empty = build_machine(load_description("flat:8"))
            self.estimates = estimate_start_times(
                empty, now, self.qsim.running_jobs(), self.qsim.queued_jobs(), self.policy,
                self.backfill, partitions=self.qsim.partitions,
                slack=self.qsim.scheduler.slack_state())


@settings(max_examples=60, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(0, 50), st.integers(1, 4), st.integers(1, 40)),
                     min_size=1, max_size=14),
       policy=st.sampled_from(["fcfs", "wfp3", "default"]),
       backfill=st.sampled_from(list(Backfill)),
       pool=st.booleans())
# Slack's deadlines hang on its memory: a fork that forgot it estimated {9: 14, 13: 15} for
# starts {9: 16, 13: 13}.
@example(jobs=[(0, 1, 1)] * 7 + [(0, 1, 11), (0, 2, 1), (0, 1, 6), (0, 1, 1), (0, 1, 1),
                                  (0, 1, 3), (4, 1, 1)],
         policy="fcfs", backfill=Backfill.SLACK, pool=False)
# Job 2 reserved small's nodes from 2 s, keeping job 3 out, then took the pool at 1 s; the pass
# ended there, and the fork's first pass started job 3 at 1 s where the replay waited until 2 s.
@example(jobs=[(0, 1, 2), (0, 2, 1), (1, 1, 2)], policy="fcfs", backfill=Backfill.EASY, pool=True)
def test_a_fork_with_the_partitions_estimates_the_replays_starts(
        jobs: list[tuple[int, int, int]], policy: str, backfill: Backfill, pool: bool) -> None:
    text = HYBRID if pool else HYBRID.replace("common_pool: 2", "common_pool: 0")
    layout, _ = parse_layout(text, "hybrid.yaml")
    trace = [TraceJob(i + 1, submit, wall, wall, nodes)
             for i, (submit, nodes, wall) in enumerate(jobs)]
    qsim = Qsim(trace, build_machine(load_description("flat:8")), builtin_policy(policy),
                backfill, queue_layout=layout)
    hook = _EstimateAfterLastArrival(qsim, max(j.submit_time for j in trace), policy, backfill)
    qsim.pass_hook = hook
    result = qsim.run()
    assert hook.estimates is not None
    assert hook.estimates == {o.jobid: o.start_time for o in result.outcomes
                              if o.start_time > hook.last_arrival}


def test_a_job_leaving_for_the_pool_lets_its_partition_start_the_next() -> None:
    """The case above: once job 2 takes the pool, small's pass runs again in the same pass
    without it, so job 3 starts at once on node 1, as a second pass at 1 s would start it."""
    layout, _ = parse_layout(HYBRID, "hybrid.yaml")
    trace = [TraceJob(1, 0, 2, 2, 1), TraceJob(2, 0, 1, 1, 2), TraceJob(3, 1, 2, 2, 1)]
    result = Qsim(trace, build_machine(load_description("flat:8")), builtin_policy("fcfs"),
                  Backfill.EASY, queue_layout=layout).run()
    assert {o.jobid: (o.start_time, o.location) for o in result.outcomes} == {
        1: (0, "0"), 2: (1, "6-7"), 3: (1, "1")}


def test_a_fork_without_the_partitions_would_start_a_partitions_job_on_idle_nodes() -> None:
    """What the estimate got wrong before: a small job waits for its partition (nodes 0-1,
    held until 100) though nodes 2-7 are idle."""
    layout, _ = parse_layout(HYBRID.replace("common_pool: 2", "common_pool: 0"), "l.yaml")
    machine = build_machine(load_description("flat:8"))
    running = [SimJob(1, 2, 100.0, 100.0, 0.0, "ann", "p", "small", start_time=0.0,
                      location="0-1")]
    queued = [SimJob(2, 2, 50.0, 50.0, 0.0, "ann", "p", "small")]
    fcfs = builtin_policy("fcfs")
    partitions = QueuePartitions.from_layout(layout, machine)
    assert estimate_start_times(machine, 10.0, running, queued, fcfs, Backfill.EASY,
                                partitions=partitions) == {2: 100.0}
    assert estimate_start_times(machine, 10.0, running, queued, fcfs, Backfill.EASY) == {2: 10.0}


# ---- live ----------------------------------------------------------------------------------


@pytest.fixture
def flat() -> Iterator[Instance]:
    running = Instance(machine="flat:8").start_retrying()
    yield running
    running.stop()


def test_live_estimates_under_a_layout_equal_the_starts(flat: Instance) -> None:
    """small's jobs wait for nodes 0-1 though six nodes are idle: their estimates say so, and
    the starts follow them (jobs outliving their wall time are ended at it)."""
    path = flat.jobs_dir / "layout.yaml"
    path.write_text(LAYOUT)
    path.chmod(0o644)
    ok(flat.command("partadm", "--layout", str(path)))
    sleeper = script(flat.jobs_dir, "outlive.sh", "sleep 60")
    first = flat.qsub("-q", "small", "-n", "2", "-t", "00:00:06", str(sleeper))
    begun = flat.wait_for(first, {"running"})["starttime"]
    queued = [flat.qsub("-q", "small", "-n", str(n), "-t", "00:00:05", str(sleeper))
              for n in (2, 1)]
    estimates = until(lambda: (lambda found: found if None not in found else None)(
        [_estimate(flat, j) for j in queued]), 20, "start estimates of the queued jobs")
    # Not now on the idle nodes 2-7: after the first job's end, one after the other.
    assert estimates[0] >= begun + 5
    assert estimates[1] >= estimates[0] + 4
    for links, jobid, estimate in zip((1, 2), queued, estimates, strict=True):
        started = flat.wait_for(jobid, {"running", "exiting", "done"}, timeout=60)
        assert abs(started["starttime"] - estimate) <= 3.0 * links, (jobid, started, estimate)
        assert started["location"] in ("0-1", "0", "1")
