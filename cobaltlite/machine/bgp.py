"""The runtime Blue Gene/P model: which blocks are free, and what placing a job would block.

Built once from a `BGPDescription`. Only schedulable blocks take part in the bitsets: bit i of
every mask is the i-th schedulable block in name order. Relations are computed once:

* related(X)  = schedulable blocks that share a node card with X (parents, children, overlaps)
                or share a wire with it (wiring conflicts);
* conflict(X) = related(X) | {X}: everything that cannot run while X runs.

The allocation state is two integers (`_blocked`, `_available`) plus a dict of holders, so a
scheduling pass reads the machine without copying it.

Out of service are the blocks sharing a node card with an offline block (`set_usable`), the
blocks an admin disabled (`set_scheduled`), and those containing a failed component (`fail`):
one `_usable` mask covers them all.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from math import nextafter

from cobaltlite.errors import MachineError
from cobaltlite.machine.bits import iter_bits
from cobaltlite.machine.description import BGPDescription
from cobaltlite.machine.model import (
    NOT_IN_SERVICE,
    OVERDUE_GRACE,
    FailureChance,
    NoFailures,
    PlaceSet,
    TwoLevelChance,
)

MEMBERS_KEPT = 4096
"""How many masks `BGPMachine.members` remembers before it starts afresh (sizes x place sets x
states of service: far fewer in practice)."""

INF = float("inf")

COST_TOLERANCE = 1e-9
"""A candidate beats the best so far only when cheaper by more than this: costs equal on paper
(0.6 + 0.6 and 2 - 0.8) must tie, and so go to the first name, whatever order the
floating-point sums were done in."""


class BGPMachine:
    def __init__(
        self,
        description: BGPDescription,
        failures: FailureChance | None = None,
        alpha: float = 1.0,
        beta: float = 1.0,
    ) -> None:
        self.description = description
        self.name = description.name
        self.total_nodes = description.size
        self.failures = failures or NoFailures()
        self.alpha = alpha
        self.beta = beta

        blocks = sorted(
            (b for b in description.blocks if description.is_schedulable(b)), key=lambda b: b.name
        )
        if not blocks:
            raise MachineError(f"machine {description.name!r} has no schedulable block")
        self.names = [b.name for b in blocks]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.block_size = [b.size for b in blocks]

        # Every node card of the table gets a bit, schedulable or not, so any can be failed.
        card_bit: dict[str, int] = {}
        for block in description.blocks:
            _mask_of(block.nodecards, card_bit)
        self._card_bit = card_bit
        self._midplane_cards: dict[str, int] = {}
        for card, bit in card_bit.items():
            midplane = card.rpartition("-")[0]
            self._midplane_cards[midplane] = self._midplane_cards.get(midplane, 0) | (1 << bit)
        self._block_cards = {b.name: b.nodecards for b in description.blocks}
        wire_bit: dict[str, int] = {}
        cards = [_mask_of(b.nodecards, card_bit) for b in blocks]
        self._cards = cards
        wires = [_mask_of(b.wires, wire_bit) for b in blocks]
        n = len(blocks)
        related = [0] * n
        sharing_cards = [0] * n
        for i in range(n):
            ci, wi = cards[i], wires[i]
            for j in range(i + 1, n):
                if ci & cards[j]:
                    sharing_cards[i] |= 1 << j
                    sharing_cards[j] |= 1 << i
                if ci & cards[j] or wi & wires[j]:
                    related[i] |= 1 << j
                    related[j] |= 1 << i
        self._sharing_cards = sharing_cards
        self.related = related
        self.conflict = [related[i] | (1 << i) for i in range(n)]
        self.conflict_list = [list(iter_bits(m)) for m in self.conflict]

        self.sizes = sorted(set(self.block_size))
        self.min_block_size = self.sizes[0]
        self.size_mask = {s: 0 for s in self.sizes}
        for i, size in enumerate(self.block_size):
            self.size_mask[size] |= 1 << i

        self._all = (1 << n) - 1
        self._usable = self._all  # schedulable, no node card of it offline, nothing failed in it
        self._offline: set[int] = set()
        self._unscheduled = 0  # blocks an admin disabled: no job, relatives unaffected
        self._failed: dict[str, int] = {}  # failed component -> its node-card mask
        self._failed_blocks = 0  # blocks containing a node card of a failed component
        self._over_component: dict[str, int] = {}
        self._blocked = 0
        self._available = self._usable
        self._held: dict[int, tuple[int, float]] = {}  # jobid -> (block index, expected end)
        self._held_nodes = 0
        self._place_sets: dict[PlaceSet, tuple[int, list[int]]] = {}
        self._members: dict[int, list[int]] = {}  # mask -> its blocks, for `members`

    @property
    def failures(self) -> FailureChance:
        return self._failures

    @failures.setter
    def failures(self, source: FailureChance) -> None:
        self._failures = source
        self._fault_free = isinstance(source, NoFailures)
        self._two_level = source if isinstance(source, TwoLevelChance) else None

    # ---- the present -------------------------------------------------------------------

    def allocation_size(self, nodes: int) -> int | None:
        """The smallest schedulable block size that holds `nodes` (seed 003 §IV-B step 1)."""
        i = bisect_left(self.sizes, nodes)
        return self.sizes[i] if i < len(self.sizes) and nodes > 0 else None

    def has_free_capacity(self) -> bool:
        return self._available != 0

    def idle_nodes(self) -> int:
        return self.total_nodes - self._held_nodes

    def available_of_size(self, nodes: int, allowed: PlaceSet | None) -> int:
        """The blocks in service and free now that a job of `nodes` would get (`of_size`),
        as a mask; 0 when none."""
        return self._available & self.of_size(nodes, allowed)

    def of_size(self, nodes: int, allowed: PlaceSet | None) -> int:
        """The blocks a job of `nodes` would get, free or not (its size, or within `allowed`
        the smallest of the set that holds it), as a mask; 0 when none."""
        if allowed is not None:
            return self.sized_within(nodes, allowed)
        size = self.allocation_size(nodes)
        return 0 if size is None else self.size_mask[size]

    def find_location(
        self, nodes: int, duration: float, now: float = 0.0, allowed: PlaceSet | None = None
    ) -> str | None:
        candidates = self.available_of_size(nodes, allowed)
        if not candidates:
            return None
        return self.names[self.cheapest(candidates, now, now + duration)]

    def sized_within(self, nodes: int, allowed: PlaceSet) -> int:
        """The blocks of `allowed` a job of `nodes` is placed on, as a mask: those of the
        smallest size in the set that holds it (seed 003 §IV-B step 1 within the set, so a
        queue mapped to larger blocks only still runs small jobs). 0 when none holds it.
        Names of the set that are no schedulable block are ignored."""
        entry = self._place_sets.get(allowed)
        if entry is None:
            mask = 0
            for name in allowed:
                i = self.index.get(name)
                if i is not None:
                    mask |= 1 << i
            sizes = sorted({self.block_size[i] for i in iter_bits(mask)})
            entry = self._place_sets[allowed] = (mask, sizes)
        mask, sizes = entry
        i = bisect_left(sizes, nodes)
        return mask & self.size_mask[sizes[i]] if i < len(sizes) and nodes > 0 else 0

    def members(self, mask: int) -> list[int]:
        """The blocks of `mask`, lowest index first; remembered, as a pass asks again and
        again for the blocks of one size in service (a few dozen masks in all)."""
        blocks = self._members.get(mask)
        if blocks is None:
            if len(self._members) >= MEMBERS_KEPT:
                self._members.clear()
            blocks = self._members[mask] = list(iter_bits(mask))
        return blocks

    def cheapest(self, candidates: int, start: float, end: float) -> int:
        """The candidate with the lowest Allocation_Cost(X) = α·BLK_f(X) + β·P_f(X).

        BLK_f(X) sums (1 - P_f(Y)) over the available blocks Y that X would newly block (seed
        003 §IV-B step 3). Ties go to the block whose name sorts first: deterministic, and the
        same rule in every component; costs within COST_TOLERANCE tie.
        """
        if self._fault_free:
            return self._least_blocking(candidates)
        if self._two_level is not None:
            return self._cheapest_two_level(self._two_level, candidates, start, end)
        available, related = self._available, self.related
        chance, names = self.failures.chance, self.names
        best, best_cost = -1, 0.0
        for i in iter_bits(candidates):
            newly_blocked = iter_bits(related[i] & available)
            blk_f = sum(1.0 - chance(names[j], start, end) for j in newly_blocked)
            cost = self.alpha * blk_f + self.beta * chance(names[i], start, end)
            if best < 0 or cost < best_cost - COST_TOLERANCE:
                best, best_cost = i, cost
        return best

    def _least_blocking(self, candidates: int) -> int:
        """The candidate of lowest BLK: the cost when every P_f is the same."""
        available, related = self._available, self.related
        best, best_blk = -1, 0
        for i in iter_bits(candidates):
            blk = (related[i] & available).bit_count()
            if best < 0 or blk < best_blk:
                best, best_blk = i, blk
        return best

    def _cheapest_two_level(
        self, source: TwoLevelChance, candidates: int, start: float, end: float
    ) -> int:
        """`cheapest` when P_f takes two values: with k newly blocked blocks of which h are
        predicted to fail, BLK_f = k - (h·hit + (k - h)·miss), all from bit counts."""
        hit, miss = source.hit, source.miss
        hits = 0
        for component in source.failing_components(start, end):
            hits |= self._component_blocks(component)
        alpha, beta = self.alpha, self.beta
        if not hits:  # every P_f is `miss`: the cost is α·(1 - miss)·BLK + β·miss
            return self._least_blocking(candidates) if alpha * (1.0 - miss) > 0 else (
                candidates & -candidates).bit_length() - 1
        available, related = self._available, self.related
        best, best_cost = -1, 0.0
        for i in iter_bits(candidates):
            newly = related[i] & available
            k = newly.bit_count()
            h = (newly & hits).bit_count()
            blk_f = k - (h * hit + (k - h) * miss)
            cost = alpha * blk_f + beta * (hit if (hits >> i) & 1 else miss)
            if best < 0 or cost < best_cost - COST_TOLERANCE:
                best, best_cost = i, cost
        return best

    def _component_blocks(self, component: str) -> int:
        """The schedulable blocks over a component, as a mask (cached: components are few)."""
        mask = self._over_component.get(component)
        if mask is None:
            mask = self._over_component[component] = self._blocks_over(
                self._component_cards(component))
        return mask

    def blk(self, location: str) -> int:
        """BLK(X): available blocks that placing a job on X would newly block (seed 003 Fig. 1)."""
        return (self.related[self.index[location]] & self._available).bit_count()

    def allocate(self, location: str, jobid: int, expected_end: float) -> int:
        i = self.index.get(location)
        if i is None:
            raise MachineError(f"job {jobid}: {location!r} is not a schedulable block")
        if jobid in self._held:
            raise MachineError(f"job {jobid} already holds {self.names[self._held[jobid][0]]}")
        if not (self._available >> i) & 1:
            raise MachineError(f"job {jobid}: block {location} is not free")
        self._blocked |= self.conflict[i]
        self._available &= ~self.conflict[i]
        self._held[jobid] = (i, expected_end)
        self._held_nodes += self.block_size[i]
        return self.block_size[i]

    def release(self, jobid: int) -> None:
        i, _ = self._held.pop(jobid)
        self._held_nodes -= self.block_size[i]
        blocked = 0
        conflict = self.conflict
        for j, _ in self._held.values():
            blocked |= conflict[j]
        self._blocked = blocked
        self._available = self._usable & ~blocked

    def held_by(self) -> dict[int, str]:
        return {jobid: self.names[i] for jobid, (i, _) in self._held.items()}

    def planner(self, now: float) -> BGPPlanner:
        return BGPPlanner(self, now)

    def set_usable(self, location: str, usable: bool) -> None:
        """Take a block out of service (offline) or back in; its holder, if any, keeps it.

        As in Cobalt, an offline block also makes every block sharing a node card with it
        unusable (reference §6.1); blocks that merely share a wire stay usable.
        """
        i = self.index[location]
        if usable:
            self._offline.discard(i)
        else:
            self._offline.add(i)
        self._refresh_usable()

    def set_scheduled(self, location: str, scheduled: bool) -> None:
        """Let the scheduler place jobs on a block, or not (Cobalt's partadm --enable and
        --disable): unlike `set_usable`, its relatives stay usable, and its holder keeps it."""
        bit = 1 << self.index[location]
        self._unscheduled = self._unscheduled & ~bit if scheduled else self._unscheduled | bit
        self._refresh_usable()

    def _refresh_usable(self) -> None:
        unusable = self._failed_blocks | self._unscheduled
        for j in self._offline:
            unusable |= self._sharing_cards[j] | (1 << j)
        self._usable = self._all & ~unusable
        self._available = self._usable & ~self._blocked

    # ---- failures ----------------------------------------------------------------------

    def _component_cards(self, component: str) -> int:
        """A node card, a midplane or a block, as a node-card mask."""
        bit = self._card_bit.get(component)
        if bit is not None:
            return 1 << bit
        mask = self._midplane_cards.get(component)
        if mask is not None:
            return mask
        cards = self._block_cards.get(component)
        if cards is not None:
            return _mask_of(cards, self._card_bit)
        raise MachineError(
            f"{self.name}: no component {component!r} (give a midplane such as R00-M0, "
            "a node card such as R00-M0-N04, or a block name)"
        )

    def _blocks_over(self, cards: int) -> int:
        mask = 0
        for i, block_cards in enumerate(self._cards):
            if block_cards & cards:
                mask |= 1 << i
        return mask

    def fail(self, component: str) -> list[int]:
        over = self._component_blocks(component)
        self._failed[component] = self._component_cards(component)
        self._failed_blocks |= over
        self._refresh_usable()
        return sorted(jobid for jobid, (i, _) in self._held.items() if (over >> i) & 1)

    def unfail(self, component: str) -> None:
        self._component_cards(component)  # an unknown name is an error, even when not failed
        if self._failed.pop(component, None) is None:
            return
        failed_cards = 0
        for cards in self._failed.values():
            failed_cards |= cards
        self._failed_blocks = self._blocks_over(failed_cards) if failed_cards else 0
        self._refresh_usable()

    def failed_components(self) -> list[str]:
        return sorted(self._failed)

    def failure_units(self) -> list[str]:
        return sorted(self._midplane_cards)

    def places_within(self, places: PlaceSet) -> PlaceSet:
        cards = 0
        for name in places:
            i = self.index.get(name)
            if i is not None:
                cards |= self._cards[i]
        return frozenset(places) | {name for i, name in enumerate(self.names)
                                    if self._cards[i] and not self._cards[i] & ~cards}

    def places_over(self, component: str) -> list[str]:
        return [self.names[i] for i in iter_bits(self._component_blocks(component))]

    def block_states(self) -> list[dict[str, object]]:
        """Each schedulable block's state as partlist shows it, in name order.

        failed (it contains a failed component; its holder, if any, is shown: the caller kills
        it), busy (a job holds it), blocked (<holder's block>) when it shares a node card with a
        held block, blocked-wiring (<holder's block>) when it only shares a wire, offline when
        taken out of service, disabled when an admin stopped scheduling on it, else idle. The
        model knows only that a block is held, not what its job's processes are doing: the live
        system component shows a held block as Cobalt's `allocated`, `busy` or `cleanup` by its
        job's phase (cobaltlite/system/service.py), while Qsim, whose jobs start and end in an
        instant, shows `busy`.
        """
        holder = {i: jobid for jobid, (i, _) in self._held.items()}
        cards = self._cards
        result: list[dict[str, object]] = []
        for i, name in enumerate(self.names):
            state = "idle"
            if (self._failed_blocks >> i) & 1:
                state = "failed"
            elif i in holder:
                state = "busy"
            elif i in self._offline:
                state = "offline"
            elif (self._unscheduled >> i) & 1:
                state = "disabled"
            elif not (self._usable >> i) & 1:
                state = "offline (a related block is offline)"
            elif (self._blocked >> i) & 1:
                by = next(j for j in holder if (self.related[j] >> i) & 1)
                kind = "blocked" if cards[i] & cards[by] else "blocked-wiring"
                state = f"{kind} ({self.names[by]})"
            result.append({"name": name, "size": self.block_size[i], "state": state,
                           "jobid": holder.get(i)})
        return result


class BGPPlanner:
    """Reservations (drains) on blocks over time, on top of the machine's present state.

    Every reservation is kept in the order made (`_reservations`: start, end, mask of the blocks
    it holds). A conservative pass reserves the whole queue, so from `index_from` reservations on
    they are also indexed per block (`_busy`): each block's reserved time as disjoint pieces
    sorted by time, the reservations that overlap or touch merged into one piece. A job of
    duration d > 0 fits at t on a block iff no reservation over it has start < t + d and
    end > t, and a merged piece meets that test iff one of its reservations does (a window
    (t, t + d) of positive length that meets the piece meets one of its reservations of positive
    length, or holds one of zero length). So a block's earliest fit is a bisection and a walk
    over its pieces, instead of a scan of every reservation, with the same answer. A job of zero
    duration is planned on the list: two touching pieces would wrongly hold the instant between.

    Most blocks need no walk at all (`_Gaps`). From the block's free time on, the walk slides
    past each piece until the gap before the next one holds the job, else it ends at the block's
    tail: its free time or the end of its last piece, whichever is later. So a block none of
    whose gaps holds the job starts it at its tail, and `earliest_on` walks only the blocks
    whose bound on what their gaps hold admits the job (about 8 of 62 blocks in service of the
    job's size, a call of the balanced+conservative start estimate on Intrepid), taking the
    others' tails.
    """

    index_from = 8
    """The number of reservations from which they are indexed per block: below it one scan of
    the list costs less than keeping the index (an EASY pass makes one reservation)."""

    tails_from = 16
    """The number of reservations from which a question on the index reads the blocks' tails
    and gap bounds (`_Gaps`, kept from then on): below it walking each block's few pieces costs
    less than making and keeping them (a replay's conservative passes hold 8 to 40)."""

    def __init__(self, machine: BGPMachine, now: float) -> None:
        self._m = machine
        self._now = now
        self._reservations: list[tuple[float, float, int]] = []  # (start, end, conflict mask)
        self._free_at: list[float] | None = None  # per block: when every conflicting job ends
        self._busy: list[tuple[list[float], list[float]] | None] | None = None
        """Per block: the (starts, ends) of its reserved pieces, or None when nothing is
        reserved on it; the whole index is None until `index_from` reservations are made."""
        self._gaps: _Gaps | None = None
        """The blocks' tails and gap bounds, made by the first `earliest_on` on the index (they
        need the free times), then kept with it."""

    @classmethod
    def holding(cls, machine: BGPMachine, now: float,
                reservations: list[tuple[float, float, int]]) -> BGPPlanner:
        """A planner of `machine` from `now` holding `reservations` (the list becomes its
        own), each as the planner keeps one: (start, end, mask of the blocks it holds: a
        block's `conflict`). It answers as one given them by `hold`, indexed only if it
        reserves more (`_hold`): made for a question about placing a job around them (a
        pass's turn for a job of a plan taken up, scheduler/plan.py's `block_a_pass_starts`),
        where building the index would cost more than the question."""
        planner = cls(machine, now)
        planner._reservations = reservations
        return planner

    def _block_free_times(self) -> list[float]:
        # Computed only when a reservation is needed: most passes start jobs or find nothing free.
        if self._free_at is None:
            m, now = self._m, self._now
            free_at = [now] * len(m.names)
            for i, end in m._held.values():
                if end <= now:  # overdue (a kill in flight): it still holds its block right now
                    end = now + OVERDUE_GRACE
                for j in m.conflict_list[i]:
                    if free_at[j] < end:
                        free_at[j] = end
            self._free_at = free_at
        return self._free_at

    def _hold(self, start: float, stop: float, mask: int) -> None:
        """Record a reservation of the blocks of `mask` over [start, stop)."""
        if stop < start:
            raise MachineError(f"a reservation cannot end ({stop}) before it starts ({start})")
        self._reservations.append((start, stop, mask))
        busy = self._busy
        if busy is None:
            if len(self._reservations) < self.index_from:
                return
            busy = self._busy = [None] * len(self._m.names)
            for start, stop, mask in self._reservations:
                _index(busy, start, stop, self._m.members(mask), None)
            return
        _index(busy, start, stop, self._m.members(mask), self._gaps)

    def location_now(
        self, nodes: int, duration: float, allowed: PlaceSet | None = None
    ) -> str | None:
        m = self._m
        candidates = m.available_of_size(nodes, allowed)
        if not candidates:
            return None
        now = self._now
        end = now + duration
        busy = self._busy
        if busy is None or duration <= 0:
            for start, stop, mask in self._reservations:
                if not candidates:
                    break
                if start < end and stop > now:
                    candidates &= ~mask
        else:
            for i in iter_bits(candidates):
                pieces = busy[i]
                if pieces is not None:
                    starts, ends = pieces
                    k = bisect_right(ends, now)  # the first piece ending after now
                    if k < len(ends) and starts[k] < end:
                        candidates &= ~(1 << i)
        if not candidates:
            return None
        return m.names[m.cheapest(candidates, now, end)]

    def reserve_earliest(
        self, nodes: int, duration: float, allowed: PlaceSet | None = None,
        not_before: float | None = None,
    ) -> tuple[float, str]:
        m = self._m
        if allowed is not None:
            sized = m.sized_within(nodes, allowed)
        else:
            size = m.allocation_size(nodes)
            if size is None:
                raise MachineError(f"{nodes} nodes fit no block of {m.name}")
            sized = m.size_mask[size]
        best_t, best_i = self.earliest_on(sized, duration, not_before)
        if best_i < 0:
            return NOT_IN_SERVICE
        self._hold(best_t, best_t + duration, m.conflict[best_i])
        return best_t, m.names[best_i]

    def earliest_on(self, blocks: int, duration: float, not_before: float | None = None
                    ) -> tuple[float, int]:
        """The earliest start (at or after `not_before`) of a job of `duration` on the blocks
        of the mask `blocks` that are in service, and on which (the first in name order of
        those free as early), reserving nothing; (inf, -1) when none is in service."""
        m = self._m
        free_at = self._block_free_times()
        busy = self._busy if duration > 0 else None
        if (busy is not None and (not_before is None or not_before <= self._now)
                and len(self._reservations) >= self.tails_from):
            # Free times are never before now, so such a `not_before` changes nothing.
            return self._earliest_by_tails(busy, free_at, m._usable & blocks, duration)
        best_i, best_t = -1, INF
        for i in m.members(m._usable & blocks):
            t = free_at[i]
            if t >= best_t:
                continue  # it can only start later, or as late and lose the tie on its index
            if not_before is not None and t < not_before:
                t = not_before
            if busy is not None:
                pieces = busy[i]
                if pieces is not None:  # slide past each piece that overlaps [t, t + duration)
                    starts, ends = pieces
                    k, n = bisect_right(ends, t), len(ends)
                    while k < n and starts[k] < t + duration:
                        t = ends[k]
                        k += 1
            else:
                moved = True
                while moved:  # slide past every reservation that overlaps [t, t + duration)
                    moved = False
                    for start, stop, mask in self._reservations:
                        if (mask >> i) & 1 and start < t + duration and stop > t:
                            t, moved = stop, True
            if best_i < 0 or t < best_t:
                best_i, best_t = i, t
        return best_t, best_i

    def advance(self, now: float) -> None:
        """Move the plan's present to `now` (not earlier), every reservation kept: the planner
        `machine.planner(now)` would give, holding the same reservations. Only right when the
        reservations made before still stand (scheduler/plan.py, `LastReservations`)."""
        self._now = now
        self._free_at = None  # the machine's jobs now, as the next call computes them
        self._gaps = None  # the tails start from the free times: rebuilt with them

    def _earliest_by_tails(self, busy: list[tuple[list[float], list[float]] | None],
                           free_at: list[float], blocks: int, duration: float
                           ) -> tuple[float, int]:
        """`earliest_on` on the index from the blocks' free times, for a job of positive
        `duration`: the first lowest tail, unless a gap of a block the bound admits does
        better (the same answer as walking every block)."""
        members = self._m.members(blocks)
        if not members:
            return INF, -1
        gaps = self._gaps
        if gaps is None:
            gaps = self._gaps = _Gaps(busy, free_at)
        tail, roomy = gaps.tail, gaps.roomy
        best_i = min(members, key=tail.__getitem__)  # the first in name order of the lowest
        best_t = tail[best_i]
        for i in [i for i in members if roomy[i] >= duration]:
            pieces = busy[i]
            assert pieces is not None  # a bound above 0 is only ever set by a piece's gap
            t = free_at[i]
            if t > best_t or (t == best_t and i > best_i):
                continue  # it can only start later, or as late and lose the tie on its index
            starts, ends = pieces
            k, n = bisect_right(ends, t), len(ends)
            while k < n and starts[k] < t + duration:  # slide past the pieces in the way
                t = ends[k]
                k += 1
            if k == n:  # no gap held it, nor would one hold a longer job
                roomy[i] = nextafter(duration, 0.0)
            if t < best_t or (t == best_t and i < best_i):
                best_i, best_t = i, t
        return best_t, best_i

    def hold(self, block: int, start: float, duration: float) -> None:
        """Reserve block number `block` (of `BGPMachine.names`) from `start` for `duration`
        seconds, as `reserve_earliest` reserves the block it finds."""
        self._hold(start, start + duration, self._m.conflict[block])

    def copy(self) -> BGPPlanner:
        other = BGPPlanner.__new__(BGPPlanner)
        other._m, other._now = self._m, self._now
        other._reservations = list(self._reservations)
        other._free_at = None if self._free_at is None else list(self._free_at)
        other._busy = None if self._busy is None else [
            None if pieces is None else (list(pieces[0]), list(pieces[1]))
            for pieces in self._busy]
        other._gaps = None if self._gaps is None else self._gaps.copy()
        return other

    def plan_now(self, nodes: int, duration: float, allowed: PlaceSet | None = None) -> bool:
        location = self.location_now(nodes, duration, allowed)
        if location is None:
            return False
        m = self._m
        i = m.index[location]
        self._hold(self._now, self._now + duration, m.conflict[i])
        self.commit(location, duration)
        return True

    def book(self, places: frozenset[str], start: float, end: float,
             wires: bool = True) -> None:
        m = self._m
        mask = 0
        for name in places:
            i = m.index.get(name)
            if i is not None:  # setres checked the names; a block since removed holds nothing
                mask |= m.conflict[i] if wires else m._sharing_cards[i] | (1 << i)
        if mask and end > self._now:
            self._hold(start, end, mask)

    def commit(self, location: str, duration: float) -> None:
        m = self._m
        i = m.index[location]
        free_at = self._free_at
        if free_at is not None:
            end = self._now + duration
            # A later free time only shortens the gaps after it: the bounds still hold.
            tail = None if self._gaps is None else self._gaps.tail
            for j in m.conflict_list[i]:
                if free_at[j] < end:
                    free_at[j] = end
                    if tail is not None and tail[j] < end:
                        tail[j] = end


class _Gaps:
    """Per block of a planner's index: its tail (the later of its free time and the end of its
    last piece) and `roomy`, a bound on the jobs its gaps can hold: for every duration d above
    it, the walk from the block's free time slides past every piece (0.0: no gap).

    A gap appears only where a reservation begins after a block's tail; else reserving and
    starting jobs only shorten gaps, so the bounds are kept by those alone (`_index`). A walk that
    ends at a block's tail for a job of duration d lowers its bound below d
    (`_earliest_by_tails`): a longer job is refused by every gap the shorter one was (t + d
    rounds no higher than t + d' for d < d'). The bounds are a plain list, filtered once per
    question: grouping them in masks by binary exponent cost more to keep than it saved."""

    __slots__ = ("roomy", "tail")

    def __init__(self, busy: list[tuple[list[float], list[float]] | None],
                 free_at: list[float]) -> None:
        self.tail = list(free_at)
        self.roomy = roomy = [0.0] * len(free_at)
        for j, pieces in enumerate(busy):
            if pieces is not None:
                starts, ends = pieces
                t = free_at[j]
                for k in range(bisect_right(ends, t), len(ends)):  # the pieces ending after t
                    if starts[k] > t:
                        roomy[j] = max(roomy[j], _wider(starts[k], t))
                    t = ends[k]
                self.tail[j] = t

    def copy(self) -> _Gaps:
        other = _Gaps.__new__(_Gaps)
        other.tail, other.roomy = list(self.tail), list(self.roomy)
        return other


def _wider(start: float, end: float) -> float:
    """start - end, the length of a gap, widened past the rounding of the walk's test (a job of
    duration d fits iff end + d <= start, a sum rounded to nearest, so a job of d a little
    longer than the gap may fit): a job longer than the result does not."""
    return (start - end) + (abs(start) + abs(end)) * 1e-12


def _index(busy: list[tuple[list[float], list[float]] | None], start: float, stop: float,
           blocks: list[int], gaps: _Gaps | None) -> None:
    """Add [start, stop) (stop >= start) to the pieces of each of `blocks`, merged with those
    it overlaps or touches (the pieces stay disjoint, with a gap between any two); keep `gaps`
    (when not None) with them."""
    tail, roomy = (None, []) if gaps is None else (gaps.tail, gaps.roomy)
    for j in blocks:
        if tail is not None:
            last = tail[j]
            if start > last:  # a new gap, [last, start)
                wider = _wider(start, last)
                if wider > roomy[j]:
                    roomy[j] = wider
            if stop > last:
                tail[j] = stop
        pieces = busy[j]
        if pieces is None:
            busy[j] = ([start], [stop])
            continue
        starts, ends = pieces
        # A conservative pass reserves mostly at the end of the plan: after the last piece,
        # or over it.
        if start > ends[-1]:
            starts.append(start)
            ends.append(stop)
        elif start >= starts[-1]:
            if stop > ends[-1]:
                ends[-1] = stop
        else:
            lo = bisect_left(ends, start)  # the first piece ending at or after start
            hi = bisect_right(starts, stop, lo)  # the first piece starting after stop
            if lo == hi:
                starts.insert(lo, start)
                ends.insert(lo, stop)
            else:
                first, last = starts[lo], ends[hi - 1]
                starts[lo:hi] = [first if first < start else start]
                ends[lo:hi] = [last if last > stop else stop]


def _mask_of(items: tuple[str, ...], bits: dict[str, int]) -> int:
    mask = 0
    for item in items:
        mask |= 1 << bits.setdefault(item, len(bits))
    return mask
