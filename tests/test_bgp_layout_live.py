"""partadm --layout on a Blue Gene/P system (seed 002; docs/hybrid-queues.md, D002-25 to
D002-27), real daemons on bgp-2rack: queue a owns rack R00 (blocks ANL-R00-1024 and its two
midplanes), queue b midplane R01-M0, and R01-M1 is the rest, where the queues the layout does
not name run; the scheduler runs each queue's jobs on its own blocks only, and a layout the
machine cannot lay out is refused with nothing changed. (The pool: tests/test_bgp_layouts.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live import Instance, ok, until
from test_bgp_layouts import TWO_RACKS
from test_layout_live import layout_file, refused
from test_start_estimates import _estimate

LAYOUT = TWO_RACKS.replace("common_pool: 512\ntau_pf: 0.5\n", "common_pool: 0\n")
SHOWN = (
    "Queue  Nodes  Partition      JobNodes  JobTime       Priority  Starvation  \n"
    "===========================================================================\n"
    "a      1024   R00-M0 R00-M1  1-1024    00:00:00-any  1         24:00:00    \n"
    "b      512    R01-M0         1-512     00:00:00-any  1         24:00:00    \n"
    "common pool: none; tau_pf: -\n"
    "other queues: nodes R01-M1\n"
    "queue a blocks: ANL-R00-1024 ANL-R00-M0-512 ANL-R00-M1-512\n"
    "queue b blocks: ANL-R01-M0-512\n"
    "other queues blocks: ANL-R01-M1-512\n"
)


@pytest.fixture
def bgp() -> Iterator[Instance]:
    running = Instance(machine="bgp-2rack").start_retrying()
    yield running
    running.stop()


def test_each_queue_runs_on_its_own_blocks_and_bad_layouts_change_nothing(
        bgp: Instance) -> None:
    path = layout_file(bgp, LAYOUT)
    assert ok(bgp.command("partadm", "--layout", str(path))) == (
        f"created queues: a b\nqueue layout {path} is active: 2 queues\n" + SHOWN)
    assert ok(bgp.command("partadm", "--layout-show")) == SHOWN
    for bad, message in (
            (LAYOUT.replace("nodes: 512\n", "nodes: 300\n", 1),
             "queue 'b': 300 nodes is not a whole number of midplanes (512 nodes each)"),
            (LAYOUT.replace("[ANL-R00-1024]", "[ANL-R09-1024]"),
             "queue 'a': 'ANL-R09-1024' is not a block of this machine"),
            (LAYOUT.replace("[1, 512], queues: [b]", "[1, 1024], queues: [b]"),
             "queue 'b' takes jobs of up to 1024 nodes but its largest block has 512 nodes")):
        bad_path = layout_file(bgp, bad, "bad.yaml")
        refused(bgp.command("partadm", "--layout", str(bad_path)), f"{bad_path}: {message}")
    assert ok(bgp.command("partadm", "--layout-show")) == SHOWN

    # b's two jobs: one on R01-M0, the other waits though rack R00 (a's) and R01-M1 (the
    # rest) are idle. a's job of 512 nodes goes to one of R00's midplanes, a default job to
    # the rest's block.
    b = [bgp.qsub("-q", "b", "-n", "512", "-t", "10", "/bin/sleep", "300") for _ in range(2)]
    begun = bgp.wait_for(b[0], {"running"})
    assert begun["location"] == "ANL-R01-M0-512"
    # Its start estimate follows the layout: when the first one's 10 minutes end, not now.
    estimate = until(lambda: _estimate(bgp, b[1]), 20, "the start estimate of b's second job")
    assert estimate >= begun["starttime"] + 600 - 2
    a = bgp.qsub("-q", "a", "-n", "512", "-t", "10", "/bin/sleep", "300")
    assert bgp.wait_for(a, {"running"})["location"] in {"ANL-R00-M0-512", "ANL-R00-M1-512"}
    other = bgp.qsub("-n", "512", "-t", "10", "/bin/sleep", "300")
    assert bgp.wait_for(other, {"running"})["location"] == "ANL-R01-M1-512"
    assert bgp.job(b[1])["state"] == "queued"
