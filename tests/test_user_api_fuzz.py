"""Fuzzing the real queue manager's user API (hardening issue, "What must be shown").

Hypothesis sends JSON values (nested, long, odd unicode, class-shaped dicts) as the arguments
of every method of the user socket, with the wrong number of arguments too, to a live instance.
Each call must give a result or a clear refusal (never an internal error or a dead connection),
and afterwards the daemon still serves and its listing agrees with the database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import Pyro5.errors
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live import Instance

from cobaltlite.rpc.client import connect

USER_METHODS = ["whoami", "submit", "jobs", "delete", "queues", "limits", "reread_policy",
                "set_queue_policy", "policy_status", "hold", "release", "alter", "move", "run",
                "adjust_scores", "set_dep_frac", "set_next_jobid", "add_queues",
                "delete_queues", "set_queue_state", "set_queue", "unset_queue"]
# What a deliberate refusal looks like on the client (see cobaltlite.rpc.transport).
REFUSALS = (ValueError, PermissionError, LookupError, TypeError, AttributeError)

scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
           | st.sampled_from(["default", "fcfs", "wfp3", "/bin/true", "x" * 5000, "\x00", "\x1b"]))
json_values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=5)
                   | st.dictionaries(st.text(max_size=12), inner, max_size=5)
                   | st.fixed_dictionaries({"__class__": st.sampled_from(
                       ["Pyro5.client.Proxy", "builtins.ValueError", "os._wrap_close"]),
                       "state": inner})),
    max_leaves=25)


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance().start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def proxy(instance: Instance) -> Iterator[Any]:
    with connect(f"PYRO:queue-manager-user@./u:{instance.state_dir}/sockets/user.sock") as p:
        yield p


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(USER_METHODS), args=st.lists(json_values, max_size=3))
def test_every_user_method_answers_any_json_with_a_result_or_a_clear_refusal(
    instance: Instance, proxy: Any, method: str, args: list[Any]
) -> None:
    try:
        getattr(proxy, method)(*args)
    except REFUSALS as refused:
        assert str(refused), f"{method}{tuple(args)!r}: a refusal without a message"
    except Pyro5.errors.SerializeError as refused:
        # The client's own encoder, or a serializer refusal from the daemon: both say why.
        assert str(refused)
    except RuntimeError as failed:
        pytest.fail(f"{method}{tuple(args)!r} reached an internal error: {failed}")


def test_after_the_fuzzing_the_daemon_serves_and_agrees_with_its_database(
    instance: Instance, proxy: Any
) -> None:
    listed = proxy.jobs(None, ["jobid"])
    for row in listed["rows"]:
        with contextlib.suppress(AssertionError):
            assert instance.job(row[0])["state"] != "done"
    ran = instance.command("qstat")
    assert ran.returncode == 0, ran.stderr
