"""Training runs: directory layout, metrics, exact resume, and bad input from the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

from lcjax import cli
from lcjax.config import config_from_dict, save_config
from lcjax.run import RunError, read_metrics, train
from tiny_kuhn import TINY_KUHN

TINY = TINY_KUHN
TIMING = ("time/",)


def _strip_timings(rows):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING) and not k.endswith("nodes_per_second")} for r in rows]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """A 4-iteration run straight through."""
    root = tmp_path_factory.mktemp("runs")
    return train(config_from_dict(TINY), run_dir=root / "straight")


def test_run_directory_layout_and_metrics(straight):
    run = Path(straight.run_dir)
    assert (run / "config.yaml").exists()
    rows = read_metrics(run)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    for key in (
        "time/iteration_seconds",
        "time/traversal_seconds",
        "time/advantage_train_seconds",
        "time/strategy_train_seconds",
        "time/memory_add_seconds",
        "time/checkpoint_seconds",
        "time/evaluation_seconds",
        "traversal/nodes",
        "traversal/samples",
        "traversal/nodes_per_second",
        "memory/advantage_0",
        "memory/advantage_1",
        "memory/strategy",
        "loss/advantage_0",
        "loss/advantage_1",
        "loss/strategy",
    ):
        assert key in rows[0], key
    assert "eval/exploitability" in rows[1] and "eval/exploitability" not in rows[0]
    assert 0 <= rows[3]["eval/exploitability"] < 1
    # Every read-off of evaluation.readouts (the defaults here) gets its exploitability; the
    # primary policy's equals its eval/ key, and no diagnostics run on poker.
    for readout in ("average", "average_greedy", "current"):
        assert 0 <= rows[3][f"readout/{readout}/exploitability"], readout
    assert rows[3]["readout/average/exploitability"] == rows[3]["eval/exploitability"]
    assert not any(k.startswith("diag/") for k in rows[3])
    assert rows[1]["time/checkpoint_seconds"] > 0 and rows[0]["time/checkpoint_seconds"] == 0
    steps = sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [2, 4]
    assert straight.stopped_by == "max_iterations" and straight.iteration == 4


def _assert_same_state(a, b):
    """Every leaf of two solver states equal (PRNG keys by their key data)."""
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_resume_continues_exactly(straight, tmp_path):
    config = config_from_dict(TINY)
    first = train(config, run_dir=tmp_path / "resumed", max_iterations=2)
    assert first.iteration == 2
    resumed = train(None, resume=tmp_path / "resumed")
    assert resumed.iteration == 4
    _assert_same_state(straight.state, resumed.state)
    assert _strip_timings(read_metrics(straight.run_dir)) == _strip_timings(read_metrics(tmp_path / "resumed"))


def test_resume_drops_rows_written_after_the_checkpoint(tmp_path):
    config = config_from_dict(TINY)
    train(config, run_dir=tmp_path / "r", max_iterations=2)
    metrics = tmp_path / "r" / "metrics.jsonl"
    with open(metrics, "a") as f:  # a crash after logging iteration 3 but before its checkpoint
        f.write(json.dumps({"iteration": 3, "loss/strategy": 123.0}) + "\n")
        f.write('{"iteration": 4, "trunc')
    resumed = train(None, resume=tmp_path / "r", max_iterations=3)
    rows = read_metrics(tmp_path / "r")
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert rows[2]["loss/strategy"] != 123.0 and resumed.iteration == 3


def test_resume_with_incompatible_config_is_refused(tmp_path):
    train(config_from_dict(TINY), run_dir=tmp_path / "r", max_iterations=2)
    changed = dict(TINY, network={"hidden_size": 16, "num_layers": 1})
    with pytest.raises(RunError, match="network.hidden_size"):
        train(config_from_dict(changed), resume=tmp_path / "r")


def test_existing_run_directory_is_not_overwritten(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(RunError, match="already exists"):
        train(config_from_dict(TINY), run_dir=tmp_path / "taken")
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"


# ----------------------------------------------------------------------------- CLI errors
def _error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_cli_missing_config(tmp_path, capsys):
    assert cli.main(["train", "--config", str(tmp_path / "nope.yaml"), "--runs-root", str(tmp_path)]) == 2
    assert "nope.yaml" in _error_line(capsys)


def test_cli_malformed_config(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("run:\n  seed: [1, 2\n")
    assert cli.main(["train", "--config", str(bad), "--runs-root", str(tmp_path)]) == 2
    assert "bad.yaml" in _error_line(capsys)
    assert not (tmp_path / "runs").exists()


def test_cli_bad_override(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    save_config(config_from_dict(TINY), good)
    assert cli.main(["train", "--config", str(good), "--set", "traversal.traversals_per_player=abc"]) == 2
    assert "traversal.traversals_per_player" in _error_line(capsys)


def test_cli_missing_and_corrupt_checkpoints(straight, tmp_path, capsys):
    assert cli.main(["evaluate", "--checkpoint", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in _error_line(capsys)
    # A run directory whose checkpoint files are damaged.
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(straight.run_dir, broken)
    for path in (broken / "checkpoints").rglob("*"):
        if path.is_file() and path.stat().st_size > 0 and "metadata" not in path.name and path.suffix != ".txt":
            path.write_bytes(b"\x00garbage")
    assert cli.main(["evaluate", "--checkpoint", str(broken)]) == 2
    assert "broken" in _error_line(capsys)


def test_cli_refuses_checkpoints_of_an_older_format(straight, tmp_path, capsys):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(straight.run_dir, old)
    for path in (old / "checkpoints").rglob("metadata.json"):
        metadata = json.loads(path.read_text())
        metadata["checkpoint"]["format_version"] = 1
        path.write_text(json.dumps(metadata))
    for argv in (["evaluate", "--checkpoint", str(old)], ["train", "--resume", str(old)]):
        assert cli.main(argv) == 2
        line = _error_line(capsys)
        assert "format version 1" in line and "format version 2" in line


def test_cli_resume_missing_run(tmp_path, capsys):
    assert cli.main(["train", "--resume", str(tmp_path / "ghost")]) == 2
    assert "ghost" in _error_line(capsys)


def test_cli_resume_that_cannot_start_prints_only_the_error(tmp_path, capsys):
    # The live panel must not start (it would print pieces of itself) before the checks.
    ghost = tmp_path / "ghost"
    assert cli.main(["train", "--resume", str(ghost)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"error: cannot resume: {ghost} is not a run directory (no config.yaml)"]
    # A run directory without checkpoints fails later, still before the panel.
    empty = tmp_path / "empty"
    empty.mkdir()
    save_config(config_from_dict(TINY), empty / "config.yaml")
    assert cli.main(["train", "--resume", str(empty)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(f"error: cannot resume {empty}"), err


def test_cli_evaluate_small_game(straight, capsys):
    assert cli.main(["evaluate", "--checkpoint", str(straight.run_dir)]) == 0
    assert "exploitability" in capsys.readouterr().out
    assert cli.main(["evaluate", "--checkpoint", str(straight.run_dir), "--policy", "current,current_greedy"]) == 0
    out = capsys.readouterr().out
    assert "current_greedy read-off: exploitability" in out


@pytest.mark.parametrize("final_steps", [0, 8])
def test_fresh_strategy_network_is_fitted_at_a_stop_between_phases(tmp_path, final_steps, monkeypatch):
    """strategy_warm_start false, a phase every 2 iterations: a run stopping after iteration
    3 fits the strategy network on its final reservoir before the last checkpoint, and a
    resume from there still continues exactly as a run straight through. With
    final_strategy_steps (8, twice strategy_steps) that fit is longer, and a run stopping on
    a scheduled iteration (4) fits it too, skipping that iteration's scheduled phase."""
    from lcjax.cfr.solver import DeepCFR
    from lcjax.run import load_run

    opt = {"strategy_train_every": 2, "strategy_warm_start": False, "final_strategy_steps": final_steps}
    d = {**TINY, "optimization": {**TINY["optimization"], **opt}}
    config = config_from_dict(d)
    phases = []
    iteration = DeepCFR.iteration

    def recording(self, state, fit_strategy=True):
        phases.append(fit_strategy)
        return iteration(self, state, fit_strategy=fit_strategy)

    monkeypatch.setattr(DeepCFR, "iteration", recording)
    straight = train(config, run_dir=tmp_path / "straight")
    # Iteration 4 is the last (max_iterations): its scheduled phase runs only where the stop
    # does not fit the network again.
    assert phases == [True, True, True, final_steps == 0]
    last_row = read_metrics(tmp_path / "straight")[-1]
    assert last_row["iteration"] == 4 and "loss/strategy" in last_row
    events = []
    first = train(config, run_dir=tmp_path / "stopped", max_iterations=3, progress=events.append)
    # The progress display names the fit that ends the run and its length.
    fits = [e for e in events if e.get("phase") == "last strategy fit"]
    assert fits == [{"event": "phase", "phase": "last strategy fit", "iteration": 3,
                     "steps": config.optimization.last_strategy_steps}]
    rows = read_metrics(tmp_path / "stopped")
    # Iteration 3 is off the schedule: its row has the stop's strategy fit.
    assert "loss/strategy" in rows[2] and "loss/strategy" not in read_metrics(tmp_path / "straight")[2]
    _, at2, _ = load_run(tmp_path / "stopped", step=2)
    _, at3, _ = load_run(tmp_path / "stopped", step=3)
    changed = [not np.array_equal(np.asarray(x), np.asarray(y))
               for x, y in zip(jax.tree_util.tree_leaves(at2.strategy_params), jax.tree_util.tree_leaves(at3.strategy_params))]
    assert any(changed)
    np.testing.assert_array_equal(jax.random.key_data(first.state.key), jax.random.key_data(at3.key))
    resumed = train(None, resume=tmp_path / "stopped")
    assert resumed.iteration == 4
    _assert_same_state(straight.state, resumed.state)


def test_a_resume_may_change_the_last_strategy_fit_and_no_other_optimization_key(tmp_path):
    """optimization.final_strategy_steps changes only the network a run ends on, so a finished
    run resumed with a longer last fit is the run trained with it straight through. The
    resume rewrites config.yaml, so the run's readers (and a later plain resume) see the new
    value; a refused resume leaves the file as it was."""
    from lcjax.config import load_config

    opt = {"strategy_train_every": 2, "strategy_warm_start": False}
    d = {**TINY, "optimization": {**TINY["optimization"], **opt}}
    train(config_from_dict(d), run_dir=tmp_path / "run", max_iterations=3)
    assert load_config(tmp_path / "run" / "config.yaml").optimization.last_strategy_steps == 4
    longer = config_from_dict({**d, "optimization": {**d["optimization"], "final_strategy_steps": 8}})
    straight = train(longer, run_dir=tmp_path / "straight")
    resumed = train(longer, resume=tmp_path / "run")
    assert resumed.iteration == 4
    _assert_same_state(straight.state, resumed.state)
    written = load_config(tmp_path / "run" / "config.yaml")
    assert written.optimization.final_strategy_steps == 8
    assert written == longer
    other = config_from_dict({**d, "optimization": {**d["optimization"], "advantage_steps": 5}})
    message = "cannot resume: optimization.advantage_steps is 5 but the run was started with 4 (only run, checkpoint, "
    with pytest.raises(RunError, match=re.escape(message)):
        train(other, resume=tmp_path / "run")
    assert load_config(tmp_path / "run" / "config.yaml") == longer


def test_a_run_stopped_by_max_minutes_evaluates_and_saves_its_last_iteration(tmp_path):
    """run.max_minutes ends the run after the iteration in flight; that iteration is evaluated
    (off the eval_every schedule) and checkpointed, so the summary describes the checkpoint."""
    from lcjax.run import load_run

    # 0.6 ms: the first iteration (which compiles) always outlasts it.
    d = {**TINY, "run": {**TINY["run"], "max_minutes": 1e-5}, "evaluation": {"eval_every": 3}}
    result = train(config_from_dict(d), run_dir=tmp_path / "timed")
    assert result.stopped_by == "max_minutes"
    assert result.iteration == 1
    rows = read_metrics(tmp_path / "timed")
    assert [r["iteration"] for r in rows] == [1]
    assert rows[0]["eval/exploitability"] > 0
    assert rows[0]["time/evaluation_seconds"] > 0
    assert result.last_eval_iteration == 1
    assert result.last_eval["eval/exploitability"] == rows[0]["eval/exploitability"]
    _, state, _ = load_run(tmp_path / "timed")
    assert int(state.iteration) == 1


def test_train_display_names_the_phase_and_the_last_fits_length():
    """The live panel shows each phase event, with the Adam steps where the event has them
    (the fit that ends a run can take a minute or more on a CPU)."""
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=100)
    with cli._TrainDisplay(console, max_minutes=None) as display:
        display({"event": "phase", "phase": "iteration", "iteration": 4})
        assert display.phase == "iteration (iteration 4)"
        display({"event": "phase", "phase": "last strategy fit", "iteration": 162, "steps": 12000})
        assert display.phase == "last strategy fit, 12,000 Adam steps (iteration 162)"
