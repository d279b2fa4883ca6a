"""The README's commands, copied in order into a fresh clone, work and print what it says
(new-user issue, "What must be shown").

Each ```sh block after "Start it" is split into the commands a reader would paste: lines joined
at a trailing backslash, a here-document kept whole. They run in a fresh `git clone` of this
repository, on a fresh instance (COBALTLITE_STATE_DIR), with `../shared` pointing at the real
shared folder. Two things differ from a reader's session, on purpose: the install steps before
`cobaltlite up` are left out (this suite runs from the installed checkout already), and a command
that fails is tried again for up to 30 s, as a reader would re-run `cat 1.output` once the job
has ended; a command that never succeeds fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from shared_paths import SHARED

REPO = Path(__file__).resolve().parents[1]
RETRY_SECONDS = 30.0


def readme_commands(text: str) -> list[str]:
    """The commands of every ```sh block from "## Start it" on, in order."""
    start = text.index("## Start it")
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text[start:], flags=re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            command = lines[i]
            heredoc = re.search(r"<<'?(\w+)'?", command)
            if heredoc:
                end = lines.index(heredoc.group(1), i + 1)
                command = "\n".join(lines[i:end + 1])
                i = end
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + lines[i]
            commands.append(command)
            i += 1
    return commands


def as_in_this_suite(command: str) -> str | None:
    """The command as this suite runs it; None for the test command itself."""
    if command.startswith("python3 -m venv"):
        # Install chains: `... && cobaltlite up` runs from this suite's installed checkout, and
        # `... && pytest` is this suite.
        return "cobaltlite up" if command.endswith("cobaltlite up") else None
    return command.replace("../shared/", f"{SHARED}/")


def test_the_readme_commands_work_in_order_in_a_fresh_clone() -> None:
    if not (SHARED / "traces").is_dir():
        pytest.skip(f"the shared traces are not at {SHARED}")
    work = Path(tempfile.mkdtemp(prefix="cltest-readme-"))
    clone = work / "cobaltlite"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    state = work / "instance"
    # The README's own copy is what a reader sees; the clone's is the same file once committed.
    text = (REPO / "README.md").read_text()
    env = {**os.environ, "COBALTLITE_STATE_DIR": str(state),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs: dict[str, str] = {}
    try:
        for pasted in readme_commands(text):
            command = as_in_this_suite(pasted)
            if command is None:
                continue
            deadline = time.monotonic() + RETRY_SECONDS
            while True:
                ran = subprocess.run(["bash", "-c", command], cwd=clone, env=env,
                                     capture_output=True, text=True, timeout=300)
                if ran.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert ran.returncode == 0, f"{command!r} exited {ran.returncode}:\n{ran.stderr}"
            outputs[command] = ran.stdout
        # What the README says they print.
        assert "queue-manager" in outputs["cobaltlite up"]
        assert outputs[next(c for c in outputs if c.startswith("qsub hello.sh"))].strip() == "1"
        assert outputs[next(c for c in outputs if c.startswith("cat 1.output"))].startswith(
            "job 1 on nodes ")
        assert "wfp3_site" in outputs[next(c for c in outputs if "--reread-policy" in c)]
        assert (clone / "out" / "unicef" / "summary.json").is_file()
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True,
                                text=True, check=True)
        # Job output and qsim's out/ are ignored; only the example script is new.
        assert status.stdout.splitlines() == ["?? hello.sh"], status.stdout
    finally:
        subprocess.run([sys.executable, "-m", "cobaltlite.cli", "--state-dir", str(state),
                        "down", "--kill-jobs"], capture_output=True, timeout=120)
