"""The job state machine (cobaltlite.jobs.lifecycle): every state against every event, holds and
dependencies combined, and invariants over random event sequences (hypothesis).

The live queue manager and Qsim both apply these functions; tests/test_queues_live.py and
tests/test_qsim_shared_logic.py show each applying them end to end.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.jobs import lifecycle
from cobaltlite.jobs.lifecycle import JobStatus, Refused
from cobaltlite.jobs.states import DONE, EXITING, KILLING, RUNNING, STARTING, STORED_STATES

PARENT = 7
WAITING = frozenset({PARENT})

STATES = {
    "queued": JobStatus(),
    "user_hold": JobStatus(user_hold=True),
    "admin_hold": JobStatus(admin_hold=True),
    "dep_hold": JobStatus(waiting_on=WAITING),
    "dep_fail": JobStatus(waiting_on=WAITING, dep_fail=True),
    "maxrun_hold": JobStatus(maxrun_hold=True),
    "user+admin+dep": JobStatus(user_hold=True, admin_hold=True, waiting_on=WAITING),
    "starting": JobStatus(STARTING),
    "running": JobStatus(RUNNING),
    "killing": JobStatus(KILLING),
    "exiting": JobStatus(EXITING),
    "done": JobStatus(DONE),
}
QUEUED_LIKE = ("queued", "user_hold", "admin_hold", "dep_hold", "dep_fail", "maxrun_hold",
               "user+admin+dep")
ACTIVE = ("starting", "running", "killing", "exiting")

EVENTS = {
    **lifecycle.EVENTS,
    "parent end 0": lambda s: lifecycle.parent_ended(s, PARENT, 0),
    "parent end 1": lambda s: lifecycle.parent_ended(s, PARENT, 1),
    "parent deleted": lambda s: lifecycle.parent_ended(s, PARENT, None),
    "parent missing": lambda s: lifecycle.parent_missing(s, PARENT),
}

COMPLETED = "!has already completed"
ACTIVE_REFUSAL = "!is already active"
NEVER_STARTED = "!never started"


def _row(default: str, **cases: str) -> dict[str, str]:
    """One event's expected result in every state: the new display state and records
    ("running S"), or "!reason" for a refusal. Keys use _ for + in state names."""
    row = {state: default for state in STATES}
    row.update({name.replace("__", "+"): value for name, value in cases.items()})
    return row


def _active(result: str) -> dict[str, str]:
    return {state: result for state in ACTIVE}


EXPECTED: dict[str, dict[str, str]] = {
    "hold user": _row(
        "user_hold HA", user_hold="!already in state 'user hold'",
        user__admin__dep="!already in state 'user hold'", done=COMPLETED,
        **_active(ACTIVE_REFUSAL)),
    "hold admin": _row(
        "admin_hold HA", user_hold="user_hold HA", dep_hold="dep_hold HA",
        dep_fail="dep_fail HA", admin_hold="!already in state 'admin hold'",
        user__admin__dep="!already in state 'admin hold'", done=COMPLETED,
        **_active(ACTIVE_REFUSAL)),
    "release user": _row(
        "!does not have a 'user hold'", user_hold="queued HR",
        user__admin__dep="dep_hold HR", done=COMPLETED),
    "release admin": _row(
        "!does not have a 'admin hold'", admin_hold="queued HR",
        user__admin__dep="user_hold HR", done=COMPLETED),
    "release dependencies": _row(
        "!does not have a 'dependency hold'", dep_hold="queued HR", dep_fail="queued HR",
        user__admin__dep="user_hold HR", done=COMPLETED, **_active(ACTIVE_REFUSAL)),
    "run": _row(
        "starting", user_hold="!is held (user_hold)", admin_hold="!is held (admin_hold)",
        dep_hold="!is held (dep_hold)", dep_fail="!is held (dep_fail)",
        user__admin__dep="!is held (user_hold)",
        maxrun_hold="!is held by its queue's running-job limit (maxrun_hold)",
        done=COMPLETED, **_active(ACTIVE_REFUSAL)),
    "admin run": _row(
        "starting", user_hold="!is held (user_hold)", admin_hold="!is held (admin_hold)",
        dep_hold="!is held (dep_hold)", dep_fail="!is held (dep_fail)",
        user__admin__dep="!is held (user_hold)", done=COMPLETED, **_active(ACTIVE_REFUSAL)),
    "launched": {**{s: "!is queued, not starting" for s in QUEUED_LIKE},
                 "starting": "running S", "running": "!is running, not starting",
                 "killing": "!is killing, not starting", "exiting": "!is exiting, not starting",
                 "done": "!is done, not starting"},
    "launch failed": {**{s: "!is queued, not starting" for s in QUEUED_LIKE},
                      "starting": "queued", "running": "!is running, not starting",
                      "killing": "!is killing, not starting",
                      "exiting": "!is exiting, not starting", "done": "!is done, not starting"},
    "end 0": _row(NEVER_STARTED, done=COMPLETED, **_active("done E")),
    "end 1": _row(NEVER_STARTED, done=COMPLETED, **_active("done E")),
    "delete": _row("done D", starting="killing D", running="killing D", killing="=",
                   exiting="=", done=COMPLETED),
    "force delete": _row("done D", starting="done D E", running="done D E", killing="done E",
                         exiting="done E", done=COMPLETED),
    "walltime": {**{s: "!is queued, not running" for s in QUEUED_LIKE},
                 "starting": "killing A", "running": "killing A",
                 "killing": "!is killing, not running", "exiting": "!is exiting, not running",
                 "done": "!is done, not running"},
    "requeue": _row(NEVER_STARTED, done=COMPLETED, **_active("queued R")),
    "parent end 0": _row("=", dep_hold="queued", dep_fail="queued",
                         user__admin__dep="user_hold"),
    "parent end 1": _row("=", dep_hold="dep_fail", user__admin__dep="user_hold"),
    "parent deleted": _row("=", dep_hold="dep_fail", user__admin__dep="user_hold"),
    "parent missing": _row("=", dep_hold="dep_fail", user__admin__dep="user_hold"),
}


def test_the_table_covers_every_event_and_state() -> None:
    assert set(EXPECTED) == set(EVENTS)
    for row in EXPECTED.values():
        assert set(row) == set(STATES)


def _result(status: JobStatus, event: str) -> str:
    try:
        outcome = EVENTS[event](status)
    except Refused as exc:
        return f"!{exc}"
    if outcome.status == status and not outcome.records:
        return "="
    return " ".join([outcome.status.display(), *outcome.records])


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("event", list(EVENTS))
def test_every_state_against_every_event(state: str, event: str) -> None:
    expected = EXPECTED[event][state]
    got = _result(STATES[state], event)
    if expected == "=":
        # Unchanged: same status (the display may carry the same word as the state).
        assert got in ("=", STATES[state].display()), got
    else:
        assert got == expected


def test_holds_are_independent_and_shown_in_cobalts_priority() -> None:
    status = JobStatus(waiting_on=WAITING)
    status = lifecycle.hold(status, "admin").status
    assert status.display() == "dep_hold"  # dep_hold outranks admin_hold
    status = lifecycle.hold(status, "user").status
    assert status.display() == "user_hold"
    status = lifecycle.release(status, "user").status
    status = lifecycle.parent_ended(status, PARENT, 0).status
    assert status.display() == "admin_hold" and not status.runnable
    status = lifecycle.release(status, "admin").status
    assert status.display() == "queued" and status.runnable


def test_one_satisfied_parent_of_two_leaves_the_dependency_hold() -> None:
    status = JobStatus(waiting_on=frozenset({1, 2}))
    status = lifecycle.parent_ended(status, 1, 0).status
    assert status.display() == "dep_hold"
    failed = lifecycle.parent_ended(status, 2, 3).status
    assert failed.display() == "dep_fail" and not failed.runnable
    assert lifecycle.parent_ended(status, 2, 0).status.runnable


def test_a_parent_the_job_does_not_wait_for_changes_nothing() -> None:
    status = JobStatus(waiting_on=WAITING)
    assert lifecycle.parent_ended(status, 99, 1).status == status
    assert lifecycle.parent_missing(status, 99).status == status


def test_unknown_hold_kinds_are_a_bad_request() -> None:
    with pytest.raises(ValueError, match="hold kind 'system'"):
        lifecycle.hold(JobStatus(), "system")
    with pytest.raises(ValueError, match="release kind 'everything'"):
        lifecycle.release(JobStatus(), "everything")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(sorted(EVENTS)), max_size=40),
       st.sampled_from(sorted(STATES)))
def test_random_event_sequences_keep_the_invariants(events: list[str], start: str) -> None:
    """Whatever happens: one stored state, never a start while held, a job ends (E or, queued,
    D) at most once and then nothing more changes, and a job that started ends with E."""
    status = STATES[start]
    ended = status.state == DONE
    started = status.state in ACTIVE
    end_records = 0
    for event in events:
        before = status
        try:
            outcome = EVENTS[event](status)
        except Refused:
            continue
        status = outcome.status
        assert status.state in STORED_STATES
        if status.state == STARTING and before.state != STARTING:
            assert not before.held, f"{event} started a held job ({before.display()})"
            started = True
        if event == "requeue":
            started = False
        if ended:
            assert status == before and not outcome.records, f"{event} changed a done job"
        if status.state == DONE and not ended:
            ended = True
            end_records += 1
            if started:
                assert outcome.records[-1] == "E"
            else:
                assert outcome.records == ("D",)
        assert outcome.records.count("E") <= 1
    assert end_records <= 1
