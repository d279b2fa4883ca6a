"""The NLP partitioner (seed 002 §II-A, eqs. 1-6): partition sizes that minimise a fitted
average-wait surface, weighted over the epochs of the history.

1. Lower bounds (eq. 4): each queue alone is replayed at growing sizes from its largest job;
   lb_i is the largest size whose utilization is still at least τ_util = 90 % of the best
   (D002-5).
2. Samples: `samples` partition vectors above the lower bounds, summing to P, by Latin
   hypercube sampling of the share above the bounds (D002-3); each is replayed on every epoch.
3. Fit (eq. 1): per epoch, a polynomial of degree <= 3 in the first NQ-1 shares (the last is
   fixed by eq. 3), by least squares; the degree drops while the samples are fewer than twice
   its terms.
4. Solve (eqs. 2-6): minimise Σ_e w_e f_e with scipy's SLSQP from the proportional sizes, under
   Σ P_i = P, P_i >= lb_i and, for every pair with CPUhr_i >= CPUhr_j,
   P_i / P_j >= (1 - tolerance) · CPUhr_i / CPUhr_j (eq. 6 as printed holds for no pair both
   ways; D002-2).
5. Round to whole nodes, replay the result, and keep it unless a sampled vector replayed better
   (a fitted surface can miss; the log says which was kept).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cobaltlite.errors import InputError
from cobaltlite.partitioning.evaluate import PartitionEvaluator
from cobaltlite.partitioning.layout import PartitionedQueue, QueueLayout
from cobaltlite.partitioning.proportional import (
    cpu_hours,
    proportional_sizes,
    smallest_partition,
    whole_nodes,
)
from cobaltlite.traces.model import TraceJob

UTILIZATION_SHARE = 0.9
"""τ_util of seed 002 (F2): the lower bound keeps 90 % of a queue's best utilization."""
EPOCH_WEIGHTS = (1 / 3, 2 / 3, 1.0)
"""Seed 002 Table III: three ten-day epochs, the most recent weighing most."""


@dataclass(frozen=True, slots=True)
class NlpResult:
    sizes: list[int]
    lower_bounds: list[int]
    weighted_wait: float
    fitted: bool
    """True when the solver's vector was kept, False when a sampled vector replayed better."""
    samples: int
    proportional: bool = True
    """False when eq. 6 could not hold beside the lower bounds and was dropped (D002-2)."""


def epochs(jobs: Sequence[TraceJob], count: int) -> list[list[TraceJob]]:
    """The jobs cut into `count` periods of equal length by submission time."""
    if count < 1:
        raise InputError(f"epochs {count}: give 1 or more")
    if not jobs:
        raise InputError("the history holds no jobs")
    first = min(j.submit_time for j in jobs)
    span = max(j.submit_time for j in jobs) - first + 1
    parts: list[list[TraceJob]] = [[] for _ in range(count)]
    for job in jobs:
        parts[min(count - 1, int((job.submit_time - first) * count / span))].append(job)
    empty = [k + 1 for k, part in enumerate(parts) if not part]
    if empty:
        raise InputError(f"the history is too short for {count} epochs: epoch {empty[0]} of "
                         f"{count} holds no job")
    return parts


def lower_bounds(queues: Sequence[PartitionedQueue], evaluator: PartitionEvaluator,
                 total: int, steps: int = 8) -> list[int]:
    """Eq. 4's lb_i for each queue, replayed over the evaluator's jobs."""
    bounds = []
    for q in queues:
        largest = max((j.nodes for j in evaluator.jobs if q.holds(j)), default=1)
        sizes = sorted({round(largest * (total / largest) ** (k / (steps - 1)))
                        for k in range(steps)})
        runs = evaluator.queue_runs(q, sizes)
        utils = [r.work / (n * (r.last_end - r.first_submit)) if r.last_end > r.first_submit
                 else 0.0 for r, n in zip(runs, sizes, strict=True)]
        best = max(utils)
        bounds.append(max(n for n, u in zip(sizes, utils, strict=True)
                          if u >= UTILIZATION_SHARE * best))
    return bounds


def fit_bounds(bounds: Sequence[int], smallest: Sequence[int], total: int) -> list[int]:
    """Eq. 4's bounds when they fit the machine; otherwise the smallest partitions (each queue's
    widest job), the paper's stricter alternative, so the samples still have the rest of the
    machine to share (a busy month can make every queue's utilization flat up to the whole
    machine; D002-5). Raises InputError when even those do not fit."""
    if sum(bounds) <= total:
        return list(bounds)
    if sum(smallest) > total:
        raise InputError(f"the queues' lower bounds need {sum(smallest)} nodes; the machine has "
                         f"{total}")
    return list(smallest)


def latin_hypercube(count: int, dims: int, seed: int) -> list[list[float]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    cells = np.stack([rng.permutation(count) for _ in range(dims)], axis=1)
    return ((cells + rng.random((count, dims))) / count).tolist()


def sample_sizes(lower: Sequence[int], total: int, count: int, seed: int) -> list[list[int]]:
    """Distinct whole-node vectors >= `lower` summing to `total` (step 2)."""
    free = total - sum(lower)
    if free < 0:
        raise InputError(f"the queues' lower bounds need {sum(lower)} nodes; the machine has "
                         f"{total}")
    seen: set[tuple[int, ...]] = set()
    out = []
    for point in latin_hypercube(count, len(lower), seed):
        weight = sum(point) or 1.0
        vector = whole_nodes([lo + free * p / weight for lo, p in zip(lower, point, strict=True)],
                             total, lower)
        if tuple(vector) not in seen:
            seen.add(tuple(vector))
            out.append(vector)
    return out


def _terms(dims: int, degree: int) -> list[tuple[int, ...]]:
    return [t for d in range(degree + 1)
            for t in itertools.combinations_with_replacement(range(dims), d)]


def fit_degree(samples: int, dims: int) -> int:
    """Degree 3 at most, lower while the samples are fewer than twice the terms."""
    degree = 3
    while degree > 1 and samples < 2 * len(_terms(dims, degree)):
        degree -= 1
    return degree


class Surface:
    """A least-squares polynomial of the shares z = P_i / P, i < NQ-1."""

    def __init__(self, shares: Sequence[Sequence[float]], waits: Sequence[float], degree: int):
        import numpy as np

        self.terms = _terms(len(shares[0]), degree)
        design = np.array([self._row(z) for z in shares])
        self.coefficients, *_ = np.linalg.lstsq(design, np.array(waits), rcond=None)

    def _row(self, z: Sequence[float]) -> list[float]:
        return [math.prod(z[i] for i in term) for term in self.terms]

    def __call__(self, z: Sequence[float]) -> float:
        return float(sum(c * v for c, v in zip(self.coefficients, self._row(z), strict=True)))


def nlp_sizes(layout: QueueLayout, jobs: Sequence[TraceJob], total: int, *,
              samples: int = 100, epoch_weights: Sequence[float] = EPOCH_WEIGHTS,
              tolerance: float = 0.2, seed: int = 1, workers: int = 1,
              admitted: bool = False) -> NlpResult:
    """The NLP partitioner's sizes for `layout`'s queues over the history `jobs`."""
    from scipy.optimize import minimize

    queues = list(layout.queues)
    if len(queues) < 2:
        sizes = [total]
        return NlpResult(sizes, sizes, 0.0, True, 0)
    if not 0 <= tolerance < 1:
        raise InputError(f"tolerance {tolerance}: give a number in [0, 1)")
    whole = PartitionEvaluator(jobs, total, workers)
    smallest = [smallest_partition(q, jobs, admitted) for q in queues]
    lower = fit_bounds([max(b, n) for b, n in zip(lower_bounds(queues, whole, total), smallest,
                                                  strict=True)], smallest, total)
    parts = [PartitionEvaluator(part, total, workers)
             for part in epochs(jobs, len(epoch_weights))]
    vectors = sample_sizes(lower, total, samples, seed)

    def epoch_waits(batch: Sequence[Sequence[int]]) -> list[list[float]]:
        """[epoch][vector]: the mean wait of each vector's layout over each epoch."""
        layouts = [layout.with_queues(PartitionedQueue(q.name, q.classes, n, q.priority, q.parent)
                                      for q, n in zip(queues, v, strict=True)) for v in batch]
        return [[s.mean_wait for s in e.evaluate_all(layouts)] for e in parts]

    def weighted(waits: list[list[float]], k: int) -> float:
        return (sum(w * e[k] for w, e in zip(epoch_weights, waits, strict=True))
                / sum(epoch_weights))

    sampled = epoch_waits(vectors)
    dims = len(queues) - 1
    degree = fit_degree(len(vectors), dims)
    shares = [[n / total for n in v[:dims]] for v in vectors]
    surfaces = [(w, Surface(shares, waits, degree))
                for w, waits in zip(epoch_weights, sampled, strict=True)]
    hours = [cpu_hours([j for j in jobs if q.holds(j)]) for q in queues]
    lb = [n / total for n in lower]

    def full(z: Sequence[float]) -> list[float]:
        return [*z, 1.0 - sum(z)]

    constraints: list[dict[str, Any]] = [
        {"type": "ineq", "fun": lambda z: full(z)[-1] - lb[-1]}]
    for i, j in itertools.permutations(range(len(queues)), 2):
        if hours[i] >= hours[j] > 0:
            ratio = (1 - tolerance) * hours[i] / hours[j]
            constraints.append({"type": "ineq",
                                "fun": lambda z, i=i, j=j, r=ratio: full(z)[i] - r * full(z)[j]})
    start = proportional_sizes(hours, total, lower)
    # Waits are thousands of seconds and shares under 1: scale the objective to about 1 so
    # SLSQP's tolerances mean something.
    scale = max(1.0, sum(weighted(sampled, k) for k in range(len(vectors))) / len(vectors))
    bound_only = constraints[:1]
    for given in (constraints, bound_only):
        solution = minimize(lambda z: sum(w * f(z) for w, f in surfaces) / scale,
                            [n / total for n in start[:dims]], method="SLSQP",
                            bounds=[(b, 1.0) for b in lb[:dims]], constraints=given)
        # SLSQP may stop short of its own optimality test ("positive directional derivative")
        # at a point that meets every constraint: that point is usable; one that breaks one is
        # not. When the lower bounds leave no room for eq. 6 (a busy month), it is dropped
        # rather than the month left unconfigured (D002-2); the result says so.
        usable = not (any(c["fun"](solution.x) < -1e-6 for c in given) or any(
            z < b - 1e-6 for z, b in zip(solution.x, lb, strict=False)))
        if usable:
            break
    else:
        raise InputError(f"the NLP partitioner found no partition meeting the lower bounds "
                         f"{lower}: {solution.message}")
    proportional = given is constraints
    fitted = whole_nodes([z * total for z in full(solution.x)], total, lower)
    fitted_wait = weighted(epoch_waits([fitted]), 0)
    best = min(range(len(vectors)), key=lambda k: weighted(sampled, k))
    if weighted(sampled, best) < fitted_wait:
        return NlpResult(vectors[best], lower, weighted(sampled, best), False, len(vectors),
                         proportional)
    return NlpResult(fitted, lower, fitted_wait, True, len(vectors), proportional)
