"""What `qsim --help` and a plain flat replay import (issue 13: start-up ≤ 0.12 s).

Start-up time itself is measured by `bin/benchmark --only whole` (docs/benchmarks.md), never
asserted here; these tests pin the structure that keeps it short, which a new top-level import
in the wrong module would silently undo.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """\
import sys
from cobaltlite.qsim.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(argv: list[str], cwd: Path) -> set[str]:
    """Every module a fresh interpreter holds after `qsim ARGV`."""
    ran = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    assert ran.returncode == 0, ran.stderr
    return set(ran.stderr.splitlines()[-1].split())


def test_qsim_help_imports_neither_the_replay_nor_rich(tmp_path: Path) -> None:
    loaded = modules_after(["--help"], tmp_path)
    assert "cobaltlite.qsim.cli" in loaded
    heavy = {m for m in loaded if m.startswith(("cobaltlite.qsim.engine", "cobaltlite.qsim.replay",
                                                "cobaltlite.scheduler", "cobaltlite.machine",
                                                "cobaltlite.traces", "rich", "yaml"))}
    assert heavy == set()


def test_a_flat_replay_imports_no_daemon_yaml_or_optional_feature_code(tmp_path: Path) -> None:
    trace = tmp_path / "one.swf"
    trace.write_text("1 0 0 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    loaded = modules_after(["--trace", str(trace), "--machine", "flat:4", "-q", "--markdown",
                            "--out", str(tmp_path / "out")], tmp_path)
    assert "cobaltlite.qsim.engine" in loaded
    assert (tmp_path / "out" / "accounting.log").read_text().count(";") > 0
    unneeded = {m for m in loaded
                if m.split(".")[0] in {"rich", "yaml", "Pyro5", "ssl", "zoneinfo", "numpy", "scipy"}
                or m.startswith(("cobaltlite.tuning", "cobaltlite.reservations",
                                 "cobaltlite.commands", "cobaltlite.rpc", "cobaltlite.qsim.eet",
                                 "cobaltlite.qsim.fairness", "cobaltlite.qsim.unfairness",
                                 # queue layouts (seed 002), generated failures (seed 003),
                                 # slack backfilling (seed 001)
                                 "cobaltlite.partitioning", "cobaltlite.machine.partitions",
                                 "cobaltlite.machine.block_layout", "cobaltlite.faults.sources",
                                 "cobaltlite.scheduler.partitioned", "cobaltlite.scheduler.slack"))}
    assert unneeded == set()
