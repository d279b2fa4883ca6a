"""`schedctl`: start, stop or show the scheduler (starting and stopping need admin rights)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from Pyro5.errors import CommunicationError

from cobaltlite.config import load_config
from cobaltlite.errors import CobaltliteError
from cobaltlite.rpc.transport import connect


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="schedctl",
        description="Control the cobaltlite scheduler. --start and --stop need root or the "
        "configured admin group; --status is open to everyone.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--start", action="store_true", help="resume scheduling passes")
    action.add_argument("--stop", action="store_true",
                        help="stop starting jobs (running jobs go on; queued jobs wait)")
    action.add_argument("--status", action="store_true", help="show whether scheduling is on")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config()
    except CobaltliteError as exc:
        print(f"schedctl: {exc}", file=sys.stderr)
        return 1
    scheduler = connect(f"PYRO:scheduler-control@./u:{config.admin_socket}")
    try:
        if args.start:
            scheduler.start()
            print("Job Scheduling: ENABLED")
        elif args.stop:
            scheduler.stop()
            print("Job Scheduling: DISABLED")
        else:
            status = scheduler.status()
            print(f"Job Scheduling: {'ENABLED' if status['active'] else 'DISABLED'}")
            print(f"passes: {status['passes']}, every {status['interval']:g} s, "
                  f"backfilling: {status['backfill']}")
            if status["last_error"]:
                print(f"last pass failed: {status['last_error']}")
    except PermissionError as exc:
        print(f"schedctl: {exc}", file=sys.stderr)
        return 1
    except (CommunicationError, OSError) as exc:
        print(f"schedctl: cannot reach the scheduler at {config.admin_socket}: {exc} "
              "(is `cobaltlite up` running?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
