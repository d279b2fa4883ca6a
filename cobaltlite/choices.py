"""The names a command line chooses from, and their paper defaults, in a module that imports
nothing but `enum`.

`qsim --help` prints these (policies, backfilling schemes, trace formats, predictors, tuning
schemes...); keeping them here lets it build its parser without importing the scheduler, the
machine models or the trace readers that own the behaviour (issue 13: start-up ≤ 0.12 s). The
owning modules import their names from here, so each list is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class Backfill(StrEnum):
    EASY = "easy"
    CONSERVATIVE = "conservative"
    NONE = "none"
    SLACK = "slack"


MAX_WINDOW = 6
"""The largest allocation window: W! orders are tried per pass (720 at W = 6); the paper's study
stops at W = 5."""

BUILTIN_POLICIES = ("fcfs", "fat", "wfp1", "wfp3", "fcsj", "unicef", "default", "high_prio",
                    "balanced", "fairshare")
"""The utility functions of cobaltlite/policy/utility.py, by the names --policy takes."""

TRACE_FORMATS = ("auto", "swf", "accounting", "intrepid-list")

FAIR_START_METHODS: tuple[str, ...] = ("replay", "estimate")

LAYOUT_METHODS = ("pp", "nlp", "dqr", "hybrid")
"""The seed-002 configurators (cobaltlite/partitioning/configure.py), as --method names them."""

MONTHLY_METHODS = ("whole", "static", *LAYOUT_METHODS)
"""`qsim --reconfigure monthly --method`: the configurators, the paper's static layout and the
non-partitioned machine (cobaltlite/partitioning/monthly.py)."""

PREDICTORS = ("window", "perfect", "none")
PAPER_SENSITIVITY = 0.6
PAPER_SPECIFICITY = 0.6

EXAMPLE_SCHEMES: Mapping[str, tuple[str, ...]] = {
    "bf-adaptive": ("bf-queue-depth",),
    "w-adaptive": ("w-utilization-trend",),
    "2d-adaptive": ("bf-queue-depth", "w-utilization-trend"),
}
"""The shipped tuning schemes (seed 000 §3.4), each the rules of cobaltlite/tuning/scheme.py's
EXAMPLE_RULES it combines."""
