"""qsim under failures as a user runs it: the options, the outputs, and bad input refused."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import TRACES

from cobaltlite.accounting import read_accounting_log
from cobaltlite.config import load_config
from cobaltlite.errors import InputError

INTREPID = TRACES / "intrepid-2009-first3000.6col.txt.gz"
BASE = ("--machine", "intrepid", "--schedulable", "all", "--policy", "wfp3", "-q")


def qsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def slice_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 400 jobs of the Intrepid slice: a few days, enough for failures to strike."""
    with gzip.open(INTREPID, "rt") as source:
        lines = source.readlines()[:401]
    path = tmp_path_factory.mktemp("trace") / "intrepid-400.txt"
    path.write_text("".join(lines))
    return path


def test_a_failure_replay_reports_jfr_and_sulr_everywhere(
    slice_trace: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    ran = qsim("--trace", str(slice_trace), *BASE, "--mtbf", "4", "--failure-seed", "3",
               "--out", str(out))
    assert ran.returncode == 0, ran.stderr
    assert "JFR (jobs hit by a failure)" in ran.stdout and "SULR" in ran.stdout
    summary = json.loads((out / "summary.json").read_text())
    failures = summary["metrics"]["failures"]
    assert failures["events"] > 0 and failures["failed_runs"] > 0
    assert 0 < failures["jfr"] < 1 and 0 < failures["sulr"] < 1
    assert summary["failure_model"]["mtbf_hours"] == 4.0
    # λ = 4 h x 80 midplanes (k = 1): the per-midplane scale that gives that system MTBF.
    assert summary["failure_model"]["failure_units"] == 80
    assert summary["failure_model"]["weibull_scale"] == pytest.approx(4 * 3600 * 80)
    assert summary["failure_model"]["predictor"] == "window"
    assert (summary["alpha"], summary["beta"]) == (1.0, 1.0)
    # The job log holds the failures and reads back as the 400 jobs, each from its first submit.
    log = (out / "accounting.log").read_text()
    assert log.count(";FAIL;") == failures["events"]
    assert log.count(";R;") == failures["failed_runs"]
    assert len(read_accounting_log(out / "accounting.log").jobs) == 400
    # The same seed gives the same replay, byte for byte; the Markdown table has the rows too.
    again = qsim("--trace", str(slice_trace), *BASE, "--mtbf", "4", "--failure-seed", "3",
                 "--markdown")
    assert "| JFR |" in again.stdout and "| SULR |" in again.stdout


def test_ordinary_and_fault_aware_replays_see_the_same_failures(slice_trace: Path,
                                                               tmp_path: Path) -> None:
    events = []
    for name, extra in (("aware", ()), ("ordinary", ("--predictor", "none", "--beta", "0"))):
        ran = qsim("--trace", str(slice_trace), *BASE, "--mtbf", "6", "--failure-seed", "5",
                   "--out", str(tmp_path / name), *extra)
        assert ran.returncode == 0, ran.stderr
        log = (tmp_path / name / "accounting.log").read_text().splitlines()
        events.append([line.split(";")[:3] for line in log if ";FAIL;" in line])
    assert events[0] == events[1] and events[0]


def test_a_failure_log_is_replayed(slice_trace: Path, tmp_path: Path) -> None:
    log = tmp_path / "failures.txt"
    # The slice starts 2009-01-05 (Intrepid's origin); a midplane fails on its first morning.
    log.write_text("# one failure\n2009-01-05T08:00:00 R00-M0\n")
    ran = qsim("--trace", str(slice_trace), *BASE, "--failure-log", str(log), "--markdown")
    assert ran.returncode == 0, ran.stderr
    assert "| failure events | 1 |" in ran.stdout


def test_a_job_log_replays_its_failures_again(slice_trace: Path, tmp_path: Path) -> None:
    first = qsim("--trace", str(slice_trace), *BASE, "--mtbf", "5", "--failure-seed", "2",
                 "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    again = qsim("--trace", str(slice_trace), *BASE,
                 "--failure-log", str(tmp_path / "a" / "accounting.log"), "--out",
                 str(tmp_path / "b"))
    assert again.returncode == 0, again.stderr
    metrics = [json.loads((tmp_path / run / "summary.json").read_text())["metrics"]
               for run in ("a", "b")]
    # The same failures at the same instants: the same replay (the generated list's failures
    # after the last job's end were never met, so only the met ones are in the log).
    assert metrics[0] == metrics[1]


@pytest.mark.parametrize("args,message", [
    (("--mtbf", "0"), "argument --mtbf: '0' must be greater than zero"),
    (("--sensitivity", "1.5"), "argument --sensitivity: '1.5' must be between 0 and 1"),
    (("--specificity", "-0.2"), "argument --specificity: '-0.2' must be between 0 and 1"),
    (("--beta", "-1"), "argument --beta: '-1' must be a finite number, zero or more"),
    (("--mtbf", "4", "--weibull-scale", "1e6"), "not allowed with argument"),
])
def test_bad_failure_options_are_refused_by_name_and_value(
    slice_trace: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "out"
    ran = qsim("--trace", str(slice_trace), *BASE, *args, "--out", str(out))
    assert ran.returncode != 0
    assert message in ran.stderr
    assert not out.exists()


@pytest.mark.parametrize("line,message", [
    ("2009-01-05T08:00:00 R77-M0", "failures.txt:2: intrepid: no component 'R77-M0'"),
    ("-60 R00-M0", "failures.txt:2: time '-60' must be zero or more seconds"),
])
def test_a_bad_failure_log_stops_with_file_and_line_and_writes_nothing(
    slice_trace: Path, tmp_path: Path, line: str, message: str
) -> None:
    log = tmp_path / "failures.txt"
    log.write_text(f"2009-01-05T08:00:00 R00-M0\n{line}\n")
    out = tmp_path / "out"
    ran = qsim("--trace", str(slice_trace), *BASE, "--failure-log", str(log), "--out", str(out))
    assert ran.returncode == 1
    assert message in ran.stderr
    assert not (out / "summary.json").exists() and not (out / "accounting.log").exists()


def test_alpha_and_beta_come_from_the_yaml_config(tmp_path: Path) -> None:
    (tmp_path / "cobaltlite.yaml").write_text("allocation_alpha: 2\nallocation_beta: 0\n")
    config = load_config(tmp_path)
    assert (config.allocation_alpha, config.allocation_beta) == (2.0, 0.0)
    (tmp_path / "cobaltlite.yaml").write_text("allocation_beta: -0.5\n")
    with pytest.raises(InputError, match=r"allocation_beta: -0\.5 must be a weight"):
        load_config(tmp_path)
