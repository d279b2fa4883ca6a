"""Queue rules (cobaltlite.jobs.queues): each restriction refuses with Cobalt's message and admits
the rest; the running limits (maxrun_hold); --setq values and queue configuration files.

The same functions decide in the live queue manager (tests/test_queues_live.py) and in Qsim
(tests/test_qsim_shared_logic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cobaltlite.errors import InputError
from cobaltlite.jobs import queues
from cobaltlite.jobs.queues import QueueLoad, SettingError, UserLoad


def queue(**settings: str) -> dict:
    return {"name": "q", "state": "running", "policy": "default", "priority": 0,
            "restrictions": queues.parse_settings(settings)}


# (setting, refused (user, groups, nodes, walltime s, load), admitted (same), message)
CASES = [
    ({"maxtime": "10"}, ("alice", (), 1, 601, None), ("alice", (), 1, 600, None),
     "Walltime greater than the 'q' queue max walltime of 00:10:00"),
    ({"maxtime": "01:30:00"}, ("alice", (), 1, 5401, None), ("alice", (), 1, 5400, None),
     "Walltime greater than the 'q' queue max walltime of 01:30:00"),
    ({"mintime": "5"}, ("alice", (), 1, 299, None), ("alice", (), 1, 300, None),
     "Walltime less than the 'q' queue min walltime of 00:05:00"),
    ({"users": "bob:carol"}, ("alice", (), 1, 60, None), ("carol", (), 1, 60, None),
     "You are not allowed to submit to the 'q' queue"),
    ({"groups": "staff"}, ("alice", ("users",), 1, 60, None),
     ("alice", ("users", "staff"), 1, 60, None),
     "You are not allowed to submit to the 'q' queue (group restriction)"),
    ({"maxqueued": "2"}, ("alice", (), 1, 60, UserLoad(jobs=2)),
     ("alice", (), 1, 60, UserLoad(jobs=1)),
     "The limit of 2 jobs per user in the 'q' queue has been reached"),
    ({"maxnodehours": "2"}, ("alice", (), 2, 1801, UserLoad(jobs=1, node_seconds=3600)),
     ("alice", (), 2, 1800, UserLoad(jobs=1, node_seconds=3600)),
     "The limit of 2 node hours per user in the 'q' queue has been reached"),
    ({"maxusernodes": "4"}, ("alice", (), 5, 60, None), ("alice", (), 4, 60, None),
     "The job's 5 nodes exceed the limit of 4 nodes per user in the 'q' queue"),
    ({"totalnodes": "8"}, ("alice", (), 9, 60, None), ("alice", (), 8, 60, None),
     "The job's 9 nodes exceed the limit of 8 nodes in the 'q' queue"),
    ({"maxnodes": "8"}, ("alice", (), 9, 60, None), ("alice", (), 8, 60, None),
     "Nodes greater than the 'q' queue max nodes of 8"),
    ({"minnodes": "9"}, ("alice", (), 8, 60, None), ("alice", (), 9, 60, None),
     "Nodes less than the 'q' queue min nodes of 9"),
]


@pytest.mark.parametrize(("setting", "refused", "admitted", "message"), CASES,
                         ids=[next(iter(c[0])) + "=" + next(iter(c[0].values())) for c in CASES])
def test_each_restriction_refuses_with_cobalts_message_and_admits_the_rest(
        setting: dict, refused: tuple, admitted: tuple, message: str) -> None:
    q = queue(**setting)
    assert queues.admission_error(q, *refused) == message
    assert queues.admission_error(q, *admitted) is None


def test_users_star_and_an_unrestricted_queue_admit_everyone() -> None:
    assert queues.admission_error(queue(users="*"), "anyone", (), 1, 60, None) is None
    assert queues.admission_error(queue(), "anyone", (), 10**6, 10**7, None) is None


@pytest.mark.parametrize("state", ["draining", "dead"])
def test_queues_that_take_no_new_jobs_say_so(state: str) -> None:
    assert queues.state_error({**queue(), "state": state}) == f"The 'q' queue is {state}"


@pytest.mark.parametrize("state", ["running", "stopped"])
def test_running_and_stopped_queues_take_jobs(state: str) -> None:
    assert queues.state_error({**queue(), "state": state}) is None


def test_running_limits_hold_jobs_back_and_let_them_go_as_jobs_end() -> None:
    q = queue(maxrunning="1", maxtotaljobs="2", maxusernodes="4", totalnodes="6")
    load = QueueLoad()
    assert not queues.run_blocker(q, "alice", 2, load)
    load.add("alice", 2, 60, running=True)
    assert queues.run_blocker(q, "alice", 1, load)  # maxrunning 1 for alice
    assert not queues.run_blocker(q, "bob", 3, load)
    assert queues.run_blocker(q, "bob", 5, load)  # totalnodes: 2 + 5 > 6
    load.add("bob", 3, 60, running=True)
    assert queues.run_blocker(q, "carol", 1, load)  # maxtotaljobs 2 reached
    load.remove("alice", 2, 60, running=True)  # alice's job ended
    assert not queues.run_blocker(q, "alice", 1, load)
    assert not queues.run_blocker(queue(), "carol", 100, load)  # no limits, no hold


def test_maxusernodes_counts_the_users_running_nodes() -> None:
    q = queue(maxusernodes="4")
    load = QueueLoad()
    load.add("alice", 3, 60, running=True)
    assert queues.run_blocker(q, "alice", 2, load)
    assert not queues.run_blocker(q, "alice", 1, load)
    assert not queues.run_blocker(q, "bob", 4, load)


def test_walltime_zero_means_the_queues_maxtime() -> None:
    assert queues.walltime_for(queue(maxtime="30"), 0) == 1800
    assert queues.walltime_for(queue(maxtime="30"), 60) == 60
    with pytest.raises(SettingError, match='No Max Walltime default or for queue "q" defined'):
        queues.walltime_for(queue(), 0)


@pytest.mark.parametrize(("settings", "message"), [
    ({"maxtyme": "5"}, "'maxtyme' is not a queue setting: choose from maxtime, mintime"),
    ({"maxtime": "5x"}, "maxtime='5x': give minutes or HH:MM:SS"),
    ({"maxtime": "01:75:00"}, "maxtime='01:75:00': give minutes or HH:MM:SS"),
    ({"maxqueued": "-1"}, "maxqueued='-1': give a whole number of 0 or more"),
    ({"maxnodehours": "lots"}, "maxnodehours='lots': give a number of node hours"),
    ({"users": "alice bob"}, "users='alice bob': give names separated by ':'"),
    ({"priority": "high"}, "priority='high': give a whole number"),
    ({"mintime": "60", "maxtime": "30"}, "mintime 01:00:00 is longer than maxtime 00:30:00"),
    ({"minnodes": "9", "maxnodes": "8"}, "minnodes 9 is more than maxnodes 8"),
])
def test_malformed_settings_name_the_key_and_the_value(settings: dict, message: str) -> None:
    with pytest.raises(SettingError, match=message.replace("(", r"\(")):
        queues.parse_settings(settings)


def test_setq_values_are_stored_in_the_units_jobs_use() -> None:
    assert queues.parse_settings({"maxtime": "90", "mintime": "00:10:30", "users": "a:b",
                                  "maxnodehours": "2.5", "priority": "-3"}) == {
        "maxtime": 5400, "mintime": 630, "users": "a:b", "maxnodehours": 2.5, "priority": -3}


def test_describe_shows_every_restriction_none_where_unset() -> None:
    shown = queues.describe(queue(maxtime="10"))
    assert shown["maxtime"] == 600
    assert all(shown[key] is None for key in queues.RESTRICTIONS if key != "maxtime")


def test_a_queue_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text("queues:\n  default: {}\n  short:\n    state: draining\n    policy: wfp3\n"
                    "    priority: 5\n    maxtime: '00:30:00'\n    maxrunning: 2\n")
    default, short = queues.load_queue_config(path)
    assert default == {"name": "default", "state": "running", "policy": None, "priority": 0,
                       "restrictions": {}}
    assert short == {"name": "short", "state": "draining", "policy": "wfp3", "priority": 5,
                     "restrictions": {"maxtime": 1800, "maxrunning": 2}}


@pytest.mark.parametrize(("text", "message"), [
    ("queues:\n  short:\n    maxtime: soon\n", ":3: queues.short: maxtime='soon'"),
    ("queues:\n  short:\n    state: paused\n", ":3: queues.short: queue state 'paused'"),
    ("queues:\n  short:\n    colour: red\n", ":3: queues.short: 'colour' is not a queue "),
    ("queues:\n  'bad name':\n", ":2: queue name 'bad name'"),
    ("queue:\n  short: {}\n", ":1: expected one key, 'queues:'"),
    ("queues: [a, b]\n", ":1: 'queues:' must map queue names"),
])
def test_a_bad_queue_configuration_names_file_line_and_key(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        queues.load_queue_config(path)
    assert f"{path}{message}" in str(caught.value)
