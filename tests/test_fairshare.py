"""Per-user decayed usage (`user_usage`) and the fairshare policy, in the ledger and in Qsim."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.config import load_config
from cobaltlite.errors import InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.usage import UsageLedger, check_half_life
from cobaltlite.policy.utility import builtin_policy, make_utility
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_finished_usage_halves_every_half_life() -> None:
    clock = Clock()
    ledger = UsageLedger(HOUR, clock)
    ledger.started("alice", 4, 0.0)
    ledger.stopped("alice", 4, 0.0, 60.0)
    at_end = ledger.usage("alice", 60.0)
    # 4 nodes for 60 s, each instant weighted by 2^(-age/h): a little under 240 node-seconds.
    assert at_end == pytest.approx(4 * HOUR / math.log(2) * (1 - 2 ** (-60 / HOUR)))
    assert 238 < at_end < 240
    assert ledger.usage("alice", 60.0 + HOUR) == pytest.approx(at_end / 2)
    assert ledger.usage("alice", 60.0 + 3 * HOUR) == pytest.approx(at_end / 8)
    assert ledger.usage("bob", 60.0) == 0.0


def test_a_user_holding_the_whole_machine_for_ever_approaches_a_share_of_one() -> None:
    clock = Clock()
    ledger = UsageLedger(HOUR, clock)
    share = ledger.share_of(8)
    ledger.started("alice", 8, 0.0)
    clock.now = HOUR
    assert share("alice") == pytest.approx(0.5)  # one half-life of use: half the full weight
    clock.now = 20 * HOUR
    assert share("alice") == pytest.approx(1.0, abs=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 5000), st.integers(1, 16)),
                min_size=1, max_size=15),
       st.floats(60.0, 1e5), st.integers(0, 20000))
def test_the_ledger_equals_the_integral_of_decayed_use(runs: list[tuple[int, int, int]],
                                                       half_life: float, extra: int) -> None:
    """Usage at t = sum over runs of nodes x integral of 2^(-(t - x)/h) over the run's part
    before t, whatever the order of starts and ends."""
    events = []
    for start, length, nodes in runs:
        events.append((start, 1, nodes, start))
        events.append((start + length, 0, nodes, start))
    events.sort()
    ledger = UsageLedger(half_life, Clock())
    for time, is_start, nodes, start in events:
        if is_start:
            ledger.started("u", nodes, time)
        else:
            ledger.stopped("u", nodes, start, time)
    now = events[-1][0] + extra
    rate = math.log(2) / half_life
    expected = sum(n / rate * (math.exp(-rate * (now - (s + length))) - math.exp(-rate * (now - s)))
                   for s, length, n in runs)
    assert ledger.usage("u", now) == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_restoring_the_stored_rows_gives_the_same_usage() -> None:
    clock = Clock()
    ledger = UsageLedger(HOUR, clock)
    ledger.started("alice", 2, 0.0)
    ledger.stopped("alice", 2, 0.0, 100.0)
    ledger.started("alice", 1, 50.0)  # still running at the restart
    again = UsageLedger(HOUR, clock)
    again.restore([ledger.finished("alice")])
    again.started("alice", 1, 50.0)  # rebuilt from the running job, as the queue manager does
    assert again.usage("alice", 500.0) == pytest.approx(ledger.usage("alice", 500.0))


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan, "1h", True])
def test_a_bad_half_life_is_refused(value: object) -> None:
    with pytest.raises(InputError, match=r"usage half-life .* must be a"):
        check_half_life(value)  # type: ignore[arg-type]


def test_qsim_refuses_a_bad_half_life_naming_the_option() -> None:
    ran = subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--trace", "x.swf",
                          "--machine", "flat:4", "--usage-half-life", "0"],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2
    assert "argument --usage-half-life: '0' must be a finite number of hours > 0" in ran.stderr


def test_the_config_refuses_a_bad_half_life(tmp_path: Path) -> None:
    (tmp_path / "cobaltlite.yaml").write_text("usage_half_life: -5\n")
    with pytest.raises(InputError, match=r"option usage_half_life: -5.0 must be a number of "
                                         r"seconds greater than zero"):
        load_config(tmp_path)


def test_only_functions_naming_user_usage_read_it() -> None:
    assert builtin_policy("fairshare").needs_user_usage
    assert not builtin_policy("fcfs").needs_user_usage
    site = make_utility(lambda user_usage, queued_time: queued_time / (1 + user_usage), "site")
    assert site.needs_user_usage


def replay_order(policy: str) -> list[int]:
    """Alice fills the 4-node machine for 10 hours; then, while it is still full, alice
    submits job 2 and bob job 3, each needing the whole machine. The start order of 2 and 3."""
    jobs = [TraceJob(1, 0, 36000, 36000, 4, user="alice"),
            TraceJob(2, 100, 600, 600, 4, user="alice"),
            TraceJob(3, 200, 600, 600, 4, user="bob")]
    machine = build_machine(load_description("flat:4"))
    result = Qsim(jobs, machine, builtin_policy(policy), Backfill.EASY,
                  usage_half_life=HOUR).run()
    starts = {o.jobid: o.start_time for o in result.outcomes}
    return sorted((2, 3), key=lambda j: starts[j])


def test_under_fairshare_the_user_who_used_less_goes_first_in_qsim() -> None:
    assert replay_order("fcfs") == [2, 3]
    assert replay_order("fairshare") == [3, 2]


def test_fair_start_times_with_a_usage_policy_are_refused_before_any_replay(tmp_path: Path
                                                                         ) -> None:
    trace = tmp_path / "log.swf"
    trace.write_text("1 0 0 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1\n")
    ran = subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--trace", str(trace),
                          "--machine", "flat:4", "--policy", "fairshare", "--fair-start",
                          "estimate", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1
    assert "--fair-start estimate with policy 'fairshare': fair start times do not carry" \
        in ran.stderr
    assert not (tmp_path / "out" / "accounting.log").exists()
