"""One instance's configuration and file layout.

Everything of an instance lives under its state directory: `cobaltlite.yaml` (configuration),
`secret` (the component secret, 0600), `cobaltlite.db` (the default SQLite store), `sockets/`,
`run/` (pid files), `log/` (component logs, the accounting log) and `system/` (launch records).
Commands find their instance through COBALTLITE_STATE_DIR, else /var/lib/cobaltlite when it
exists (a system-wide installation), else ~/.cobaltlite.

Components find each other at fixed addresses: `Config.address(component)` is the one answer to
"where does this component listen", for the daemon that serves it and for every client. The
`addresses:` option moves a component from its Unix socket under `sockets/` to another Unix
socket or to a TCP port: on loopback, or on any address once `tls:` names this host's certificate,
its key and the CA that signed every component's certificate (docs/multi-host.md). There is no
Pyro5 name server: anyone on the host may register
a name there, and would then receive the component secret from the clients' handshakes.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from cobaltlite.errors import InputError

if TYPE_CHECKING:  # user commands read the config and need no tuning or scheduler code
    from cobaltlite.scheduler.slack import SlackSettings
    from cobaltlite.tuning.scheme import TuningScheme

COMPONENTS = ("queue-manager", "system", "scheduler", "metrics-monitor")
USER_SOCKETS = {
    "queue-manager": ("user.sock", "the user socket"),
    "scheduler": ("scheduler-user.sock", "the schedctl socket"),
    "system": ("system-user.sock", "the partadm socket"),
    "metrics-monitor": ("metrics-user.sock", "the cqmetrics socket"),
}
"""Component -> (file under sockets/, what it is called in errors) of the Unix socket (mode
0666) where commands reach it: always there, whatever `addresses:` says, since only a Unix socket
names the calling user (SO_PEERCRED)."""
SYSTEM_STATE_DIR = Path("/var/lib/cobaltlite")
# sockaddr_un.sun_path holds 108 bytes, the terminating NUL included.
UNIX_PATH_MAX = 107
# RFC 1123 host names: letters, digits and hyphens in dot-separated labels.
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*")


@dataclass(frozen=True)
class UnixAddress:
    """A Unix socket: what components use unless `addresses:` says otherwise."""

    path: Path

    def __str__(self) -> str:
        return f"unix:{self.path}"


@dataclass(frozen=True)
class TcpAddress:
    """A TCP port: `host` is an IP address in canonical form or a host name. Off loopback only
    with TLS (`Config.tls`), which load_config checks."""

    host: str
    port: int

    @property
    def is_loopback(self) -> bool:
        import ipaddress

        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"

    @property
    def host_port(self) -> str:
        """HOST:PORT, an IPv6 host in brackets (as URIs and the `addresses:` option write it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"tcp:{self.host_port}"


Address = UnixAddress | TcpAddress


@dataclass(frozen=True)
class TlsFiles:
    """The `tls:` option: this host's certificate and private key (PEM), used both to serve and
    to call, and the CA certificate every peer's certificate must be signed by."""

    cert: Path
    key: Path
    ca: Path


def default_state_dir() -> Path:
    env = os.environ.get("COBALTLITE_STATE_DIR")
    if env:
        return Path(env)
    if SYSTEM_STATE_DIR.is_dir():
        return SYSTEM_STATE_DIR
    return Path.home() / ".cobaltlite"


@dataclass
class Config:
    state_dir: Path
    machine: str = "flat:4"
    database: str = ""  # empty: the SQLite file in the state directory
    admin_group: str | None = None
    scheduler_interval: float = 10.0
    backfill: str = "easy"
    metrics_interval: float = 30.0
    kill_grace: float = 10.0
    default_policy: str = "default"
    scheduler_clock: str = "wall"  # "queue-manager": read the time from the queue manager (Qsim)
    utility_file: str = ""  # a Python file of site utility functions; empty: builtins only
    utility_reload: str = "auto"  # auto: reload when the file changes; manual: schedctl only
    utility_budget: float = 2.0  # seconds one policy may spend scoring one pass
    # Seconds after which a user's usage counts half (fairshare's `user_usage`; docs/fairness.md).
    usage_half_life: float = 86400.0
    failed_jobs: str = "resubmit"  # a job killed by a component failure: resubmit | end
    failure_forecast: str = ""  # a failure-forecast file the system re-reads; empty: none
    # Allocation_Cost = alpha·BLK_f + beta·P_f (seed 003 §IV-B; docs/fault-aware.md).
    allocation_alpha: float = 1.0
    allocation_beta: float = 1.0
    # Components named here listen at this address instead of their socket under sockets/.
    addresses: dict[str, Address] = field(default_factory=dict)
    # Adaptive tuning of the scheduler (seed 000 §3.4; cobaltlite/tuning/scheme.py); None: off.
    tuning: TuningScheme | None = None
    # Settings of `backfill: slack` (seed 001; cobaltlite/scheduler/slack.py); None: Table 3's.
    slack: SlackSettings | None = None
    # TLS between components and node agents; None: components stay on loopback or sockets.
    tls: TlsFiles | None = None
    # Compute hosts and their node agents' addresses, in node order (flat node 0 is the first);
    # empty: jobs run as local processes of the system component (docs/multi-host.md).
    node_agents: dict[str, TcpAddress] = field(default_factory=dict)
    # BG/P: the host whose agent launches every block's job (a front-end node, as Intrepid's
    # mpirun ran from its service node).
    launch_host: str = ""
    # Days of metrics history the database keeps (the monitor deletes older samples).
    metrics_retention_days: float = 30.0
    # HOST:PORT of the monitor's Prometheus endpoint; empty: no endpoint (the default).
    prometheus_address: str = ""

    @property
    def prometheus_endpoint(self) -> tuple[str, int] | None:
        """(host, port) of the Prometheus endpoint, or None when it is off."""
        return _prometheus_endpoint(self.prometheus_address) if self.prometheus_address \
            else None

    @property
    def metrics_user_socket(self) -> Path:
        """Where cqmetrics reaches the metrics monitor (mode 0666; read-only calls)."""
        return self.user_socket_of("metrics-monitor")

    def user_socket_of(self, component: str) -> Path:
        """The Unix socket where commands reach `component` (USER_SOCKETS)."""
        return self.state_dir / "sockets" / USER_SOCKETS[component][0]

    @property
    def database_url(self) -> str:
        return self.database or f"sqlite:///{self.state_dir / 'cobaltlite.db'}"

    @property
    def secret_path(self) -> Path:
        return self.state_dir / "secret"

    def address(self, component: str) -> Address:
        """Where `component` listens: its `addresses:` entry, else its socket under sockets/.
        Whatever serves or reaches a component asks here."""
        return self.addresses.get(component) or UnixAddress(self.socket(component))

    def socket(self, component: str) -> Path:
        """The component's default Unix socket; serve and reach components through address()."""
        return self.state_dir / "sockets" / f"{component}.sock"

    @property
    def user_socket(self) -> Path:
        """Where user commands reach the queue manager (mode 0666; the kernel names the caller)."""
        return self.user_socket_of("queue-manager")

    @property
    def admin_socket(self) -> Path:
        """Where schedctl reaches the scheduler (mode 0666; admin rights checked per call)."""
        return self.user_socket_of("scheduler")

    @property
    def system_admin_socket(self) -> Path:
        """Where partadm and partlist reach the system (mode 0666; admin rights checked per
        call)."""
        return self.user_socket_of("system")

    def pid_file(self, component: str) -> Path:
        return self.state_dir / "run" / f"{component}.pid"

    def log_file(self, component: str) -> Path:
        return self.state_dir / "log" / f"{component}.log"

    @property
    def accounting_log(self) -> Path:
        return self.state_dir / "log" / "accounting.log"

    @property
    def config_path(self) -> Path:
        return self.state_dir / "cobaltlite.yaml"


_KEYS = {f.name for f in fields(Config)} - {"state_dir"}
# Intervals the daemons sleep between passes: zero or less would spin.
_POSITIVE = frozenset({"scheduler_interval", "metrics_interval", "utility_budget",
                       "usage_half_life"})
_DAYS = frozenset({"metrics_retention_days"})
_NON_NEGATIVE = frozenset({"kill_grace"})
_CHOICES = {"failed_jobs": ("resubmit", "end")}
_WEIGHTS = frozenset({"allocation_alpha", "allocation_beta"})

DEFAULT_CONFIG_TEXT = """\
# cobaltlite instance configuration (see etc/cobaltlite.yaml for every option, commented).
machine: flat:4            # intrepid | bgp-2rack | flat:N[:PPN] | a partition table file
database: ""               # empty: SQLite in this directory; or postgresql+psycopg://...
admin_group: null          # members may run admin operations (root always may)
scheduler_interval: 10     # seconds between scheduling passes (submissions and ends wake it)
backfill: easy             # easy | conservative | slack | none
# slack: {lookahead: 20, goal: fairness}  # backfill: slack's settings (docs/fairness.md)
metrics_interval: 30       # seconds between metrics samples
kill_grace: 10             # seconds between SIGTERM and SIGKILL for a killed job
default_policy: default    # utility function of new queues
scheduler_clock: wall      # wall | queue-manager (a scheduler driven by Qsim over RPC)
utility_file: ""           # site utility functions (see etc/utility-functions.py)
utility_reload: auto       # auto: reload when the file changes | manual: schedctl --reread-policy
utility_budget: 2          # seconds one policy may spend scoring one pass
failed_jobs: resubmit      # a job killed by a failed component (partadm --fail): resubmit | end
failure_forecast: ""       # a failure-forecast file (P_f per component), re-read when it changes
allocation_alpha: 1        # weight of BLK_f (partitions a placement blocks) in the allocation cost
allocation_beta: 1         # weight of P_f (the place's failure chance) in the allocation cost
metrics_retention_days: 30  # days of metrics history kept in the database
prometheus_address: ""     # HOST:PORT of a Prometheus endpoint, e.g. 127.0.0.1:9464; empty: off
# addresses: {system: "tcp:127.0.0.1:7001"}  # where components listen; default: sockets/
# tuning: w-adaptive       # adaptive W (docs/metric-aware.md); or {check_interval:, rules: [...]}
# tls: {cert: tls/host.crt, key: tls/host.key, ca: tls/ca.crt}   # docs/multi-host.md
# node_agents: {c1: "tcp:10.0.0.11:7010", c2: "tcp:10.0.0.12:7010"}  # compute hosts
"""


def instance_paths(state_dir: Path | None = None) -> Config:
    """The instance's file layout without reading its YAML: what user commands need (sockets
    are named by the state directory alone), at a fraction of the start-up cost."""
    return Config(state_dir=Path(state_dir or default_state_dir()).resolve())


def load_config(state_dir: Path | None = None) -> Config:
    """Read `<state_dir>/cobaltlite.yaml`; missing file = all defaults. Unknown keys are errors."""
    state_dir = Path(state_dir or default_state_dir()).resolve()
    config = Config(state_dir=state_dir)
    path = config.config_path
    if not path.exists():
        return config
    import yaml  # here, not at the top: user commands need paths, not the YAML parser

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of option: value")
    unknown = set(data) - _KEYS
    if unknown:
        raise InputError(f"{path}: unknown option(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(_KEYS))}")
    for key, value in data.items():
        if key == "addresses":
            config.addresses = _read_addresses(config, value)
            continue
        if key == "tls":
            config.tls = _read_tls(config, value)
            continue
        if key == "node_agents":
            config.node_agents = _read_node_agents(config, value)
            continue
        if key == "tuning":
            from cobaltlite.tuning.scheme import parse_tuning_section

            config.tuning = None if value is None else parse_tuning_section(path, value)
            continue
        if key == "slack":
            from cobaltlite.scheduler.slack import parse_slack_section

            config.slack = None if value is None else parse_slack_section(path, value)
            continue
        default = getattr(config, key)
        if value is None and key in ("database",):
            value = ""
        if isinstance(default, float) and isinstance(value, int | float):
            value = float(value)
        if value is not None and default is not None and not isinstance(value, type(default)):
            raise InputError(f"{path}: option {key}: {value!r} is not a {type(default).__name__}")
        if key in _POSITIVE and not (isinstance(value, float) and value > 0
                                     and math.isfinite(value)):
            # 0 or less would make the daemon loop without sleeping (a spinning core).
            raise InputError(f"{path}: option {key}: {value!r} must be a number of seconds "
                             "greater than zero")
        if key in _DAYS and not (isinstance(value, float) and value > 0
                                 and math.isfinite(value)):
            raise InputError(f"{path}: option {key}: {value!r} must be a number of days "
                             "greater than zero (e.g. 30, or 0.5 for twelve hours)")
        if key == "prometheus_address" and value:
            try:
                _prometheus_endpoint(value)
            except ValueError as exc:
                raise InputError(f"{path}: option {key}: {value!r} {exc}") from None
        if key in _NON_NEGATIVE and not (isinstance(value, float) and value >= 0
                                         and math.isfinite(value)):
            raise InputError(f"{path}: option {key}: {value!r} must be a number of seconds, "
                             "zero or more")
        if key in _CHOICES and value not in _CHOICES[key]:
            raise InputError(f"{path}: option {key}: {value!r}: choose "
                             f"{' or '.join(_CHOICES[key])}")
        if key in _WEIGHTS and not (isinstance(value, float) and value >= 0
                                    and math.isfinite(value)):
            raise InputError(f"{path}: option {key}: {value!r} must be a weight, a number zero "
                             "or more")
        setattr(config, key, value)
    _check_clear_text(config)
    return config


def _read_tls(config: Config, value: object) -> TlsFiles | None:
    """The `tls:` option: cert, key and ca, each a PEM file (relative to the state directory)
    that exists; the key readable by its owner only, like the secret."""
    path = config.config_path
    if value is None:
        return None
    keys = ("cert", "key", "ca")
    if not isinstance(value, dict) or set(value) != set(keys):
        raise InputError(f"{path}: option tls: expected a mapping with exactly cert, key and ca "
                         "(PEM files), e.g. {cert: tls/host.crt, key: tls/host.key, "
                         "ca: tls/ca.crt}")
    files: dict[str, Path] = {}
    for key in keys:
        text = value[key]
        if not isinstance(text, str) or not text:
            raise InputError(f"{path}: tls.{key}: {text!r} is not a file name")
        file = config.state_dir / text  # an absolute name stays as it is
        if not file.is_file():
            raise InputError(f"{path}: tls.{key}: {file} does not exist or is not a file")
        files[key] = file
    mode = files["key"].stat().st_mode & 0o777
    if mode & 0o077:
        raise InputError(f"{path}: tls.key: {files['key']} has mode {mode:04o}; group and other "
                         f"users must have no access (run: chmod 600 {files['key']})")
    return TlsFiles(**files)


def _read_node_agents(config: Config, value: object) -> dict[str, TcpAddress]:
    """The `node_agents:` option: compute host name -> tcp:HOST:PORT of its node agent."""
    path = config.config_path
    if value is None:
        return {}
    if not isinstance(value, dict) or not value:
        raise InputError(f"{path}: option node_agents: expected a mapping of host: address, "
                         "e.g. c1: tcp:10.0.0.11:7010")
    agents: dict[str, TcpAddress] = {}
    for host, text in value.items():
        if not isinstance(host, str) or not host:
            raise InputError(f"{path}: node_agents: {host!r} is not a host name")
        try:
            address = parse_address(text)
        except ValueError as exc:
            raise InputError(f"{path}: node_agents.{host}: {text!r} {exc}") from None
        if not isinstance(address, TcpAddress):
            raise InputError(f"{path}: node_agents.{host}: {text!r}: a node agent is reached "
                             "over TCP: write tcp:HOST:PORT")
        agents[host] = address
    return agents


def _check_clear_text(config: Config) -> None:
    """Refuse any address off loopback unless TLS is configured: the component secret would
    cross the network in clear."""
    if config.tls is not None:
        return
    named = [(f"addresses.{name}", address) for name, address in config.addresses.items()]
    named += [(f"node_agents.{host}", address) for host, address in config.node_agents.items()]
    for option, address in named:
        if isinstance(address, TcpAddress) and not address.is_loopback:
            raise InputError(
                f"{config.config_path}: {option}: 'tcp:{address.host_port}' is not a loopback "
                "address; the component secret would cross the network in clear: configure "
                "tls: (cert, key, ca; docs/multi-host.md) or use 127.0.0.1, [::1] or localhost")


def parse_address(text: object) -> Address:
    """Read `unix:/ABSOLUTE/PATH` or `tcp:HOST:PORT` (HOST: an IP address, [IPv6] or a host
    name; load_config keeps it on loopback unless TLS is configured).

    Raises ValueError whose message reads on from the quoted text ("'tcp:7000' has no host
    and port ...").
    """
    if not isinstance(text, str):
        raise ValueError("is not a string: write unix:/ABSOLUTE/PATH or tcp:HOST:PORT")
    scheme, _, rest = text.partition(":")
    if scheme == "unix":
        return _unix_address(rest)
    if scheme == "tcp":
        return _tcp_address(rest)
    raise ValueError("is neither unix:/ABSOLUTE/PATH nor tcp:HOST:PORT")


def _unix_address(text: str) -> UnixAddress:
    # A relative path would mean something else in each process's working directory.
    if not text.startswith("/"):
        raise ValueError("is not an absolute path: write unix:/ABSOLUTE/PATH")
    path = Path(os.path.normpath(text))
    if len(os.fsencode(path)) > UNIX_PATH_MAX:
        raise ValueError(f"is longer than the {UNIX_PATH_MAX} bytes a Unix socket path may have")
    return UnixAddress(path)


def _tcp_address(text: str) -> TcpAddress:
    import ipaddress  # here, like yaml: commands that need only paths do not pay for it

    host, colon, port_text = text.rpartition(":")
    if not colon or not host:
        raise ValueError("has no host and port: write tcp:HOST:PORT")
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("has an IPv6 address without brackets: write tcp:[::1]:PORT")
    if not (port_text.isascii() and port_text.isdigit()):
        raise ValueError(f"has port {port_text!r}, which is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"has port {port}, outside 1-65535")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if bracketed or not _HOST_NAME.fullmatch(host):
            raise ValueError(f"has host {host!r}, which is neither an IP address nor a host "
                             "name") from None
        return TcpAddress(host, port)
    if bracketed != (ip.version == 6):
        raise ValueError("puts brackets around an IPv4 address; they are for IPv6 only")
    return TcpAddress(str(ip), port)


def _prometheus_endpoint(text: str) -> tuple[str, int]:
    """HOST:PORT of the Prometheus endpoint: HOST an IP address ([...] for IPv6) or localhost,
    PORT 1-65535. Any address is allowed (Prometheus often scrapes from another host): the
    endpoint is read-only. Raises ValueError reading on from the quoted text."""
    import ipaddress

    host, colon, port_text = text.rpartition(":")
    if not colon or not host:
        raise ValueError("has no host and port: write HOST:PORT, e.g. 127.0.0.1:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            raise ValueError("puts brackets around an IPv4 address; they are for IPv6 only")
    elif ":" in host:
        raise ValueError("has an IPv6 address without brackets: write [::1]:9464")
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"has port {port_text!r}: write a number from 1 to 65535")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"has host {host!r}, which is neither an IP address nor "
                             "localhost") from None
    return host, int(port_text)


def _read_addresses(config: Config, value: object) -> dict[str, Address]:
    """The `addresses:` option: component name -> address, every one distinct from the others,
    from the default sockets of the components not named, and from the user sockets."""
    path = config.config_path
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{path}: option addresses: expected a mapping of component: address, "
                         "e.g. system: tcp:127.0.0.1:7001")
    addresses: dict[str, Address] = {}
    for component, text in value.items():
        if component not in COMPONENTS:
            raise InputError(f"{path}: addresses: unknown component {component!r}; "
                             f"known: {', '.join(COMPONENTS)}")
        try:
            addresses[component] = parse_address(text)
        except ValueError as exc:
            raise InputError(f"{path}: addresses.{component}: {text!r} {exc}") from None
    # Places taken before the named components are checked, so a clash always names the entry
    # the operator wrote rather than a default they never saw.
    taken: dict[Address, str] = {UnixAddress(config.user_socket_of(component)): called
                                 for component, (_file, called) in USER_SOCKETS.items()}
    for component in COMPONENTS:
        if component not in addresses:
            taken[config.address(component)] = f"the default socket of {component}"
    for component, address in addresses.items():
        clash = next((owner for place, owner in taken.items() if _same_place(place, address)),
                     None)
        if clash is not None:
            raise InputError(f"{path}: addresses.{component}: {value[component]!r} is already "
                             f"{clash}")
        taken[address] = f"the address of {component}"
    return addresses


def _same_place(a: Address, b: Address) -> bool:
    if isinstance(a, TcpAddress) and isinstance(b, TcpAddress):
        # localhost may resolve to 127.0.0.1 or ::1: count it as any loopback host on its port.
        return a.port == b.port and (a.host == b.host or "localhost" in (a.host, b.host))
    return a == b


def ensure_layout(config: Config) -> None:
    """Create the state directory tree with safe modes and the default config file.

    Raises InputError naming the state directory when it cannot be made (a regular file there,
    a read-only file system, no permission): a new user's first mistake, not a traceback."""
    if config.state_dir.exists() and not config.state_dir.is_dir():
        raise InputError(f"state directory {config.state_dir}: exists and is not a directory")
    try:
        config.state_dir.mkdir(parents=True, exist_ok=True)
        # Users must traverse to the sockets directory; everything else stays private.
        os.chmod(config.state_dir, 0o755)
        for sub, mode in (("sockets", 0o755), ("run", 0o700), ("log", 0o700)):
            (config.state_dir / sub).mkdir(exist_ok=True)
            os.chmod(config.state_dir / sub, mode)
        if not config.config_path.exists():
            config.config_path.write_text(DEFAULT_CONFIG_TEXT)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise InputError(f"state directory {config.state_dir}: cannot create it{where}: "
                         f"{exc.strerror or exc}") from None


def check_config_secrecy(config: Config) -> None:
    """Refuse a database password in a cobaltlite.yaml that other accounts can read.

    Users' commands read the file for the instance's paths, so it stays 0644 by default; a
    password belongs in it only when the file is private."""
    path = config.config_path
    if not config.database_url.startswith("postgresql") or not path.exists():
        return
    from sqlalchemy.engine import make_url  # only the daemons check; user commands never load it

    if make_url(config.database_url).password is None:
        return
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise InputError(
            f"{path}: database: the URL holds a password and the file is readable by other "
            f"accounts (mode {mode:04o}); chmod 600 {path}, or give the password in the "
            "server account's ~/.pgpass instead")
