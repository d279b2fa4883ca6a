"""`qsim sweep` as a user runs it: on a real Dask LocalCluster, in subprocesses, killed for real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_paths import TRACES

from cobaltlite.experiments.spec import ExperimentError, load_experiment
from cobaltlite.experiments.sweep import flatten

LUBLIN = TRACES / "lublin_256.swf.gz"


def qsim(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cobaltlite.qsim.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def experiment(tmp_path: Path, body: str, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body.replace("LUBLIN", str(LUBLIN)))
    return path


SMALL = """
name: small
traces:
  - name: lublin
    file: LUBLIN
    end: 300000
    arrival_scale: [1.0, 0.7]
machines: [flat:256]
policies:
  - fcfs
  - name: balanced
    params: {balance_factor: [0.0, 1.0]}
backfill: [easy, conservative]
"""


def test_a_sweep_gives_the_rows_of_the_same_replays_run_one_by_one(tmp_path: Path) -> None:
    ran = qsim("sweep", str(experiment(tmp_path, SMALL)), "--out", str(tmp_path / "sweep"),
               "--workers", "2", "-q")
    assert ran.returncode == 0, ran.stderr
    assert "12 of 12 replays done (12 run now, 0 reused), 0 failed" in ran.stderr
    assert "Traceback" not in ran.stderr  # dask's shutdown noise stays out of the user's way
    rows = pq.read_table(tmp_path / "sweep" / "results.parquet").to_pylist()
    assert len(rows) == 12
    assert len({r["replay"] for r in rows}) == 12
    for row in rows:
        args = ["--trace", str(LUBLIN), "--machine", "flat:256", "--policy", row["policy"],
                "--backfill", row["backfill"], "--end", "300000",
                "--arrival-scale", str(row["arrival_scale"]), "-q"]
        if row["balance_factor"] is not None:
            args += ["--policy-param", f"balance_factor={row['balance_factor']}"]
        alone = tmp_path / "alone" / row["replay"]
        single = qsim(*args, "--out", str(alone))
        assert single.returncode == 0, single.stderr
        swept = tmp_path / "sweep" / "replays" / row["replay"]
        assert (swept / "summary.json").read_bytes() == (alone / "summary.json").read_bytes()
        assert (swept / "accounting.log").read_bytes() == (alone / "accounting.log").read_bytes()
        metrics = flatten(json.loads((alone / "summary.json").read_text())["metrics"])
        assert {k: row[k] for k in metrics} == metrics


def test_an_interrupted_sweep_resumes_without_recomputing_finished_replays(
    tmp_path: Path,
) -> None:
    body = SMALL.replace("end: 300000", "end: 600000").replace(
        "arrival_scale: [1.0, 0.7]", "arrival_scale: [1.0, 0.9, 0.8, 0.7]")
    path, out = experiment(tmp_path, body), tmp_path / "sweep"
    command = [sys.executable, "-m", "cobaltlite.qsim.cli", "sweep", str(path), "--out", str(out),
               "--workers", "1", "-q"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(out.glob("replays/*/row.json"))) < 3:
            assert process.poll() is None, "the sweep ended before it could be interrupted"
            assert time.monotonic() < deadline, "no replay finished in 240 s"
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the client and its Dask workers, at once
        process.wait()
    finished = {p.parent.name: (p.parent / "summary.json").stat().st_mtime_ns
                for p in out.glob("replays/*/row.json")}
    assert 3 <= len(finished) < 24
    assert not (out / "results.parquet").exists()

    ran = qsim("sweep", str(path), "--out", str(out), "--workers", "2", "-q")
    assert ran.returncode == 0, ran.stderr
    assert f"{len(finished)} of 24 replays already done" in ran.stderr
    assert f"({24 - len(finished)} run now, {len(finished)} reused)" in ran.stderr
    for replay, stamp in finished.items():
        assert (out / "replays" / replay / "summary.json").stat().st_mtime_ns == stamp
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert len(rows) == 24 and len({r["replay"] for r in rows}) == 24


def test_a_failing_replay_is_reported_with_its_configuration_and_the_others_finish(
    tmp_path: Path,
) -> None:
    body = SMALL.replace("arrival_scale: [1.0, 0.7]", "arrival_scale: [1.0, -0.5]")
    out = tmp_path / "sweep"
    ran = qsim("sweep", str(experiment(tmp_path, body)), "--out", str(out), "--workers", "2",
               "--table", "csv", "-q")
    assert ran.returncode == 1
    assert "6 of 12 replays done (6 run now, 0 reused), 6 failed" in ran.stderr
    assert "arrival_scale -0.5: must be a finite number > 0" in ran.stderr
    assert "policy=balanced, balance_factor=1.0" in ran.stderr
    assert "arrival_scale=-0.5" in ran.stderr
    failures = json.loads((out / "failures.json").read_text())
    assert len(failures) == 6
    assert {f["configuration"]["arrival_scale"] for f in failures} == {-0.5}
    lines = (out / "results.csv").read_text().splitlines()
    assert len(lines) == 1 + 6


@pytest.mark.parametrize(("old", "new", "key"), [
    ("name: small", "name: small\nwhatever: 1", "whatever: unknown key"),
    ("file: LUBLIN", "file: /nonexistent.swf", "traces[0].file: /nonexistent.swf: no such file"),
    ("end: 300000", "ending: 300000", "traces[0].ending: unknown key"),
    ("- fcfs", "- fcsf", "policies[0].name: unknown policy 'fcsf'"),
    ("balance_factor: [", "balance_factr: [", "policies[1].params.balance_factr: "),
    ("machines: [flat:256]", "machines: [flat:zero]", "machines[0]: "),
    ("conservative]", "sometimes]", "backfill[1]: 'sometimes' is not a Backfill"),
    ("name: small", "name: small\ngrid: {slowdown_bound: ten}",
     "grid.slowdown_bound: 'ten' is not a float"),
    ("name: small", "name: small\ngrid: {no_such_setting: 1}",
     "grid.no_such_setting: unknown key"),
])
def test_a_wrong_experiment_file_names_the_file_and_key_before_anything_runs(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    path = experiment(tmp_path, SMALL.replace(old, new, 1))
    with pytest.raises(ExperimentError) as caught:
        load_experiment(path)
    assert str(caught.value).startswith(f"{path}: {key}")
    ran = qsim("sweep", str(path), "--out", str(tmp_path / "never"))
    assert ran.returncode == 1
    assert f"qsim sweep: error: {path}: {key}" in ran.stderr
    assert not (tmp_path / "never").exists()


def test_every_replay_setting_is_a_grid_key_by_its_field_name(tmp_path: Path) -> None:
    body = SMALL.replace("name: small", "name: small\ngrid: {slowdown_bound: [5, 60], "
                         "estimate: runtime, lenient: true}")
    loaded = load_experiment(experiment(tmp_path, body))
    assert len(loaded.configs) == 24
    assert {"slowdown_bound", "policy", "balance_factor", "arrival_scale",
            "backfill"} <= set(loaded.swept)
    settings = loaded.configs[0].replay_settings(None)
    assert settings.estimate == "runtime" and settings.lenient is True
    assert {c.replay_settings(None).slowdown_bound for c in loaded.configs} == {5.0, 60.0}


def test_a_sweep_runs_on_an_existing_dask_cluster_given_by_address(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    info = tmp_path / "scheduler.json"
    common = ["--no-dashboard", "--scheduler-file", str(info)]
    scheduler = subprocess.Popen([str(bin_dir / "dask"), "scheduler", "--port", "0", *common],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not info.is_file() or not info.read_text().strip():
            assert time.monotonic() < deadline, "the Dask scheduler did not start in 60 s"
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        worker = subprocess.Popen([str(bin_dir / "dask"), "worker", "--nworkers", "1",
                                   "--nthreads", "1", *common],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        body = SMALL.replace("backfill: [easy, conservative]", "backfill: easy")
        ran = qsim("sweep", str(experiment(tmp_path, body)), "--out", str(tmp_path / "sweep"),
                   "--scheduler", address, "-q")
        assert ran.returncode == 0, ran.stderr
        assert "6 of 6 replays done (6 run now, 0 reused), 0 failed" in ran.stderr
        assert pq.read_table(tmp_path / "sweep" / "results.parquet").num_rows == 6
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)


def test_an_unreachable_scheduler_is_an_error_naming_it(tmp_path: Path) -> None:
    ran = qsim("sweep", str(experiment(tmp_path, SMALL)), "--out", str(tmp_path / "sweep"),
               "--scheduler", "tcp://127.0.0.1:1")
    assert ran.returncode == 1
    assert "qsim sweep: error: --scheduler tcp://127.0.0.1:1: cannot connect" in ran.stderr


@settings(max_examples=25, deadline=None)
@given(scales=st.lists(st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.9, 1.0]), min_size=1,
                       max_size=4, unique=True),
       factors=st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=4,
                        unique=True),
       backfills=st.lists(st.sampled_from(["easy", "conservative", "none"]), min_size=1,
                          unique=True),
       repetitions=st.integers(1, 3))
def test_the_grid_expands_to_every_combination_once_with_stable_ids(
    tmp_path_factory: pytest.TempPathFactory, scales: list[float], factors: list[float],
    backfills: list[str], repetitions: int,
) -> None:
    body = (f"traces: [{{file: {LUBLIN}, arrival_scale: {scales}}}]\nmachines: flat:256\n"
            f"policies: [fcfs, {{name: balanced, params: {{balance_factor: {factors}}}}}]\n"
            f"backfill: {backfills}\nrepetitions: {repetitions}\n")
    path = tmp_path_factory.mktemp("grid") / "exp.yaml"
    path.write_text(body)
    first, again = load_experiment(path), load_experiment(path)
    combos = {(c.policy, dict(c.policy_options).get("balance_factor"),
               dict(c.settings)["arrival_scale"], dict(c.settings)["backfill"].value,
               c.repetition) for c in first.configs}
    expected = len(scales) * (1 + len(factors)) * len(backfills) * repetitions
    assert len(first.configs) == len(combos) == expected
    assert [c.replay_id for c in first.configs] == [c.replay_id for c in again.configs]
    assert len({c.replay_id for c in first.configs}) == expected


def test_a_plain_replay_never_imports_dask_pyarrow_or_matplotlib() -> None:
    """`qsim --trace ...` and `qsim --help` start as fast as before the subcommands existed."""
    probe = ("import sys\nfrom cobaltlite.qsim import cli\ncli.main(['--trace', sys.argv[1], "
             "'--end', '100000', '--machine', 'flat:256', '-q'])\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "{'dask', 'distributed', 'pyarrow', 'matplotlib'} "
             "or m.startswith('cobaltlite.experiments')))")
    ran = subprocess.run([sys.executable, "-c", probe, str(LUBLIN)], capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == "[]"
