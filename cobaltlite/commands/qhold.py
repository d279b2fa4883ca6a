"""qhold: put a user hold on jobs (Cobalt's qhold, reference §3.4).

A held job stays queued until qrls releases it. Only queued jobs can be held; you may hold your
own jobs and jobs whose user list names you.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cobaltlite.commands.holds import build_parser, run_per_job

PROG = "qhold"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(PROG, "Place a user hold on queued jobs (release it with qrls).")
    return run_per_job(PROG, parser, argv, lambda qm, jobids, _args: qm.hold(jobids, "user"))


if __name__ == "__main__":
    sys.exit(main())
