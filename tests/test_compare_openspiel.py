"""Tests of `scripts/compare_openspiel.py`: lcjax against OpenSpiel's Deep CFR on Leduc.

`main()` runs in-process with a budget shorter than the first iteration (so each
implementation runs exactly one iteration, or a few for the quick PyTorch one), 16 x 1
networks and few traversals and training steps. OpenSpiel is in the `dev` extra; PyTorch is
not, so the PyTorch implementation runs only where it is installed (`.[compare]`) and must be
reported as skipped elsewhere.
"""

from __future__ import annotations

import importlib
import json
import math

import compare_openspiel as co
import numpy as np
import pytest

TINY = [
    "--seconds", "2", "--hidden", "16", "--layers", "1", "--seed", "0", "--quiet",
    "--openspiel-traversals", "20", "--openspiel-advantage-steps", "20", "--openspiel-policy-steps", "20",
    "--openspiel-batch", "32", "--openspiel-memory", "5000",
    "--set", "traversal.traversals_per_player=64", "--set", "traversal.traversal_batch=64",
    "--set", "optimization.advantage_steps=20", "--set", "optimization.strategy_steps=20",
    "--set", "optimization.advantage_batch=128", "--set", "optimization.strategy_batch=128",
    "--set", "memory.advantage_capacity=20000", "--set", "memory.strategy_capacity=20000",
    "--set", "optimization.fast_compile=true",
]
UNIFORM = 2.3736111111111  # exploitability of the uniform policy in Leduc, chips


def _torch_solver_imports() -> bool:
    try:
        importlib.import_module("open_spiel.python.pytorch.deep_cfr")  # imports torch
    except ImportError:
        return False
    return True


def _openspiel_exploitability_of_export(path: str) -> float:
    """OpenSpiel's exploitability of a policy written by lcjax's `export_openspiel_policy`."""
    import pyspiel
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability as os_exploitability

    game = pyspiel.load_game("leduc_poker")
    table = os_policy.TabularPolicy(game)
    with open(path) as f:
        exported = json.load(f)
    for i, state in enumerate(table.states):
        table.action_probability_array[i] = exported[state.information_state_string()]
    return os_exploitability.exploitability(game, table)


def _check_run(entry: dict, settings: dict) -> None:
    assert entry["available"] and entry["ran"] and entry["reason"] is None
    curve = entry["curve"]
    assert curve and entry["iterations"] == curve[-1]["iteration"] >= 1
    last = curve[-1]
    for row in curve:
        for key in ("seconds", "iteration", "nodes", "nodes_per_second", "exploitability"):
            assert key in row, key
    assert entry["nodes"] == last["nodes"] > 0
    assert entry["seconds"] == last["seconds"] > 0
    assert entry["nodes_per_second"] > 0
    assert entry["nodes_per_second"] == pytest.approx(last["nodes"] / last["seconds"], rel=1e-6)
    assert entry["traversal_nodes_per_second"] >= entry["nodes_per_second"]
    # An external-sampling Leduc traversal visits about 15 decision and terminal states.
    assert 5 < entry["nodes_per_traversal"] < 40
    # Early policies may be worse than uniform (always raising: 4.49), never negative.
    for row in curve:
        assert math.isfinite(row["exploitability"])
        assert 0 <= row["exploitability"] <= 2 * UNIFORM
    assert entry["final_exploitability"] == last["exploitability"]
    assert entry["best_exploitability"] == min(r["exploitability"] for r in curve)
    assert [a["time"] for a in entry["exploitability_at"]] == pytest.approx(
        [f * settings["seconds"] for f in co.TABLE_FRACTIONS]
    )


def test_compare_runs_lcjax_and_openspiel(tmp_path, capsys):
    path, out = tmp_path / "compare.json", tmp_path / "out"
    assert co.main(TINY + ["--json", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(path.read_text())

    assert set(data) == {"settings", "implementations", "ratios", "headline"}
    settings = data["settings"]
    assert settings["hidden"] == 16 and settings["layers"] == 1 and settings["seconds"] == 2
    assert settings["openspiel"]["num_traversals"] == 20
    assert settings["lcjax_overrides"]["traversal.traversals_per_player"] == 64
    # Both libraries measure in the same units.
    assert settings["uniform_exploitability"]["lcjax"] == pytest.approx(UNIFORM, rel=1e-9)
    assert settings["uniform_exploitability"]["openspiel"] == pytest.approx(UNIFORM, rel=1e-9)

    impls = data["implementations"]
    assert set(impls) == set(co.IMPLEMENTATIONS)
    for name in ("lcjax", "openspiel_jax"):
        _check_run(impls[name], settings)
    lcjax_config = impls["lcjax"]["settings"]["solver_config"]
    assert (lcjax_config["network"]["hidden_size"], lcjax_config["network"]["num_layers"]) == (16, 1)
    assert impls["openspiel_jax"]["settings"]["advantage_network_layers"] == [16]
    # lcjax's own exploitability agrees with OpenSpiel's on lcjax's exported final policy.
    exported = _openspiel_exploitability_of_export(str(out / "lcjax" / "policy.json"))
    assert exported == pytest.approx(impls["lcjax"]["final_exploitability"], abs=1e-5)
    assert (out / "openspiel_jax" / "curve.jsonl").exists()

    ratios = data["ratios"]
    lcjax_nps = impls["lcjax"]["nodes_per_second"]
    assert ratios["nodes_per_second"]["lcjax/openspiel_jax"] == pytest.approx(
        lcjax_nps / impls["openspiel_jax"]["nodes_per_second"]
    )
    assert ratios["exploitability"]["lcjax/openspiel_jax"] == pytest.approx(
        impls["lcjax"]["final_exploitability"] / impls["openspiel_jax"]["final_exploitability"]
    )
    assert data["headline"]["lcjax/openspiel_jax"] == ratios["nodes_per_second"]["lcjax/openspiel_jax"]
    assert "headline: lcjax/OpenSpiel nodes/s" in printed and "openspiel_jax" in printed

    torch_entry = impls["openspiel_torch"]
    if _torch_solver_imports():
        _check_run(torch_entry, settings)
        assert ratios["nodes_per_second"]["lcjax/openspiel_torch"] == pytest.approx(
            lcjax_nps / torch_entry["nodes_per_second"]
        )
    else:
        assert torch_entry["available"] is False and torch_entry["ran"] is False
        assert "torch" in torch_entry["reason"] and co.INSTALL_HINT in torch_entry["reason"]
        assert ratios["nodes_per_second"]["lcjax/openspiel_torch"] is None
        assert data["headline"]["lcjax/openspiel_torch"] is None
        assert "openspiel_torch: skipped" in printed and co.INSTALL_HINT in printed


def test_missing_packages_are_reported(monkeypatch):
    real = importlib.util.find_spec

    def without(*missing):
        return lambda name, *a, **k: None if name in missing else real(name, *a, **k)

    monkeypatch.setattr(co.importlib.util, "find_spec", without("torch"))
    reason = co.unavailable_reason("openspiel_torch")
    assert reason.startswith("torch is not installed") and co.INSTALL_HINT in reason
    assert co.unavailable_reason("lcjax") is None
    monkeypatch.setattr(co.importlib.util, "find_spec", without("pyspiel", "open_spiel"))
    for name in co.OPENSPIEL:
        assert co.unavailable_reason(name).startswith("open_spiel is not installed")


def test_policy_table_equals_action_probabilities():
    """The batched policy table is the solver's own `action_probabilities`, renormalized."""
    import pyspiel

    game = pyspiel.load_game("leduc_poker")
    table, obs, mask = co.openspiel_policy_inputs(game)
    assert obs.shape == (936, 30) and mask.shape == (936, 3)
    names = ["openspiel_jax"] + (["openspiel_torch"] if _torch_solver_imports() else [])
    for name in names:
        solver = co.make_openspiel_solver(
            name, game, hidden=16, layers=1, seed=3, params=dict(co.OPENSPIEL_DEFAULTS, memory_capacity=100)
        )
        probs = co.openspiel_policy_table(name, solver, obs, mask)
        assert np.allclose(probs.sum(axis=1), 1.0) and np.all(probs[~mask] == 0)
        for i in range(0, len(table.states), 47):
            given = solver.action_probabilities(table.states[i])
            row = np.array([float(given.get(a, 0.0)) for a in range(3)])
            np.testing.assert_allclose(probs[i], row / row.sum(), atol=1e-5, err_msg=name)


def test_bad_implementations_exit_with_the_allowed_values(capsys):
    with pytest.raises(SystemExit) as e:
        co.main(["--implementations", "lcjax,openspiel_tf"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "openspiel_tf" in err and "allowed: lcjax, openspiel_jax, openspiel_torch" in err
    with pytest.raises(SystemExit):
        co.main(["--set", "network.hidden_size=8"])
    assert "--hidden" in capsys.readouterr().err
