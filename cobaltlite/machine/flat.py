"""A cluster without a torus: N interchangeable nodes, allocated non-contiguously.

Locations are node ranges such as `0-15,32`. A job gets the lowest-numbered free nodes:
deterministic, and it keeps the free pool contiguous at the top for large jobs. With a failure
source and β > 0 (fault-aware allocation, docs/fault-aware.md) it gets instead the free nodes of
lowest failure chance P_f over its run, lowest-numbered first among equals: on a flat machine
nothing is blocked by a placement, so BLK_f is 0 for every choice and only β·P_f can differ.

A failed node (`fail("17")`) is neither free nor idle until `unfail`; nor is a node an admin
took down (`set_scheduled("17", False)`, nodeadm --down), until it is up again. Either way its
job, if any, keeps it until it ends.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate, islice

from cobaltlite.errors import MachineError
from cobaltlite.machine.bits import iter_bits, lowest_bits_ranges, mask_to_ranges, ranges_to_mask
from cobaltlite.machine.description import FlatDescription
from cobaltlite.machine.model import (
    NOT_IN_SERVICE,
    OVERDUE_GRACE,
    FailureChance,
    NoFailures,
    PlaceSet,
)


class FlatMachine:
    def __init__(
        self,
        description: FlatDescription,
        failures: FailureChance | None = None,
        alpha: float = 1.0,
        beta: float = 1.0,
    ) -> None:
        if description.nodes <= 0:
            raise MachineError(f"machine {description.name!r}: node count must be positive")
        self.description = description
        self.name = description.name
        self.total_nodes = description.nodes
        self.min_block_size = 1
        self.failures = failures or NoFailures()
        self.alpha = alpha  # no placement blocks another on a flat machine: BLK_f is always 0
        self.beta = beta
        self._free = (1 << description.nodes) - 1  # neither held nor failed
        self._idle = description.nodes
        self._failed = 0
        self._down = 0
        self._out = 0  # failed or down: never free
        # jobid -> (node mask, node count, expected end)
        self._held: dict[int, tuple[int, int, float]] = {}
        # The running jobs' distinct expected ends, ascending, and the nodes held until each:
        # the planners' profile, read instead of walking every held job.
        self._end_times: list[float] = []
        self._end_counts: list[int] = []
        self._place_sets: dict[PlaceSet, int] = {}
        # The last place find_location named and its mask: a pass allocates and commits the
        # place it was just given, so the string need not be parsed back.
        self._found: tuple[str, int] = ("", 0)

    def allocation_size(self, nodes: int) -> int | None:
        return nodes if 0 < nodes <= self.total_nodes else None

    def has_free_capacity(self) -> bool:
        return self._idle > 0

    def idle_nodes(self) -> int:
        return self._idle

    def free_mask(self) -> int:
        """The nodes free now (neither held nor out of service), as a mask."""
        return self._free

    def find_location(
        self, nodes: int, duration: float, now: float = 0.0, allowed: PlaceSet | None = None
    ) -> str | None:
        if nodes > self._idle or nodes <= 0:
            return None
        free = self._free
        if allowed is not None:
            free &= self.mask_of(allowed)
            if free.bit_count() < nodes:
                return None
        return self._choose(free, nodes, now, now + duration)

    def _choose(self, pool: int, nodes: int, start: float, end: float) -> str | None:
        """`nodes` nodes of the mask `pool` (which has that many): the lowest-numbered, or
        those of lowest P_f over [start, end)."""
        if isinstance(self.failures, NoFailures) or self.beta <= 0:
            mask, location = lowest_bits_ranges(pool, nodes)
        else:
            chance = self.failures.chance
            ranked = sorted(iter_bits(pool), key=lambda n: (chance(str(n), start, end), n))
            mask = 0
            for node in ranked[:nodes]:
                mask |= 1 << node
            location = mask_to_ranges(mask)
        self._found = (location, mask)
        return location

    def location_mask(self, location: str) -> int:
        """The nodes of `location` as a bit mask; ValueError if it is no node range list."""
        found, mask = self._found
        return mask if location == found else ranges_to_mask(location)

    def allocate(self, location: str, jobid: int, expected_end: float) -> int:
        found, mask = self._found
        if location != found:
            try:
                mask = ranges_to_mask(location)
            except ValueError as exc:
                raise MachineError(f"job {jobid}: bad location {location!r}: {exc}") from None
        free = self._free
        if mask & free == mask and jobid not in self._held:  # the common case: one test
            count = mask.bit_count()
            self._free = free ^ mask
            self._idle -= count
            self._hold(jobid, mask, count, expected_end)
            return count
        # Free nodes are in service and within the machine, so one of these holds: say which.
        if mask >> self.total_nodes:
            raise MachineError(f"job {jobid}: {location!r} names nodes beyond {self.total_nodes}")
        if mask & self._out:
            raise MachineError(f"job {jobid}: nodes {mask_to_ranges(mask & self._out)} are out "
                               "of service (failed or down)")
        if mask & ~self._free:
            raise MachineError(f"job {jobid}: nodes {mask_to_ranges(mask & ~self._free)} are held")
        raise MachineError(f"job {jobid} already holds nodes")

    def first_free(self, nodes: int, now: float) -> tuple[float, int] | None:
        """(when, free): the earliest time at or after `now` when `nodes` nodes are free, the
        running jobs ending when expected, and how many are free then. That is the start a
        planner made now reserves for such a job (its free nodes only grow with time). None when
        a node is out of service or a job is overdue (the planner's profile counts those its own
        way: `returns`), or when `nodes` never fit."""
        times = self._end_times
        if self._out or (times and times[0] <= now):  # (not _none_overdue, inline: every pass)
            return None
        free = list(accumulate(self._end_counts, initial=self._idle))
        j = bisect_left(free, nodes)  # free[j]: nodes free from times[j - 1] on
        if j == len(free):
            return None
        return (times[j - 1] if j else now), free[j]

    def _hold(self, jobid: int, mask: int, count: int, expected_end: float) -> None:
        """Record `jobid` as holding `mask` until about `expected_end` (and in the profile of
        expected ends)."""
        self._held[jobid] = (mask, count, expected_end)
        times = self._end_times
        i = bisect_left(times, expected_end)
        if i < len(times) and times[i] == expected_end:
            self._end_counts[i] += count
        else:
            times.insert(i, expected_end)
            self._end_counts.insert(i, count)

    def release(self, jobid: int) -> None:
        mask, count, end = self._held.pop(jobid)
        times, counts = self._end_times, self._end_counts
        k = bisect_left(times, end)
        if counts[k] > count:
            counts[k] -= count
        else:
            del times[k], counts[k]
        back = mask & ~self._out
        self._free |= back
        self._idle += back.bit_count()

    def held_by(self) -> dict[int, str]:
        return {jobid: mask_to_ranges(mask) for jobid, (mask, _, _) in self._held.items()}

    def mask_of(self, allowed: PlaceSet) -> int:
        """The nodes of a place set, as a mask; names that are no node number are ignored."""
        mask = self._place_sets.get(allowed)
        if mask is None:
            mask = 0
            for name in allowed:
                if name.isdigit() and int(name) < self.total_nodes:
                    mask |= 1 << int(name)
            self._place_sets[allowed] = mask
        return mask

    def _node(self, component: str) -> int:
        if component.isdigit() and int(component) < self.total_nodes:
            return int(component)
        raise MachineError(
            f"{self.name}: no component {component!r} (nodes are numbered 0 to "
            f"{self.total_nodes - 1})"
        )

    def fail(self, component: str) -> list[int]:
        bit = 1 << self._node(component)
        if self._free & bit:
            self._free &= ~bit
            self._idle -= 1
        self._failed |= bit
        self._out |= bit
        return sorted(jobid for jobid, (mask, _, _) in self._held.items() if mask & bit)

    def unfail(self, component: str) -> None:
        bit = 1 << self._node(component)
        if not self._failed & bit:
            return
        self._failed &= ~bit
        self._back_in_service(bit)

    def set_scheduled(self, component: str, scheduled: bool) -> None:
        """Bring a node up (True) or down (False; nodeadm --down): a down node gets no job."""
        bit = 1 << self._node(component)
        if scheduled:
            if self._down & bit:
                self._down &= ~bit
                self._back_in_service(bit)
            return
        if self._free & bit:
            self._free &= ~bit
            self._idle -= 1
        self._down |= bit
        self._out |= bit

    def _back_in_service(self, bit: int) -> None:
        """A node just left the failed or down set: free again unless still out or held."""
        self._out = self._failed | self._down
        if not self._out & bit and not any(mask & bit for mask, _, _ in self._held.values()):
            self._free |= bit
            self._idle += 1

    def failed_components(self) -> list[str]:
        return sorted((str(n) for n in iter_bits(self._failed)), key=int)

    def failure_units(self) -> list[str]:
        return [str(n) for n in range(self.total_nodes)]

    def places_within(self, places: PlaceSet) -> PlaceSet:
        return frozenset(places)

    def places_over(self, component: str) -> list[str]:
        return [str(self._node(component))]

    def block_states(self) -> list[dict[str, object]]:
        """Each node as `failed`, `busy` (with its job) or `idle`: the flat machine's partlist.

        As for Blue Gene/P blocks, the live system component shows a held node as `allocated`,
        `busy` or `cleanup` by its job's phase (cobaltlite/system/service.py).
        """
        owner = {}
        for jobid, (mask, _, _) in self._held.items():
            for node in iter_bits(mask):
                owner[node] = jobid
        failed, down = self._failed, self._down
        return [{"name": str(n), "size": 1,
                 "state": "failed" if (failed >> n) & 1 else "busy" if n in owner
                 else "down" if (down >> n) & 1 else "idle",
                 "jobid": owner.get(n)} for n in range(self.total_nodes)]

    def planner(self, now: float) -> FlatPlanner:
        return FlatPlanner(self, now)

    def carve(self, nodes: int, to_local: Callable[[int], int], name: str,
              failures: FailureChance | None = None) -> FlatMachine:
        """The nodes of mask `nodes` alone as a machine of their own, renumbered by
        `to_local` (a mask of this machine's nodes -> the same nodes' mask there), holding what
        this one holds on them now: the jobs' nodes and ends, the failed and down nodes. One
        queue partition's present, planned on its own (cobaltlite/scheduler/partitioned.py);
        `failures` answers P_f by the carved machine's node names."""
        part = FlatMachine(FlatDescription(name, nodes.bit_count()), failures, self.alpha,
                           self.beta)
        part._free = to_local(self._free & nodes)
        part._idle = part._free.bit_count()
        part._failed = to_local(self._failed & nodes)
        part._down = to_local(self._down & nodes)
        part._out = part._failed | part._down
        for jobid, (mask, _, end) in self._held.items():
            if mask & nodes:
                local = to_local(mask & nodes)
                part._hold(jobid, local, local.bit_count(), end)
        return part


def returns(machine: FlatMachine, now: float) -> dict[float, int]:
    """When the running jobs give their nodes back to the plan made at `now`: time -> nodes.
    Equal at two instants (the later one's entries after it) exactly when the free-node
    profiles from the later one on are equal (with the same nodes out of service)."""
    failed = machine._out
    if not failed and _none_overdue(machine, now):
        # No node out of service: the machine's own profile.
        return dict(zip(machine._end_times, machine._end_counts, strict=True))
    ends: dict[float, int] = {}
    for mask, count, end in machine._held.values():
        when = max(end, now + OVERDUE_GRACE) if end <= now else end
        # A held node that has failed or is down does not come back when its job ends.
        back = (mask & ~failed).bit_count() if failed else count
        ends[when] = ends.get(when, 0) + back
    return ends


def returns_in_order(machine: FlatMachine, now: float) -> tuple[list[float], list[int]]:
    """`returns` as two lists, its times in order and their node counts: in the common case
    copies of the machine's own profile, which are cheaper to make and compare than a dict."""
    if not machine._out and _none_overdue(machine, now):
        return list(machine._end_times), list(machine._end_counts)
    ends = sorted(returns(machine, now).items())
    return [when for when, _ in ends], [count for _, count in ends]


def _none_overdue(machine: FlatMachine, now: float) -> bool:
    """Whether every running job's expected end is after `now`: then each gives its nodes back
    at that end, as the machine's own profile (`_end_times`, `_end_counts`) says."""
    times = machine._end_times
    return not times or times[0] > now


_MERGE_AFTER = 64
"""Released reservations a kept plan carries before its equal neighbouring segments are joined:
each leaves up to two needless breakpoints that every later search walks over."""


class FlatPlanner:
    """Free nodes over time as a step function: free[i] holds during [times[i], times[i+1])."""

    def __init__(self, machine: FlatMachine, now: float) -> None:
        self._machine = machine
        self._now = now
        self._bookings: list[tuple[float, float, int]] = []  # (start, end, node mask)
        self._low: list[int] | None = None  # see _fits_now
        self._released = 0  # reservations given back since the last _merge
        if not machine._out and _none_overdue(machine, now):
            # The machine's own profile, copied at C speed: the common case of every pass.
            times = machine._end_times
            self._times = [now, *times]
            self._free = list(accumulate(machine._end_counts, initial=machine._idle))
            return
        ends = returns(machine, now)
        self._times = [now]
        self._free = [machine._idle]
        running_free = machine._idle
        for when in sorted(ends):
            running_free += ends[when]
            self._times.append(when)
            self._free.append(running_free)

    def _breakpoint(self, when: float) -> int:
        """Index of the segment starting exactly at `when`, splitting one if needed."""
        times = self._times
        i = bisect_left(times, when)
        if i < len(times) and times[i] == when:
            return i
        times.insert(i, when)
        self._free.insert(i, self._free[i - 1])
        return i

    def _take(self, start: float, end: float, nodes: int) -> None:
        first = self._breakpoint(start)
        last = self._breakpoint(end)
        free = self._free
        free[first:last] = [count - nodes for count in free[first:last]]
        self._low = None

    def _fits_now(self, nodes: int, end: float) -> bool:
        """Whether `nodes` stay free from now until `end`. A pass asks this of every waiting job
        and changes the profile only when one starts, so the running minimum of the free nodes
        (`_low[i]`: fewest free over segments 0..i) is kept until then: one bisect per job
        instead of a walk over the segments. It is made only as far as a job asked (a kept
        plan's profile runs far beyond the short jobs that start now, and any reservation made
        drops it)."""
        k = bisect_left(self._times, end)  # segments 0..k-1 start before `end`
        if k == 0:
            return True
        low = self._low
        if low is None or len(low) < k:
            made = 0 if low is None else len(low)
            more = accumulate(islice(self._free, made, k), min,
                              initial=self._free[0] if low is None else low[-1])
            next(more)  # the initial value, already in `low` or not a segment's
            low = self._low = [*(low or ()), *more]  # a new list: copies share the old one
        return low[k - 1] >= nodes

    def location_now(
        self, nodes: int, duration: float, allowed: PlaceSet | None = None
    ) -> str | None:
        end = self._now + duration
        machine = self._machine
        if nodes > machine._idle or not self._fits_now(nodes, end):
            return None
        if not self._bookings:
            return machine.find_location(nodes, duration, self._now, allowed)
        # Counts alone would let the job take booked nodes during their booking.
        pool = machine._free
        for start, stop, mask in self._bookings:
            if start < end and stop > self._now:
                pool &= ~mask
        if allowed is not None:
            pool &= machine.mask_of(allowed)
        if pool.bit_count() < nodes:
            return None
        return machine._choose(pool, nodes, self._now, end)

    def reserve_earliest(
        self, nodes: int, duration: float, allowed: PlaceSet | None = None,
        not_before: float | None = None,
    ) -> tuple[float, str]:
        """With `allowed`, a start must also find enough nodes of the set free then, counting
        only the ends of the jobs holding them now and leaving out those booked (reservation
        periods, known by node) during the run: the profile counts nodes, not which ones, so
        other reservations are not told apart by set (docs/administration.md, flat
        machines)."""
        machine = self._machine
        if nodes > machine.total_nodes:
            raise MachineError(f"{nodes} nodes can never fit on {machine.total_nodes}")
        in_service = ~machine._out
        if allowed is not None:
            in_service &= machine.mask_of(allowed)
        if nodes > (in_service & ((1 << machine.total_nodes) - 1)).bit_count():
            return NOT_IN_SERVICE
        set_free_at = None if allowed is None else self._set_free_at(machine.mask_of(allowed))
        # A start no earlier than `not_before`: its segment is split there and the search begins.
        begin = 0 if not_before is None or not_before <= self._now else self._breakpoint(not_before)
        times, free = self._times, self._free
        last = len(times) - 1
        first = -1  # first segment of the current run of segments with enough free nodes
        until = 0.0  # when that run is long enough
        for j in range(begin, last):
            if free[j] < nodes:
                first = -1
            elif first >= 0:
                if times[j + 1] >= until:
                    break
            elif set_free_at is None or set_free_at(times[j], duration) >= nodes:
                first, until = j, times[j] + duration
                if times[j + 1] >= until:
                    break
        else:  # the last segment lasts for ever: a run reaching it is long enough
            if free[last] < nodes:
                first = -1
            elif first < 0 and (set_free_at is None
                                 or set_free_at(times[last], duration) >= nodes):
                first = last
            if first < 0:
                raise AssertionError("the last segment of a profile has every node in service "
                                     "free")
        start = times[first]
        self._take(start, start + duration, nodes)
        return start, f"{nodes} nodes"

    def _set_free_at(self, nodes_of_set: int) -> Callable[[float, float], int]:
        """When the set's nodes come free: f(t, d) = how many are free from t and unbooked
        over [t, t + d). A booked node counted free would give a job of the set a start that
        it cannot take (location_now keeps it off the node), a drain at an instant where it
        never runs, which holds other jobs back for nothing."""
        machine = self._machine
        now, failed = self._now, machine._out
        ends = sorted(
            (max(end, now + OVERDUE_GRACE) if end <= now else end, mask & nodes_of_set & ~failed)
            for mask, _, end in machine._held.values() if mask & nodes_of_set)
        free_now = machine._free & nodes_of_set
        booked = [(start, stop, mask) for start, stop, mask in self._bookings
                  if mask & nodes_of_set]

        def free_at(t: float, duration: float) -> int:
            free = free_now
            for end, mask in ends:
                if end > t:
                    break
                free |= mask
            for start, stop, mask in booked:
                if start < t + duration and stop > t:
                    free &= ~mask
            return free.bit_count()
        return free_at

    def copy(self) -> FlatPlanner:
        other = FlatPlanner.__new__(FlatPlanner)
        other._machine, other._now = self._machine, self._now
        other._times, other._free = list(self._times), list(self._free)
        other._low = self._low  # never changed in place: _take drops it
        other._bookings = list(self._bookings)
        other._released = self._released
        return other

    def plan_now(self, nodes: int, duration: float, allowed: PlaceSet | None = None) -> bool:
        # Nodes are interchangeable: the free-node profile alone decides, no place is named
        # (unless a place set or a booking names some: then there must be enough of those).
        end = self._now + duration
        if nodes > self._free[0] or not self._fits_now(nodes, end):
            return False
        if (allowed is not None or self._bookings) and self.location_now(
                nodes, duration, allowed) is None:
            return False
        self._take(self._now, end, nodes)
        return True

    def book(self, places: frozenset[str], start: float, end: float,
             wires: bool = True) -> None:
        # A flat machine has no wires to pass through. Each booked node leaves the free-node
        # profile from when it is free (now, or its job's end) to the booking's end, and
        # location_now keeps jobs that would overlap the booking off those very nodes.
        machine = self._machine
        mask = machine.mask_of(places)
        begin = max(start, self._now)
        if not mask or end <= begin:
            return
        self._bookings.append((start, end, mask))
        free_now = (mask & machine._free).bit_count()
        if free_now:
            self._take(begin, end, free_now)
        for held, _, job_end in machine._held.values():
            back = held & mask & ~machine._failed
            returns = max(job_end, self._now + OVERDUE_GRACE) if job_end <= self._now \
                else job_end  # as in __init__: when the profile gets the node back
            when = max(returns, begin)
            if back and when < end:
                self._take(when, end, back.bit_count())

    def unreserve(self, start: float, duration: float, nodes: int) -> None:
        """Give back a reservation of `nodes` made over [start, start+duration): the plan is as
        if it had never been made, from now on (the breakpoints it split stay; a segment split
        in two equal halves finds the same starts)."""
        begin = max(start, self._now)
        if start + duration > begin:
            self._take(begin, start + duration, -nodes)
            self._released += 1

    def advance(self, now: float) -> None:
        """Move the plan's present to `now` (not earlier): the segments before it are dropped,
        every reservation stays. Only right when nothing but time changed the profile since
        (scheduler/plan.py checks that)."""
        times, free = self._times, self._free
        i = bisect_right(times, now) - 1
        if i > 0:
            del times[:i], free[:i]
        times[0] = now
        self._now = now
        self._low = None
        if self._released > _MERGE_AFTER:
            self._merge()

    def _merge(self) -> None:
        """Join neighbouring segments of equal free count (left by released reservations)."""
        times, free = [self._times[0]], [self._free[0]]
        for when, count in zip(self._times, self._free, strict=True):
            if count != free[-1]:
                times.append(when)
                free.append(count)
        self._times, self._free = times, free
        self._released = 0

    def commit(self, location: str, duration: float) -> None:
        self._take(self._now, self._now + duration,
                   self._machine.location_mask(location).bit_count())
