"""partadm: administer the machine's partitions (Cobalt's partadm, reference §3.5).

Changes (admin only, checked by the system component; each survives a restart of the system,
and a list is refused whole, nothing changed, if one name is wrong):

* `-a` / `-d`: add blocks to, or delete them from, the managed set: a deleted block is not
  listed and never gets a job; a block a job holds cannot be deleted.
* `--enable` / `--disable`: let the scheduler place jobs on blocks, or not (Cobalt's
  "scheduled"); relatives are unaffected, a running job keeps its block.
* `--activate` / `--deactivate`: mark blocks functional or not; a non-functional block also
  makes every block sharing a node card with it unusable (reference §6.1).
* `--queue Q1:Q2`, `--appq Q`, `--rmq Q`: set, extend or shrink the queues a block serves. A
  queue listed on some blocks runs only there; other queues run on blocks listing none.
  A change that would leave a queue with waiting jobs nowhere to run is refused unless `-f`.
* `--fail` / `--unfail`: take components out of service (killing their jobs) and back.

* `--layout FILE`: make FILE (a queue layout, seed 002) the active queue configuration: each
  queue's partition and the common pool; the queue manager gets the queues and their size and
  time limits (cobaltlite/commands/layout.py). With `--dry-run --log LOG [--since 30d]` it
  only replays LOG under the active layout and under FILE and prints both (anyone).
  `--layout-clear` removes the active layout.

Listings (anyone): `-l` (Name, Queue, Size, Functional, Scheduled, State), `--dump` (every
block, deleted ones too, as JSON), `--xml` (the managed blocks in Cobalt's partition XML),
`--layout-show` (the active queue layout).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cobaltlite.commands import layout
from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    add_help_option,
    connect_system,
    format_table,
    print_lines,
    run_command,
)
from cobaltlite.commands.places import administer, places_with_queues, queue_names
from cobaltlite.machine.bgp_xml import bgp_xml_text
from cobaltlite.machine.description import BGPDescription
from cobaltlite.machine.wire import description_from_wire

PROG = "partadm"
LISTINGS = ("list", "dump", "xml")


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG, add_help=False,
        usage="partadm -a|-d|--enable|--disable|--activate|--deactivate PART ...\n"
              "       partadm --queue Q1:Q2|--appq Q|--rmq Q [-f] PART ...\n"
              "       partadm --fail|--unfail PART ...\n"
              "       partadm --layout FILE [-f] [--dry-run --log LOG [--since 30d]]\n"
              "       partadm --layout-clear\n"
              "       partadm -l|--dump|--xml|--layout-show",
        description="Administer cobaltlite partitions (blocks; node numbers on a flat "
                    "cluster). Changes need root or the admin group and survive a restart.",
        epilog="A list of parts is refused whole, nothing changed, if one is unknown. A queue "
               "listed on some blocks runs its jobs only there; queues listed nowhere run on "
               "blocks that list no queue. See docs/operator-guide.md, 'Machine "
               "administration'.")
    add_help_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("-a", dest="action", action="store_const", const="add",
                        help="add blocks (back) to the managed set")
    action.add_argument("-d", dest="action", action="store_const", const="delete",
                        help="delete blocks from the managed set: no longer listed, no job")
    action.add_argument("--enable", dest="action", action="store_const", const="enable",
                        help="let the scheduler place jobs on the blocks")
    action.add_argument("--disable", dest="action", action="store_const", const="disable",
                        help="place no new job on the blocks (running jobs go on)")
    action.add_argument("--activate", dest="action", action="store_const", const="activate",
                        help="mark the blocks functional again")
    action.add_argument("--deactivate", dest="action", action="store_const",
                        const="deactivate", help="mark the blocks not functional: no job on "
                        "them nor on any block sharing a node card with them")
    for name, what in (("queue", "serve exactly these queues"),
                       ("appq", "also serve these queues"),
                       ("rmq", "stop serving these queues")):
        action.add_argument(f"--{name}", metavar="Q1:Q2", help=f"the blocks {what}")
    action.add_argument("--fail", dest="action", action="store_const", const="fail",
                        help="take the parts out of service (\"failed diags\"): kill the jobs "
                        "on them and place nothing there until --unfail")
    action.add_argument("--unfail", dest="action", action="store_const", const="unfail",
                        help="put failed parts back in service")
    action.add_argument("--layout", metavar="FILE", type=Path,
                        help="make FILE the active queue layout (seed 002: queues with their "
                        "partitions, the common pool, tau_pf): missing queues are created and "
                        "each gets its job sizes and times as limits; kept across restarts")
    action.add_argument("--layout-show", dest="action", action="store_const",
                        const="layout-show", help="show the active queue layout: each queue's "
                        "partition, the sizes and times it takes, its priority and starvation "
                        "time, the common pool and tau_pf, and the nodes outside the layout")
    action.add_argument("--layout-clear", dest="action", action="store_const",
                        const="layout-clear", help="no queue layout any more: every queue "
                        "runs on the whole machine again (the queues and limits stay)")
    action.add_argument("-l", dest="action", action="store_const", const="list",
                        help="list the managed blocks: Name, Queue, Size, Functional, "
                        "Scheduled, State")
    action.add_argument("--dump", dest="action", action="store_const", const="dump",
                        help="print every block with all it has, deleted ones too, as JSON")
    action.add_argument("--xml", dest="action", action="store_const", const="xml",
                        help="print the managed blocks as Cobalt's partition XML")
    parser.add_argument("-f", "--force", action="store_true",
                        help="with --queue/--appq/--rmq/-d/--layout: even if a queue with "
                        "waiting jobs is left no block to run on")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --layout: change nothing; replay --log under the active "
                        "layout and under FILE with Qsim and print both side by side")
    parser.add_argument("--log", metavar="LOG", type=Path,
                        help="with --dry-run: the job log to replay (the instance's "
                        "accounting log, log/accounting.log, or any trace qsim reads)")
    parser.add_argument("--since", metavar="SPAN", default="30d",
                        help="with --dry-run: replay the jobs submitted since then: a span "
                        "back from now (30d, 12h, 90m; default 30d) or a date")
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help="a block name; for --fail/--unfail also a midplane (R00-M0) or a "
                        "node card (R00-M0-N04); on a flat cluster a node number")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


def _run(args: Any) -> int:
    if (args.dry_run or args.log is not None) and args.layout is None:
        raise CommandError("--dry-run and --log go with --layout FILE")
    if args.layout is not None:
        return _layout(args)
    for option in ("queue", "appq", "rmq"):
        if getattr(args, option) is not None:
            queues = queue_names(getattr(args, option), f"--{option}")
            return administer(option, _parts(args), queues, args.force)
    if args.action in ("layout-show", "layout-clear"):
        if args.parts:
            raise CommandError(f"--{args.action} takes no partition names")
        if args.action == "layout-clear":
            with connect_system() as system:
                system.set_queue_layout("", False)
            print("no queue layout: every queue runs on the whole machine")
            return 0
        return layout.show_layout()
    if args.action in LISTINGS:
        if args.parts:
            raise CommandError(f"{_option(args.action)} takes no partition names")
        return _list(args.action)
    parts = _parts(args)
    if args.action == "fail":
        return _fail(parts)
    if args.action == "unfail":
        with connect_system() as system:
            outcome = system.unfail(parts)
        print(f"back in service: {' '.join(parts)}")
        print(f"failed now: {' '.join(outcome['failed']) or 'none'}")
        return 0
    return administer(args.action, parts, force=args.force)


def _layout(args: Any) -> int:
    if args.parts:
        raise CommandError("--layout takes no partition names")
    if not args.dry_run:
        if args.log is not None:
            raise CommandError("--log goes with --dry-run")
        return layout.set_layout(args.layout, args.force)
    if args.log is None:
        raise CommandError("--dry-run needs --log LOG, the job log to replay")
    from cobaltlite.partitioning.whatif import since_moment  # the replay stack: only here

    try:
        since = since_moment(args.since)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return layout.dry_run(args.layout, args.log, since, "default")


def _parts(args: Any) -> list[str]:
    if not args.parts:
        raise CommandError("At least one partition must be supplied")
    return list(args.parts)


def _option(action: str) -> str:
    return {"list": "-l", "dump": "--dump", "xml": "--xml"}[action]


def _fail(parts: list[str]) -> int:
    with connect_system() as system:
        outcome = system.fail(parts)
    killed = outcome["killed"]
    print(f"failed: {' '.join(parts)}"
          + (f"; killed job(s) {' '.join(map(str, killed))}" if killed else ""))
    print(f"failed now: {' '.join(outcome['failed']) or 'none'}")
    return 0


def _list(action: str) -> int:
    if action == "xml":
        with connect_system() as system:
            description = description_from_wire(system.description())
            managed = {str(r["name"]) for r in system.partitions() if r["managed"]}
        if not isinstance(description, BGPDescription):
            raise CommandError("a flat cluster has no partition table; nodelist lists its nodes")
        blocks = tuple(b for b in description.blocks if b.name in managed)
        sys.stdout.write(bgp_xml_text(BGPDescription(description.name, blocks)))
        return 0
    rows = places_with_queues()
    if action == "dump":
        print(json.dumps(sorted(rows, key=lambda r: str(r["name"])), indent=2))
        return 0
    print_lines(admin_table(rows))
    return 0


def admin_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Cobalt's partadm -l: managed blocks, largest first; Functional `X`, or `-` when only a
    relative is out of order; Scheduled `X` or blank."""
    shown = sorted((r for r in rows if r["managed"]),
                   key=lambda r: (-int(r["size"]), str(r["name"])))
    return format_table(
        ["Name", "Queue", "Size", "Functional", "Scheduled", "State"],
        [[r["name"], r["queue"], r["size"],
          ("" if not r["functional"]
           else "-" if str(r["state"]).startswith("offline (a related") else "X"),
          "X" if r["scheduled"] else "", r["state"]] for r in shown])


if __name__ == "__main__":
    sys.exit(main())
