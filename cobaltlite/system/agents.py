"""The system's side of the node agents (`node_agents:`): which host launches a place's job, and
what each agent last said.

A flat machine's node i is the i-th host of `node_agents:`; its job is launched on the first
node of its allocation, and COBALT_NODEFILE lists the hosts of every node. A Blue Gene/P job is
launched on `launch_host` (Intrepid's jobs were started by mpirun from a front-end node, not on
the block's compute nodes), and COBALT_NODEFILE lists the block's name.

An agent that does not answer (refused connection, unknown host name, certificate refused, time
out) is down, with the reason its last call gave; the system then takes its node out of service
through the machine's failure mechanism (the path of `partadm --fail`, but not recorded among the
operator's failures) and ends its jobs as lost. The agent's next answer returns the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cobaltlite.config import Config
from cobaltlite.errors import InputError
from cobaltlite.machine.bits import iter_bits, ranges_to_mask
from cobaltlite.machine.description import BGPDescription, FlatDescription
from cobaltlite.rpc.peers import Peer

AGENT_OBJECT = "node-agent"
"""The Pyro5 object id of every node agent."""
AGENT_TIMEOUT = 5.0
"""Seconds an agent has to answer a call: past it the agent counts as not answering."""


@dataclass
class AgentState:
    host: str
    address: str
    node: str | None  # the flat machine's node of this host; None on Blue Gene/P
    boot: str = ""  # the boot id of the agent's last answer
    down: str | None = None  # why it is down, None while it answers


class NodeAgents:
    def __init__(self, config: Config, description: BGPDescription | FlatDescription) -> None:
        hosts = list(config.node_agents)
        where = f"{config.config_path}: node_agents"
        if isinstance(description, FlatDescription):
            if len(hosts) != description.nodes:
                raise InputError(f"{where}: names {len(hosts)} host(s) but machine "
                                 f"{description.name!r} has {description.nodes} nodes; name one "
                                 "host per node, in node order")
            nodes: list[str | None] = [str(i) for i in range(len(hosts))]
            self._bgp_host = ""
        else:
            if config.launch_host not in config.node_agents:
                raise InputError(f"{config.config_path}: launch_host: {config.launch_host!r} is "
                                 f"not a host of node_agents ({', '.join(hosts)}); a Blue Gene/P "
                                 "machine launches every block's job on that host")
            nodes = [None] * len(hosts)
            self._bgp_host = config.launch_host
        self.states = {host: AgentState(host, str(config.node_agents[host]), node)
                       for host, node in zip(hosts, nodes, strict=True)}
        self._peers = {host: Peer(config, AGENT_OBJECT, timeout=AGENT_TIMEOUT,
                                  address=config.node_agents[host]) for host in hosts}
        self._hosts = hosts

    def placement(self, location: str) -> tuple[str, list[str]]:
        """The host that launches a job at `location`, and the COBALT_NODEFILE lines."""
        if self._bgp_host:
            return self._bgp_host, [location]
        hosts = [self._hosts[i] for i in iter_bits(ranges_to_mask(location))]
        return hosts[0], hosts

    def host_of_node(self, node: str) -> str | None:
        return next((s.host for s in self.states.values() if s.node == node), None)

    def call(self, host: str, method: str, *args: Any) -> Any:
        return getattr(self._peers[host], method)(*args)

    def listing(self) -> list[dict[str, Any]]:
        return [{"host": s.host, "address": s.address, "node": s.node,
                 "state": "down" if s.down else "up", "reason": s.down or "", "boot": s.boot}
                for s in self.states.values()]


def describe(exc: BaseException) -> str:
    """An agent call's failure as the admin reads it (the exception's own message names the
    address and the cause: refused, unknown host name, certificate, time out)."""
    return str(exc) or type(exc).__name__
