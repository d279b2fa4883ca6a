"""A component's pid file exists before the component answers, so `cobaltlite up` and
`cobaltlite status` never see a component that answers but has no pid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cobaltlite.config import COMPONENTS, ensure_layout, load_config

PROBE = """
import sys
from cobaltlite import daemon

component, state_dir = sys.argv[1], sys.argv[2]
seen = []

def serving(config, stop):
    # Stands for the real runner at the moment its sockets start to answer.
    seen.append(config.pid_file(component).exists())
    stop.set()
    return []

daemon.RUNNERS[component] = serving
print(daemon.main([component, "--state-dir", state_dir]), seen)
"""


@pytest.mark.parametrize("component", COMPONENTS)
def test_the_pid_file_is_written_before_the_component_serves(
    component: str, tmp_path: Path
) -> None:
    ensure_layout(load_config(tmp_path))
    ran = subprocess.run([sys.executable, "-c", PROBE, component, str(tmp_path)],
                         capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split(None, 1) == ["0", "[True]\n"]
