"""partadm, partlist, nodeadm, nodelist and slpstat against real daemons, run by root, by bob
(in the admin group) and by alice (not): output and exit status, what the scheduler does with
the changes, and that they survive a restart of the daemons.

bgp-2rack: ANL-R00-R01-2048, ANL-R00-1024, ANL-R01-1024 and four 512-node blocks. A 512-node job
lands on the first 512-node block by name that is usable (every one has BLK = 2).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest
from live import Instance, ok, until
from unix_users import ADMINS, ALICE, BOB, Accounts, ensure_test_users

from cobaltlite.config import load_config

R00M0, R00M1, R01M0, R01M1 = (f"ANL-R0{r}-M{m}-512" for r in (0, 1) for m in (0, 1))
ADMIN_ONLY = "needs root or membership of the admin group"


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture
def bgp() -> Iterator[Instance]:
    running = Instance(machine="bgp-2rack", settings={"admin_group": ADMINS}).start_retrying()
    yield running
    running.stop()


def refused(ran: subprocess.CompletedProcess[str], prog: str, message: str) -> None:
    assert ran.returncode == 1, ran
    assert ran.stdout == ""
    assert ran.stderr == f"{prog}: {message}\n"


def lines(*rows: str) -> str:
    return "".join(row + "\n" for row in rows)


def sleeper(instance: Instance, *args: str) -> int:
    return instance.qsub(*args, "-n", "512", "-t", "10", "/bin/sleep", "300")


PARTADM_L = lines(
    "Name              Queue    Size  Functional  Scheduled  State  ",
    "===============================================================",
    "ANL-R00-R01-2048  default  2048  X           X          idle   ",
    "ANL-R00-1024      default  1024  X           X          idle   ",
    "ANL-R01-1024      default  1024  X           X          idle   ",
    "ANL-R00-M0-512    default  512   X           X          idle   ",
    "ANL-R00-M1-512    default  512   X           X          idle   ",
    "ANL-R01-M0-512    default  512   X           X          idle   ",
    "ANL-R01-M1-512    default  512   X           X          idle   ",
)


def test_only_admins_change_blocks_and_the_scheduler_honours_every_change(
        bgp: Instance, accounts: Accounts) -> None:
    assert ok(bgp.command("partadm", "-l", account=ALICE, accounts=accounts)) == PARTADM_L
    for args, options in ((["--disable", R00M0], "partadm --disable, nodeadm --down"),
                          (["-d", R00M0], "partadm -d"),
                          (["--deactivate", R00M0], "partadm --deactivate"),
                          (["--queue", "default", R00M0], "partadm --queue, nodeadm --queue")):
        ran = bgp.command("partadm", *args, account=ALICE, accounts=accounts)
        refused(ran, "partadm", f"{options} {ADMIN_ONLY}")
    assert ok(bgp.command("partadm", "-l")) == PARTADM_L

    assert ok(bgp.command("partadm", "--disable", R00M0, account=BOB, accounts=accounts)) == \
        f"disabled: {R00M0}\n"
    assert ok(bgp.command("partadm", "--deactivate", R00M1)) == f"deactivated: {R00M1}\n"
    ok(bgp.command("cqadm", "--addq", "prod"))
    assert ok(bgp.command("partadm", "--queue", "prod", R01M1)) == f"queues of {R01M1}: prod\n"
    assert ok(bgp.command("partadm", "-d", "ANL-R00-R01-2048")) == "deleted: ANL-R00-R01-2048\n"
    states = ("State", "offline (a related block is offline)", "idle", "disabled", "offline",
              "idle", "idle")
    expected = lines(*(start + state.ljust(36) + "  " for start, state in zip((
        "Name            Queue    Size  Functional  Scheduled  ",
        "ANL-R00-1024    default  1024  -           X          ",
        "ANL-R01-1024    default  1024  X           X          ",
        "ANL-R00-M0-512  default  512   X                      ",
        "ANL-R00-M1-512  default  512               X          ",
        "ANL-R01-M0-512  default  512   X           X          ",
        "ANL-R01-M1-512  prod     512   X           X          "), states, strict=True)))
    expected = expected.replace("\n", "\n" + "=" * 92 + "\n", 1)
    assert ok(bgp.command("partadm", "-l")) == expected

    # The disabled and the offline blocks get nothing; prod runs only on its block, and the
    # default queue never there.
    prod = sleeper(bgp, "-q", "prod")
    default = sleeper(bgp)
    assert bgp.wait_for(prod, {"running"})["location"] == R01M1
    assert bgp.wait_for(default, {"running"})["location"] == R01M0
    waiting_prod = sleeper(bgp, "-q", "prod")
    waiting_default = sleeper(bgp)
    time.sleep(3)  # three scheduling passes (scheduler_interval 1)
    assert bgp.job(waiting_prod)["state"] == "queued"
    assert bgp.job(waiting_default)["state"] == "queued"
    def partlist_once_busy() -> str | None:
        shown = ok(bgp.command("partlist", account=ALICE, accounts=accounts))
        busy = re.search(rf"^{R01M1} +prod +busy +- +512 +{prod} +$", shown, re.M)
        return shown if busy else None

    partlist = until(partlist_once_busy, 10, "prod's job busy on its block in partlist")
    assert partlist.splitlines()[0].split() == ["Name", "Queue", "State", "Backfill", "Size",
                                                "Job"]
    # Only managed, scheduled, functional blocks are listed (partadm -l lists the others).
    assert R00M0 not in partlist and R00M1 not in partlist
    assert "ANL-R00-R01-2048" not in partlist and "ANL-R00-1024" in partlist

    # A listing survives `cobaltlite down` / `up`, and so does what the scheduler does.
    bgp.command("qdel", str(prod), str(default), str(waiting_prod), str(waiting_default))
    bgp.cobaltlite("down")
    assert ok(bgp.cobaltlite("up"))
    assert ok(bgp.command("partadm", "-l")) == expected
    again = sleeper(bgp)
    assert bgp.wait_for(again, {"running"})["location"] == R01M0
    assert ok(bgp.command("partadm", "--enable", R00M0)) == f"enabled: {R00M0}\n"
    assert ok(bgp.command("partadm", "--activate", R00M1)) == f"activated: {R00M1}\n"
    assert ok(bgp.command("partadm", "-a", "ANL-R00-R01-2048")) == "added: ANL-R00-R01-2048\n"
    assert ok(bgp.command("partadm", "--rmq", "prod", R01M1)) == \
        f"queues of {R01M1}: (none: open)\n"
    listed = ok(bgp.command("partadm", "-l")).splitlines()[2:]
    assert [row.split()[:5] for row in listed] == [
        [name, "default:prod", size, "X", "X"] for name, size in (
            ("ANL-R00-R01-2048", "2048"), ("ANL-R00-1024", "1024"), ("ANL-R01-1024", "1024"),
            (R00M0, "512"), (R00M1, "512"), (R01M0, "512"), (R01M1, "512"))]


def admin_columns(instance: Instance) -> list[list[str]]:
    """partadm -l without the State column, which moves with the jobs."""
    return [row.split()[:5] for row in ok(instance.command("partadm", "-l")).splitlines()[2:]]


def test_bad_requests_change_nothing(bgp: Instance) -> None:
    before = admin_columns(bgp)
    job = sleeper(bgp)
    assert bgp.wait_for(job, {"running"})["location"] == R00M0
    refused(bgp.command("partadm", "--disable", R01M0, "R09-M0"), "partadm",
            "nothing changed: no block 'R09-M0' on bgp-2rack (partadm -l lists them)")
    refused(bgp.command("partadm", "--queue", "nope", R01M0), "partadm",
            "nothing changed: 'nope' is not an existing queue")
    refused(bgp.command("partadm", "-d", R00M0), "partadm",
            f"nothing changed: {R00M0} (job {job}) held by a running job; delete it when the "
            "job has ended")
    refused(bgp.command("partadm", "--disable"), "partadm",
            "At least one partition must be supplied")
    refused(bgp.command("partadm", "-l", R00M0), "partadm", "-l takes no partition names")
    ran = bgp.command("partadm", "--queue", "", R00M0)
    refused(ran, "partadm", "--queue '': give one or more queue names, as q1:q2")
    ran = bgp.command("partadm", "--enable", "--disable", R00M0)
    assert ran.returncode == 2 and "not allowed with argument" in ran.stderr
    # nodeadm and nodelist are for flat clusters: they say what to use on blocks.
    refused(bgp.command("nodeadm", "--down", "1"), "nodeadm", "this machine has blocks, not "
            "nodes: partadm administers them (--disable, --enable, --queue)")
    refused(bgp.command("nodelist"), "nodelist",
            "this machine has blocks, not nodes: partlist lists them")
    assert admin_columns(bgp) == before

    # Mapping every block to prod would leave the default queue's waiting job nowhere to run.
    ok(bgp.command("cqadm", "--addq", "prod"))
    ok(bgp.command("schedctl", "--stop"))
    waiting = sleeper(bgp)
    blocks = [row[0] for row in before]
    refused(bgp.command("partadm", "--queue", "prod", *blocks), "partadm",
            "nothing changed: queue default (1 waiting) would be left with no place to run on; "
            "map it elsewhere first, or force (-f)")
    assert " prod " not in ok(bgp.command("partadm", "-l"))
    forced = ok(bgp.command("partadm", "-f", "--queue", "prod", *blocks))
    assert forced == "".join(f"queues of {b}: prod\n" for b in blocks)
    assert bgp.job(waiting)["state"] == "queued"


def test_backfill_shows_the_drain_window_and_slpstat_the_components(
    bgp: Instance, accounts: Accounts
) -> None:
    sleeper(bgp)  # on ANL-R00-M0-512 for 10 minutes
    big = bgp.qsub("-n", "2048", "-t", "10", "/bin/sleep", "300")
    until(lambda: re.search(rf"^{R01M0} .* idle +0:0[789] ", ok(bgp.command("partlist")), re.M),
          15, "the drain window on the idle blocks under the 2048-node block")
    assert bgp.job(big)["state"] == "queued"

    config = load_config(bgp.state_dir)
    names = ["system", "queue-manager", "scheduler", "metrics-monitor"]
    # alice may not enter STATE_DIR/run, where the pid files are: she sees the same components.
    for account in (None, ALICE):
        shown = ok(bgp.command("slpstat", account=account, accounts=accounts)).splitlines()
        assert shown[0].split() == ["Name", "Location", "Update", "Time"]
        for line, name in zip(shown[2:], names, strict=True):
            assert line.split()[:2] == [name, f"unix:{config.socket(name)}"]
            assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}",
                                line.split(maxsplit=2)[2].strip())
    bgp.cobaltlite("down")
    for account in (None, ALICE):
        refused(bgp.command("slpstat", account=account, accounts=accounts), "slpstat",
                f"no component of the instance in {bgp.state_dir} is running (start them with "
                "`cobaltlite up`)")


NODELIST = lines(
    "Host  Queue    State  Job  ",
    "===========================",
    "0     default  idle   -    ",
    "1     default  idle   -    ",
    "2     default  idle   -    ",
    "3     default  idle   -    ",
)


def test_nodeadm_takes_nodes_down_and_maps_queues_on_a_flat_cluster(accounts: Accounts) -> None:
    flat = Instance(machine="flat:4", settings={"admin_group": ADMINS}).start_retrying()
    try:
        assert ok(flat.command("nodelist", account=ALICE, accounts=accounts)) == NODELIST
        assert ok(flat.command("nodeadm", "-l")) == NODELIST
        refused(flat.command("nodeadm", "--down", "0", account=ALICE, accounts=accounts),
                "nodeadm", f"partadm --disable, nodeadm --down {ADMIN_ONLY}")
        assert ok(flat.command("nodeadm", "--down", "0", "1", account=BOB,
                               accounts=accounts)) == "down: 0 1\n"
        refused(flat.command("nodeadm", "--down", "2", "4"), "nodeadm",
                "nothing changed: no node '4' on flat:4 (nodelist lists them)")
        refused(flat.command("partadm", "-d", "2"), "partadm",
                "nothing changed: a flat machine has no blocks to delete; take nodes out of "
                "service with nodeadm --down")
        ok(flat.command("cqadm", "--addq", "prod"))
        assert ok(flat.command("nodeadm", "--queue", "prod", "3")) == "queues of 3: prod\n"
        job = flat.qsub("-n", "1", "-t", "10", "/bin/sleep", "300")
        prod = flat.qsub("-q", "prod", "-n", "1", "-t", "10", "/bin/sleep", "300")
        assert flat.wait_for(job, {"running"})["location"] == "2"
        assert flat.wait_for(prod, {"running"})["location"] == "3"
        stuck = flat.qsub("-n", "1", "-t", "10", "/bin/sleep", "300")
        expected = lines(
            "Host  Queue    State  Job  ", "===========================",
            "0     default  down   -    ", "1     default  down   -    ",
            f"2     default  busy   {job}    ", f"3     prod     busy   {prod}    ")
        until(lambda: ok(flat.command("nodelist")) == expected, 10, "both jobs busy in nodelist")
        assert flat.job(stuck)["state"] == "queued"
        assert ok(flat.command("nodeadm", "--up", "1")) == "up: 1\n"
        assert flat.wait_for(stuck, {"running"})["location"] == "1"
    finally:
        flat.stop()


def test_a_job_only_a_disabled_block_fits_gets_no_start_estimate(bgp: Instance) -> None:
    """The estimates' replay keeps off the blocks an admin disabled, as the scheduler does:
    the 2048-node job was estimated to start at once, pass after pass, while it could not."""
    ok(bgp.command("partadm", "--disable", "ANL-R00-R01-2048"))
    blocker = sleeper(bgp)  # on ANL-R00-M0-512
    big = bgp.qsub("-n", "2048", "-t", "10", "/bin/true")
    # Submitted after the big job: one runs on ANL-R01-1024, the other waits for the blocker.
    # Its estimate says a pass has estimated the big job too (else "no start estimate" would
    # only say it was not estimated yet).
    halves = [bgp.qsub("-n", "1024", "-t", "10", "/bin/sleep", "300") for _ in range(2)]
    until(lambda: any(bgp.command("showstart", str(j)).returncode == 0 for j in halves
                      if bgp.job(j)["state"] == "queued"), 15,
          "a start estimate of a job submitted after the 2048-node one")
    assert bgp.job(big)["state"] == "queued"
    shown = bgp.command("showstart", str(big))
    assert shown.returncode == 1 and "has no start estimate" in shown.stderr, shown
    ok(bgp.command("partadm", "--enable", "ANL-R00-R01-2048"))
    for jobid in (blocker, *halves):
        bgp.command("qdel", str(jobid))
    assert bgp.wait_for(big, {"running", "done"})["location"] == "ANL-R00-R01-2048"
