"""A scheduling pass over queue partitions and a common pool (seed 002 §III).

With a queue layout (`SystemView.queue_partitions`), the machine is cut into *regions* that
share no node: each layout queue's partition, the *rest* (the nodes no partition owns and that
are not the pool: where the queues the layout does not name run) and the common pool. Each
region gets its own pass of the one `Scheduler`, with the pass's backfilling scheme and window,
on a machine carved out of the real one (`FlatMachine.carve`: the region's nodes renumbered
from 0, holding what the real machine holds there). So each region has its own top job, its own
drain reservation and its own planner profile, exactly as if it were a machine of its own: a job
waiting in one partition never holds back another (EASY, conservative and none alike).

Order of a pass: the partitions in the layout's order, then the rest, then the pool. A job of a
layout queue that did not start in its partition goes to the pool's pass when its priority
factor exceeds τ_pf (`priority_factor`); the pool's candidates are ranked as the pass ranked
them. A job runs on its partition's nodes or on pool nodes, never on both (D002-9). While a
queue has a job waiting longer than its starvation time, the pool serves only such starving
queues (`pool_candidates`, D002-13).

On Blue Gene/P (`QueuePartitions.blocks`) nothing is carved: a region's pass runs on the real
machine with every job allowed only the region's blocks (the place sets of partadm --queue),
which share no node card and no wire with another region's (D002-26), so the region still has
its own top job, drain and plan: what one region starts or plans never frees, blocks or delays
a block of another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from cobaltlite.machine.bits import mask_to_ranges, ranges_to_mask
from cobaltlite.machine.block_layout import POOL, REST
from cobaltlite.machine.flat import FlatMachine
from cobaltlite.machine.model import FailureChance, Machine, NoFailures, PlaceSet
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.reservations.model import Window
from cobaltlite.scheduler.interfaces import QueueManagerView, SchedulableJob, SystemView
from cobaltlite.scheduler.scheduler import PassReport

if TYPE_CHECKING:
    from cobaltlite.scheduler.scheduler import Scheduler

def priority_factor(job: SchedulableJob, priority: float) -> float:
    """Seed 002 §III: slowdown × queue priority, the slowdown being (now − submit) /
    min(estimated run time, queue's maximum wall time). A job's requested time is its
    estimate and never exceeds its queue's maximum (the layout routes by it, a live queue's
    maxtime refuses more), so the slowdown is queued time / requested time (D002-8)."""
    return job.queued_time / max(job.wall_time, 1.0) * priority


def pool_candidates(waiting: list[SchedulableJob], partitions: QueuePartitions
                    ) -> list[SchedulableJob]:
    """The jobs (of layout queues, in rank order, none started yet) the pool's pass sees: those
    whose priority factor exceeds τ_pf; but while a queue has a job the pool could hold that
    has waited longer than its queue's starvation time, only the jobs of such starving queues,
    each that starves or passes τ_pf (seed 002 §III's starvation rule, D002-13)."""
    priority, tau, starve_after = partitions.priority, partitions.tau_pf, partitions.starvation_time
    assert tau is not None
    starving = {job.jobid for job in waiting if job.queued_time > starve_after(job.queue)}
    if not starving:
        return [job for job in waiting if priority_factor(job, priority[job.queue]) > tau]
    queues = {job.queue for job in waiting if job.jobid in starving}
    return [job for job in waiting if job.queue in queues and (
        job.jobid in starving or priority_factor(job, priority[job.queue]) > tau)]


class Region:
    """A set of a flat machine's nodes, renumbered from 0 in node order."""

    def __init__(self, name: str, mask: int) -> None:
        self.name = name
        self.mask = mask
        runs: list[tuple[int, int, int]] = []  # (first node, length, first local number)
        local = 0
        rest = mask
        while rest:
            start = (rest & -rest).bit_length() - 1
            end = ((rest + (1 << start)) & ~rest).bit_length() - 1
            runs.append((start, end - start, local))
            local += end - start
            rest &= ~((1 << end) - 1)
        self._runs = runs
        self.nodes = local
        self.largest = local  # the widest job it can run

    def is_open(self, machine: Machine) -> bool:
        """Whether a job could start in the region now (one without nodes: to say so)."""
        assert isinstance(machine, FlatMachine)
        return bool(self.mask & machine.free_mask()) or not self.nodes

    def site(self, queue_manager: QueueManagerView) -> _RegionSite:
        return _RegionSite(self, queue_manager)

    def to_local(self, mask: int) -> int:
        out = 0
        for start, length, local in self._runs:
            out |= ((mask >> start) & ((1 << length) - 1)) << local
        return out

    def to_global(self, mask: int) -> int:
        out = 0
        for start, length, local in self._runs:
            out |= ((mask >> local) & ((1 << length) - 1)) << start
        return out

    def local_names(self, places: frozenset[str]) -> frozenset[str]:
        """Node names of the real machine -> this region's names for those inside it."""
        mask = 0
        for name in places:
            if name.isdigit():
                mask |= 1 << int(name)
        local = self.to_local(mask & self.mask)
        return frozenset(str(n) for n in range(self.nodes) if local >> n & 1)


class _RenamedChance:
    """A failure source asked by a region's node names, answering by the real machine's."""

    def __init__(self, source: FailureChance, region: Region) -> None:
        self._source = source
        self._region = region

    def chance(self, location: str, start: float, end: float) -> float:
        real = mask_to_ranges(self._region.to_global(ranges_to_mask(location)))
        return self._source.chance(real, start, end)


class _Site:
    """A region as both peers of one `Scheduler`: its jobs (scored and ranked by the outer
    pass), the reservation periods, and what started there in this pass."""

    def __init__(self, queue_manager: QueueManagerView) -> None:
        self.queue_manager = queue_manager
        self.jobs: list[SchedulableJob] = []
        self.fixed_order = False
        self.started: dict[int, str] = {}  # jobid -> real location, this pass
        self.windows: list[Window] = []

    def _begin(self, jobs: list[SchedulableJob], fixed_order: bool,
               windows: list[Window]) -> None:
        self.jobs, self.fixed_order, self.windows = jobs, fixed_order, windows
        self.started = {}

    # the queue-manager face
    def schedulable_jobs(self) -> list[SchedulableJob]:
        return self.jobs

    def ranked_jobs(self) -> list[SchedulableJob] | None:
        return self.jobs if self.fixed_order else None

    # the system face
    def queue_partitions(self) -> None:
        return None

    def reservations(self) -> list[Window]:
        return self.windows


class _RegionSite(_Site):
    """A flat region: its carved machine, starts passed on to the real queue manager with the
    real machine's node numbers."""

    def __init__(self, region: Region, queue_manager: QueueManagerView) -> None:
        super().__init__(queue_manager)
        self.region = region
        self.now = 0.0
        self.carved: FlatMachine | None = None
        self._walls: dict[int, float] | None = None

    def begin(self, machine: Machine, jobs: list[SchedulableJob], fixed_order: bool,
              now: float, windows: Sequence[Window]) -> None:
        """Set up this pass in the region: its machine as carved now, its jobs in rank order."""
        assert isinstance(machine, FlatMachine)
        region = self.region
        failures = machine.failures
        self.carved = machine.carve(
            region.mask, region.to_local, f"{machine.name}:{region.name}",
            None if isinstance(failures, NoFailures) else _RenamedChance(failures, region))
        self._begin(jobs, fixed_order,
                    [replace(w, places=region.local_names(w.places),
                             inside=region.local_names(w.inside)) for w in windows])
        self.now = now
        self._walls = None

    def start_job(self, jobid: int, location: str) -> bool:
        assert self.carved is not None
        local = self.carved.location_mask(location)
        real = mask_to_ranges(self.region.to_global(local))
        if not self.queue_manager.start_job(jobid, real):
            return False
        if self._walls is None:  # the first start of this pass in this region
            self._walls = {job.jobid: job.wall_time for job in self.jobs}
        self.carved.allocate(location, jobid, self.now + self._walls[jobid])
        self.started[jobid] = real
        return True

    def machine(self) -> Machine:
        assert self.carved is not None
        return self.carved

    def place_sets(self) -> Mapping[str, PlaceSet]:
        return {}


class BlockRegion:
    """A region of a Blue Gene/P machine: the blocks its jobs may run on."""

    def __init__(self, name: str, blocks: PlaceSet, largest: int, nodes: int,
                 block_nodes: Mapping[str, int]) -> None:
        self.name = name
        self.blocks = blocks
        self.largest = largest  # the widest job it can run; 0: no block, nothing ever runs
        self.nodes = nodes      # of its node cards
        self._block_nodes = block_nodes

    def idle_nodes(self, machine: Machine) -> int:
        """The region's nodes that no job holds on one of its blocks: never fewer than the
        nodes a job could start on now (a job on a block spanning regions, started before the
        layout, or a block blocked through a wire, only makes it more)."""
        sizes, blocks = self._block_nodes, self.blocks
        return self.nodes - sum(sizes[b] for b in machine.held_by().values() if b in blocks)

    def is_open(self, machine: Machine) -> bool:
        return self.idle_nodes(machine) > 0

    def site(self, queue_manager: QueueManagerView) -> _BlockSite:
        return _BlockSite(self, queue_manager)


class _RegionMachine:
    """The real Blue Gene/P machine as one region's pass sees it: everything as it is, but the
    idle nodes are the region's, so the backfilling loops skip at once the jobs too wide for
    what is left of the region (a job never runs outside it), not only for the machine."""

    def __init__(self, machine: Machine, region: BlockRegion) -> None:
        self._machine = machine
        self._region = region

    def __getattr__(self, name: str) -> object:
        return getattr(self._machine, name)

    def idle_nodes(self) -> int:
        return self._region.idle_nodes(self._machine)

    def has_free_capacity(self) -> bool:
        return self.idle_nodes() > 0 and self._machine.has_free_capacity()


class _BlockSite(_Site):
    """A Blue Gene/P region: the real machine, each job allowed the region's blocks only."""

    def __init__(self, region: BlockRegion, queue_manager: QueueManagerView) -> None:
        super().__init__(queue_manager)
        self.region = region
        self.real: Machine | None = None
        self.places: dict[str, PlaceSet] = {}

    def begin(self, machine: Machine, jobs: list[SchedulableJob], fixed_order: bool,
              now: float, windows: Sequence[Window]) -> None:
        self.real = cast(Machine, _RegionMachine(machine, self.region))
        self.places = dict.fromkeys({job.queue for job in jobs}, self.region.blocks)
        self._begin(jobs, fixed_order, list(windows))

    def start_job(self, jobid: int, location: str) -> bool:
        if not self.queue_manager.start_job(jobid, location):
            return False
        self.started[jobid] = location
        return True

    def machine(self) -> Machine:
        assert self.real is not None
        return self.real

    def place_sets(self) -> Mapping[str, PlaceSet]:
        return self.places


AnyRegion = Region | BlockRegion


@dataclass(slots=True)
class _Layout:
    """The regions of one `QueuePartitions` on one machine, kept while they stay the same."""

    partitions: QueuePartitions
    own: dict[str, AnyRegion]  # queue -> its partition
    rest: AnyRegion
    pool: AnyRegion


class PartitionedPass:
    """Runs a pass region by region (see the module docstring); one per Scheduler."""

    def __init__(self, make_scheduler: Callable[[QueueManagerView, SystemView,
                                                 Callable[[], Sequence[Window]]], Scheduler],
                 queue_manager: QueueManagerView) -> None:
        self._make_scheduler = make_scheduler
        self._queue_manager = queue_manager
        self._layout: _Layout | None = None
        self._schedulers: dict[AnyRegion, tuple[Scheduler, _RegionSite | _BlockSite]] = {}
        self._remembered: dict[str, Mapping[int, tuple[float, float]]] = {}
        """Slack memory by region name for the regions' schedulers yet to be made."""

    def remember_slack(self, expected: Mapping[str, Mapping[int, tuple[float, float]]]) -> None:
        """Each region's scheduler, when made, starts with `expected[its name]` as its slack
        memory (`Scheduler.resume_slack`)."""
        self._remembered = dict(expected)

    def slack_memory(self) -> dict[str, dict[int, tuple[float, float]]]:
        """A copy of each region's slack memory, by region name."""
        return {region.name: dict(scheduler.slack.expected)
                for region, (scheduler, _) in self._schedulers.items()}

    def _regions(self, partitions: QueuePartitions, machine: Machine) -> _Layout:
        layout = self._layout
        if layout is not None and layout.partitions is partitions:
            return layout  # the same object every pass until the layout changes
        if partitions.blocks is not None:
            regions = partitions.blocks

            def block_region(name: str) -> BlockRegion:
                return BlockRegion(name, regions.blocks[name], regions.largest(name),
                                   regions.nodes[name], regions.block_nodes)
            layout = _Layout(partitions, {q: block_region(q) for q in partitions.own},
                             block_region(REST), block_region(POOL))
        elif isinstance(machine, FlatMachine):
            own = {q: Region(q, machine.mask_of(p)) for q, p in partitions.own.items()}
            pool = Region(POOL, machine.mask_of(partitions.pool))
            taken = pool.mask
            for region in own.values():
                taken |= region.mask
            rest = Region(REST, ((1 << machine.total_nodes) - 1) & ~taken)
            layout = _Layout(partitions, dict(own), rest, pool)
        else:
            raise TypeError("flat queue partitions need a flat machine")
        self._layout = layout
        self._schedulers = {}
        return layout

    def run(self, jobs: list[SchedulableJob], fixed_order: bool,
            partitions: QueuePartitions, machine: Machine, now: float, report: PassReport,
            windows: Sequence[Window]) -> None:
        """Schedule `jobs` (in rank order) region by region; add what started to `report`.

        A job the pool takes leaves its partition's pass, where it may have been the top job
        whose reservation held the others back; and what starts changes which jobs the pool's
        pass sees (the starvation rule). So after the pool starts a job, the partitions it took
        jobs from and then the pool are passed again, until a round starts nothing: the pass
        leaves nothing that a pass at the same instant would start (a Qsim replay passes only
        at events, the live scheduler again seconds later, and a start estimate's fork begins
        with a pass: all three must see the same starts)."""
        layout = self._regions(partitions, machine)
        own, rest = layout.own, layout.rest
        # Only the regions with a free node can start anything now: the jobs of the others
        # are not even grouped (a pass may rank 10,000 jobs).
        open_regions = [r for r in [*own.values(), rest] if r.is_open(machine)]
        groups: dict[AnyRegion, list[SchedulableJob]] = {r: [] for r in open_regions}
        if open_regions:
            for job in jobs:
                group = groups.get(own.get(job.queue, rest))
                if group is not None:
                    group.append(job)
        for region, group in groups.items():
            if group:
                self._run_region(region, group, fixed_order, machine, now, report, windows)
        pool = layout.pool
        if partitions.tau_pf is None or not pool.largest or not pool.is_open(machine):
            return
        started = {jobid for jobid, _ in report.started}
        # A job larger than the pool can never run there: it waits for its partition.
        largest = pool.largest
        waiting = [job for job in jobs if job.size <= largest and job.queue in own
                   and job.jobid not in started]
        urgent = pool_candidates(waiting, partitions)
        moved = self._run_region(pool, urgent, fixed_order, machine, now, report, windows,
                                 pool=True) if urgent else []
        # The passes again report only their starts: the drain, reservations and unplaceable
        # jobs reported are the first round's.
        again = PassReport()
        while moved:
            started.update(moved)
            took = {own[job.queue] for job in urgent if job.jobid in moved}
            for region in own.values():
                if region in took and region.is_open(machine):
                    group = [job for job in jobs if own.get(job.queue) is region
                             and job.jobid not in started]
                    if group:
                        started.update(self._run_region(region, group, fixed_order, machine,
                                                        now, again, windows))
            if not pool.is_open(machine):
                break
            kept = [job.jobid for job in urgent if job.jobid not in started]
            waiting = [job for job in waiting if job.jobid not in started]
            urgent = pool_candidates(waiting, partitions)
            if [job.jobid for job in urgent] == kept:
                break  # the pool's pass again over the jobs it just left starts nothing
            moved = self._run_region(pool, urgent, fixed_order, machine, now, again, windows,
                                     pool=True)
        report.started.extend(again.started)

    def _run_region(self, region: AnyRegion, jobs: list[SchedulableJob], fixed_order: bool,
                    machine: Machine, now: float, report: PassReport,
                    windows: Sequence[Window], pool: bool = False) -> list[int]:
        """One region's pass, added to `report`; return the jobs it started. `pool`: the
        common pool's, whose jobs too large for it are no news (they wait for their
        partition), so none is reported unplaceable."""
        if not region.largest:
            report.unplaceable.extend(job.jobid for job in jobs)
            return []
        if isinstance(region, BlockRegion) and any(job.size > region.largest for job in jobs):
            # The real machine would take such a job for a top job that can never start.
            report.unplaceable.extend(job.jobid for job in jobs if job.size > region.largest)
            jobs = [job for job in jobs if job.size <= region.largest]
        entry = self._schedulers.get(region)
        if entry is None:
            site = region.site(self._queue_manager)
            entry = (self._make_scheduler(site, site, site.reservations), site)
            entry[0].slack.expected = dict(self._remembered.pop(region.name, {}))
            self._schedulers[region] = entry
        scheduler, site = entry
        site.begin(machine, jobs, fixed_order, now, windows)
        sub = scheduler.iterate()
        report.started.extend((jobid, site.started[jobid]) for jobid, _ in sub.started)
        if report.drain is None and sub.drain is not None:
            report.drain = sub.drain
        report.reserved.extend(sub.reserved)
        if not pool:
            report.unplaceable.extend(sub.unplaceable)
        return [jobid for jobid, _ in sub.started]
