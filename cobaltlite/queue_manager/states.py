"""Job states as users see them in qstat, with Cobalt's short codes (reference §2.2).

The stored state is one of the constants below; holds are flags beside it, and the state qstat shows
is derived from both, in Cobalt's priority order (user_hold > dep_hold > admin_hold).
"""

from __future__ import annotations

QUEUED = "queued"
STARTING = "starting"
RUNNING = "running"
KILLING = "killing"
EXITING = "exiting"
DONE = "done"

ACTIVE_STATES = frozenset({STARTING, RUNNING, KILLING, EXITING})
"""States in which a job holds (or may hold) resources on the system."""

SHORT_CODES = {
    "queued": "Q",
    "user_hold": "H",
    "dep_hold": "H",
    "dep_fail": "H",
    "admin_hold": "H",
    STARTING: "R",
    RUNNING: "R",
    KILLING: "K",
    EXITING: "E",
    DONE: "E",
}


def display_state(state: str, user_hold: bool, admin_hold: bool, dep_hold: bool = False) -> str:
    """The state word qstat prints."""
    if state == QUEUED:
        if user_hold:
            return "user_hold"
        if dep_hold:
            return "dep_hold"
        if admin_hold:
            return "admin_hold"
    return state


def short_code(display: str) -> str:
    return SHORT_CODES.get(display, "?")
