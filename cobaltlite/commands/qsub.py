"""qsub: submit a job to the queue manager (Cobalt's qsub, reference §3.1).

Options must precede the executable; everything after it is passed to the job. A script whose
first line starts with `#!` may carry options on lines `#COBALT <options>`; they apply as if given
before the command line's own options, so the command line wins, and the job's mode is `script`.
On success the job id alone is printed on stdout.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from cobaltlite.commands.common import (
    CommandError,
    CommandParser,
    QueueManagerAPI,
    UsageError,
    add_help_option,
    connect_queue_manager,
    parse_time,
    print_error,
    run_command,
)
from cobaltlite.commands.interactive import run_interactive

PROG = "qsub"
VALID_MODES = ("smp", "dual", "vn", "script")
DEFAULT_BINARY_MODE = "smp"
DEFAULT_UMASK = "022"
# What an interactive job runs: it only holds the place, the user works in qsub's shell.
INTERACTIVE_PLACEHOLDER = "/bin/sleep"
# Variables of the submitter's environment a job gets without asking (see the --help epilog).
INHERITED_ENV = ("PATH",)

_UNESCAPED_COLON = re.compile(r"(?<!\\):")
_UNESCAPED_EQUALS = re.compile(r"(?<!\\)=")

EPILOG = """\
time: M, HH:MM, HH:MM:SS or DD:HH:MM:SS (seconds are kept, unlike Cobalt); 0 means the
queue's maximum wall time (refused by a queue without one).

Script jobs: if the executable's first line starts with '#!', every line starting with
'#COBALT ' holds options (shell quoting; '#' starts a comment), applied as if given before
the command line's own options (the command line wins; --env and --attrs values are merged).
Such a job runs in mode 'script'.

Output: <cwd>/<jobid>.output, .error and .cobaltlog unless -O, -o or -e say otherwise; relative
paths are taken from the job's working directory.

Environment: the job gets the --env variables and the submitter's PATH (unless --env sets
PATH), plus the COBALT_* variables set when it starts; nothing else of the submitter's
environment is passed, as in Cobalt.

Exit status: 0 submitted (the job id is printed); 2 a command line or #COBALT line that
cannot be parsed (an unknown option, a malformed value, bad quoting, a #COBALT line holding
more than options); 1 a submission that parses but is refused (no executable, a missing
-t or -n, a value out of range, or the queue manager's refusal)."""


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog=PROG,
        usage="%(prog)s [options] <executable> [<args>]",
        description="Submit a job to the queue manager.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    add = parser.add_argument
    add("-n", "--nodecount", type=int, metavar="N", help="number of nodes (required)")
    add("-t", "--time", metavar="TIME",
        help="wall time limit: M, HH:MM, HH:MM:SS or DD:HH:MM:SS (required)")
    add("-q", "--queue", default="default",
        help="queue to submit to (default: %(default)s); under a queue layout (partadm "
             "--layout-show) a job sent to default lands in the queue that takes its size "
             "and time")
    add("-A", "--project", help="project (account) to charge")
    add("--proccount", type=int, metavar="N",
        help="number of processes (default: the node count)")
    add("--mode", help=f"execution mode, one of {', '.join(VALID_MODES)} "
        f"(default: {DEFAULT_BINARY_MODE}; script jobs are always 'script')")
    add("-d", "--cwd", metavar="DIR",
        help="working directory of the job (default: the current one)")
    add("-i", "--inputfile", metavar="FILE",
        help="the job's stdin, opened as you when the job starts (default: /dev/null)")
    add("-u", "--umask", metavar="OCTAL", help=f"umask of the job (default: {DEFAULT_UMASK})")
    add("--env", action="append", default=[], metavar="K=V[:K2=V2]",
        help="environment variables for the job; escape ':' and '=' in values as '\\:' and "
             "'\\=' (quoted from the shell: --env 'OPTS=a\\=1'); may be repeated (values "
             "are merged, later ones win)")
    add("-O", "--outputprefix", metavar="PREFIX",
        help="write PREFIX.output, PREFIX.error and PREFIX.cobaltlog")
    add("-o", "--output", metavar="FILE", help="file for the job's stdout")
    add("-e", "--error", metavar="FILE", help="file for the job's stderr")
    add("--jobname", help="job name shown by qstat (default: the -O/-o file name, else N/A)")
    add("-h", "--held", action="store_true",
        help="submit the job on user hold (release it with qrls)")
    add("--dependencies", metavar="ID[:ID]",
        help="job ids that must end successfully (exit status 0) before this job may run")
    add("--user_list", "--run_users", dest="user_list", metavar="USER[:USER]",
        help="other users who may control the job (you are always included)")
    add("--attrs", action="append", default=[], metavar="K=V[:FLAG]",
        help="job attributes; FLAG means FLAG=true and no_FLAG means FLAG=false; "
             "may be repeated (merged)")
    add("-M", "--notify", metavar="EMAIL", help="e-mail address for notices about the job")
    add("--geometry", metavar="AxBxCxD[xE]",
        help="Blue Gene partition shape in nodes, e.g. 4x4x4x2 (stored and shown)")
    add("--debuglog", metavar="FILE",
        help="file for the job's cobaltlog (default: <prefix>.cobaltlog)")
    add("--run_project", action="store_true",
        help="set the job's run_project flag (stored, as Cobalt did; nothing acts on it yet)")
    add("--preemptable", action="store_true",
        help="mark the job preemptable (stored and shown; the scheduler never preempts)")
    add("--disable_preboot", action="store_true",
        help="do not boot the job's place before it starts (stored; cobaltlite boots nothing)")
    add("-I", "--interactive", action="store_true",
        help="interactive job: wait for it to start, then open $SHELL in its environment "
             "with COBALT_NODEFILE; the job ends when the shell exits (no executable)")
    add("-v", "--verbose", action="store_true",
        help="print the submission sent to the queue manager on stderr")
    add_help_option(parser, short=False)  # -h is --held, as in Cobalt
    # Everything from the executable on belongs to the job, options included (Cobalt disables
    # interspersed arguments the same way).
    add("command", nargs=argparse.REMAINDER, help="the executable or script, then its arguments")
    return parser


class DirectiveError(UsageError, CommandError):
    """A #COBALT line that cannot be read as options: a bad command line (exit status 2), like
    a bad option on the real one, whichever way the line is wrong."""


# ---- pure parsing helpers ----------------------------------------------------------------------


def _unescape(text: str) -> str:
    return text.replace("\\:", ":").replace("\\=", "=")


def parse_env(values: Sequence[str]) -> dict[str, str]:
    """--env `K=V:K2=V2` (repeatable) as a dict; `\\:` and `\\=` escape the separators.

    A value may contain further `=` (split at the first one); an item without `=` or with an
    empty name is Cobalt's "Improperly formatted argument to env".
    """
    env: dict[str, str] = {}
    for value in values:
        for item in _UNESCAPED_COLON.split(value):
            pieces = _UNESCAPED_EQUALS.split(item, maxsplit=1)
            if len(pieces) != 2 or not pieces[0]:
                raise CommandError(f"Improperly formatted argument to env : {item}")
            env[_unescape(pieces[0])] = _unescape(pieces[1])
    return env


def parse_attrs(values: Sequence[str]) -> dict[str, str]:
    """--attrs `K=V:FLAG:no_FLAG` (repeatable, merged) as Cobalt reads them."""
    attrs: dict[str, str] = {}
    for value in values:
        for item in value.split(":"):
            key, equals, setting = item.partition("=")
            if not key or "=" in setting:
                raise CommandError(f"Improperly formatted argument to attrs : {item}")
            if equals:
                attrs[key] = setting
            elif key.startswith("no_") and len(key) > 3:
                attrs[key[3:]] = "false"
            else:
                attrs[key] = "true"
    return attrs


def parse_umask(text: str) -> int:
    try:
        value = int(text, 8)
    except ValueError:
        raise CommandError(f"Invalid umask value {text}") from None
    if not 0 <= value <= 0o777:
        raise CommandError(f"Invalid umask value {text}")
    return value


_GEOMETRY = re.compile(r"[0-9]+(x[0-9]+){3,4}")


def parse_geometry(text: str) -> str:
    """Cobalt's --geometry: four (BG/P) or five (BG/Q) dimensions joined by `x`."""
    if not _GEOMETRY.fullmatch(text):
        raise CommandError(f"Invalid geometry entered: {text} (expected AxBxCxD or AxBxCxDxE, "
                           "e.g. 4x4x4x2)")
    return text


def parse_dependencies(text: str) -> list[int]:
    try:
        return [int(dep) for dep in text.split(":")]
    except ValueError:
        raise CommandError(f"dependencies must be job ids separated by ':': {text}") from None


def parse_user_list(text: str) -> list[str]:
    users = text.split(":")
    for user in users:
        try:
            pwd.getpwnam(user)
        except KeyError:
            raise CommandError(f"user {user} does not exist.") from None
    return users


def read_directives(path: str) -> list[str] | None:
    """The options of a script's `#COBALT ` lines, or None when `path` is not a `#!` script."""
    try:
        with open(path, "rb") as stream:
            if stream.read(2) != b"#!":
                return None
            stream.seek(0)
            text = stream.read().decode(errors="replace")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    options: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#COBALT "):
            try:
                # Shell quoting rules, and a `#` starts a trailing comment.
                options.extend(shlex.split(line[len("#COBALT "):], comments=True))
            except ValueError as exc:
                raise DirectiveError(f"{path}:{number}: bad #COBALT directive: {exc}",
                                     build_parser().format_usage()) from None
    return options


def locate_executable(name: str, cwd: str) -> str:
    """The absolute path of the job's executable.

    Relative to the job's working directory, as Cobalt resolved it; a bare name that is not
    there is looked up in PATH.
    """
    path = os.path.join(cwd, name)
    if os.sep not in name and not os.path.exists(path):
        path = shutil.which(name) or path
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise CommandError(f"command {path} not found, or is not a file")
    if not os.access(path, os.X_OK):
        raise CommandError(f"command {path} is not executable")
    return path


# ---- the command line as a submission ------------------------------------------------------------


def parse_command_line(argv: Sequence[str]) -> tuple[argparse.Namespace, str, bool]:
    """Parse argv and the script's #COBALT directives: (options, executable path, is script)."""
    parser = build_parser()
    first = parser.parse_args(argv)
    command = _without_separator(first.command)
    if first.interactive:
        if command:
            raise CommandError("An executable may not be specified if using the interactive "
                               "option.")
        if first.inputfile:
            raise CommandError("Cannot specify an input file for interactive jobs.")
        # The job holds its place while the shell is open; it is deleted when the shell exits,
        # and the wall time ends it like any job.
        first.command = [INTERACTIVE_PLACEHOLDER]
        return first, INTERACTIVE_PLACEHOLDER, False
    if not command:
        raise CommandError("No executable or script specified")
    # The script is found from the command line's --cwd: its directives are not read yet.
    cwd = os.path.abspath(first.cwd or os.getcwd())
    if not os.path.isdir(cwd):
        raise CommandError(f"directory {cwd} does not exist")
    executable = locate_executable(command[0], cwd)
    directives = read_directives(executable)
    if directives is None:
        first.command = command
        return first, executable, False
    try:
        from_script = parser.parse_args(directives)
    except UsageError as exc:
        raise UsageError(f"in the #COBALT directives of {executable}: {exc}", exc.usage) from None
    if from_script.command:
        raise DirectiveError(f"#COBALT directives of {executable} may hold only options, not "
                             f"{shlex.join(from_script.command)}", parser.format_usage())
    # Parsing the command line into the directives' namespace keeps every directive value the
    # command line does not override, and appends the command line's --env/--attrs to theirs.
    merged = parser.parse_args(argv, namespace=from_script)
    merged.command = command
    return merged, executable, True


def _without_separator(command: list[str]) -> list[str]:
    """argparse leaves a leading `--` in the remainder; it only marks where options end."""
    return command[1:] if command[:1] == ["--"] else command


def _in_cwd(path: str, cwd: str) -> str:
    return os.path.abspath(os.path.join(cwd, path))


def _check_parent(path: str) -> None:
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise CommandError(f"directory {parent} does not exist")


def build_submission(
    args: argparse.Namespace, executable: str, is_script: bool, environ: dict[str, str]
) -> dict[str, Any]:
    """The submit spec the queue manager takes, checked as far as the client can check it."""
    if args.time is None:
        raise CommandError("'time' not provided")
    if args.nodecount is None:
        raise CommandError("'nodecount' not provided")
    # 0 is Cobalt's "the queue's maximum": the queue manager, which knows the queue, decides.
    walltime = parse_time(args.time)
    if args.nodecount <= 0:
        raise CommandError(f"nodecount is {args.nodecount} which is <= zero")
    procs = args.nodecount if args.proccount is None else args.proccount
    if procs <= 0:
        raise CommandError(f"proccount is {procs} which is <= zero")
    if is_script:
        if args.mode not in (None, "script"):
            raise CommandError(f"mode '{args.mode}' given for a script; script jobs always run "
                               f"in mode 'script'")
        mode = "script"
    else:
        mode = args.mode or DEFAULT_BINARY_MODE
        if mode not in VALID_MODES:
            raise CommandError(f"Specified mode '{mode}' not valid, valid modes are: "
                               f"{', '.join(VALID_MODES)}")
    cwd = os.path.abspath(args.cwd or os.getcwd())
    if not os.path.isdir(cwd):
        raise CommandError(f"directory {cwd} does not exist")

    # `$jobid` is replaced by the queue manager once the id exists.
    prefix = _in_cwd(args.outputprefix, cwd) if args.outputprefix else os.path.join(cwd, "$jobid")
    outputpath = _in_cwd(args.output, cwd) if args.output else f"{prefix}.output"
    errorpath = _in_cwd(args.error, cwd) if args.error else f"{prefix}.error"
    cobaltlog = _in_cwd(args.debuglog, cwd) if args.debuglog else f"{prefix}.cobaltlog"
    for path in (outputpath, errorpath, cobaltlog):
        _check_parent(path)
    if args.jobname:
        jobname = args.jobname
    elif args.outputprefix or args.output:
        # Cobalt names a job after its output file when no name is given.
        jobname = os.path.basename(args.outputprefix or args.output).split(".")[0] or "N/A"
    else:
        jobname = "N/A"

    env = {key: environ[key] for key in INHERITED_ENV if key in environ}
    env.update(parse_env(args.env))
    attrs = parse_attrs(args.attrs)

    spec: dict[str, Any] = {
        "nodes": args.nodecount,
        "walltime": walltime,
        "command": executable,
        # An interactive job sleeps until qsub deletes it or its wall time (maybe the queue's
        # maximum, -t 0, known only to the queue manager) runs out.
        "args": ["infinity"] if args.interactive else list(args.command[1:]),
        "cwd": cwd,
        "jobname": jobname,
        "queue": args.queue,
        "procs": procs,
        "mode": mode,
        "env": env,
        "umask": parse_umask(args.umask or DEFAULT_UMASK),
        "outputpath": outputpath,
        "errorpath": errorpath,
        "cobaltlog": cobaltlog,
        "user_hold": bool(args.held),
        "attrs": attrs,
    }
    if args.project:
        spec["project"] = args.project
    if args.notify:
        spec["notify"] = args.notify
    if args.geometry:
        spec["geometry"] = parse_geometry(args.geometry)
    if args.dependencies:
        spec["dependencies"] = parse_dependencies(args.dependencies)
    if args.user_list:
        spec["user_list"] = parse_user_list(args.user_list)
    if args.inputfile:
        inputfile = _in_cwd(args.inputfile, cwd)
        if not os.path.isfile(inputfile):
            raise CommandError(f"file {inputfile} not found, or is not a file")
        spec["inputfile"] = inputfile
    # Sent only when asked for, so a plain submission is what every server version takes.
    if args.debuglog:
        spec["debuglog"] = cobaltlog
    for flag in ("run_project", "preemptable", "disable_preboot"):
        if getattr(args, flag):
            spec[flag] = True
    return spec


def submit(qm: QueueManagerAPI, spec: dict[str, Any], verbose: bool) -> int:
    """Check what needs the server's knowledge, submit, print the job id and return it."""
    limits = qm.limits()
    if spec["nodes"] > limits["max_job_nodes"]:
        raise CommandError(f"node count out of realistic range: {spec['nodes']} (at most "
                           f"{limits['max_job_nodes']} nodes on {limits['machine']})")
    dependencies = spec.get("dependencies", [])
    if dependencies:
        known = {row["jobid"] for row in qm.jobs(dependencies)}
        missing = [str(dep) for dep in dependencies if dep not in known]
        if missing:
            print_error(PROG, f"WARNING: dependencies {':'.join(missing)} do not match jobs "
                              f"currently in the queue")
    if verbose:
        for key in sorted(spec):
            value = f"{spec[key]:#o}" if key == "umask" else repr(spec[key])
            print(f"{PROG}: {key} = {value}", file=sys.stderr)
    jobid = qm.submit(spec)
    print(jobid, flush=True)
    return jobid


def _main(argv: Sequence[str]) -> int:
    args, executable, is_script = parse_command_line(argv)
    spec = build_submission(args, executable, is_script, dict(os.environ))
    with connect_queue_manager() as qm:
        jobid = submit(qm, spec, args.verbose)
        if args.interactive:
            return run_interactive(qm, jobid)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(PROG, lambda: _main(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
