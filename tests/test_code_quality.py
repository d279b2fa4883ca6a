"""The code stays as clean as CI found it: ruff's lint rules and mypy's type checks pass.

Both tools are configured in pyproject.toml; a failure prints what they found, file and line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("command", [
    ["ruff", "check", "cobaltlite", "tests", "etc", "bin/benchmark", "bin/benchmark-live"],
    ["mypy"],
], ids=["ruff", "mypy"])
def test_the_checker_finds_nothing(command: list[str]) -> None:
    ran = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert ran.returncode == 0, f"{' '.join(command)} found problems:\n{ran.stdout}{ran.stderr}"


@pytest.mark.parametrize("script", sorted(
    p.name for p in (ROOT / "bin").iterdir() if p.is_file() and p.suffix != ".json"))
def test_every_script_in_bin_answers_help(script: str) -> None:
    """The benchmark and check scripts import much of cobaltlite, and nothing else runs them in
    CI: a renamed name they import must fail here, not in the next session's measurements."""
    ran = subprocess.run([sys.executable, str(ROOT / "bin" / script), "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, f"bin/{script} --help:\n{ran.stdout}{ran.stderr}"
    assert "usage" in ran.stdout.lower()


def test_the_scrape_benchmark_runs() -> None:
    """bin/benchmark's scrape row answers the monitor's calls as the queue manager would; a call
    the monitor gains must be answered there too (seconds, unlike the other rows)."""
    ran = subprocess.run([sys.executable, str(ROOT / "bin" / "benchmark"), "--only", "prometheus",
                          "--repeat", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert "Prometheus scrape over HTTP" in ran.stdout
