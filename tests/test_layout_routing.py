"""Routing by a queue layout's job classes against real daemons (issue 17; docs/hybrid-queues.md,
"Live", D002-28): with a layout active, a job submitted to `default` (or to a source queue the
layout's classes name) lands in the layout queue whose classes take its size and time, as Qsim
routes a trace; qstat and the accounting log name that queue; qalter routes it again or refuses;
qmove keeps the limit checks; a job no queue takes is refused at qsub; and the dry run of the
active layout over the instance's log puts every job where the daemons did.

flat:8 with two queues: small owns nodes 0-1 (jobs of 1-2 nodes, up to an hour), big owns nodes
2-5 (jobs of 3-4 nodes, any time); jobs from queue `batch` of one node asking more than an
hour go to wide (node 6); node 7 is outside the layout.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance, ok, until
from test_layout_live import LAYOUT as SMALL_AND_BIG
from test_layout_live import layout_file, per_queue, refused

LAYOUT = SMALL_AND_BIG + """\
  - name: wide
    nodes: 1
    jobs: [{nodes: [1, 1], time: [3601, 86400], queues: [batch]}]
"""
TAKES = ("the layout's queues take small: 1-2 nodes, 00:00:00-01:00:00; big: 3-4 nodes, any "
         "time; wide: 1-1 nodes, 01:00:01-24:00:00 from batch (partadm --layout-show)")


@pytest.fixture
def flat() -> Iterator[Instance]:
    running = Instance(machine="flat:8").start_retrying()
    yield running
    running.stop()


def qstat_queue(instance: Instance, jobid: int) -> str:
    """The Queue that `qstat -f -l` shows for the job."""
    return instance.long_listing(jobid)["Queue"]


def records(log: Path, kind: str, jobid: int) -> list[str]:
    return [line for line in log.read_text().splitlines() if f";{kind};{jobid};" in line]


def test_jobs_sent_to_default_land_in_the_queue_whose_classes_take_them(flat: Instance) -> None:
    ok(flat.command("partadm", "--layout", str(layout_file(flat, LAYOUT))))
    ok(flat.command("schedctl", "--stop"))  # keep the jobs queued: qalter and qmove need it
    log = flat.state_dir / "log" / "accounting.log"

    one = flat.qsub("-n", "1", "-t", "30", "/bin/true")
    three = flat.qsub("-n", "3", "-t", "120", "/bin/true")
    assert (flat.job(one)["queue"], flat.job(three)["queue"]) == ("small", "big")
    assert qstat_queue(flat, one) == "small" and qstat_queue(flat, three) == "big"
    q_record = records(log, "Q", one)[0]
    assert "queue=small" in q_record and "requested_queue=default" in q_record

    # A job no queue takes: 2 nodes for two hours (small stops at an hour), 1 node for two
    # hours from default (wide takes it only from batch), 7 nodes from anywhere.
    for nodes, time, source in (("2", "120", "default"), ("1", "120", "default"),
                                ("7", "10", "batch")):
        hms = f"{int(time) // 60:02d}:{int(time) % 60:02d}:00"
        refused(flat.command("qsub", "-q", source, "-n", nodes, "-t", time, "/bin/true"),
                f"qsub: no queue of the queue layout takes a job of {nodes} nodes and {hms} "
                f"from queue '{source}'; {TAKES}")
    # A source queue the layout names routes though no such queue exists.
    wide = flat.qsub("-q", "batch", "-n", "1", "-t", "120", "/bin/true")
    assert flat.job(wide)["queue"] == "wide" and flat.job(wide)["routed_from"] == "batch"
    # A job sent to a layout queue stays there, under its limits.
    refused(flat.command("qsub", "-q", "small", "-n", "3", "-t", "10", "/bin/true"),
            "Nodes greater than the 'small' queue max nodes of 2")
    explicit = flat.qsub("-q", "small", "-n", "2", "-t", "10", "/bin/true")
    assert flat.job(explicit)["routed_from"] == ""

    # qalter: a routed job is routed again by its new size; one no queue takes is refused and
    # stays; a job sent to a layout queue keeps that queue's limits.
    assert "queue changed from small to big" in ok(flat.command("qalter", "-n", "4", str(one)))
    assert flat.job(one)["queue"] == "big" and qstat_queue(flat, one) == "big"
    qa = records(log, "QA", one)[0]
    assert "queue=big" in qa and "requested_queue=default" in qa
    altered = flat.command("qalter", "-t", "180", str(three), "-n", "2")
    assert altered.returncode == 1
    assert "no queue of the queue layout takes a job of 2 nodes and 03:00:00 from queue " \
        "'default'" in altered.stdout + altered.stderr
    assert (flat.job(three)["queue"], flat.job(three)["nodes"]) == ("big", 3)
    refusal = flat.command("qalter", "-n", "3", str(explicit))
    assert "Nodes greater than the 'small' queue max nodes of 2" in refusal.stdout + refusal.stderr

    # qmove to a layout queue keeps its limits; to default, the job is routed from there.
    moved = flat.command("qmove", "big", str(explicit))
    assert "Nodes less than the 'big' queue min nodes of 3" in moved.stdout + moved.stderr
    assert "moved job" in ok(flat.command("qmove", "default", str(explicit)))
    assert (flat.job(explicit)["queue"], flat.job(explicit)["routed_from"]) == \
        ("small", "default")

    # While the system restarts, qsub routes by the last layout the queue manager was given.
    pid_file = flat.state_dir / "run" / "system.pid"
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    until(lambda: not pid_file.exists(), 20, "the system to stop")
    during = flat.qsub("-n", "3", "-t", "10", "/bin/true")
    assert flat.job(during)["queue"] == "big"
    ok(flat.cobaltlite("up"))

    # Without a layout nothing routes: qsub to default stays in default.
    ok(flat.command("partadm", "--layout-clear"))
    plain = flat.qsub("-n", "7", "-t", "10", "/bin/true")
    assert (flat.job(plain)["queue"], flat.job(plain)["routed_from"]) == ("default", "")


def test_the_dry_run_of_the_active_layout_routes_the_log_as_the_daemons_did(
        flat: Instance) -> None:
    ok(flat.command("partadm", "--layout", str(layout_file(flat, LAYOUT))))
    jobs = [flat.qsub("-n", "1", "-t", "5", "/bin/true") for _ in range(2)]
    jobs.append(flat.qsub("-n", "3", "-t", "5", "/bin/true"))
    jobs.append(flat.qsub("-q", "batch", "-n", "1", "-t", "120", "/bin/true"))
    for jobid in jobs:
        flat.wait_for(jobid, {"done"}, timeout=30)
    live = {jobid: flat.job(jobid)["queue"] for jobid in jobs}
    assert sorted(live.values()) == ["big", "small", "small", "wide"]
    log = flat.state_dir / "log" / "accounting.log"
    until(lambda: log.read_text().count(";E;") >= len(jobs), 10, "the jobs' E records")

    shown = ok(flat.command("partadm", "--layout", str(layout_file(flat, LAYOUT, "same.yaml")),
                            "--dry-run", "--log", str(log), "--since", "1d"))
    # Per queue: queue, nodes, priority, jobs; the same counts as the daemons' routing.
    current = {row[0]: int(row[3]) for row in per_queue(shown)["Current"]}
    assert current == {"small": 2, "big": 1, "wide": 1}
    assert current == {q: sorted(live.values()).count(q) for q in current}
