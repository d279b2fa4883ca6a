"""The EASY pass's shortcuts (issues 13 and 16) change no schedule: over random workloads on flat
and Blue Gene/P machines (early and exact ends, ties, jobs too large, failures and repairs,
queue place sets, reservation periods, a running limit that refuses starts, fixed and scored
orders, allocation windows of 1 and 2), every pass starts the same jobs on the same places and
drains the same top job at the same place and time as a pass that asks the planner about every
waiting job (`Scheduler.easy_shortcuts = False`), and the replays end alike.

The shortcuts: on a flat machine whose plan has two levels, the textbook shadow-and-extra test
without a planner (`Scheduler._easy_on_flat`); elsewhere, skipping a job whose size and place set
the planner refused, in the same pass and since the last start, for a run no longer than its own.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given
from hypothesis import strategies as st
from test_kept_plan import run_recording
from test_reservations import reserved
from test_scheduler_properties import BGP, FLAT4, FLAT8, FLAT13, SETTINGS, workloads

from cobaltlite.faults.sources import FailureEvent
from cobaltlite.jobs.queues import load_queue_config
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill


def queue_config(maxrunning: int) -> list[dict[str, object]]:
    """Both queues of the workloads, the default one with a running limit."""
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "queues.yaml"
        path.write_text(f"queues:\n  default:\n    maxrunning: {maxrunning}\n  other: {{}}\n")
        return load_queue_config(path)


def replay(case, kind, backfill, **switches):
    """Replay `case` (from `scenario`) with `backfill`, the scheduler's `switches` set."""
    jobs, policy, failures, places, limit, reservations, window = case
    utility = builtin_policy(policy)
    qsim = Qsim([dataclasses.replace(j) for j in jobs], kind.build(), utility, backfill,
                failures=failures, repair_time=7.0,
                queue_config=None if limit is None else queue_config(limit),
                policies={utility.name: utility}, reservations=reservations, window=window)
    qsim.queue_places = places
    for name, value in switches.items():
        setattr(qsim.scheduler, name, value)
    return run_recording(qsim)


def scenario(data, kind, policies, rare, always_places=False):
    """A random workload and what a replay of it varies: policy (drawn from `policies`),
    failures, place sets, a running limit, reservations and window, each but the policy
    present when `rare` draws True (place sets always with `always_places`)."""
    jobs = data.draw(workloads(kind, exact=data.draw(st.booleans()), max_jobs=40, span=20))
    policy = data.draw(st.sampled_from(policies))
    machine = kind.build()
    units = machine.failure_units()
    failures = sorted(data.draw(st.lists(
        st.builds(FailureEvent, st.integers(0, 60), st.sampled_from(units)), max_size=2)),
        key=lambda f: (f.time, f.component)) if data.draw(rare) else []
    # Place sets name nodes on a flat machine and blocks on Blue Gene/P; some jobs go to a
    # second queue, mapped elsewhere or nowhere.
    names = units if kind.is_flat else sorted(machine.names)
    for job in jobs:
        if data.draw(st.booleans()):
            job.queue = "other"
    places = {}
    if always_places or data.draw(rare):
        places = {"default": frozenset(names[: len(names) // 2 + 1])}
        if data.draw(st.booleans()):
            places["other"] = frozenset(names[len(names) // 3:])
    limit = 2 if data.draw(rare) else None
    reservations = data.draw(reserved(kind)) if data.draw(rare) else None
    window = 2 if data.draw(rare) else 1
    return jobs, policy, failures, places, limit, reservations, window


def passes_alike(data, kind, plain: bool) -> None:
    """Replay one random workload with and without the shortcuts; `plain`: mostly without
    failures, place sets, reservations or windows (the flat machine's two-level path)."""
    rare = st.sampled_from([True, False, False, False]) if plain else st.booleans()
    case = scenario(data, kind, ["fcfs", "fcfs", "wfp3"], rare)
    got = replay(case, kind, Backfill.EASY, easy_shortcuts=True)
    want = replay(case, kind, Backfill.EASY, easy_shortcuts=False)
    for g, w in zip(got[0], want[0], strict=True):
        assert g == w, f"pass at {w[0]}: with shortcuts {g}, asking every job {w}"
    assert repr(got[1].outcomes) == repr(want[1].outcomes)
    assert got[1].skipped == want[1].skipped


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT4, FLAT8, FLAT13]))
def test_easy_on_a_flat_machine_passes_exactly_as_asking_the_planner_of_every_job(data, kind):
    passes_alike(data, kind, plain=True)


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT8, BGP, BGP]))
def test_the_refused_runs_memo_passes_exactly_as_asking_the_planner_of_every_job(data, kind):
    passes_alike(data, kind, plain=False)
