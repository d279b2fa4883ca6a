"""One instance's configuration and file layout.

Everything of an instance lives under its state directory: `cobaltlite.yaml` (configuration),
`secret` (the component secret, 0600), `cobaltlite.db` (the default SQLite store), `sockets/`,
`run/` (pid files), `log/` (component logs, the accounting log) and `system/` (launch records).
Commands find their instance through COBALTLITE_STATE_DIR, else /var/lib/cobaltlite when it
exists (a system-wide installation), else ~/.cobaltlite.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

from cobaltlite.errors import InputError

COMPONENTS = ("queue-manager", "system", "scheduler", "metrics-monitor")
SYSTEM_STATE_DIR = Path("/var/lib/cobaltlite")


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

    @property
    def database_url(self) -> str:
        return self.database or f"sqlite:///{self.state_dir / 'cobaltlite.db'}"

    @property
    def secret_path(self) -> Path:
        return self.state_dir / "secret"

    def socket(self, component: str) -> Path:
        return self.state_dir / "sockets" / f"{component}.sock"

    @property
    def user_socket(self) -> Path:
        """Where user commands reach the queue manager (mode 0666; the kernel names the caller)."""
        return self.state_dir / "sockets" / "user.sock"

    @property
    def admin_socket(self) -> Path:
        """Where schedctl reaches the scheduler (mode 0666; admin rights checked per call)."""
        return self.state_dir / "sockets" / "scheduler-user.sock"

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

DEFAULT_CONFIG_TEXT = """\
# cobaltlite instance configuration (see etc/cobaltlite.yaml for every option, commented).
machine: flat:4            # intrepid | bgp-2rack | flat:N[:PPN] | a partition table file
database: ""               # empty: SQLite in this directory; or postgresql+psycopg://...
admin_group: null          # members may run admin operations (root always may)
scheduler_interval: 10     # seconds between scheduling passes (submissions and ends wake it)
backfill: easy             # easy | conservative | none
metrics_interval: 30       # seconds between metrics samples
kill_grace: 10             # seconds between SIGTERM and SIGKILL for a killed job
default_policy: default    # utility function of new queues
scheduler_clock: wall      # wall | queue-manager (a scheduler driven by Qsim over RPC)
utility_file: ""           # site utility functions (see etc/utility-functions.py)
utility_reload: auto       # auto: reload when the file changes | manual: schedctl --reread-policy
utility_budget: 2          # seconds one policy may spend scoring one pass
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
        default = getattr(config, key)
        if value is None and key in ("database",):
            value = ""
        if isinstance(default, float) and isinstance(value, int | float):
            value = float(value)
        if value is not None and default is not None and not isinstance(value, type(default)):
            raise InputError(f"{path}: option {key}: {value!r} is not a {type(default).__name__}")
        setattr(config, key, value)
    return config


def ensure_layout(config: Config) -> None:
    """Create the state directory tree with safe modes and the default config file."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    # Users must traverse to the sockets directory; everything else stays private.
    os.chmod(config.state_dir, 0o755)
    for sub, mode in (("sockets", 0o755), ("run", 0o700), ("log", 0o700)):
        (config.state_dir / sub).mkdir(exist_ok=True)
        os.chmod(config.state_dir / sub, mode)
    if not config.config_path.exists():
        config.config_path.write_text(DEFAULT_CONFIG_TEXT)
