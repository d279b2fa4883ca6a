"""Adaptive policy tuning (seed 000 §3.4): rules' level and edge behaviour, pins, bad schemes, and
the tuner driving a real replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_golden_schedules import flat, job

from cobaltlite.errors import InputError
from cobaltlite.policy.utility import PolicyError, builtin_policy
from cobaltlite.qsim import cli
from cobaltlite.qsim.engine import Qsim
from cobaltlite.scheduler.scheduler import MAX_WINDOW, Backfill
from cobaltlite.tuning.qsim import QsimTuning
from cobaltlite.tuning.scheme import (
    EXAMPLE_RULES,
    example_scheme,
    load_scheme_file,
    parse_scheme,
)
from cobaltlite.tuning.tuner import Tuner

METRICS = {"queue_depth": 0.0, "queued_jobs": 0.0, "utilization": 0.5,
           "utilization_1h": 0.5, "utilization_10h": 0.5, "utilization_24h": 0.5}


def metrics(**values: float) -> dict[str, float]:
    return {**METRICS, **values}


# ---- rules ----------------------------------------------------------------------------------


def test_bf_rule_is_a_level_rule_and_the_threshold_itself_is_below_it():
    tuner = Tuner(example_scheme("bf-adaptive", threshold=400), start=0)
    assert tuner.values["bf"] == 1.0
    assert not tuner.due(1799) and tuner.due(1800)
    assert tuner.check(1800, metrics(queue_depth=400)) == []       # equal: E_m, BF stays 1
    [change] = tuner.check(3600, metrics(queue_depth=400.5))        # above: BF = 0.5
    assert (change.tunable, change.old, change.new) == ("bf", 1.0, 0.5)
    assert change.metrics == {"queue_depth": 400.5}
    assert "bf-queue-depth" in change.reason() and "queue_depth=400.5" in change.reason()
    assert tuner.check(5400, metrics(queue_depth=9000)) == []       # still above: no new change
    assert tuner.values["bf"] == 0.5                                # a level, not another -Δ
    [back] = tuner.check(7200, metrics(queue_depth=10))
    assert (back.old, back.new) == (0.5, 1.0)


def test_w_rule_compares_two_metrics():
    tuner = Tuner(example_scheme("w-adaptive"), start=0)
    assert tuner.check(1800, metrics(utilization_10h=0.6, utilization_24h=0.6)) == []
    [change] = tuner.check(3600, metrics(utilization_10h=0.59, utilization_24h=0.6))
    assert (change.tunable, change.new) == ("w", 4)
    assert change.metrics == {"utilization_10h": 0.59, "utilization_24h": 0.6}
    [back] = tuner.check(5400, metrics(utilization_10h=0.7, utilization_24h=0.6))
    assert back.new == 1


def test_2d_scheme_moves_both_and_values_at_replays_the_log():
    tuner = Tuner(example_scheme("2d-adaptive"), start=0)
    tuner.check(1800, metrics(queue_depth=2000, utilization_10h=0.1, utilization_24h=0.2))
    tuner.check(3600, metrics(queue_depth=0, utilization_10h=0.1, utilization_24h=0.2))
    assert tuner.values_at(0) == {"bf": 1.0, "w": 1}
    assert tuner.values_at(1800) == {"bf": 0.5, "w": 4}   # a check runs before its pass
    assert tuner.values_at(3600) == {"bf": 1.0, "w": 4}


def test_a_pin_holds_against_the_rule_and_its_release_returns_to_the_rule():
    tuner = Tuner(example_scheme("bf-adaptive"), start=0)
    [pinned] = tuner.pin(10, "bf", 0.25)
    assert pinned.cause == "pinned by an admin"
    assert tuner.check(1800, metrics(queue_depth=5000)) == []
    assert tuner.values["bf"] == 0.25
    [released] = tuner.unpin(1900, "bf")
    assert (released.old, released.new, released.cause) == (0.25, 0.5, "pin released")
    with pytest.raises(ValueError, match=r"outside W's bounds \[1, 6\]"):
        tuner.pin(2000, "w", 12)


# ---- bad schemes ------------------------------------------------------------------------------


def scheme_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "scheme.yaml"
    path.write_text(body)
    return path


@pytest.mark.parametrize(("rule", "line", "message"), [
    ("      metric: queue_lenght\n", 7, "unknown metric 'queue_lenght'"),
    ("      tunable: alpha\n", 4, "unknown tunable 'alpha'"),
    ("      threshold: bogus\n", 9, "unknown metric 'bogus'"),
    ("      when: sideways\n", 8, "must be 'above' or 'below'"),
])
def test_bad_rule_fields_name_the_file_and_line(tmp_path, rule, line, message):
    fields = {"tunable": "      tunable: bf\n", "initial": "      initial: 1\n",
              "delta": "      delta: -0.5\n", "metric": "      metric: queue_depth\n",
              "when": "      when: above\n", "threshold": "      threshold: 400\n"}
    key = rule.split(":")[0].strip()
    fields[key] = rule
    body = "tuning:\n  rules:\n    - name: mine\n" + "".join(fields.values())
    path = scheme_file(tmp_path, body)
    with pytest.raises(InputError, match=message) as caught:
        load_scheme_file(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), caught.value


@pytest.mark.parametrize(("initial", "delta", "message"), [
    (0, 3, r"initial = 0 leaves W's bounds \[1, 6\]"),
    (1, 11, r"initial \+ delta = 12 leaves W's bounds \[1, 6\]"),
    (4, -4, r"initial \+ delta = 0 leaves W's bounds"),
])
def test_a_window_outside_its_bounds_is_refused_at_load_time(initial, delta, message):
    rule = {"tunable": "w", "initial": initial, "delta": delta, "metric": "utilization",
            "when": "below", "threshold": 0.5}
    with pytest.raises(InputError, match=message):
        parse_scheme({"rules": [rule]}, "cobaltlite.yaml")


def test_a_delta_that_leaves_bf_bounds_is_refused():
    with pytest.raises(InputError, match=r"initial \+ delta = 1.5 leaves BF's bounds \[0, 1\]"):
        parse_scheme({"rules": [{"example": "bf-queue-depth", "delta": 0.5}]}, "x.yaml")


def test_other_bad_schemes():
    with pytest.raises(InputError, match="second rule for BF"):
        parse_scheme({"rules": ["bf-queue-depth", "bf-queue-depth"]}, "x.yaml")
    with pytest.raises(InputError, match="unknown tuning scheme '3d-adaptive'"):
        parse_scheme("3d-adaptive", "x.yaml")
    with pytest.raises(InputError, match="unknown key 'interval'"):
        parse_scheme({"interval": 5, "rules": ["bf-queue-depth"]}, "x.yaml")
    with pytest.raises(InputError, match="check_interval: 0 is not a positive"):
        parse_scheme({"check_interval": 0, "rules": ["bf-queue-depth"]}, "x.yaml")
    with pytest.raises(InputError, match="missing"):
        parse_scheme({"rules": [{"tunable": "bf"}]}, "x.yaml")


def test_a_file_scheme_overrides_a_shipped_rule(tmp_path):
    path = scheme_file(tmp_path, "check_interval: 600\nrules:\n  - example: bf-queue-depth\n"
                                 "    threshold: 400\n  - w-utilization-trend\n")
    scheme = load_scheme_file(path)
    assert scheme.check_interval == 600
    assert scheme.rules[0].threshold == 400 and scheme.rules[0].delta == -0.5
    assert scheme.rules[1] == EXAMPLE_RULES["w-utilization-trend"]
    assert f"W = {MAX_WINDOW - 2:g}" in scheme.describe()


def test_qsim_refuses_a_bad_scheme_before_replaying(tmp_path, capsys):
    path = scheme_file(tmp_path, "tuning:\n  rules:\n    - example: w-utilization-trend\n"
                                 "      delta: 11\n")
    trace = tmp_path / "t.swf"
    trace.write_text("1 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 1 1 -1 -1\n")
    code = cli.main(["--trace", str(trace), "--machine", "flat:4", "--tuning", str(path),
                     "--out", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{path}:4: tuning.rules[0]: initial + delta = 12 leaves W's bounds" in err
    assert not (tmp_path / "out" / "summary.json").exists()


def test_tuning_bf_needs_the_balanced_policy():
    qsim = Qsim([job(1, 0, 10, 1)], flat(1), builtin_policy("fcfs"), Backfill.EASY)
    with pytest.raises(PolicyError, match="use --policy balanced"):
        QsimTuning(qsim, example_scheme("bf-adaptive"))


# ---- in a replay ------------------------------------------------------------------------------


def test_queue_depth_switches_bf_and_the_start_order_follows():
    # flat:1. J1 (600 s) runs from 0; J2 (500 s) arrives at 1, J3 (10 s) at 2.
    # Without tuning (BF 1, FCFS): J2 at 600, J3 at 1100.
    # With BF 0.5 while queue depth > 5 min, checked every 300 s: the check before the pass at
    # t=600 sees (599 + 598) s = 19.95 min -> BF 0.5. Scores: J2 0.5·100 + 0.5·0 = 50,
    # J3 0.5·(100·598/599) + 0.5·100 = 99.9 -> J3 at 600, J2 at 610. At t=1110 (J2 ends) the
    # queue is empty -> BF back to 1.
    jobs = [job(1, 0, 600, 1), job(2, 1, 500, 1), job(3, 2, 10, 1)]
    plain = Qsim(jobs, flat(1), builtin_policy("balanced"), Backfill.EASY).run()
    assert {o.jobid: o.start_time for o in plain.outcomes} == {1: 0, 2: 600, 3: 1100}

    scheme = parse_scheme({"check_interval": 300,
                           "rules": [{"example": "bf-queue-depth", "threshold": 5}]}, "test")
    qsim = Qsim(jobs, flat(1), builtin_policy("balanced"), Backfill.EASY)
    tuning = QsimTuning(qsim, scheme)
    result = qsim.run()
    assert {o.jobid: o.start_time for o in result.outcomes} == {1: 0, 2: 610, 3: 600}
    first, second = tuning.tuner.changes
    assert (first.time, first.old, first.new) == (600, 1.0, 0.5)
    assert first.metrics["queue_depth"] == pytest.approx(19.95)
    assert (second.time, second.new, second.metrics["queue_depth"]) == (1110, 1.0, 0.0)


def test_the_instance_config_reads_a_tuning_section_and_names_a_bad_line(tmp_path):
    from cobaltlite.config import load_config

    (tmp_path / "cobaltlite.yaml").write_text(
        "machine: flat:4\ntuning:\n  check_interval: 60\n  rules:\n    - w-utilization-trend\n")
    scheme = load_config(tmp_path).tuning
    assert scheme is not None and scheme.check_interval == 60
    assert scheme.rules[0].name == "w-utilization-trend"
    (tmp_path / "cobaltlite.yaml").write_text(
        "machine: flat:4\ntuning:\n  rules:\n    - example: w-utilization-trend\n"
        "      metric: load\n")
    with pytest.raises(InputError, match=r"cobaltlite.yaml:5: .*unknown metric 'load'"):
        load_config(tmp_path)


def test_qsim_reports_the_seed_000_metrics_and_says_which_fair_start_it_used(tmp_path, capsys):
    import json

    trace = tmp_path / "t.swf"
    trace.write_text("1 0 0 100 4 -1 -1 4 100 -1 1 1 1 1 1 1 -1 -1\n"
                     "2 10 0 50 2 -1 -1 2 50 -1 1 1 1 1 1 1 -1 -1\n"
                     "3 20 0 10 1 -1 -1 1 10 -1 1 1 1 1 1 1 -1 -1\n")
    out = tmp_path / "out"
    code = cli.main(["--trace", str(trace), "--machine", "flat:4", "--policy", "balanced",
                     "--window", "2", "--tuning", "2d-adaptive", "--fair-start", "estimate",
                     "--out", str(out), "--markdown", "-q"])
    shown = capsys.readouterr().out
    assert code == 0
    assert "| unfair jobs |" in shown and "| mean queue depth |" in shown
    assert "Unfair jobs: fair start time by estimate" in shown
    summary = json.loads((out / "summary.json").read_text())
    assert summary["window"] == 2
    assert summary["tuning"]["scheme"].startswith("2d-adaptive")
    metrics = summary["metrics"]
    assert metrics["fair_start_method"] == "estimate" and metrics["unfair_jobs"] == 0
    assert set(metrics["series"]) >= {"hours", "queue_depth", "utilization_24h"}


def test_qsim_refuses_a_window_of_zero_or_twelve(capsys):
    for bad in ("0", "12"):
        with pytest.raises(SystemExit):
            cli.main(["--trace", "x.swf", "--machine", "flat:4", "--window", bad])
        assert "from 1 to 6" in capsys.readouterr().err
