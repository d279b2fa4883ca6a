"""The allocation window W (seed 000 §3.3 steps 5-6): hand-worked schedules and invariants.

Semantics (scheduler.py docstring, docs/metric-aware.md "Allocation window"): jobs that fit in
rank order start first; the window is the top job and the next W-1 placeable jobs; every order of
the window is planned greedily and the one whose last job ends first is kept (rank order on
ties); the rest is backfilled (EASY protects the window's reservations).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_golden_schedules import check, fig1_machine, flat, job
from test_lublin_oracle import oracle
from test_scheduler_properties import BGP, FLAT8, MachineKind, check_invariants, workloads

from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import MAX_WINDOW, Backfill, PassReport, Scheduler


def replay(jobs, machine, backfill: str, window: int):
    result = Qsim(jobs, machine, builtin_policy("fcfs"), Backfill(backfill), window=window).run()
    return {o.jobid: o for o in result.outcomes}


# ---- flat:5 ------------------------------------------------------------------------------------
# t=0 J1 (2 nodes, 10 s) starts on 0-1.  t=1 J2 (5 nodes, 10 s), J3 (2n, 100 s), J4 (1n, 200 s),
# J5 (1n, 5 s) arrive; FCFS ranks them J2, J3, J4, J5 (equal waits, lower id first).
FLAT_TRACE = [job(1, 0, 10, 2), job(2, 1, 10, 5), job(3, 1, 100, 2), job(4, 1, 200, 1),
              job(5, 1, 5, 1)]


def test_flat_w1_is_todays_easy_schedule():
    # J2 drains the machine for [10, 20); only J5 (ends at 6) backfills; J3 and J4 follow J2.
    check(replay(FLAT_TRACE, flat(5), "easy", 1),
          {1: (0, "0-1"), 2: (10, "0-4"), 3: (20, "0-1"), 4: (20, "2"), 5: (1, "2")})


def test_flat_w2_reorders_the_window_and_protects_its_reservation():
    # t=1 window (J2, J3): order J2,J3 ends at 20 + 100 = 120; order J3,J2: J3 now [1,101), J2
    #     [101,111) -> 111, kept. J3 starts on 2-3, J2 is reserved at 101.  Backfill: J4 (200 s)
    #     would run into J2's reservation: refused (EASY protects the window); J5 ends at 6: on 4.
    # t=6 J5 ends. Window (J2, J4): J2,J4 -> J4 at 111 ends 311; J4,J2 -> J4 now [6,206),
    #     J2 [206,216): kept. J4 starts on 4, J2 is reserved at 206.
    # t=206 J4 ends -> J2 on 0-4.
    check(replay(FLAT_TRACE, flat(5), "easy", 2),
          {1: (0, "0-1"), 2: (206, "0-4"), 3: (1, "2-3"), 4: (6, "4"), 5: (1, "4")})


def test_flat_w3_keeps_the_first_of_equal_makespans():
    # t=1 window (J2, J3, J4), makespans: J2,J3,J4 220; J2,J4,J3 220; J3,J2,J4 311;
    #     J3,J4,J2 211 (J3, J4 now; J2 at 201); J4,J2,J3 211; J4,J3,J2 211 -> J3,J4,J2 (first).
    #     J3 on 2-3, J4 on 4, J2 reserved at 201; J5 finds no idle node.
    # t=10 J1 ends. Window (J2, J5): both orders end at 211 -> rank order: J2 reserved at 201,
    #     then J5 starts now on 0.
    # t=201 J4 ends -> J2 on 0-4.
    check(replay(FLAT_TRACE, flat(5), "easy", 3),
          {1: (0, "0-1"), 2: (201, "0-4"), 3: (1, "2-3"), 4: (1, "4"), 5: (10, "0")})


# ---- Blue Gene/P, seed 003 Fig. 1 (eight 512-node midplanes A..H, pairs, halves, whole) --------
# t=0 J1 (1024, 100 s) on AB.  t=1 J2 (4096, 10 s), J3 (2048, 200 s), J4 (512, 300 s),
# J5 (512, 50 s).
BGP_TRACE = [job(1, 0, 100, 1024), job(2, 1, 10, 4096), job(3, 1, 200, 2048),
             job(4, 1, 300, 512), job(5, 1, 50, 512)]


def test_bgp_w1_is_todays_easy_schedule():
    # J2 drains the whole machine [100, 110); J3 and J4 would run into it; J5 (ends 51) takes C
    # (BLK 1: CD) rather than E..H (BLK 2). t=110: J3 on ABCD (first name), J4 on E.
    check(replay(BGP_TRACE, fig1_machine(), "easy", 1),
          {1: (0, "AB"), 2: (100, "ABCDEFGH"), 3: (110, "ABCD"), 4: (110, "E"), 5: (1, "C")})


def test_bgp_w2_starts_the_half_machine_job_and_drains_after_it():
    # t=1 window (J2, J3): J2,J3 -> J3 at 110 ends 310; J3,J2 -> J3 now on EFGH [1,201), J2 at
    #     201 -> 211: kept. Backfill: J4 (300 s) on C or D would overlap J2's [201,211): refused;
    #     J5 (ends 51) on C.
    #     J3 started, so the window step runs again on the jobs left (as a pass at the same
    #     instant would): window (J2, J4): J2,J4 -> J4 at 211 ends 511; J4,J2 -> J4 now on D
    #     [1,301), J2 at 301 -> 311: kept.
    # t=301 J4 ends -> J2 on the whole machine.
    check(replay(BGP_TRACE, fig1_machine(), "easy", 2),
          {1: (0, "AB"), 2: (301, "ABCDEFGH"), 3: (1, "EFGH"), 4: (1, "D"), 5: (1, "C")})


def test_bgp_w3_places_three_jobs_around_the_drain():
    # t=1 window (J2, J3, J4): J2 first -> 410; J3,J2,J4 -> 511; J3,J4,J2 -> J3 on EFGH, J4 on C
    #     now, J2 at 301 -> 311 (kept; J4,J2,J3 and J4,J3,J2 tie at 311 but come later).
    #     Backfill: J5 (ends 51) on D, the only free midplane.
    # t=301 J4 ends -> J2 on the whole machine.
    check(replay(BGP_TRACE, fig1_machine(), "easy", 3),
          {1: (0, "AB"), 2: (301, "ABCDEFGH"), 3: (1, "EFGH"), 4: (1, "C"), 5: (1, "D")})


@pytest.mark.parametrize("bad", [0, MAX_WINDOW + 1, 12, -1, 2.0, True])
def test_a_window_outside_1_to_max_is_refused(bad):
    with pytest.raises(ValueError, match=f"from 1 to {MAX_WINDOW}"):
        Scheduler(None, None, None, Backfill.EASY, bad)  # type: ignore[arg-type]


# ---- invariants ----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["none", "easy", "conservative"]))
def test_w1_equals_the_textbook_oracle_on_random_workloads(data, backfill):
    jobs = data.draw(workloads(FLAT8, max_jobs=12))
    starts = {o.jobid: o.start_time for o in replay(jobs, FLAT8.build(), backfill, 1).values()}
    expected = oracle([(j.jobid, j.submit_time, j.run_time, j.nodes, j.requested_time)
                       for j in jobs], backfill, FLAT8.nodes)
    assert starts == expected


def reservations_hold(qsim: Qsim, report: PassReport) -> None:
    """After the pass, each window reservation is still available at its time or earlier."""
    sizes = {j.jobid: (j.size, j.wall_time) for j in qsim.schedulable_jobs()}
    planner = qsim.machine().planner(qsim.clock.now())
    for jobid, where, start in report.reserved:
        size, wall = sizes[jobid]
        again, _ = planner.reserve_earliest(size, wall)
        assert again <= start, f"job {jobid}'s reservation at {start} on {where} moved to {again}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([FLAT8, BGP]), st.integers(2, 4),
       st.sampled_from(["easy", "conservative"]))
def test_backfilling_never_delays_a_window_reservation(data, kind: MachineKind, window, backfill):
    jobs = data.draw(workloads(kind, max_jobs=10))
    passes: list[PassReport] = []

    def one_pass() -> None:
        report = qsim.scheduler.iterate()
        reservations_hold(qsim, report)
        passes.append(report)

    qsim = Qsim(jobs, kind.build(), builtin_policy("fcfs"), Backfill(backfill),
                pass_runner=one_pass, window=window)
    result = qsim.run()
    check_invariants(jobs, result, kind, f"W={window} {backfill}")
