"""Qsim over Pyro5 drives the unchanged scheduler daemon and gets the job log it gets in-process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shared_paths import TRACES

from cobaltlite.config import Config, ensure_layout, load_config
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.partitioning.layout import JobClass, PartitionedQueue, QueueLayout
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.joblog import AccountingObserver
from cobaltlite.qsim.server import serve_qsim
from cobaltlite.rpc.peers import Peer
from cobaltlite.rpc.secret import create_secret
from cobaltlite.rpc.transport import shutdown
from cobaltlite.traces.swf import read_swf

JOBS = 300


# Three size classes with partitions and a common pool (seed 002): the partitions and the
# queued times the pool's priority factor needs cross the wire too.
HYBRID = QueueLayout((
    PartitionedQueue("small", (JobClass(frozenset(), 1, 8),), 16),
    PartitionedQueue("medium", (JobClass(frozenset(), 9, 32),), 32, priority=2),
    PartitionedQueue("large", (JobClass(frozenset(), 33, 64),), 8)), pool=8, tau_pf=0.5)


def _replay(jobs, log: Path, pass_runner=None, layout=None) -> None:
    observer = AccountingObserver(log)
    qsim = Qsim(jobs, build_machine(load_description("flat:64")), builtin_policy("wfp3"),
                "easy", observer, pass_runner, queue_layout=layout)
    return qsim, observer


def _scheduler_instance(state_dir: Path) -> Config:
    config = load_config(state_dir)
    ensure_layout(config)
    create_secret(config.secret_path)
    # The timer never fires during the test: every pass is one Qsim asked for.
    config.config_path.write_text("machine: flat:64\nscheduler_clock: queue-manager\n"
                                  "scheduler_interval: 3600\nbackfill: easy\n")
    return load_config(state_dir)


@pytest.mark.parametrize("layout", [None, HYBRID], ids=["machine", "queue-layout"])
def test_a_replay_over_rpc_writes_the_same_job_log_as_in_process(
        tmp_path: Path, layout: QueueLayout | None) -> None:
    policy_jobs = JOBS if layout is None else JOBS // 2  # a pass per region: keep it short
    trace = read_swf(TRACES / "lublin_256.swf.gz").jobs[:policy_jobs]
    for job in trace:  # 64 nodes (16 under the layout): keep every job placeable
        job.nodes = min(job.nodes, 64 if layout is None else 16)

    local, observer = _replay(trace, tmp_path / "in-process.log", layout=layout)
    local.run()
    observer.close()

    config = _scheduler_instance(tmp_path / "instance")
    scheduler_peer = Peer(config, "scheduler", timeout=60.0)
    remote, observer = _replay(trace, tmp_path / "over-rpc.log",
                               pass_runner=lambda: scheduler_peer.run_pass(), layout=layout)
    daemons = serve_qsim(remote, config)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "cobaltlite.daemon", "scheduler", "--state-dir",
         str(config.state_dir)], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if scheduler_peer.ping() == "scheduler":
                    break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        result = remote.run()
    finally:
        observer.close()
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(15)
        for d in daemons:
            shutdown(d)
    assert len(result.outcomes) == policy_jobs
    in_process = (tmp_path / "in-process.log").read_bytes()
    over_rpc = (tmp_path / "over-rpc.log").read_bytes()
    assert in_process.count(b";S;") == policy_jobs
    assert over_rpc == in_process
