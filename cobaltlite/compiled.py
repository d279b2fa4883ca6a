"""Whether Qsim's compiled parts run: cobaltlite._speedups (cobaltlite/_speedups.c, built at
install time where a C compiler exists; docs/operator-guide.md, "Compiled parts").

Each compiled part has a pure-Python twin that gives the same result: the job log's Q, S and E
records (qsim/joblog.py), the monitored series' loop (qsim/metrics.py, `time_series`) and the
flat EASY pass's filter of the jobs that may start now (scheduler/scheduler.py,
`python_easy_candidates`). The twins run when the extension was not built, when it is from
another version of the source (an editable install whose C file changed since
`pip install -e`), or when COBALTLITE_PURE is set to anything but an empty string (tests and
A/B timings use that).
"""

from __future__ import annotations

import os

ABI = 2
"""The version of _speedups' interface this source expects (its ABI constant)."""


def _status() -> tuple[bool, str]:
    if os.environ.get("COBALTLITE_PURE"):
        return False, "pure Python (COBALTLITE_PURE is set)"
    try:
        from cobaltlite import _speedups
    except ImportError:
        return False, "pure Python (cobaltlite._speedups is not built)"
    if _speedups.ABI != ABI:
        return False, ("pure Python (cobaltlite._speedups is from another version of the "
                       "source: reinstall)")
    return True, "compiled (cobaltlite._speedups)"


COMPILED, STATUS = _status()
"""Whether the compiled parts run, and a few words saying so and, if not, why."""
