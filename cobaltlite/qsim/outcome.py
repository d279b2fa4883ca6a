"""What a replay records about each job and about idle capacity: the input to the metrics."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple


class JobOutcome(NamedTuple):
    """One finished job of a replay. Times are seconds on the trace's clock.

    A named tuple rather than a frozen dataclass: a replay makes one per job, and a frozen
    dataclass sets each of its 14 fields through object.__setattr__ (7 times slower to make).
    """

    jobid: int
    submit_time: float
    start_time: float
    end_time: float
    nodes: int            # nodes the job asked for
    allocated_nodes: int  # nodes held: its block size on Blue Gene/P, = nodes on a cluster
    requested_time: float
    location: str
    killed: bool          # ended by the wall-time limit rather than by itself
    failed_runs: int = 0  # earlier runs killed by failures (seed 003 §VI-A3): it restarted
    lost_node_seconds: float = 0.0  # nodes x seconds those killed runs held
    user: str = "unknown"
    project: str = "unknown"
    queue: str = "default"

    @property
    def wait(self) -> float:
        return self.start_time - self.submit_time

    @property
    def run_time(self) -> float:
        return self.end_time - self.start_time

    @property
    def response(self) -> float:
        """From the first submission to the successful end, lost runs and re-waits included."""
        return self.end_time - self.submit_time


@dataclass(slots=True, frozen=True)
class CapacitySample:
    """State after the scheduling event at `time` (seed 000, eq. 4): idle nodes until the next
    event, and whether some queued job was smaller than that idle count (delta_i)."""

    time: float
    idle_nodes: int
    waiting_job_fits: bool


class CapacitySamples:
    """A replay's capacity samples as three columns (Qsim takes one at every event, two per job:
    as objects they were a tenth of a large replay's memory). Reads as a sequence of
    `CapacitySample`. Times are kept as floats: exact for any fractional time and for whole
    seconds below 2**53."""

    __slots__ = ("fits", "idle", "times")

    def __init__(self, samples: Iterable[CapacitySample] = ()) -> None:
        self.times = array("d")
        self.idle = array("q")
        self.fits = bytearray()  # 1: waiting_job_fits
        for sample in samples:
            self.append(sample.time, sample.idle_nodes, sample.waiting_job_fits)

    def append(self, time: float, idle_nodes: int, waiting_job_fits: bool) -> None:
        self.times.append(time)
        self.idle.append(idle_nodes)
        self.fits.append(waiting_job_fits)

    def __len__(self) -> int:
        return len(self.times)

    def __getitem__(self, i: int) -> CapacitySample:
        return CapacitySample(self.times[i], self.idle[i], bool(self.fits[i]))

    def __iter__(self) -> Iterator[CapacitySample]:
        for i in range(len(self.times)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CapacitySamples):
            return NotImplemented
        return (self.times, self.idle, self.fits) == (other.times, other.idle, other.fits)

    def __repr__(self) -> str:
        return f"CapacitySamples({list(self)!r})"
