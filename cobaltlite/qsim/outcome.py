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
