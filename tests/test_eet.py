"""Seed 004's expected end times (EET): Algorithm 1, the per-user metrics, the share models,
scoring a replay (`qsim --eet`) and a trace's recorded schedule (`qsim eet`), bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.errors import InputError
from cobaltlite.qsim.eet import (
    EqualShares,
    ExecutedJob,
    FixedShares,
    expected_end_times,
    load_shares,
    score_schedule,
)


def qsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", *args],
                          capture_output=True, text=True, timeout=300)


def per_second_algorithm_1(jobs: list[tuple[int, int, int]], capacity: float) -> list[int]:
    """The paper's Algorithm 1 as printed: a capacity cell per second."""
    free: defaultdict[int, float] = defaultdict(lambda: capacity)
    ends = []
    for arrival, cpus, run_time in jobs:
        remaining, t = cpus * run_time, arrival
        while remaining > 0:
            use = min(free[t], cpus)
            free[t] -= use
            remaining -= use
            t += 1
        ends.append(t)
    return ends


def test_seed_004_table_1_share_3_gives_eet_4_and_3() -> None:
    # T1/F2: job 1 arrives at 0 with 2 CPUs for 4 s, job 2 at 1 with 2 CPUs for 1 s.
    assert expected_end_times([(0, 2, 4), (1, 2, 1)], 3) == [4, 3]


def test_figure_3_two_such_users_on_six_cpus_meet_every_eet() -> None:
    # Both users' jobs run as submitted, side by side on a 6-CPU machine: 3 CPUs each.
    jobs = [ExecutedJob(1, "a", 0, 0, 4, 2), ExecutedJob(2, "a", 1, 1, 2, 2),
            ExecutedJob(3, "b", 0, 0, 4, 2), ExecutedJob(4, "b", 1, 4, 5, 2)]
    report = score_schedule(jobs, 6)
    assert report.eet == {1: 4, 2: 3, 3: 4, 4: 3}
    # Job 4 waited until 4 and ended at 5, past its EET of 3: late by 2 s on 2 CPUs.
    assert report.users["a"].violated == 0
    assert (report.users["b"].violated, report.users["b"].tardiness,
            report.users["b"].weighted_tardiness) == (1, 2, 4)
    summary = report.summary()
    assert summary["violated_jobs"] == 1 and summary["users_all_violated"] == 0
    assert summary["veet_percent_across_users"]["max"] == 50.0


def test_completion_exactly_at_the_eet_is_not_a_violation() -> None:
    report = score_schedule([ExecutedJob(1, "a", 0, 0, 10, 1)], 1)
    assert report.eet[1] == 10 and report.users["a"].violated == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 6), st.integers(1, 9)),
                min_size=1, max_size=12),
       st.sampled_from([1, 2, 3, 4.5, 8, 13]))
def test_step_profile_equals_the_per_second_algorithm(jobs: list[tuple[int, int, int]],
                                                      capacity: float) -> None:
    jobs.sort(key=lambda j: j[0])
    assert expected_end_times(jobs, capacity) == per_second_algorithm_1(jobs, capacity)


def test_equal_shares_divide_the_machine_among_the_active_users() -> None:
    jobs = [ExecutedJob(i, user, 0, 0, 1, 1) for i, user in enumerate("aab", 1)]
    report = score_schedule(jobs, 10, EqualShares())
    assert {u: s.share for u, s in report.users.items()} == {"a": 5.0, "b": 5.0}


def test_fixed_shares_must_sum_to_the_machine(tmp_path: Path) -> None:
    path = tmp_path / "shares.txt"
    path.write_text("alice 6\nbob 3  # a comment\n")
    jobs = [ExecutedJob(1, "alice", 0, 0, 1, 1), ExecutedJob(2, "bob", 0, 0, 1, 1)]
    with pytest.raises(InputError, match=r"shares.txt: the shares sum to 9 CPUs but the "
                                         r"machine has 10"):
        score_schedule(jobs, 10, load_shares(path))
    assert score_schedule(jobs, 9, load_shares(path)).users["alice"].share == 6
    with pytest.raises(InputError, match="no share for user\\(s\\) carol"):
        score_schedule([*jobs, ExecutedJob(3, "carol", 0, 0, 1, 1)], 9, FixedShares(
            {"alice": 6, "bob": 3}, "site shares"))


@pytest.mark.parametrize(("text", "problem"), [
    ("alice\n", r"shares.txt:1: expected 'USER CPUS'"),
    ("alice 2\nbob many\n", r"shares.txt:2: share 'many' of user bob is not a number"),
    ("alice 0\n", r"shares.txt:1: share '0' of user alice must be a number > 0"),
    ("alice 1\nalice 2\n", r"shares.txt:2: user alice has a share already"),
    ("# nobody\n", r"shares.txt: the share file lists no user"),
])
def test_a_bad_share_file_is_refused_naming_file_and_line(tmp_path: Path, text: str,
                                                          problem: str) -> None:
    path = tmp_path / "shares.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        load_shares(path)


SWF = """\
; a hand-made log: two users, one job without a recorded wait, one cancelled
1 0 0 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2 10 90 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
3 0 0 50 2 -1 -1 2 100 -1 1 2 1 -1 1 -1 -1 -1
4 5 -1 50 2 -1 -1 2 100 -1 1 2 1 -1 1 -1 -1 -1
5 6 3 0 2 -1 -1 2 100 -1 5 2 1 -1 1 -1 -1 -1
"""


def test_qsim_eet_scores_the_recorded_schedule_without_a_replay(tmp_path: Path) -> None:
    trace = tmp_path / "log.swf"
    trace.write_text(SWF)
    ran = qsim("eet", str(trace), "--machine", "flat:4", "--out", str(tmp_path / "out"))
    assert ran.returncode == 0, ran.stderr
    assert "2 jobs left out" in ran.stderr
    written = json.loads((tmp_path / "out" / "eet.json").read_text())
    eet = written["eet"]
    # Shares of 2 CPUs each. User 1: job 1 [0, 100) meets its EET of 100; job 2 (arrived at
    # 10) is packed after it, EET 200, and ran [100, 200): met. User 2: job 3 meets its EET.
    assert (eet["users"], eet["jobs"], eet["violated_jobs"]) == (2, 3, 0)
    assert eet["per_user"]["1"] == {"jobs": 2, "violated": 0, "share": 2.0, "tardiness": 0.0,
                                    "weighted_tardiness": 0.0}
    for figure in ("eet-boxplots.png", "eet-heatmap.png"):
        assert (tmp_path / "out" / figure).read_bytes()[:4] == b"\x89PNG"
    assert "violated EET jobs" in ran.stdout


def trace_and_shares(tmp_path: Path, shares_text: str) -> tuple[Path, Path]:
    """SWF and a share file with `shares_text` in tmp_path."""
    trace, shares = tmp_path / "log.swf", tmp_path / "shares.txt"
    trace.write_text(SWF)
    shares.write_text(shares_text)
    return trace, shares


def test_qsim_eet_refuses_shares_that_do_not_sum_to_the_machine(tmp_path: Path) -> None:
    trace, shares = trace_and_shares(tmp_path, "1 2\n2 1\n")
    out = tmp_path / "out"
    ran = qsim("eet", str(trace), "--machine", "flat:4", "--shares", str(shares),
               "--out", str(out))
    assert ran.returncode == 1
    assert f"qsim eet: error: {shares}: the shares sum to 3 CPUs but the machine has 4" \
        in ran.stderr
    assert not out.exists()  # nothing half-written


def test_qsim_eet_option_scores_a_replay_into_the_table_and_summary(tmp_path: Path) -> None:
    trace = tmp_path / "log.swf"
    trace.write_text(SWF)
    ran = qsim("--trace", str(trace), "--machine", "flat:4", "--policy", "fcfs,fairshare",
               "--eet", "--markdown", "--out", str(tmp_path / "out"), "-q")
    assert ran.returncode == 0, ran.stderr
    assert "| violated EET jobs (%) |" in ran.stdout
    summary = json.loads((tmp_path / "out" / "fcfs" / "summary.json").read_text())
    assert summary["metrics"]["eet"]["jobs"] == 4  # a replay needs no recorded wait
    assert summary["metrics"]["eet"]["share_model"] == "equal"
    assert (tmp_path / "out" / "fairshare" / "eet-heatmap.png").exists()


@pytest.mark.parametrize(("text", "says"), [
    ("1 2\n2 1\n", "the shares sum to 3 CPUs but the machine has 4"),
    ("1 4\n", "no share for user(s) 2"),
])
def test_qsim_eet_shares_are_refused_before_the_replay_writes_anything(
        tmp_path: Path, text: str, says: str) -> None:
    trace, shares = trace_and_shares(tmp_path, text)
    out = tmp_path / "out"
    ran = qsim("--trace", str(trace), "--machine", "flat:4", "--eet-shares", str(shares),
               "--out", str(out), "-q")
    assert ran.returncode == 1
    assert f"qsim: error: {shares}: {says}" in ran.stderr
    # qsim makes the --out directory before reading anything; no accounting.log or summary of
    # a replay whose scores cannot be given may land in it.
    assert not out.exists() or not list(out.iterdir())
