"""Several devices and several processes (`lcjax.distributed`, `lcjax.cfr.mesh`), on CPU.

The multi-device checks run `tests/distributed_worker.py` in a subprocess with 4 forced host
devices (XLA_FLAGS must be set before JAX starts); the multi-process check runs two of them
that meet on a localhost coordinator and talk through gloo.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from lcjax import cli, distributed
from lcjax.cfr.mesh import local_traversal_config
from lcjax.cfr.solver import DeepCFR
from lcjax.config import config_from_dict, load_config, make_game, shipped_config, solver_config
from lcjax.sections import DistributedConfig
from lcjax.settings import ConfigError

ROOT = Path(__file__).resolve().parent.parent
WORKER = str(Path(__file__).resolve().with_name("distributed_worker.py"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", **extra)
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        env.pop(name, None)
    return env


def _result(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, stdout[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "override, shown",
    [
        ("distributed.devices=0", "distributed.devices: expected all or a positive integer, got 0"),
        ("distributed.devices=most", "distributed.devices: expected all or a positive integer, got 'most'"),
        ("distributed.num_processes=0", "distributed.num_processes: expected a positive integer or null, got 0"),
        ("distributed.process_id=-1", "distributed.process_id: expected an integer >= 0 or null, got -1"),
        ("distributed.coordinator_address=localhost", "distributed.coordinator_address: expected host:port"),
        ("distributed.coordinator_address=h:70000", "distributed.coordinator_address: expected host:port"),
    ],
)
def test_bad_distributed_values(override, shown):
    with pytest.raises(ConfigError) as err:
        load_config(shipped_config("leduc"), [override])
    assert shown in str(err.value) and "\n" not in str(err.value)


def test_process_id_must_fit_the_process_count():
    with pytest.raises(ConfigError, match=r"distributed.process_id: expected an integer in 0..1 \(num_processes is 2\), got 2"):
        load_config(shipped_config("leduc"), ["distributed.num_processes=2", "distributed.process_id=2"])


def test_process_settings_from_config_and_environment(monkeypatch):
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    assert distributed.process_settings(DistributedConfig()) == (None, 1, 0)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "10.0.0.1:1234")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAX_PROCESS_ID", "1")
    assert distributed.process_settings(DistributedConfig()) == ("10.0.0.1:1234", 2, 1)
    # The section wins over the environment.
    assert distributed.process_settings(DistributedConfig(process_id=0)) == ("10.0.0.1:1234", 2, 0)
    monkeypatch.setenv("JAX_PROCESS_ID", "5")
    with pytest.raises(ConfigError, match=r"distributed.process_id: expected an integer in 0..1 .*got 5"):
        distributed.process_settings(DistributedConfig())
    monkeypatch.setenv("JAX_NUM_PROCESSES", "two")
    with pytest.raises(ConfigError, match="JAX_NUM_PROCESSES, got 'two'"):
        distributed.process_settings(DistributedConfig())
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS")
    with pytest.raises(ConfigError, match="distributed.coordinator_address: needed when num_processes is 2"):
        distributed.process_settings(DistributedConfig(num_processes=2, process_id=0))


def test_more_devices_than_exist():
    wanted = len(jax.devices()) + 1
    with pytest.raises(ConfigError, match=f"distributed.devices: expected at most the {wanted - 1} cpu devices this run sees, got {wanted}"):
        distributed.make_mesh(DistributedConfig(devices=wanted))
    assert distributed.make_mesh(DistributedConfig()).size == len(jax.devices())


def test_unreachable_coordinator_is_one_line_and_writes_nothing(tmp_path, capsys):
    address = f"127.0.0.1:{_free_port()}"
    sets = [f"distributed.coordinator_address={address}", "distributed.num_processes=2",
            "distributed.process_id=1", "distributed.initialization_timeout=1"]
    argv = ["train", "--config", str(shipped_config("leduc")), "--runs-root", str(tmp_path / "runs")]
    assert cli.main(argv + [arg for s in sets for arg in ("--set", s)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot reach the coordinator at " + address), err
    assert not (tmp_path / "runs").exists()
    assert not jax.distributed.is_initialized()


def test_each_device_runs_its_share_of_traversals_and_lanes():
    t = config_from_dict({"game": "leduc", "traversal": {"traversal_batch": 100, "probe": {"rollout_batch": 0}}}).traversal
    local = local_traversal_config(t, 4)
    assert local.traversal_batch == 25 and local.probe.rollout_batch == 512 and local.value.lanes == 512
    assert local_traversal_config(t, 3).traversal_batch == 34  # rounded up
    explicit = config_from_dict({"game": "leduc", "traversal": {"probe": {"rollout_batch": 64}, "value": {"lanes": 32}}}).traversal
    local = local_traversal_config(explicit, 4)
    assert local.probe.rollout_batch == 64 and local.value.lanes == 32  # set explicitly: per device


# ----------------------------------------------------------------------------- one device
# Metrics of this tiny Kuhn run's second iteration, recorded before meshes existed: a run on
# one device must stay what it was.
TINY_KUHN = {
    "game": "kuhn",
    "run": {"seed": 3},
    "network": {"hidden_size": 8, "num_layers": 1},
    "traversal": {"scheme": "external", "traversals_per_player": 32, "traversal_batch": 32,
                  "external": {"max_depth": 4, "max_advantage": 4, "max_strategy": 4}},
    "optimization": {"advantage_steps": 4, "advantage_batch": 16, "strategy_steps": 4, "strategy_batch": 16},
    "memory": {"advantage_capacity": 256, "strategy_capacity": 256},
}
RECORDED = {
    "loss/advantage_0": 3.823857069015503, "loss/advantage_1": 4.77432918548584, "loss/strategy": 0.6118879318237305,
    "memory/advantage_0": 86, "memory/advantage_1": 64, "memory/strategy": 228, "traversal/advantage_samples": 86,
    "traversal/evaluations": 186, "traversal/nodes": 336, "traversal/strategy_samples": 100,
}


def test_one_device_run_is_unchanged():
    config = config_from_dict(TINY_KUHN)
    solver = DeepCFR(make_game(config), solver_config(config, backend="cpu"))
    assert solver.mesh is None
    state = solver.init(jax.random.key(3))
    for _ in range(2):
        state, metrics = solver.iteration(state)
    assert {k: metrics[k] for k in RECORDED} == pytest.approx(RECORDED, rel=1e-5)


# ----------------------------------------------------------------------------- 4 devices
@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    root = tmp_path_factory.mktemp("four")
    env = _env(XLA_FLAGS="--xla_force_host_platform_device_count=4")
    done = subprocess.run([sys.executable, WORKER, "devices", str(root)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return _result(done.stdout)


def test_four_devices_reach_the_same_exploitability(four_devices):
    one, four = four_devices["one"]["exploitability"], four_devices["four"]["exploitability"]
    # Uniform play is ~4.7 chips from optimal; 8 iterations bring both to ~1.1, and two
    # seeds of either differ by ~0.1.
    assert one < 1.6 and four < 1.6
    assert abs(one - four) < 0.35
    assert four_devices["four"]["params_sharding"] == "P()"  # replicated parameters


def test_four_devices_sample_counts_add_up(four_devices):
    for run in ("one", "four"):
        r = four_devices[run]
        assert sum(r["seen"]["advantage_0"]) + sum(r["seen"]["advantage_1"]) == r["offered"]["advantage"]
        assert sum(r["seen"]["strategy"]) == r["offered"]["strategy"]
        for name, seen in r["seen"].items():
            shard = r["capacity"][name] // len(seen)
            assert r["size"][name] == [min(s, shard) for s in seen], name
            assert r["memory_metrics"][name] == sum(r["size"][name])
    # Every device inserts its own traversals' samples: the shards fill alike.
    seen = four_devices["four"]["seen"]["strategy"]
    assert len(seen) == 4 and min(seen) > 0.8 * max(seen)


def test_four_device_checkpoint_resumes_exactly(four_devices):
    run = four_devices["run"]
    assert run["rows"] == 4
    assert run["straight"] == run["resumed"] and run["same_metrics"]


def test_resume_on_another_device_count_is_refused(four_devices):
    message = four_devices["run"]["two_devices"]
    assert message.startswith("cannot resume: the checkpoint was written on 4 device(s) but this run has 2")
    assert "distributed.devices=4" in message and "\n" not in message


def test_one_of_four_devices_runs_the_plain_program(four_devices):
    run = four_devices["run"]
    assert run["one_device_is_plain"] and run["one_device"] == four_devices["plain"]


def test_evaluation_games_split_over_devices(four_devices):
    assert four_devices["arena_split"]


# ----------------------------------------------------------------------------- 2 processes
def test_two_processes_train_and_resume_together(tmp_path):
    port = _free_port()
    procs = [
        subprocess.Popen([sys.executable, WORKER, "process", str(pid), str(port), str(tmp_path)],
                         env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for pid in (0, 1)
    ]
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-3000:]
            outputs.append(_result(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    first, second = outputs
    assert first["first_iteration"] == second["first_iteration"] == 2
    assert first["iteration"] == second["iteration"] == 3  # then resumed together for one more
    assert first["run_dir"] == second["run_dir"]
    assert first["params"] == second["params"]
    assert first["exploitability"] == second["exploitability"]
    run_dir = Path(first["run_dir"])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3]  # written once, by process 0
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["2", "3"]
