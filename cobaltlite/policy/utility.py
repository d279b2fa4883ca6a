"""Utility functions (seed 003 §IV-A): plain Python functions that score queued jobs.

A utility function declares the inputs it wants as parameter names, using Cobalt's names:

    def wfp3(queued_time, wall_time, size):
        return (queued_time / wall_time) ** 3 * size

Its signature is inspected once, when it is loaded, and turned into a direct call; nothing is
evaluated from strings per job. It returns either a bare score or a pair (score, fallback
threshold). A bare score means the threshold equals the score (TH = 1): if the top job cannot
start, only jobs scoring strictly above its threshold may start ahead of it, so a bare score lets
no job pass the top one.

Scores are *assigned* at each pass (as seed 003 and Cobalt's Qsim do), not added to a running
sum as Cobalt's cqm did; see docs/policy-guide.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

from cobaltlite.choices import BUILTIN_POLICIES
from cobaltlite.errors import CobaltliteError

JOB_INPUTS: dict[str, str] = {
    "queued_time": "seconds since the job was submitted",
    "wall_time": "requested wall time in seconds",
    "size": "nodes the job asked for",
    "user_name": "the job owner's login name",
    "project": "the project (account) the job is charged to",
    "queue": "the queue the job sits in",
    "queue_priority": "the priority of that queue (an integer)",
    "jobid": "the job id (an integer)",
}
PASS_INPUTS: dict[str, str] = {
    "machine_size": "compute nodes of the whole machine",
    "n_s": "the smallest block size jobs are placed on (seed 003 Table II)",
    "max_queued_time": "the longest queued_time among the jobs being scored",
    "max_wall_time": "the longest wall_time among the jobs being scored",
    "min_wall_time": "the shortest wall_time among the jobs being scored",
    "now": "the current time in seconds",
}
USER_INPUTS: dict[str, str] = {
    "user_usage": "the job owner's decayed usage as a share of the machine, 0 to 1 (half-life "
                  "configurable; cobaltlite/policy/usage.py); read only by functions naming it",
}
_QUEUE_STATS = frozenset({"max_queued_time", "max_wall_time", "min_wall_time"})


def _no_usage(_user: str) -> float:
    """Where no usage is kept (a policy check on sample jobs): nobody has used anything."""
    return 0.0


class PolicyError(CobaltliteError):
    """A utility function cannot be loaded, or failed on a job (names both)."""


class ScoredJob(Protocol):
    """What scoring reads from a job and writes back to it."""

    jobid: int
    queued_time: float
    wall_time: float
    size: int
    user_name: str
    project: str
    queue: str
    queue_priority: int
    score: float
    threshold: float


@dataclass(slots=True)
class PassInputs:
    """The values every job of one scoring pass shares."""

    now: float
    machine_size: int
    n_s: int
    max_queued_time: float = 0.0
    max_wall_time: float = 0.0
    min_wall_time: float = 0.0
    # user -> `user_usage`, called per job only by functions that name that input (so usage
    # costs nothing to the others); a UsageLedger's `share` where usage is kept.
    user_usage: Callable[[str], float] = _no_usage


@dataclass(frozen=True)
class UtilityFunction:
    """A named policy: the function, the inputs it reads, its options and its adapter."""

    name: str
    function: Callable[..., Any]
    parameters: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    # The generated adapter: call(function, job, pass_inputs, options) -> raw result.
    call: Callable[..., Any] = field(repr=False, default=lambda *a: None)
    rank_key: Callable[[Any], Any] | None = field(repr=False, default=None)
    """For a policy whose rank order cannot change between passes (FIXED_ORDERS): a sort key,
    ascending in rank order (score descending, then job id), read from what never changes while
    a job waits. Such a policy returns bare scores, so no job passes the top one (seed 003
    §IV-A): a replay may keep its queue in this order and skip scoring. None: rank by score."""

    @property
    def needs_queue_stats(self) -> bool:
        return not _QUEUE_STATS.isdisjoint(self.parameters)

    @property
    def scores_arrays(self) -> bool:
        """Whether a function of ARRAY_FUNCTIONS gives, from numpy arrays of the inputs, the
        scores of a whole queue (with their defaults: a tunable set takes the per-job path)."""
        return self.function in ARRAY_FUNCTIONS and not self.options

    @property
    def scores_per_user(self) -> bool:
        """Whether the function reads only per-user inputs and gives a bare score
        (PER_USER_FUNCTIONS, with their defaults): every job of a user scores alike, so one
        call per user scores a whole queue, exactly."""
        return self.function in PER_USER_FUNCTIONS and not self.options

    @property
    def needs_user_usage(self) -> bool:
        """Whether the function reads per-user usage: callers keep usage only if some does."""
        return not USER_INPUTS.keys().isdisjoint(self.parameters)

    def score_jobs(self, jobs: Sequence[ScoredJob], inputs: PassInputs) -> None:
        """Set `score` and `threshold` on every job; raise PolicyError naming the job at fault
        (for replays, where a policy that fails must stop the run)."""
        failures = self.score_jobs_keeping(jobs, inputs)
        if failures:
            jobid, error = next(iter(failures.items()))
            raise PolicyError(f"utility function {self.name!r} failed on job {jobid}: {error}")

    def score_jobs_keeping(self, jobs: Sequence[ScoredJob], inputs: PassInputs) -> dict[int, str]:
        """Like score_jobs, but a job the function fails on keeps its previous score and
        threshold; returns {jobid: error} for those jobs. For live scheduling, where one bad
        job or function must not stop the others."""
        if self.needs_queue_stats and jobs:
            inputs.max_queued_time = max(j.queued_time for j in jobs)
            walls = [j.wall_time for j in jobs]
            inputs.max_wall_time, inputs.min_wall_time = max(walls), min(walls)
        call, function, options = self.call, self.function, self.options
        isfinite = math.isfinite
        failures: dict[int, str] = {}
        for job in jobs:
            try:
                raw = call(function, job, inputs, options)
                if type(raw) is tuple:
                    score, threshold = float(raw[0]), float(raw[1])
                else:
                    score = threshold = float(raw)
            except Exception as exc:
                failures[job.jobid] = f"{type(exc).__name__}: {exc}"
                continue
            if isfinite(score) and isfinite(threshold):
                job.score, job.threshold = score, threshold
            elif type(raw) is tuple:
                failures[job.jobid] = (f"returned a non-finite (score, threshold) "
                                       f"({score!r}, {threshold!r})")
            else:
                failures[job.jobid] = f"returned a non-finite score ({score!r})"
        return failures


def make_utility(
    function: Callable[..., Any], name: str | None = None, options: Mapping[str, Any] | None = None
) -> UtilityFunction:
    """Inspect `function` once and build its direct-call adapter.

    Every parameter must be a known input or have a default (a tunable, such as the balance
    factor, that `options` may set).
    """
    name = name or function.__name__
    options = dict(options or {})
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"utility function {name!r}: cannot read its signature: {exc}") from None
    inputs: list[str] = []
    tunables: set[str] = set()
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise PolicyError(
                f"utility function {name!r}: parameter {param.name!r} must be a plain named "
                "parameter (no *args, **kwargs or positional-only parameters)"
            )
        if param.name in JOB_INPUTS or param.name in PASS_INPUTS or param.name in USER_INPUTS:
            inputs.append(param.name)
        elif param.default is not param.empty:
            tunables.add(param.name)
        else:
            known = ", ".join(sorted({*JOB_INPUTS, *PASS_INPUTS, *USER_INPUTS}))
            raise PolicyError(
                f"utility function {name!r}: unknown input {param.name!r} "
                f"(known inputs: {known}; other parameters need a default value)"
            )
    unknown = set(options) - tunables
    if unknown:
        raise PolicyError(
            f"utility function {name!r} has no tunable parameter {', '.join(sorted(unknown))}"
            + (f" (it has: {', '.join(sorted(tunables))})" if tunables else "")
        )
    return UtilityFunction(name, function, tuple(inputs), options, _adapter(inputs, bool(options)))


def _adapter(inputs: Iterable[str], with_options: bool) -> Callable[..., Any]:
    """Compile `lambda f, j, c, o: f(queued_time=j.queued_time, n_s=c.n_s, ..., **o)`
    (`user_usage=c.user_usage(j.user_name)` for the per-user input).

    Generated once per function from validated identifiers (never from user text), this turns
    per-job scoring into one plain call with attribute reads, the cheapest Python can do.
    """
    args = [f"{p}=j.{p}" if p in JOB_INPUTS else
            f"{p}=c.{p}(j.user_name)" if p in USER_INPUTS else f"{p}=c.{p}" for p in inputs]
    if with_options:
        args.append("**o")
    namespace: dict[str, Any] = {}
    exec(f"def call(f, j, c, o):\n    return f({', '.join(args)})\n", namespace)
    return namespace["call"]


# ---- built-in policies --------------------------------------------------------------------
# Seed 003 Table II, written exactly as the paper gives them, with q = queued_time,
# t = wall_time, n = size and n_s the smallest block size.


def fcfs(queued_time):
    """S = q: first come, first served."""
    return queued_time


def fat(queued_time, wall_time, size, n_s):
    """S = (q/t)·(n/n_s)^3: favours large jobs, then old and short ones."""
    return (queued_time / wall_time) * (size / n_s) ** 3


def wfp1(queued_time, wall_time, size):
    """S = (q/t)·n: favours old/short jobs, avoiding large-job starvation."""
    return (queued_time / wall_time) * size


def wfp3(queued_time, wall_time, size):
    """S = (q/t)^3·n: favours old/short jobs more, avoiding large-job starvation."""
    return (queued_time / wall_time) ** 3 * size


def fcsj(queued_time, wall_time):
    """S = q/t: old and short jobs first, whatever their size."""
    return queued_time / wall_time


def unicef(queued_time, wall_time, size):
    """S = q/(log2(n)·t): fast turnaround for small jobs.

    log2(1) = 0 makes the paper's formula undefined for one-node jobs (they never occur on
    Blue Gene/P, where n >= 64); we take n = max(n, 2) so they score as two-node jobs.
    """
    return queued_time / (math.log2(max(size, 2)) * wall_time)


def default(queue_priority):
    """Cobalt's builtin: queue priority + 0.1 (ties fall to the lower job id)."""
    return queue_priority + 0.1


def high_prio():
    """Cobalt's builtin for urgent queues: every job scores 1.0."""
    return 1.0


def balanced(
    queued_time, wall_time, max_queued_time, max_wall_time, min_wall_time, balance_factor=1.0
):
    """Seed 000 eqs. 1-3: S_p = BF·S_w + (1-BF)·S_r, each part scaled to [0, 100].

    S_w = 100·wait/wait_max (0 when wait_max = 0); S_r = 100·(wt_max - wt)/(wt_max - wt_min)
    (0 when wt_max = wt_min). BF = 1 is FCFS; BF = 0 is shortest-job-first.
    """
    s_w = 100.0 * queued_time / max_queued_time if max_queued_time > 0 else 0.0
    spread = max_wall_time - min_wall_time
    s_r = 100.0 * (max_wall_time - wall_time) / spread if spread > 0 else 0.0
    return balance_factor * s_w + (1.0 - balance_factor) * s_r


def fairshare(user_usage):
    """S = 1/(1 + u), u the owner's decayed usage share: the user who used least goes first;
    a user's own jobs (equal scores) keep submission order (seed 004 §4's fairshare; the
    formula is ours, docs/fairness.md)."""
    return 1.0 / (1.0 + user_usage)


PER_USER_FUNCTIONS = frozenset({fairshare})
"""Builtins whose score depends on the job's owner alone (`UtilityFunction.scores_per_user`)."""


def _wfp3_on_arrays(queued_time, wall_time, size):
    """`wfp3` on numpy arrays, cubed by two products (numpy's power of 3 is a slow pow)."""
    ratio = queued_time / wall_time
    return ratio * ratio * ratio * size


def _fat_on_arrays(queued_time, wall_time, size, n_s):
    """`fat` on numpy arrays, cubed by two products (numpy's power of 3 is a slow pow)."""
    share = size / n_s
    return (queued_time / wall_time) * (share * share * share)


def _unicef_on_arrays(queued_time, wall_time, size):
    """`unicef` on numpy arrays of its inputs (math.log2 and max take one number)."""
    import numpy as np

    return queued_time / (np.log2(np.maximum(size, 2)) * wall_time)


def _balanced_on_arrays(queued_time, wall_time, max_queued_time, max_wall_time, min_wall_time):
    """`balanced` on numpy arrays with its default balance factor, the only one scored on
    arrays (`UtilityFunction.scores_arrays`): BF = 1 weighs S_r by 0, and 1·S_w + 0·S_r is S_w
    exactly (S_r is finite and not negative), so S_r, half the work, is not computed."""
    return 100.0 * queued_time / max_queued_time if max_queued_time > 0 else 0.0


ARRAY_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    fat: _fat_on_arrays, wfp1: wfp1, wfp3: _wfp3_on_arrays, fcsj: fcsj, unicef: _unicef_on_arrays,
    balanced: _balanced_on_arrays}
"""Builtins -> a function that, called with numpy arrays of their numeric job inputs (the pass
inputs, `balanced`'s queue statistics included, as numbers), scores a whole
queue in one call: the builtin itself when written in arithmetic alone, else the same formula
in numpy's terms (qsim/fork.py's start estimates use it to find the jobs that matter to a pass;
the exact scores still come from the per-job call, and the estimate scores near ties again one
by one, so a few units in the last place between the two ways change no rank)."""


# The functions above by name; the names live in cobaltlite/choices.py so that `qsim --help` can
# list them without importing this module.
BUILTIN_FUNCTIONS: dict[str, Callable[..., Any]] = {name: globals()[name]
                                                     for name in BUILTIN_POLICIES}


FIXED_ORDERS: dict[str, Callable[[Any], Any]] = {
    # S = now - submit_time: the earlier submission scores higher at every pass. (Two submit
    # times closer than the float spacing of `now` tie on the score and go by job id instead;
    # the key orders them by submit time, which is what first come, first served means.)
    "fcfs": attrgetter("submit_time", "jobid"),
    # S = queue_priority + 0.1, fixed when the job is queued.
    "default": lambda job: (-job.queue_priority, job.jobid),
    # S = 1.0 for every job: job id order.
    "high_prio": attrgetter("jobid"),
}
"""The builtins whose rank order cannot change between passes, with their `rank_key`."""


def builtin_policy(name: str, options: Mapping[str, Any] | None = None) -> UtilityFunction:
    """A builtin by name, case-insensitively (`WFP3` and `wfp3` are the same policy)."""
    function = BUILTIN_FUNCTIONS.get(name.lower())
    if function is None:
        raise PolicyError(
            f"unknown policy {name!r}; builtin policies: {', '.join(BUILTIN_FUNCTIONS)}"
        )
    policy = make_utility(function, function.__name__, options)
    return dataclasses.replace(policy, rank_key=FIXED_ORDERS.get(function.__name__))
