"""End-to-end tests of the Deep CFR solver on Kuhn poker.

Compilation dominates on CPU, so every test here uses one tiny configuration (`TINY`) on one
game object: `make_solver` returns one solver per equal (game, config) pair, so
the whole module compiles the solver once, including the in-process run of
`scripts/solve_small.py`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.cfr import exploitability as ex
from lcjax.cfr.memory import MemoryConfig, reservoir_init
from lcjax.cfr.networks import NetworkConfig
from lcjax.cfr.samples import StrategySample
from lcjax.cfr.solver import DeepCFR, SolverConfig, _add_weighted, make_solver
from lcjax.cfr.solver_config import TraversalConfig
from lcjax.cfr.training import OptimizationConfig
from lcjax.cfr.traversal import ProbeConfig
from lcjax.config import small_game_config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from scripts import solve_small  # noqa: E402

GAME = solve_small.GAMES["kuhn"]
# Small networks and batches, by key path; every key here is also passed to the script as --set.
TINY = {
    "traversal.traversals_per_player": 128,
    "traversal.traversal_batch": 128,
    "network.hidden_size": 16,
    "optimization.advantage_steps": 100,
    "optimization.advantage_batch": 128,
    "optimization.strategy_steps": 100,
    "optimization.strategy_batch": 128,
    "memory.advantage_capacity": 50_000,
    "memory.strategy_capacity": 50_000,
    "optimization.strategy_train_every": 1,
}
# TINY as the script's command-line arguments.
TINY_ARGS = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]
SEED = 0
TARGET = 0.05
MAX_ITERATIONS = 40

ITERATION_KEYS = {
    "iteration",
    "loss/advantage_0",
    "loss/advantage_1",
    "loss/strategy",
    "fve/advantage_0",
    "fve/advantage_1",
    "nonfinite/advantage_0",
    "nonfinite/advantage_1",
    "nonfinite/strategy",
    "time/traversal_seconds",
    "time/memory_add_seconds",
    "time/advantage_train_seconds",
    "time/strategy_train_seconds",
    "time/compile_seconds",
    "time/iteration_seconds",
    "traversal/nodes",
    "traversal/evaluations",
    "traversal/samples",
    "traversal/advantage_samples",
    "traversal/strategy_samples",
    "traversal/dropped_samples",
    "traversal/truncated",
    "traversal/nodes_per_second",
    "memory/advantage_0",
    "memory/advantage_1",
    "memory/strategy",
}


@pytest.fixture(scope="module")
def config() -> SolverConfig:
    return small_game_config("kuhn", "external", **TINY)


@pytest.fixture(scope="module")
def solver(config) -> DeepCFR:
    return make_solver(GAME, config)


@pytest.fixture(scope="module")
def run(solver):
    """Iterate from SEED until the average policy is within TARGET (or MAX_ITERATIONS).

    Returns (final state, every iteration's metrics, [(iteration, exploitability)]).
    """
    state = solver.init(jax.random.key(SEED))
    history, curve = [], []
    for _ in range(MAX_ITERATIONS):
        state, metrics = solver.iteration(state)
        history.append(metrics)
        value = ex.exploitability(GAME, solver.average_policy_fn(state))
        curve.append((metrics["iteration"], value))
        if value <= TARGET:
            break
    return state, history, curve


def test_reaches_target_exploitability(run):
    _, _, curve = run
    assert curve[-1][1] <= TARGET, f"exploitability by iteration: {curve}"
    # Well below the uniform policy's 0.458.
    assert curve[0][1] < 0.46


def test_metrics_have_documented_keys_and_sane_values(run, config):
    _, history, _ = run
    for i, m in enumerate(history, start=1):
        assert set(m) == ITERATION_KEYS
        assert m["iteration"] == i
        for key, value in m.items():
            assert math.isfinite(value), key
            if key.startswith(("time/", "traversal/", "memory/", "nonfinite/")):
                assert value >= 0, key
        assert m["nonfinite/advantage_0"] == m["nonfinite/advantage_1"] == m["nonfinite/strategy"] == 0
        # The share of the regret targets' power the fit explains: at most all of it.
        assert m["fve/advantage_0"] <= 1.0 and m["fve/advantage_1"] <= 1.0
        # Kuhn: every external traversal visits 4 to 7 states and keeps all its samples.
        per_player = config.traversal.traversals_per_player
        assert 4 * 2 * per_player <= m["traversal/nodes"] <= 7 * 2 * per_player
        assert m["traversal/evaluations"] < m["traversal/nodes"]
        assert m["traversal/samples"] == m["traversal/advantage_samples"] + m["traversal/strategy_samples"]
        assert m["traversal/advantage_samples"] > 0 and m["traversal/strategy_samples"] > 0
        assert m["traversal/dropped_samples"] == 0 and m["traversal/truncated"] == 0
        assert m["traversal/nodes_per_second"] > 0
        assert 0 < m["memory/advantage_0"] <= config.memory.advantage_capacity
        assert 0 < m["memory/strategy"] <= config.memory.strategy_capacity
        assert m["time/iteration_seconds"] >= m["time/traversal_seconds"] + m["time/advantage_train_seconds"]
        assert m["loss/advantage_0"] > 0 and m["loss/strategy"] > 0
    # Memories only grow until full.
    sizes = [m["memory/strategy"] for m in history]
    assert sizes == sorted(sizes)
    assert history[0]["memory/strategy"] == history[0]["traversal/strategy_samples"]


def _leaves(state):
    return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
            for x in jax.tree_util.tree_leaves(state)]


def test_same_seed_same_parameters(solver):
    def two_iterations():
        state = solver.init(jax.random.key(SEED + 1))
        for _ in range(2):
            state, _ = solver.iteration(state)
        return state

    a, b = two_iterations(), two_iterations()
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    # And a different seed gives different networks.
    c = solver.init(jax.random.key(SEED + 2))
    c, _ = solver.iteration(c)
    assert not np.array_equal(
        jax.tree_util.tree_leaves(a.strategy_params)[0], jax.tree_util.tree_leaves(c.strategy_params)[0]
    )


def test_an_iteration_without_its_strategy_phase_changes_nothing_else(solver):
    """fit_strategy=False (a run's last iteration before its last fit) keeps the strategy
    network and its optimizer state, and every other part of the state and the PRNG stream
    is the one a full iteration gives."""
    state = solver.init(jax.random.key(SEED + 3))
    # An iteration donates its input's buffers, so each call gets a copy of `state`.
    full, with_fit = solver.iteration(jax.tree.map(jnp.copy, state))
    kept, without_fit = solver.iteration(jax.tree.map(jnp.copy, state), fit_strategy=False)
    assert "loss/strategy" in with_fit and "loss/strategy" not in without_fit
    assert without_fit["time/strategy_train_seconds"] == 0.0
    for field in ("strategy_params", "strategy_opt"):
        for x, y in zip(_leaves(getattr(kept, field)), _leaves(getattr(state, field)), strict=True):
            np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(_leaves(full.strategy_params), _leaves(state.strategy_params)))
    rest = [f for f in type(state)._fields if f not in ("strategy_params", "strategy_opt")]
    for field in rest:
        for x, y in zip(_leaves(getattr(kept, field)), _leaves(getattr(full, field)), strict=True):
            np.testing.assert_array_equal(x, y)


def test_strategy_weight_delay_drops_early_iterations_and_shifts_weights():
    """Samples of iterations t <= delay are not stored; later ones weigh (t - delay) ** power."""
    n = 6
    items = StrategySample(
        observation=jnp.zeros((n, 2)), mask=jnp.ones((n, 3), bool), strategy=jnp.full((n, 3), 1 / 3),
        iteration=jnp.arange(1, n + 1, dtype=jnp.float32),
    )
    example = jax.tree.map(lambda x: x[0], items)
    valid = jnp.array([True, True, True, True, False, True])

    def stored_weights(power, delay):
        reservoir = _add_weighted(power, jax.random.key(0), reservoir_init(16, example), items, valid, delay=delay)
        assert int(reservoir.seen) == int(reservoir.size)
        return np.asarray(reservoir.data.iteration[: int(reservoir.size)]).tolist()

    assert stored_weights(1.0, 0) == [1, 2, 3, 4, 6]
    assert stored_weights(2.0, 0) == [1, 4, 9, 16, 36]
    # Iteration 5 stays invalid; 1-3 are dropped, 4 and 6 weigh 1 and 3 (squared: 1 and 9).
    assert stored_weights(1.0, 3) == [1, 3]
    assert stored_weights(2.0, 3) == [1, 9]
    assert stored_weights(0.0, 3) == [1, 1]
    with pytest.raises(ValueError, match="strategy_weight_delay"):
        OptimizationConfig(strategy_weight_delay=-1)


@pytest.mark.parametrize(
    "section, path, value",
    [
        (TraversalConfig, "traversal.scheme", "outcome"),
        (NetworkConfig, "network.hidden_size", 0),
        (TraversalConfig, "traversal.traversals_per_player", -1),
        (OptimizationConfig, "optimization.learning_rate", 0.0),
        (ProbeConfig, "traversal.probe.branch_probability", 1.5),
        (OptimizationConfig, "optimization.strategy_loss", "hinge"),
        (OptimizationConfig, "optimization.lr_schedule", "step"),
        (NetworkConfig, "network.num_layers", -1),
        (OptimizationConfig, "optimization.grad_clip", -1.0),
        (MemoryConfig, "memory.observation_storage", "float16"),
        (OptimizationConfig, "optimization.regret_exponent", 0.5),
    ],
)
def test_bad_config_value_names_the_field(section, path, value):
    field = path.rsplit(".", 1)[1]
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        section(**{field: value})
    if field != "scheme":  # small_game_config takes the scheme as its own argument
        with pytest.raises(ValueError, match=rf"\b{path}\b"):
            small_game_config("kuhn", "external", **{path: value})


def test_current_policy_regret_matches_with_the_exponent(run, config):
    """`optimization.regret_exponent` is what the current policy (and the traversals, which
    share `regret_apply`) regret-matches with: probabilities proportional to the positive
    predicted regrets to that power."""
    state, _, _ = run
    opt = dataclasses.replace(config.optimization, regret_exponent=2.0)
    squared = DeepCFR(GAME, dataclasses.replace(config, optimization=opt))
    tree = ex.game_tree(GAME)
    obs, masks, players = tree.infoset_obs, tree.infoset_mask, tree.infoset_player.astype(np.int32)
    raw = np.stack([np.asarray(squared.apply_fn(state.advantage_params[p], obs)) for p in (0, 1)])
    regrets = raw[players, np.arange(len(obs))]
    positive = np.where(masks, np.maximum(regrets, 0.0), 0.0) ** 2
    has = positive.sum(-1) > 0  # the other rows fall back to the largest regret
    assert has.sum() >= len(obs) // 2
    got = np.asarray(squared.policy_fn(state, "current")(obs, masks, players))
    np.testing.assert_allclose(got[has], positive[has] / positive[has].sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
    best = np.where(masks, regrets, -np.inf).argmax(-1)
    np.testing.assert_array_equal(got[~has].argmax(-1), best[~has])
    assert squared.policy("current") is squared.policy("current")
    # Exponent 1 (the default) is plain regret matching: a different strategy here.
    plain = np.asarray(make_solver(GAME, config).policy_fn(state, "current")(obs, masks, players))
    assert np.abs(plain - got).max() > 1e-3


def test_small_game_config_rejects_unknown_names():
    with pytest.raises(ValueError, match="hiden_size"):
        small_game_config("kuhn", "external", **{"network.hiden_size": 8})
    with pytest.raises(ValueError, match="go"):
        small_game_config("go", "external")
    assert small_game_config("leduc_poker", "probe") == small_game_config("leduc", "probe")
    base = small_game_config("kuhn", "external")
    assert dataclasses.replace(base, network=dataclasses.replace(base.network, hidden_size=8)) == small_game_config(
        "kuhn", "external", **{"network.hidden_size": 8}
    )


def test_script_writes_to_runs_without_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["--game", "kuhn", "--scheme", "external", "--seconds", "600", "--seed", "4", "--max-iterations", "1", "--quiet"]
    solve_small.main(argv + TINY_ARGS)
    out = tmp_path / "runs" / "kuhn_external_seed4"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "curve.jsonl", "policy.json"]
    assert json.loads((out / "config.json").read_text())["seed"] == 4


def test_script_policy_loads_into_openspiel(tmp_path):
    pyspiel = pytest.importorskip("pyspiel")
    from open_spiel.python import policy as openspiel_policy
    from open_spiel.python.algorithms import exploitability as openspiel_exploitability

    argv = ["--game", "kuhn", "--scheme", "external", "--seconds", "600", "--out", str(tmp_path)]
    argv += ["--seed", "3", "--max-iterations", "3", "--quiet"]
    argv += TINY_ARGS
    final = solve_small.main(argv)

    rows = [json.loads(line) for line in (tmp_path / "curve.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    for r in rows:
        for key in ("seconds", "iteration", "nodes", "nodes_per_second", "exploitability"):
            assert key in r and math.isfinite(r[key]), key
        assert r["nodes"] > 0 and r["nodes_per_second"] > 0 and r["seconds"] > 0
    assert [r["nodes"] for r in rows] == sorted(r["nodes"] for r in rows)
    assert final["exploitability"] == rows[-1]["exploitability"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["network"]["hidden_size"] == TINY["network.hidden_size"] and config["seed"] == 3

    exported = json.loads((tmp_path / "policy.json").read_text())
    game = pyspiel.load_game("kuhn_poker")
    tabular = openspiel_policy.TabularPolicy(game)
    assert set(exported) == set(tabular.state_lookup)
    for key, probs in exported.items():
        tabular.policy_for_key(key)[:] = probs
    theirs = openspiel_exploitability.exploitability(game, tabular)
    assert abs(theirs - rows[-1]["exploitability"]) < 1e-6


def test_fresh_strategy_phase_ignores_the_previous_network(run, solver, config):
    """strategy_warm_start false: a phase fits a fresh network, so its result does not
    depend on the strategy network it is given (warm, it does); keep_key keeps the PRNG key."""
    state, _, _ = run
    # A fresh network needs the steps the warm one took over its iterations (15 x 100).
    opt = dataclasses.replace(config.optimization, strategy_warm_start=False, strategy_steps=1500)
    fresh = make_solver(GAME, dataclasses.replace(config, optimization=opt))
    scrambled = state._replace(strategy_params=jax.tree.map(lambda x: x + 0.5, state.strategy_params))
    a, metrics = fresh.train_strategy(state, keep_key=True)
    b, _ = fresh.train_strategy(scrambled, keep_key=True)
    for x, y in zip(_leaves(a.strategy_params), _leaves(b.strategy_params), strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(jax.random.key_data(a.key), jax.random.key_data(state.key))
    assert metrics["loss/strategy"] > 0 and metrics["nonfinite/strategy"] == 0
    # The fresh fit of the reservoir plays the average strategy as the warm network does
    # (the run stopped within TARGET 0.05); uniform play is 0.458 exploitable.
    assert ex.exploitability(GAME, fresh.average_policy_fn(a)) < 0.1
    warm_a, _ = solver.train_strategy(state, keep_key=True)
    warm_b, _ = solver.train_strategy(scrambled, keep_key=True)
    assert not np.array_equal(_leaves(warm_a.strategy_params)[0], _leaves(warm_b.strategy_params)[0])
