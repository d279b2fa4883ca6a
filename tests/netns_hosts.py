"""Several hosts on one machine for tests: network namespaces joined by a bridge.

`Hosts.make(names)` creates one namespace per name (its own loopback and an `eth0` with the
address 10.<net>.0.<i + 1>), each joined by a veth pair to a bridge in the root namespace,
which holds 10.<net>.0.254. Processes are put on a host with `Hosts.run` / `Hosts.popen`
(`ip netns exec`). The file system is shared: state directories and job output are seen by
every host, as on a cluster with a shared file system.

PostgreSQL listens on 127.0.0.1 in the root namespace only, which no namespace can reach;
`forward_postgres` starts socat in the root namespace, listening on the bridge address and
connecting to 127.0.0.1:5432, so the service host reaches the database at
10.<net>.0.254:5432, as it would reach a database server of its own.

`close()` kills what was started and deletes the namespaces and the bridge; `Hosts.make` calls
it itself when the set-up fails halfway, and removes leftovers of an earlier run of the same
process id first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pytest


def skip_unless_namespaces_allowed() -> None:
    """Skip the calling test with the reason when this machine cannot make network
    namespaces (not root, no `ip`, no socat, or `ip netns add` refused)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "socat", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    probe = f"clprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"this machine does not allow network namespaces: ip netns add: "
                    f"{made.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Hosts:
    tag: str  # short and unique to this process: interface names hold 15 characters at most
    net: int
    names: list[str]
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)

    @property
    def gateway(self) -> str:
        return f"10.{self.net}.0.254"

    def address(self, name: str) -> str:
        return f"10.{self.net}.0.{self.names.index(name) + 1}"

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    @classmethod
    def make(cls, names: list[str]) -> Hosts:
        tag = f"cl{os.getpid() % 100000}"
        hosts = cls(tag, 100 + os.getpid() % 100, list(names))
        hosts.close()  # leftovers of a killed run with the same pid
        try:
            bridge = f"{tag}br"
            _ip("link", "add", bridge, "type", "bridge")
            _ip("addr", "add", f"{hosts.gateway}/24", "dev", bridge)
            _ip("link", "set", bridge, "up")
            for i, name in enumerate(names):
                ns, outside = hosts.namespace(name), f"{tag}v{i}"
                _ip("netns", "add", ns)
                _ip("link", "add", outside, "type", "veth", "peer", "name", f"{tag}p{i}")
                _ip("link", "set", f"{tag}p{i}", "netns", ns)
                _ip("link", "set", outside, "master", bridge, "up")
                _ip("-n", ns, "link", "set", f"{tag}p{i}", "name", "eth0")
                _ip("-n", ns, "addr", "add", f"{hosts.address(name)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            hosts.close()
            raise
        return hosts

    def command(self, name: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(name), *argv]

    def run(self, name: str, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(name, argv), capture_output=True, text=True,
                              timeout=120, **kwargs)

    def popen(self, name: str | None, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process on host `name` (None: the root namespace), killed by close()."""
        process = subprocess.Popen(argv if name is None else self.command(name, argv),
                                   **kwargs)
        self.processes.append(process)
        return process

    def forward_postgres(self, port: int = 5432) -> None:
        self.popen(None, ["socat", f"TCP-LISTEN:{port},bind={self.gateway},fork,reuseaddr",
                          f"TCP:127.0.0.1:{port}"], stderr=subprocess.DEVNULL)

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self.processes.clear()
        for name in self.names:
            ns = self.namespace(name)
            # Every process left in the namespace (a daemon `cobaltlite up` started) goes too.
            found = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in found.stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.tag}br"], capture_output=True)
