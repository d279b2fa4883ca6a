"""Where the project's shared data (real traces, the Intrepid table, the papers) lives.

The repository is checked out beside `shared/` (developers and CI alike); COBALTLITE_SHARED
overrides that for other layouts.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("COBALTLITE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
TRACES = SHARED / "traces"
MACHINES = SHARED / "machines"
