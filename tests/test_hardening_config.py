"""A database server that never answers, and a database password in a readable config
(hardening issue, items 9 and 2), against the real `cobaltlite up` and `down`."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port on loopback that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def instance_dir(config: str, mode: int = 0o644) -> Path:
    state = Path(tempfile.mkdtemp(prefix="cltest-config-", dir="/tmp"))
    (state / "cobaltlite.yaml").write_text(config)
    (state / "cobaltlite.yaml").chmod(mode)
    return state


def cobaltlite(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.cli", "--state-dir", str(state),
                           *args], capture_output=True, text=True, timeout=timeout)


def queue_manager_pid(state: Path) -> int | None:
    pid_file = state / "run" / "queue-manager.pid"
    with contextlib.suppress(FileNotFoundError, ValueError):
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        return pid
    return None


def test_a_silent_database_server_fails_the_start_with_a_message(silent_server: int) -> None:
    state = instance_dir(f"database: postgresql+psycopg://postgres@127.0.0.1:{silent_server}/x\n")
    try:
        ran = cobaltlite(state, "up")
        assert ran.returncode != 0
        assert "queue-manager" in ran.stdout + ran.stderr
        assert "timeout" in (ran.stdout + ran.stderr).lower()
        assert queue_manager_pid(state) is None
    finally:
        cobaltlite(state, "down")


def test_down_stops_a_queue_manager_whose_start_hangs(silent_server: int) -> None:
    state = instance_dir(f"database: postgresql+psycopg://postgres@127.0.0.1:{silent_server}/x\n")
    starting = subprocess.Popen([sys.executable, "-m", "cobaltlite.daemon", "queue-manager",
                                 "--state-dir", str(state)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while queue_manager_pid(state) is None:
            assert time.monotonic() < deadline, "the queue manager never wrote its pid file"
            time.sleep(0.1)
        time.sleep(1)  # it is now waiting on the silent server
        assert starting.poll() is None
        cobaltlite(state, "down")
        # It ends at once, not after the connect timeout.
        starting.wait(timeout=5)
    finally:
        starting.kill()
        starting.communicate()


def test_a_database_password_in_a_readable_config_is_refused() -> None:
    state = instance_dir("database: postgresql+psycopg://postgres:hunter2@127.0.0.1:5432/test\n")
    try:
        ran = subprocess.run([sys.executable, "-m", "cobaltlite.daemon", "queue-manager",
                              "--state-dir", str(state)], capture_output=True, text=True,
                             timeout=60)
        assert ran.returncode == 1
        assert "holds a password and the file is readable by other accounts (mode 0644)" \
            in ran.stderr
        assert "hunter2" not in ran.stderr
    finally:
        cobaltlite(state, "down")
