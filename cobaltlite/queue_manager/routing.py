"""Routing a job by the active queue layout's job classes, live (seed 002; docs/hybrid-queues.md,
"Live", and docs/administration.md, "Queue layouts").

With a layout active, a job submitted (or moved) to `default`, or to a source queue the layout's
classes name, goes to the layout queue whose classes take its size and requested time: the rule
Qsim routes a trace by (`QueueLayout.queue_for`), so a replay of the instance's log places each
job where the daemons did. A job named to any other queue stays there (a layout queue: its
limits apply; another queue: it runs on the nodes outside the layout, D002-10). A job no queue
takes is refused, naming its size, its time and what each queue takes.

The layout is the system component's (it lays the partitions out); the router asks it for the
active layout's text at each routing and parses a text only when it changed. While the system
cannot be reached (restarting, say) it routes by the last answer, so qsub keeps working as it
did before routing existed (the queue manager already needed the system once, for its limits);
before any answer the error goes to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from cobaltlite.partitioning.layout import NO_TIME_LIMIT, QueueLayout, parse_layout
from cobaltlite.timefmt import format_hms

log = structlog.get_logger("queue-manager")


class RoutingError(ValueError):
    """No queue of the layout takes the job; the message says why, for the user."""


@dataclass(frozen=True, slots=True)
class Placement:
    queue: str
    """The queue the job goes in."""
    routed_from: str
    """The queue it was submitted (or moved) to when the layout routed it; "" when it stays
    in the queue it named."""


class LayoutRouter:
    def __init__(self, active_layout: Callable[[], str | None]) -> None:
        """`active_layout`: the system's active layout YAML, None without one."""
        self._active_layout = active_layout
        self._answered = False
        self._last_text: str | None = None
        self._parsed: tuple[str, QueueLayout] | None = None

    def layout(self) -> QueueLayout | None:
        try:
            text = self._ask()
        except Exception as exc:  # an RPC to the system: connection, timeout, protocol errors
            if not self._answered:
                raise
            log.warning("system unreachable, routing by the last queue layout it gave",
                        error=str(exc))
            text = self._last_text
        else:
            self._answered, self._last_text = True, text
        if text is None:
            return None
        if self._parsed is None or self._parsed[0] != text:
            # The system accepted the text only after the same checks (layout_store.laid_out).
            self._parsed = (text, parse_layout(text, "the active queue layout")[0])
        return self._parsed[1]

    def _ask(self) -> str | None:
        try:
            return self._active_layout()
        except Exception:  # once more: a connection broken by a restart of the system fails
            # its next call, and the call after it connects again (rpc/client.py)
            return self._active_layout()

    def place(self, named: str, nodes: int, walltime: int) -> Placement:
        """Where a job named to queue `named` with this size and wall time (seconds) goes;
        RoutingError when the layout routes from `named` and no queue takes it."""
        layout = self.layout()
        if layout is None or named not in layout.routing_sources:
            return Placement(named, "")
        target = layout.queue_for(named, nodes, walltime)
        if target is None:
            raise RoutingError(
                f"no queue of the queue layout takes a job of {nodes} nodes and "
                f"{format_hms(walltime)} from queue '{named}'; the layout's queues take "
                + "; ".join(_takes(layout, q.name) for q in layout.queues)
                + " (partadm --layout-show)")
        return Placement(target, named)


def _takes(layout: QueueLayout, name: str) -> str:
    """What queue `name` takes, as the refusal names it: `small: 1-2 nodes, up to 01:00:00`."""
    classes = []
    for c in layout.queue(name).classes:
        if c.max_time >= NO_TIME_LIMIT:
            time = "any time" if c.min_time == 0 else f"from {format_hms(c.min_time)}"
        else:
            time = f"{format_hms(c.min_time)}-{format_hms(c.max_time)}"
        sources = f" from {'/'.join(sorted(c.sources))}" if c.sources else ""
        classes.append(f"{c.min_nodes}-{c.max_nodes} nodes, {time}{sources}")
    return f"{name}: " + " or ".join(classes)
