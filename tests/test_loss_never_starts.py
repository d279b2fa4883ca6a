"""Loss of capacity leaves out a job that can never start (D000-9, docs/metric-aware.md): a
reservation's job longer than every period of its reservation waits for no node, so the idle
nodes beside it are not seed 000 eq. 4's loss. Qsim's capacity samples and the live monitor
decide it through one function (qsim/metrics.py's `never_starts`)."""

from __future__ import annotations

import json

from live import Instance, ok, until

from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.metrics import longest_periods, loss_of_capacity, never_starts
from cobaltlite.reservations.model import Reservation
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob


def test_never_starts_is_a_job_longer_than_each_period_of_its_queue() -> None:
    periods = longest_periods([("R.a", 600.0), ("R.a", 1800.0), ("R.b", 60.0)])
    assert periods == {"R.a": 1800.0, "R.b": 60.0}
    assert never_starts("R.a", 1801.0, periods)
    assert not never_starts("R.a", 1800.0, periods)  # ends exactly at the period's end
    assert not never_starts("default", 10**9, periods)  # no reservation holds its queue


def replay_loss(reservation_job_wall: float) -> float | None:
    """flat:4, nodes 2-3 reserved over [0, 1000), a 2-node job on 0-1 for that time and a
    1-node job of the reservation asking `reservation_job_wall` seconds."""
    jobs = [TraceJob(jobid=1, submit_time=0, run_time=1000, requested_time=1000, nodes=2),
            TraceJob(jobid=2, submit_time=0, run_time=10, requested_time=reservation_job_wall,
                     nodes=1, queue="R.r")]
    result = Qsim(jobs, build_machine(load_description("flat:4")), builtin_policy("fcfs"),
                  Backfill("easy"),
                  reservations=[Reservation("r", start=0, duration=1000, places=("2", "3"))]
                  ).run()
    return loss_of_capacity(result.samples, 4)


def test_qsim_counts_no_loss_beside_a_reservation_job_that_can_never_start() -> None:
    # Longer than the reservation: it never starts, and the two idle reserved nodes are no loss.
    assert replay_loss(2000) == 0.0


def test_live_loss_of_capacity_leaves_out_a_job_that_can_never_start() -> None:
    instance = Instance(machine="flat:4").start_retrying()
    try:
        def sample_with(queued: int) -> dict[str, float]:
            def found() -> dict[str, float] | None:
                shown = json.loads(ok(instance.command("cqmetrics", "--json", "--since", "0")))
                values: dict[str, float] = shown["current"]["values"]
                return values if values["queued_jobs"] == queued else None
            return until(found, 30, f"a sample with {queued} queued job(s)")

        ok(instance.command("setres", "-n", "maint", "-s", "now", "-d", "30", "-p", "2:3"))
        # An hour in a 30-minute reservation: it never starts, and waits for no node.
        never = instance.qsub("-q", "R.maint", "-n", "1", "-t", "60", "/bin/true")
        assert sample_with(1)["loss_of_capacity"] == 0.0
        # A 3-node job waits for nodes while 4 are idle (2 of them reserved): eq. 4 counts it.
        instance.qsub("-n", "3", "-t", "10", "/bin/true")
        assert sample_with(2)["loss_of_capacity"] == 1.0
        assert instance.job(never)["state"] == "queued"
    finally:
        instance.stop()
