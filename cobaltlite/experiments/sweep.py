"""`qsim sweep`: an experiment's replays as dask.distributed tasks, one tidy row per replay.

The output directory (DIR):

    DIR/experiment.yaml            the experiment file this sweep ran
    DIR/sweep.json                 its name and swept columns (for `qsim report`)
    DIR/replays/ID/summary.json    written by `replay()` on the worker, as `qsim --out` writes it
    DIR/replays/ID/accounting.log  the replay's job log (what `qsim report` draws)
    DIR/replays/ID/row.json        the replay's row, written by the client once the replay is done
    DIR/results.parquet (or .csv)  one row per finished replay: configuration + every metric
    DIR/failures.json              the replays that failed: configuration and error (if any)

Resuming: row.json is written atomically after summary.json, so its presence means "finished";
a sweep run again on the same DIR skips those replays (their files are not touched) and runs the
others. Replay ids hash the configuration, so editing the file (another grid value) keeps the
finished replays that are still in it. The results table is rebuilt from the row files at the
end of every run, also after Ctrl-C.

Each trace file is read once per distinct reading setup by a Dask task whose result every replay
of that file takes as input (the window and the arrival scaling are applied per replay, to
copies). The reading setup is every ReplaySettings field except those known to act after reading
(the window, backfill, slowdown bound): a field added later splits the sharing rather than mixing
two readings. The workers write the replay outputs, so with `--scheduler` DIR must be on a file
system the workers share.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cobaltlite.errors import InputError
from cobaltlite.experiments.spec import Experiment, ReplayConfig
from cobaltlite.machine.catalog import load_description
from cobaltlite.qsim.replay import (
    WINDOW_FIELDS,
    _write_atomically,
    processors_per_node,
    read_whole_trace,
    replay,
)
from cobaltlite.traces.model import TraceReadResult

TABLE_FORMATS = ("parquet", "csv")
SWEEP_INFO = "sweep.json"
"""Beside the results: the experiment's name and its swept columns (what `qsim report` plots)."""
# Settings that act after the trace is read (select_window, the scheduler and its window, the
# metrics, tuning, the machine's allocation cost and its failures): replays differing only in
# these share one read. Any other setting, a field added later included, is part of the
# reading's key: it costs at worst one more read, never one reading shared by replays that
# should read differently.
_AFTER_READING = frozenset((
    *WINDOW_FIELDS, "backfill", "slowdown_bound", "alpha", "beta", "failure_log", "mtbf_hours",
    "weibull_scale", "weibull_shape", "failure_seed", "repair_time", "predictor", "sensitivity",
    "specificity", "window", "tuning", "fair_start",
))
_SUMMARY_COUNTS = ("jobs_skipped_reading", "jobs_skipped_unplaceable", "scheduling_passes")


@dataclass
class SweepOutcome:
    total: int
    reused: int                      # finished by an earlier run, not recomputed
    ran: int
    failures: list[dict[str, Any]] = field(default_factory=list)
    table: Path | None = None


def replay_dir(out: Path, config: ReplayConfig) -> Path:
    return out / "replays" / config.replay_id


def table_path(out: Path, table_format: str) -> Path:
    return out / f"results.{table_format}"


# ---- the tasks (run on the workers) --------------------------------------------------------


def read_shared_trace(config: ReplayConfig, ppn: int) -> TraceReadResult:
    return read_whole_trace(config.replay_settings(None), ppn)


def run_replay(config: ReplayConfig, whole_trace: TraceReadResult, out: str) -> dict[str, Any]:
    """One replay through `replay()`, as `qsim --out` runs it; returns its metric columns."""
    report = replay(config.replay_settings(Path(out)), whole_trace=whole_trace)
    summary = report.summary()
    columns = flatten(report.metrics)
    columns.update({key: summary[key] for key in _SUMMARY_COUNTS})
    return columns


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested metrics as flat columns: {"wait": {"mean": 3}} -> "wait.mean"; a list of named
    categories -> "by_length.Short.mean_wait"; any other list as JSON text."""
    columns: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            columns.update(flatten(value, f"{name}."))
        elif isinstance(value, list) and all(isinstance(v, Mapping) and "name" in v
                                             for v in value):
            for item in value:
                rest = {k: v for k, v in item.items() if k not in ("name", "max")}
                columns.update(flatten(rest, f"{name}.{item['name']}."))
        elif isinstance(value, list):
            columns[name] = json.dumps(value)
        else:
            columns[name] = value
    return columns


# ---- the client ----------------------------------------------------------------------------


def run_sweep(
    experiment: Experiment,
    out: Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    table_format: str = "parquet",
    console: Console | None = None,
    show_progress: bool = True,
) -> SweepOutcome:
    if table_format not in TABLE_FORMATS:
        raise InputError(f"--table {table_format!r}: choose one of {', '.join(TABLE_FORMATS)}")
    console = console or Console(stderr=True)
    out.mkdir(parents=True, exist_ok=True)
    _write_atomically(out / "experiment.yaml", experiment.text)
    info = {"name": experiment.name, "swept": [*experiment.swept, "repetition"],
            "policy_parameters": list(experiment.parameter_names)}
    _write_atomically(out / SWEEP_INFO, json.dumps(info, indent=2) + "\n")
    pending = [c for c in experiment.configs if not (replay_dir(out, c) / "row.json").is_file()]
    outcome = SweepOutcome(len(experiment.configs), len(experiment.configs) - len(pending), 0)
    if outcome.reused:
        console.print(f"qsim sweep: {outcome.reused} of {outcome.total} replays already done in "
                      f"{out}; running the other {len(pending)}", markup=False, highlight=False)
    try:
        if pending:
            with _dask_client(scheduler, workers) as client:
                _run_pending(client, experiment, pending, out, outcome, console, show_progress)
    finally:
        outcome.table = write_results(experiment, out, table_format)
        failures = out / "failures.json"
        if outcome.failures:
            _write_atomically(failures, json.dumps(outcome.failures, indent=2) + "\n")
        else:
            failures.unlink(missing_ok=True)
    return outcome


def _run_pending(client: Any, experiment: Experiment, pending: list[ReplayConfig], out: Path,
                 outcome: SweepOutcome, console: Console, show_progress: bool) -> None:
    from dask.distributed import as_completed

    run = uuid.uuid4().hex[:8]  # task keys unique to this run, even on a long-lived cluster
    readings: dict[str, Any] = {}
    tasks: dict[Any, ReplayConfig] = {}
    descriptions: dict[tuple[str, str | None], Any] = {}
    for config in pending:
        ppn, key = _reading(config, descriptions)
        if key not in readings:
            readings[key] = client.submit(read_shared_trace, config, ppn, pure=False,
                                          key=f"read-{config.trace}-{len(readings)}-{run}")
        target = replay_dir(out, config)
        tasks[client.submit(run_replay, config, readings[key], str(target), pure=False,
                            key=f"replay-{config.replay_id}-{run}")] = config
    progress = Progress(TextColumn("replays"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=True,
                        disable=not show_progress)
    with progress:
        bar = progress.add_task("sweep", total=len(tasks))
        try:
            for future in as_completed(tasks):
                config = tasks.pop(future)
                columns = config.columns(experiment.parameter_names)
                if future.status == "error":
                    error = future.exception()
                    message = f"{type(error).__name__}: {error}"
                    outcome.failures.append({"configuration": columns, "error": message})
                    console.print(f"qsim sweep: replay {config.replay_id} failed: {message}\n"
                                  f"  configuration: {_describe(columns, experiment)}",
                                  markup=False, highlight=False)
                else:
                    row = {**columns, **{k: v for k, v in future.result().items()
                                         if k not in columns}}
                    _write_atomically(replay_dir(out, config) / "row.json",
                                      json.dumps(row) + "\n")
                    outcome.ran += 1
                progress.advance(bar)
        finally:
            client.cancel(list(tasks))


def _reading(config: ReplayConfig, descriptions: dict[tuple[str, str | None], Any]
             ) -> tuple[int, str]:
    """(processors per node, the key of the trace reading this replay can share);
    `descriptions` keeps each machine loaded once (the Intrepid table takes a while)."""
    settings = config.replay_settings(None)
    machine = (settings.machine, settings.schedulable)
    if machine not in descriptions:
        descriptions[machine] = load_description(settings.machine,
                                                 schedulable=settings.schedulable)
    ppn = processors_per_node(settings, descriptions[machine])
    fields = {k: str(v) for k, v in config.settings if k not in _AFTER_READING}
    return ppn, json.dumps([ppn, fields], sort_keys=True)


def _describe(columns: Mapping[str, Any], experiment: Experiment) -> str:
    keys = ("trace", "machine", "policy", *experiment.swept, "repetition")
    return ", ".join(f"{k}={columns[k]}" for k in dict.fromkeys(keys) if k in columns)


@contextmanager
def _dask_client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A client of the given scheduler, or of a LocalCluster of `workers` single-threaded worker
    processes (replays are pure Python: threads would share one GIL). Dask is imported here so
    a plain `qsim --trace ...` never pays for it."""
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise InputError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
        with client:
            yield client
        return
    # The scheduler's HTTP endpoint on any free port: the default 8787 clashes with every other
    # LocalCluster on the machine. Dask's own logs are silenced below CRITICAL: a replay's error
    # comes back through its future and the sweep reports it (failures.json and stderr), and
    # what dask alone logs at ERROR is the race of a worker's heartbeat with the scheduler's
    # shutdown (distributed issue 7192), a traceback after every replay succeeded.
    with LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                      processes=True, dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        yield client


# ---- the results table ---------------------------------------------------------------------


def load_rows(experiment: Experiment, out: Path) -> list[dict[str, Any]]:
    """The finished replays' rows, in the experiment's order."""
    rows = []
    for config in experiment.configs:
        path = replay_dir(out, config) / "row.json"
        if path.is_file():
            rows.append(json.loads(path.read_text()))
    return rows


def write_results(experiment: Experiment, out: Path, table_format: str) -> Path | None:
    rows = load_rows(experiment, out)
    if not rows:
        return None
    path = table_path(out, table_format)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    tmp = path.with_name(path.name + ".tmp")
    if table_format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows]),
                       tmp)
    else:
        import csv

        with tmp.open("w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
    tmp.replace(path)
    return path


def read_results(path: Path) -> list[dict[str, Any]]:
    """A results table back as rows (CSV values come back as text; see `report`)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        return rows
    import csv

    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))

