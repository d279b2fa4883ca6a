"""Queues, holds, dependencies and the new user API end to end: real daemons, real accounts.

Calls go over the real user socket; the kernel names the caller. Alice is an ordinary user, Bob
is in the admin group, root is root. Queue restrictions are checked at submit, alter and move
with Cobalt's messages; bad input changes nothing and the daemons keep serving.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
from live import Instance
from unix_users import ADMINS, ALICE, BOB, Accounts, as_account, ensure_test_users

from cobaltlite.config import load_config
from cobaltlite.rpc.client import connect

CALLER = textwrap.dedent("""
    import json, sys
    from cobaltlite.config import load_config
    from cobaltlite.rpc.client import connect
    calls = json.loads(sys.argv[1])
    socket = load_config().user_socket
    out = []
    with connect(f"PYRO:queue-manager-user@./u:{socket}") as api:
        for method, args in calls:
            try:
                out.append(["ok", getattr(api, method)(*args)])
            except Exception as exc:
                out.append([type(exc).__name__, str(exc)])
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture(scope="module")
def instance(accounts: Accounts) -> Iterator[Instance]:
    running = Instance(machine="flat:4", settings={"admin_group": ADMINS}).start_retrying()
    yield running
    running.stop()


def calls_as(instance: Instance, accounts: Accounts, account: str,
             *calls: tuple[str, list[Any]]) -> list[list[Any]]:
    """Make API calls as `account`: [["ok", result] or [exception class, message], ...]."""
    env = {**accounts.env, "COBALTLITE_STATE_DIR": str(instance.state_dir)}
    ran = subprocess.run([accounts.python, "-c", CALLER, json.dumps(calls)], env=env,
                         capture_output=True, text=True, timeout=60, cwd="/",
                         **as_account(account))
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def call_as(instance: Instance, accounts: Accounts, account: str, method: str,
            *args: Any) -> Any:
    (kind, value), = calls_as(instance, accounts, account, (method, list(args)))
    if kind != "ok":
        raise {"ValueError": ValueError, "PermissionError": PermissionError,
               "LookupError": LookupError}.get(kind, RuntimeError)(value)
    return value


def root_api(instance: Instance) -> Any:
    return connect(f"PYRO:queue-manager-user@./u:{load_config(instance.state_dir).user_socket}")


def spec(instance: Instance, **fields: Any) -> dict[str, Any]:
    return {"nodes": 1, "walltime": 300, "command": "/bin/sleep", "args": ["30"],
            "cwd": str(instance.jobs_dir), **fields}


def job_row(api: Any, jobid: int) -> dict[str, Any]:
    table = api.jobs([jobid])
    return dict(zip(table["columns"], table["rows"][0], strict=True))


@pytest.fixture
def limited(instance: Instance) -> Iterator[str]:
    """A stopped queue 'lim' (takes jobs, runs none) that is gone after the test."""
    with root_api(instance) as api:
        api.add_queues(["lim"])
        api.set_queue_state(["lim"], "stopped")
    yield "lim"
    with root_api(instance) as api:
        api.delete_queues(["lim"], True)


# (--setq, a submission that is refused, one that is admitted, Cobalt's message)
RESTRICTIONS = [
    ({"maxtime": "5"}, {"walltime": 301}, {"walltime": 300},
     "Walltime greater than the 'lim' queue max walltime of 00:05:00"),
    ({"mintime": "5"}, {"walltime": 299}, {"walltime": 300},
     "Walltime less than the 'lim' queue min walltime of 00:05:00"),
    ({"maxusernodes": "2"}, {"nodes": 3}, {"nodes": 2},
     "The job's 3 nodes exceed the limit of 2 nodes per user in the 'lim' queue"),
    ({"totalnodes": "2"}, {"nodes": 3}, {"nodes": 2},
     "The job's 3 nodes exceed the limit of 2 nodes in the 'lim' queue"),
    ({"maxnodehours": "1"}, {"nodes": 2, "walltime": 3600}, {"nodes": 1, "walltime": 3600},
     "The limit of 1 node hours per user in the 'lim' queue has been reached"),
]


@pytest.mark.parametrize(("setting", "refused", "admitted", "message"), RESTRICTIONS,
                         ids=[next(iter(r[0])) for r in RESTRICTIONS])
def test_a_restriction_refuses_at_submit_alter_and_move_and_admits_the_rest(
        instance: Instance, accounts: Accounts, limited: str, setting: dict, refused: dict,
        admitted: dict, message: str) -> None:
    with root_api(instance) as api:
        api.set_queue([limited], setting)
    submit, good, elsewhere = calls_as(
        instance, accounts, ALICE, ("submit", [spec(instance, queue=limited, **refused)]),
        ("submit", [spec(instance, queue=limited, **admitted)]),
        ("submit", [spec(instance, queue="default", user_hold=True, **refused)]))
    assert submit == ["ValueError", message]
    assert good[0] == "ok" and elsewhere[0] == "ok"
    jobid, other = good[1], elsewhere[1]
    change = {k: v for k, v in refused.items()}
    (altered,), (moved,) = (call_as(instance, accounts, ALICE, "alter", [jobid], change),
                            call_as(instance, accounts, ALICE, "move", [other], limited))
    assert altered == {"jobid": jobid, "ok": False,
                       "message": f"   Failed to alter job {jobid}: {message}"}
    assert moved == {"jobid": other, "ok": False,
                     "message": f"   Failed to move job {other} to queue 'lim': {message}"}
    with root_api(instance) as api:
        assert {k: job_row(api, jobid)[k] for k in admitted} == admitted  # nothing changed
        assert job_row(api, other)["queue"] == "default"
        api.delete([jobid, other], True)


def test_users_groups_and_maxqueued_restrictions(
        instance: Instance, accounts: Accounts, limited: str) -> None:
    with root_api(instance) as api:
        api.set_queue([limited], {"users": f"{BOB}"})
    refused, = calls_as(instance, accounts, ALICE, ("submit", [spec(instance, queue=limited)]))
    assert refused == ["ValueError", "You are not allowed to submit to the 'lim' queue"]
    assert call_as(instance, accounts, BOB, "submit", spec(instance, queue=limited)) > 0
    with root_api(instance) as api:
        api.unset_queue([limited], ["users"])
        api.set_queue([limited], {"groups": ADMINS, "maxqueued": "2"})
    refused, = calls_as(instance, accounts, ALICE, ("submit", [spec(instance, queue=limited)]))
    assert refused == ["ValueError",
                       "You are not allowed to submit to the 'lim' queue (group restriction)"]
    second, third = calls_as(instance, accounts, BOB, ("submit", [spec(instance, queue=limited)]),
                             ("submit", [spec(instance, queue=limited)]))
    assert second[0] == "ok"
    assert third == ["ValueError",
                     "The limit of 2 jobs per user in the 'lim' queue has been reached"]


def test_walltime_zero_takes_the_queues_maxtime(
        instance: Instance, accounts: Accounts, limited: str) -> None:
    with root_api(instance) as api:
        refused = calls_as(instance, accounts, ALICE,
                           ("submit", [spec(instance, queue=limited, walltime=0)]))
        assert refused == [["ValueError", "No Max Walltime default or for queue \"lim\" defined. "
                            "Please contact system administrator"]]
        api.set_queue([limited], {"maxtime": "00:20:00"})
        jobid = call_as(instance, accounts, ALICE, "submit",
                        spec(instance, queue=limited, walltime=0))
        assert job_row(api, jobid)["walltime"] == 1200


def test_a_user_cannot_hold_release_alter_or_move_another_users_job(
        instance: Instance, accounts: Accounts) -> None:
    jobid = call_as(instance, accounts, BOB, "submit", spec(instance, user_hold=True))
    results = calls_as(instance, accounts, ALICE, ("hold", [[jobid], "user"]),
                       ("release", [[jobid], "user"]), ("alter", [[jobid], {"nodes": 2}]),
                       ("move", [[jobid], "default"]), ("delete", [[jobid]]),
                       ("hold", [[jobid], "admin"]), ("adjust_scores", [[jobid], "+5"]))
    foreign = f"job belongs to {BOB}, not to {ALICE}"
    assert [r[1][0]["message"] for r in results[:4]] == [
        f"   Failed to place user hold on job {jobid}: {foreign}",
        f"   Failed to remove user hold on job {jobid}: {foreign}",
        f"   Failed to alter job {jobid}: {foreign}",
        f"   Failed to move job {jobid} to queue 'default': {foreign}"]
    assert results[4][1][0]["ok"] is False
    assert results[5] == ["PermissionError", "an admin hold (cqadm --admin-hold) needs root or "
                          "membership of the admin group"]
    assert results[6][0] == "PermissionError"
    with root_api(instance) as api:
        row = job_row(api, jobid)
        assert (row["display_state"], row["nodes"], row["admin_hold"]) == ("user_hold", 1, False)
    # The owner may; the admin group may place an admin hold.
    own = calls_as(instance, accounts, BOB, ("alter", [[jobid], {"nodes": 2}]),
                   ("hold", [[jobid], "admin"]), ("delete", [[jobid]]))
    assert [r[1][0]["ok"] if r[0] == "ok" else r for r in own] == [True, True, True]


def test_holds_of_each_kind_are_independent_and_logged(instance: Instance) -> None:
    with root_api(instance) as api:
        jobid = api.submit(spec(instance, user_hold=True))
        assert api.hold([jobid], "admin")[0]["message"] == f"Placed admin hold on job {jobid}"
        assert api.hold([jobid], "user")[0]["message"] == (
            f"   Failed to place user hold on job {jobid}: already in state 'user hold'")
        assert api.release([jobid], "user")[0]["ok"]
        assert job_row(api, jobid)["display_state"] == "admin_hold"
        assert api.release([jobid], "admin")[0]["ok"]
        instance.wait_for(jobid, {"running"})
        assert api.hold([jobid], "user")[0]["message"] == (
            f"   Failed to place user hold on job {jobid}: is already active")
        assert api.delete([jobid])[0]["result"] == "killing"
    instance.wait_for(jobid, {"done"})
    log = (instance.state_dir / "log" / "accounting.log").read_text()
    kinds = [line.split(";")[1] for line in log.splitlines() if f";{jobid};" in line]
    assert kinds == ["Q", "HA", "HA", "HR", "HR", "S", "D", "E"]
    start = next(line for line in log.splitlines() if f";S;{jobid};" in line)
    for field in ("jobname=", "cwd=", "exe=/bin/sleep", "args=30", "mode=script", "ctime=",
                  "etime=", "Resource_List.ncpus="):
        assert field in start, (field, start)
    end = next(line for line in log.splitlines() if f";E;{jobid};" in line)
    assert "resources_used.walltime=" in end and "Exit_status=" in end


def test_maxrun_hold_releases_as_jobs_end(instance: Instance, accounts: Accounts) -> None:
    with root_api(instance) as api:
        api.add_queues(["one"])
        api.set_queue(["one"], {"maxrunning": "1"})
        try:
            first, second = (call_as(instance, accounts, ALICE, "submit",
                                     spec(instance, queue="one", args=["3"])) for _ in range(2))
            instance.wait_for(first, {"running"})
            time.sleep(1.5)  # passes ran meanwhile: the second must still wait
            assert job_row(api, second)["display_state"] == "maxrun_hold"
            assert job_row(api, second)["short_state"] == "H"
            instance.wait_for(first, {"done"}, timeout=20)
            instance.wait_for(second, {"running", "done"}, timeout=20)
        finally:
            api.delete_queues(["one"], True)


def test_a_deleted_parent_fails_its_dependant_until_qrls_dependencies(instance: Instance) -> None:
    with root_api(instance) as api:
        parent = api.submit(spec(instance, user_hold=True))
        child = api.submit(spec(instance, dependencies=[parent], args=["1"]))
        assert job_row(api, child)["display_state"] == "dep_hold"
        api.delete([parent])
        row = job_row(api, child)
        assert (row["display_state"], row["dep_fail"]) == ("dep_fail", True)
        time.sleep(1.5)
        assert job_row(api, child)["state"] == "queued"  # never started while held
        assert api.release([child], "dependencies")[0]["message"] == (
            f"Removed dependencies from job {child}")
        assert job_row(api, child)["dependencies"] == []
        instance.wait_for(child, {"done"}, timeout=20)


def test_a_satisfied_dependency_passes_a_share_of_the_score_on(instance: Instance) -> None:
    with root_api(instance) as api:
        api.add_queues(["quiet"])
        api.set_queue_policy("quiet", "high_prio")  # a constant score: inheritance shows
        try:
            parent = api.submit(spec(instance, queue="quiet", args=["1"], user_hold=True))
            child = api.submit(spec(instance, queue="quiet", dependencies=[parent],
                                    user_hold=True))
            assert api.adjust_scores([parent], "80")[0]["ok"]
            assert api.set_dep_frac([parent], 0.25)[0]["ok"]
            api.release([parent], "user")
            instance.wait_for(parent, {"done"}, timeout=20)
            assert job_row(api, child)["score"] >= 20.0
        finally:
            api.delete_queues(["quiet"], True)


def test_bad_input_is_refused_with_a_clear_message_and_changes_nothing(
        instance: Instance) -> None:
    with root_api(instance) as api:
        before = api.queues()
        refusals = [
            (lambda: api.set_queue(["default", "nope"], {"maxtime": "5"}), LookupError,
             "queue(s) 'nope' do not exist"),
            (lambda: api.set_queue(["default"], {"maxtime": "5", "maxtyme": "5"}), ValueError,
             "'maxtyme' is not a queue setting"),
            (lambda: api.set_queue(["default"], {"maxqueued": "many"}), ValueError,
             "maxqueued='many': give a whole number"),
            (lambda: api.set_queue_state(["default"], "sleeping"), ValueError,
             "queue state 'sleeping': choose one of running, stopped, draining, dead"),
            (lambda: api.unset_queue(["default"], ["colour"]), ValueError,
             "'colour' is not a queue restriction"),
            (lambda: api.add_queues(["default"]), ValueError, "queue already exists: default"),
            (lambda: api.add_queues(["a b"]), ValueError, "queue name 'a b'"),
            (lambda: api.move([1], "nope"), LookupError, "Error: queue 'nope' does not exist"),
            (lambda: api.hold([1], "system"), ValueError, "hold kind 'system'"),
            (lambda: api.alter([1], {"colour": "red"}), ValueError, "cannot alter colour"),
            (lambda: api.set_next_jobid(1), ValueError,
             "The new jobid must be greater than the next jobid"),
        ]
        for call, error, message in refusals:
            with pytest.raises(error, match=re.escape(message)):
                call()
        assert api.queues() == before
        # A dependency cycle, a running job's alter and a move to a dead queue.
        first = api.submit(spec(instance, user_hold=True))
        second = api.submit(spec(instance, user_hold=True, dependencies=[first]))
        assert api.alter([first], {"dependencies": [second]})[0]["message"] == (
            f"   Failed to alter job {first}: dependencies would make a cycle: "
            f"{first} -> {second} -> {first}")
        assert job_row(api, first)["dependencies"] == []
        api.add_queues(["gone"])
        api.set_queue_state(["gone"], "dead")
        assert api.move([first], "gone")[0]["message"] == (
            f"   Failed to move job {first} to queue 'gone': The 'gone' queue is dead")
        assert job_row(api, first)["queue"] == "default"
        api.delete_queues(["gone"])
        api.release([first], "user")
        instance.wait_for(first, {"running"})
        assert api.alter([first], {"walltime": 60})[0]["message"] == (
            f"   Failed to alter job {first}: Modifying a job while running is currently not "
            "supported")
        assert job_row(api, first)["walltime"] == 300
        api.delete([first, second], True)
        assert api.whoami()["admin"]  # the daemon still serves


def test_queue_states_and_a_stopped_scheduler_survive_a_restart(accounts: Accounts) -> None:
    fresh = Instance(machine="flat:4").start()
    try:
        with root_api(fresh) as api:
            api.add_queues(["night"])
            api.set_queue(["night"], {"maxtime": "60", "users": "*"})
            api.set_queue_state(["night"], "draining")
        assert fresh.command("schedctl", "--stop").returncode == 0
        fresh.cobaltlite("down")
        up = fresh.cobaltlite("up")
        assert up.returncode == 0, up.stderr
        with root_api(fresh) as api:
            night = next(q for q in api.queues() if q["name"] == "night")
            assert (night["state"], night["maxtime"], night["users"]) == ("draining", 3600, "*")
            jobid = api.submit(spec(fresh, args=["1"]))
            time.sleep(2)
            assert job_row(api, jobid)["state"] == "queued"  # scheduling is still stopped
        assert fresh.command("schedctl", "--start").returncode == 0
        fresh.wait_for(jobid, {"running", "done"})
    finally:
        fresh.stop()
