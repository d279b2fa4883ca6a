"""Qsim on the queue manager's rules: queues, restrictions, running limits and dependencies from a
queue configuration and a trace, and one scripted sequence driven through the live daemons and
through Qsim that must give the same decisions (their accounting logs compared)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import Instance

from cobaltlite.accounting import read_accounting_log
from cobaltlite.config import load_config
from cobaltlite.jobs.queues import load_queue_config
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim, ReplayResult
from cobaltlite.qsim.joblog import AccountingObserver
from cobaltlite.rpc.client import connect
from cobaltlite.traces.model import TraceJob


def queue_file(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    return load_queue_config(path)


def replay(jobs: list[TraceJob], config: list[dict[str, Any]] | None, nodes: int = 4,
           log: Path | None = None, **policies: Any) -> ReplayResult:
    observer = AccountingObserver(log) if log else None
    try:
        return Qsim(jobs, build_machine(load_description(f"flat:{nodes}")),
                    builtin_policy("fcfs"), observer=observer, queue_config=config,
                    policies={name: builtin_policy(name) for name in policies}).run()
    finally:
        if observer:
            observer.close()


def job(jobid: int, submit: int = 0, run: int = 100, wall: int = 200, nodes: int = 1,
        **fields: Any) -> TraceJob:
    return TraceJob(jobid=jobid, submit_time=submit, run_time=run, requested_time=wall,
                    nodes=nodes, **fields)


def starts(result: ReplayResult) -> dict[int, tuple[float, float]]:
    return {o.jobid: (o.start_time, o.end_time) for o in result.outcomes}


def test_restrictions_refuse_jobs_with_cobalts_messages(tmp_path: Path) -> None:
    config = queue_file(tmp_path, "queues:\n  default: {}\n  short:\n    maxtime: 2\n"
                        "    users: alice\n  closed:\n    state: draining\n")
    result = replay([job(1, queue="short", user="alice", wall=121),
                     job(2, queue="short", user="bob", wall=60),
                     job(3, queue="short", user="alice", wall=120),
                     job(4, queue="closed"), job(5, queue="nowhere"), job(6)], config)
    assert sorted(starts(result)) == [3, 6]
    assert result.skipped == [
        "job 1: Walltime greater than the 'short' queue max walltime of 00:02:00",
        "job 2: You are not allowed to submit to the 'short' queue",
        "job 4: The 'closed' queue is draining",
        "job 5: trying to add job to non-existent queue 'nowhere'",
    ]


def test_maxrunning_holds_a_users_jobs_until_the_running_one_ends(tmp_path: Path) -> None:
    config = queue_file(tmp_path, "queues:\n  default:\n    maxrunning: 1\n")
    result = starts(replay([job(1, user="alice"), job(2, user="alice"), job(3, user="bob")],
                           config))
    assert result[1] == (0, 100) and result[3] == (0, 100)
    assert result[2] == (100, 200)  # maxrun_hold until job 1 ended


def test_maxtotaljobs_and_totalnodes_limit_the_whole_queue(tmp_path: Path) -> None:
    config = queue_file(tmp_path, "queues:\n  default:\n    maxtotaljobs: 2\n"
                        "    totalnodes: 3\n")
    result = starts(replay([job(1, nodes=2), job(2, nodes=2), job(3), job(4)], config, nodes=8))
    assert result[1][0] == 0 and result[3][0] == 0  # 2 + 1 nodes, 2 jobs
    assert result[2][0] == 100 and result[4][0] == 100


def test_a_stopped_queue_takes_jobs_and_runs_none(tmp_path: Path) -> None:
    config = queue_file(tmp_path, "queues:\n  default: {}\n  later:\n    state: stopped\n")
    result = replay([job(1, queue="later"), job(2)], config)
    assert list(starts(result)) == [2]
    assert result.skipped == ["job 1: never ran (queue later is stopped)"]


def test_dependencies_wait_for_exit_zero_and_fail_otherwise() -> None:
    jobs = [job(1, run=50), job(2, dependencies=(1,)),
            job(3, run=500, wall=100), job(4, dependencies=(3,)),  # 3 is killed at its limit
            job(5, dependencies=(99,)),  # no such job
            job(6, run=10, extra={"Exit_status": "2"}), job(7, dependencies=(6,))]
    result = replay(jobs, None, nodes=8)
    got = starts(result)
    assert got[2][0] == 50  # started when job 1 ended with 0
    assert 4 not in got and 5 not in got and 7 not in got
    assert sorted(result.skipped) == ["job 4: never ran (dep_fail)",
                                      "job 5: never ran (dep_fail)",
                                      "job 7: never ran (dep_fail)"]


def test_a_refused_parent_fails_its_dependants(tmp_path: Path) -> None:
    config = queue_file(tmp_path, "queues:\n  default:\n    maxtime: 1\n")
    result = replay([job(1, wall=3600), job(2, wall=60, dependencies=(1,))], config)
    assert result.skipped == [
        "job 1: Walltime greater than the 'default' queue max walltime of 00:01:00",
        "job 2: never ran (dep_fail)"]


def test_each_queue_ranks_with_its_own_policy(tmp_path: Path) -> None:
    # One node: the order of starts is the ranking. 'big' ranks by size (fat would need n_s;
    # high_prio ranks every job the same, so ties go by job id), 'fifo' by arrival.
    config = queue_file(tmp_path, "queues:\n  a:\n    policy: high_prio\n    priority: 1\n")
    result = starts(replay([job(1, queue="a", submit=0), job(3, queue="a", submit=1),
                            job(2, queue="a", submit=1)], config, nodes=1, high_prio=True))
    assert [jobid for jobid, _ in sorted(result.items(), key=lambda kv: kv[1])] == [1, 2, 3]


def test_dependencies_survive_the_job_log_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "accounting.log"
    replay([job(1, run=50), job(2, dependencies=(1,))], None, log=log)
    again = read_accounting_log(log)
    assert {j.jobid: j.dependencies for j in again.jobs} == {1: (), 2: (1,)}


def test_qsim_reads_a_queue_file_and_names_a_bad_one(tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    trace.write_text(
        "01/01/2026 00:00:00;Q;1;queue=short qtime=1767225600 Resource_List.nodect=1 "
        "Resource_List.walltime=00:10:00\n"
        "01/01/2026 00:00:00;E;1;start=1767225600 end=1767225700\n"
        "01/01/2026 00:00:00;Q;2;queue=short qtime=1767225600 Resource_List.nodect=1 "
        "Resource_List.walltime=00:10:00 dependencies=1\n"
        "01/01/2026 00:00:00;E;2;start=1767225700 end=1767225800\n")
    good = tmp_path / "good.yaml"
    good.write_text("queues:\n  short:\n    maxtime: 20\n    policy: wfp3\n")
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--trace", str(trace),
                          "--machine", "flat:4", "--queues", str(good), "--out", str(out), "-q"],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    records = (out / "accounting.log").read_text()
    assert ";S;2;" in records and "dependencies=1" in records
    bad = tmp_path / "bad.yaml"
    bad.write_text("queues:\n  short:\n    maxtime: 20\n    maxrunning: some\n")
    ran = subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--trace", str(trace),
                          "--machine", "flat:4", "--queues", str(bad), "-q"],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1
    assert f"{bad}:4: queues.short: maxrunning='some': give a whole number" in ran.stderr


# ---- one script, two engines ------------------------------------------------------------

SETQ = {"q": {"maxrunning": "1"}, "short": {"maxtime": "1"}}
# (job id, queue, nodes, wall time s, run time s, dependencies)
SCRIPT = [
    (1, "q", 1, 60, 2, ()),
    (2, "q", 1, 60, 1, (1,)),
    (3, "q", 1, 3, 30, ()),  # killed at its wall time: its dependant never runs
    (4, "q", 1, 60, 1, (3,)),
    (5, "short", 1, 120, 1, ()),  # refused: over the queue's maxtime
]


@pytest.fixture
def live_instance() -> Iterator[Instance]:
    running = Instance(machine="flat:4").start_retrying()
    yield running
    running.stop()


def _decisions(log_text: str) -> tuple[set[int], list[tuple[str, int]]]:
    """The queued job ids, and the order of starts, wall-time aborts and ends."""
    queued: set[int] = set()
    order: list[tuple[str, int]] = []
    for line in log_text.splitlines():
        _stamp, kind, ident, *_ = line.split(";")
        if kind == "Q":
            queued.add(int(ident))
        elif kind in ("S", "A", "E"):
            order.append((kind, int(ident)))
    return queued, order


def test_one_script_gives_the_same_decisions_live_and_in_qsim(
        live_instance: Instance, tmp_path: Path) -> None:
    socket = load_config(live_instance.state_dir).user_socket
    refusals = {}
    with connect(f"PYRO:queue-manager-user@./u:{socket}") as api:
        api.add_queues(list(SETQ))
        for name, settings in SETQ.items():
            api.set_queue([name], settings)
        api.set_queue_state(["q"], "stopped")  # everything queued before the first pass
        for jobid, queue, nodes, wall, run, deps in SCRIPT:
            try:
                got = api.submit({"nodes": nodes, "walltime": wall, "command": "/bin/sleep",
                                  "args": [str(run)], "cwd": str(live_instance.jobs_dir),
                                  "queue": queue, "dependencies": list(deps)})
                assert got == jobid
            except ValueError as exc:
                refusals[jobid] = str(exc)
                api.set_next_jobid(jobid + 1)  # the trace's ids stay aligned
        api.set_queue_state(["q"], "running")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if [row[0] for row in api.jobs(None, ["state"])["rows"]] == [4]:
                break  # only the job that can never run is left
            time.sleep(0.5)
        table = api.jobs(None, ["display_state"])
        at = table["columns"].index("display_state")
        left = {row[0]: row[at] for row in table["rows"]}
    assert left == {4: "dep_fail"}
    live_log = (live_instance.state_dir / "log" / "accounting.log").read_text()

    yaml_text = "queues:\n" + "".join(
        f"  {name}:\n" + "".join(f"    {k}: '{v}'\n" for k, v in settings.items())
        for name, settings in SETQ.items())
    qsim_log = tmp_path / "qsim.log"
    result = replay([TraceJob(jobid=jobid, submit_time=0, run_time=run, requested_time=wall,
                              nodes=nodes, user="root", queue=queue, dependencies=deps)
                     for jobid, queue, nodes, wall, run, deps in SCRIPT],
                    queue_file(tmp_path, yaml_text), log=qsim_log)

    assert _decisions(live_log) == _decisions(qsim_log.read_text())
    assert _decisions(live_log)[1] == [("S", 1), ("E", 1), ("S", 2), ("E", 2), ("S", 3),
                                       ("A", 3), ("E", 3)]
    assert [f"job {jobid}: {message}" for jobid, message in refusals.items()] + [
        "job 4: never ran (dep_fail)"] == result.skipped
