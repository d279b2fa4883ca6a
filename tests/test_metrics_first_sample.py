"""The metrics monitor's first sample after `cobaltlite up`, against real daemons: it is taken
at once, maybe before the scheduler's first pass has been estimated, and must still show the
nodes a booked reservation holds (they are counted when the monitor asks, not taken from the
last start estimate)."""

from __future__ import annotations

import json
import time

from live import Instance, ok


def test_the_first_sample_after_up_shows_the_reserved_nodes() -> None:
    # One sample per ten minutes: after `up` the latest sample is the one taken at start.
    instance = Instance(machine="flat:4", settings={"metrics_interval": 600}).start_retrying()
    try:
        ok(instance.command("setres", "-n", "maint", "-s", "now", "-d", "30", "-p", "2:3"))
        assert instance.cobaltlite("down").returncode == 0
        restarted = time.time()
        up = instance.cobaltlite("up")
        assert up.returncode == 0, up.stderr
        shown = json.loads(ok(instance.command("cqmetrics", "--json", "--since", "0")))
        first = shown["current"]
        assert first["time"] >= restarted
        assert first["values"]["reserved_nodes"] == 2
        assert first["values"]["reserved_idle_nodes"] == 2
        assert first["values"]["reserved_idle_share"] == 0.5
    finally:
        instance.stop()
