"""A whole replay as one call: read the trace, build the machine, run Qsim, write the outputs.

The `qsim` command, the benchmarks and (later) `schedctl --try` all go through `replay()`, so
they read traces and report metrics the same way.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cobaltlite.accounting import read_accounting_log
from cobaltlite.choices import TRACE_FORMATS
from cobaltlite.errors import InputError
from cobaltlite.faults.predictor import (
    PAPER_SENSITIVITY,
    PAPER_SPECIFICITY,
    build_predictor,
    check_rate,
)
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.description import BGPDescription, FlatDescription
from cobaltlite.machine.model import Machine, PlaceSet
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.usage import DEFAULT_HALF_LIFE
from cobaltlite.policy.utility import UtilityFunction, builtin_policy
from cobaltlite.qsim.engine import DEFAULT_REPAIR_TIME, Qsim, ReplayResult
from cobaltlite.qsim.joblog import AccountingObserver
from cobaltlite.qsim.metrics import compute_metrics
from cobaltlite.qsim.queue_metrics import queue_metrics
from cobaltlite.qsim.summary_json import summary_text
from cobaltlite.scheduler.scheduler import Backfill
from cobaltlite.traces.model import TraceJob, TraceReadResult, select_window
from cobaltlite.traces.swf import read_swf

if TYPE_CHECKING:
    from cobaltlite.faults.sources import FailureEvent
    from cobaltlite.partitioning.layout import QueueLayout
    from cobaltlite.qsim.eet import ShareModel
    from cobaltlite.qsim.fairness import Settings as FairnessSettings
    from cobaltlite.qsim.fairness import SettingsAt
    from cobaltlite.scheduler.slack import SlackSettings
    from cobaltlite.tuning.scheme import TuningScheme
    from cobaltlite.tuning.tuner import Tuner

# The modules of options a plain replay does not use (tuning, fair starts, EETs, seed 001's
# metrics, reservations, failures, queue places and layouts, the Intrepid list reader) are
# imported where the option is read: a flat replay's start-up is part of what a user waits for
# (issue 13).

BGP_CORES_PER_NODE = 4
"""Blue Gene/P nodes have 4 cores; Intrepid's SWF log counts cores (traces/README.md)."""


@dataclass
class ReplaySettings:
    """Everything a replay is asked to do: the trace, machine, policy and scheme, and the
    options of `qsim` (cobaltlite/qsim/cli.py) that shape it."""

    trace: Path
    machine: str
    policy: UtilityFunction
    backfill: Backfill = Backfill.EASY
    trace_format: str = "auto"
    schedulable: str | None = None
    processors_per_node: int | None = None
    estimate: str = "requested"
    start: float | None = None
    end: float | None = None
    arrival_scale: float = 1.0
    lenient: bool = False
    slowdown_bound: float = 10.0
    out: Path | None = None
    window: int = 1
    slack: SlackSettings | None = None  # seed 001's settings under --backfill slack
    unfairness: bool = False  # seed 001's metrics (cobaltlite/qsim/unfairness.py)
    tuning: TuningScheme | None = None
    fair_start: str = "none"  # "none", or a method of cobaltlite/qsim/fairness.py
    # Queues, limits and policies (cobaltlite.jobs.queues.load_queue_config), and the utility
    # functions their policy names resolve to; None: the trace's queues, unrestricted.
    queue_config: list[dict[str, Any]] | None = None
    queue_policies: dict[str, UtilityFunction] = field(default_factory=dict)
    # Fault-aware allocation and failures (docs/fault-aware.md). Failures come from a log or
    # from Weibull generation (system MTBF, or the per-unit scale λ); neither: none.
    alpha: float = 1.0
    beta: float = 1.0
    failure_log: Path | None = None
    mtbf_hours: float | None = None
    weibull_scale: float | None = None
    weibull_shape: float = 1.0
    failure_seed: int = 1
    repair_time: float = DEFAULT_REPAIR_TIME
    predictor: str = "window"
    sensitivity: float = PAPER_SENSITIVITY
    specificity: float = PAPER_SPECIFICITY
    # Seed 004: score the replay by expected end times with this share model (None: not scored),
    # and the half-life of the per-user usage that fairshare policies read (docs/fairness.md).
    eet: ShareModel | None = None
    usage_half_life: float = DEFAULT_HALF_LIFE
    reservations: Path | None = None  # qsim --reservations (cobaltlite/reservations/qsim_file)
    # qsim --queue-places: queue -> the places (partadm --queue's mapping) its jobs may use.
    queue_places: dict[str, list[str]] = field(default_factory=dict)
    # qsim --queue-layout: queue partitions and the common pool (seed 002; docs/hybrid-queues.md)
    queue_layout: Path | None = None

    @property
    def has_failures(self) -> bool:
        return (self.failure_log is not None or self.mtbf_hours is not None
                or self.weibull_scale is not None)


@dataclass
class ReplayReport:
    """A replay's settings, result and metrics, and what its JSON summary says."""

    settings: ReplaySettings
    result: ReplayResult
    metrics: dict[str, Any]
    trace_skipped: list[str] = field(default_factory=list)
    failure_units: int = 0  # midplanes (BG/P) or nodes (flat) failures were generated for
    tuner: Tuner | None = None

    def summary(self) -> dict[str, Any]:
        """The JSON summary: settings, counts and metrics, nothing that depends on wall time."""
        s = self.settings
        return {
            "trace": s.trace.name,
            "machine": s.machine,
            "machine_nodes": self.result.machine_nodes,
            "policy": s.policy.name,
            "policy_options": dict(s.policy.options),
            "backfill": str(s.backfill),
            "estimate": s.estimate,
            "arrival_scale": s.arrival_scale,
            "alpha": s.alpha,
            "beta": s.beta,
            "jobs_replayed": len(self.result.outcomes),
            "jobs_skipped_reading": len(self.trace_skipped),
            "jobs_skipped_unplaceable": len(self.result.skipped),
            "scheduling_passes": self.result.passes,
            "window": s.window,
            **({"slack": self.slack_settings()} if s.backfill is Backfill.SLACK else {}),
            "tuning": None if self.tuner is None or s.tuning is None else {
                "scheme": s.tuning.describe(),
                "changes": [change.as_record() for change in self.tuner.changes],
            },
            "queues": None if s.queue_config is None else [q["name"] for q in s.queue_config],
            **({"queue_layout": s.queue_layout.name} if s.queue_layout is not None else {}),
            "metrics": self.metrics,
            **({"failure_model": self.failure_model()} if s.has_failures else {}),
        }

    def slack_settings(self) -> dict[str, Any]:
        from cobaltlite.scheduler.slack import SlackSettings  # only slack backfilling loads it

        return dataclasses.asdict(self.settings.slack or SlackSettings())

    def failure_model(self) -> dict[str, Any]:
        s = self.settings
        source: dict[str, Any] = (
            {"failure_log": str(s.failure_log)} if s.failure_log is not None else
            {"weibull_shape": s.weibull_shape, "weibull_scale": s.weibull_scale,
             "mtbf_hours": s.mtbf_hours, "failure_seed": s.failure_seed,
             "failure_units": self.failure_units}
        )
        if s.mtbf_hours is not None:  # the scale the MTBF gave, so the run can be redone by λ
            from cobaltlite.faults.sources import scale_for_system_mtbf

            source["weibull_scale"] = scale_for_system_mtbf(s.mtbf_hours, self.failure_units,
                                                            s.weibull_shape)
        return {**source, "repair_time": s.repair_time, "predictor": s.predictor,
                "sensitivity": s.sensitivity, "specificity": s.specificity}


def policy_named(
    name: str, options: Mapping[str, Any], utility_file: Path | None
) -> UtilityFunction:
    """A function of `utility_file` when it has one of that name, else a builtin: what qsim's
    --policy/--utility-file and an experiment file's policies name."""
    if utility_file is not None:
        from cobaltlite.policy.loader import compile_file  # start-up: only for --utility-file

        site = compile_file(utility_file, {name: options} if options else None).functions
        if name in site:
            return site[name]
    return builtin_policy(name, options)


def detect_format(path: Path) -> str:
    """Guess a trace's format from its first meaningful line."""
    with path.open("rb") as probe:  # the magic bytes only, not the whole file
        opener = gzip.open if probe.read(2) == b"\x1f\x8b" else open
    with opener(path, "rt", errors="replace") as stream:
        for line in stream:
            text = line.strip()
            if not text:
                continue
            if text.startswith(";"):
                return "swf"
            if text.startswith("Job_name"):
                return "intrepid-list"
            fields = text.split(";")
            if len(fields) >= 3 and len(fields[1]) <= 2 and fields[1].isalpha():
                return "accounting"
            return "swf"
    raise InputError(f"{path}: the trace is empty")


def read_trace(settings: ReplaySettings, processors_per_node: int) -> TraceReadResult:
    path = settings.trace
    if not path.is_file():
        raise InputError(f"--trace {path}: no such file")
    kind = detect_format(path) if settings.trace_format == "auto" else settings.trace_format
    if kind == "swf":
        result = read_swf(
            path,
            processors_per_node=processors_per_node,
            estimate=settings.estimate,
            lenient=settings.lenient,
            start=settings.start,
            end=settings.end,
            arrival_scale=settings.arrival_scale,
        )
    elif kind == "accounting":
        result = read_accounting_log(path, lenient=settings.lenient, estimate=settings.estimate)
    elif kind == "intrepid-list":
        from cobaltlite.traces.intrepid_list import read_intrepid_list

        result = read_intrepid_list(path, lenient=settings.lenient)
    else:
        raise InputError(f"--format {kind!r}: choose one of {', '.join(TRACE_FORMATS)}")
    if kind != "swf":  # read_swf applies the window itself, before sorting a large file
        result.jobs = select_window(result.jobs, settings.start, settings.end,
                                    settings.arrival_scale)
    return result


WINDOW_FIELDS = ("start", "end", "arrival_scale")
"""The settings a replay applies to the jobs after reading (select_window): every other setting
that read_trace uses decides what is read."""


def read_whole_trace(settings: ReplaySettings, processors_per_node: int) -> TraceReadResult:
    """The trace as `read_trace` reads it without the window and the arrival scaling: what several
    replays of one file share (a sweep reads each file once; see `replay(whole_trace=...)`)."""
    unwindowed = dataclasses.replace(settings, start=None, end=None, arrival_scale=1.0)
    return read_trace(unwindowed, processors_per_node)


def processors_per_node(
    settings: ReplaySettings, description: BGPDescription | FlatDescription
) -> int:
    """How many SWF processors make one node: the setting, else the flat machine's, else BG/P's."""
    if settings.processors_per_node is not None:
        return settings.processors_per_node
    if isinstance(description, FlatDescription):
        return description.processors_per_node
    return BGP_CORES_PER_NODE


def replay(
    settings: ReplaySettings,
    progress_factory: Callable[[int], Callable[[int], None]] | None = None,
    whole_trace: TraceReadResult | None = None,
) -> ReplayReport:
    """Replay `settings`. `whole_trace`, when given, is `read_whole_trace(settings, ...)` read
    earlier: the replay windows and scales copies of its jobs and leaves it unchanged, so one
    read serves many replays. The result is the same as reading the file here."""
    if settings.fair_start != "none" and settings.policy.needs_user_usage:
        # The forks of fair start times begin from a queue state, not from a usage history.
        raise InputError(f"--fair-start {settings.fair_start} with policy "
                         f"{settings.policy.name!r}: fair start times do not carry the per-user "
                         "usage (user_usage) into their forks; use a policy without it")
    description = load_description(settings.machine, schedulable=settings.schedulable)
    if whole_trace is None:
        trace = read_trace(settings, processors_per_node(settings, description))
    else:
        # select_window rescales submit times in place: work on copies of the shared jobs.
        jobs = select_window([copy.copy(job) for job in whole_trace.jobs], settings.start,
                             settings.end, settings.arrival_scale)
        trace = TraceReadResult(jobs, list(whole_trace.skipped), whole_trace.origin)
    machine = build_machine(description, alpha=settings.alpha, beta=settings.beta)
    if settings.eet is not None:
        # A share file that does not divide this machine among the trace's users is refused
        # before the replay runs and writes its accounting.log (nothing half-written). Every
        # user of the trace window needs a share, even one whose jobs all fit nowhere.
        settings.eet.shares(sorted({job.user for job in trace.jobs}), machine.total_nodes)
    failures = failure_list(settings, machine, trace.jobs)
    if failures is not None:
        machine.failures = build_predictor(settings.predictor, failures, machine,
                                           settings.sensitivity, settings.specificity)
    reservations = None
    if settings.reservations is not None:
        from cobaltlite.reservations.qsim_file import load_reservations

        reservations = load_reservations(settings.reservations, machine)
    queue_places = _queue_places(settings.queue_places, machine)
    layout = (_queue_layout(settings.queue_layout, machine)
              if settings.queue_layout is not None else None)
    # Built before any output: a job the queue layout cannot route stops the replay here.
    qsim = Qsim(trace.jobs, machine, settings.policy, settings.backfill,
                queue_config=settings.queue_config, policies=settings.queue_policies,
                failures=failures, repair_time=settings.repair_time, window=settings.window,
                usage_half_life=settings.usage_half_life,
                reservations=reservations, slack=settings.slack, queue_layout=layout,
                layout_source=f"--queue-layout {settings.queue_layout}")
    qsim.queue_places = queue_places
    jobs_read = len(trace.jobs)
    # Qsim holds its own list of the jobs and lets each go once submitted: the trace's list goes
    # now, not after the replay (on a 300,000-job trace they are a third of the peak memory).
    trace.jobs = []
    observer = None
    if settings.out is not None:
        settings.out.mkdir(parents=True, exist_ok=True)
        observer = qsim.observer = AccountingObserver(settings.out / "accounting.log")
    try:
        tuning = None
        if settings.tuning is not None:
            from cobaltlite.tuning.qsim import QsimTuning

            tuning = QsimTuning(qsim, settings.tuning)
        progress = progress_factory(jobs_read) if progress_factory else None
        result = qsim.run(progress)
    finally:
        if observer is not None:
            observer.close()
    tuner = tuning.tuner if tuning is not None else None
    fair = None
    if settings.fair_start != "none":
        from cobaltlite.qsim.fairness import fair_start_times

        fair = fair_start_times(result.outcomes, build_machine(description), settings.backfill,
                                _settings_at(settings, tuner),
                                "estimate" if settings.fair_start == "estimate" else "replay")
    metrics = compute_metrics(
        result.outcomes,
        result.samples,
        result.machine_nodes,
        slowdown_bound=settings.slowdown_bound,
        fair_start=fair,
        fair_start_method=settings.fair_start if fair is not None else None,
        failure_events=result.failure_events,
    )
    if qsim.partitions is not None:
        metrics["by_queue"] = queue_metrics(result.outcomes, qsim.partitions,
                                            settings.slowdown_bound)
    if settings.eet is not None:
        from cobaltlite.qsim.eet import from_outcomes, score_schedule, write_figures

        scored = score_schedule(from_outcomes(result.outcomes), result.machine_nodes, settings.eet)
        metrics["eet"] = scored.summary()
        if settings.out is not None:
            write_figures(scored, settings.out, f"{settings.trace.name}, {settings.policy.name}, "
                          f"{settings.backfill} backfilling")
    if settings.unfairness:
        from cobaltlite.qsim.unfairness import seed001_metrics

        metrics["unfairness"] = seed001_metrics(result.outcomes, build_machine(description))
    report = ReplayReport(settings, result, metrics, list(trace.skipped),
                          len(machine.failure_units()) if settings.has_failures else 0, tuner)
    if settings.out is not None:
        summary = summary_text(report.summary()) + "\n"
        _write_atomically(settings.out / "summary.json", summary)
    return report


def _queue_places(given: Mapping[str, list[str]], machine: Machine) -> dict[str, PlaceSet]:
    """--queue-places as the scheduler's place sets; InputError naming the queue and place."""
    places: dict[str, PlaceSet] = {}
    if not given:
        return places
    from cobaltlite.reservations.model import ReservationError
    from cobaltlite.reservations.requests import named_places

    for queue, names in given.items():
        try:
            places[queue] = frozenset(named_places(machine, names))
        except ReservationError as exc:
            raise InputError(f"--queue-places {queue}={':'.join(names)}: {exc}") from None
    return places


def _queue_layout(path: Path, machine: Machine) -> QueueLayout:
    """--queue-layout FILE, for this machine; InputError naming the file and what is wrong."""
    from cobaltlite.partitioning.layout import read_layout

    layout, nodes = read_layout(path)
    if nodes != machine.total_nodes:
        raise InputError(f"--queue-layout {path}: machine_nodes is {nodes}; the machine "
                         f"{machine.name} has {machine.total_nodes} nodes")
    return layout


def _settings_at(settings: ReplaySettings, tuner: Tuner | None) -> SettingsAt:
    """The policy and window in force at an instant of the replay (for fair start times)."""
    from cobaltlite.qsim.fairness import Settings as FairnessSettings
    from cobaltlite.tuning.apply import with_balance_factor

    fixed = FairnessSettings(settings.policy, settings.window)
    if tuner is None:
        return lambda _t: fixed
    by_values: dict[tuple[float, float], FairnessSettings] = {}

    def at(time: float) -> FairnessSettings:
        values = tuner.values_at(time)
        key = (values["bf"], values["w"])
        if key not in by_values:
            tunes_bf = any(r.tunable == "bf" for r in tuner.scheme.rules) if tuner.scheme else False
            policy = with_balance_factor(settings.policy, key[0]) if tunes_bf else settings.policy
            by_values[key] = FairnessSettings(policy, int(key[1]))
        return by_values[key]

    return at
def failure_list(
    settings: ReplaySettings, machine: Machine, jobs: list[TraceJob]
) -> list[FailureEvent] | None:
    """The replay's failures, sorted, or None without a failure source; every option is checked
    here, before any output is written."""
    check_rate("--sensitivity", settings.sensitivity)
    check_rate("--specificity", settings.specificity)
    if not settings.repair_time >= 0:
        raise InputError(f"--repair-time {settings.repair_time!r}: must be zero or more seconds")
    for option, value in (("--alpha", settings.alpha), ("--beta", settings.beta)):
        if not value >= 0:
            raise InputError(f"{option} {value!r}: must be a weight of zero or more")
    given = [name for name, value in (("--failure-log", settings.failure_log),
                                      ("--mtbf", settings.mtbf_hours),
                                      ("--weibull-scale", settings.weibull_scale))
             if value is not None]
    if len(given) > 1:
        raise InputError(f"{' and '.join(given)}: give one failure source, not several")
    if settings.failure_log is not None:
        from cobaltlite.faults.failure_log import read_failure_log

        return read_failure_log(settings.failure_log, machine)
    units = machine.failure_units()
    if settings.mtbf_hours is not None:
        from cobaltlite.faults.sources import scale_for_system_mtbf

        scale = scale_for_system_mtbf(settings.mtbf_hours, len(units), settings.weibull_shape)
    elif settings.weibull_scale is not None:
        scale = settings.weibull_scale
    else:
        return None
    from cobaltlite.faults.sources import (
        SPAN_AFTER_LAST_SUBMISSION,
        check_weibull,
        weibull_failures,
    )

    check_weibull(settings.weibull_shape, scale)
    if not jobs:
        return []
    first = min(job.submit_time for job in jobs)
    last = max(job.submit_time for job in jobs)
    return weibull_failures(units, settings.weibull_shape, scale, first,
                            last + SPAN_AFTER_LAST_SUBMISSION, settings.failure_seed)


def _write_atomically(path: Path, text: str) -> None:
    """Write beside the target and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
