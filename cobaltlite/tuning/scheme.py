"""Tuning schemes (seed 000 §3.4, Table 1): what may change, on which metric, and how far.

A scheme is a check interval C_i and one rule per tunable. A rule is the paper's tuple
⟨T, T_i, Δ, M, Th, E_p, E_m⟩ in its *level* form (docs/metric-aware.md, "Level rules"): T is
T_i + Δ while the event E_p holds ("M above Th" or "M below Th", strictly) and T_i otherwise
(E_m). Th is a number or the name of another metric (the §4.4.2 rule compares the 10-hour
utilization with the 24-hour one). Both values must lie inside the tunable's bounds.

In YAML (the `tuning:` section of cobaltlite.yaml, or a file given to `qsim --tuning`):

    tuning:
      check_interval: 1800          # C_i in seconds (default 1800, the paper's 30 min)
      rules:
        - example: bf-queue-depth   # a shipped rule, any field below overrides it
          threshold: 400
        - tunable: w
          initial: 1
          delta: 3
          metric: utilization_10h
          when: below
          threshold: utilization_24h

`tuning: 2d-adaptive` (or bf-adaptive, w-adaptive) names a shipped scheme.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cobaltlite.choices import EXAMPLE_SCHEMES, MAX_WINDOW
from cobaltlite.errors import InputError
from cobaltlite.metrics_monitor.series import MONITORED_METRICS

TUNABLE_BOUNDS: Mapping[str, tuple[float, float]] = {"bf": (0.0, 1.0), "w": (1, MAX_WINDOW)}
"""Each tunable's closed range: the balance factor BF and the allocation window W."""

DEFAULT_CHECK_INTERVAL = 1800.0


@dataclass(frozen=True)
class TuningRule:
    name: str
    tunable: str            # T
    initial: float          # T_i
    delta: float            # Δ
    metric: str             # M
    when: str               # E_p: "above" or "below"
    threshold: float | str  # Th: a number, or another metric's name

    @property
    def raised(self) -> float:
        """T while E_p holds."""
        return self.initial + self.delta

    def fires(self, metrics: Mapping[str, float]) -> bool:
        """Whether E_p holds for these metric values (strict: M equal to Th is E_m)."""
        value = metrics[self.metric]
        limit = metrics[self.threshold] if isinstance(self.threshold, str) else self.threshold
        return value > limit if self.when == "above" else value < limit


@dataclass(frozen=True)
class TuningScheme:
    name: str
    check_interval: float
    rules: tuple[TuningRule, ...]

    def describe(self) -> str:
        parts = [f"{r.tunable.upper()} = {_show(r.raised)} while {r.metric} {r.when} "
                 f"{_show(r.threshold)}, else {_show(r.initial)}" for r in self.rules]
        return f"{self.name} (every {self.check_interval:g} s): " + "; ".join(parts)


def _show(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


EXAMPLE_RULES: Mapping[str, TuningRule] = {
    # §4.4.1: BF = 0.5 while queue depth exceeds Th (1000 min on Intrepid, 400 min on SP2), else 1.
    "bf-queue-depth": TuningRule("bf-queue-depth", "bf", 1.0, -0.5, "queue_depth", "above",
                                 1000.0),
    # §4.4.2: W = 4 while the 10-hour utilization is below the 24-hour one, else 1.
    "w-utilization-trend": TuningRule("w-utilization-trend", "w", 1, 3, "utilization_10h",
                                      "below", "utilization_24h"),
}

_RULE_KEYS = ("example", "name", "tunable", "initial", "delta", "metric", "when", "threshold")


def example_scheme(name: str, threshold: float | None = None) -> TuningScheme:
    """A shipped scheme; `threshold` replaces the queue-depth rule's Th (minutes)."""
    if name not in EXAMPLE_SCHEMES:
        raise InputError(f"unknown tuning scheme {name!r}; shipped: {', '.join(EXAMPLE_SCHEMES)}")
    rules = [EXAMPLE_RULES[r] for r in EXAMPLE_SCHEMES[name]]
    if threshold is not None:
        rules = [replace(r, threshold=threshold) if r.metric == "queue_depth" else r
                 for r in rules]
    return TuningScheme(name, DEFAULT_CHECK_INTERVAL, tuple(rules))


def parse_scheme(data: object, where: str, lines: Mapping[tuple[Any, ...], int] | None = None
                 ) -> TuningScheme:
    """Check a `tuning:` value and build its scheme; InputError names `where` and the field."""
    lines = lines or {}

    def fail(path: tuple[Any, ...], message: str) -> InputError:
        # The deepest part of the path that has a line number locates the error.
        for cut in range(len(path), -1, -1):
            if path[:cut] in lines:
                return InputError(f"{where}:{lines[path[:cut]]}: {message}")
        return InputError(f"{where}: {message}")

    if isinstance(data, str):
        try:
            return example_scheme(data)
        except InputError as exc:
            raise fail((), str(exc)) from None
    if not isinstance(data, Mapping):
        raise fail((), "tuning: must be a mapping (check_interval, rules) or a shipped scheme "
                       f"name ({', '.join(EXAMPLE_SCHEMES)})")
    unknown = set(data) - {"check_interval", "rules", "name"}
    if unknown:
        raise fail((sorted(unknown)[0],), f"tuning: unknown key {sorted(unknown)[0]!r} "
                                          "(known: name, check_interval, rules)")
    interval = data.get("check_interval", DEFAULT_CHECK_INTERVAL)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
        raise fail(("check_interval",),
                   f"tuning.check_interval: {interval!r} is not a positive number of seconds")
    items = data.get("rules")
    if not isinstance(items, list) or not items:
        raise fail(("rules",), "tuning.rules: give a list of at least one rule")
    rules: list[TuningRule] = []
    for i, item in enumerate(items):
        rule = _parse_rule(item, lambda key, msg, i=i: fail(
            ("rules", i, key) if key else ("rules", i), f"tuning.rules[{i}]: {msg}"))
        if any(r.tunable == rule.tunable for r in rules):
            raise fail(("rules", i), f"tuning.rules[{i}]: a second rule for "
                                     f"{rule.tunable.upper()}; one rule per tunable")
        rules.append(rule)
    name = data.get("name", "+".join(r.name for r in rules))
    return TuningScheme(str(name), float(interval), tuple(rules))


def _parse_rule(item: object, fail: Any) -> TuningRule:
    if isinstance(item, str):
        item = {"example": item}
    if not isinstance(item, Mapping):
        raise fail(None, "a rule is a mapping or the name of a shipped rule "
                         f"({', '.join(EXAMPLE_RULES)})")
    unknown = set(item) - set(_RULE_KEYS)
    if unknown:
        key = sorted(unknown)[0]
        raise fail(key, f"unknown key {key!r} (known: {', '.join(_RULE_KEYS)})")
    fields: dict[str, Any] = {}
    if "example" in item:
        example = EXAMPLE_RULES.get(item["example"])
        if example is None:
            raise fail("example", f"unknown example {item['example']!r} "
                                  f"(shipped: {', '.join(EXAMPLE_RULES)})")
        fields.update(vars(example))
    fields.update({k: v for k, v in item.items() if k != "example"})
    missing = [k for k in _RULE_KEYS[2:] if k not in fields]
    if missing:
        raise fail(None, f"missing {', '.join(missing)}")
    tunable = str(fields["tunable"]).lower()
    if tunable not in TUNABLE_BOUNDS:
        raise fail("tunable", f"unknown tunable {fields['tunable']!r} (known: bf, w)")
    for key in ("metric", "threshold"):
        value = fields[key]
        if key == "threshold" and _is_number(value):
            continue
        if value not in MONITORED_METRICS:
            raise fail(key, f"{key}: unknown metric {value!r} "
                            f"(the monitor samples: {', '.join(MONITORED_METRICS)})")
    if fields["when"] not in ("above", "below"):
        raise fail("when", f"when: {fields['when']!r} must be 'above' or 'below'")
    for key in ("initial", "delta"):
        if not _is_number(fields[key]):
            raise fail(key, f"{key}: {fields[key]!r} is not a number")
    low, high = TUNABLE_BOUNDS[tunable]
    initial, delta = float(fields["initial"]), float(fields["delta"])
    for label, value in (("initial", initial), ("initial + delta", initial + delta)):
        if not low <= value <= high:
            raise fail("delta" if "delta" in label else "initial",
                       f"{label} = {value:g} leaves {tunable.upper()}'s bounds "
                       f"[{low:g}, {high:g}]")
        if tunable == "w" and value != int(value):
            raise fail("delta" if "delta" in label else "initial",
                       f"{label} = {value:g}: W is a whole number")
    threshold = fields["threshold"]
    return TuningRule(
        name=str(fields.get("name") or fields.get("example") or f"{tunable}-{fields['metric']}"),
        tunable=tunable, initial=initial, delta=delta, metric=str(fields["metric"]),
        when=str(fields["when"]),
        threshold=float(threshold) if _is_number(threshold) else str(threshold),
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_scheme_file(path: Path) -> TuningScheme:
    """Read a scheme from a YAML file: a `tuning:` section, or the scheme itself."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the tuning scheme: {exc.strerror or exc}") from None
    return parse_scheme_text(text, path)


def parse_scheme_text(text: str, path: Path) -> TuningScheme:
    """A scheme from the YAML `text` of the file `path` (a `tuning:` section, or the scheme
    itself); errors name `path` and the line. The scheduler daemon checks `schedctl --tuning`'s
    file with it, as read by the admin who sent it."""
    import yaml

    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML: {exc}") from None
    lines = _node_lines(node) if node is not None else {}
    if isinstance(data, Mapping) and "tuning" in data:
        return parse_tuning_section(path, data["tuning"], lines)
    return parse_scheme(data, str(path), lines)


def parse_tuning_section(path: Path, value: object,
                         lines: Mapping[tuple[Any, ...], int] | None = None) -> TuningScheme:
    """The `tuning:` section of a YAML file already read as `value` (cobaltlite.yaml); errors
    name `path` and the line."""
    if lines is None:
        import yaml

        node = yaml.compose(path.read_text())
        lines = _node_lines(node) if node is not None else {}
    inner = {key[1:]: line for key, line in lines.items() if key[:1] == ("tuning",)}
    return parse_scheme(value, str(path), inner)


def _node_lines(node: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Line (1-based) of every key and list item of a composed YAML document, by path."""
    import yaml

    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines.update(_node_lines(value, (*path, key.value)))
            lines[(*path, key.value)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            lines.update(_node_lines(value, (*path, i)))
    return lines
