"""An experiment file (YAML) and its expansion into one configuration per replay.

    name: lublin-balance                     # names the default output directory
    traces:                                  # every key but name/file is a ReplaySettings field
      - name: lublin                         # the label in the results (default: the file's stem)
        file: ../../../shared/traces/lublin_256.swf.gz   # relative to the experiment file
        arrival_scale: [1.0, 0.9]            # a list is a grid axis, a scalar a fixed value
    machines: [flat:256]
    policies:
      - fcfs
      - name: balanced
        params: {balance_factor: [0.0, 0.5, 1.0]}   # the policy's tunable parameters
    backfill: [easy, conservative]
    grid: {slowdown_bound: 10}               # any other ReplaySettings field
    repetitions: 1                           # or {count: 5, seed: FIELD}: FIELD = 0..4

Keys are mapped onto `ReplaySettings` by introspecting the dataclass (its fields and their types),
and policy parameters onto the policy function's tunables, so a field or tunable added later is
sweepable without touching this module. Every key, file, machine, policy and parameter is checked
when the file is loaded, before anything runs; the error names the file and the key.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import itertools
import json
import os
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.machine.catalog import load_description
from cobaltlite.moments import utc_timestamp
from cobaltlite.qsim.eet import ShareModel
from cobaltlite.qsim.replay import ReplaySettings, policy_named
from cobaltlite.scheduler.slack import SlackSettings
from cobaltlite.tuning.scheme import TuningScheme

TOP_KEYS = ("name", "description", "traces", "machines", "policies", "backfill", "grid",
            "repetitions")
SECTION_FIELDS = ("trace", "machine", "policy", "backfill", "out")
"""ReplaySettings fields the file sets through its own sections (or the sweep sets: out)."""
_DATE_FIELDS = ("start", "end")


def _type_hints() -> dict[str, Any]:
    """ReplaySettings' field types; a field whose annotation cannot be resolved here (a name
    imported only for type checking) keeps its text and takes values as written. replay.py
    imports the classes of its optional features only for type checking (a plain replay's
    start-up, issue 13): they are given here."""
    try:
        return typing.get_type_hints(ReplaySettings, localns={"ShareModel": ShareModel,
                                                              "SlackSettings": SlackSettings,
                                                              "TuningScheme": TuningScheme})
    except NameError:
        return {f.name: f.type for f in dataclasses.fields(ReplaySettings)}


_HINTS = _type_hints()
SETTING_FIELDS = tuple(f.name for f in dataclasses.fields(ReplaySettings)
                       if f.name not in SECTION_FIELDS)
"""The fields `grid:` and a trace entry may set: whatever ReplaySettings has today."""
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ReplaySettings)
             if f.default is not dataclasses.MISSING}


class ExperimentError(InputError):
    """The experiment file is wrong; the message names the file and the key."""


@dataclass(frozen=True)
class ReplayConfig:
    """One replay of the expanded grid: plain, picklable data that a Dask worker turns into
    ReplaySettings."""

    trace: str                      # the trace entry's label
    machine: str
    policy: str
    policy_options: tuple[tuple[str, Any], ...]
    utility_file: str | None
    settings: tuple[tuple[str, Any], ...]   # ReplaySettings fields beyond the sections, typed
    repetition: int

    def replay_settings(self, out: Path | None) -> ReplaySettings:
        policy = policy_named(self.policy, dict(self.policy_options),
                              Path(self.utility_file) if self.utility_file else None)
        fields = dict(self.settings)
        return ReplaySettings(trace=fields.pop("trace_file"), machine=self.machine, policy=policy,
                              backfill=fields.pop("backfill"), out=out, **fields)

    def columns(self, parameter_names: tuple[str, ...]) -> dict[str, Any]:
        """The configuration as table columns: plain JSON values, one column per setting and per
        policy parameter of the experiment (None where this replay's policy has none)."""
        options = dict(self.policy_options)
        row: dict[str, Any] = {"replay": self.replay_id, "trace": self.trace,
                               "machine": self.machine, "policy": self.policy}
        row.update({name: options.get(name) for name in parameter_names})
        settings = dict(self.settings)
        row["backfill"] = plain(settings["backfill"])
        for name in SETTING_FIELDS:
            row[name] = plain(settings.get(name, _DEFAULTS.get(name)))
        row["trace_file"] = plain(settings["trace_file"])
        row["utility_file"] = self.utility_file
        row["repetition"] = self.repetition
        return row

    @property
    def replay_id(self) -> str:
        """Stable across runs and edits of the file (it hashes the configuration, not a position),
        so a resumed sweep recognises its finished replays."""
        text = json.dumps([self.trace, self.machine, self.policy, self.policy_options,
                           self.utility_file, [(k, plain(v)) for k, v in self.settings],
                           self.repetition], sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return f"{self.policy}-{plain(dict(self.settings)['backfill'])}-{digest}"


@dataclass(frozen=True)
class Experiment:
    text: str                          # the file as read (a sweep keeps a copy)
    name: str
    configs: tuple[ReplayConfig, ...]
    parameter_names: tuple[str, ...]   # every policy parameter the experiment sets

    @functools.cached_property
    def swept(self) -> tuple[str, ...]:
        """The configuration columns that take more than one value: the axes of the plots."""
        rows = [c.columns(self.parameter_names) for c in self.configs]
        keys = [k for k in rows[0] if k not in ("replay", "repetition")] if rows else []
        return tuple(k for k in keys if len({json.dumps(r[k], default=str) for r in rows}) > 1)


def plain(value: Any) -> Any:
    """A setting as JSON data: enums by value, paths as text, structured settings as JSON text
    of their fields (one table column)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.dumps(dataclasses.asdict(value), sort_keys=True)
    return value


STDIN = Path("-")
"""The experiment file name that means standard input (its relative paths are relative to the
current directory)."""


def load_experiment(path: Path) -> Experiment:
    """Read, check and expand an experiment file; any mistake is an ExperimentError."""
    where = "<stdin>" if path == STDIN else str(path)
    try:
        text = sys.stdin.read() if path == STDIN else path.read_text()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise ExperimentError(f"{where}: cannot read the experiment file: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{where}: the file must be a mapping with the keys "
                              f"{', '.join(TOP_KEYS)}")
    _check_keys(data, TOP_KEYS, where, "")
    for required in ("traces", "machines", "policies"):
        if required not in data:
            raise ExperimentError(f"{where}: {required}: missing (required)")
    reader = _Reader(where, Path.cwd() if path == STDIN else path.resolve().parent)
    name = data.get("name", "experiment" if path == STDIN else path.stem)
    if not isinstance(name, str) or not name or "/" in name:
        raise ExperimentError(f"{where}: name: {name!r} must be a non-empty name without '/'")

    traces = [reader.trace(entry, f"traces[{i}]") for i, entry in enumerate(_list(
        data["traces"], where, "traces"))]
    machines = [reader.machine(m, f"machines[{i}]")
                for i, m in enumerate(_list(data["machines"], where, "machines"))]
    policies = [reader.policy(entry, f"policies[{i}]")
                for i, entry in enumerate(_list(data["policies"], where, "policies"))]
    backfill = [reader.setting("backfill", b, f"backfill[{i}]")
                for i, b in enumerate(_list(data.get("backfill", ["easy"]), where, "backfill"))]
    grid = data.get("grid") or {}
    if not isinstance(grid, dict):
        raise ExperimentError(f"{where}: grid: must map ReplaySettings fields to values")
    grid_axes = reader.axes(grid, "grid", SETTING_FIELDS)
    count, seed_field = reader.repetitions(data.get("repetitions", 1))

    configs: list[ReplayConfig] = []
    for (label, trace_axes), machine, (policy, option_axes, utility), bf in itertools.product(
        traces, machines, policies, backfill
    ):
        twice = set(trace_axes) & set(grid_axes)
        if twice:
            raise ExperimentError(f"{where}: grid.{min(twice)}: also set by trace {label!r}")
        for settings in _product({**trace_axes, **grid_axes}):
            for options in _product(option_axes):
                for repetition in range(count):
                    fields = {"backfill": bf, **settings}
                    if seed_field is not None:
                        fields[seed_field] = repetition
                    configs.append(ReplayConfig(
                        trace=label, machine=machine, policy=policy,
                        policy_options=tuple(sorted(options.items())), utility_file=utility,
                        settings=tuple(sorted(fields.items())), repetition=repetition))
    ids = [c.replay_id for c in configs]
    if len(set(ids)) != len(ids):
        raise ExperimentError(f"{where}: the grid names the same replay twice (a trace, machine "
                              "or policy listed twice?)")
    names = sorted({k for c in configs for k, _ in c.policy_options})
    clash = set(names) & {"replay", "trace", "machine", "policy", "repetition", *SETTING_FIELDS}
    if clash:
        raise ExperimentError(f"{where}: policies: parameter {min(clash)!r} has the name of a "
                              "configuration column")
    return Experiment(text, name, tuple(configs), tuple(names))


def _list(value: Any, where: str, key: str) -> list[Any]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ExperimentError(f"{where}: {key}: empty")
    return items


def _product(axes: Mapping[str, list[Any]]) -> Iterator[dict[str, Any]]:
    keys = sorted(axes)
    for values in itertools.product(*(axes[k] for k in keys)):
        yield dict(zip(keys, values, strict=True))


def _check_keys(data: Mapping[str, Any], allowed: typing.Iterable[str], where: str,
                prefix: str) -> None:
    allowed = tuple(allowed)
    for key in data:
        if key not in allowed:
            raise ExperimentError(f"{where}: {prefix}{key}: unknown key (known: "
                                  f"{', '.join(allowed)})")


class _Reader:
    """Checks and converts the parts of one experiment file, naming the file and key."""

    def __init__(self, where: str, base: Path) -> None:
        self.where = where
        self.base = base  # what relative file names are relative to
        self._machines_seen: set[tuple[str, str | None]] = set()

    def fail(self, key: str, message: str) -> ExperimentError:
        return ExperimentError(f"{self.where}: {key}: {message}")

    def file(self, value: Any, key: str) -> Path:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"{value!r} is not a file name")
        path = Path(os.path.expandvars(os.path.expanduser(value)))
        path = path if path.is_absolute() else self.base / path
        if not path.is_file():
            raise self.fail(key, f"{value}: no such file ({path})")
        return path.resolve()

    def trace(self, entry: Any, key: str) -> tuple[str, dict[str, list[Any]]]:
        if isinstance(entry, str):
            entry = {"file": entry}
        if not isinstance(entry, dict) or "file" not in entry:
            raise self.fail(key, "a trace is a file name or a mapping with file: and settings")
        _check_keys(entry, ("name", "file", *SETTING_FIELDS), self.where, f"{key}.")
        path = self.file(entry["file"], f"{key}.file")
        label = entry.get("name", path.name.split(".")[0])
        if not isinstance(label, str) or not label:
            raise self.fail(f"{key}.name", f"{label!r} is not a name")
        settings = {k: v for k, v in entry.items() if k not in ("name", "file")}
        axes = self.axes(settings, key, SETTING_FIELDS)
        axes["trace_file"] = [path]
        return label, axes

    def machine(self, spec: Any, key: str) -> str:
        if not isinstance(spec, str):
            raise self.fail(key, f"{spec!r} is not a machine (intrepid, flat:N[:PPN] or a file)")
        if ":" not in spec and spec != "intrepid":
            spec = str(self.file(spec, key))
        try:
            load_description(spec)
        except CobaltliteError as exc:
            raise self.fail(key, str(exc)) from None
        return spec

    def policy(self, entry: Any, key: str) -> tuple[str, dict[str, list[Any]], str | None]:
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise self.fail(key, "a policy is a name or a mapping with name:, params:, "
                            "utility_file:")
        _check_keys(entry, ("name", "params", "utility_file"), self.where, f"{key}.")
        utility = (self.file(entry["utility_file"], f"{key}.utility_file")
                   if "utility_file" in entry else None)
        params = entry.get("params") or {}
        if not isinstance(params, dict):
            raise self.fail(f"{key}.params", "must map the policy's parameters to values")
        axes = {name: _list(values, self.where, f"{key}.params.{name}")
                for name, values in params.items()}
        # Build the policy as the worker will: an unknown policy or parameter, or a value the
        # policy refuses, is found now (the policy's own message lists its tunables).
        try:
            policy_named(entry["name"], {}, utility)
        except CobaltliteError as exc:
            raise self.fail(f"{key}.name", str(exc)) from None
        for options in _product(axes):
            try:
                policy_named(entry["name"], options, utility)
            except CobaltliteError as exc:
                named = [n for n in sorted(params) if re.search(rf"\b{re.escape(n)}\b", str(exc))]
                raise self.fail(f"{key}.params" + (f".{named[0]}" if named else ""),
                                str(exc)) from None
        return entry["name"], axes, str(utility) if utility else None

    def repetitions(self, value: Any) -> tuple[int, str | None]:
        """(count, the setting that takes the repetition's number as its seed, if any)."""
        seed = None
        if isinstance(value, dict):
            _check_keys(value, ("count", "seed"), self.where, "repetitions.")
            seed = value.get("seed")
            if seed is not None and (seed not in SETTING_FIELDS or _HINTS[seed] not in (
                    int, int | None)):
                raise self.fail("repetitions.seed", f"{seed!r} is not an integer field of "
                                "ReplaySettings")
            value = value.get("count", 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail("repetitions", f"{value!r} is not a whole number >= 1")
        return value, seed

    def axes(self, values: Mapping[str, Any], key: str,
             allowed: tuple[str, ...]) -> dict[str, list[Any]]:
        _check_keys(values, allowed, self.where, f"{key}.")
        return {name: [self.setting(name, v, f"{key}.{name}")
                       for v in _list(value, self.where, f"{key}.{name}")]
                for name, value in values.items()}

    def setting(self, name: str, value: Any, key: str) -> Any:
        """`value` converted to the type ReplaySettings declares for `name`."""
        hint = _HINTS[name]
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if value is None:
            if type(None) in options:
                return None
            raise self.fail(key, "may not be empty")
        for option in options:
            converted = self._convert(name, key, value, option)
            if converted is not _NO:
                return converted
        wanted = " or ".join(getattr(o, "__name__", str(o)) for o in options)
        raise self.fail(key, f"{value!r} is not a {wanted}")

    def _convert(self, name: str, key: str, value: Any, option: Any) -> Any:
        if option is type(None):
            return _NO
        if option is bool:
            return value if isinstance(value, bool) else _NO
        if isinstance(value, bool):
            return _NO  # YAML's yes/no is never a number or a name
        if option is int:
            return value if isinstance(value, int) else _NO
        if option is float:
            if isinstance(value, int | float):
                return float(value)
            if name in _DATE_FIELDS:
                return _epoch(value)
            return _NO
        if option is str:
            return value if isinstance(value, str) else _NO
        if option is Path:
            return self.file(value, key) if isinstance(value, str) else _NO
        if isinstance(option, type) and issubclass(option, enum.Enum):
            try:
                return option(value)
            except ValueError:
                return _NO
        container = typing.get_origin(option)
        if container in (list, dict):
            # A list or mapping setting: one value is written as [[...]] (a plain list is an axis).
            return value if isinstance(value, container) else _NO
        if isinstance(option, type):
            # A structured setting (a class of its own): a mapping if the class reads one
            # (`from_mapping`, checked now), else only a value of that class would do, and YAML
            # cannot write one, so say so now rather than fail in every replay.
            if isinstance(value, option):
                return value
            if isinstance(value, Mapping) and hasattr(option, "from_mapping"):
                try:
                    return option.from_mapping(value)
                except ValueError as exc:
                    raise self.fail(key, str(exc)) from None
            raise self.fail(key, f"{option.__name__} values cannot be given in an experiment "
                            "file (only numbers, text, booleans, files and choices)")
        return value  # an annotation this module cannot resolve: the replay checks the value


_NO = object()


def _epoch(value: Any) -> Any:
    """Epoch seconds of a YAML date, date-time or ISO text (UTC unless it says otherwise)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return _NO
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        return _NO
    return utc_timestamp(value)
