"""Properties of replays over random small workloads (hypothesis).

Machines: flat clusters of a few nodes and a small Blue Gene/P table (seed 003 Fig. 1 plus a few
sub-midplane blocks). Schemes: none, easy, conservative. Policies: fcfs and wfp3.

Every property is something a user of the replay would notice:

* no node (flat) or node card (Blue Gene/P) is ever held by two jobs at once;
* a job starts no earlier than its submission, runs min(run, requested), holds the right amount
  of machine, and every job that fits the machine appears exactly once;
* no job waits while the whole machine is idle;
* FCFS without backfilling is strict: jobs start in submission order, and later submissions never
  change an earlier job's start;
* FCFS + EASY: once a job is the blocked head, it starts no later than the earliest time the
  jobs then running (before any backfill of that pass) leave room for it — the reservation EASY
  promises. Computed here from the outcomes alone, independently of the planner;
* FCFS + conservative (flat, exact estimates): a job starts no later than it would with every
  later-submitted job removed from the trace;
* a replay is deterministic: the same inputs give byte-identical outcomes.

Bounds that depend on planned ends use workloads with exact estimates (a job runs its requested
time, or longer and is killed there): with over-estimates, EASY and conservative make no such
promise about the final schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_lublin_oracle import oracle

from cobaltlite.faults.sources import FailureEvent
from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.description import BGPDescription, BlockSpec, FlatDescription
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.outcome import JobOutcome
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMES = ("none", "easy", "conservative")

# ---- machines --------------------------------------------------------------------------------

MIDPLANES = {x: f"R0{i // 2}-M{i % 2}" for i, x in enumerate("ABCDEFGH")}


def _cards(letters: str, first: int = 0, count: int = 16) -> tuple[str, ...]:
    return tuple(f"{MIDPLANES[x]}-N{n:02d}" for x in letters for n in range(first, first + count))


BGP_BLOCKS: dict[str, tuple[str, ...]] = {
    name: _cards(name)
    for name in ("A", "B", "C", "D", "E", "F", "G", "H", "AB", "CD", "EF", "GH", "ABCD", "EFGH",
                 "ABCDEFGH")
}
# Sub-midplane blocks inside A (128 and 256 nodes), so small jobs share a midplane.
BGP_BLOCKS.update({f"A-{k}": _cards("A", 4 * k, 4) for k in range(4)})
BGP_BLOCKS.update({"A-01": _cards("A", 0, 8), "A-23": _cards("A", 8, 8)})
BGP_SIZES = sorted({32 * len(cards) for cards in BGP_BLOCKS.values()})  # 128 .. 4096


def bgp_machine() -> BGPMachine:
    return BGPMachine(
        BGPDescription("fig1+", tuple(BlockSpec(n, c) for n, c in sorted(BGP_BLOCKS.items())))
    )


@dataclass(frozen=True)
class MachineKind:
    label: str
    nodes: int  # 0 for Blue Gene/P

    def build(self):
        if self.nodes:
            return build_machine(FlatDescription(f"flat{self.nodes}", self.nodes))
        return bgp_machine()

    @property
    def is_flat(self) -> bool:
        return self.nodes > 0

    @property
    def capacity(self) -> int:
        return self.nodes or 4096


FLAT4, FLAT8, FLAT13 = MachineKind("flat4", 4), MachineKind("flat8", 8), MachineKind("flat13", 13)
BGP = MachineKind("bgp", 0)

# ---- workloads ---------------------------------------------------------------------------------


@st.composite
def workloads(
    draw, kind: MachineKind, exact: bool = False, max_jobs: int = 10, span: int = 40,
    min_jobs: int = 1, oversize: bool = True,
):
    """Jobs with shuffled ids, submit times in [0, span] (ties are common) and sizes that
    sometimes exceed the machine. exact=True: every job's planned end is its real end."""
    n = draw(st.integers(min_jobs, max_jobs))
    ids = draw(st.permutations(range(1, n + 1)))
    if kind.is_flat:
        size = st.integers(1, kind.nodes + (1 if oversize else 0))
    else:
        size = st.sampled_from([1, 100, 128, 129, 256, 300, 512, 600, 1024, 1500, 2048, 4096,
                                5000])
    jobs = []
    for jobid in ids:
        submit = draw(st.integers(0, span))
        requested = draw(st.one_of(st.integers(1, 6), st.integers(1, 30)))
        if exact:
            run = draw(st.one_of(st.just(requested), st.integers(requested + 1, 60)))
        else:
            run = draw(st.integers(1, 60))
        jobs.append(TraceJob(jobid, submit, run, requested, draw(size)))
    return jobs


def with_dependencies_and_failures(
    data: st.DataObject, kind: MachineKind, jobs: list[TraceJob],
) -> list[FailureEvent]:
    """Make some of `jobs` wait for others (a missing parent, 999, leaves them held) and draw up
    to three failures of the machine's units in the first minute, in time order."""
    ids = [j.jobid for j in jobs]
    for job in jobs:
        job.dependencies = tuple(data.draw(st.lists(st.sampled_from([*ids, 999]), max_size=1)))
    units = kind.build().failure_units()
    return sorted(data.draw(st.lists(
        st.builds(FailureEvent, st.integers(0, 60), st.sampled_from(units)), max_size=3)),
        key=lambda f: (f.time, f.component))


def replay(jobs, kind: MachineKind, backfill: str, policy: str = "fcfs"):
    return Qsim(jobs, kind.build(), builtin_policy(policy), Backfill(backfill)).run()


def fits(job: TraceJob, kind: MachineKind) -> bool:
    return 0 < job.nodes <= kind.capacity


def fcfs_key(job) -> tuple[int, int]:
    return (job.submit_time, job.jobid)


def show(outcomes) -> str:
    return "\n  ".join(
        f"job {o.jobid}: submit {o.submit_time} start {o.start_time} end {o.end_time} "
        f"nodes {o.nodes} on {o.location}"
        for o in sorted(outcomes, key=lambda o: o.jobid)
    )


# ---- what a place holds ---------------------------------------------------------------------


def flat_nodes(location: str) -> set[int]:
    nodes: set[int] = set()
    for part in location.split(","):
        lo, _, hi = part.partition("-")
        nodes.update(range(int(lo), int(hi or lo) + 1))
    return nodes


def held(outcome: JobOutcome, kind: MachineKind) -> set[str]:
    if kind.is_flat:
        return {str(n) for n in flat_nodes(outcome.location)}
    return set(BGP_BLOCKS[outcome.location])


# ---- basic invariants, every machine, scheme and policy -----------------------------------------


def check_invariants(jobs, result, kind: MachineKind, label: str) -> None:
    outcomes = result.outcomes
    context = f"[{label}]\n  {show(outcomes)}"
    by_id: dict[int, JobOutcome] = {}
    for o in outcomes:
        assert o.jobid not in by_id, f"job {o.jobid} appears twice in the outcomes {context}"
        by_id[o.jobid] = o
    expected = {j.jobid for j in jobs if fits(j, kind)}
    assert set(by_id) == expected, (
        f"jobs that fit the machine {sorted(expected)} but outcomes for {sorted(by_id)} {context}"
    )
    assert len(result.skipped) == len(jobs) - len(expected), result.skipped

    places = {}
    for j in jobs:
        if j.jobid not in by_id:
            continue
        o = by_id[j.jobid]
        assert o.start_time >= j.submit_time, f"job {j.jobid} starts before submission {context}"
        assert o.end_time == o.start_time + min(j.run_time, j.requested_time), (
            f"job {j.jobid} must run min(run {j.run_time}, requested {j.requested_time}) {context}"
        )
        assert o.killed == (j.run_time > j.requested_time), f"job {j.jobid} killed flag {context}"
        places[j.jobid] = held(o, kind)
        if kind.is_flat:
            assert len(places[j.jobid]) == j.nodes == o.allocated_nodes, (
                f"job {j.jobid} asked {j.nodes} nodes, holds {o.location!r} {context}"
            )
            assert max(flat_nodes(o.location)) < kind.nodes, f"node beyond machine {context}"
        else:
            smallest = min(s for s in BGP_SIZES if s >= j.nodes)
            assert o.allocated_nodes == 32 * len(places[j.jobid]) == smallest, (
                f"job {j.jobid} ({j.nodes} nodes) should hold a {smallest}-node block, "
                f"holds {o.location} {context}"
            )

    for a in outcomes:
        for b in outcomes:
            if a.jobid < b.jobid and a.start_time < b.end_time and b.start_time < a.end_time:
                shared = places[a.jobid] & places[b.jobid]
                assert not shared, (
                    f"jobs {a.jobid} and {b.jobid} overlap in time and both hold "
                    f"{sorted(shared)[:4]} {context}"
                )

    # Nobody waits while the whole machine is idle.
    events = sorted({o.submit_time for o in outcomes} | {o.end_time for o in outcomes})
    for o in outcomes:
        for t in events:
            if o.submit_time <= t < o.start_time:
                busy = any(r.start_time <= t < r.end_time for r in outcomes)
                assert busy, f"job {o.jobid} waits at t={t} on an idle machine {context}"


@SETTINGS
@given(data=st.data())
def test_invariants_flat(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, FLAT13]))
    scheme = data.draw(st.sampled_from(SCHEMES))
    policy = data.draw(st.sampled_from(["fcfs", "wfp3"]))
    jobs = data.draw(workloads(kind))
    check_invariants(jobs, replay(jobs, kind, scheme, policy), kind, f"{kind.label} {scheme} "
                     f"{policy}")


@SETTINGS
@given(data=st.data())
def test_invariants_bgp(data):
    scheme = data.draw(st.sampled_from(SCHEMES))
    policy = data.draw(st.sampled_from(["fcfs", "wfp3"]))
    jobs = data.draw(workloads(BGP))
    check_invariants(jobs, replay(jobs, BGP, scheme, policy), BGP, f"bgp {scheme} {policy}")


@SETTINGS
@given(data=st.data())
def test_replay_is_deterministic(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, BGP]))
    scheme = data.draw(st.sampled_from(SCHEMES))
    policy = data.draw(st.sampled_from(["fcfs", "wfp3"]))
    jobs = data.draw(workloads(kind))
    first = replay(jobs, kind, scheme, policy)
    second = replay(list(jobs), kind, scheme, policy)
    assert repr(first.outcomes) == repr(second.outcomes), "same inputs, different outcomes"
    assert repr(first.samples) == repr(second.samples), "same inputs, different capacity samples"
    # the order jobs are listed in the trace must not matter either
    third = replay(list(reversed(jobs)), kind, scheme, policy)
    assert repr(first.outcomes) == repr(third.outcomes), "trace line order changed the schedule"


# ---- FCFS on a flat machine: the independent oracle of test_lublin_oracle --------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flat_fcfs_matches_textbook_oracle(data):
    """Every start time equals the textbook simulator's (FCFS; none, EASY with shadow time and
    extra nodes, conservative with a profile), over- and under-estimated run times included."""
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, FLAT13]))
    scheme = data.draw(st.sampled_from(SCHEMES))
    # long queues (many jobs, short spans) are where the schemes differ from one another
    span = data.draw(st.sampled_from([4, 12, 40]))
    jobs = data.draw(workloads(kind, max_jobs=16, min_jobs=6, span=span))
    outcomes = replay(jobs, kind, scheme).outcomes
    got = {o.jobid: o.start_time for o in outcomes}
    expected = oracle(
        [(j.jobid, j.submit_time, j.run_time, j.nodes, j.requested_time) for j in jobs],
        scheme,
        total=kind.nodes,
    )
    assert got == expected, (
        f"[{kind.label} {scheme}] start times differ from the textbook oracle:\n  "
        + "\n  ".join(
            f"job {jid}: oracle {expected.get(jid)}, cobaltlite {got.get(jid)}"
            for jid in sorted(set(got) | set(expected))
            if got.get(jid) != expected.get(jid)
        )
        + "\n  trace: "
        + repr([(j.jobid, j.submit_time, j.run_time, j.requested_time, j.nodes) for j in jobs])
    )


# ---- FCFS without backfilling ------------------------------------------------------------------


@SETTINGS
@given(data=st.data())
def test_fcfs_none_is_strict_and_blind_to_later_jobs(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, BGP]))
    jobs = data.draw(workloads(kind, max_jobs=8))
    full = {o.jobid: o for o in replay(jobs, kind, "none").outcomes}
    order = sorted((j for j in jobs if fits(j, kind)), key=fcfs_key)
    starts = [full[j.jobid].start_time for j in order]
    assert starts == sorted(starts), (
        f"FCFS without backfilling started jobs out of submission order: "
        f"{[(j.jobid, s) for j, s in zip(order, starts, strict=True)]}"
    )
    for k, j in enumerate(order):
        alone = {o.jobid: o for o in replay(order[: k + 1], kind, "none").outcomes}
        assert alone[j.jobid].start_time == full[j.jobid].start_time, (
            f"job {j.jobid}: start {full[j.jobid].start_time} with later jobs, "
            f"{alone[j.jobid].start_time} without them"
        )


# ---- FCFS + EASY: the head's reservation is never delayed --------------------------------------


def easy_bound(j: TraceJob, t0: float, running: list[JobOutcome], kind: MachineKind) -> float:
    """Earliest time >= t0 at which the planned ends of `running` leave room for j."""
    if kind.is_flat:
        candidates = sorted({t0} | {r.start_time + r.requested_time for r in running})
        for s in candidates:
            busy = sum(r.allocated_nodes for r in running if r.start_time + r.requested_time > s)
            if kind.nodes - busy >= j.nodes:
                return s
        raise AssertionError("unreachable: everything has ended by the last candidate")
    size = min(s for s in BGP_SIZES if s >= j.nodes)
    best = None
    for cards in BGP_BLOCKS.values():
        if 32 * len(cards) != size:
            continue
        free_at = max(
            [t0] + [r.start_time + r.requested_time for r in running
                    if set(BGP_BLOCKS[r.location]) & set(cards)]
        )
        best = free_at if best is None else min(best, free_at)
    assert best is not None
    return best


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_easy_never_delays_the_head_job(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8, BGP]))
    jobs = data.draw(workloads(kind, exact=True))
    outcomes = replay(jobs, kind, "easy").outcomes
    out = {o.jobid: o for o in outcomes}
    order = sorted((j for j in jobs if fits(j, kind)), key=fcfs_key)
    for k, j in enumerate(order):
        ahead = {a.jobid for a in order[:k]}
        # When j becomes the head: submitted, and every job ahead of it started.
        t0 = max([j.submit_time] + [out[a].start_time for a in ahead])
        if out[j.jobid].start_time == t0:
            continue
        # Running just after that pass, minus this pass's backfills (jobs behind j starting now).
        running = [
            o for o in outcomes
            if o.start_time <= t0 < o.end_time
            and o.jobid != j.jobid
            and not (o.start_time == t0 and o.jobid not in ahead)
        ]
        bound = easy_bound(j, t0, running, kind)
        assert out[j.jobid].start_time <= bound, (
            f"[{kind.label}] job {j.jobid} became the head at t={t0} with room for it at "
            f"t={bound}, but started at {out[j.jobid].start_time}: backfilling delayed it\n  "
            + show(outcomes)
        )


# ---- FCFS + conservative: later submissions never delay a job ------------------------------------


@SETTINGS
@given(data=st.data())
def test_conservative_later_jobs_never_delay_earlier_ones(data):
    kind = data.draw(st.sampled_from([FLAT4, FLAT8]))
    # a short span keeps a queue behind the head, where conservative and EASY differ
    jobs = data.draw(workloads(kind, exact=True, max_jobs=12, span=6, min_jobs=6, oversize=False))
    full = {o.jobid: o for o in replay(jobs, kind, "conservative").outcomes}
    order = sorted((j for j in jobs if fits(j, kind)), key=fcfs_key)
    for k, j in enumerate(order):
        alone = {o.jobid: o for o in replay(order[: k + 1], kind, "conservative").outcomes}
        assert full[j.jobid].start_time <= alone[j.jobid].start_time, (
            f"[{kind.label}] job {j.jobid} starts at {full[j.jobid].start_time} with the "
            f"later-submitted jobs but at {alone[j.jobid].start_time} without them: a later job "
            "delayed its reservation\n  " + show(full.values())
        )


@SETTINGS
@given(data=st.data())
def test_backfilling_never_hurts_the_first_blocked_job(data):
    """EASY and conservative both protect the first job that cannot start: with exact estimates
    it starts no later than under strict FCFS."""
    kind = data.draw(st.sampled_from([FLAT4, FLAT8]))
    jobs = data.draw(workloads(kind, exact=True))
    strict = {o.jobid: o for o in replay(jobs, kind, "none").outcomes}
    order = sorted((j for j in jobs if fits(j, kind)), key=fcfs_key)
    blocked = [j for j in order if strict[j.jobid].start_time > j.submit_time]
    if not blocked:
        return
    first = blocked[0]
    for scheme in ("easy", "conservative"):
        got = {o.jobid: o for o in replay(jobs, kind, scheme).outcomes}
        # Jobs ahead of `first` started on submission under FCFS; backfilling cannot change that.
        for j in order[: order.index(first)]:
            assert got[j.jobid].start_time == j.submit_time, (scheme, j.jobid)
        assert got[first.jobid].start_time <= strict[first.jobid].start_time, (
            f"{scheme}: first blocked job {first.jobid} starts at "
            f"{got[first.jobid].start_time}, after its FCFS start {strict[first.jobid].start_time}"
        )
