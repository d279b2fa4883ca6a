"""Real Unix accounts for tests that need two users and an admin group (created when missing).

The accounts stay on the machine afterwards; they have no home and no login shell.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import cobaltlite

ALICE = "cltest-alice"
BOB = "cltest-bob"
ADMINS = "cltest-admins"  # bob is a supplementary member, alice is not
REPO_ROOT = Path(cobaltlite.__file__).resolve().parents[1]


@dataclass(frozen=True)
class Accounts:
    python: str  # an interpreter these accounts may execute
    env: dict[str, str]  # lets that interpreter import Pyro5 and cobaltlite


def as_account(name: str) -> dict:
    """subprocess.run arguments that give the child the account's uid, gid and groups, as a login
    would (user= alone would leave it root's gid and groups)."""
    entry = pwd.getpwnam(name)
    return {
        "user": entry.pw_uid,
        "group": entry.pw_gid,
        "extra_groups": os.getgrouplist(name, entry.pw_gid),
    }


def _ensure(check: list[str], create: list[str]) -> None:
    if subprocess.run(check, capture_output=True).returncode == 0:
        return
    made = subprocess.run(create, capture_output=True, text=True)
    # A concurrent test run may have created it in the meantime.
    if made.returncode != 0 and subprocess.run(check, capture_output=True).returncode != 0:
        pytest.fail(f"{' '.join(create)} failed: {made.stderr.strip()}")


def ensure_test_users() -> Accounts:
    """Create the accounts if needed and find a Python they may run; skip when not root."""
    if os.geteuid() != 0:
        pytest.skip("creating test accounts and running clients as them needs root")
    _ensure(["getent", "group", ADMINS], ["groupadd", "--system", ADMINS])
    for name in (ALICE, BOB):
        _ensure(
            ["getent", "passwd", name],
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        )
    if BOB not in grp.getgrnam(ADMINS).gr_mem:
        subprocess.run(["usermod", "--append", "--groups", ADMINS, BOB], check=True)
    # PYTHONPATH instead of the venv's .pth files, because the venv's own interpreter may sit in a
    # directory these accounts cannot enter (e.g. under /root).
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    env = {"PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{site_packages}", "PATH": "/usr/bin:/bin"}
    probe = "import sys, Pyro5, cobaltlite.rpc.transport; assert sys.version_info >= (3, 11)"
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        try:
            ran = subprocess.run(
                [python, "-c", probe], **as_account(ALICE), env=env, capture_output=True, cwd="/"
            )
        except OSError:  # the account may not execute this interpreter at all
            continue
        if ran.returncode == 0:
            return Accounts(python=python, env=env)
    pytest.skip("no Python 3.11+ interpreter that the test accounts may run and import from")
