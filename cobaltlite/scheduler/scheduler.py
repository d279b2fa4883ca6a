"""One scheduling iteration (seed 003 §IV): select, place, drain, backfill.

The order of one pass, which docs/architecture.md restates for users:

1. Rank the runnable jobs by score, highest first; equal scores go to the lower job id.
2. Start jobs in rank order, each on its lowest-cost free place, while they fit. The first job
   that does not fit is the *top* job.
3. Only jobs scoring strictly above the top job's fallback threshold may now start ahead of it
   (seed 003 §IV-A: "higher than 0.70·S_h"); each that fits starts on its lowest-cost place.
   A bare score sets threshold = score, so no job passes the top one.
4. Backfilling, by scheme:
   * none: stop. Jobs below the candidate list wait in strict score order.
   * easy: reserve (drain) the top job's earliest place; every other job, in rank order,
     starts if it fits now without delaying that reservation. Jobs certain not to fit are not
     asked about (`_easy_on_flat`, `_backfill_easy`; docs/architecture.md, "The EASY pass").
   * conservative: every job in rank order either starts now without delaying any earlier
     reservation, or gets a reservation of its own at its earliest time. On a flat machine the
     plan is kept between passes and resumed where it provably holds (scheduler/plan.py): the
     same reservations, without re-reserving the whole queue at every pass. In a forked
     replay on Blue Gene/P (start estimates) the last pass's reservations of the jobs still
     ranked first are taken up likewise (`LastReservations`).
   * slack (seed 001, cobaltlite/scheduler/slack.py): first start the combination of the first
     L waiting jobs that a branch and bound picks within every waiting job's slack, then
     backfill conservatively (with W > 1, as conservative). On a flat machine the search's
     base plan is conservative's kept plan, and the chosen combination's plan is the
     conservative pass, kept in turn (`_slack_pass`). The step repeats over the jobs left
     while it starts one (the search compares the combinations left anew, D001-5).

A pass starts everything that can start at this instant, so Qsim runs one pass per event time.

With a queue layout (seed 002; `SystemView.queue_partitions`, read once per pass), steps 1-4
run once per region of the machine, each on its own: each queue's partition, the nodes no
partition owns, then the common pool for the jobs whose priority factor exceeds τ_pf
(cobaltlite/scheduler/partitioned.py). Without one the pass below is unchanged.

A queue mapped to places (partadm --queue; `SystemView.place_sets`, read once per pass) has its
jobs placed, drained and reserved only there; jobs of other queues go anywhere, as without a
mapping (docs/administration.md).

Reservations (setres; cobaltlite/reservations), when there are any, come first, as in Cobalt's
bgsched (reference §5 step 6): each job of a reservation's queue starts only inside an open
period of it, on its places, and only if it ends by the period's end (Cobalt refuses a job that
would outlast its reservation); it never runs anywhere else. For every other job the planner
books each period's places over its time (`Planner.book`), and steps 2-4 place through that
planner, so no job, started or reserved, under EASY or conservative, overlaps a reservation.
With no reservation the pass is the one above, unchanged.

With an allocation window W > 1 (seed 000 §3.3 steps 5-6; decisions in docs/metric-aware.md),
steps 3-4 become: take the top job and the next W-1 placeable jobs in rank order (the window);
try every order of the window, placing each job greedily (start now on its lowest-cost place
that delays no earlier reservation of that order, else reserve its earliest place); keep the
order whose last window job ends first (ties: the earlier order tried, rank order first); start
and reserve the window in that order; then backfill the rest: EASY protects the window's
reservations, conservative protects every reservation. While this step starts a job, it runs
again on the jobs left (a started window job frees a slot: a pass at the same instant would
fill it). W = 1 takes the path above, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from operator import attrgetter
from typing import TYPE_CHECKING

from cobaltlite.choices import MAX_WINDOW, Backfill
from cobaltlite.clock import Clock
from cobaltlite.compiled import COMPILED
from cobaltlite.machine.flat import FlatMachine, FlatPlanner
from cobaltlite.machine.model import Machine, PlaceSet, Planner
from cobaltlite.scheduler.interfaces import QueueManagerView, SchedulableJob, SystemView
from cobaltlite.scheduler.plan import NEVER, KeptPlan, LastReservations

if COMPILED:
    from cobaltlite._speedups import easy_candidates

# Imported where used: a replay without reservations, a queue layout or slack backfilling never
# loads them.
if TYPE_CHECKING:
    from cobaltlite.reservations.model import Window
    from cobaltlite.scheduler.partitioned import PartitionedPass
    from cobaltlite.scheduler.slack import SlackBackfill, SlackSettings, SlackState


@dataclass(slots=True, init=False)
class PassReport:
    """What one pass did: jobs started (id, place) and the top job's drain (id, place, start);
    with a window, `reserved` lists every window job's reservation in the order kept."""

    started: list[tuple[int, str]]
    drain: tuple[int, str, float] | None
    reserved: list[tuple[int, str, float]]
    unplaceable: list[int]

    def __init__(self) -> None:
        # Written out: the generated one calls a factory per list, every pass (0.3 µs more).
        self.started = []
        self.drain = None
        self.reserved = []
        self.unplaceable = []


_by_jobid = attrgetter("jobid")
_NO_RUN = float("inf")  # no run refused yet
_by_score = attrgetter("score")
# The schemes as module globals: reading a member off the Enum class costs about 0.4 µs, and
# a pass compares its scheme several times.
_NONE, _EASY, _CONSERVATIVE, _SLACK = (
    Backfill.NONE, Backfill.EASY, Backfill.CONSERVATIVE, Backfill.SLACK)


class Scheduler:
    def __init__(
        self,
        queue_manager: QueueManagerView,
        system: SystemView,
        clock: Clock,
        backfill: Backfill = Backfill.EASY,
        window: int = 1,
        reservations: Callable[[], Sequence[Window]] | None = None,
        slack: SlackSettings | None = None,
    ) -> None:
        """`reservations` gives the reservation periods to honour at each pass (those ending
        after now); None: the site has none, and a pass never asks. `slack`: seed 001's
        settings, read under `Backfill.SLACK` (default: Table 3's)."""
        self.queue_manager = queue_manager
        self.system = system
        self.clock = clock
        self.backfill = Backfill(backfill)
        self.window = check_window(window)
        self.reservations = reservations
        self._slack_settings = slack
        self._slack: SlackBackfill | None = None  # made at the first slack pass
        self._places: Mapping[str, PlaceSet] | None = None  # this pass's queue -> place set
        self._kept: KeptPlan | None = None  # the last conservative pass's plan
        self.keep_plan = True
        """Resume the last conservative (or slack) plan where it holds (False: plan every pass
        afresh, the reference tests/test_kept_plan.py and tests/test_slack.py compare with)."""
        self.easy_shortcuts = True
        """Skip, in the EASY pass, the jobs the planner would certainly refuse (False: ask it
        of every job, the reference tests/test_easy_shortcuts.py compares with)."""
        self.conservative_stop = True
        """In a conservative pass whose plan is not kept, skip the jobs certain not to start now
        and stop reserving once none can (False: ask and reserve every job, the reference
        tests/test_conservative_stop.py compares with)."""
        self._partitioned: PartitionedPass | None = None  # made at the first layout's pass
        self.last_reservations: LastReservations | None = None
        """Set by a forked replay on Blue Gene/P, whose future is known (qsim/fork.py): each
        conservative pass on its machine takes up the last pass's reservations of the jobs
        still ranked first instead of searching for them again (scheduler/plan.py)."""

    def _by_partition(self) -> PartitionedPass:
        """The per-region passes of a queue layout (cobaltlite/scheduler/partitioned.py):
        each region is scheduled by a Scheduler of its own, with this one's settings."""
        if self._partitioned is None:
            from cobaltlite.scheduler.partitioned import PartitionedPass

            def make(queue_manager: QueueManagerView, system: SystemView,
                     reservations: Callable[[], Sequence[Window]]) -> Scheduler:
                return Scheduler(queue_manager, system, self.clock, self.backfill, self.window,
                                 reservations, self.slack.settings)
            self._partitioned = PartitionedPass(make, self.queue_manager)
        return self._partitioned

    @property
    def slack(self) -> SlackBackfill:
        """Seed 001's memory and search (Backfill.SLACK), with this scheduler's settings."""
        if self._slack is None:
            from cobaltlite.scheduler.slack import SlackBackfill

            self._slack = SlackBackfill(self._slack_settings)
        return self._slack

    @slack.setter
    def slack(self, backfill: SlackBackfill) -> None:
        self._slack = backfill

    def slack_state(self) -> SlackState:
        """A copy of this scheduler's slack settings and memory, its regions' too."""
        expected = {"": dict(self.slack.expected)}
        if self._partitioned is not None:
            expected.update(self._partitioned.slack_memory())
        from cobaltlite.scheduler.slack import SlackState

        return SlackState(self.slack.settings, expected)

    def resume_slack(self, state: SlackState) -> None:
        """Schedule from now on with `state`'s slack settings and memory (a forked replay
        starting where another scheduler is); call before the first pass. `state` is copied."""
        from cobaltlite.scheduler.slack import SlackBackfill

        self.slack = SlackBackfill(state.settings)
        self.slack.expected = dict(state.expected.get("", {}))
        self._by_partition().remember_slack(state.expected)

    def iterate(self) -> PassReport:
        report = PassReport()
        machine = self.system.machine()
        if not machine.has_free_capacity():
            return report  # nothing can start, so ranking would change nothing
        ranked = self.queue_manager.ranked_jobs()
        if ranked is None:
            jobs = list(self.queue_manager.schedulable_jobs())
            # Two stable sorts give (score descending, jobid ascending) without a key tuple.
            jobs.sort(key=_by_jobid)
            jobs.sort(key=_by_score, reverse=True)
        else:
            jobs = list(ranked)  # a copy: starting jobs takes them out of the queue's list
        if not jobs:
            return report
        now = self.clock.now()
        self._places = self.system.place_sets() or None
        windows = self.reservations() if self.reservations is not None else ()
        if windows:
            jobs = self._start_reservation_jobs(jobs, windows, machine, now, report)
        partitions = self.system.queue_partitions()
        if partitions is not None:
            self._by_partition().run(jobs, ranked is not None, partitions, machine, now,
                                     report, windows)
            return report
        booked = _booked_planner(machine, now, jobs, windows) if windows else None
        top_index = self._start_in_order(jobs, machine, now, report, booked)
        if top_index is None or not machine.has_free_capacity():
            if self.last_reservations is not None:
                self.last_reservations.take_off(now, report.started)
            return report  # everyone started, or nothing else can start at this instant
        if self.window > 1:
            self._place_windows(jobs[top_index:], machine, now, report, booked, windows)
            return report
        top = jobs[top_index]
        cut = top_index + 1  # ranks are sorted: the candidates are jobs[top_index + 1 : cut]
        # A fixed rank order comes with bare scores, so no job passes the top one (unscored).
        while ranked is None and cut < len(jobs) and jobs[cut].score > top.threshold:
            cut += 1
        backfill = self.backfill
        if cut == top_index + 1:  # no candidate: always so in a fixed order
            if backfill is _NONE:
                return report
            waiting = jobs[cut:]
        else:
            waiting = []
            for job in jobs[top_index + 1 : cut]:
                if not self._start_now(job, machine, now, report, booked):
                    waiting.append(job)  # no place now (None) or the start refused (False)
            if backfill is _NONE:
                return report
            waiting.extend(jobs[cut:])
        if backfill is _CONSERVATIVE:
            self._conservative_pass([top, *waiting], machine, now, report, booked)
            return report

        if (backfill is _EASY and booked is None
                and self._easy_on_flat(top, waiting, machine, now, report)):
            return report
        if backfill is _SLACK:
            # Once a step's starts are made, the search compares the combinations left anew
            # and may pick one it refused beside them (D001-5): repeat the step over the jobs
            # left while it starts one, as a second pass at this instant would.
            left = [top, *waiting]
            while left and machine.has_free_capacity():
                before = len(report.started)
                self._slack_step(left, machine, now, report, booked)
                begun = {jobid for jobid, _ in report.started[before:]}
                if not begun:
                    break
                left = [job for job in left if job.jobid not in begun]
                # The booked planner holds this step's plan: a new step books the periods anew.
                booked = _booked_planner(machine, now, left, windows) if windows else None
            return report
        planner = booked if booked is not None else machine.planner(now)
        start, where = planner.reserve_earliest(top.size, top.wall_time, self._allowed(top))
        report.drain = (top.jobid, where, start)
        self._backfill_easy(waiting, machine, planner, report)
        return report

    def _conservative_pass(
        self, jobs: list[SchedulableJob], machine: Machine, now: float, report: PassReport,
        booked: Planner | None,
    ) -> None:
        """Step 4 under conservative backfilling from the top job (`jobs[0]`) on: on a flat
        machine without place sets or reservation periods, by resuming the last pass's plan
        where it still holds (scheduler/plan.py); in a forked replay on Blue Gene/P, from the
        last pass's reservations of the jobs still ranked first (`last_reservations`); else on
        a plan made afresh."""
        kept: KeptPlan | None = None
        began: list[int] = []  # the kept jobs started where the plan reserved them
        last = self.last_reservations
        recorded: KeptPlan | LastReservations | None = None
        first = 0  # the jobs from the first on are to be reserved
        planner: Planner
        if last is not None and booked is None and machine is last.machine:
            planner, first = last.resume(now, report.started, jobs, self._allowed,
                                         lambda job, where: self._start(job, where, report))
            recorded = last
        elif booked is not None or self._places is not None or not isinstance(machine, FlatMachine):
            self._kept = None
            planner = booked if booked is not None else machine.planner(now)
        else:
            kept = self._kept
            due = kept.resume(machine, now, jobs) if kept is not None and self.keep_plan else None
            if kept is None or due is None:
                kept = self._kept = KeptPlan(machine, machine.planner(now), now)
                due = []
            planner = kept.planner
            for i in due:  # reserved from now in the plan: free nodes are there for it
                job = jobs[i]
                location = machine.find_location(job.size, job.wall_time, now)
                if location is not None and self._start(job, location, report):
                    began.append(i)
            recorded, first = kept, len(kept.keys)
        if first == 0:
            top = jobs[0]
            start, where = planner.reserve_earliest(top.size, top.wall_time, self._allowed(top))
            report.drain = (top.jobid, where, start)
            if recorded is not None:
                recorded.add(top, start, where)
            first = 1
        else:
            assert recorded is not None
            report.drain = (recorded.jobs[0].jobid, recorded.wheres[0], recorded.starts[0])
        self._backfill_conservative(jobs[first:], machine, planner, report, recorded)
        if kept is not None:
            kept.settle(now, began)

    def _slack_step(self, jobs: list[SchedulableJob], machine: Machine, now: float,
                    report: PassReport, booked: Planner | None) -> None:
        """Step 4 under slack from the top job (`jobs[0]`) on, once: start the combination the
        search chooses, then backfill conservatively (on a flat machine without place sets or
        reservation periods, around the kept plan: `_slack_pass`)."""
        if (self.keep_plan and booked is None and self._places is None
                and isinstance(machine, FlatMachine)):
            self._slack_pass(jobs, machine, now, report)
            return
        planner = booked if booked is not None else machine.planner(now)
        top = jobs[0]
        chosen = self.slack.select(jobs, machine, now)
        begun = self._start_chosen(chosen, planner, report)
        waiting = [job for job in jobs[1:] if job.jobid not in begun]
        start, where = planner.reserve_earliest(top.size, top.wall_time, self._allowed(top))
        report.drain = (top.jobid, where, start)
        self._backfill_slack_plan(waiting, machine, planner, report, booked, begun)

    def _slack_pass(self, jobs: list[SchedulableJob], machine: FlatMachine, now: float,
                    report: PassReport) -> None:
        """Step 4 under slack from the top job (`jobs[0]`) on, on a flat machine without place
        sets or reservation periods. The search's base plan is the conservative plan of `jobs`:
        the last pass's plan resumed where it holds (scheduler/plan.py), the rest reserved. The
        plan of the combination chosen (or the base plan) is then this pass's conservative
        pass: its jobs that start now start, and it is kept for the next pass, as a
        conservative pass keeps its own (the chosen jobs hold nodes from now as it planned)."""
        kept = self._kept
        if kept is None or kept.resume(machine, now, jobs) is None:
            kept = KeptPlan(machine, machine.planner(now), now)
        planner = kept.planner
        for job in jobs[len(kept.keys):]:
            start, where = NEVER, ""
            if machine.allocation_size(job.size) is not None:
                start, where = planner.reserve_earliest(job.size, job.wall_time)
            kept.add(job, start, where)
        chosen = self.slack.select(jobs, machine, now, {
            jobid: start for (jobid, _, _), start in zip(kept.keys, kept.starts, strict=True)})
        top = jobs[0]
        begun: set[int] = set()
        if chosen:
            picked = self.slack.chosen
            assert picked is not None and picked.plan is not None
            assert isinstance(picked.planner, FlatPlanner)  # the machine is flat
            planner = machine.planner(now)
            before = len(report.started)
            begun = self._start_chosen(chosen, planner, report)
            if len(report.started) - before < len(chosen):
                # A start refused: the rest as the pass without a kept plan runs it.
                self._kept = None
                start, where = planner.reserve_earliest(top.size, top.wall_time)
                report.drain = (top.jobid, where, start)
                self._backfill_conservative(
                    [job for job in jobs[1:] if job.jobid not in begun], machine, planner, report)
                return
            # A job's place name depends on its size alone on a flat machine: the base plan's.
            wheres = kept.wheres
            kept = KeptPlan(machine, picked.planner, now)
            for job, where in zip(jobs, wheres, strict=True):
                kept.add(job, picked.plan.get(job.jobid, NEVER), where)
        began = [i for i, job in enumerate(jobs) if job.jobid in begun]
        for i, (job, start) in enumerate(zip(jobs, kept.starts, strict=True)):
            if start == now and job.jobid not in begun:  # the plan holds free nodes for it
                location = machine.find_location(job.size, job.wall_time, now)
                if location is not None and self._start(job, location, report):
                    began.append(i)
        report.drain = (top.jobid, kept.wheres[0], kept.starts[0])
        kept.settle(now, sorted(began))
        self._kept = kept

    def _start_chosen(self, chosen: list[SchedulableJob], planner: Planner,
                      report: PassReport) -> set[int]:
        """Start the combination the slack search chose, each job where `planner` finds it a
        place now; return the ids of those it chose (begun or refused)."""
        for job in chosen:
            location = planner.location_now(job.size, job.wall_time, self._allowed(job))
            if location is not None and self._start(job, location, report):
                planner.commit(location, job.wall_time)
        return {job.jobid for job in chosen}

    def _backfill_slack_plan(
        self, waiting: list[SchedulableJob], machine: Machine, planner: Planner,
        report: PassReport, booked: Planner | None, begun: set[int],
    ) -> None:
        """The conservative pass after the slack search. The search planned this very pass
        (same rank order, same machine) when no place set or reservation period changes it and
        its chosen jobs all started: then no job after the last one its plan starts now can
        start, so the pass stops there, unless a start was refused and freed nodes."""
        plan = self.slack.plan_starts
        started = {jobid for jobid, _ in report.started}
        if plan is None or booked is not None or self._places is not None or begun - started:
            self._backfill_conservative(waiting, machine, planner, report)
            return
        cut = max((i + 1 for i, job in enumerate(waiting) if job.jobid in plan), default=0)
        before = len(report.started)
        self._backfill_conservative(waiting[:cut], machine, planner, report, more_after=True)
        if {jobid for jobid, _ in report.started[before:]} != plan - started:
            self._backfill_conservative(waiting[cut:], machine, planner, report)

    def _start_reservation_jobs(
        self, jobs: list[SchedulableJob], windows: Sequence[Window], machine: Machine,
        now: float, report: PassReport,
    ) -> list[SchedulableJob]:
        """Start the reservation queues' jobs, in rank order, inside their open periods; return
        the other jobs (a reservation's job never runs outside it, so it leaves the pass)."""
        by_queue: dict[str, list[Window]] = {}
        for w in windows:
            by_queue.setdefault(w.queue, []).append(w)
        members = [job for job in jobs if job.queue in by_queue]
        if not members:
            return jobs
        for job in members:
            for w in by_queue[job.queue]:
                if w.start <= now and now + job.wall_time <= w.end:
                    location = machine.find_location(job.size, job.wall_time, now, w.inside)
                    if location is not None and self._start(job, location, report):
                        break
        return [job for job in jobs if job.queue not in by_queue]

    def _start_now(self, job: SchedulableJob, machine: Machine, now: float,
                   report: PassReport, booked: Planner | None) -> bool | None:
        """Start `job` on its lowest-cost free place, found through the booked planner when
        there are reservations: True if started, False if the start was refused, None if no
        place fits now."""
        allowed = self._allowed(job)
        if booked is None:
            location = machine.find_location(job.size, job.wall_time, now, allowed)
        else:
            location = booked.location_now(job.size, job.wall_time, allowed)
        if location is None:
            return None
        if not self._start(job, location, report):
            return False
        if booked is not None:
            booked.commit(location, job.wall_time)
        return True

    def _start_in_order(
        self, jobs: list[SchedulableJob], machine: Machine, now: float, report: PassReport,
        booked: Planner | None = None,
    ) -> int | None:
        """Start jobs in rank order while they fit; return the index of the top job, if any."""
        places = self._places
        for i, job in enumerate(jobs):
            if booked is None:  # the common case, inline: a pass may rank 10,000 jobs
                location = machine.find_location(
                    job.size, job.wall_time, now,
                    None if places is None else places.get(job.queue))
                if location is not None:
                    self._start(job, location, report)
                    continue
            elif self._start_now(job, machine, now, report, booked) is not None:
                continue
            if machine.allocation_size(job.size) is None:
                report.unplaceable.append(job.jobid)
                continue
            return i
        return None

    def _place_windows(
        self, ranked: list[SchedulableJob], machine: Machine, now: float, report: PassReport,
        booked: Planner | None, windows: Sequence[Window],
    ) -> None:
        """The window step from the top job (`ranked[0]`) on, again on the jobs left while a
        round starts one: a window job that starts frees its slot for the next placeable job,
        which the round left to backfilling (to none without it), so a pass at the same
        instant would take that job into its window and might start it. A Qsim replay passes
        only at events and a start estimate's fork begins with a pass: both must see the same
        starts. The top job stays on top: it had no place now, and starts only take places.
        The report keeps every round's starts and the last round's reservations."""
        reserved, drain = len(report.reserved), report.drain
        while True:
            before = len(report.started)
            self._place_window(ranked, machine, now, report, booked)
            if len(report.started) == before or not machine.has_free_capacity():
                return
            begun = {jobid for jobid, _ in report.started[before:]}
            ranked = [job for job in ranked if job.jobid not in begun]
            # A job larger than the idle nodes cannot start now: if every job left is, the
            # next round would start nothing (the top job, ranked[0], had no place now).
            idle = machine.idle_nodes()
            if all(job.size > idle for job in ranked[1:]):
                return
            del report.reserved[reserved:]
            report.drain = drain
            # The round's reservations are on its planner: the next round plans afresh.
            booked = _booked_planner(machine, now, ranked, windows) if windows else None

    def _place_window(
        self, ranked: list[SchedulableJob], machine: Machine, now: float, report: PassReport,
        booked: Planner | None = None,
    ) -> None:
        """Steps 5-6 of seed 000 §3.3 from the top job on (see the module docstring)."""
        window: list[SchedulableJob] = []
        rest: list[SchedulableJob] = []
        for job in ranked:
            if len(window) < self.window and machine.allocation_size(job.size) is not None:
                window.append(job)
            else:
                rest.append(job)
        planner = booked if booked is not None else machine.planner(now)
        for job in self._least_makespan_order(window, planner, now):
            allowed = self._allowed(job)
            location = planner.location_now(job.size, job.wall_time, allowed)
            if location is not None:
                if self._start(job, location, report):
                    planner.commit(location, job.wall_time)
                continue
            start, where = planner.reserve_earliest(job.size, job.wall_time, allowed)
            report.reserved.append((job.jobid, where, start))
        if report.reserved:
            report.drain = report.reserved[0]
        if self.backfill is _EASY:
            self._backfill_easy(rest, machine, planner, report)
        elif self.backfill in (_CONSERVATIVE, _SLACK):
            self._backfill_conservative(rest, machine, planner, report)

    def _least_makespan_order(
        self, window: list[SchedulableJob], base: Planner, now: float
    ) -> tuple[SchedulableJob, ...]:
        """The order of `window` whose greedy plan ends its last job first; rank order on ties.

        No order can end before `lower`, the latest of the jobs' ends each planned alone; the
        search stops when an order reaches it (most often the rank order, tried first). An order
        is abandoned as soon as one of its jobs ends no earlier than the best makespan so far:
        the makespan only grows as jobs are added.
        """
        allowed = {job.jobid: self._allowed(job) for job in window}
        lower = max(_planned_end(base.copy(), job, now, allowed[job.jobid]) for job in window)
        best: tuple[SchedulableJob, ...] = tuple(window)
        best_makespan = float("inf")
        for order in permutations(window):
            planner = base.copy()
            makespan = now
            for job in order:
                end = _planned_end(planner, job, now, allowed[job.jobid])
                if end > makespan:
                    makespan = end
                if makespan >= best_makespan:
                    break
            else:
                best, best_makespan = order, makespan
                if makespan <= lower:
                    break
        return best

    # Both backfill loops skip the planner for a job larger than the idle nodes: it cannot
    # start now on any machine. The idle count only changes when a job of the loop starts.

    def _backfill_easy(
        self, waiting: list[SchedulableJob], machine: Machine, planner: Planner, report: PassReport
    ) -> None:
        """Every waiting job, in rank order, starts if `location_now` places it. With
        `easy_shortcuts`, the jobs it would certainly refuse are not asked about: during a pass
        the plan only loses free places (each start commits one), so a job refused for a run of
        w seconds is refused for any run of at least w of the same size and place set, until a
        start changes the plan (docs/architecture.md, "The EASY pass")."""
        if not machine.has_free_capacity():
            return
        idle = machine.idle_nodes()
        location_now, commit, places = planner.location_now, planner.commit, self._places
        # size, or (size, place set) with place sets -> the shortest run refused since the
        # last start (left empty without the shortcuts)
        refused: dict[object, float] = {}
        shortest_refused, remember = refused.get, self.easy_shortcuts
        for job in waiting:
            size = job.size
            if size > idle:
                continue
            allowed = None if places is None else places.get(job.queue)
            key = size if places is None else (size, allowed)
            if job.wall_time >= shortest_refused(key, _NO_RUN):
                continue
            location = location_now(size, job.wall_time, allowed)
            if location is None:
                if remember:
                    refused[key] = job.wall_time  # shorter than any refused before
                continue
            if self._start(job, location, report):
                commit(location, job.wall_time)
                if not machine.has_free_capacity():
                    return
                idle = machine.idle_nodes()
            refused.clear()  # the plan and the machine changed

    def _easy_on_flat(
        self, top: SchedulableJob, waiting: list[SchedulableJob], machine: Machine, now: float,
        report: PassReport,
    ) -> bool:
        """The EASY pass (drain and backfill) on a flat machine without a planner, when the
        plan it would make has two levels only: no place set, no reservation period (the
        caller's), no node out of service, no job overdue. Return False, having done nothing,
        when that does not hold.

        The planner's profile then counts free nodes that only grow until the top job's
        reservation at `shadow`, the first time it fits. A start now subtracts its nodes from a
        prefix of the profile, so the fewest free before `shadow` are the idle nodes and from
        `shadow` on they are `extra`, the nodes free at `shadow` beyond the top job's. A job
        fits now exactly when its size is at most the idle nodes and it ends by `shadow` or its
        size is at most `extra` (textbook EASY); one that ends after `shadow` takes its size
        from `extra`. tests/test_easy_shortcuts.py compares every pass with the planner's."""
        if not (self.easy_shortcuts and self._places is None and isinstance(machine, FlatMachine)):
            return False
        first = machine.first_free(top.size, now)
        if first is None or first[0] <= now:  # (the top job never fits now: it would have started)
            return False
        shadow, free_then = first
        report.drain = (top.jobid, f"{top.size} nodes", shadow)
        idle, extra = machine.idle_nodes(), free_then - top.size
        if not idle:
            return True
        # Both numbers only fall during the pass: one filter drops the jobs that cannot start
        # now for the whole pass (in C where compiled, a tenth of a lublin_256 replay in Python).
        candidates = easy_candidates(waiting, idle, extra, now, shadow) if COMPILED else None
        if candidates is None:
            candidates = python_easy_candidates(waiting, idle, extra, now, shadow)
        for job in candidates:
            size = job.size
            late = now + job.wall_time > shadow
            if size > idle or (late and size > extra):
                continue
            location = machine.find_location(size, job.wall_time, now)
            if location is not None and self._start(job, location, report):
                if late:
                    extra -= size
                idle = machine.idle_nodes()
                if not idle:
                    return True
        return True

    def _backfill_conservative(
        self, waiting: list[SchedulableJob], machine: Machine, planner: Planner,
        report: PassReport, kept: KeptPlan | LastReservations | None = None,
        more_after: bool = False,
    ) -> None:
        """Each job in rank order starts now if that delays no earlier reservation, else is
        reserved at its earliest, in `kept` too when the plan is kept (all of it on a flat
        machine; on Blue Gene/P in a fork, `LastReservations`, as far as the pass reserves).
        `more_after`: the pass goes on planning other jobs on `planner` after these (so all of
        these are reserved).

        Without a flat kept plan the reservations serve this pass alone, to keep later jobs
        from starting now (the report holds the top job's drain, made before). With
        `conservative_stop`, the jobs that certainly cannot start now are not asked about, and
        the pass stops reserving once no later job can start now: within a pass the plan and
        the machine only lose free places (a start commits one, a reservation holds one), so
        a job of size s and place set P refused for a run of w seconds refuses every later job
        of the same s and P with a run of w or more (a longer run from now overlaps at least
        what a shorter one does), for the rest of the pass. `_next_that_may_start` looks ahead
        with that memo; the jobs before the one it finds only need their reservations."""
        idle = machine.idle_nodes()
        look_ahead = (self.conservative_stop and not more_after
                      and not isinstance(kept, KeptPlan))
        ahead = 0  # looking ahead, no job before waiting[ahead] can start now
        refused: dict[object, float] = {}  # as in _backfill_easy, never emptied: see above
        for i, job in enumerate(waiting):
            if not machine.has_free_capacity():
                return  # later reservations cannot make anything start at this instant
            allowed = self._allowed(job)
            if i >= ahead:
                location = (planner.location_now(job.size, job.wall_time, allowed)
                            if job.size <= idle else None)
                if location is not None and self._start(job, location, report):
                    planner.commit(location, job.wall_time)
                    idle = machine.idle_nodes()
                    continue
                if look_ahead:
                    # A job larger than the idle nodes needs no entry: the look-ahead skips
                    # every such size first, and the idle count only falls during a pass.
                    if location is None and job.size <= idle:
                        refused[self._size_key(job, allowed)] = job.wall_time
                    ahead = self._next_that_may_start(waiting, i + 1, idle, planner, refused)
                    if ahead == len(waiting):
                        return  # the later reservations would start nothing now
            start, where = NEVER, ""
            if machine.allocation_size(job.size) is not None:
                start, where = planner.reserve_earliest(job.size, job.wall_time, allowed)
            if kept is not None:
                kept.add(job, start, where)

    def _next_that_may_start(
        self, waiting: list[SchedulableJob], first: int, idle: int, planner: Planner,
        refused: dict[object, float],
    ) -> int:
        """The index of the first job from `first` on that the planner would start now as it
        stands (len(waiting): none), each job skipped entered in the `refused` memo."""
        places, shortest_refused = self._places, refused.get
        for i in range(first, len(waiting)):
            job = waiting[i]
            size = job.size
            if size > idle:
                continue
            key: object
            if places is None:  # the common case, inline: the pass may look far ahead
                allowed, key = None, size
            else:
                allowed = places.get(job.queue)
                key = (size, allowed)
            if job.wall_time >= shortest_refused(key, _NO_RUN):
                continue
            if planner.location_now(size, job.wall_time, allowed) is not None:
                return i
            refused[key] = job.wall_time
        return len(waiting)

    def _size_key(self, job: SchedulableJob, allowed: PlaceSet | None) -> object:
        """What the planner's answer for `job` depends on besides its run: size and place set."""
        return job.size if self._places is None else (job.size, allowed)

    def _allowed(self, job: SchedulableJob) -> PlaceSet | None:
        """Where `job` may go in this pass: its queue's place set, or None (anywhere)."""
        return None if self._places is None else self._places.get(job.queue)

    def _start(self, job: SchedulableJob, location: str, report: PassReport) -> bool:
        if not self.queue_manager.start_job(job.jobid, location):
            return False
        report.started.append((job.jobid, location))
        return True


def _booked_planner(machine: Machine, now: float, jobs: list[SchedulableJob],
                    windows: Sequence[Window]) -> Planner:
    """A planner of `machine` from `now` with the reservation periods that may bear on
    starting `jobs` now booked."""
    booked = machine.planner(now)
    # A period starting after every job's wall time from now changes no start now; later
    # passes book it when it comes closer.
    horizon = now + max((job.wall_time for job in jobs), default=0.0)
    for w in windows:
        if w.start < horizon:
            booked.book(w.places, w.start, w.end, w.block_passthrough)
    return booked


def _planned_end(
    planner: Planner, job: SchedulableJob, now: float, allowed: PlaceSet | None
) -> float:
    """Place `job` greedily on the what-if `planner` (start now, else its earliest place)."""
    if planner.plan_now(job.size, job.wall_time, allowed):
        return now + job.wall_time
    return planner.reserve_earliest(job.size, job.wall_time, allowed)[0] + job.wall_time


def python_easy_candidates(waiting: list[SchedulableJob], idle: int, extra: int, now: float,
                           shadow: float) -> list[SchedulableJob]:
    """The jobs of `waiting`, in order, that may start now in a flat EASY pass
    (`Scheduler._easy_on_flat`): at most `idle` nodes, and ending by `shadow` or at most
    `extra` nodes. The reference for _speedups.easy_candidates, and the path where it is not
    built or answers None (tests/test_speedups.py compares the two)."""
    return [job for job in waiting if job.size <= idle
            and (now + job.wall_time <= shadow or job.size <= extra)]


def check_window(window: int) -> int:
    """`window` if it is an allocation window the scheduler can use, else ValueError saying why."""
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"allocation window W must be a whole number from 1 to {MAX_WINDOW}, "
                         f"got {window!r}")
    return window
