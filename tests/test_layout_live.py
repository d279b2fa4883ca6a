"""partadm --layout against real daemons (issue 17, item 4): a queue layout set by an admin
places each queue's jobs on its own partition, gives the queues its size and time limits,
survives `cobaltlite down`/`up`, is refused to a plain user and on bad input with nothing
changed; `--dry-run` replays the instance's own accounting log under both layouts and changes
nothing.

flat:8 with two queues: small owns nodes 0-1 (jobs of 1-2 nodes, up to an hour), big owns nodes
2-5 (jobs of 3-4 nodes); nodes 6-7 are outside the layout, where other queues run.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live import Instance, ok, until
from unix_users import ADMINS, ALICE, BOB, Accounts, ensure_test_users

LAYOUT = """\
machine_nodes: 8
common_pool: 0
queues:
  - name: small
    nodes: 2
    jobs: [{nodes: [1, 2], time: [0, 3600]}]
  - name: big
    nodes: 4
    jobs: [{nodes: [3, 4]}]
"""
SHOWN = (
    "Queue  Nodes  Partition  JobNodes  JobTime            Priority  Starvation  \n"
    "============================================================================\n"
    "small  2      0-1        1-2       00:00:00-01:00:00  1         24:00:00    \n"
    "big    4      2-5        3-4       00:00:00-any       1         24:00:00    \n"
    "common pool: none; tau_pf: -\n"
    "other queues: nodes 6-7\n"
)
ADMIN_ONLY = "needs root or membership of the admin group"


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture
def flat() -> Iterator[Instance]:
    running = Instance(machine="flat:8", settings={"admin_group": ADMINS}).start_retrying()
    yield running
    running.stop()


def refused(ran: subprocess.CompletedProcess[str], message: str) -> None:
    assert ran.returncode == 1, ran
    assert ran.stdout == ""
    assert message in ran.stderr, ran.stderr


def layout_file(instance: Instance, text: str, name: str = "layout.yaml") -> Path:
    path = instance.jobs_dir / name
    path.write_text(text)
    path.chmod(0o644)
    return path


def per_queue(shown: str) -> dict[str, list[list[str]]]:
    """The dry run's per-queue tables: configuration -> the cells of each row."""
    tables: dict[str, list[list[str]]] = {}
    title = None
    for line in shown.splitlines():
        if " configuration. Per queue" in line:
            title = line.split()[0]
            tables[title] = []
        elif title is not None and line.startswith("│"):
            tables[title].append([cell.strip() for cell in line.strip("│").split("│")])
    return tables


def sleeper(instance: Instance, queue: str, nodes: int) -> int:
    return instance.qsub("-q", queue, "-n", str(nodes), "-t", "10", "/bin/sleep", "300")


def test_an_admins_layout_places_queues_on_their_partitions_and_survives_a_restart(
        flat: Instance, accounts: Accounts) -> None:
    path = layout_file(flat, LAYOUT)
    refused(flat.command("partadm", "--layout", str(path), account=ALICE, accounts=accounts),
            ADMIN_ONLY)
    refused(flat.command("cqadm", "--layout", str(path), account=ALICE, accounts=accounts),
            f"setting a queue layout (partadm/cqadm --layout) {ADMIN_ONLY}")
    assert ok(flat.command("partadm", "--layout-show", account=ALICE, accounts=accounts)) \
        .startswith("no queue layout")
    assert "small" not in ok(flat.command("cqadm", "--getq"))

    shown = ok(flat.command("partadm", "--layout", str(path), account=BOB, accounts=accounts))
    assert shown == ("created queues: small big\n"
                     f"queue layout {path} is active: 2 queues\n" + SHOWN)
    assert ok(flat.command("partadm", "--layout-show", account=ALICE, accounts=accounts)) == SHOWN

    # The classes' ranges are the queues' limits: qsub names the one a job breaks.
    refused(flat.command("qsub", "-q", "small", "-n", "3", "-t", "10", "/bin/true"),
            "Nodes greater than the 'small' queue max nodes of 2")
    refused(flat.command("qsub", "-q", "big", "-n", "2", "-t", "10", "/bin/true"),
            "Nodes less than the 'big' queue min nodes of 3")
    refused(flat.command("qsub", "-q", "small", "-n", "1", "-t", "61", "/bin/true"),
            "Walltime greater than the 'small' queue max walltime of 01:00:00")

    # Each queue on its own nodes, though the lowest free nodes are elsewhere (a flat machine
    # gives the lowest-numbered free nodes): big on 2-5, a queue outside the layout on 6-7,
    # small on 0-1, where its third job waits though nodes are idle. (A job sent to default
    # would be routed to small or big: tests/test_layout_routing.py.)
    ok(flat.command("cqadm", "--addq", "other"))
    big = sleeper(flat, "big", 4)
    assert flat.wait_for(big, {"running"})["location"] == "2-5"
    other = sleeper(flat, "other", 2)
    assert flat.wait_for(other, {"running"})["location"] == "6-7"
    small = [sleeper(flat, "small", 1) for _ in range(3)]
    assert sorted(flat.wait_for(jobid, {"running"})["location"] for jobid in small[:2]) == \
        ["0", "1"]
    flat.command("qdel", str(other))
    time.sleep(3)  # three scheduling passes (scheduler_interval 1)
    assert flat.job(small[2])["state"] == "queued"

    flat.command("qdel", *map(str, [*small, big]))
    flat.cobaltlite("down")
    assert ok(flat.cobaltlite("up"))
    assert ok(flat.command("partadm", "--layout-show")) == SHOWN
    assert flat.wait_for(sleeper(flat, "big", 3), {"running"})["location"] == "2-4"


BAD_LAYOUTS = [
    ("overlap", LAYOUT.replace("[{nodes: [3, 4]}]", "[{nodes: [2, 4]}]"),
     "queues 'small' and 'big' both take some jobs"),
    ("too big", LAYOUT.replace("nodes: 4\n", "nodes: 7\n"),
     "partitions and pool hold 9 nodes; the machine has 8"),
    ("no node", LAYOUT.replace("nodes: 4\n", "nodes: 0\n"),
     "queues[1] (big): nodes: 0: give a whole number of 1 or more"),
    ("bad yaml", LAYOUT.replace("  - name: big", "  - name: [big"), "not YAML"),
]


def test_bad_layouts_are_refused_naming_file_and_key_and_change_nothing(
        flat: Instance, accounts: Accounts) -> None:
    # cqadm --layout is the same change as partadm --layout (issue 17: "cqadm and partadm can
    # also set it").
    ok(flat.command("cqadm", "--layout", str(layout_file(flat, LAYOUT))))
    for name, text, message in BAD_LAYOUTS:
        path = layout_file(flat, text, f"{name.replace(' ', '-')}.yaml")
        refused(flat.command("partadm", "--layout", str(path)), f"{path}: ")
        refused(flat.command("partadm", "--layout", str(path)), message)
    padded = layout_file(flat, LAYOUT + "#" * 65536 + "\n", "padded.yaml")
    refused(flat.command("partadm", "--layout", str(padded)),
            "give the queue layout as YAML text of at most 65536 characters")
    missing = flat.jobs_dir / "missing.yaml"
    refused(flat.command("partadm", "--layout", str(missing)),
            f"--layout {missing}: cannot read it: No such file or directory")
    assert ok(flat.command("partadm", "--layout-show")) == SHOWN

    # A layout of the whole machine would leave the waiting job of a queue outside it no node:
    # refused, unless forced.
    ok(flat.command("schedctl", "--stop"))
    ok(flat.command("cqadm", "--addq", "other"))
    flat.qsub("-q", "other", "-n", "1", "-t", "10", "/bin/true")
    whole = layout_file(flat, LAYOUT.replace("nodes: 4\n", "nodes: 6\n"), "whole.yaml")
    refused(flat.command("partadm", "--layout", str(whole)),
            "partadm: nothing changed: the layout leaves no node outside its partitions and "
            "pool, so queue other (1 waiting) would have nowhere to run; add it to the "
            "layout, or force (-f)\n")
    assert ok(flat.command("partadm", "--layout-show")) == SHOWN
    assert ok(flat.command("partadm", "-f", "--layout", str(whole))).endswith(
        "other queues: no node (their jobs wait)\n")

    refused(flat.command("partadm", "--layout-clear", account=ALICE, accounts=accounts),
            f"partadm --layout-clear {ADMIN_ONLY}")
    assert ok(flat.command("partadm", "--layout-clear", account=BOB, accounts=accounts)) == \
        "no queue layout: every queue runs on the whole machine\n"
    assert ok(flat.command("partadm", "--layout-show")).startswith("no queue layout")


def test_a_dry_run_replays_the_accounting_log_under_both_layouts_and_changes_nothing(
        flat: Instance) -> None:
    ok(flat.command("partadm", "--layout", str(layout_file(flat, LAYOUT))))
    jobs = [flat.qsub("-q", "small", "-n", "1", "-t", "5", "/bin/true") for _ in range(3)]
    jobs.append(flat.qsub("-q", "big", "-n", "3", "-t", "5", "/bin/true"))
    for jobid in jobs:
        flat.wait_for(jobid, {"done"}, timeout=30)
    log = flat.state_dir / "log" / "accounting.log"
    until(lambda: log.read_text().count(";E;") >= len(jobs), 10, "the jobs' E records")
    before = log.read_text()
    candidate = layout_file(flat, LAYOUT.replace("nodes: 2\n", "nodes: 4\n", 1), "new.yaml")

    shown = ok(flat.command("partadm", "--layout", str(candidate), "--dry-run", "--log",
                            str(log), "--since", "1d"))
    # Per queue and configuration: queue, nodes, priority, jobs.
    assert {title: [row[:4] for row in rows] for title, rows in per_queue(shown).items()} == {
        "Current": [["small", "2", "1", "3"], ["big", "4", "1", "1"]],
        "New": [["small", "4", "1", "3"], ["big", "4", "1", "1"]]}
    assert shown.rstrip().endswith("nothing was changed")
    assert ok(flat.command("partadm", "--layout-show")) == SHOWN
    assert log.read_text().startswith(before)
