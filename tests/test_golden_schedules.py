"""Golden schedules: tiny traces whose schedules were worked out by hand.

Every case below carries its timeline as comments. A case asserts, for every job, the start time
and the place a user would see in qstat (node ranges on a flat machine, the block name on Blue
Gene/P). Semantics under test (scheduler.py / engine.py docstrings):

* a job runs min(run_time, requested_time); the scheduler plans with requested_time;
* at one instant: ends, then submissions, then one scheduling pass;
* rank = score descending, then lower job id; FCFS score = queued_time;
* a flat machine gives the lowest-numbered free nodes; Blue Gene/P the smallest fitting block
  size, lowest BLK, ties to the name that sorts first.
"""

from __future__ import annotations

import pytest

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.description import BGPDescription, BlockSpec, FlatDescription
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy, make_utility
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

# ---- helpers -------------------------------------------------------------------------------


def job(jobid: int, submit: int, run: int, nodes: int, requested: int | None = None) -> TraceJob:
    return TraceJob(
        jobid=jobid,
        submit_time=submit,
        run_time=run,
        requested_time=run if requested is None else requested,
        nodes=nodes,
    )


def replay(jobs, machine, backfill: str, policy=None) -> dict[int, JobOutcome]:
    result = Qsim(jobs, machine, policy or builtin_policy("fcfs"), Backfill(backfill)).run()
    outcomes = {o.jobid: o for o in result.outcomes}
    assert len(outcomes) == len(result.outcomes), "a job appears twice in the outcomes"
    return outcomes


def flat(nodes: int):
    return build_machine(FlatDescription("flat", nodes))


def check(outcomes: dict[int, JobOutcome], expected: dict[int, tuple[float, str]]) -> None:
    """Compare {jobid: (start, location)} exactly, with one message listing every difference."""
    got = {jid: (o.start_time, o.location) for jid, o in outcomes.items()}
    diffs = [
        f"job {jid}: expected start {exp[0]} on {exp[1]!r}, got "
        + (f"start {got[jid][0]} on {got[jid][1]!r}" if jid in got else "no outcome at all")
        for jid, exp in sorted(expected.items())
        if got.get(jid) != exp
    ]
    extra = sorted(set(got) - set(expected))
    if extra:
        diffs.append(f"unexpected jobs in the outcomes: {extra}")
    assert not diffs, "schedule differs from the hand-worked one:\n  " + "\n  ".join(diffs)


# ---- flat machine: FCFS with no backfilling ------------------------------------------------


def test_fcfs_none_short_job_waits_behind_blocked_head():
    # 4 nodes, backfill none.
    #   t=0  J1 (2n, 10s) starts on 0-1.  J2 (4n, 5s) does not fit: it is the top job.
    #   t=1  J3 (1n, 2s) arrives; 2 nodes are idle but strict FCFS keeps it behind J2.
    #   t=10 J1 ends -> J2 starts on 0-3; J3 still waits.
    #   t=15 J2 ends -> J3 starts on 0.
    jobs = [job(1, 0, 10, 2), job(2, 0, 5, 4), job(3, 1, 2, 1)]
    out = replay(jobs, flat(4), "none")
    check(out, {1: (0, "0-1"), 2: (10, "0-3"), 3: (15, "0")})
    assert out[3].end_time == 17


def test_fcfs_none_later_jobs_fill_in_order_of_submission():
    # 8 nodes, backfill none: after the blocked head starts, the next jobs start in FCFS order
    # and each takes the lowest free nodes.
    #   t=0  J1 (6n, 10s) on 0-5.
    #   t=1  J2 (4n, 10s) blocked (2 idle).  t=2 J3 (2n, 10s) waits behind J2.
    #   t=3  J4 (2n, 10s) waits too.
    #   t=10 J1 ends: J2 on 0-3, J3 on 4-5, J4 on 6-7, all at once.
    jobs = [job(1, 0, 10, 6), job(2, 1, 10, 4), job(3, 2, 10, 2), job(4, 3, 10, 2)]
    check(
        replay(jobs, flat(8), "none"),
        {1: (0, "0-5"), 2: (10, "0-3"), 3: (10, "4-5"), 4: (10, "6-7")},
    )


# ---- flat machine: EASY --------------------------------------------------------------------


def test_easy_backfills_short_job_that_ends_before_the_shadow_time():
    # Same trace as the FCFS/none case, 4 nodes, EASY.
    #   t=0  J1 (2n, 10s) on 0-1; J2 (4n) top, reserved at t=10 (shadow), extra nodes = 0.
    #   t=1  J3 (1n, 2s) ends at 3 <= 10: backfilled on node 2.
    #   t=3  J3 ends.  t=10 J1 ends -> J2 on 0-3.
    jobs = [job(1, 0, 10, 2), job(2, 0, 5, 4), job(3, 1, 2, 1)]
    out = replay(jobs, flat(4), "easy")
    check(out, {1: (0, "0-1"), 2: (10, "0-3"), 3: (1, "2")})
    assert out[3].end_time == 3


def test_easy_refuses_job_that_would_delay_the_head():
    # 4 nodes, EASY.
    #   t=0  J1 (2n, 10s) on 0-1; J2 (4n, 5s) reserved at 10 with 0 extra nodes.
    #   t=1  J3 (1n, 20s) fits now (2 idle) but would end at 21 > 10 and use a node J2 needs:
    #        refused.
    #   t=10 J2 on 0-3.  t=15 J2 ends -> J3 on 0.
    jobs = [job(1, 0, 10, 2), job(2, 0, 5, 4), job(3, 1, 20, 1)]
    check(replay(jobs, flat(4), "easy"), {1: (0, "0-1"), 2: (10, "0-3"), 3: (15, "0")})


def test_easy_backfills_long_job_onto_extra_nodes():
    # 4 nodes, EASY. The head needs only 3 of the 4 nodes free at its shadow time, so one extra
    # node may be used by a job that runs past the shadow time.
    #   t=0  J1 (2n, 10s) on 0-1.
    #   t=1  J2 (3n, 10s) top, reserved at 10; extra = 4 - 3 = 1.
    #   t=2  J3 (1n, 50s) ends at 52 > 10 but uses 1 <= extra: starts on node 2.
    #   t=3  J4 (1n, 50s) would need the extra node again (0 left): refused.
    #   t=10 J1 ends: J2 on 0-1,3 (node 2 is J3's).  J4 top, 0 idle.
    #   t=20 J2 ends: J4 on 0.
    jobs = [job(1, 0, 10, 2), job(2, 1, 10, 3), job(3, 2, 50, 1), job(4, 3, 50, 1)]
    check(
        replay(jobs, flat(4), "easy"),
        {1: (0, "0-1"), 2: (10, "0-1,3"), 3: (2, "2"), 4: (20, "0")},
    )


def test_easy_plans_with_requested_time_not_run_time():
    # 4 nodes, EASY. J1 asked for 20s but really runs 5s: the shadow time is planned at 20.
    #   t=0  J1 (2n, runs 5, asked 20) on 0-1.
    #   t=1  J2 (4n, 5s) top, shadow 20.  J3 (2n, 10s) ends at 11 <= 20: backfilled on 2-3.
    #   t=5  J1 really ends; J2 still needs node 2-3 (J3 until 11).
    #   t=11 J3 ends -> J2 on 0-3.
    jobs = [job(1, 0, 5, 2, requested=20), job(2, 1, 5, 4), job(3, 1, 10, 2)]
    out = replay(jobs, flat(4), "easy")
    check(out, {1: (0, "0-1"), 2: (11, "0-3"), 3: (1, "2-3")})
    assert out[1].end_time == 5 and not out[1].killed


# ---- flat machine: conservative versus EASY -------------------------------------------------

# 4 nodes.
#   J1 t=0 (2n, 10s), J2 t=1 (3n, 10s), J3 t=2 (4n, 5s), J4 t=3 (1n, 30s).
# EASY:
#   t=0  J1 on 0-1.
#   t=1  J2 top, reserved [10,20) with 3 nodes -> extra 1.
#   t=2  J3 (4n) does not fit now.
#   t=3  J4 fits now, ends 33 > 10 but 1 node <= extra: starts on node 2.
#   t=10 J1 ends; J2 on 0-1,3.  J3 top: shadow = last of J2 (20) and J4 (33) -> 33.
#   t=33 J4 ends -> J3 on 0-3.
# Conservative:
#   t=3  profile: [3,10) 2 free; J2 reserved [10,20) -> 1 free; J3 reserved [20,25) -> 0 free.
#        J4 over [3,33) would need a node in [20,25): refused, it delays J3 (the 2nd queued
#        job) which EASY does not protect. Its own reservation is at 25.
#   t=10 J1 ends; J2 on 0-2 (all of 0-3 but one node is free; lowest three).
#   t=20 J2 ends -> J3 on 0-3.   t=25 J3 ends -> J4 on 0.
CONS_VS_EASY = [job(1, 0, 10, 2), job(2, 1, 10, 3), job(3, 2, 5, 4), job(4, 3, 30, 1)]


def test_easy_accepts_job_that_delays_second_queued_job():
    check(
        replay(CONS_VS_EASY, flat(4), "easy"),
        {1: (0, "0-1"), 2: (10, "0-1,3"), 3: (33, "0-3"), 4: (3, "2")},
    )


def test_conservative_refuses_job_that_would_delay_second_queued_job():
    check(
        replay(CONS_VS_EASY, flat(4), "conservative"),
        {1: (0, "0-1"), 2: (10, "0-2"), 3: (20, "0-3"), 4: (25, "0")},
    )


def test_conservative_backfills_job_that_delays_no_reservation():
    # 4 nodes, conservative.
    #   t=0  J1 (2n, 10s) on 0-1.  t=1 J2 (4n, 10s) reserved [10,20), 0 free then.
    #   t=2  J3 (2n, 20s) reserved [20,40).
    #   t=3  J4 (2n, 7s) runs [3,10) on the 2 idle nodes: delays neither J2 nor J3 -> on 2-3.
    #   t=10 J1 and J4 end -> J2 on 0-3.  t=20 J3 on 0-1.
    jobs = [job(1, 0, 10, 2), job(2, 1, 10, 4), job(3, 2, 20, 2), job(4, 3, 7, 2)]
    check(
        replay(jobs, flat(4), "conservative"),
        {1: (0, "0-1"), 2: (10, "0-3"), 3: (20, "0-1"), 4: (3, "2-3")},
    )


# ---- flat machine: kills, simultaneous events, ties -----------------------------------------


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_job_killed_at_requested_time(backfill):
    # 4 nodes. J1 (4n) would run 100s but asked for 10s: killed at t=10.
    #   t=0  J1 on 0-3.  J2 (1n, 5s) waits.
    #   t=10 J1 killed -> J2 on 0, ends at 15.
    jobs = [job(1, 0, 100, 4, requested=10), job(2, 0, 5, 1)]
    out = replay(jobs, flat(4), backfill)
    check(out, {1: (0, "0-3"), 2: (10, "0")})
    assert out[1].end_time == 10, "a job must be killed at its requested wall time"
    assert out[1].killed, "a job stopped at its limit must be reported as killed"
    assert not out[2].killed and out[2].end_time == 15


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_end_processed_before_submission_at_same_instant(backfill):
    # 4 nodes.
    #   t=0  J1 (4n, 10s) on 0-3.
    #   t=5  J2 (2n, 5s) waits.
    #   t=10 J1 ends AND J3 (2n, 5s) is submitted: the end comes first, then the submission,
    #        then one pass: J2 (older) on 0-1, J3 on 2-3, both at t=10.
    jobs = [job(1, 0, 10, 4), job(2, 5, 5, 2), job(3, 10, 5, 2)]
    check(replay(jobs, flat(4), backfill), {1: (0, "0-3"), 2: (10, "0-1"), 3: (10, "2-3")})


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_job_submitted_when_another_ends_starts_at_once(backfill):
    # 4 nodes. t=0 J1 (4n, 10s) on 0-3. t=10 J1 ends and J2 (4n, 5s) arrives: it starts at
    # t=10 on 0-3 (the freed nodes count in the same instant's pass).
    jobs = [job(1, 0, 10, 4), job(2, 10, 5, 4)]
    check(replay(jobs, flat(4), backfill), {1: (0, "0-3"), 2: (10, "0-3")})


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_equal_submit_times_ordered_by_jobid(backfill):
    # 4 nodes; the trace lists job 5 before job 3, both submitted at t=0 with 3 nodes (10s),
    # and J7 (1n, 10s) also at t=0. Equal FCFS scores -> lower job id first.
    #   t=0  J3 on 0-2.  J5 does not fit: top, reserved at 10.
    #        none: J7 waits behind J5.
    #        easy/conservative: J7 on node 3 over [0,10) ends when J5's reservation begins.
    #   t=10 J3 ends -> J5 on 0-2; under none J7 starts beside it on 3.
    jobs = [job(5, 0, 10, 3), job(3, 0, 10, 3), job(7, 0, 10, 1)]
    expected_j7 = (10, "3") if backfill == "none" else (0, "3")
    check(replay(jobs, flat(4), backfill), {3: (0, "0-2"), 5: (10, "0-2"), 7: expected_j7})


def test_equal_submit_times_both_fit_lower_jobid_gets_lower_nodes():
    # 4 nodes: J9 and J2 both submitted at t=0 with 2 nodes. J2 ranks first -> 0-1, J9 -> 2-3.
    jobs = [job(9, 0, 10, 2), job(2, 0, 10, 2)]
    check(replay(jobs, flat(4), "easy"), {2: (0, "0-1"), 9: (0, "2-3")})


# ---- Blue Gene/P: seed 003 Fig. 1 ----------------------------------------------------------

MIDPLANES = {
    "A": "R00-M0",
    "B": "R00-M1",
    "C": "R01-M0",
    "D": "R01-M1",
    "E": "R02-M0",
    "F": "R02-M1",
    "G": "R03-M0",
    "H": "R03-M1",
}


def _cards(letters: str) -> tuple[str, ...]:
    return tuple(f"{MIDPLANES[x]}-N{n:02d}" for x in letters for n in range(16))


FIG1_BLOCKS = ("A", "B", "C", "D", "E", "F", "G", "H", "AB", "CD", "EF", "GH", "ABCD", "EFGH",
               "ABCDEFGH")


def fig1_description() -> BGPDescription:
    return BGPDescription("fig1", tuple(BlockSpec(name, _cards(name)) for name in FIG1_BLOCKS))


def fig1_machine() -> BGPMachine:
    return BGPMachine(fig1_description())


def test_fig1_table_shape():
    machine = fig1_machine()
    assert machine.total_nodes == 4096
    assert machine.min_block_size == 512
    assert machine.allocation_size(600) == 1024
    assert machine.allocation_size(2049) == 4096
    assert machine.allocation_size(4097) is None


def test_fig1_blk_values_with_b_busy():
    # Seed 003 Fig. 1: B occupied blocks AB, ABCD, ABCDEFGH. Then BLK(A)=0, BLK(C)=BLK(D)=1
    # (CD), BLK(E..H)=2 (their pair and EFGH).
    machine = fig1_machine()
    machine.allocate("B", 99, 1000.0)
    blk = {name: machine.blk(name) for name in "ACDEFGH"}
    assert blk == {"A": 0, "C": 1, "D": 1, "E": 2, "F": 2, "G": 2, "H": 2}, blk
    assert machine.find_location(512, 100.0, 0.0) == "A", "a 512-node job must go to A (BLK 0)"
    # a 1024-node job: CD blocks C and D (2), EF/GH block 3 each -> CD
    assert machine.find_location(1024, 100.0, 0.0) == "CD"


def test_fig1_empty_machine_ties_go_to_first_name():
    machine = fig1_machine()
    # every 512 block blocks its pair, its half and the whole machine: tie -> "A"
    assert {machine.blk(x) for x in "ABCDEFGH"} == {3}
    assert machine.find_location(512, 10.0, 0.0) == "A"
    assert machine.find_location(1024, 10.0, 0.0) == "AB"
    assert machine.find_location(2048, 10.0, 0.0) == "ABCD"
    assert machine.find_location(4096, 10.0, 0.0) == "ABCDEFGH"


def test_fig1_replay_places_by_blk():
    # EASY, no contention for time: placement alone.
    #   t=0 J1 (512, 100s) -> A (all tie at 3).  J2 (512) -> B (BLK 0).  J3 (512) -> C (BLK 1,
    #   the CD pair; E..H cost 2).  J4 (512) -> D (BLK 0 now).  J5 (512) -> E (all of E..H cost
    #   2, first name).  J6 (600 nodes) gets a 1024 block: only GH is free (EF blocked by E).
    jobs = [job(i, 0, 100, 512) for i in range(1, 6)] + [job(6, 0, 100, 600)]
    out = replay(jobs, fig1_machine(), "easy")
    check(out, {1: (0, "A"), 2: (0, "B"), 3: (0, "C"), 4: (0, "D"), 5: (0, "E"), 6: (0, "GH")})
    assert out[6].allocated_nodes == 1024 and out[6].nodes == 600


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_fig1_full_machine_drain(backfill):
    # The top job needs the whole machine (ABCDEFGH) and drains it.
    #   t=0 J1 (512, 100s) -> A.
    #   t=1 J2 (4096, 10s) top: ABCDEFGH reserved [100,110).
    #   t=2 J3 (512, 50s) ends at 52 <= 100 -> backfilled on B (BLK 0).
    #   t=3 J4 (512, 200s) would run into [100,110) on every 512 block: refused.
    #   t=4 J5 (600 nodes -> 1024 block, 20s) ends at 24: backfilled; AB is blocked, CD costs 2
    #       (C, D), EF and GH cost 3 -> CD.
    #   t=100 J1 ends -> J2 on ABCDEFGH.  t=110 -> J4 on A (every block free again: tie).
    jobs = [
        job(1, 0, 100, 512),
        job(2, 1, 10, 4096),
        job(3, 2, 50, 512),
        job(4, 3, 200, 512),
        job(5, 4, 20, 600),
    ]
    out = replay(jobs, fig1_machine(), backfill)
    check(out, {1: (0, "A"), 2: (100, "ABCDEFGH"), 3: (2, "B"), 4: (110, "A"), 5: (4, "CD")})
    assert out[5].allocated_nodes == 1024


def test_fig1_none_does_not_backfill_around_drain():
    # Same trace, backfill none: J3, J4, J5 all wait for J2 (strict order).
    #   t=100 J1 ends -> J2 on ABCDEFGH [100,110).
    #   t=110 J3 -> A, J4 -> B (BLK 0), J5 (1024) -> CD (AB blocked; CD costs 2, EF/GH 3).
    jobs = [
        job(1, 0, 100, 512),
        job(2, 1, 10, 4096),
        job(3, 2, 50, 512),
        job(4, 3, 200, 512),
        job(5, 4, 20, 600),
    ]
    check(
        replay(jobs, fig1_machine(), "none"),
        {1: (0, "A"), 2: (100, "ABCDEFGH"), 3: (110, "A"), 4: (110, "B"), 5: (110, "CD")},
    )


# Draining a 2048 block, where EASY and conservative part ways.
#   t=0 J1 (1024, 100s) -> AB (all 1024 blocks cost 4, first name).
#       J2 (1024, 200s) -> CD (cost 2: C, D) rather than EF/GH (3).
#       J3 (1024, 300s) -> EF (EF and GH cost 3, first name).  GH, G, H stay free.
#   t=1 J4 (2048, 100s) top: ABCD free at max(100, 200) = 200, EFGH at 300 -> drains ABCD
#       [200,300).
#       J5 (4096, 10s) cannot start.
#   t=2 J6 (512, 400s).
# EASY: J6 on G (cost 1: GH; H also 1, G first) touches no ABCD block -> starts at 2, ends 402.
#   t=100 J1 ends; J4 still waits for CD.  t=200 J2 ends -> J4 on ABCD.
#   J5 top: ABCDEFGH free at max(300, 300, 402) = 402.  t=402 J6 ends -> J5 on ABCDEFGH.
# Conservative: J5 gets its own reservation ABCDEFGH [300,310); J6 on G or H over [2,402) would
#   overlap it -> refused, reserved at 310.  t=200 J4 on ABCD.  t=300 J5 on ABCDEFGH.
#   t=310 J6 on A (all free, tie).
DRAIN_2048 = [
    job(1, 0, 100, 1024),
    job(2, 0, 200, 1024),
    job(3, 0, 300, 1024),
    job(4, 1, 100, 2048),
    job(5, 1, 10, 4096),
    job(6, 2, 400, 512),
]


def test_fig1_easy_2048_drain_lets_long_job_delay_second_queued():
    check(
        replay(DRAIN_2048, fig1_machine(), "easy"),
        {
            1: (0, "AB"),
            2: (0, "CD"),
            3: (0, "EF"),
            4: (200, "ABCD"),
            5: (402, "ABCDEFGH"),
            6: (2, "G"),
        },
    )


def test_fig1_conservative_2048_drain_protects_second_queued():
    check(
        replay(DRAIN_2048, fig1_machine(), "conservative"),
        {
            1: (0, "AB"),
            2: (0, "CD"),
            3: (0, "EF"),
            4: (200, "ABCD"),
            5: (300, "ABCDEFGH"),
            6: (310, "A"),
        },
    )


def test_fig1_easy_refuses_512_job_on_drained_half():
    # A 1024 drain: the top job's block is reserved, a long job may only use the other half.
    #   t=0 J1 (512, 100s) -> A.  J2 (512, 100s) -> B (BLK 0).  J3 (512, 100s) -> C (BLK 1).
    #   t=1 J4 (1024, 50s) top: AB free at 100, CD at 100, EF/GH free now!  -> it starts on EF
    #       at once (EF costs 3: E, F, EFGH; GH also 3; EF first).
    #   t=2 J5 (2048, 50s) top: ABCD free at 100, EFGH at 51 -> drains EFGH [51,101).
    #   t=3 J6 (512, 100s): candidates D, G, H. G/H conflict with EFGH's drain -> only D, cost 0
    #       (CD, ABCD already blocked) -> D at 3.
    #   t=4 J7 (512, 100s): nothing free outside the drain: refused.
    #   t=51 J4 ends -> J5 on EFGH.  t=100 J1..J3 end: A and B would block AB (cost 1), C blocks
    #       nothing (CD is held off by D) -> J7 on C.
    jobs = [
        job(1, 0, 100, 512),
        job(2, 0, 100, 512),
        job(3, 0, 100, 512),
        job(4, 1, 50, 1024),
        job(5, 2, 50, 2048),
        job(6, 3, 100, 512),
        job(7, 4, 100, 512),
    ]
    check(
        replay(jobs, fig1_machine(), "easy"),
        {
            1: (0, "A"),
            2: (0, "B"),
            3: (0, "C"),
            4: (1, "EF"),
            5: (51, "EFGH"),
            6: (3, "D"),
            7: (100, "C"),
        },
    )


# ---- fallback threshold ------------------------------------------------------------------


def half_threshold(queued_time):
    return queued_time, 0.5 * queued_time


def bare_score(queued_time):
    return queued_time


# 4 nodes, backfill none (so only the threshold can let a job pass the top one).
#   t=0  J1 (2n, 100s) on 0-1.
#   t=10 J2 (4n, 10s) top.
#   t=20 J3 (1n, 500s).   t=40 J4 (1n, 5s) arrives and triggers a pass.
# Threshold 0.5·score: at t=40 J2 scores 30 (threshold 15); J3 scores 20 > 15 -> starts on 2;
#   J4 scores 0 -> waits.  t=100 J1 ends: J2 (4n) still blocked by J3, threshold 45; J4 scores
#   60 > 45 -> starts on 0.  t=540 J3 ends -> J2 on 0-3 at 540.
# Bare score: nobody passes J2.  t=100 J2 on 0-3.  t=110 J3 on 0, J4 on 1.
THRESHOLD_TRACE = [job(1, 0, 100, 2), job(2, 10, 10, 4), job(3, 20, 500, 1), job(4, 40, 5, 1)]


def test_threshold_lets_lower_ranked_job_pass_blocked_top_job():
    policy = make_utility(half_threshold, "half")
    check(
        replay(THRESHOLD_TRACE, flat(4), "none", policy),
        {1: (0, "0-1"), 2: (540, "0-3"), 3: (40, "2"), 4: (100, "0")},
    )


def test_bare_score_lets_no_job_pass_blocked_top_job():
    policy = make_utility(bare_score, "bare")
    check(
        replay(THRESHOLD_TRACE, flat(4), "none", policy),
        {1: (0, "0-1"), 2: (100, "0-3"), 3: (110, "0"), 4: (110, "1")},
    )


def test_threshold_equal_score_does_not_pass():
    # "strictly above": a job scoring exactly the top job's threshold must wait.
    # 4 nodes, none. Score = 10 for everyone except J2 (the 4-node job), threshold = 10.
    #   t=0 J1 (2n, 100s) on 0-1.  t=1 J2 top (4n).  t=2 J3 (1n) scores 10, not > 10: waits.
    #   t=100 J2 on 0-3.  t=110 J3 on 0.
    def flat_score(size):
        return (20.0, 10.0) if size == 4 else 10.0

    jobs = [job(1, 0, 100, 2), job(2, 1, 10, 4), job(3, 2, 5, 1)]
    check(
        replay(jobs, flat(4), "none", make_utility(flat_score, "flat_score")),
        {1: (0, "0-1"), 2: (100, "0-3"), 3: (110, "0")},
    )


# ---- fractional times (a planner bug found here, now fixed) ------------------------------


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_fig1_drain_time_is_exact_with_fractional_times(backfill):
    # Times in fractions of a second (the flat machine gets this right, see below).
    #   t=0    J1 (2048, 10s) -> ABCD, planned to end at 10.
    #   t=9.5  J2 (4096, 5s) top: ABCDEFGH is free at 10 -> drain [10,15).
    #          J3 (512, 0.8s) would hold E over [9.5,10.3), into the drain: refused.
    #   t=10   J1 ends -> J2 on ABCDEFGH.  t=15 -> J3 on A.
    # Observed: the drain is planned at 10.5 (= 9.5 + 1), J3 backfills on E, J2 starts at 10.3.
    jobs = [job(1, 0, 10, 2048), job(2, 9.5, 5, 4096), job(3, 9.5, 0.8, 512)]
    check(
        replay(jobs, fig1_machine(), backfill),
        {1: (0, "ABCD"), 2: (10, "ABCDEFGH"), 3: (15, "A")},
    )


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_flat_drain_time_is_exact_with_fractional_times(backfill):
    # The flat analogue of the case above: J3 (1n, 0.8s) would end at 10.3, after the head's
    # reservation at 10 with no extra nodes: refused.  J2 at 10 on 0-3, J3 at 15 on 0.
    jobs = [job(1, 0, 10, 2), job(2, 9.5, 5, 4), job(3, 9.5, 0.8, 1)]
    check(replay(jobs, flat(4), backfill), {1: (0, "0-1"), 2: (10, "0-3"), 3: (15, "0")})


def test_an_outcome_names_every_field_of_the_job() -> None:
    """Qsim makes each JobOutcome from its fields in order, without the named tuple's checks:
    every field must land under its own name (a swap would pass the start/place checks above)."""
    jobs = [TraceJob(jobid=1, submit_time=10, run_time=50, requested_time=30, nodes=3,
                     user="ann", project="climate", queue="prod"),
            TraceJob(jobid=2, submit_time=12, run_time=20, requested_time=60, nodes=2,
                     user="bob", project="fusion", queue="debug")]
    outcomes = replay(jobs, flat(4), "easy")
    assert outcomes[1] == JobOutcome(
        jobid=1, submit_time=10, start_time=10, end_time=40, nodes=3, allocated_nodes=3,
        requested_time=30, location="0-2", killed=True, failed_runs=0, lost_node_seconds=0.0,
        user="ann", project="climate", queue="prod")
    assert outcomes[2] == JobOutcome(
        jobid=2, submit_time=12, start_time=40, end_time=60, nodes=2, allocated_nodes=2,
        requested_time=60, location="0-1", killed=False, failed_runs=0, lost_node_seconds=0.0,
        user="bob", project="fusion", queue="debug")
    assert type(outcomes[1]) is JobOutcome and outcomes[1].wait == 0
