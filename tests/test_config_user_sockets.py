"""Config.user_socket_of: one mapping of component -> the Unix socket its commands reach, shared
by the daemons (via Config's properties), slpstat and the `addresses:` clash check."""

from __future__ import annotations

from pathlib import Path

from cobaltlite.config import COMPONENTS, USER_SOCKETS, Config


def test_every_component_has_one_user_socket_of_its_own(tmp_path: Path) -> None:
    config = Config(tmp_path)
    assert set(USER_SOCKETS) == set(COMPONENTS)
    sockets = {component: config.user_socket_of(component) for component in COMPONENTS}
    assert len(set(sockets.values())) == len(COMPONENTS)
    assert all(path.parent == tmp_path / "sockets" for path in sockets.values())
    # The properties the daemons serve on are the same places.
    assert (config.user_socket, config.admin_socket, config.system_admin_socket,
            config.metrics_user_socket) == (
        sockets["queue-manager"], sockets["scheduler"], sockets["system"],
        sockets["metrics-monitor"])
