"""What a replay records about each job and about idle capacity: the input to the metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class JobOutcome:
    """One finished job of a replay. Times are seconds on the trace's clock."""

    jobid: int
    submit_time: float
    start_time: float
    end_time: float
    nodes: int            # nodes the job asked for
    allocated_nodes: int  # nodes held: its block size on Blue Gene/P, = nodes on a cluster
    requested_time: float
    location: str
    killed: bool          # ended by the wall-time limit rather than by itself
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
        return self.end_time - self.submit_time


@dataclass(slots=True, frozen=True)
class CapacitySample:
    """State after the scheduling event at `time` (seed 000, eq. 4): idle nodes until the next
    event, and whether some queued job was smaller than that idle count (delta_i)."""

    time: float
    idle_nodes: int
    waiting_job_fits: bool
