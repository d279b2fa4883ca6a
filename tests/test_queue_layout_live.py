"""The live system keeps a queue layout (seed 002) and the scheduler daemon places by it:
real daemons, a real flat machine of local processes. Live, a job belongs to the layout queue
of its queue's name (qsub -q)."""

from __future__ import annotations

import pytest
from live import Instance

from cobaltlite.rpc.client import connect

LAYOUT = """\
machine_nodes: 4
queues:
  - {name: a, nodes: 2, jobs: [{nodes: [1, 4], queues: [a]}]}
  - {name: b, nodes: 1, jobs: [{nodes: [1, 4], queues: [b]}]}
"""


def test_the_scheduler_runs_each_queue_in_its_partition_and_bad_layouts_change_nothing() -> None:
    flat = Instance(machine="flat:4").start_retrying()
    try:
        for name in ("a", "b"):
            assert flat.command("cqadm", "--addq", name).returncode == 0
        with connect(f"PYRO:system-control@./u:{flat.state_dir}/sockets/"
                     "system-user.sock") as system:
            assert system.queue_layout() is None
            listing = {"queues": [{"name": "a", "nodes": 2, "places": "0-1", "priority": 1.0},
                                  {"name": "b", "nodes": 1, "places": "2", "priority": 1.0}],
                       "pool": "", "tau_pf": None, "rest": "3"}
            assert system.set_queue_layout(LAYOUT, True) == listing
            assert system.queue_layout() is None  # a dry run changes nothing
            assert system.set_queue_layout(LAYOUT) == listing
            assert system.queue_layout() == LAYOUT
            for bad, message in (
                    (LAYOUT.replace("nodes: 1,", "nodes: 3,"),
                     "partitions and pool hold 5 nodes; the machine has 4"),
                    (LAYOUT.replace("machine_nodes: 4", "machine_nodes: 8"),
                     "machine_nodes is 8; flat:4 has 4 nodes"),
                    (LAYOUT.replace("nodes: 1,", "nodes: 0,"),
                     r"queues\[1\] \(b\): nodes: 0: give a whole number of 1 or more"),
                    ("queues: [", "queue layout: not YAML")):
                with pytest.raises(ValueError, match=f"nothing changed: .*{message}"):
                    system.set_queue_layout(bad)
            assert system.queue_layout() == LAYOUT
        a = [flat.qsub("-q", "a", "-n", "1", "-t", "10", "/bin/sleep", "300") for _ in range(3)]
        other = flat.qsub("-n", "1", "-t", "10", "/bin/sleep", "300")
        b = flat.qsub("-q", "b", "-n", "1", "-t", "10", "/bin/sleep", "300")
        assert {flat.wait_for(j, {"running"})["location"] for j in a[:2]} == {"0", "1"}
        assert flat.wait_for(b, {"running"})["location"] == "2"
        assert flat.wait_for(other, {"running"})["location"] == "3"  # default: not in the layout
        assert flat.job(a[2])["state"] == "queued"  # a is full; b's and the rest's nodes busy
    finally:
        flat.stop()
