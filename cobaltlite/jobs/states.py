"""Job states as users see them in qstat, with Cobalt's short codes (reference §2.2).

The stored state is one of the constants below; holds are flags beside it, and the state qstat shows
is derived from both, in Cobalt's priority order (user_hold > dep_hold/dep_fail > admin_hold), then
maxrun_hold for a queued job that a queue's maxrunning or maxtotaljobs keeps waiting.
"""

from __future__ import annotations

QUEUED = "queued"
STARTING = "starting"
RUNNING = "running"
KILLING = "killing"
EXITING = "exiting"
DONE = "done"

STORED_STATES = (QUEUED, STARTING, RUNNING, KILLING, EXITING, DONE)

ACTIVE_STATES = frozenset({STARTING, RUNNING, KILLING, EXITING})
"""States in which a job holds (or may hold) resources on the system."""

SHORT_CODES = {
    "queued": "Q",
    "user_hold": "H",
    "dep_hold": "H",
    "dep_fail": "H",
    "admin_hold": "H",
    "maxrun_hold": "H",
    STARTING: "R",
    RUNNING: "R",
    KILLING: "K",
    EXITING: "E",
    DONE: "E",
}


def display_state(state: str, user_hold: bool, admin_hold: bool, dep_hold: bool = False,
                  dep_fail: bool = False, maxrun_hold: bool = False) -> str:
    """The state word qstat prints."""
    if state == QUEUED:
        if user_hold:
            return "user_hold"
        if dep_fail:
            return "dep_fail"
        if dep_hold:
            return "dep_hold"
        if admin_hold:
            return "admin_hold"
        if maxrun_hold:
            return "maxrun_hold"
    return state


def short_code(display: str) -> str:
    return SHORT_CODES.get(display, "?")
