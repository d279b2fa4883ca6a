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
