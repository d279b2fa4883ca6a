"""Qsim's compiled parts (cobaltlite/_speedups.c) against their pure-Python twins: the job log's
bytes, the monitored series and the flat EASY pass's filter, on random input that reaches the C
code's every branch (odd names, ids past 64 bits, fractional times, dependencies, killed jobs,
failures; huge ints, NaN and subclasses of int), a whole replay's accounting.log and
summary.json both ways, no growth of memory over many runs, the switch
COBALTLITE_PURE, and that an install with a C compiler built the extension."""

from __future__ import annotations

import contextlib
import gc
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_paths import TRACES

from cobaltlite import compiled
from cobaltlite.qsim import joblog, metrics
from cobaltlite.qsim.engine import SimJob
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import python_easy_candidates

needs_compiled = pytest.mark.skipif(not compiled.COMPILED, reason=compiled.STATUS)


def test_an_install_with_a_c_compiler_built_the_extension() -> None:
    """hatch_build.py only warns when the build fails: here a failed build would show."""
    if os.environ.get("COBALTLITE_PURE") or os.environ.get("COBALTLITE_PURE_BUILD"):
        pytest.skip("the pure path was asked for")
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler})")
    assert compiled.COMPILED, compiled.STATUS
    assert joblog.AccountingObserver.__name__ == "CompiledAccountingObserver"


def test_cobaltlite_pure_forces_the_python_twins() -> None:
    code = ("from cobaltlite import compiled; from cobaltlite.qsim import joblog; "
            "print(compiled.COMPILED, joblog.AccountingObserver.__name__, compiled.STATUS)")
    env = {**os.environ, "COBALTLITE_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out == "False PureAccountingObserver pure Python (COBALTLITE_PURE is set)\n"


# ------------------------------------------------------------------------------- the job log

# Every kind of character a record quotes or escapes, non-ASCII blanks (U+00A0, U+2028) and
# letters, and the empty string.
ODD = st.text(st.sampled_from('ab \t"=,;\\\n\r\xa0\u2028é漢\x1c-:'), max_size=6)
NAMES = ODD | st.text(st.characters(codec="utf-8"), max_size=6)
TIMES: st.SearchStrategy[Any] = st.one_of(
    st.integers(0, 4 * 10**9), st.floats(0, 4e9, allow_nan=False),
    st.floats(0, 4e9, allow_nan=False).map(lambda t: float(int(t))))
DURATIONS: st.SearchStrategy[Any] = st.one_of(
    st.integers(0, 10**7), st.floats(0, 10**7, allow_nan=False))


@st.composite
def lives(draw: st.DrawFn) -> tuple[list[SimJob], list[tuple[Any, ...]]]:
    """Jobs and the observer calls of their lives (submitted, started, perhaps killed by a
    failure and started again, ended), interleaved, in time order as a replay makes them."""
    count = draw(st.integers(1, 8))
    ids = draw(st.lists(st.integers(0, 10**6) | st.integers(2**62, 2**70), min_size=count,
                        max_size=count, unique=True))
    jobs, events = [], []
    for k, jobid in enumerate(ids):
        submit = draw(TIMES)
        job = SimJob(jobid=jobid, size=draw(st.integers(1, 10**6)), wall_time=draw(DURATIONS),
                     run_time=1, submit_time=submit, user_name=draw(NAMES),
                     project=draw(NAMES), queue=draw(NAMES),
                     dependencies=tuple(draw(st.lists(st.sampled_from(ids[:k] or [1]),
                                                      max_size=3))),
                     exit_status=draw(st.integers(-(2**70), 2**70)))
        jobs.append(job)
        events.append((submit, k, "submitted", job, submit))
        at = submit
        for _ in range(draw(st.integers(0, 2))):  # runs that a failure kills
            at += draw(DURATIONS)
            events.append((at, k, "started", job, at, draw(NAMES)))
            at += draw(DURATIONS)
            events.append((at, k, "killed_by_failure", job, at, draw(st.text("ab-_0.",
                                                                              min_size=1))))
        at += draw(DURATIONS)
        events.append((at, k, "started", job, at, draw(NAMES)))
        at += draw(DURATIONS)
        events.append((at, k, "ended", job, at, draw(st.booleans())))
        if draw(st.booleans()):
            # A component's name is checked (no blank, '=', ';' or '"'), as a record id.
            events.append((at, k, "failed", draw(st.text("ab-_0.", min_size=1)), at, at + 5.5,
                           draw(st.lists(st.integers(0, 10**6), max_size=3))))
    events.sort(key=lambda e: (e[0], e[1]))
    return jobs, events


def write_log(observer_type: type[joblog.PureAccountingObserver], path: Path,
              events: list[tuple[Any, ...]]) -> bytes:
    """The log `observer_type` writes for `events`, replayed on fresh copies of the jobs."""
    copies: dict[int, SimJob] = {}
    observer = observer_type(path)
    for _, _, call, *args in events:
        if call == "failed":
            observer.failed(*args)
            continue
        job = copies.setdefault(id(args[0]), SimJob(**{
            name: getattr(args[0], name) for name in SimJob.__slots__}))
        if call == "started":
            job.start_time, job.location = args[1], args[2]
            observer.started(job, args[1])
        elif call == "killed_by_failure":
            observer.killed_by_failure(job, args[1], args[2])
            job.start_time = -1.0
        elif call == "ended":
            observer.ended(job, args[1], args[2])
        else:
            observer.submitted(job, args[1])
    observer.close()
    return path.read_bytes()


@needs_compiled
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(life=lives())
def test_the_compiled_job_log_writes_the_python_bytes(
        tmp_path: Path, life: tuple[list[SimJob], list[tuple[Any, ...]]]) -> None:
    _, events = life
    pure = write_log(joblog.PureAccountingObserver, tmp_path / "pure.log", events)
    fast = write_log(joblog.AccountingObserver, tmp_path / "compiled.log", events)
    assert fast == pure


@needs_compiled
def test_a_job_the_log_never_saw_fails_as_in_python(tmp_path: Path) -> None:
    job = SimJob(jobid=7, size=1, wall_time=60, run_time=1, submit_time=0, user_name="u",
                 project="p", queue="q")
    for observer_type in (joblog.PureAccountingObserver, joblog.AccountingObserver):
        observer = observer_type(tmp_path / "log")
        with pytest.raises(KeyError):
            observer.started(job, 5)
        observer.close()


# -------------------------------------------------------------------------------- the series

SERIES_TIMES: st.SearchStrategy[Any] = (st.integers(0, 200_000)
                                        | st.floats(0, 200_000, allow_nan=False))


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64), st.lists(st.tuples(SERIES_TIMES, SERIES_TIMES, SERIES_TIMES,
                                              st.integers(1, 64)), min_size=1, max_size=30),
       st.sampled_from((1800.0, 600.0, 3600)), st.integers(1, 5))
def test_the_compiled_series_is_the_python_series(
        machine: int, raw: list[tuple[Any, Any, Any, int]], step: float, drop: int) -> None:
    # Ties, zero waits and runs, int and float times; spans longer than the 24 h window and
    # drops of passed steps every few events (metrics._STEPS_DROPPED is thousands).
    outcomes = [JobOutcome(k, s, s + w, s + w + r, min(n, machine), min(n, machine), r, "x",
                           False) for k, (s, w, r, n) in enumerate(raw)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "_STEPS_DROPPED", drop)
        assert metrics.compiled_time_series(outcomes, machine, step) == \
            metrics.python_time_series(outcomes, machine, step)


@needs_compiled
def test_times_no_double_holds_take_the_python_loop() -> None:
    big = 2**53 + 1  # the double nearest is 2**53: the C loop would not be exact
    outcomes = [JobOutcome(1, big, big, big + 3600, 1, 1, 3600, "x", False)]
    assert metrics.compiled_time_series(outcomes, 4, 1800.0) is None
    assert metrics.time_series(outcomes, 4) == metrics.python_time_series(outcomes, 4, 1800.0)


# ------------------------------------------------------------------------------- EASY's filter

class Count(int):
    """A subclass of int: the C filter leaves it to Python."""


class PlainJob:
    """A job that is not a SimJob (the daemons' jobs are other classes), its size and wall time
    read through properties."""

    def __init__(self, size: Any, wall_time: Any) -> None:
        self._size, self._wall_time = size, wall_time

    @property
    def size(self) -> Any:
        return self._size

    @property
    def wall_time(self) -> Any:
        return self._wall_time


EDGES = [2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 2**63, 2**64, 10**400]
FILTER_INTS = st.integers(-10, 300) | st.integers(-(2**63), 2**63 - 1) | st.sampled_from(EDGES)
FILTER_TIMES: st.SearchStrategy[Any] = st.one_of(
    st.integers(-10**6, 10**9), FILTER_INTS, st.floats(allow_nan=True),
    st.floats(-1e6, 1e9).map(lambda t: float(int(t)) + 0.5), st.sampled_from(
        [float(2**53), float(2**63), -float(2**63), 9.2e18, float("inf"), float("-inf")]),
    FILTER_INTS.map(Count))
PLAIN = st.one_of(st.integers(-10, 300), st.integers(-(2**62), 2**62),
                  st.floats(-1e12, 1e12, allow_nan=False))


@st.composite
def filter_jobs(draw: st.DrawFn, sizes: st.SearchStrategy[Any],
                times: st.SearchStrategy[Any]) -> list[Any]:
    jobs: list[Any] = []
    for k in range(draw(st.integers(0, 12))):
        size, wall_time = draw(sizes), draw(times)
        jobs.append(PlainJob(size, wall_time) if draw(st.booleans()) else
                    SimJob(jobid=k, size=size, wall_time=wall_time, run_time=1, submit_time=0,
                           user_name="u", project="p", queue="q"))
    return jobs


def python_filter(jobs: list[Any], *numbers: Any) -> list[Any] | type[Exception]:
    try:
        return python_easy_candidates(jobs, *numbers)
    except Exception as exc:  # float + an int past a double: OverflowError
        return type(exc)


@needs_compiled
@settings(max_examples=2000, deadline=None)
@given(filter_jobs(FILTER_INTS | FILTER_INTS.map(Count) | st.floats(-1e3, 1e3),
                   FILTER_TIMES),
       FILTER_INTS | FILTER_INTS.map(Count), FILTER_INTS | FILTER_INTS.map(Count),
       FILTER_TIMES, FILTER_TIMES)
def test_the_compiled_easy_filter_is_the_comprehension(
        jobs: list[Any], idle: Any, extra: Any, now: Any, shadow: Any) -> None:
    """Same jobs in the same order, or None where only Python is exact (which then answers,
    or raises as it would have)."""
    from cobaltlite._speedups import easy_candidates

    expected = python_filter(jobs, idle, extra, now, shadow)
    try:
        got = easy_candidates(jobs, idle, extra, now, shadow)
    except Exception as exc:  # an error raised in C must be Python's
        assert expected is type(exc)
        return
    if got is not None:
        assert isinstance(expected, list)
        assert [id(job) for job in got] == [id(job) for job in expected]


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(filter_jobs(st.integers(-10, 300), PLAIN), st.integers(-10, 300),
       st.integers(-10, 300), PLAIN, PLAIN | st.floats())
def test_the_compiled_easy_filter_answers_for_ints_and_floats(
        jobs: list[Any], idle: int, extra: int, now: Any, shadow: Any) -> None:
    """Without a subclass of int, an int past 2**62 or another type, C answers (no fallback)."""
    from cobaltlite._speedups import easy_candidates

    got = easy_candidates(jobs, idle, extra, now, shadow)
    assert got is not None
    assert [id(job) for job in got] == [id(job) for job in python_easy_candidates(
        jobs, idle, extra, now, shadow)]


@needs_compiled
def test_the_compiled_easy_filter_compares_ints_with_floats_exactly() -> None:
    """Python compares an int with a float exactly; a C cast to double would round 2**53 + 1
    down and let the job through."""
    from cobaltlite._speedups import easy_candidates

    job = PlainJob(1, 2**53 + 1)
    assert easy_candidates([job], 1, 0, 0, float(2**53)) == [] == python_easy_candidates(
        [job], 1, 0, 0, float(2**53))
    # float + int rounds the int to a double first, as Python does: the sum ends by shadow
    assert easy_candidates([job], 1, 0, 0.0, float(2**53)) == [job]
    assert python_easy_candidates([job], 1, 0, 0.0, float(2**53)) == [job]


@needs_compiled
def test_the_compiled_easy_filter_raises_what_python_raises() -> None:
    from cobaltlite._speedups import easy_candidates

    class NoWallTime:
        size = 1

    with pytest.raises(AttributeError, match="wall_time"):
        easy_candidates([PlainJob(1, 5), NoWallTime()], 4, 0, 0, 10)
    # as in Python, the wall time of a job larger than the idle nodes is never read
    assert easy_candidates([NoWallTime()], 0, 0, 0, 10) == []


@needs_compiled
def test_the_compiled_easy_filter_reads_slots_as_python_does() -> None:
    """C reads a slot found through the job's type: a subclass's property wins over it, an
    unset slot raises AttributeError, and a property that runs code sees its effect."""
    from cobaltlite._speedups import easy_candidates

    def sim(size: Any, wall_time: Any) -> SimJob:
        return SimJob(jobid=0, size=size, wall_time=wall_time, run_time=1, submit_time=0,
                      user_name="u", project="p", queue="q")

    class Halved(SimJob):
        @property  # type: ignore[override]
        def size(self) -> int:
            return self._size // 2

        @size.setter
        def size(self, value: int) -> None:
            self._size = value

    plain, halved, unset = sim(4, 5), Halved(0, 4, 5, 1, 0, "u", "p", "q"), sim(1, 5)
    assert easy_candidates([plain, halved], 2, 0, 0, 10) == [halved]
    del unset.wall_time
    for jobs in ([plain, unset], [unset]):
        with pytest.raises(AttributeError, match="wall_time"):
            easy_candidates(jobs, 4, 0, 0, 10)

    later = sim(1, 5)

    class Unsets:
        size, wall_time = 1, 100

        def __getattribute__(self, name: str) -> Any:
            if name == "wall_time":
                with contextlib.suppress(AttributeError):
                    del later.wall_time
            return object.__getattribute__(self, name)

    with pytest.raises(AttributeError, match="wall_time"):
        easy_candidates([sim(1, 5), Unsets(), later], 4, 0, 0, 10)


# ------------------------------------------------------------------------------- memory

def grows(run: Any, rounds: int = 20) -> int:
    """Bytes still allocated after `rounds` more runs than after the first few."""
    tracemalloc.start()
    try:
        for _ in range(3):
            run()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            run()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


LEAK = 64 * 1024
"""More than the noise of the test process's own allocations (a few kilobytes), and less than
one small object per record or per job of the runs below would keep."""


@needs_compiled
def test_many_logs_leave_no_memory_and_no_references_behind(tmp_path: Path) -> None:
    jobs = [SimJob(jobid=10**6 + i, size=1 + i % 7, wall_time=60.5 * i, run_time=1,
                   submit_time=10**9 + 10 * i, user_name=f"u {i % 3}", project="p=1",
                   queue="é", dependencies=(i - 1,), location=f"n {i}",
                   exit_status=2**70 + i)
             for i in range(1, 400)]
    times = [(job.submit_time, job.submit_time + 0.5, job.submit_time + 7.0) for job in jobs]

    def log() -> None:
        observer = joblog.AccountingObserver(tmp_path / "log")
        for job, (submit, start, end) in zip(jobs, times, strict=True):
            observer.submitted(job, submit)
            observer.started(job, start)
            observer.ended(job, end, job.jobid % 2 == 0)
        observer.close()

    # Objects of these jobs' own (no small ints or shared strings, which others hold too).
    watched = [obj for job, when in zip(jobs[:50], times, strict=False) for obj in (
        job, job.jobid, job.user_name, job.location, job.exit_status, *when)]
    counts = [sys.getrefcount(obj) for obj in watched]
    assert grows(log) < LEAK
    assert [sys.getrefcount(obj) for obj in watched] == counts


@needs_compiled
def test_many_series_leave_no_memory_behind() -> None:
    outcomes = [JobOutcome(i, 10 * i, 10 * i + 5, 10 * i + 4000.5, 2, 2, 60, "x", False)
                for i in range(2000)]
    assert grows(lambda: metrics.compiled_time_series(outcomes, 64, 600.0)) < LEAK


# ---------------------------------------------------------------------------- whole replays

@needs_compiled
@pytest.mark.parametrize("options", [
    ["--machine", "flat:256", "--backfill", "easy"],
    # failures: FAIL, A and R records between the compiled ones; wall-time kills: A records
    ["--machine", "flat:64:4", "--backfill", "conservative", "--mtbf", "200",
     "--failure-seed", "3"],
], ids=["easy", "failures"])
def test_a_replay_writes_the_same_files_both_ways(tmp_path: Path, options: list[str]) -> None:
    """Every compiled part at once, the EASY filter on its path too (the EASY replay's passes
    take the flat shortcut)."""
    outputs = {}
    for mode in ("compiled", "pure"):
        env = {**os.environ, "COBALTLITE_PURE": "1" if mode == "pure" else ""}
        out = tmp_path / mode
        subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--trace",
                        str(TRACES / "lublin_256.swf.gz"), "--policy", "fcfs", *options,
                        "--end", "1000000", "--out", str(out), "-q"],
                       env=env, check=True, capture_output=True)
        outputs[mode] = ((out / "accounting.log").read_bytes(),
                         (out / "summary.json").read_bytes())
    assert outputs["compiled"][0].count(b";E;") > 500
    assert outputs["compiled"] == outputs["pure"]
