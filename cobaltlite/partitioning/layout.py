"""A queue layout: which jobs each queue takes and how many nodes its partition owns (seed 002).

A queue takes the jobs of one or more *job classes*. A class is a box: jobs from some of the
trace's (or the site's) queues, of a size range and a requested-time range, both inclusive.
Splitting a queue cuts its boxes (by size or by time); merging two queues unites their boxes, so
routing stays exact after any sequence of splits and merges (docs/hybrid-queues.md, D002-1).
Every job routes to at most one queue: `QueueLayout.check` refuses overlapping classes.

A layout owns `pool` nodes besides the partitions: the common pool of the hybrid configuration
(seed 002 §III), 0 in a purely partitioned one.

On Blue Gene/P a queue (and the pool) may name its partition's blocks (`blocks:`,
`pool_blocks:`) instead of being given whole midplanes in the table's order
(cobaltlite/machine/block_layout.py; docs/hybrid-queues.md, D002-25).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import inf
from pathlib import Path
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.traces.model import TraceJob

NO_TIME_LIMIT = 2**31 - 1
"""The upper end of a class's time range when its queue sets no limit (seconds)."""
STARVATION_TIME = 24 * 3600.0
"""Seconds of wait after which a job starves unless the layout says (seed 002 §III: the Cray's
24 hours)."""


@dataclass(frozen=True, slots=True)
class JobClass:
    """Jobs from `sources` (trace queue names; empty: any queue) with min_nodes <= nodes <=
    max_nodes and min_time <= requested time <= max_time (seconds)."""

    sources: frozenset[str]
    min_nodes: int
    max_nodes: int
    min_time: int = 0
    max_time: int = NO_TIME_LIMIT

    def holds(self, job: TraceJob) -> bool:
        return self.takes(job.queue, job.nodes, job.requested_time)

    def takes(self, source: str, nodes: int, requested_time: float) -> bool:
        """Whether a job submitted to queue `source` asking for `nodes` nodes and
        `requested_time` seconds is in this class."""
        return ((not self.sources or source in self.sources)
                and self.min_nodes <= nodes <= self.max_nodes
                and self.min_time <= requested_time <= self.max_time)

    def overlaps(self, other: JobClass) -> bool:
        shared_source = not self.sources or not other.sources or bool(self.sources & other.sources)
        return (shared_source
                and max(self.min_nodes, other.min_nodes) <= min(self.max_nodes, other.max_nodes)
                and max(self.min_time, other.min_time) <= min(self.max_time, other.max_time))

    def cut_nodes(self, last_low: int) -> tuple[JobClass | None, JobClass | None]:
        """The part of sizes <= last_low and the part above it (None where empty)."""
        low = replace(self, max_nodes=min(self.max_nodes, last_low))
        high = replace(self, min_nodes=max(self.min_nodes, last_low + 1))
        return (low if low.min_nodes <= low.max_nodes else None,
                high if high.min_nodes <= high.max_nodes else None)

    def cut_time(self, last_low: int) -> tuple[JobClass | None, JobClass | None]:
        """The part of requested times <= last_low and the part above it (None where empty)."""
        low = replace(self, max_time=min(self.max_time, last_low))
        high = replace(self, min_time=max(self.min_time, last_low + 1))
        return (low if low.min_time <= low.max_time else None,
                high if high.min_time <= high.max_time else None)


@dataclass(frozen=True, slots=True)
class PartitionedQueue:
    """A queue, the jobs it takes, and the nodes of its own partition."""

    name: str
    classes: tuple[JobClass, ...]
    nodes: int
    priority: float = 1.0
    parent: str | None = None
    """The queue whose split made this one: two queues with the same parent are siblings and
    may not be merged again (seed 002 §II-B)."""
    starvation_time: float | None = None
    """Seconds of wait after which a job of this queue starves (None: the layout's)."""
    blocks: tuple[str, ...] = ()
    """Blue Gene/P only: the blocks whose node cards make its partition (empty: whole
    midplanes in the table's order, `nodes` of them)."""

    def holds(self, job: TraceJob) -> bool:
        return any(c.holds(job) for c in self.classes)

    def takes(self, source: str, nodes: int, requested_time: float) -> bool:
        return any(c.takes(source, nodes, requested_time) for c in self.classes)

    @property
    def size_range(self) -> tuple[int, int]:
        return min(c.min_nodes for c in self.classes), max(c.max_nodes for c in self.classes)

    @property
    def time_range(self) -> tuple[int, int]:
        return min(c.min_time for c in self.classes), max(c.max_time for c in self.classes)


@dataclass(frozen=True, slots=True)
class QueueLayout:
    queues: tuple[PartitionedQueue, ...]
    pool: int = 0
    tau_pf: float | None = None
    """Priority factor above which a job may use the common pool (seed 002 §III)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    starvation_time: float = STARVATION_TIME
    """Seconds of wait after which a job starves, for queues that set none (seed 002 §III;
    D002-13: the pool then serves only the starving queues)."""
    pool_blocks: tuple[str, ...] = ()
    """Blue Gene/P only: the blocks whose node cards make the pool (empty: whole midplanes)."""

    @property
    def nodes(self) -> int:
        return sum(q.nodes for q in self.queues) + self.pool

    def starvation(self, queue: PartitionedQueue) -> float:
        """The queue's starvation time, its own or the layout's."""
        own = queue.starvation_time
        return self.starvation_time if own is None else own

    def queue(self, name: str) -> PartitionedQueue:
        for q in self.queues:
            if q.name == name:
                return q
        raise KeyError(name)

    def with_queues(self, queues: Iterable[PartitionedQueue]) -> QueueLayout:
        return replace(self, queues=tuple(queues))

    def queue_for(self, source: str, nodes: int, requested_time: float) -> str | None:
        """The name of the queue whose classes take a job submitted to queue `source` with
        this size and requested time, or None: the one routing rule, for a trace job in Qsim
        (`home`) and for a job submitted to the daemons (cobaltlite/queue_manager/routing.py).
        Classes never overlap (`check`), so at most one queue takes it."""
        for q in self.queues:
            if q.takes(source, nodes, requested_time):
                return q.name
        return None

    def home(self, job: TraceJob) -> str | None:
        """The queue that takes a trace job (its trace queue, size and requested time)."""
        return self.queue_for(job.queue, job.nodes, job.requested_time)

    @property
    def routing_sources(self) -> frozenset[str]:
        """The queues the layout routes from when a job is submitted to them live: every source
        queue its classes name, and `default` when a class names none (takes any queue's
        jobs); never one of its own queues (a job submitted to one of those stays there)."""
        named = {source for q in self.queues for c in q.classes for source in c.sources}
        if any(not c.sources for q in self.queues for c in q.classes):
            named.add("default")
        return frozenset(named - {q.name for q in self.queues})

    def route(self, jobs: Iterable[TraceJob]) -> tuple[dict[str, list[TraceJob]], list[TraceJob]]:
        """Each queue's jobs (in the order given), and the jobs no queue takes."""
        routed: dict[str, list[TraceJob]] = {q.name: [] for q in self.queues}
        unrouted: list[TraceJob] = []
        for job in jobs:
            name = self.home(job)
            if name is None:
                unrouted.append(job)
            else:
                routed[name].append(job)
        return routed, unrouted

    def check(self, machine_nodes: int, where: str = "queue layout") -> None:
        """Raise InputError unless the layout can run on a machine of `machine_nodes` nodes."""
        if not self.queues:
            raise InputError(f"{where}: no queues")
        names = [q.name for q in self.queues]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InputError(f"{where}: queue {repeated[0]!r} is given twice")
        for q in self.queues:
            if q.nodes < 1:
                raise InputError(f"{where}: queue {q.name!r} has {q.nodes} nodes; every queue "
                                 "needs at least one node of its own")
            if not q.classes:
                raise InputError(f"{where}: queue {q.name!r} takes no jobs (no job class)")
        if self.pool < 0:
            raise InputError(f"{where}: common pool of {self.pool} nodes: must be 0 or more")
        if self.nodes > machine_nodes:
            raise InputError(f"{where}: partitions and pool hold {self.nodes} nodes; the "
                             f"machine has {machine_nodes}")
        for i, a in enumerate(self.queues):
            for b in self.queues[i + 1:]:
                if any(x.overlaps(y) for x in a.classes for y in b.classes):
                    raise InputError(f"{where}: queues {a.name!r} and {b.name!r} both take some "
                                     "jobs (their job classes overlap); a job must route to one "
                                     "queue")


def unrouted_error(job: TraceJob) -> InputError:
    """The error for a history job that no queue of a layout takes, naming what routes it (its
    size, requested time and trace queue) and the two ways out."""
    return InputError(
        f"job {job.jobid} ({job.nodes} nodes, {job.requested_time:g} s requested, queue "
        f"{job.queue!r}) belongs to no queue of the layout; give the layout a job class that "
        "takes it, or leave such jobs out of the history (as the study leaves out jobs wider "
        "than half the machine: docs/hybrid-queues.md, D002-22)")


def _job_class_yaml(c: JobClass) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": [c.min_nodes, c.max_nodes]}
    if c.sources:
        out["queues"] = sorted(c.sources)
    if (c.min_time, c.max_time) != (0, NO_TIME_LIMIT):
        out["time"] = [c.min_time, c.max_time]
    return out


def layout_yaml(layout: QueueLayout, machine_nodes: int) -> str:
    """The layout as the YAML file `read_layout` reads back."""
    doc: dict[str, Any] = {"machine_nodes": machine_nodes, "common_pool": layout.pool}
    if layout.tau_pf is not None:
        doc["tau_pf"] = layout.tau_pf
    if layout.starvation_time != STARVATION_TIME:
        doc["starvation_time"] = layout.starvation_time
    if layout.pool_blocks:
        doc["pool_blocks"] = list(layout.pool_blocks)
    doc.update(layout.extra)
    doc["queues"] = [
        {"name": q.name, "nodes": q.nodes, "priority": q.priority,
         **({"split_from": q.parent} if q.parent else {}),
         **({"starvation_time": q.starvation_time} if q.starvation_time is not None else {}),
         **({"blocks": list(q.blocks)} if q.blocks else {}),
         "jobs": [_job_class_yaml(c) for c in q.classes]}
        for q in layout.queues]
    import yaml  # here and in parse_layout: Qsim imports this module, and yaml costs its start-up

    return yaml.safe_dump(doc, sort_keys=False)


def read_layout(path: Path) -> tuple[QueueLayout, int]:
    """A layout file and its machine size; errors name the file and the key."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                         ) from None
    return parse_layout(text, str(path))


def parse_layout(text: str, path: str) -> tuple[QueueLayout, int]:
    """A layout's YAML text and its machine size; errors name `path` (where the text came
    from) and the key, or the line of a YAML syntax error."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping with machine_nodes and queues")
    machine_nodes = _whole(doc.get("machine_nodes"), f"{path}: machine_nodes", minimum=1)
    pool = _whole(doc.get("common_pool", 0), f"{path}: common_pool", minimum=0)
    tau = doc.get("tau_pf")
    if tau is not None and (isinstance(tau, bool) or not isinstance(tau, (int, float))
                            or tau < 0):
        raise InputError(f"{path}: tau_pf {tau!r}: give a number of 0 or more")
    raw = doc.get("queues")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{path}: queues: give a list of queues")
    queues = [_queue(item, f"{path}: queues[{i}]") for i, item in enumerate(raw)]
    starvation = _seconds(doc.get("starvation_time", STARVATION_TIME),
                          f"{path}: starvation_time")
    layout = QueueLayout(tuple(queues), pool, None if tau is None else float(tau),
                         starvation_time=starvation,
                         pool_blocks=_names(doc.get("pool_blocks", []), f"{path}: pool_blocks"))
    layout.check(machine_nodes, path)
    return layout, machine_nodes


def _queue(item: Any, where: str) -> PartitionedQueue:
    if not isinstance(item, dict):
        raise InputError(f"{where}: expected a mapping with name, nodes and jobs")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: name: give the queue's name")
    where = f"{where} ({name})"
    priority = item.get("priority", 1.0)
    if isinstance(priority, bool) or not isinstance(priority, (int, float)) or priority <= 0:
        raise InputError(f"{where}: priority {priority!r}: give a number above 0")
    jobs = item.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise InputError(f"{where}: jobs: give a list of job classes (nodes, time, queues)")
    parent = item.get("split_from")
    return PartitionedQueue(
        name=name, nodes=_whole(item.get("nodes"), f"{where}: nodes", minimum=1),
        classes=tuple(_job_class(c, f"{where}: jobs[{i}]") for i, c in enumerate(jobs)),
        priority=float(priority), parent=str(parent) if parent is not None else None,
        starvation_time=None if item.get("starvation_time") is None
        else _seconds(item["starvation_time"], f"{where}: starvation_time"),
        blocks=_names(item.get("blocks", []), f"{where}: blocks"))


def _names(value: Any, where: str) -> tuple[str, ...]:
    """A list of block names (Blue Gene/P), each once."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"{where}: give a list of block names")
    repeated = sorted({v for v in value if value.count(v) > 1})
    if repeated:
        raise InputError(f"{where}: block {repeated[0]!r} is given twice")
    return tuple(value)


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < inf:
        raise InputError(f"{where}: {value!r}: give a number of seconds, 0 or more")
    return float(value)


def _job_class(item: Any, where: str) -> JobClass:
    if not isinstance(item, dict):
        raise InputError(f"{where}: expected a mapping with nodes: [MIN, MAX]")
    low, high = _range(item.get("nodes"), f"{where}: nodes", minimum=1)
    t_low, t_high = _range(item.get("time", [0, NO_TIME_LIMIT]), f"{where}: time", minimum=0)
    sources = item.get("queues", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InputError(f"{where}: queues: give a list of queue names")
    return JobClass(frozenset(sources), low, high, t_low, t_high)


def _range(value: Any, where: str, minimum: int) -> tuple[int, int]:
    if not (isinstance(value, list) and len(value) == 2):
        raise InputError(f"{where}: give [MIN, MAX]")
    low = _whole(value[0], where, minimum)
    high = _whole(value[1], where, minimum)
    if low > high:
        raise InputError(f"{where}: [{low}, {high}]: MIN is above MAX")
    return low, high


def _whole(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{where}: {value!r}: give a whole number of {minimum} or more")
    return value


def trace_layout(jobs: Sequence[TraceJob], machine_nodes: int) -> QueueLayout:
    """One queue per queue the jobs name, taking all of that queue's jobs; nodes not yet set
    (1 each): a starting point that a partitioner sizes."""
    names = sorted({job.queue for job in jobs})
    return QueueLayout(tuple(
        PartitionedQueue(name, (JobClass(frozenset({name}), 1, machine_nodes),), nodes=1)
        for name in names))
