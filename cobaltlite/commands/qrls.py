"""qrls: release user holds, or with --dependencies drop jobs' dependencies (Cobalt's qrls,
reference §3.4).

A job runs only once every hold is clear: qrls clears the user hold; an admin hold needs
`cqadm --admin-release`. `--dependencies` removes the job's dependency list and the hold it causes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cobaltlite.commands.common import QueueManagerClient, Row
from cobaltlite.commands.holds import build_parser, run_per_job

PROG = "qrls"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(PROG, "Release the user hold on jobs.")
    parser.add_argument("--dependencies", action="store_true",
                        help="instead, remove the jobs' dependencies (and the hold they cause)")

    def release(qm: QueueManagerClient, jobids: list[int], args: argparse.Namespace
                ) -> list[Row]:
        return qm.release(jobids, "dependencies" if args.dependencies else "user")

    return run_per_job(PROG, parser, argv, release)


if __name__ == "__main__":
    sys.exit(main())
