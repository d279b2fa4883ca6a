"""A utility file is activated only when it is safe and every function behaves."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from cobaltlite.policy.loader import builtin_sample, load_and_validate
from cobaltlite.policy.registry import PolicyRegistry
from cobaltlite.policy.utility import PassInputs, PolicyError

INPUTS = PassInputs(now=1000.0, machine_size=64, n_s=1)


def policy_file(tmp_path: Path, text: str, mode: int = 0o644) -> Path:
    path = tmp_path / "policies.py"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_good_file_gives_one_policy_per_top_level_function(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "def _helper(x):\n    return x\n\n"
                       "def mine(queued_time, size):\n    return _helper(queued_time) * size\n")
    loaded = load_and_validate(path, [], INPUTS)
    assert list(loaded.functions) == ["mine"]
    assert len(loaded.sha256) == 64


def test_the_shipped_example_file_passes(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "etc" / "utility-functions.py"
    path = policy_file(tmp_path, example.read_text())
    assert "project_priority" in load_and_validate(path, [], INPUTS).functions


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        ("def broken(queued_time):\n    return queued_time +\n", 0o644,
         "policies.py:2: syntax error"),
        ("def boom(queued_time, jobid):\n    raise ValueError('bad job')\n", 0o644,
         "'boom' failed on job 1: ValueError: bad job"),
        ("def nan(queued_time):\n    return float('nan')\n", 0o644,
         "'nan' failed on job 1: returned a non-finite score (nan)"),
        ("def ok(queued_time):\n    return queued_time\n", 0o666,
         "writable by group or others (mode 0666)"),
        ("def wfp3(queued_time):\n    return 1\n", 0o644,
         "would overwrite the builtin policy"),
        ("def odd(queued_time, colour):\n    return 1\n", 0o644,
         "unknown input 'colour'"),
        ("x = 1\n", 0o644, "defines no utility function"),
        ("import time\ndef nap(queued_time):\n    return queued_time\n", 0o644,
         "policies.py:1: imports (math is provided) are not allowed"),
    ],
)
def test_a_bad_file_is_refused_with_a_message_naming_what_and_where(
    tmp_path: Path, text: str, mode: int, expected: str
) -> None:
    with pytest.raises(PolicyError) as refused:
        load_and_validate(policy_file(tmp_path, text, mode), [], INPUTS)
    assert expected in str(refused.value)


def test_a_function_that_never_returns_is_stopped_by_the_budget(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "def forever(queued_time):\n    while True:\n        pass\n")
    began = time.monotonic()
    with pytest.raises(PolicyError, match=r"did not finish .* within the 0\.5 s budget"):
        load_and_validate(path, [], INPUTS, budget=0.5)
    assert time.monotonic() - began < 5


def test_a_refused_reload_keeps_the_previous_functions(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "def site(queued_time):\n    return queued_time\n")
    registry = PolicyRegistry(path)
    first = registry.reload([], INPUTS, requested_by="root")
    assert first["outcome"] == "activated" and first["functions"] == ["site"]
    path.write_text("def site(queued_time):\n    return queued_time +\n")
    with pytest.raises(PolicyError):
        registry.reload([], INPUTS, requested_by="root")
    assert registry.get("site").function(queued_time=5) == 5
    assert registry.status()["last_reload"]["outcome"] == "refused"


def test_run_time_failures_leave_the_job_its_previous_score(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "def picky(size, queued_time):\n"
                       "    if size == 3:\n        raise ValueError('no 3-node jobs')\n"
                       "    return queued_time\n")
    registry = PolicyRegistry(path)
    registry.reload([], INPUTS, requested_by="root")  # the sample has no 3-node job
    jobs = builtin_sample(64, 1)[:2]
    jobs[1].size, jobs[1].score, jobs[1].threshold = 3, 42.0, 42.0
    failures = registry.get("picky").score_jobs_keeping(jobs, INPUTS)
    assert list(failures) == [jobs[1].jobid]
    assert (jobs[1].score, jobs[1].threshold) == (42.0, 42.0)
    assert jobs[0].score == jobs[0].queued_time


def test_a_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    import os
    import pwd

    from unix_users import ALICE, ensure_test_users

    ensure_test_users()
    path = policy_file(tmp_path, "def mine(queued_time):\n    return queued_time\n")
    os.chown(path, pwd.getpwnam(ALICE).pw_uid, -1)
    with pytest.raises(PolicyError, match="only root or the daemon's account"):
        load_and_validate(path, [], INPUTS)


def test_a_function_that_imports_at_run_time_is_refused(tmp_path: Path) -> None:
    # The watchdog cannot interrupt a C call such as time.sleep, so no import is possible.
    path = policy_file(tmp_path, "def nap(queued_time):\n    import time\n"
                       "    time.sleep(1000)\n    return queued_time\n")
    with pytest.raises(PolicyError, match=r"policies\.py:2: imports \(math is provided\)"):
        load_and_validate(path, [], INPUTS)


def test_common_exceptions_and_pure_builtins_are_available(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "def careful(queued_time, size):\n"
                       "    if size < 0:\n        raise RuntimeError('negative size')\n"
                       "    return round(max(queued_time, 1.0) * sum([size, 1]), 3)\n")
    assert "careful" in load_and_validate(path, [], INPUTS).functions


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("    return ().__class__.__mro__[1].__subclasses__() and queued_time\n",
         "attributes such as '__subclasses__'"),
        ("    return __builtins__ and queued_time\n", "names such as '__builtins__'"),
        ("    g = (x for x in [1])\n    return g.gi_frame.f_globals and queued_time\n",
         "attributes such as 'f_globals'"),
        ("    class Swallow:\n        pass\n    return queued_time\n", "class definitions"),
        ("    while True:\n        try:\n            pass\n        except BaseException:\n"
         "            pass\n", "handlers other than `except`"),
        ("    while True:\n        try:\n            pass\n        finally:\n"
         "            continue\n", "finally blocks"),
        ("    match queued_time:\n        case int(real=r):\n            return r\n",
         "match statements"),
        ("    yield queued_time\n", "generators"),
    ],
    ids=["subclasses", "dunder-name", "generator-frame", "class", "except-baseexception",
         "finally-continue", "match-class-pattern", "generator"],
)
def test_constructs_that_escape_the_sandbox_are_refused_with_file_and_line(
    tmp_path: Path, source: str, expected: str
) -> None:
    path = policy_file(tmp_path, "def escape(queued_time):\n" + source)
    with pytest.raises(PolicyError, match=r"policies\.py:\d+: " + re.escape(expected)):
        load_and_validate(path, [], INPUTS)


def test_attribute_names_in_strings_cannot_reach_objects(tmp_path: Path) -> None:
    path = policy_file(tmp_path, "def escape(queued_time):\n"
                       "    return getattr((), '__cl' + 'ass__') and queued_time\n")
    with pytest.raises(PolicyError, match="NameError: name 'getattr' is not defined"):
        load_and_validate(path, [], INPUTS)


def test_a_loop_that_catches_every_exception_it_may_name_is_still_stopped(
        tmp_path: Path) -> None:
    # Its handlers can name only Exception classes, and the watchdog raises a BaseException,
    # again and again, until the function has returned.
    path = policy_file(tmp_path, "def spin(queued_time):\n    while True:\n        try:\n"
                       "            while True:\n                pass\n"
                       "        except (Exception, ArithmeticError):\n            continue\n")
    started = time.monotonic()
    with pytest.raises(PolicyError, match=r"within the 0\.2 s budget"):
        load_and_validate(path, [], INPUTS, budget=0.2)
    assert time.monotonic() - started < 5
