"""Start estimates under slack backfilling (seed 001; issues 15/16): the scheme's deadlines hang
on its memory (when each job was first seen, its expected start then) and its settings, so the
forked replay starts from the scheduler's (`Scheduler.slack_state`), which travels to the queue
manager as JSON. The estimates equal the starts: tests/test_start_estimates.py and
tests/test_layout_estimates.py (their explicit examples failed with a fork that forgot), and
live in tests/test_slack_live.py."""

from __future__ import annotations

import json
import math

import pytest

from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.fork import estimate_start_times
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.scheduler.slack import Goal, SlackSettings, SlackState
from cobaltlite.traces.model import TraceJob

STATE = SlackState(SlackSettings(lookahead=5, goal=Goal.UTILIZATION, k1=-0.25),
                   {"": {3: (10.0, 40.0), 4: (12.0, math.inf)}, "small": {7: (0.0, 5.5)}})


def test_the_slack_state_goes_through_strict_json_and_back() -> None:
    text = json.dumps(STATE.to_wire(), allow_nan=False)
    assert SlackState.from_wire(json.loads(text)) == STATE


def test_a_bad_slack_state_on_the_wire_is_refused_by_name() -> None:
    wire = STATE.to_wire()
    wire["settings"]["lookahead"] = 0
    with pytest.raises(ValueError, match="lookahead"):
        SlackState.from_wire(wire)


def test_the_state_for_the_queued_jobs_is_a_copy() -> None:
    kept = STATE.for_jobs({4, 7})
    assert kept.expected == {"": {4: (12.0, math.inf)}, "small": {7: (0.0, 5.5)}}
    assert STATE.expected[""] == {3: (10.0, 40.0), 4: (12.0, math.inf)}


class _EstimateAtZero:
    """A Qsim pass hook: after the first pass, estimate from the scheduler's slack state and
    keep that state as it was before the estimate and after it."""

    def __init__(self, qsim: Qsim) -> None:
        self.qsim = qsim
        self.before: SlackState | None = None
        self.after: SlackState | None = None

    def before_pass(self, now: float) -> None:
        pass

    def after_pass(self, now: float) -> None:
        if now == 0:
            self.before = state = self.qsim.scheduler.slack_state()
            estimate_start_times(build_machine(load_description("flat:10")), now,
                                 self.qsim.running_jobs(), self.qsim.queued_jobs(),
                                 builtin_policy("fcfs"), Backfill.SLACK, slack=state)
            self.after = self.qsim.scheduler.slack_state()


def test_an_estimate_leaves_the_schedulers_slack_memory_as_it_was() -> None:
    trace = [TraceJob(i + 1, 0, wall, wall, nodes)
             for i, (nodes, wall) in enumerate([(6, 100), (8, 50), (3, 105), (2, 30)])]
    qsim = Qsim(trace, build_machine(load_description("flat:10")), builtin_policy("fcfs"),
                Backfill.SLACK, slack=SlackSettings(lookahead=5))
    qsim.pass_hook = hook = _EstimateAtZero(qsim)
    qsim.run()
    assert hook.before is not None and hook.before.expected[""]
    assert hook.before.settings.lookahead == 5
    assert hook.after == hook.before
