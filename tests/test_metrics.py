"""Replay metrics (cobaltlite.qsim.metrics) on hand-computed cases, edge cases and properties."""

from __future__ import annotations

import io
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cobaltlite.qsim.metrics import (
    compare_metrics,
    compute_metrics,
    human_duration,
    loss_of_capacity,
    metrics_markdown,
    print_metrics,
)
from cobaltlite.qsim.outcome import CapacitySample, CapacitySamples, JobOutcome


def job(
    jobid: int, submit: float, start: float, end: float, nodes: int = 1,
    allocated: int | None = None, killed: bool = False,
) -> JobOutcome:
    return JobOutcome(jobid, submit, start, end, nodes, nodes if allocated is None else allocated,
                      requested_time=end - start, location="0", killed=killed)


# Four jobs on a 10-node machine; allocations never exceed 10 nodes at once:
#   id submit start  end nodes alloc | wait resp run | bounded slowdown (bound 10 s)
#   1     0     0   100    2     2   |    0  100 100 | max(1, 100/100)        = 1
#   2     0   100   102    2     4   |  100  102   2 | max(1, 102/max(2, 10)) = 10.2 (51 unbounded)
#   3    50   100   400    4     4   |   50  350 300 | 350/300                = 1.1666…
#   4   100   400  1000    5     8   |  300  900 600 | 900/600                = 1.5
FOUR = [
    job(1, 0, 0, 100, 2, 2),
    job(2, 0, 100, 102, 2, 4),
    job(3, 50, 100, 400, 4, 4, killed=True),
    job(4, 100, 400, 1000, 5, 8),
]


def test_wait_response_slowdown_by_hand() -> None:
    m = compute_metrics(FOUR, [], 10)
    assert (m["jobs"], m["killed"]) == (4, 1)
    # p90 interpolates between closest ranks: position 0.9 * (4 - 1) = 2.7 in the sorted values.
    # waits 0 50 100 300: mean 450/4, median (50+100)/2, p90 100 + 0.7*(300-100)
    assert m["wait"] == {"mean": 112.5, "median": 75.0, "p90": 240.0, "max": 300.0}
    # responses 100 102 350 900: mean 1452/4, median (102+350)/2, p90 350 + 0.7*550
    assert m["response"] == {"mean": 363.0, "median": 226.0, "p90": 735.0, "max": 900.0}
    # run times 2 100 300 600: mean 1002/4, median (100+300)/2, p90 300 + 0.7*300
    assert m["run_time"] == {"mean": 250.5, "median": 200.0, "p90": 510.0, "max": 600.0}
    # slowdowns 1 1.1667 1.5 10.2: mean 13.8667/4, median (1.1667+1.5)/2, p90 1.5 + 0.7*8.7
    assert m["bounded_slowdown"] == {"mean": 3.466667, "median": 1.333333, "p90": 7.59,
                                     "max": 10.2}


def test_slowdown_bound_is_a_parameter() -> None:
    # With a 1 s bound the 2-second job 2 counts fully: 102 / 2 = 51.
    m = compute_metrics(FOUR, [], 10, slowdown_bound=1.0)
    assert m["bounded_slowdown"]["max"] == 51.0
    assert m["slowdown_bound"] == 1.0


def test_slowdown_is_never_below_one() -> None:
    # A 3 s job that waited 0: response 3 / max(3, 10) = 0.3, clamped to 1.
    m = compute_metrics([job(1, 0, 0, 3)], [], 1)
    assert m["bounded_slowdown"]["max"] == 1.0


def test_utilization_and_makespan_by_hand() -> None:
    m = compute_metrics(FOUR, [], 10)
    # Makespan: first submit 0 to last end 1000.
    assert m["makespan"] == 1000.0
    assert (m["first_submit"], m["last_end"]) == (0, 1000)
    # Allocated node-seconds 2*100 + 4*2 + 4*300 + 8*600 = 6208 over 10 nodes * 1000 s.
    assert m["utilization"] == 0.6208
    # Requested node-seconds 2*100 + 2*2 + 4*300 + 5*600 = 4404.
    assert m["useful_utilization"] == 0.4404


def test_loss_of_capacity_by_hand() -> None:
    samples = [
        CapacitySample(0, 6, True),     # 6 idle * (10 - 0)  * 1 = 60
        CapacitySample(10, 4, False),   # 4 idle * (30 - 10) * 0 = 0
        CapacitySample(30, 2, True),    # 2 idle * (40 - 30) * 1 = 20
        CapacitySample(40, 0, False),   # 0 idle * (100 - 40) * 0 = 0
        CapacitySample(100, 10, True),  # the last event opens no interval: not counted
    ]
    # LoC = (60 + 0 + 20 + 0) / (10 nodes * (100 - 0)) = 80 / 1000
    assert loss_of_capacity(samples, 10) == 0.08
    assert compute_metrics(FOUR, samples, 10)["loss_of_capacity"] == 0.08


def test_loss_of_capacity_undefined_without_a_span() -> None:
    assert loss_of_capacity([], 10) is None
    assert loss_of_capacity([CapacitySample(5, 3, True)], 10) is None
    assert loss_of_capacity([CapacitySample(5, 3, True), CapacitySample(5, 3, True)], 10) is None


@given(st.lists(st.tuples(st.one_of(st.integers(0, 2**40), st.floats(0, 1e9)),
                          st.integers(0, 40960), st.booleans()), max_size=30))
def test_capacity_columns_read_back_as_samples(raw: list[tuple[float, int, bool]]) -> None:
    """Qsim keeps its samples as columns: they read back as the samples, times as floats, and
    loss of capacity is the same from either."""
    raw.sort(key=lambda r: r[0])
    samples = [CapacitySample(*r) for r in raw]
    columns = CapacitySamples(samples)
    assert len(columns) == len(samples)
    assert list(columns) == [CapacitySample(float(t), n, f) for t, n, f in raw]
    assert columns == CapacitySamples(list(columns))
    assert loss_of_capacity(columns, 40960) == loss_of_capacity(samples, 40960)


def test_loss_of_capacity_rejects_samples_out_of_order() -> None:
    with pytest.raises(ValueError, match="out of time order"):
        loss_of_capacity([CapacitySample(5, 3, True), CapacitySample(4, 3, True)], 10)


def categories(metrics: dict, key: str) -> dict[str, int]:
    return {c["name"]: c["jobs"] for c in metrics[key]}


def test_length_boundaries_are_inclusive_upper_limits() -> None:
    runs = [599, 600, 601, 3600, 3601, 14400, 14401]
    m = compute_metrics([job(i, 0, 0, r) for i, r in enumerate(runs)], [], 1)
    # ≤ 10 min: 599, 600 | ≤ 1 h: 601, 3600 | ≤ 4 h: 3601, 14400 | > 4 h: 14401
    assert categories(m, "by_length") == {"Very Short": 2, "Short": 2, "Long": 2, "Very Long": 1}
    assert [c["max"] for c in m["by_length"]] == [600.0, 3600.0, 14400.0, None]


def test_scale_uses_allocated_nodes_and_closes_the_gaps_upwards() -> None:
    allocated = [64, 65, 127, 128, 512, 513, 1024, 2048, 2049, 4096]
    outcomes = [job(i, 0, 0, 60, nodes=1, allocated=a) for i, a in enumerate(allocated)]
    m = compute_metrics(outcomes, [], 8192)
    # ≤ 64: 64 | 65-512: 65 127 128 512 | 513-2048: 513 1024 2048 | > 2048: 2049 4096
    assert categories(m, "by_scale") == {"Very Small": 1, "Small": 4, "Large": 3, "Very Large": 2}
    # A 1000-node request placed on a 1024-node block is Large (seed 003 Table IV), not Small.
    m = compute_metrics([job(1, 0, 0, 60, nodes=1000, allocated=1024)], [], 8192)
    assert categories(m, "by_scale")["Large"] == 1


def test_category_means_and_shares() -> None:
    m = compute_metrics(FOUR, [], 10, scale_categories=(("small", 4), ("big", None)))
    small, big = m["by_scale"]
    # small: jobs 1-3 (allocated 2, 4, 4): waits 0 100 50, responses 100 102 350,
    # slowdowns 1 10.2 1.1667 -> mean 12.3667/3 = 4.122222
    assert small == {"name": "small", "max": 4, "jobs": 3, "share": 0.75, "mean_wait": 50.0,
                     "mean_response": 184.0, "mean_bounded_slowdown": 4.122222}
    assert big == {"name": "big", "max": None, "jobs": 1, "share": 0.25, "mean_wait": 300.0,
                   "mean_response": 900.0, "mean_bounded_slowdown": 1.5}


def test_custom_length_categories() -> None:
    m = compute_metrics(FOUR, [], 10, length_categories=(("under 5 min", 300), ("rest", None)))
    assert categories(m, "by_length") == {"under 5 min": 3, "rest": 1}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slowdown_bound": 0.0}, "slowdown_bound"),
        ({"length_categories": ()}, "empty"),
        ({"length_categories": (("a", 10), ("b", 20))}, "last category"),
        ({"scale_categories": (("a", None), ("b", None))}, "only the last"),
        ({"scale_categories": (("a", 64), ("b", 64), ("c", None))}, "increase"),
    ],
)
def test_bad_settings_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_metrics(FOUR, [], 10, **kwargs)


def test_machine_must_have_nodes() -> None:
    with pytest.raises(ValueError, match="machine_nodes"):
        compute_metrics(FOUR, [], 0)


def test_empty_input() -> None:
    m = compute_metrics([], [], 40960)
    assert (m["jobs"], m["killed"]) == (0, 0)
    assert m["makespan"] is m["utilization"] is m["useful_utilization"] is None
    assert m["loss_of_capacity"] is None
    for key in ("wait", "response", "run_time", "bounded_slowdown"):
        assert m[key] == {"mean": None, "median": None, "p90": None, "max": None}
    for c in m["by_length"] + m["by_scale"]:
        assert (c["jobs"], c["share"], c["mean_wait"], c["mean_bounded_slowdown"]) == (
            0, 0.0, None, None)
    json.dumps(m, allow_nan=False)
    print_metrics(m, Console(file=io.StringIO()), title="empty")


def test_instantaneous_jobs_leave_utilization_undefined() -> None:
    m = compute_metrics([job(1, 5, 5, 5)], [], 4)
    assert m["makespan"] == 0.0
    assert m["utilization"] is None


def test_json_is_deterministic_and_independent_of_order() -> None:
    rng = random.Random(7)
    outcomes = []
    for i in range(500):
        submit = rng.uniform(0, 1e6)
        start = submit + rng.expovariate(1 / 3000)
        outcomes.append(job(i, submit, start, start + rng.expovariate(1 / 4000),
                            nodes=rng.randint(1, 512), allocated=512))
    samples = [CapacitySample(t, rng.randint(0, 40960), rng.random() < 0.5)
               for t in sorted(rng.uniform(0, 1e6) for _ in range(500))]
    text = json.dumps(compute_metrics(outcomes, samples, 40960), sort_keys=True, allow_nan=False)
    assert json.dumps(compute_metrics(outcomes, samples, 40960), sort_keys=True) == text
    rng.shuffle(outcomes)
    assert json.dumps(compute_metrics(outcomes, samples, 40960), sort_keys=True) == text


@st.composite
def capacity_respecting(draw: st.DrawFn) -> tuple[list[JobOutcome], int]:
    """Jobs in fixed-width lanes that together fit the machine; each lane runs one job at a time."""
    machine = draw(st.integers(1, 64))
    widths: list[int] = []
    for width in draw(st.lists(st.integers(1, machine), min_size=1, max_size=4)):
        if sum(widths) + width > machine:
            break
        widths.append(width)
    widths = widths or [machine]
    outcomes = []
    for width in widths:
        lane_free = 0
        for gap, wait, run in draw(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000),
                                                      st.integers(0, 20000)), max_size=6)):
            start = lane_free + gap
            allocated = draw(st.integers(1, width))
            outcomes.append(job(len(outcomes), start - wait, start, start + run,
                                nodes=draw(st.integers(1, allocated)), allocated=allocated))
            lane_free = start + run
    return outcomes, machine


@given(capacity_respecting())
def test_properties_of_capacity_respecting_replays(case: tuple[list[JobOutcome], int]) -> None:
    outcomes, machine = case
    m = compute_metrics(outcomes, [], machine)
    assert m["jobs"] == len(outcomes)
    if m["utilization"] is not None:
        assert 0 <= m["useful_utilization"] <= m["utilization"] <= 1
    if outcomes:
        for key, values in (("wait", [o.wait for o in outcomes]),
                            ("response", [o.response for o in outcomes])):
            stats = m[key]
            assert min(values) <= stats["mean"] <= stats["max"] == max(values)
            assert min(values) <= stats["median"] <= stats["p90"] <= stats["max"]
        slowdown = m["bounded_slowdown"]
        assert 1 <= slowdown["median"] <= slowdown["p90"] <= slowdown["max"]
        assert 1 <= slowdown["mean"] <= slowdown["max"]
    for key in ("by_length", "by_scale"):
        assert sum(c["jobs"] for c in m[key]) == len(outcomes)


@given(st.integers(1, 1000).flatmap(lambda machine: st.tuples(
    st.just(machine),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, machine), st.booleans()), max_size=30),
)))
def test_loss_of_capacity_is_a_fraction(case: tuple[int, list[tuple[int, int, bool]]]) -> None:
    machine, raw = case
    samples = [CapacitySample(t, idle, fits) for t, idle, fits in sorted(raw)]
    loc = loss_of_capacity(samples, machine)
    assert loc is None or 0 <= loc <= 1


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (42, "42s"), (600, "10m"), (725, "12m05s"), (3725, "1h02m"), (14400, "4h"),
     (3 * 86400 + 4 * 3600 + 59, "3d04h"), (-90, "-1m30s")],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_print_metrics_shows_the_figures() -> None:
    console = Console(file=io.StringIO(), width=140, record=True)
    print_metrics(compute_metrics(FOUR, [], 10), console, title="four [jobs]")
    text = console.export_text()
    for expected in ("four [jobs]", "62.08%", "44.04%", "112.5 s", "10.20", "Very Short",
                     "> 10m, ≤ 1h", "> 64, ≤ 512", "16m40s"):
        assert expected in text


def test_compare_metrics_marks_the_best_run() -> None:
    fast = compute_metrics(FOUR, [], 10)
    slow = compute_metrics([job(1, 0, 500, 600)], [], 10)
    console = Console(file=io.StringIO(), width=160, record=True, force_terminal=True,
                      color_system="standard")
    console.print(compare_metrics([("fast", fast), ("slow [x]", slow)]))
    text = console.export_text(styles=True)
    assert "slow [x]" in text  # a run's name is text, not markup
    assert "Very Long: mean BSD" in text
    bold = "\x1b[1m"
    (mean_wait,) = [line for line in text.splitlines() if line.startswith("│ mean wait ")]
    assert f"{bold}112.5 s" in mean_wait and f"{bold}500.0 s" not in mean_wait


def test_metrics_markdown() -> None:
    fast = compute_metrics(FOUR, [], 10)
    slow = compute_metrics([job(1, 0, 500, 600)], [], 10)
    lines = metrics_markdown([("fast", fast), ("a|b", slow), ("empty", compute_metrics([], [], 10))]
                             ).splitlines()
    assert lines[0] == "| | fast | a\\|b | empty |"
    assert lines[1] == "|---|---:|---:|---:|"
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    # Mean wait: 112.5 s beats 500 s; the empty run shows a dash and takes no part.
    assert rows["mean wait"] == "| mean wait | **112.5 s (1m52s)** | 500.0 s (8m20s) | – |"
    assert rows["jobs"] == "| jobs | 4 | 1 | 0 |"  # no better direction, nothing bold
    # Equal values: no run is better, so none is marked.
    (line,) = [line for line in metrics_markdown([("x", fast), ("y", fast)]).splitlines()
               if line.startswith("| mean wait |")]
    assert "**" not in line


def test_compute_metrics_speed(benchmark) -> None:  # the pytest-benchmark fixture
    """250,000 jobs, a whole-trace replay; run with --benchmark-only."""
    rng = random.Random(1)
    outcomes, samples = [], []
    for i in range(250_000):
        submit = i * 30.0
        start = submit + rng.expovariate(1 / 3000)
        outcomes.append(job(i, submit, start, start + rng.expovariate(1 / 4000),
                            nodes=512, allocated=512))
        samples.append(CapacitySample(submit, rng.randint(0, 40960), rng.random() < 0.3))
    m = benchmark(compute_metrics, outcomes, samples, 40960)
    assert m["jobs"] == 250_000
