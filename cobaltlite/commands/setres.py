"""setres: make or change a reservation (Cobalt's setres, reference §3.5; admins only).

The queue manager checks everything (the caller is an admin, the places and users exist, the
start is not past, no overlap with another reservation unless --force) and changes nothing when
one check fails. Qsim's reservation files (`qsim --reservations`) take the same options, one
setres line per reservation.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_queue_manager,
    print_error,
    run_command,
)

PROG = "setres"


def build_parser(prog: str = PROG) -> CommandParser:
    parser = CommandParser(
        prog=prog,
        usage="%(prog)s -n NAME -s START -d DURATION [options] [-p P1:P2 | PLACE ...]",
        description="Reserve blocks (Blue Gene/P) or nodes (flat machines) for some users over "
                    "a time window. Jobs of the reservation's queue (R.NAME unless -q) run only "
                    "inside it; no other job may use its places then.",
        epilog="Times: START is YYYY_MM_DD-HH:MM (local time) or now; DURATION and CYCLE are "
               "minutes, HH:MM or HH:MM:SS. Examples:\n"
               "  setres -n maint -s 2026_12_01-08:00 -d 04:00 -p ANL-R00-M0-512:ANL-R00-M1-512\n"
               "  setres -n dedicated -s now -d 120 -u alice:bob 0-15\n"
               "  setres -n weekly -s 2026_12_07-06:00 -d 02:00 -c 168:00:00 ANL-R01-1024\n"
               "  setres -m -n maint -d 06:00:00          (change a reservation)\n"
               "  setres -m -D -n weekly                  (skip a cyclic one's next period)\n"
               "Exit status: 0 done, 1 refused (not an admin, unknown place or user, a start "
               "in the past, an overlap without --force, no such reservation), 2 bad command "
               "line.",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    add_help_option(parser)
    add = parser.add_argument
    add("-n", "--name", required=True, help="the reservation's name")
    add("-s", "--start", help="when it begins: YYYY_MM_DD-HH:MM (local time) or now")
    add("-d", "--duration", help="how long each period lasts")
    add("-c", "--cycle", help="make it cyclic: a new period begins every CYCLE")
    add("-p", "--partitions", help="places, ':'-separated: blocks, or nodes and node ranges")
    add("--nodecount", type=int, metavar="N",
        help="flat machines: reserve N nodes (the highest-numbered free of other reservations)")
    add("-u", "--users", help="users allowed, ':'-separated, or '*' for everyone (default)")
    add("-q", "--queue", help="run this existing queue's jobs in it instead of R.NAME")
    add("-A", "--project", help="project (account) charged")
    add("-m", "--modify", action="store_true", help="change the reservation NAME")
    add("-D", "--defer", action="store_true",
        help="with -m: move a cyclic reservation to its next period")
    passthrough = parser.add_mutually_exclusive_group()
    passthrough.add_argument(
        "--block_passthrough", dest="block_passthrough", action="store_true", default=None,
        help="Blue Gene/P: also keep other jobs off blocks that only share a wire (default)")
    passthrough.add_argument(
        "--allow_passthrough", dest="block_passthrough", action="store_false",
        help="Blue Gene/P: let other jobs use blocks that only share a wire with it")
    add("-f", "--force", action="store_true",
        help="make it even when it overlaps another reservation")
    add("places", nargs="*", metavar="PLACE", help="places, as with -p")
    return parser


def request_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The request the queue manager (or Qsim) checks: only the options given."""
    if args.partitions and args.places:
        raise CommandError("give places either with -p or as arguments, not both")
    places = args.partitions.split(":") if args.partitions else list(args.places)
    if args.defer and (args.start or args.cycle):
        raise CommandError("Cannot use -D while changing start or cycle time")
    if args.defer and not args.modify:
        raise CommandError("-D goes with -m (it changes an existing reservation)")
    request: dict[str, Any] = {"name": args.name}
    for key in ("start", "duration", "cycle", "project", "queue", "block_passthrough"):
        value = getattr(args, key)
        if value is not None:
            request[key] = value
    if places:
        request["places"] = places
    if args.nodecount is not None:
        request["nodecount"] = args.nodecount
    if args.users is not None:
        request["users"] = None if args.users == "*" else args.users.split(":")
    if args.force:
        request["force"] = True
    if not args.modify:
        if "start" not in request:
            raise CommandError("Must supply a start time for the reservation with -s")
        if "duration" not in request:
            raise CommandError("Must supply a duration time for the reservation with -d")
        if not places and args.nodecount is None:
            raise CommandError("Must supply either -p with value or partitions as arguments")
    return request


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    with connect_queue_manager() as qm:
        if args.modify:
            answer = qm.modify_reservation(request, args.defer)
        else:
            answer = qm.add_reservation(request)
    for other in answer["overlaps"]:
        print_error(PROG, f"Warning: reservation '{answer['name']}' overlaps reservation "
                          f"'{other}'")
    print(answer["message"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
