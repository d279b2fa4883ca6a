"""Putting the tuner's BF and W into a scheduler and a policy: shared by Qsim and the daemon."""

from __future__ import annotations

from collections.abc import Mapping

from cobaltlite.policy.utility import PolicyError, UtilityFunction, make_utility
from cobaltlite.scheduler.scheduler import Scheduler, check_window
from cobaltlite.tuning.scheme import TuningScheme


def with_balance_factor(policy: UtilityFunction, bf: float) -> UtilityFunction:
    """`policy` with its balance factor set to `bf` (the other options kept)."""
    if policy.options.get("balance_factor") == bf:
        return policy
    return make_utility(policy.function, policy.name, {**policy.options, "balance_factor": bf})


def check_policy_takes(scheme: TuningScheme | None, policy: UtilityFunction) -> None:
    """A scheme that tunes BF needs a policy with a balance_factor tunable (`balanced`)."""
    if scheme is not None and any(r.tunable == "bf" for r in scheme.rules):
        try:
            with_balance_factor(policy, 1.0)
        except PolicyError:
            raise PolicyError(
                f"tuning scheme {scheme.name!r} sets BF, but policy {policy.name!r} has no "
                "balance_factor; use --policy balanced") from None


def apply_window(scheduler: Scheduler, values: Mapping[str, float]) -> None:
    scheduler.window = check_window(int(values["w"]))
