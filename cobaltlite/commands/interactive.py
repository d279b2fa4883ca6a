"""qsub -I: an interactive job (Cobalt's qsub, reference §3.1).

After the submission qsub waits until the job runs, then opens the user's shell ($SHELL, else
/bin/sh) in the job's working directory with the job's environment, COBALT_JOBID, the place's
COBALT_PARTNAME and sizes, and COBALT_NODEFILE (a file naming the job's nodes, one a line). When
the shell exits, qsub deletes the job and exits with the shell's status. A job that ends before
it starts (deleted, refused) ends the wait with status 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

from cobaltlite.commands.common import CommandError, QueueManagerClient, Row
from cobaltlite.machine.bits import iter_bits, ranges_to_mask

POLL_SECONDS = 1.0
WAIT_FIELDS = ["jobid", "state", "location", "nodes", "env", "cwd"]


def wait_until_running(qm: QueueManagerClient, jobid: int) -> Row:
    """The job's row once it runs; CommandError when it ends without running."""
    shown = None
    while True:
        rows = qm.jobs([jobid], WAIT_FIELDS)
        if not rows:
            raise CommandError(f"job {jobid} left the queue before it started")
        job = rows[0]
        if job["state"] == "running":
            return job
        if job["state"] in ("done", "exiting", "killing"):
            raise CommandError(f"job {jobid} ended before it started ({job['state']})")
        if job["state"] != shown:
            print(f"Wait for job {jobid} to start... ({job['state']})", file=sys.stderr)
            shown = job["state"]
        time.sleep(POLL_SECONDS)


def node_names(location: str) -> list[str]:
    """The nodes of a place: each node of a flat machine's range (`0-3,8`), else the Blue
    Gene partition's name (its nodes are not separately addressable)."""
    try:
        return [str(node) for node in iter_bits(ranges_to_mask(location))]
    except ValueError:
        return [location]


def shell_environment(job: Row, jobid: int, nodefile: str, environ: dict[str, str]
                      ) -> dict[str, str]:
    env = {**environ, **(job.get("env") or {})}
    location = job["location"] or ""
    env.update({
        "COBALT_JOBID": str(jobid),
        "COBALT_NODEFILE": nodefile,
        "COBALT_PARTNAME": location,
        "COBALT_JOBSIZE": str(job["nodes"]),
        "COBALT_PARTSIZE": str(len(node_names(location))),
    })
    return env


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_interactive(qm: QueueManagerClient, jobid: int) -> int:
    """Wait for the job, run the shell in it, end the job; the shell's exit status."""
    try:
        job = wait_until_running(qm, jobid)
        with tempfile.NamedTemporaryFile("w", prefix=f"cobalt-{jobid}-", suffix=".nodes",
                                         delete=False) as nodefile:
            nodefile.write("".join(f"{name}\n" for name in node_names(job["location"] or "")))
        try:
            env = shell_environment(job, jobid, nodefile.name, dict(os.environ))
            shell = os.environ.get("SHELL") or "/bin/sh"
            # The job's directory, unless this host cannot see it (then qsub's own).
            cwd = job["cwd"] if job.get("cwd") and os.path.isdir(job["cwd"]) else None
            # ^C belongs to the shell (it reaches both through the terminal); qsub must live
            # on to end the job when the shell exits.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                status = subprocess.call([shell], env=env, cwd=cwd, preexec_fn=_default_sigint)
            finally:
                signal.signal(signal.SIGINT, previous)
        finally:
            os.unlink(nodefile.name)
    except KeyboardInterrupt:
        status = 130
    finally:
        # The job exists only for the shell: end it whatever happened to the shell.
        with contextlib.suppress(CommandError):
            qm.delete([jobid])
    return status
