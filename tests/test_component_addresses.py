"""Components at fixed addresses from `addresses:`: loopback TCP, a Unix socket elsewhere, and
configurations `cobaltlite up` refuses before starting anything."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from live import Instance

from cobaltlite.config import COMPONENTS, load_config
from cobaltlite.rpc.peers import Peer


def tcp_addresses() -> dict[str, str]:
    """One free loopback port per component, in each form the option takes ([::1] if this host
    has IPv6 loopback)."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        v6 = ("[::1]", "::1", socket.AF_INET6)
    except OSError:
        v6 = ("127.0.0.1", "127.0.0.1", socket.AF_INET)
    forms = {  # component: (as written, bound to find a free port, family)
        "queue-manager": ("127.0.0.1", "127.0.0.1", socket.AF_INET),
        "system": v6,
        "scheduler": ("localhost", "127.0.0.1", socket.AF_INET),
        "metrics-monitor": ("127.0.0.1", "127.0.0.1", socket.AF_INET),
    }
    addresses = {}
    # Every probe stays bound until all ports are drawn, so no two components get one port.
    with contextlib.ExitStack() as held:
        for component, (written, bound, family) in forms.items():
            probe = held.enter_context(socket.socket(family, socket.SOCK_STREAM))
            probe.bind((bound, 0))
            addresses[component] = f"tcp:{written}:{probe.getsockname()[1]}"
    return addresses


def status(instance: Instance) -> subprocess.CompletedProcess[str]:
    # Wide enough that rich does not fold an address across two lines.
    return subprocess.run([sys.executable, "-m", "cobaltlite.cli", "status"],
                          env={**instance.env, "COLUMNS": "300"}, capture_output=True,
                          text=True, timeout=60)


def run_a_job(instance: Instance) -> None:
    """qsub a script that exits 0, and see it end so in the database, qstat and accounting."""
    script = instance.jobs_dir / "ok.sh"
    script.write_text("#!/bin/sh\necho fine\n")
    script.chmod(0o755)
    jobid = instance.qsub("-n", "1", "-t", "5", str(script))
    done = instance.wait_for(jobid, {"done"})
    assert done["exit_status"] == 0, done
    assert (instance.jobs_dir / f"{jobid}.output").read_text() == "fine\n"
    shown = instance.command("qstat", "-f", str(jobid))
    assert shown.returncode == 0, shown.stderr
    assert re.search(rf"^{jobid}\b.*\bdone\b", shown.stdout, re.MULTILINE), shown.stdout
    log = (instance.state_dir / "log" / "accounting.log").read_text()
    assert re.search(rf";E;{jobid};.*Exit_status=0\b", log), log


@pytest.fixture(scope="module")
def tcp_instance() -> Iterator[tuple[Instance, dict[str, str]]]:
    addresses = tcp_addresses()
    running = Instance(settings={"addresses": addresses}).start()
    yield running, addresses
    running.stop()


def test_components_on_loopback_tcp_ports_run_a_job(
    tcp_instance: tuple[Instance, dict[str, str]],
) -> None:
    instance, addresses = tcp_instance
    run_a_job(instance)
    # Only the user sockets remain in sockets/: the components really listen on TCP.
    sockets = {p.name for p in (instance.state_dir / "sockets").iterdir()}
    assert sockets == {"user.sock", "scheduler-user.sock", "system-user.sock",
                       "metrics-user.sock"}
    config = load_config(instance.state_dir)
    for component in COMPONENTS:
        assert str(config.address(component)) == addresses[component]
        assert Peer(config, component, timeout=10).ping() == component


def test_status_shows_where_each_component_listens(
    tcp_instance: tuple[Instance, dict[str, str]],
) -> None:
    instance, addresses = tcp_instance
    shown = status(instance)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    for component, address in addresses.items():
        row = next(line for line in shown.stdout.splitlines() if f" {component} " in line)
        assert address in row, shown.stdout


def test_a_component_on_a_unix_socket_outside_the_state_directory() -> None:
    directory = Path(tempfile.mkdtemp(prefix="cltest-sockets-", dir="/tmp"))
    path = directory / "system.sock"
    instance = Instance(settings={"addresses": {"system": f"unix:{path}"}})
    try:
        instance.start()
        run_a_job(instance)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not (instance.state_dir / "sockets" / "system.sock").exists()
        shown = status(instance)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert f"unix:{path}" in shown.stdout
    finally:
        instance.stop()
        shutil.rmtree(directory, ignore_errors=True)
    assert not path.exists(), "the socket outlived its daemon"


def daemons_of(state_dir: Path) -> list[int]:
    """Pids of processes whose command line names `state_dir` (a started component would)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(state_dir).encode() in cmdline:
                found.append(int(entry.name))
    return found


def up_with(config_text: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    (state_dir / "cobaltlite.yaml").write_text(config_text)
    # Wide, so that rich prints each message on one line.
    return subprocess.run([sys.executable, "-m", "cobaltlite.cli", "up"],
                          env={**os.environ, "COBALTLITE_STATE_DIR": str(state_dir),
                               "COLUMNS": "1000"},
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="cltest-addr-", dir="/tmp"))
    yield made
    for pid in daemons_of(made):  # only if a test failed: nothing should have started
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(made, ignore_errors=True)


BAD = [
    ({"system": "tcp:10.0.0.5:7000"}, "addresses.system: 'tcp:10.0.0.5:7000' is not a loopback "
     "address; the component secret would cross the network in clear"),
    ({"system": "tcp:example.org:7000"}, "'tcp:example.org:7000' is not a loopback address"),
    ({"sched": "tcp:127.0.0.1:7000"}, "addresses: unknown component 'sched'; known: "
     "queue-manager, system, scheduler, metrics-monitor"),
    ({"system": "tcp:127.0.0.1:70000"}, "addresses.system: 'tcp:127.0.0.1:70000' has port "
     "70000, outside 1-65535"),
    ({"system": "tcp:127.0.0.1:0"}, "addresses.system: 'tcp:127.0.0.1:0' has port 0"),
    ({"system": "tcp:127.0.0.1"}, "addresses.system: 'tcp:127.0.0.1' has no host and port"),
    ({"system": "tcp:::1:7000"}, "IPv6 address without brackets"),
    ({"system": "unix:run/system.sock"}, "addresses.system: 'unix:run/system.sock' is not an "
     "absolute path"),
    ({"system": "unix:/run/" + "x" * 120}, "longer than the 107 bytes"),
    ({"system": "udp:127.0.0.1:7000"}, "addresses.system: 'udp:127.0.0.1:7000' is neither "
     "unix:/ABSOLUTE/PATH nor tcp:HOST:PORT"),
    ({"system": 7000}, "addresses.system: 7000 is not a string"),
    ({"system": "tcp:127.0.0.1:7000", "scheduler": "tcp:127.0.0.1:7000"},
     "addresses.scheduler: 'tcp:127.0.0.1:7000' is already the address of system"),
    ({"system": "tcp:127.0.0.1:7000", "scheduler": "tcp:localhost:7000"},
     "addresses.scheduler: 'tcp:localhost:7000' is already the address of system"),
    ({"scheduler": "unix:{state}/sockets/user.sock"},
     "addresses.scheduler: 'unix:{state}/sockets/user.sock' is already the user socket"),
    ({"system": "unix:{state}/sockets/metrics-user.sock"},
     "addresses.system: 'unix:{state}/sockets/metrics-user.sock' is already the cqmetrics socket"),
    ({"scheduler": "unix:{state}/sockets/../sockets/system.sock"},
     "is already the default socket of system"),
    (["system"], "option addresses: expected a mapping of component: address"),
]


@pytest.mark.parametrize(("addresses", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_addresses_option_is_refused_and_nothing_starts(
    addresses: object, message: str, state_dir: Path
) -> None:
    text = yaml.safe_dump({"addresses": addresses}, sort_keys=False)
    ran = up_with(text.replace("{state}", str(state_dir)), state_dir)
    assert ran.returncode != 0
    assert f"{state_dir / 'cobaltlite.yaml'}: " in ran.stderr
    assert message.replace("{state}", str(state_dir)) in ran.stderr, ran.stderr
    assert not (state_dir / "run").exists()
    assert not (state_dir / "secret").exists()
    assert daemons_of(state_dir) == []


def test_a_socket_directory_other_accounts_may_write_is_refused(state_dir: Path) -> None:
    # /tmp is world-writable: anyone could bind system.sock there first and collect the secret.
    ran = up_with(f"addresses: {{system: 'unix:/tmp/{state_dir.name}-system.sock'}}\n", state_dir)
    assert ran.returncode != 0
    assert f"unix:/tmp/{state_dir.name}-system.sock: directory /tmp " in ran.stderr, ran.stderr
    assert "may be written by another account" in ran.stderr
    assert daemons_of(state_dir) == []
    assert not any((state_dir / "run").iterdir())


def test_a_missing_socket_directory_is_refused(state_dir: Path) -> None:
    ran = up_with("addresses: {system: 'unix:/nonexistent-cobaltlite/system.sock'}\n", state_dir)
    assert ran.returncode != 0
    assert "directory /nonexistent-cobaltlite does not exist" in ran.stderr, ran.stderr
    assert daemons_of(state_dir) == []


def test_a_port_taken_by_another_program_stops_up_at_once_and_says_where(
    state_dir: Path,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        ran = up_with(f"addresses: {{system: 'tcp:127.0.0.1:{port}'}}\n", state_dir)
    assert ran.returncode != 0
    assert "system: exited with status 1" in ran.stdout, ran.stdout + ran.stderr
    # The reason is shown by `up` itself, not only in the log.
    assert f"cannot listen on tcp:127.0.0.1:{port}: Address already in use" in ran.stdout
    log = (state_dir / "log" / "system.log").read_text()
    assert f"cannot listen on tcp:127.0.0.1:{port}: Address already in use" in log
    assert daemons_of(state_dir) == []
