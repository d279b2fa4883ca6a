"""What the commands share: option parsing, exit codes, job ids, time specs, tables, per-job
results, the connection.

Exit codes follow Cobalt (reference §3.0): 0 success, 1 a validation or server error, 2 a usage
error (an unknown option or a malformed option value, as argparse reports it).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

from cobaltlite import __version__
from cobaltlite.config import instance_paths

Row = dict[str, Any]


class CommandError(Exception):
    """A failure reported as `<prog>: <message>` on stderr, exit status 1."""


class UsageError(Exception):
    """A command line argparse rejects; reported with the usage text, exit status 2."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class ParserExit(Exception):
    """argparse finished the command by itself (`--help`)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting, so `main()` returns its exit code.

    Cobalt's `-h` means "held" in qsub, so commands build it with add_help=False and declare
    `-h`/`--help` themselves (see `add_help_option`; qsub declares `--help` alone).
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage())

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise ParserExit(status)


def add_help_option(parser: argparse.ArgumentParser, short: bool = True) -> None:
    """The options every command has: --help (and -h too unless the command gives -h another
    meaning, qsub: held, as Cobalt) and --version."""
    names = ("-h", "--help") if short else ("--help",)
    parser.add_argument(*names, action="help", help="show this help and exit")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="show the cobaltlite version and exit")


def print_error(prog: str, message: str) -> None:
    print(f"{prog}: {message}", file=sys.stderr)


def run_command(prog: str, body: Callable[[], int]) -> int:
    """Run a command body; turn the failures every command shares into messages and exit codes."""
    try:
        status = body()
        # Flushed here, not at interpreter exit, so a reader that left is caught below.
        sys.stdout.flush()
        return status
    except ParserExit as exc:
        return exc.status
    except UsageError as exc:
        sys.stderr.write(exc.usage)
        print_error(prog, f"error: {exc}")
        return 2
    except CommandError as exc:
        print_error(prog, str(exc))
        return 1
    except BrokenPipeError:
        # The reader left (`qstat | head`): stop quietly, as a tool killed by SIGPIPE does.
        # Python would otherwise complain again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def run_listing(prog: str, description: str, argv: Sequence[str] | None,
                lines: Callable[[], Sequence[str]]) -> int:
    """A command without options but --help and --version that prints `lines()` (nodelist,
    slpstat)."""
    parser = CommandParser(prog=prog, add_help=False, description=description)
    add_help_option(parser)

    def body() -> int:
        parser.parse_args(argv)
        print_lines(lines())
        return 0
    return run_command(prog, body)


# ---- job ids -----------------------------------------------------------------------------------


def parse_jobids(args: Sequence[str], what: str = "Jobid(s)") -> list[int]:
    """Job ids in the order given, without repeats; Cobalt's messages for bad input."""
    if not args:
        raise CommandError(f"No {what} given")
    jobids: list[int] = []
    for arg in args:
        try:
            jobid = int(arg)
        except ValueError:
            raise CommandError(f"jobid must be an integer: {arg}") from None
        if jobid not in jobids:
            jobids.append(jobid)
    return jobids


def report_results(prog: str, results: Sequence[Row]) -> int:
    """Print the per-job answers of hold, release, alter, move, run and the score methods.

    Each result is `{"jobid", "ok", "message"}` with the message in Cobalt's words: successes
    go to stdout, failures to stderr as `<prog>: <message>`. Exit status 1 when any failed.
    """
    failed = False
    for result in results:
        message = result.get("message") or f"job {result['jobid']}: done"
        if result["ok"]:
            print(message)
        else:
            failed = True
            print_error(prog, message.strip())
    return 1 if failed else 0


# ---- time specifications ---------------------------------------------------------------------

_TIME_UNITS = {
    1: ("minutes",),
    2: ("hours", "minutes"),
    3: ("hours", "minutes", "seconds"),
    4: ("days", "hours", "minutes", "seconds"),
}
_UNIT_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
_DIGITS = re.compile(r"[0-9]+")


def parse_time(spec: str) -> int:
    """Cobalt's `M`, `HH:MM`, `HH:MM:SS` or `DD:HH:MM:SS` as seconds.

    Unlike Cobalt (`Util.get_time`), seconds are kept: `00:00:59` is 59 s, not 0 (= "queue
    maximum"), reference §10 item 10. The leading unit is unbounded; the others must be within
    their range. Raises CommandError("invalid time specification: ...").
    """
    parts = spec.split(":")
    units = _TIME_UNITS.get(len(parts))
    if units is None:
        raise CommandError("invalid time specification: time may be specified as minutes, "
                           "HH:MM, HH:MM:SS, or DD:HH:MM:SS")
    total = 0
    for position, (unit, text) in enumerate(zip(units, parts, strict=True)):
        if not _DIGITS.fullmatch(text):
            raise CommandError(f"invalid time specification: illegal value '{text}' for {unit}")
        value = int(text)
        limit = 23 if unit == "hours" else 59
        if position > 0 and value > limit:
            raise CommandError(f"invalid time specification: {unit} value '{text}' outside "
                               f"range [0, {limit}]")
        total += value * _UNIT_SECONDS[unit]
    return total


# ---- output ----------------------------------------------------------------------------------


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Cobalt's `print_tabular` (reference §3.2) as lines.

    Every cell is left-justified to its column's width and followed by two spaces (so lines end
    in two blanks, as Cobalt's did); under the header a line of `=` as wide as all the columns.
    Built a column at a time: qstat may print 10,000 rows.
    """
    padded = []
    for column in zip(header, *rows, strict=True):
        texts = [str(cell) for cell in column]
        width = max(map(len, texts))
        padded.append([text.ljust(width) for text in texts])
    lines = ["  ".join(cells) + "  " for cells in zip(*padded, strict=True)]
    lines.insert(1, "=" * sum(len(column[0]) + 2 for column in padded))
    return lines


def format_vertical(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Cobalt's `print_vertical`: per row `First: value`, then indented `Name : value` lines."""
    width = max(len(name) for name in header) + 1
    lines: list[str] = []
    for row in rows:
        lines.append(f"{header[0]}: {row[0]}")
        lines.extend(f"    {name:<{width}}: {value}"
                     for name, value in zip(header[1:], row[1:], strict=True))
        lines.append("")
    return lines


def read_input(path: Path, what: str) -> str:
    """A file the command line names, as text; CommandError `<what>: <why>` if it cannot be
    read (missing, unreadable, not text)."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{what}: {getattr(exc, 'strerror', None) or exc}") from None


def print_lines(lines: Sequence[str]) -> None:
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")


# ---- the queue manager -------------------------------------------------------------------------


class QueueManagerAPI(Protocol):
    """The queue manager's user API as the commands use it (cobaltlite.queue_manager.api)."""

    def submit(self, spec: dict[str, Any]) -> int: ...

    def jobs(self, jobids: list[int] | None = None,
             fields: Sequence[str] | None = None) -> list[Row]: ...

    def delete(self, jobids: list[int]) -> list[Row]: ...

    def queues(self) -> list[Row]: ...

    def limits(self) -> dict[str, Any]: ...


class UserSocketClient:
    """A component's face on a user socket; every failure becomes a CommandError with its reason.

    No identity is sent: the server asks the kernel who is on the other end of the socket.
    """

    component = "the queue manager"

    def __init__(self, proxy: Any, socket_path: str, instance: str) -> None:
        self._proxy = proxy
        self._socket_path = socket_path
        self._instance = instance

    def _call(self, method: str, *args: Any) -> Any:
        import Pyro5.errors  # imported by the first call: `--help` and bad options never load Pyro5

        try:
            return self._remote(method)(*args)
        except Pyro5.errors.CommunicationError as exc:
            raise CommandError(
                f"cannot reach {self.component} at {self._socket_path}: {exc} "
                f"(is `cobaltlite up` running? {self._instance})") from None
        # The server's refusals arrive as these builtins with a message meant for the user.
        except (ValueError, PermissionError, LookupError, RuntimeError) as exc:
            raise CommandError(str(exc)) from None
        except Pyro5.errors.PyroError as exc:
            raise CommandError(f"{self.component} failed: {exc}") from None

    def _remote(self, method: str) -> Any:
        """The remote method. Pyro5 checks the server's exposed methods first (connecting if
        need be), so a command newer than the running daemons is told so here."""
        try:
            return getattr(self._proxy, method)
        except AttributeError:
            raise CommandError(f"{self.component} at {self._socket_path} does not offer "
                               f"'{method}': it is older than this command (cobaltlite "
                               f"{__version__}); restart the daemons (`cobaltlite down`, "
                               f"`cobaltlite up`)") from None


class QueueManagerClient(UserSocketClient):
    """The queue manager's user API over the user socket."""

    def submit(self, spec: dict[str, Any]) -> int:
        return int(self._call("submit", spec))

    def jobs(self, jobids: list[int] | None = None,
             fields: Sequence[str] | None = None) -> list[Row]:
        table = self._call("jobs", jobids, list(fields) if fields else None)
        columns = table["columns"]
        return [dict(zip(columns, values, strict=True)) for values in table["rows"]]

    def delete(self, jobids: list[int], force: bool = False) -> list[Row]:
        # Only cqadm -f --kill forces; plain deletes use the call every server version takes.
        if force:
            return list(self._call("delete", jobids, True))
        return list(self._call("delete", jobids))

    def hold(self, jobids: list[int], kind: str) -> list[Row]:
        return list(self._call("hold", jobids, kind))

    def release(self, jobids: list[int], kind: str) -> list[Row]:
        return list(self._call("release", jobids, kind))

    def alter(self, jobids: list[int], changes: dict[str, Any]) -> list[Row]:
        return list(self._call("alter", jobids, changes))

    def move(self, jobids: list[int], queue: str) -> list[Row]:
        return list(self._call("move", jobids, queue))

    def run(self, jobids: list[int], location: str) -> list[Row]:
        return list(self._call("run", jobids, location))

    def adjust_scores(self, jobids: list[int], value: str) -> list[Row]:
        return list(self._call("adjust_scores", jobids, value))

    def set_dep_frac(self, jobids: list[int], fraction: float) -> list[Row]:
        return list(self._call("set_dep_frac", jobids, fraction))

    def set_next_jobid(self, jobid: int) -> None:
        self._call("set_next_jobid", jobid)

    def queues(self) -> list[Row]:
        return list(self._call("queues"))

    def add_queues(self, names: list[str]) -> None:
        self._call("add_queues", names)

    def delete_queues(self, names: list[str], force: bool = False) -> None:
        self._call("delete_queues", names, force)

    def set_queue_state(self, names: list[str], state: str) -> None:
        self._call("set_queue_state", names, state)

    def set_queue(self, names: list[str], settings: dict[str, str]) -> None:
        self._call("set_queue", names, settings)

    def unset_queue(self, names: list[str], keys: list[str]) -> None:
        self._call("unset_queue", names, keys)

    def limits(self) -> dict[str, Any]:
        return dict(self._call("limits"))

    def reread_policy(self) -> dict[str, Any]:
        return dict(self._call("reread_policy"))

    def set_queue_policy(self, queue: str, policy: str) -> None:
        self._call("set_queue_policy", queue, policy)

    def policy_status(self) -> dict[str, Any]:
        return dict(self._call("policy_status"))

    def add_reservation(self, request: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("add_reservation", request))

    def modify_reservation(self, request: dict[str, Any], defer: bool) -> dict[str, Any]:
        return dict(self._call("modify_reservation", request, defer))

    def release_reservations(self, names: list[str]) -> list[str]:
        return list(self._call("release_reservations", names))

    def user_release_reservation(self, name: str) -> list[str]:
        return list(self._call("user_release_reservation", name))

    def reservations(self) -> list[Row]:
        return list(self._call("reservations"))


class SystemControlClient(UserSocketClient):
    """The system's user API (partadm, partlist, nodeadm, nodelist;
    cobaltlite.system.api.SystemControlAPI)."""

    component = "the system"

    def partitions(self) -> list[Row]:
        return list(self._call("partitions"))

    def failure_status(self) -> dict[str, Any]:
        return dict(self._call("failure_status"))

    def fail(self, components: list[str]) -> dict[str, Any]:
        return dict(self._call("fail", components))

    def unfail(self, components: list[str]) -> dict[str, Any]:
        return dict(self._call("unfail", components))

    def administer(self, action: str, places: list[str], queues: list[str],
                   force: bool) -> dict[str, Any]:
        return dict(self._call("administer", action, places, queues, force))

    def description(self) -> dict[str, Any]:
        return dict(self._call("description"))

    def agents(self) -> list[Row]:
        return list(self._call("agents"))

    def set_queue_layout(self, yaml_text: str, dry_run: bool = False) -> dict[str, Any]:
        return dict(self._call("set_queue_layout", yaml_text, dry_run))

    def queue_layout(self) -> str | None:
        layout = self._call("queue_layout")
        return None if layout is None else str(layout)


class MetricsClient(UserSocketClient):
    """The metrics monitor's read-only user API (cqmetrics; metrics_monitor.monitor)."""

    component = "the metrics monitor"

    def latest(self) -> dict[str, Any] | None:
        found = self._call("latest")
        return None if found is None else dict(found)

    def since(self, time: float, limit: int) -> list[dict[str, Any]]:
        return list(self._call("since", time, limit))


def _instance_text(state_dir: Any) -> str:
    named = os.environ.get("COBALTLITE_STATE_DIR")
    return (f"COBALTLITE_STATE_DIR={named}" if named
            else f"COBALTLITE_STATE_DIR is unset, so {state_dir} is used")


_Client = TypeVar("_Client", bound=UserSocketClient)


@contextmanager
def _connect_user_socket(object_id: str, socket_path: Path, client: type[_Client]
                         ) -> Iterator[_Client]:
    from cobaltlite.rpc.client import connect  # Pyro5 and ssl: a third of a command's start-up

    config = instance_paths()
    with connect(f"PYRO:{object_id}@./u:{socket_path}") as proxy:
        yield client(proxy, str(socket_path), _instance_text(config.state_dir))


def connect_queue_manager() -> AbstractContextManager[QueueManagerClient]:
    """The queue manager of this instance (found through COBALTLITE_STATE_DIR, see config)."""
    return _connect_user_socket("queue-manager-user", instance_paths().user_socket,
                                QueueManagerClient)


def connect_system() -> AbstractContextManager[SystemControlClient]:
    """The system component of this instance, on its user socket."""
    return _connect_user_socket("system-control", instance_paths().system_admin_socket,
                                SystemControlClient)


def connect_metrics() -> AbstractContextManager[MetricsClient]:
    """The metrics monitor of this instance, on its user socket (read-only)."""
    return _connect_user_socket("metrics-user", instance_paths().metrics_user_socket,
                                MetricsClient)
