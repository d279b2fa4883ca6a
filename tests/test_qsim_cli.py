"""The qsim command as a user runs it: outputs, comparisons, site functions, bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import TRACES

INTREPID = TRACES / "intrepid-2009-first3000.6col.txt.gz"


def qsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", *args],
                          capture_output=True, text=True, timeout=300)


def small_swf(tmp_path: Path, lines: int = 300) -> Path:
    with gzip.open(TRACES / "lublin_256.swf.gz", "rt") as source:
        kept = [line for line in source if not line.startswith(";")][:lines]
    path = tmp_path / "small.swf"
    path.write_text("".join(kept))
    return path


def test_the_same_replay_twice_writes_byte_identical_outputs(tmp_path: Path) -> None:
    trace = small_swf(tmp_path)
    for run in ("a", "b"):
        ran = qsim("--trace", str(trace), "--machine", "flat:256", "--policy", "wfp3",
                   "--out", str(tmp_path / run), "-q")
        assert ran.returncode == 0, ran.stderr
    for name in ("accounting.log", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["jobs_replayed"] == 300 and summary["policy"] == "wfp3"


def test_several_policies_print_side_by_side_and_each_gets_its_own_outputs(
    tmp_path: Path,
) -> None:
    ran = qsim("--trace", str(INTREPID), "--machine", "intrepid", "--policy", "fcfs,unicef",
               "--markdown", "--out", str(tmp_path), "-q")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[0] == "| | fcfs | unicef |"
    assert (tmp_path / "fcfs" / "summary.json").exists()
    assert (tmp_path / "unicef" / "summary.json").exists()


def test_a_site_utility_file_can_be_replayed(tmp_path: Path) -> None:
    site = tmp_path / "site.py"
    site.write_text("def biggest_first(size, queued_time):\n    return size * 1e6 + queued_time\n")
    site.chmod(0o644)
    ran = qsim("--trace", str(small_swf(tmp_path)), "--machine", "flat:256", "--utility-file",
               str(site), "--policy", "biggest_first,fcfs", "--markdown", "-q")
    assert ran.returncode == 0, ran.stderr
    assert "biggest_first" in ran.stdout.splitlines()[0]


def test_a_malformed_line_names_file_line_and_field_unless_lenient(tmp_path: Path) -> None:
    trace = small_swf(tmp_path, 20)
    lines = trace.read_text().splitlines(keepends=True)
    fields = lines[4].split()
    fields[3] = "abc"
    lines[4] = " ".join(fields) + "\n"
    trace.write_text("".join(lines))
    strict = qsim("--trace", str(trace), "--machine", "flat:256", "-q")
    assert strict.returncode == 1
    assert f"{trace}:5" in strict.stderr and "run time" in strict.stderr
    lenient = qsim("--trace", str(trace), "--machine", "flat:256", "--lenient", "-q")
    assert lenient.returncode == 0, lenient.stderr
    assert "1 trace lines skipped" in lenient.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--machine", "flat:0"], "flat"),
        (["--machine", "nosuchmachine"], "nosuchmachine"),
        (["--policy", "nosuchpolicy"], "unknown policy"),
        (["--policy", ""], "at least one policy"),
        (["--arrival-scale", "0"], "greater than zero"),
    ],
)
def test_bad_options_say_what_is_wrong(tmp_path: Path, args: list[str], message: str) -> None:
    base = {"--machine": "flat:256", "--policy": "fcfs"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [item for pair in base.items() for item in pair]
    ran = qsim("--trace", str(small_swf(tmp_path, 5)), *flat, "-q")
    assert ran.returncode != 0
    assert message in ran.stderr
