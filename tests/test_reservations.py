"""Reservations in the scheduler and in Qsim: a reservation's job runs inside it and nowhere
else, no other job ever overlaps it (EASY, conservative, no backfilling, W > 1), cyclic ones
roll, and a maintenance window's cost shows in a replay. The live daemons are in
tests/test_reservations_live.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_qsim_cli import small_swf
from test_scheduler_properties import (
    BGP,
    BGP_BLOCKS,
    FLAT4,
    FLAT8,
    SETTINGS,
    MachineKind,
    workloads,
)

from cobaltlite.commands import setres
from cobaltlite.errors import InputError
from cobaltlite.machine.bits import iter_bits, ranges_to_mask
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim, ReplayResult
from cobaltlite.reservations.model import (
    Reservation,
    ReservationError,
    parse_duration,
    parse_start,
)
from cobaltlite.reservations.qsim_file import load_reservations
from cobaltlite.reservations.requests import build_reservation
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob


def job(jobid: int, submit: float = 0, run: float = 100, wall: float = 100, nodes: int = 1,
        queue: str = "default") -> TraceJob:
    return TraceJob(jobid=jobid, submit_time=submit, run_time=run, requested_time=wall,
                    nodes=nodes, queue=queue)


def replay(jobs: list[TraceJob], reservations: list[Reservation], backfill: str = "easy",
           machine: str = "flat:4", window: int = 1) -> ReplayResult:
    return Qsim(jobs, build_machine(load_description(machine)), builtin_policy("fcfs"),
                Backfill(backfill), window=window, reservations=reservations).run()


def starts(result: ReplayResult) -> dict[int, tuple[float, str]]:
    return {o.jobid: (o.start_time, o.location) for o in result.outcomes}


# ---- the model --------------------------------------------------------------------------------


def test_setres_times_read_as_cobalt_wrote_them() -> None:
    assert parse_duration("90") == 5400 and parse_duration("01:30") == 5400
    assert parse_duration("01:30:15") == 5415
    assert parse_start("2009_01_06-08:00", 0, utc=True) == 1231228800
    assert parse_start("now", 1000.7) == 1000
    for bad in ("0", "1:75", "soon", "-5"):
        with pytest.raises(ReservationError, match="duration"):
            parse_duration(bad)
    with pytest.raises(ReservationError, match="YYYY_MM_DD-HH:MM"):
        parse_start("2009-01-06 08:00", 0)
    with pytest.raises(ReservationError, match="not a valid date"):
        parse_start("2009_02_30-08:00", 0)


def test_the_examples_of_setres_help_name_real_places() -> None:
    """A new user copies them: their blocks are those of the shipped Blue Gene/P tables."""
    examples = [line.split()[1:] for line in setres.build_parser().epilog.splitlines()
                if line.startswith("  setres -n")]
    assert len(examples) == 3
    before = 1_700_000_000.0  # 2023, before every example's start
    for argv in examples:
        request = setres.request_from_args(setres.build_parser().parse_args(argv))
        machines = ["flat:16"] if request["places"][0][0].isdigit() else ["bgp-2rack", "intrepid"]
        for machine in machines:
            build_reservation(request, build_machine(load_description(machine)), before, [],
                              user_exists=lambda user: True)


def test_a_cyclic_reservation_rolls_to_its_next_period_with_a_new_res_id() -> None:
    res = Reservation("weekly", start=100, duration=10, places=("0",), cycle=50, res_id=7)
    assert list(res.periods(0, count=3)) == [(100, 110), (150, 160), (200, 210)]
    assert list(res.periods(155, count=2)) == [(150, 160), (200, 210)]
    assert not res.is_over(10_000)
    rolled, skipped = res.rolled(165, 12)
    assert (rolled.start, rolled.res_id, skipped) == (200, 12, 2)
    assert res.rolled(105, 12) == (res, 0)
    once = Reservation("once", start=100, duration=10, places=("0",))
    assert once.is_over(110) and not once.is_over(109)


def test_bad_requests_are_refused_naming_what_is_wrong() -> None:
    flat = build_machine(load_description("flat:4"))
    bgp = build_machine(load_description("bgp-2rack"))
    now = 1000.0
    good = {"name": "r", "start": 2000, "duration": "10", "places": ["0", "1"]}
    made, clashes = build_reservation(good, flat, now, [], user_exists=lambda u: u == "alice")
    assert made.places == ("0", "1") and clashes == []
    cases = [
        ({**good, "places": ["0", "9"]}, flat, "unknown node(s) on flat:4: 9"),
        ({**good, "places": ["R09-M0"]}, bgp, "unknown block(s) on bgp-2rack: R09-M0"),
        ({**good, "start": 100}, flat, "already in the past"),
        ({**good, "users": ["alice", "mallory"]}, flat, "unknown user(s): mallory"),
        ({**good, "places": []}, flat, "Must supply either -p"),
        ({**good, "name": "a b"}, flat, "reservation name"),
        ({**good, "nodecount": 9, "places": []}, flat, "--nodecount 9: 4 of 4"),
        ({**good, "cycle": "5"}, flat, "shorter than the duration"),
    ]
    for request, machine, says in cases:
        with pytest.raises(ReservationError, match=re.escape(says)):
            build_reservation(request, machine, now, [], user_exists=lambda u: u == "alice")
    # The same places at an overlapping time: refused, unless forced (then reported).
    other = {**good, "name": "s", "start": 2300, "places": ["1-2"]}
    with pytest.raises(ReservationError, match="overlaps reservation\\(s\\) r"):
        build_reservation(other, flat, now, [made])
    forced, clashes = build_reservation({**other, "force": True}, flat, now, [made])
    assert forced.places == ("1", "2") and clashes == ["r"]
    # Elsewhere, or later, is fine; on Blue Gene/P a child block overlaps its parent.
    assert build_reservation({**other, "places": ["2", "3"]}, flat, now, [made])[1] == []
    assert build_reservation({**other, "start": 2600}, flat, now, [made])[1] == []
    rack, _ = build_reservation({**good, "places": ["ANL-R00-1024"]}, bgp, now, [])
    with pytest.raises(ReservationError, match="overlaps"):
        build_reservation({**good, "name": "m", "places": ["ANL-R00-M1-512"]}, bgp, now, [rack])
    # A node count picks the highest-numbered nodes free of other reservations then.
    counted, _ = build_reservation({**good, "name": "c", "places": [], "nodecount": 2}, flat,
                                   now, [made])
    assert counted.places == ("2", "3")


# ---- the scheduler around a reservation -------------------------------------------------------


@pytest.mark.parametrize("backfill", ["easy", "conservative", "none"])
def test_a_maintenance_window_is_kept_by_every_backfilling_scheme(backfill: str) -> None:
    # The whole 4-node machine is reserved over [100, 300). Job 1 (4 nodes, 150 s) would
    # overlap it if it started at 0: it waits until 300. Job 2 (2 nodes, 50 s) fits before.
    maint = Reservation("maint", start=100, duration=200, places=("0", "1", "2", "3"))
    result = replay([job(1, nodes=4, wall=150, run=150), job(2, nodes=2, wall=50, run=50)],
                    [maint], backfill)
    got = starts(result)
    if backfill == "none":  # strict order: job 2 waits behind job 1
        assert got == {1: (300, "0-3"), 2: (450, "0-1")}
    else:
        assert got == {1: (300, "0-3"), 2: (0, "0-1")}
    # Without the reservation job 1 starts at once.
    assert starts(replay([job(1, nodes=4, wall=150, run=150)], [], backfill))[1][0] == 0


def test_a_job_that_would_overlap_part_of_a_reservation_takes_the_other_nodes() -> None:
    part = Reservation("part", start=50, duration=500, places=("0", "1"))
    got = starts(replay([job(1, nodes=2, wall=100), job(2, nodes=2, wall=100),
                         job(3, nodes=1, wall=40)], [part]))
    # Jobs 1 and 2 each need the two unreserved nodes (they would overlap [50, 550));
    # job 3 ends before 50, so it may use a reserved node meanwhile.
    assert got[1] == (0, "2-3") and got[2] == (100, "2-3") and got[3] == (0, "0")


def test_a_reservations_job_runs_inside_it_and_nowhere_else() -> None:
    res = Reservation("r", start=100, duration=300, places=("2", "3"))
    got = replay([job(1, wall=100, queue="R.r"),               # waits for the window
                  job(2, wall=300, run=300, queue="R.r"),     # fits [100, 400) exactly
                  job(3, wall=301, queue="R.r"),              # would outlast it: never runs
                  job(4, submit=350, wall=100, queue="R.r"),  # too late to end in time
                  job(5, nodes=2, wall=1000)], [res])         # a non-member: on 0-1 at once
    assert starts(got) == {1: (100, "2"), 2: (100, "3"), 5: (0, "0-1")}
    # Once the reservation is over its queue is dead, as in the live queue manager.
    assert sorted(got.skipped) == ["job 3: never ran (queue R.r is dead)",
                                   "job 4: never ran (queue R.r is dead)"]


def test_a_cyclic_reservation_rolls_and_its_jobs_run_in_later_periods() -> None:
    weekly = Reservation("w", start=100, duration=50, places=("0", "1"), cycle=200)
    got = replay([job(i, nodes=2, wall=50, run=50, queue="R.w") for i in (1, 2, 3)], [weekly])
    assert starts(got) == {1: (100, "0-1"), 2: (300, "0-1"), 3: (500, "0-1")}


def test_on_blue_gene_a_reservations_jobs_may_use_the_blocks_within_it() -> None:
    rack = Reservation("rack", start=0, duration=1000, places=("ANL-R00-1024",))
    got = replay([job(1, nodes=512, wall=100, queue="R.rack"),
                  job(2, nodes=512, wall=100, queue="R.rack"),
                  job(3, nodes=512, wall=100)], [rack], machine="bgp-2rack")
    assert starts(got) == {1: (0, "ANL-R00-M0-512"), 2: (0, "ANL-R00-M1-512"),
                           3: (0, "ANL-R01-M0-512")}


def places_of(kind: MachineKind, location: str) -> set[str]:
    """Node numbers (flat) or node cards (Blue Gene/P) of a location."""
    if kind.is_flat:
        return {str(n) for n in iter_bits(ranges_to_mask(location))}
    return set(BGP_BLOCKS[location])


@st.composite
def reserved(draw, kind: MachineKind) -> list[Reservation]:
    names = [str(n) for n in range(kind.nodes)] if kind.is_flat else sorted(BGP_BLOCKS)
    made: list[Reservation] = []
    for i in range(draw(st.integers(1, 2))):
        places = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        duration = draw(st.integers(1, 30))
        cycle = draw(st.one_of(st.just(0), st.integers(duration, duration + 40)))
        made.append(Reservation(f"r{i}", start=draw(st.integers(0, 60)), duration=duration,
                                places=tuple(places), cycle=cycle))
    return made


@SETTINGS
@given(st.data(), st.sampled_from([FLAT4, FLAT8, BGP]),
       st.sampled_from(["none", "easy", "conservative"]), st.sampled_from([1, 2]))
def test_no_other_job_ever_overlaps_a_reservation(data, kind: MachineKind, backfill: str,
                                                  window: int) -> None:
    jobs = data.draw(workloads(kind))
    reservations = data.draw(reserved(kind))
    result = Qsim(jobs, kind.build(), builtin_policy("fcfs"), Backfill(backfill), window=window,
                  reservations=reservations).run()
    for o in result.outcomes:
        held = places_of(kind, o.location)
        planned_end = o.start_time + o.requested_time
        for res in reservations:
            booked = set().union(*(places_of(kind, p) for p in res.places))
            for start, end in res.periods(o.start_time):
                if start >= planned_end:
                    break
                assert not held & booked, (
                    f"job {o.jobid} on {o.location} over [{o.start_time}, {planned_end}) "
                    f"overlaps {res.name} on {res.places} over [{start}, {end})")


@SETTINGS
@given(st.data(), st.sampled_from([FLAT4, FLAT8, BGP]),
       st.sampled_from(["none", "easy", "conservative"]))
def test_a_reservations_jobs_run_only_inside_its_periods(data, kind: MachineKind,
                                                          backfill: str) -> None:
    jobs = data.draw(workloads(kind))
    reservations = data.draw(reserved(kind))
    members = set(data.draw(st.lists(st.sampled_from([j.jobid for j in jobs]), unique=True)))
    for j in jobs:
        if j.jobid in members:
            j.queue = "R.r0"
    machine = kind.build()
    res = reservations[0]
    inside = set().union(*(places_of(kind, p) for p in machine.places_within(
        frozenset(res.places))))
    result = Qsim(jobs, machine, builtin_policy("fcfs"), Backfill(backfill),
                  reservations=reservations).run()
    for o in result.outcomes:
        if o.queue != "R.r0":
            continue
        assert places_of(kind, o.location) <= inside, (o.jobid, o.location, res)
        assert any(start <= o.start_time and o.start_time + o.requested_time <= end
                   for start, end in res.periods(o.start_time, count=1)), (o, res)


@SETTINGS
@given(st.data(), st.sampled_from([FLAT4, BGP]), st.sampled_from(["easy", "conservative"]))
def test_without_reservations_nothing_changes(data, kind: MachineKind, backfill: str) -> None:
    jobs = data.draw(workloads(kind))
    plain = Qsim(jobs, kind.build(), builtin_policy("fcfs"), Backfill(backfill)).run()
    empty = Qsim(jobs, kind.build(), builtin_policy("fcfs"), Backfill(backfill),
                 reservations=[]).run()
    assert plain.outcomes == empty.outcomes


# ---- Qsim's reservation file ------------------------------------------------------------------


def test_the_reservation_file_takes_yaml_or_setres_lines(tmp_path: Path) -> None:
    machine = build_machine(load_description("flat:8"))
    yaml_file = tmp_path / "r.yaml"
    yaml_file.write_text("reservations:\n  - name: maint\n    start: 2009_01_06-08:00\n"
                         "    duration: \"04:00:00\"\n    places: 0-7\n"
                         "  - name: weekly\n    start: 1231000000\n    duration: \"60\"\n"
                         "    places: [\"0\", \"1\"]\n    cycle: \"168:00:00\"\n")
    lines = tmp_path / "r.txt"
    lines.write_text("# maintenance\nsetres -n maint -s 2009_01_06-08:00 -d 04:00:00 -p 0-7\n\n"
                     "-n weekly -s 2009_01_03-16:26 -d 60 -c 168:00:00 0 1\n")
    from_yaml, from_lines = load_reservations(yaml_file, machine), \
        load_reservations(lines, machine)
    assert [(r.name, r.start, r.duration, r.places, r.cycle) for r in from_yaml] == [
        ("maint", 1231228800, 14400, tuple(str(n) for n in range(8)), 0),
        ("weekly", 1231000000, 3600, ("0", "1"), 604800)]
    assert [r.name for r in from_lines] == ["maint", "weekly"]
    assert from_lines[0] == from_yaml[0]


@pytest.mark.parametrize(("text", "says"), [
    ("setres -n a -s 2009_01_06-08:00 -d 60 -p 0\nsetres -n b -d 60 -p 1\n",
     "r.txt:2: Must supply a start time"),
    ("setres -n a -s 2009_01_06-08:00 -d 60 -p 0\nsetres -n b -s 2009_01_06-08:30 -d 60 -p 0\n",
     "r.txt:2: reservation 'b' overlaps reservation(s) a"),
    ("setres -n a -s 2009_01_06-08:00 -d 60 -p 42\n", "r.txt:1: unknown node(s) on flat:8: 42"),
    ("setres -n a -s 2009_01_06-08:00 -d 60 --bogus 0\n", "r.txt:1: unrecognized arguments"),
    ("reservations:\n  - name: a\n    start: 0\n    duration: 4:00:00\n    places: 0\n",
     "r.txt:2: duration 14400: quote it"),
    ("reservations:\n  - name: a\n    when: 0\n", "r.txt:2: unknown key(s) when"),
    ("reservations: 3\n", "expected a list under 'reservations:'"),
])
def test_a_bad_reservation_file_is_refused_naming_file_and_line(tmp_path: Path, text: str,
                                                                 says: str) -> None:
    path = tmp_path / "r.txt"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_reservations(path, build_machine(load_description("flat:8")))
    assert says in str(caught.value)


def test_a_maintenance_window_shows_its_cost_in_a_replay(tmp_path: Path) -> None:
    # The table in docs/operator-guide.md ("Reservations in Qsim") comes from this replay.
    trace = small_swf(tmp_path, 400)
    window = tmp_path / "maint.txt"
    # The whole 256-node machine for 12 hours, from the start of the trace's second day.
    window.write_text("setres -n maint -s 1970_01_02-00:00 -d 12:00:00 -p 0-255\n")
    summaries = {}
    for name, extra in (("plain", []), ("maint", ["--reservations", str(window)])):
        ran = subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", "--trace",
                              str(trace), "--machine", "flat:256", "--policy", "fcfs", "-q",
                              "--arrival-scale", "0.5", "--out", str(tmp_path / name), *extra],
                             capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr
        summaries[name] = json.loads((tmp_path / name / "summary.json").read_text())
    plain, maint = summaries["plain"]["metrics"], summaries["maint"]["metrics"]
    assert summaries["maint"]["jobs_replayed"] == summaries["plain"]["jobs_replayed"] == 400
    assert maint["wait"]["mean"] > 1.5 * plain["wait"]["mean"]
    assert maint["makespan"] > plain["makespan"]
    assert maint["utilization"] < plain["utilization"] - 0.05
    # No job ran inside the window.
    log = (tmp_path / "maint" / "accounting.log").read_text().splitlines()
    for record in (line for line in log if ";E;" in line):
        fields = dict(pair.split("=", 1) for pair in record.split(";", 3)[3].split())
        assert float(fields["end"]) <= 86400 or float(fields["start"]) >= 86400 + 43200
