"""Queues: their states, settings and restrictions, with Cobalt's messages (reference §2.7).

A queue is a plain mapping {name, state, policy, priority, restrictions}; restrictions hold
only the limits that are set, in the units below. The same checks run at submit, qalter and
qmove (`admission_error`) in the live queue manager and in Qsim, and the same running limits
decide whether a queued job may start now (`run_blocker`, the maxrun_hold of Cobalt).

Decisions where Cobalt is vague or broken (docs/operator-guide.md, "Queues"):
- maxtime and mintime are given to `cqadm --setq` in minutes or HH:MM:SS, as Cobalt took them,
  and stored in seconds, the unit of a job's wall time here.
- maxusernodes and totalnodes, stored but never enforced by Cobalt (§10 item 8), are enforced:
  a job larger than either limit is refused at submit, alter and move; otherwise it waits
  (maxrun_hold) while starting it would take the user's running nodes in the queue past
  maxusernodes, or the queue's past totalnodes.
- maxqueued counts the user's unfinished jobs in the queue (queued or running), the job being
  admitted included; maxnodehours sums nodes x wall time of the same jobs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.timefmt import format_hms

QUEUE_STATES = ("running", "stopped", "draining", "dead")
ACCEPTING_STATES = frozenset({"running", "stopped"})
"""Queues that take new jobs (submit, qmove, qalter's re-check)."""
SCHEDULED_STATES = frozenset({"running", "draining"})
"""Queues whose jobs the scheduler starts."""

MAX_QUEUE_NAME = 64
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_.+-]+")
_NAME_LIST = re.compile(r"\*|[A-Za-z0-9_.@+-]+(:[A-Za-z0-9_.@+-]+)*")
_HMS = re.compile(r"(\d+):(\d\d)(?::(\d\d))?")


class SettingError(CobaltliteError, ValueError):
    """A queue setting that cannot be used; the message names the key and the value. A
    CobaltliteError, so it reaches an RPC client as the builtin ValueError with its message."""


def _duration(key: str, value: str) -> int:
    """Minutes (Cobalt's unit) or HH:MM[:SS], as seconds."""
    text = value.strip()
    if text.isdigit():
        return int(text) * 60
    match = _HMS.fullmatch(text)
    if match is None or int(match[2]) > 59 or (match[3] is not None and int(match[3]) > 59):
        raise SettingError(f"{key}={value!r}: give minutes or HH:MM:SS")
    return int(match[1]) * 3600 + int(match[2]) * 60 + int(match[3] or 0)


def _count(key: str, value: str) -> int:
    text = value.strip()
    if not text.isdigit():
        raise SettingError(f"{key}={value!r}: give a whole number of 0 or more")
    if int(text) > 2**31 - 1:
        raise SettingError(f"{key}={value!r}: at most {2**31 - 1}")
    return int(text)


def _hours(key: str, value: str) -> float:
    try:
        hours = float(value)
    except ValueError:
        raise SettingError(f"{key}={value!r}: give a number of node hours") from None
    if not 0 <= hours < float("inf"):
        raise SettingError(f"{key}={value!r}: give a finite number of 0 or more")
    return hours


MAX_NAME_LIST = 4096  # characters of a users or groups list


def _names(key: str, value: str) -> str:
    text = value.strip()
    if len(text) > MAX_NAME_LIST:
        raise SettingError(f"{key}: {len(text)} characters, over the limit of {MAX_NAME_LIST}")
    if not _NAME_LIST.fullmatch(text):
        raise SettingError(f"{key}={value!r}: give names separated by ':' or '*' for everyone")
    return text


RESTRICTIONS: dict[str, Callable[[str, str], Any]] = {
    "maxtime": _duration,
    "mintime": _duration,
    "maxnodes": _count,
    "minnodes": _count,
    "users": _names,
    "groups": _names,
    "maxqueued": _count,
    "maxnodehours": _hours,
    "maxrunning": _count,
    "maxtotaljobs": _count,
    "maxusernodes": _count,
    "totalnodes": _count,
}
"""Every restriction, and how its `--setq` text becomes a stored value."""

SETTINGS = (*RESTRICTIONS, "priority")


def check_queue_name(name: object) -> str:
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name) \
            or len(name) > MAX_QUEUE_NAME:
        raise SettingError(f"queue name {name!r}: use up to {MAX_QUEUE_NAME} letters, digits "
                           "and . _ + -")
    return name


def check_queue_state(state: object) -> str:
    if state not in QUEUE_STATES:
        raise SettingError(f"queue state {state!r}: choose one of {', '.join(QUEUE_STATES)}")
    return str(state)


def parse_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`--setq` key=value pairs (values as text) as stored values; SettingError names the first
    unknown key or bad value, so nothing is changed."""
    parsed: dict[str, Any] = {}
    for key, value in settings.items():
        if key not in SETTINGS:
            raise SettingError(f"{key!r} is not a queue setting: choose from "
                               f"{', '.join(SETTINGS)}")
        if not isinstance(value, str):
            raise SettingError(f"{key}={value!r}: the value must be text")
        if key == "priority":
            try:
                parsed[key] = int(value)
            except ValueError:
                raise SettingError(f"priority={value!r}: give a whole number") from None
        else:
            parsed[key] = RESTRICTIONS[key](key, value)
    check_time_order(parsed)
    return parsed


def check_time_order(restrictions: Mapping[str, Any]) -> None:
    """SettingError when a minimum (mintime, minnodes) exceeds its maximum."""
    mintime, maxtime = restrictions.get("mintime"), restrictions.get("maxtime")
    if mintime is not None and maxtime is not None and mintime > maxtime:
        raise SettingError(f"mintime {format_hms(mintime)} is longer than maxtime "
                           f"{format_hms(maxtime)}")
    minnodes, maxnodes = restrictions.get("minnodes"), restrictions.get("maxnodes")
    if minnodes is not None and maxnodes is not None and minnodes > maxnodes:
        raise SettingError(f"minnodes {minnodes} is more than maxnodes {maxnodes}")


def check_unset_keys(keys: Iterable[Any]) -> list[str]:
    chosen = list(keys)
    for key in chosen:
        if key not in RESTRICTIONS:
            raise SettingError(f"{key!r} is not a queue restriction: choose from "
                               f"{', '.join(RESTRICTIONS)}")
    return chosen


def describe(queue: Mapping[str, Any]) -> dict[str, Any]:
    """A queue as `queues()` returns it: every restriction present, None where unset (and the
    set ones as `restrictions`, the form qstat -Q has read since the first release)."""
    restrictions = queue.get("restrictions") or {}
    return {"name": queue["name"], "state": queue["state"], "policy": queue["policy"],
            "priority": queue["priority"], "restrictions": dict(restrictions),
            **{key: restrictions.get(key) for key in RESTRICTIONS}}


@dataclass(slots=True)
class UserLoad:
    """What a user already has in one queue: unfinished jobs and their node-seconds (for
    admission), and what of it runs (for starting)."""

    jobs: int = 0
    node_seconds: float = 0.0
    running: int = 0
    running_nodes: int = 0


@dataclass(slots=True)
class QueueLoad:
    """What one queue runs now, in jobs and nodes, and its users' loads."""

    running: int = 0
    running_nodes: int = 0
    users: dict[str, UserLoad] = field(default_factory=dict)

    def user(self, name: str) -> UserLoad:
        load = self.users.get(name)
        if load is None:
            load = self.users[name] = UserLoad()
        return load

    def add(self, user: str, nodes: int, walltime: float, running: bool) -> None:
        """A job of `user` joins the queue (already running when the load is rebuilt)."""
        load = self.user(user)
        load.jobs += 1
        load.node_seconds += nodes * walltime
        if running:
            self.started(user, nodes)

    def started(self, user: str, nodes: int) -> None:
        load = self.user(user)
        load.running += 1
        load.running_nodes += nodes
        self.running += 1
        self.running_nodes += nodes

    def stopped(self, user: str, nodes: int) -> None:
        """A running job is back in the queue (requeued after a failure)."""
        load = self.user(user)
        load.running -= 1
        load.running_nodes -= nodes
        self.running -= 1
        self.running_nodes -= nodes

    def remove(self, user: str, nodes: int, walltime: float, running: bool) -> None:
        """A job leaves the queue (ended, deleted, moved): the reverse of `add`."""
        load = self.user(user)
        load.jobs -= 1
        load.node_seconds -= nodes * walltime
        if running:
            self.stopped(user, nodes)


def state_error(queue: Mapping[str, Any]) -> str | None:
    """Cobalt's refusal of a queue that takes no new jobs."""
    if queue["state"] in ACCEPTING_STATES:
        return None
    return f"The '{queue['name']}' queue is {queue['state']}"


def admission_error(queue: Mapping[str, Any], user: str, groups: Iterable[str], nodes: int,
                    walltime: int, load: UserLoad | None) -> str | None:
    """Why `queue` refuses a job of `user` with this size and wall time (seconds), or None.
    `load` is what the user already has in the queue, not counting this job."""
    restrictions = queue.get("restrictions") or {}
    if not restrictions:
        return None
    name = queue["name"]
    ranges: tuple[tuple[str, int, str, str, Callable[[int], str]], ...] = (
        ("Walltime", walltime, "time", "walltime", format_hms),
        ("Nodes", nodes, "nodes", "nodes", str))
    for quantity, value, key, unit, show in ranges:
        most = restrictions.get(f"max{key}")
        if most is not None and value > most:
            return f"{quantity} greater than the '{name}' queue max {unit} of {show(most)}"
        least = restrictions.get(f"min{key}")
        if least is not None and value < least:
            return f"{quantity} less than the '{name}' queue min {unit} of {show(least)}"
    users = restrictions.get("users")
    if users and users != "*" and user not in users.split(":"):
        return f"You are not allowed to submit to the '{name}' queue"
    allowed_groups = restrictions.get("groups")
    if allowed_groups and allowed_groups != "*" and \
            set(allowed_groups.split(":")).isdisjoint(groups):
        return f"You are not allowed to submit to the '{name}' queue (group restriction)"
    for key, what in (("maxusernodes", "nodes per user"), ("totalnodes", "nodes")):
        limit = restrictions.get(key)
        if limit is not None and nodes > limit:
            return f"The job's {nodes} nodes exceed the limit of {limit} {what} in the " \
                   f"'{name}' queue"
    load = load or UserLoad()
    maxqueued = restrictions.get("maxqueued")
    if maxqueued is not None and load.jobs + 1 > maxqueued:
        return f"The limit of {maxqueued} jobs per user in the '{name}' queue has been reached"
    maxnodehours = restrictions.get("maxnodehours")
    if maxnodehours is not None and \
            (load.node_seconds + nodes * walltime) / 3600 > maxnodehours:
        return f"The limit of {maxnodehours:g} node hours per user in the '{name}' queue " \
               "has been reached"
    return None


def run_blocker(queue: Mapping[str, Any], user: str, nodes: int, load: QueueLoad | None) -> bool:
    """Whether the queue's running limits keep a job of `user` with `nodes` waiting now
    (maxrun_hold): maxrunning per user, maxtotaljobs per queue, maxusernodes, totalnodes."""
    restrictions = queue.get("restrictions")
    if not restrictions or load is None:
        return False
    limit = restrictions.get("maxtotaljobs")
    if limit is not None and load.running >= limit:
        return True
    limit = restrictions.get("totalnodes")
    if limit is not None and load.running_nodes + nodes > limit:
        return True
    mine = load.users.get(user)
    if mine is None:
        return False
    limit = restrictions.get("maxrunning")
    if limit is not None and mine.running >= limit:
        return True
    limit = restrictions.get("maxusernodes")
    return limit is not None and mine.running_nodes + nodes > limit


def walltime_for(queue: Mapping[str, Any], walltime: int) -> int:
    """`-t 0` means the queue's maxtime; a queue without one refuses it, as Cobalt did."""
    if walltime > 0:
        return walltime
    maxtime = (queue.get("restrictions") or {}).get("maxtime")
    if maxtime is None:
        raise SettingError(f'No Max Walltime default or for queue "{queue["name"]}" defined. '
                           "Please contact system administrator")
    return int(maxtime)


def default_queue(name: str, policy: str | None = "default") -> dict[str, Any]:
    """A queue with no restrictions, running: what a replay without a queue configuration
    gives every queue its trace names."""
    return {"name": name, "state": "running", "policy": policy, "priority": 0,
            "restrictions": {}}


def load_queue_config(path: Path) -> list[dict[str, Any]]:
    """A queue configuration file (YAML) as queue mappings, for Qsim:

        queues:
          default: {}
          short: {state: running, policy: wfp3, priority: 10, maxtime: "01:00:00",
                  maxrunning: 2, users: "alice:bob"}

    Restriction values are written as for `cqadm --setq` (maxtime in minutes or HH:MM:SS). A
    queue without `policy` is ranked by the replay's own policy (qsim --policy), and without
    `state` it is running.
    InputError names the file, the line and the key of the first bad entry."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"--queues {path}: cannot read it: {exc.strerror}") from None
    import yaml  # only with --queues: a replay without them starts without the YAML parser

    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise InputError(f"--queues {path}: not YAML: {exc}") from None

    def where(node: yaml.Node) -> str:
        return f"{path}:{node.start_mark.line + 1}"

    if not isinstance(root, yaml.MappingNode) or [k.value for k, _ in root.value] != ["queues"]:
        raise InputError(f"{path}:1: expected one key, 'queues:', mapping queue names to "
                         "their settings")
    entries = root.value[0][1]
    if not isinstance(entries, yaml.MappingNode) or not entries.value:
        raise InputError(f"{where(entries)}: 'queues:' must map queue names to settings")
    result: list[dict[str, Any]] = []
    for name_node, body in entries.value:
        try:
            name = check_queue_name(name_node.value)
        except SettingError as exc:
            raise InputError(f"{where(name_node)}: {exc}") from None
        if any(q["name"] == name for q in result):
            raise InputError(f"{where(name_node)}: queue {name!r} is given twice")
        queue = default_queue(name, None)  # no policy: the replay's --policy
        if isinstance(body, yaml.ScalarNode) and body.value in ("", "~", "null"):
            result.append(queue)
            continue
        if not isinstance(body, yaml.MappingNode):
            raise InputError(f"{where(body)}: queue {name!r}: give a mapping of settings")
        settings = {}
        for key_node, value_node in body.value:
            key = key_node.value
            if not isinstance(value_node, yaml.ScalarNode):
                raise InputError(f"{where(value_node)}: queues.{name}.{key}: give one value")
            value = value_node.value
            try:
                if key == "state":
                    queue["state"] = check_queue_state(value)
                elif key == "policy":
                    queue["policy"] = value
                else:
                    settings.update(parse_settings({key: value}))
            except SettingError as exc:
                raise InputError(f"{where(key_node)}: queues.{name}: {exc}") from None
        try:
            queue["priority"] = settings.pop("priority", 0)
            queue["restrictions"] = settings
            check_time_order(settings)
        except SettingError as exc:
            raise InputError(f"{where(name_node)}: queues.{name}: {exc}") from None
        result.append(queue)
    return result
