"""One user cannot keep the queue manager's workers from other users (hardening issue, item 3).

Every connection to a Pyro5 daemon holds one worker thread for its life. Before the fix, one
account could hold all 80 with connections that trickle a byte every few seconds (each byte
resets a per-read timeout) or that make a call every few seconds (never idle), and every other
user was refused with "no free workers". These tests do exactly that as a real test account
against the real daemons, and check that another account is served meanwhile.
"""

from __future__ import annotations

import subprocess
import textwrap
import time
from collections.abc import Iterator

import pytest
from live import Instance
from unix_users import ALICE, BOB, Accounts, as_account, ensure_test_users

# Opens CONNECTIONS connections to the user socket as the account running it. "trickle" sends
# a Pyro5 header one byte at a time, every 4 s (under the 5 s per-read timeout);
# "calls" completes the handshake and makes a cheap call every 2 s (under the 10 s idle limit).
HOG = textwrap.dedent("""
    import socket, sys, threading, time
    mode, path, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    end = time.monotonic() + seconds
    refused = 0
    def trickle():
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        for byte in b"PYRO" + bytes(36):
            if time.monotonic() > end:
                return
            try:
                s.send(bytes([byte]))
            except OSError:
                return
            time.sleep(4)
    def calls():
        global refused
        from cobaltlite.rpc.client import connect
        try:
            proxy = connect(f"PYRO:queue-manager-user@./u:{path}")
            while time.monotonic() < end:
                proxy.jobs(None, ["jobid"])
                time.sleep(2)
        except Exception:
            refused += 1
    threads = [threading.Thread(target=trickle if mode == "trickle" else calls, daemon=True)
               for _ in range(count)]
    for t in threads:
        t.start()
        time.sleep(0.01)
    time.sleep(max(0.0, end - time.monotonic()))
    print(refused)
""")


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance().start()
    yield running
    running.stop()


def hog(instance: Instance, accounts: Accounts, mode: str, seconds: float) -> subprocess.Popen:
    env = {**accounts.env, "COBALTLITE_STATE_DIR": str(instance.state_dir)}
    return subprocess.Popen(
        [accounts.python, "-c", HOG, mode, str(instance.state_dir / "sockets" / "user.sock"),
         "100", str(seconds)], env=env, cwd="/", stdout=subprocess.PIPE, text=True,
        **as_account(ALICE))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["trickle", "calls"])
def test_another_user_is_served_while_one_user_opens_a_hundred_connections(
    instance: Instance, accounts: Accounts, mode: str
) -> None:
    hogging = hog(instance, accounts, mode, seconds=20)
    try:
        time.sleep(3)  # every connection is open and holding what it can
        for _ in range(4):
            ran = instance.command("qstat", account=BOB, accounts=accounts)
            assert ran.returncode == 0, f"bob was not served while alice hogged: {ran.stderr}"
            time.sleep(1)
    finally:
        out, _ = hogging.communicate(timeout=60)
    if mode == "calls":
        # Alice's own connections beyond the limit were refused with a message, not queued.
        assert int(out) > 0
