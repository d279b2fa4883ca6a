"""Loading a site's file of utility functions, safely (issue: hot-swapping utility functions).

Cobalt exec'd the file, swallowed errors and silently replaced a failing policy by `default`
(reference §4.1). Here a file becomes active only after it has passed every check:

1. the file is owned by root or the daemon's account and not writable by group or others;
2. it compiles (a syntax error names file and line) and passes the static screen of
   cobaltlite.policy.screen (no introspection, no handler that could catch the watchdog);
3. each top-level function is a valid utility function (its parameters are known inputs) and
   none takes the name of a builtin policy;
4. each function runs on the current queued jobs (or a built-in sample when there are none)
   within the time budget and returns finite numbers (a failure names function, job, error).

Any failure rejects the whole file and the previous functions stay active.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import math
import os
import stat
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from cobaltlite.policy.budget import BudgetExceeded, run_with_budget
from cobaltlite.policy.screen import screen_source
from cobaltlite.policy.utility import (
    BUILTIN_FUNCTIONS,
    PassInputs,
    PolicyError,
    UtilityFunction,
    make_utility,
)

DEFAULT_BUDGET = 2.0
"""Seconds one policy may spend scoring one pass (and each function at validation)."""


SAFE_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name)
    for name in (
        "abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate", "filter",
        "float", "format", "frozenset", "hash", "int", "isinstance",
        "issubclass", "iter", "len", "list", "map", "max", "min", "next", "pow", "range",
        "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
        "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError",
        "KeyError", "LookupError", "NotImplementedError", "OverflowError", "RuntimeError",
        "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
    )
}
"""What a utility file's code may call: pure computations only. No __import__, open, eval,
exec, compile or input, and no getattr or hasattr (attribute names in strings would pass by
the static screen, cobaltlite.policy.screen)."""
_EXCEPTION_NAMES = frozenset(
    name for name, value in SAFE_BUILTINS.items()
    if isinstance(value, type) and issubclass(value, Exception))


@dataclass(frozen=True)
class PolicyFile:
    path: str
    sha256: str
    functions: Mapping[str, UtilityFunction]


@dataclass(slots=True)
class SampleJob:
    """A job for validation: the current queue's jobs, or the built-in sample."""

    jobid: int
    queued_time: float
    wall_time: float
    size: int
    user_name: str = "sample"
    project: str = "sample"
    queue: str = "default"
    queue_priority: int = 0
    score: float = 0.0
    threshold: float = 0.0


def builtin_sample(machine_size: int, n_s: int) -> list[SampleJob]:
    """Jobs that exercise the corners: just submitted, tiny, whole machine, long waits."""
    sizes = sorted({1, n_s, max(1, machine_size // 2), machine_size})
    jobs: list[SampleJob] = []
    for i, (queued, wall) in enumerate([(0.0, 60.0), (30.0, 3600.0), (86400.0, 600.0),
                                        (7 * 86400.0, 86400.0)]):
        for size in sizes:
            jobs.append(SampleJob(len(jobs) + 1, queued, wall, size, queue_priority=i))
    return jobs


def check_file_safety(path: Path) -> None:
    """Refuse a file someone other than root or this account could have written."""
    try:
        info = path.stat()
    except OSError as exc:
        raise PolicyError(f"utility file {path}: cannot read it: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise PolicyError(f"utility file {path}: not a regular file")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PolicyError(
            f"utility file {path}: writable by group or others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); anyone who can write it could run code in "
            f"the queue manager. Fix with: chmod go-w {path}")
    if info.st_uid not in (0, os.getuid()):
        raise PolicyError(
            f"utility file {path}: owned by uid {info.st_uid}; only root or the daemon's "
            f"account (uid {os.getuid()}) may own it")


def compile_file(path: Path, options: Mapping[str, Mapping[str, Any]] | None = None) -> PolicyFile:
    """Steps 1-3: safety, compilation, and turning each top-level function into a policy."""
    check_file_safety(path)
    source = path.read_bytes()
    try:
        tree = ast.parse(source, str(path))
    except SyntaxError as exc:
        raise PolicyError(f"utility file {path}:{exc.lineno}: syntax error: {exc.msg}") from None
    screen_source(tree, path, _EXCEPTION_NAMES)
    code = compile(tree, str(path), "exec")
    # The functions see `math` and a set of pure builtins, cannot import (the screen refused
    # it) and cannot introspect: no I/O, no sleeping, nothing the watchdog could not
    # interrupt, nothing that reaches the daemon's objects.
    namespace: dict[str, Any] = {"math": math, "__name__": "cobaltlite_site_policies",
                                 "__builtins__": SAFE_BUILTINS}
    try:
        run_with_budget(lambda: exec(code, namespace), DEFAULT_BUDGET)
    except BudgetExceeded:
        raise PolicyError(f"utility file {path}: running its top level took more than "
                          f"{DEFAULT_BUDGET:g} s") from None
    except Exception as exc:
        raise PolicyError(f"utility file {path}: running its top level failed: "
                          f"{type(exc).__name__}: {exc}") from None
    functions: dict[str, UtilityFunction] = {}
    for name, value in namespace.items():
        if not isinstance(value, types.FunctionType) or value.__code__.co_filename != str(path):
            continue  # helpers imported or defined elsewhere are not policies
        if name.startswith("_"):
            continue  # a leading underscore marks a helper
        if name.lower() in BUILTIN_FUNCTIONS:
            raise PolicyError(f"utility file {path}: function {name!r} would overwrite the "
                              "builtin policy of that name; rename it")
        functions[name] = make_utility(value, name, (options or {}).get(name))
    if not functions:
        raise PolicyError(f"utility file {path}: defines no utility function")
    return PolicyFile(str(path), hashlib.sha256(source).hexdigest(), functions)


def validate(
    policies: PolicyFile, jobs: Sequence[Any], inputs: PassInputs,
    budget: float = DEFAULT_BUDGET,
) -> None:
    """Step 4: run every function on `jobs` (copies: real scores are not touched)."""
    for name, function in policies.functions.items():
        sample = [SampleJob(j.jobid, j.queued_time, j.wall_time, j.size, j.user_name,
                            j.project, j.queue, j.queue_priority) for j in jobs]
        try:
            run_with_budget(partial(function.score_jobs, sample, inputs), budget)
        except BudgetExceeded:
            raise PolicyError(f"utility function {name!r} did not finish {len(sample)} jobs "
                              f"within the {budget:g} s budget (an endless loop?)") from None


def load_and_validate(
    path: Path, jobs: Sequence[Any], inputs: PassInputs, budget: float = DEFAULT_BUDGET,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> PolicyFile:
    """All four steps; the result may be activated."""
    policies = compile_file(path, options)
    if not jobs:
        jobs = builtin_sample(inputs.machine_size, inputs.n_s)
    validate(policies, jobs, inputs, budget)
    return policies
