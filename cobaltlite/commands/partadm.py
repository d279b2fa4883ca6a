"""partadm: administer the machine's partitions (Cobalt's partadm, reference §3.5).

This release: --fail and --unfail. A failed component (a block, a midplane such as R00-M0, a node
card such as R00-M0-N04; a node number on a flat cluster) is out of service: every block over it
shows `failed` in partlist and receives no job until --unfail, and a job running there is killed
and resubmitted or ended (the `failed_jobs` option of cobaltlite.yaml). Both need root or the
admin group, checked by the system component; the change survives a restart of the system.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandParser,
    add_help_option,
    connect_system,
    run_command,
)

PROG = "partadm"


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, add_help=False,
        usage="partadm --fail PART [PART ...] | partadm --unfail PART [PART ...]",
        description="Administer cobaltlite partitions. PART is a block name, a midplane "
                    "(R00-M0) or a node card (R00-M0-N04); on a flat cluster a node number.",
        epilog="Failing a part kills the jobs on every block over it; they are resubmitted or "
               "ended as cobaltlite.yaml's failed_jobs option says. Admin only.")
    add_help_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--fail", action="store_true",
                        help="take the parts out of service (\"failed diags\"): kill the jobs "
                        "on them and place nothing there until --unfail (admin)")
    action.add_argument("--unfail", action="store_true",
                        help="put failed parts back in service (admin)")
    parser.add_argument("parts", nargs="+", metavar="PART",
                        help="a block name, a midplane (R00-M0), a node card (R00-M0-N04); on a "
                        "flat cluster a node number; a list is refused whole if one is unknown")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    with connect_system() as system:
        if args.fail:
            outcome = system.fail(args.parts)
            killed = outcome["killed"]
            print(f"failed: {' '.join(args.parts)}"
                  + (f"; killed job(s) {' '.join(map(str, killed))}" if killed else ""))
        else:
            outcome = system.unfail(args.parts)
            print(f"back in service: {' '.join(args.parts)}")
        print(f"failed now: {' '.join(outcome['failed']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
