"""Failure sources and the predictor (seed 003 §IV-B, §VI-A3): Weibull lists, failure logs, P_f."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from cobaltlite.errors import InputError
from cobaltlite.faults.failure_log import read_failure_log
from cobaltlite.faults.predictor import WindowPredictor, build_predictor
from cobaltlite.faults.sources import (
    FailureEvent,
    scale_for_system_mtbf,
    unit_mean,
    weibull_failures,
)
from cobaltlite.machine.bgp import BGPMachine
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.model import NoFailures
from tests.test_golden_schedules import fig1_description, fig1_machine

DAY = 86400.0


def intrepid() -> BGPMachine:
    return BGPMachine(load_description("intrepid"))


def test_weibull_failures_are_reproducible_for_a_seed_and_differ_between_seeds() -> None:
    units = intrepid().failure_units()
    assert len(units) == 80  # Intrepid's 80 midplanes: the paper's failure units
    first = weibull_failures(units, 1.0, 1e6, 0.0, 30 * DAY, seed=3)
    again = weibull_failures(units, 1.0, 1e6, 0.0, 30 * DAY, seed=3)
    other = weibull_failures(units, 1.0, 1e6, 0.0, 30 * DAY, seed=4)
    assert first == again
    assert first != other
    assert first == sorted(first)
    assert all(0.0 <= e.time < 30 * DAY and e.component in units for e in first)
    # A unit's failures do not depend on which other units exist.
    alone = weibull_failures(["R00-M0"], 1.0, 1e6, 0.0, 30 * DAY, seed=3)
    assert alone == [e for e in first if e.component == "R00-M0"]


@pytest.mark.parametrize("shape", [1.0, 0.7, 2.0])
def test_weibull_gaps_have_the_configured_mean(shape: float) -> None:
    scale = 1e5
    span = 4000 * scale
    events = weibull_failures(["u"], shape, scale, 0.0, span, seed=11)
    times = [e.time for e in events]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    mean = sum(gaps) / len(gaps)
    # About 4,000 gaps: the sample mean lies within a few percent of λ·Γ(1 + 1/k).
    assert mean == pytest.approx(unit_mean(shape, scale), rel=0.06)


def test_the_paper_scales_give_the_paper_system_mtbf() -> None:
    # Seed 003 §VI-A3: λ = 1e6 .. 6e6 s per midplane, k = 1, 80 midplanes: about 4 to 20 hours.
    assert unit_mean(1.0, 1e6) / 80 / 3600 == pytest.approx(3.47, abs=0.01)
    assert scale_for_system_mtbf(20.0, 80, 1.0) == pytest.approx(5.76e6)
    events = weibull_failures(intrepid().failure_units(), 1.0, 2e6, 0.0, 200 * DAY, seed=5)
    system_mtbf = 200 * DAY / len(events)
    assert system_mtbf == pytest.approx(2e6 / 80, rel=0.12)


@pytest.mark.parametrize("mtbf", [0.0, -3.0, math.inf])
def test_an_mtbf_of_zero_or_less_is_refused_by_value(mtbf: float) -> None:
    with pytest.raises(InputError, match=re.escape(f"--mtbf {mtbf!r}")):
        scale_for_system_mtbf(mtbf, 80, 1.0)


def test_a_zero_weibull_scale_or_shape_is_refused() -> None:
    with pytest.raises(InputError, match="scale λ"):
        weibull_failures(["u"], 1.0, 0.0, 0.0, 10.0, seed=1)
    with pytest.raises(InputError, match=re.escape("--weibull-shape 0.0")):
        weibull_failures(["u"], 0.0, 1.0, 0.0, 10.0, seed=1)


# ---- the predictor ---------------------------------------------------------------------------


def test_the_predictor_gives_sensitivity_inside_a_failure_window_and_false_alarms_outside() -> None:
    machine = fig1_machine()
    failures = [FailureEvent(1000.0, "R03-M1"), FailureEvent(5000.0, "R00-M0-N03")]
    predictor = WindowPredictor(failures, machine, sensitivity=0.7, specificity=0.9)
    # H (R03-M1) and every block over it: sensitivity while the failure is in the window.
    for block in ("H", "GH", "EFGH", "ABCDEFGH"):
        assert predictor.chance(block, 900.0, 1100.0) == 0.7
    assert predictor.chance("G", 900.0, 1100.0) == pytest.approx(0.1)  # 1 - specificity
    # The window is [start, end): a failure at the end or before the start is not in it.
    assert predictor.chance("H", 0.0, 1000.0) == pytest.approx(0.1)
    assert predictor.chance("H", 1000.5, 2000.0) == pytest.approx(0.1)
    # A node card fails its midplane's blocks, not the sibling midplane's.
    assert predictor.chance("A", 4000.0, 6000.0) == 0.7
    assert predictor.chance("B", 4000.0, 6000.0) == pytest.approx(0.1)
    assert predictor.failing_components(0.0, 6000.0) == ["R03-M1", "R00-M0-N03"]


def test_perfect_and_none_predictors_bound_the_window_predictor() -> None:
    machine = fig1_machine()
    failures = [FailureEvent(1000.0, "R03-M1")]
    perfect = build_predictor("perfect", failures, machine)
    assert perfect.chance("H", 0.0, 2000.0) == 1.0
    assert perfect.chance("G", 0.0, 2000.0) == 0.0
    assert isinstance(build_predictor("none", failures, machine), NoFailures)


@pytest.mark.parametrize("option,value", [("sensitivity", 1.5), ("specificity", -0.1),
                                          ("sensitivity", math.nan)])
def test_a_rate_outside_zero_one_is_refused_by_name_and_value(option: str, value: float) -> None:
    message = re.escape(f"--{option} {value!r}: must be between 0 and 1")
    with pytest.raises(InputError, match=message):
        build_predictor("window", [], fig1_machine(), **{option: value})


# ---- seed 003 Fig. 1 with non-zero P_f ------------------------------------------------------


class ChanceOnly:
    """The same predictor behind the bare FailureChance protocol: the machine's general path."""

    def __init__(self, inner: WindowPredictor) -> None:
        self.inner = inner

    def chance(self, location: str, start: float, end: float) -> float:
        return self.inner.chance(location, start, end)


@pytest.mark.parametrize("general_path", [False, True])
def test_fig1_fault_aware_allocation_prefers_g_over_e(general_path: bool) -> None:
    # Seed 003 §IV-B on Fig. 1: B is busy and later jobs hold A, C, D, so E..H remain, each
    # blocking two available partitions. E and G both have P_f = 0.05; H is predicted to fail,
    # so GH (and EFGH) are unreliable. Blocking GH costs less than blocking EF: G wins.
    machine = BGPMachine(fig1_description())
    for jobid, block in enumerate("BACD", start=1):
        machine.allocate(block, jobid, 10_000.0)
    predictor = WindowPredictor([FailureEvent(500.0, "R03-M1")], machine,
                                sensitivity=0.6, specificity=0.95)
    assert predictor.chance("E", 0.0, 1000.0) == predictor.chance("G", 0.0, 1000.0)
    assert predictor.chance("E", 0.0, 1000.0) == pytest.approx(0.05)
    machine.failures = ChanceOnly(predictor) if general_path else predictor
    assert machine.find_location(512, 1000.0, 0.0) == "G"
    # Ordinary allocation (P_f ignored): E and G tie at BLK 2, and E, the first name, wins.
    machine.failures = NoFailures()
    assert machine.find_location(512, 1000.0, 0.0) == "E"
    # The predicted failure after the job's window changes nothing: E again.
    machine.failures = predictor
    assert machine.find_location(512, 400.0, 0.0) == "E"


# ---- the failure log -------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "failures.txt"
    path.write_text(text)
    return path


def test_a_failure_log_reads_epoch_and_iso_times_and_every_component_kind(tmp_path: Path) -> None:
    path = write(tmp_path, "# RAS extract\n\n"
                 "1231459200 R00-M0   # a midplane\n"
                 "2009-01-08T00:00:00 R12-M1-N04\n"
                 "1231459300.5 ANL-R00-1024\n")
    events = read_failure_log(path, intrepid())
    assert events == [FailureEvent(1231372800.0, "R12-M1-N04"),
                      FailureEvent(1231459200.0, "R00-M0"),
                      FailureEvent(1231459300.5, "ANL-R00-1024")]


@pytest.mark.parametrize("line,message", [
    ("1000 R99-M7", ":2: .*'R99-M7'"),
    ("-5 R00-M0", ":2: time '-5' must be zero or more"),
    ("yesterday R00-M0", ":2: time 'yesterday' is neither epoch seconds"),
    ("1000", ":2: expected 'TIME COMPONENT'"),
    ("1000 R00-M0 extra", ":2: expected 'TIME COMPONENT'"),
])
def test_a_bad_failure_log_line_is_refused_with_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    path = write(tmp_path, f"1000 R00-M0\n{line}\n")
    with pytest.raises(InputError, match=f"failures.txt{message}"):
        read_failure_log(path, intrepid())


def test_a_job_log_is_read_for_its_fail_records(tmp_path: Path) -> None:
    path = write(tmp_path, "01/05/2009 08:00:00;Q;1;qtime=1231142400\n"
                 "01/05/2009 08:00:00;FAIL;R00-M0;failed_at=1231142400.25 repaired=1231143600\n"
                 "01/05/2009 09:00:00;FAIL;R01-M1;repaired=1231147200\n")
    assert read_failure_log(path, intrepid()) == [FailureEvent(1231142400.25, "R00-M0"),
                                                  FailureEvent(1231146000.0, "R01-M1")]
    path.write_text("01/05/2009 08:00:00;FAIL;R00-M0;failed_at=soon\n")
    with pytest.raises(InputError, match=r"failures\.txt:1: FAIL record"):
        read_failure_log(path, intrepid())
    path.write_text("01/05/2009 08:00:00;FAIL;R99-M0;repaired=1\n")
    with pytest.raises(InputError, match=r"failures\.txt:1: .*'R99-M0'"):
        read_failure_log(path, intrepid())


def test_the_papers_weights_draw_a_job_toward_a_predicted_failure_on_intrepid() -> None:
    # docs/fault-aware.md, "Do we agree with the paper?": every parent of a block over the
    # failing midplane is unreliable too, and BLK_f discounts each of them by more than β·P_f
    # adds, so with α = β = 1 (and 0.6/0.6) the cost prefers the block that is about to fail.
    # With β = 100 P_f decides and the job goes elsewhere.
    machine = BGPMachine(load_description("intrepid", schedulable="all"))
    machine.failures = WindowPredictor([FailureEvent(100.0, "R23-M1")], machine)
    assert machine.find_location(64, 1000.0, 0.0) == "ANL-R23-M1-N00-64"
    assert machine.find_location(512, 1000.0, 0.0) == "ANL-R23-M1-512"
    machine.beta = 100.0
    assert "R23-M1" not in str(machine.find_location(64, 1000.0, 0.0))
    assert machine.find_location(512, 1000.0, 0.0) == "ANL-R23-M0-512"
    machine.failures = NoFailures()
    assert machine.find_location(512, 1000.0, 0.0) == "ANL-R00-M1-512"
