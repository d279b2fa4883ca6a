"""Queues mapped to places (partadm --queue): a mapped queue's jobs run only on its places, on
Blue Gene/P and on flat machines, in every backfilling scheme; unmapped queues are unchanged."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_scheduler_properties import BGP, FLAT8, SCHEMES, SETTINGS, MachineKind, workloads

from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.bits import ranges_to_mask
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

R01 = frozenset({"ANL-R01-M0-512", "ANL-R01-M1-512", "ANL-R01-1024"})


def two_racks() -> BGPMachine:
    return BGPMachine(load_description("bgp-2rack"))


def test_a_bgp_job_goes_only_to_blocks_of_its_set() -> None:
    machine = two_racks()
    assert machine.find_location(512, 60, 0) == "ANL-R00-M0-512"
    assert machine.find_location(512, 60, 0, R01) == "ANL-R01-M0-512"
    machine.allocate("ANL-R01-M0-512", 1, 100.0)
    machine.allocate("ANL-R01-M1-512", 2, 200.0)
    assert machine.find_location(512, 60, 0, R01) is None
    planner = machine.planner(0.0)
    assert planner.location_now(512, 60, R01) is None
    assert planner.location_now(512, 60) == "ANL-R00-M0-512"
    # The drain waits for the set's first block to come free, not the idle rack 0.
    assert planner.reserve_earliest(512, 60, R01) == (100.0, "ANL-R01-M0-512")
    assert planner.reserve_earliest(1024, 60, R01) == (200.0, "ANL-R01-1024")


def test_a_set_of_large_blocks_still_runs_small_jobs_on_them() -> None:
    machine = two_racks()
    racks = frozenset({"ANL-R00-1024", "ANL-R01-1024"})
    assert machine.find_location(100, 60, 0, racks) == "ANL-R00-1024"
    assert machine.planner(0.0).reserve_earliest(2048, 60, racks) == (float("inf"), "")
    assert machine.find_location(100, 60, 0, frozenset({"no-such-block"})) is None


def test_a_flat_job_goes_only_to_nodes_of_its_set() -> None:
    machine = FlatMachine(FlatDescription("flat", 8))
    upper = frozenset(str(n) for n in range(4, 8))
    assert machine.find_location(2, 60, 0, upper) == "4-5"
    machine.allocate("4-6", 1, 100.0)
    assert machine.find_location(2, 60, 0, upper) is None
    assert machine.find_location(2, 60, 0) == "0-1"
    planner = machine.planner(0.0)
    assert planner.location_now(1, 60, upper) == "7"
    # Five nodes are free now, but only one of the set: the set's nodes come free at 100.
    assert planner.reserve_earliest(2, 60, upper) == (100.0, "2 nodes")
    assert planner.reserve_earliest(5, 60, upper) == (float("inf"), "")


def _replay(jobs: list[TraceJob], kind: MachineKind, backfill: str,
            places: dict[str, frozenset[str]]) -> list[tuple[int, float, str]]:
    qsim = Qsim(jobs, kind.build(), builtin_policy("fcfs"), Backfill(backfill))
    qsim.queue_places = places
    return sorted((o.jobid, o.start_time, o.location) for o in qsim.run().outcomes)


def _on_places(location: str, kind: MachineKind, places: frozenset[str]) -> bool:
    if not kind.is_flat:
        return location in places
    allowed = 0
    for name in places:
        allowed |= 1 << int(name)
    return ranges_to_mask(location) & ~allowed == 0


FLAT_PLACES = frozenset({"2", "3", "4", "5"})
BGP_PLACES = frozenset({"B", "C", "D", "CD", "A-0", "A-1"})


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT8, BGP]), backfill=st.sampled_from(SCHEMES))
def test_a_mapped_queue_starts_its_jobs_only_on_its_places(data, kind, backfill) -> None:
    jobs = data.draw(workloads(kind))
    mapped = data.draw(st.sets(st.sampled_from([j.jobid for j in jobs])))
    jobs = [TraceJob(j.jobid, j.submit_time, j.run_time, j.requested_time, j.nodes,
                     queue="mapped" if j.jobid in mapped else "default") for j in jobs]
    places = FLAT_PLACES if kind.is_flat else BGP_PLACES
    for jobid, _start, location in _replay(jobs, kind, backfill, {"mapped": places}):
        if jobid in mapped:
            assert _on_places(location, kind, places), f"job {jobid} ran on {location}"


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([FLAT8, BGP]), backfill=st.sampled_from(SCHEMES))
def test_a_mapping_of_a_queue_without_jobs_changes_no_schedule(data, kind, backfill) -> None:
    jobs = data.draw(workloads(kind))
    places = FLAT_PLACES if kind.is_flat else BGP_PLACES
    assert _replay(jobs, kind, backfill, {"other": places}) == _replay(jobs, kind, backfill, {})
