"""cobaltlite across hosts: a service host and two compute hosts, each a network namespace.

The set-up follows docs/multi-host.md step by step: certificates made with etc/tls/make-certs.sh,
the service host's cobaltlite.yaml with tls:, addresses: and node_agents:, the secret copied to
each compute host, `cobaltlite node-agent` on each compute host, `cobaltlite up` on the service
host, PostgreSQL reached over the network (here socat in the root namespace forwards the
bridge's address to the server's 127.0.0.1:5432; tests/netns_hosts.py). On c2 the agent
listens behind a socat tap on the host's own address, which records the bytes that arrive
there: the wire as a capture would show it.

Skipped, with the reason, where this machine cannot make network namespaces.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from live import Instance, fresh_postgres_database, until
from netns_hosts import Hosts, skip_unless_namespaces_allowed
from unix_users import ALICE, REPO_ROOT, Accounts, ensure_test_users

from cobaltlite.config import TcpAddress, load_config, parse_address
from cobaltlite.errors import InputError

MAKE_CERTS = REPO_ROOT / "etc" / "tls" / "make-certs.sh"
AGENT_PORT = 7010
TAPPED_PORT = 7011  # c2's agent listens here, behind the tap on AGENT_PORT
JOB = """#!/bin/sh
# Where and as whom the job runs: its network namespace, its account, its nodes.
echo "net=$(readlink /proc/self/ns/net) user=$(id -un) nodes=$(tr '\\n' , < $COBALT_NODEFILE)"
echo $$ > "$COBALT_JOBID.pid"
sleep "$1"
exit "$2"
"""


@dataclass
class Cluster:
    hosts: Hosts
    instance: Instance
    accounts: Accounts
    root: Path
    agents: dict[str, subprocess.Popen[bytes]]

    def state_dir(self, host: str) -> Path:
        return self.root / host

    def start_agent(self, host: str, cert: str | None = None) -> subprocess.Popen[bytes]:
        """(Re)start `host`'s node agent, with the certificate of `cert` (default: its own)."""
        state = self.state_dir(host)
        config = yaml.safe_load((state / "cobaltlite.yaml").read_text())
        name = cert or host
        config["tls"] = {"cert": str(self.root / "tls" / f"{name}.crt"),
                         "key": str(self.root / "tls" / f"{name}.key"),
                         "ca": str(self.root / "tls" / "ca.crt")}
        (state / "cobaltlite.yaml").write_text(yaml.safe_dump(config))
        port = TAPPED_PORT if host == "c2" else AGENT_PORT
        log = state / "log" / "node-agent.log"
        seen = log.read_text().count("node agent serving") if log.exists() else 0
        agent = self.hosts.popen(host, [
            sys.executable, "-m", "cobaltlite.cli", "node-agent", "--state-dir", str(state),
            "--host", host, "--listen", f"tcp:{self.hosts.address(host)}:{port}"])
        self.agents[host] = agent
        until(lambda: log.exists() and log.read_text().count("node agent serving") > seen,
              30, f"the node agent on {host} to serve")
        return agent

    def stop_agent(self, host: str, signum: int = signal.SIGKILL) -> None:
        agent = self.agents.pop(host)
        agent.send_signal(signum)
        agent.wait(timeout=30)

    def job_script(self, name: str) -> Path:
        script = self.instance.jobs_dir / name
        script.write_text(JOB)
        script.chmod(0o755)
        return script

    def qsub(self, *args: str) -> int:
        return self.instance.qsub(*args, account=ALICE, accounts=self.accounts)

    def net_of(self, host: str) -> str:
        inode = os.stat(f"/run/netns/{self.hosts.namespace(host)}").st_ino
        return f"net:[{inode}]"

    def output(self, jobid: int) -> str:
        return (self.instance.jobs_dir / f"{jobid}.output").read_text()

    def command(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.instance.command(name, *args)

    def agent_rows(self) -> dict[str, list[str]]:
        shown = self.command("partlist", "--agents")
        assert shown.returncode == 0, shown.stderr
        return {line.split()[0]: line.split(None, 4) for line in shown.stdout.splitlines()[2:]}

    def node_state(self, node: str) -> str:
        shown = self.command("partlist")
        assert shown.returncode == 0, shown.stderr
        return next(line.split()[2] for line in shown.stdout.splitlines()[2:]
                    if line.split()[0] == node)


def make_certificates(tls: Path, hosts: Hosts) -> None:
    """docs/multi-host.md, "Certificates": a CA, then one certificate per host naming its
    address; plus an intruder's CA and certificate, which the tests present to be refused."""
    def make(directory: Path, *args: str) -> None:
        subprocess.run(["sh", str(MAKE_CERTS), str(directory), *args], check=True)

    make(tls, "ca")
    for host in hosts.names:
        make(tls, host, hosts.address(host))
    intruder = tls / "intruder"
    intruder.mkdir()
    make(intruder, "ca")
    make(intruder, "svc", hosts.address("svc"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    skip_unless_namespaces_allowed()
    accounts = ensure_test_users()
    hosts = Hosts.make(["svc", "c1", "c2"])
    root = Path(tempfile.mkdtemp(prefix="cltest-mh-", dir="/tmp"))
    instance = Instance()
    try:
        with fresh_postgres_database() as url:
            from sqlalchemy.engine import make_url

            hosts.forward_postgres()
            root.chmod(0o755)
            tls = root / "tls"
            tls.mkdir(mode=0o700)
            make_certificates(tls, hosts)
            svc = hosts.address("svc")
            instance.state_dir = root / "svc"
            instance.jobs_dir = root / "jobs"
            for made in (instance.state_dir, instance.jobs_dir, root / "c1", root / "c2"):
                made.mkdir()
            instance.state_dir.chmod(0o755)  # users reach the user socket in it
            instance.jobs_dir.chmod(0o1777)
            config = {
                "machine": "flat:2", "scheduler_interval": 1, "metrics_interval": 1,
                "kill_grace": 2,
                "database": make_url(url).set(host=hosts.gateway).render_as_string(
                    hide_password=False),
                "tls": {"cert": str(tls / "svc.crt"), "key": str(tls / "svc.key"),
                        "ca": str(tls / "ca.crt")},
                "addresses": {name: f"tcp:{svc}:{7001 + i}" for i, name in enumerate(
                    ("queue-manager", "system", "scheduler", "metrics-monitor"))},
                "node_agents": {host: f"tcp:{hosts.address(host)}:{AGENT_PORT}"
                                for host in ("c1", "c2")},
            }
            (instance.state_dir / "cobaltlite.yaml").write_text(yaml.safe_dump(config))
            from cobaltlite.rpc.secret import create_secret

            create_secret(instance.state_dir / "secret")
            for host in ("c1", "c2"):
                (root / host / "cobaltlite.yaml").write_text(yaml.safe_dump({"kill_grace": 2}))
                shutil.copy2(instance.state_dir / "secret", root / host / "secret")
            cluster = Cluster(hosts, instance, accounts, root, {})
            hosts.popen("c2", ["socat", "-r", str(root / "wire-c2.bin"),
                               f"TCP-LISTEN:{AGENT_PORT},bind={hosts.address('c2')},fork,"
                               "reuseaddr", f"TCP:{hosts.address('c2')}:{TAPPED_PORT}"],
                        stderr=subprocess.DEVNULL)
            for host in ("c1", "c2"):
                cluster.start_agent(host)
            up = hosts.run("svc", [sys.executable, "-m", "cobaltlite.cli", "up"],
                           env=instance.env)
            assert up.returncode == 0, f"{up.stdout}\n{up.stderr}"
            yield cluster
            instance.cobaltlite("down")
    finally:
        hosts.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_jobs_run_on_their_compute_host_as_their_user_and_qdel_and_walltime_reach_them(
        cluster: Cluster) -> None:
    script = cluster.job_script("where.sh")
    both = cluster.qsub("-n", "2", "-t", "00:01:00", str(script), "0", "0")
    ended = cluster.instance.wait_for(both, {"done"}, timeout=60)
    assert ended["exit_status"] == 0
    # Launched on the first node of the allocation, with every node in COBALT_NODEFILE.
    assert cluster.output(both).split() == [f"net={cluster.net_of('c1')}", f"user={ALICE}",
                                            "nodes=c1,c2,"]

    long_one = cluster.qsub("-n", "1", "-t", "00:01:00", str(script), "60", "0")
    cluster.instance.wait_for(long_one, {"running"}, timeout=60)
    second = cluster.qsub("-n", "1", "-t", "00:01:00", str(script), "0", "7")
    ended = cluster.instance.wait_for(second, {"done"}, timeout=60)
    assert cluster.output(second).split()[0] == f"net={cluster.net_of('c2')}"
    assert ended["exit_status"] == 7, "the exit status came back from c2"
    assert cluster.instance.long_listing(second)["ExitStatus"] == "7"

    until(lambda: (cluster.instance.jobs_dir / f"{long_one}.pid").exists(), 30, "the job's pid")
    pid = int((cluster.instance.jobs_dir / f"{long_one}.pid").read_text())
    deleted = cluster.command("qdel", str(long_one))
    assert deleted.returncode == 0, deleted.stderr
    cluster.instance.wait_for(long_one, {"done"}, timeout=60)
    assert cluster.instance.long_listing(long_one)["EndReason"] == "deleted"
    assert not Path(f"/proc/{pid}").exists(), "qdel killed the job on c1"

    short = cluster.qsub("-n", "1", "-t", "00:00:03", str(script), "60", "0")
    cluster.instance.wait_for(short, {"done"}, timeout=60)
    assert cluster.instance.long_listing(short)["EndReason"] == "walltime"


@pytest.mark.slow
def test_traffic_between_hosts_is_tls(cluster: Cluster) -> None:
    script = cluster.job_script("tapped.sh")
    first = cluster.qsub("-n", "1", "-t", "00:01:00", str(script), "60", "0")
    cluster.instance.wait_for(first, {"running"}, timeout=60)
    on_c2 = cluster.qsub("-n", "1", "-t", "00:01:00", str(script), "0", "0")
    cluster.instance.wait_for(on_c2, {"done"}, timeout=60)
    assert cluster.command("qdel", str(first)).returncode == 0
    wire = (cluster.root / "wire-c2.bin").read_bytes()
    # A TLS record of type handshake (22), version 3.x, whose first message is a ClientHello (1).
    assert wire[:2] == b"\x16\x03" and wire[5] == 1, wire[:16]
    secret = (cluster.instance.state_dir / "secret").read_text().strip().encode()
    assert secret not in wire, "the secret crossed the network in clear"
    assert b"COBALT_JOBID" not in wire and b"tapped.sh" not in wire, "a launch in clear"
    cluster.instance.wait_for(first, {"done"}, timeout=60)


PROBE = """
import sys
from pathlib import Path
from cobaltlite.config import TlsFiles
from cobaltlite.rpc.client import connect
from cobaltlite.rpc.tls import client_context
tls, secret, uri, cert = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
context = None if cert == "none" else client_context(
    TlsFiles(tls / f"{cert}.crt", tls / f"{cert}.key", tls / "ca.crt"))
try:
    connect(uri, secret=secret, tls=context, timeout=5).hello()
except Exception as exc:
    print(type(exc).__name__, exc)
    sys.exit(1)
print("accepted")
"""


@pytest.mark.slow
def test_a_client_without_the_right_certificate_or_secret_is_refused(cluster: Cluster) -> None:
    uri = f"PYRO:node-agent@{cluster.hosts.address('c1')}:{AGENT_PORT}"
    secret = (cluster.instance.state_dir / "secret").read_text().strip()
    tls = cluster.root / "tls"

    def probe(cert: str, secret: str) -> str:
        ran = cluster.hosts.run("svc", [sys.executable, "-c", PROBE, str(tls), secret, uri,
                                        cert])
        return ran.stdout.strip() + ran.stderr.strip()

    assert probe("svc", secret) == "accepted"
    assert "component secret refused" in probe("svc", "f" * 64)
    assert probe("intruder/svc", secret) != "accepted"  # signed by another CA
    assert probe("none", secret) != "accepted"  # no TLS at all
    log = (cluster.state_dir("c1") / "log" / "node-agent.log").read_text()
    assert "rpc.handshake_refused" in log
    assert "rpc.tls_refused" in log and "certificate" in log


@pytest.mark.slow
def test_a_killed_node_agent_takes_its_node_down_and_loses_only_its_jobs(
        cluster: Cluster) -> None:
    script = cluster.job_script("survivor.sh")
    survivor = cluster.qsub("-n", "1", "-t", "00:01:00", str(script), "20", "0")
    cluster.instance.wait_for(survivor, {"running"}, timeout=60)
    victim = cluster.qsub("-n", "1", "-t", "00:01:00", str(script), "60", "0")
    cluster.instance.wait_for(victim, {"running"}, timeout=60)
    pid_file = cluster.instance.jobs_dir / f"{victim}.pid"
    until(pid_file.exists, 30, "the victim's pid")
    victim_pid = int(pid_file.read_text())

    cluster.stop_agent("c2")
    until(lambda: cluster.node_state("1") == "down", 30, "node 1 shown down")
    row = cluster.agent_rows()["c2"]
    # The address the system dialled; the cause is what the tap in front of c2's agent did
    # (accepted, then closed: "not enough data"; a host without a tap says "Connection refused").
    assert row[3] == "down" and f"{cluster.hosts.address('c2')}:{AGENT_PORT}" in row[4], row
    cluster.instance.wait_for(victim, {"done"}, timeout=30)
    assert cluster.instance.long_listing(victim)["EndReason"] == "lost"
    system_log = (cluster.instance.state_dir / "log" / "system.log").read_text()
    assert "the node agent on c2 is not answering" in system_log
    ended = cluster.instance.wait_for(survivor, {"done"}, timeout=60)
    assert ended["exit_status"] == 0, "the job on c1 went on"
    assert cluster.instance.long_listing(survivor)["EndReason"] == "exited"

    cluster.start_agent("c2")  # ends what the previous run left, then serves
    assert not Path(f"/proc/{victim_pid}").exists(), "the lost job was ended on c2"
    until(lambda: cluster.agent_rows()["c2"][3] == "up", 30, "the agent on c2 up again")
    until(lambda: cluster.node_state("1") == "idle", 30, "node 1 back in service")
    assert cluster.output(victim).count("net=") == 1, "the lost job ran once"


@pytest.mark.slow
def test_bad_certificates_and_host_names_are_named_in_log_and_command(
        cluster: Cluster) -> None:
    # c2's agent presents c1's certificate: the system refuses it, the node goes down.
    cluster.stop_agent("c2", signal.SIGTERM)
    cluster.start_agent("c2", cert="c1")
    until(lambda: "CERTIFICATE" in cluster.agent_rows()["c2"][4], 30, "c2 refused")
    reason = cluster.agent_rows()["c2"][4]
    assert "CERTIFICATE_VERIFY_FAILED" in reason and "mismatch" in reason, reason
    assert "CERTIFICATE_VERIFY_FAILED" in (
        cluster.instance.state_dir / "log" / "system.log").read_text()
    cluster.stop_agent("c2", signal.SIGTERM)
    cluster.start_agent("c2")
    until(lambda: cluster.agent_rows()["c2"][3] == "up", 30, "c2 back with its certificate")

    # A key that does not belong to the certificate, and a listen address that does not exist.
    state, tls = cluster.state_dir("c2"), cluster.root / "tls"
    config = yaml.safe_load((state / "cobaltlite.yaml").read_text())
    config["tls"]["key"] = str(tls / "c1.key")
    broken = cluster.root / "broken"
    broken.mkdir(exist_ok=True)
    (broken / "cobaltlite.yaml").write_text(yaml.safe_dump(config))
    shutil.copy2(state / "secret", broken / "secret")
    for listen, wanted in ((f"tcp:{cluster.hosts.address('c2')}:7099", "does not match"),
                           ("tcp:no-such-host.invalid:7010", "no-such-host.invalid")):
        if wanted == "no-such-host.invalid":
            config["tls"]["key"] = str(tls / "c2.key")
            (broken / "cobaltlite.yaml").write_text(yaml.safe_dump(config))
        ran = cluster.hosts.run("c2", [sys.executable, "-m", "cobaltlite.cli", "node-agent",
                                       "--state-dir", str(broken), "--host", "c2",
                                       "--listen", listen])
        assert ran.returncode == 1 and wanted in ran.stderr, ran.stderr


@pytest.mark.slow
def test_an_unknown_agent_host_name_shows_the_node_down(cluster: Cluster) -> None:
    tls = cluster.root / "tls"
    instance = Instance(machine="flat:1", settings={
        "tls": {"cert": str(tls / "svc.crt"), "key": str(tls / "svc.key"),
                "ca": str(tls / "ca.crt")},
        "node_agents": {"ghost": "tcp:ghost.invalid:7010"}}).start_retrying()
    try:
        until(lambda: "Name or service" in instance.command("partlist", "--agents").stdout, 30,
              "the unknown host named")
        row = instance.command("partlist", "--agents").stdout.splitlines()[2]
        assert "down" in row and "Name or service not known" in row, row
        assert "ghost.invalid" in (instance.state_dir / "log" / "system.log").read_text()
    finally:
        instance.stop()


def test_an_address_off_loopback_without_tls_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cobaltlite.yaml").write_text(
        "addresses: {system: 'tcp:10.1.2.3:7002'}\n")
    with pytest.raises(InputError, match=r"addresses.system: 'tcp:10.1.2.3:7002' is not a "
                       r"loopback address; the component secret would cross the network in "
                       r"clear: configure tls:"):
        load_config(tmp_path)


def test_a_readable_key_a_host_count_that_misses_the_machine_and_no_launch_host_are_refused(
        tmp_path: Path) -> None:
    for name in ("ca", "svc"):
        subprocess.run(["sh", str(MAKE_CERTS), str(tmp_path), name], check=True)
    tls = "tls: {cert: svc.crt, key: svc.key, ca: ca.crt}\n"
    (tmp_path / "svc.key").chmod(0o640)
    (tmp_path / "cobaltlite.yaml").write_text(tls)
    with pytest.raises(InputError, match=r"tls.key: .*svc.key has mode 0640.*chmod 600"):
        load_config(tmp_path)
    (tmp_path / "svc.key").chmod(0o600)
    (tmp_path / "cobaltlite.yaml").write_text(
        tls + "machine: flat:2\nnode_agents: {c1: 'tcp:10.0.0.11:7010'}\n")
    config = load_config(tmp_path)
    from cobaltlite.machine.catalog import load_description
    from cobaltlite.rpc.secret import create_secret
    from cobaltlite.system.agents import NodeAgents

    create_secret(config.secret_path)  # the agents' proxies carry it

    with pytest.raises(InputError, match=r"node_agents: names 1 host\(s\) but machine "
                       r"'flat:2' has 2 nodes"):
        NodeAgents(config, load_description("flat:2"))
    # Blue Gene/P: every block's job is launched on launch_host, which must be an agent's host.
    with pytest.raises(InputError, match=r"launch_host: '' is not a host of node_agents \(c1\)"):
        NodeAgents(config, load_description("bgp-2rack"))
    config.launch_host = "c1"
    agents = NodeAgents(config, load_description("bgp-2rack"))
    assert agents.placement("ANL-R00-1024") == ("c1", ["ANL-R00-1024"])


_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@given(host=st.one_of(st.ip_addresses(v=4).map(str), st.lists(_LABEL, min_size=1, max_size=4)
                      .map(".".join)),
       port=st.integers(1, 65535))
def test_any_host_name_or_address_reads_back_as_written(host: str, port: int) -> None:
    # parse_address no longer limits hosts to loopback (load_config does, without TLS):
    # whatever an operator may write for a remote host must read back unchanged.
    address = parse_address(f"tcp:{host}:{port}")
    assert address == TcpAddress(host, port)
    assert str(address) == f"tcp:{host}:{port}"
