"""The forked-replay fair start time against a reference kept here: the plain definition (seed 000
§4.2), one fork per job over the whole queue, with none of fairness.py's shortcuts.

fairness.py skips, under FCFS with W = 1, the jobs that cannot matter to a fork's pass and the
passes that can start nothing, and on a flat machine lets one fork serve consecutive jobs; every
fair start time must stay exactly the one the full fork gives, on a slice of a real trace (long
queues) and with times that are not whole seconds (the shortcut's guard must turn it off).
"""

from __future__ import annotations

import dataclasses

import pytest
from shared_paths import TRACES

from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.fairness import Settings, _sim_job, _states_at_submission, fair_start_times
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.swf import read_swf

LUBLIN = TRACES / "lublin_256.swf.gz"

pytestmark = pytest.mark.skipif(not LUBLIN.exists(), reason=f"{LUBLIN} is not available")


class _Found(Exception):
    pass


class _ReferenceFork(Qsim):
    target = -1

    def start_job(self, jobid: int, location: str) -> bool:
        started = super().start_job(jobid, location)
        if started and jobid == self.target:
            raise _Found
        return started


def reference_fair_starts(outcomes, machine_spec, backfill, settings):
    """Fork every job, no shortcut: the definition, as fairness.py computed it before."""
    fair = {}
    for target, t, running, queued in _states_at_submission(outcomes):
        machine = build_machine(load_description(machine_spec))
        fork = _ReferenceFork([], machine, settings.policy, backfill, window=settings.window)
        fork.target = target.jobid
        waiting = []
        for o in queued:
            job = _sim_job(o)
            job.start_time, job.location = -1.0, ""
            waiting.append(job)
        fork.resume(t, [_sim_job(o) for o in running], waiting)
        try:
            fork.scheduler.iterate()
            fork.run()
        except _Found:
            fair[target.jobid] = fork.clock.now()
    return fair


def lublin(limit):
    return read_swf(LUBLIN).jobs[:limit]


@pytest.mark.parametrize("policy_name, backfill, window", [
    ("fcfs", "easy", 1), ("fcfs", "none", 1), ("fcfs", "conservative", 1), ("fcfs", "easy", 2),
    ("wfp3", "easy", 1),
])
def test_fair_starts_equal_the_full_forks_on_lublin(policy_name, backfill, window):
    jobs = lublin(500)  # queues of dozens of jobs form within the first few hundred
    policy = builtin_policy(policy_name)
    machine = "flat:128"  # half the machine: longer queues, more forked passes
    result = Qsim(jobs, build_machine(load_description(machine)), policy, Backfill(backfill),
                  window=window).run()
    settings = Settings(policy, window)
    # A new Settings object at every call turns off the started-before-the-next-arrival
    # shortcut, so every job is forked through the pass-skipping path.
    fast = fair_start_times(result.outcomes, build_machine(load_description(machine)),
                            Backfill(backfill), lambda _t: Settings(policy, window), "replay")
    assert fast == reference_fair_starts(result.outcomes, machine, Backfill(backfill), settings)
    assert max(o.start_time - o.submit_time for o in result.outcomes) > 0


def test_fractional_times_take_the_full_fork():
    jobs = [dataclasses.replace(j, submit_time=j.submit_time + 0.3 * (j.jobid % 3))
            for j in lublin(300)]
    policy = builtin_policy("fcfs")
    machine = "flat:128"
    result = Qsim(jobs, build_machine(load_description(machine)), policy, Backfill.EASY).run()
    fast = fair_start_times(result.outcomes, build_machine(load_description(machine)),
                            Backfill.EASY, lambda _t: Settings(policy, 1), "replay")
    assert fast == reference_fair_starts(result.outcomes, machine, Backfill.EASY,
                                         Settings(policy, 1))
