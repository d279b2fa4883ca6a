"""Qsim over Pyro5 drives the unchanged scheduler daemon and gets the job log it gets in-process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from shared_paths import TRACES

from cobaltlite.config import Config, ensure_layout, load_config
from cobaltlite.machine.catalog import load_description
from cobaltlite.machine.runtime import build_machine
from cobaltlite.policy.utility import builtin_policy
from cobaltlite.qsim.engine import Qsim
from cobaltlite.qsim.joblog import AccountingObserver
from cobaltlite.qsim.server import serve_qsim
from cobaltlite.rpc.peers import Peer
from cobaltlite.rpc.secret import create_secret
from cobaltlite.rpc.transport import shutdown
from cobaltlite.traces.swf import read_swf

JOBS = 300


def _replay(jobs, log: Path, pass_runner=None) -> None:
    observer = AccountingObserver(log)
    qsim = Qsim(jobs, build_machine(load_description("flat:64")), builtin_policy("wfp3"),
                "easy", observer, pass_runner)
    return qsim, observer


def _scheduler_instance(state_dir: Path) -> Config:
    config = load_config(state_dir)
    ensure_layout(config)
    create_secret(config.secret_path)
    # The timer never fires during the test: every pass is one Qsim asked for.
    config.config_path.write_text("machine: flat:64\nscheduler_clock: queue-manager\n"
                                  "scheduler_interval: 3600\nbackfill: easy\n")
    return load_config(state_dir)


def test_a_replay_over_rpc_writes_the_same_job_log_as_in_process(tmp_path: Path) -> None:
    policy_jobs = JOBS
    trace = read_swf(TRACES / "lublin_256.swf.gz").jobs[:policy_jobs]
    for job in trace:  # 64 nodes: keep every job placeable
        job.nodes = min(job.nodes, 64)

    local, observer = _replay(trace, tmp_path / "in-process.log")
    local.run()
    observer.close()

    config = _scheduler_instance(tmp_path / "instance")
    scheduler_peer = Peer(config, "scheduler", timeout=60.0)
    remote, observer = _replay(trace, tmp_path / "over-rpc.log",
                               pass_runner=lambda: scheduler_peer.run_pass())
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
