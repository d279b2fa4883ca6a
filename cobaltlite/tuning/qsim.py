"""Adaptive tuning inside a replay: the monitor's metrics at every event, the tuner every C_i.

Qsim calls `before_pass(t)` and `after_pass(t)` at every event time. The instant utilization is
recorded after every pass, so the rolling averages are exact time averages; the queue depth and
the rolling averages are computed only when a check is due, just before the pass it changes.
"""

from __future__ import annotations

from cobaltlite.metrics_monitor.series import StepSeries, monitored_values
from cobaltlite.qsim.engine import Qsim
from cobaltlite.tuning.apply import apply_window, check_policy_takes, with_balance_factor
from cobaltlite.tuning.scheme import TuningScheme
from cobaltlite.tuning.tuner import Tuner


class QsimTuning:
    def __init__(self, qsim: Qsim, scheme: TuningScheme) -> None:
        check_policy_takes(scheme, qsim.policy)
        self._qsim = qsim
        base = {"bf": float(qsim.policy.options.get("balance_factor", 1.0)),
                "w": qsim.scheduler.window}
        self.tuner = Tuner(scheme, qsim.clock.now(), base)
        self.utilization = StepSeries()
        self._tunes_bf = any(rule.tunable == "bf" for rule in scheme.rules)
        self._apply()
        qsim.pass_hook = self

    def before_pass(self, now: float) -> None:
        """Algorithm 1: when C_i has passed, read the metrics and set BF and W for this pass."""
        if not self.tuner.due(now):
            return
        qsim = self._qsim
        queued = qsim.queued_jobs()
        depth = sum(now - job.submit_time for job in queued)
        metrics = monitored_values(now, self.utilization, depth, len(queued))
        if self.tuner.check(now, metrics):
            self._apply()

    def after_pass(self, now: float) -> None:
        machine = self._qsim.machine()
        self.utilization.record(now, 1.0 - machine.idle_nodes() / machine.total_nodes)

    def _apply(self) -> None:
        values = self.tuner.values
        apply_window(self._qsim.scheduler, values)
        if self._tunes_bf:
            self._qsim.policy = with_balance_factor(self._qsim.policy, values["bf"])
