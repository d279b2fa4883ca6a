"""One configuration of a queue layout from a history (seed 002): the methods side by side.

* pp: proportional partitioning (eq. 7);
* nlp: the NLP partitioner (§II-A) over the history's weighted epochs;
* dqr: nlp, then split and merge (§II-B);
* hybrid: dqr, then the common pool carved from the partitions (§III).

`qsim configure-queues` (one history) and monthly reconfiguration in a replay (one history per
month) both call `configure_layout`, so a month of `qsim --reconfigure monthly` gets exactly the
layout `qsim configure-queues` writes for the previous month.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from cobaltlite.choices import LAYOUT_METHODS as METHODS
from cobaltlite.errors import InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import FlatDescription
from cobaltlite.partitioning.evaluate import Evaluation, PartitionEvaluator
from cobaltlite.partitioning.layout import QueueLayout, unrouted_error
from cobaltlite.partitioning.proportional import (
    admits_limits,
    cpu_hours,
    proportional_sizes,
    smallest_partition,
)
from cobaltlite.traces.model import TraceJob

CHUNK_NODES = 4
"""Nodes a hybrid visit moves from a partition to the pool. Seed 002 §III moves 5 processors of
35,232 (one step in 7,000); on a machine of 128 or 144 nodes one node is already 1/144, and each
step is a whole replay: 4 nodes (about 3 %) keeps the carving to a few dozen replays (D002-21)."""
DEGRADATION = 0.30
"""Seed 002 §III's degPercent: a queue's (and the overall) mean wait may rise by 30 %."""


@dataclass(frozen=True, slots=True)
class ConfigureSettings:
    method: str = "dqr"
    samples: int = 100        # nlp: partition vectors replayed for the fit
    tolerance: float = 0.2    # nlp: slack of the proportional constraint (D002-2)
    epochs: int = 3           # nlp: periods of the history, weighted 1/N .. N/N (eq. 2)
    chunk: int = CHUNK_NODES  # hybrid: nodes per visit
    degradation: float = DEGRADATION  # hybrid: the largest rise of a mean wait kept
    workers: int = 1          # replays in parallel

    def check(self) -> None:
        """InputError naming the setting that cannot be used."""
        if self.method not in METHODS:
            raise InputError(f"method {self.method!r}: choose one of {', '.join(METHODS)}")
        if not 0 <= self.tolerance < 1:
            raise InputError(f"tolerance {self.tolerance}: give a number in [0, 1)")
        if self.epochs < 1:
            raise InputError(f"epochs {self.epochs}: give 1 or more")
        if self.chunk < 1:
            raise InputError(f"chunk {self.chunk}: give 1 node or more")
        if not self.degradation >= 0:
            raise InputError(f"degradation {self.degradation}: give a fraction of 0 or more")

    @property
    def epoch_weights(self) -> tuple[float, ...]:
        """Seed 002 Table III's 1/3, 2/3, 3/3 for three epochs; k/N for N."""
        return tuple((k + 1) / self.epochs for k in range(self.epochs))


def flat_machine(spec: str) -> FlatDescription:
    """The machine `--machine spec` names, which must be flat: the configurators size
    partitions in nodes (D002-25: Blue Gene/P layouts are written by hand)."""
    description = load_description(spec)
    if not isinstance(description, FlatDescription):
        raise InputError(f"--machine {spec}: the configurators size partitions "
                         "for flat clusters (flat:N) only; on Blue Gene/P write the layout "
                         "yourself (whole midplanes or blocks:) and replay it with qsim "
                         "--queue-layout (docs/hybrid-queues.md)")
    return description


def sized(layout: QueueLayout, sizes: Sequence[int]) -> QueueLayout:
    """`layout` with its queues' partitions set to `sizes`, in queue order."""
    return layout.with_queues(replace(q, nodes=n)
                              for q, n in zip(layout.queues, sizes, strict=True))


def configure_layout(jobs: Sequence[TraceJob], layout: QueueLayout, total: int,
                     settings: ConfigureSettings) -> tuple[QueueLayout, Evaluation]:
    """The layout `settings.method` chooses for `layout`'s queues over the history `jobs` on a
    flat machine of `total` nodes, and its simulated score on that history. InputError when the
    history cannot be used (no job, a job no queue takes, lower bounds beyond the machine, too
    few jobs for the epochs)."""
    settings.check()
    if not jobs:
        raise InputError("the history holds no job")
    routed, unrouted = layout.route(jobs)
    if unrouted:
        raise unrouted_error(unrouted[0])
    admitted = admits_limits(layout.queues, total)
    largest = [smallest_partition(q, routed[q.name], admitted) for q in layout.queues]
    if settings.method == "pp":
        layout = sized(layout, proportional_sizes(
            [cpu_hours(routed[q.name]) for q in layout.queues], total, largest))
    else:
        from cobaltlite.partitioning.nlp import nlp_sizes

        result = nlp_sizes(layout, jobs, total, samples=settings.samples,
                           epoch_weights=settings.epoch_weights, tolerance=settings.tolerance,
                           workers=settings.workers, admitted=admitted)
        layout = sized(layout, result.sizes)
    partitioned = replace(layout, pool=0)
    evaluator = PartitionEvaluator(jobs, total, settings.workers)
    if settings.method in ("dqr", "hybrid"):
        from cobaltlite.partitioning.reshape import reshape

        partitioned, score, _ = reshape(partitioned, evaluator, admitted=admitted)
    else:
        score = evaluator.evaluate(partitioned)
    if settings.method != "hybrid":
        return partitioned, score
    from cobaltlite.partitioning.hybrid import carve_pool

    carved = carve_pool(partitioned, jobs, total, chunk=settings.chunk,
                        degradation=settings.degradation, admitted=admitted)
    return carved.layout, carved.score
