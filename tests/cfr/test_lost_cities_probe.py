"""The probe traversal runs on Lost Cities with the default 512 x 3 network."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.cfr import traversal as tr
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.env.lost_cities import LostCities


def test_probe_on_lost_cities_with_512x3_networks():
    game = LostCities()
    spec = NetworkSpec(game.observation_size, game.num_actions, hidden_size=512, num_layers=3)
    apply_fn = make_apply(network_graphdef(spec))
    params = (init_params(spec, jax.random.key(0)), init_params(spec, jax.random.key(1)))
    b, probes, max_strategy = 3, 2, 256
    cfg = tr.ProbeConfig(branch_probability=0.02, max_probes=probes, max_strategy=max_strategy, max_steps=402)
    run = jax.jit(tr.probe_sampling, static_argnums=(0, 1, 2, 7))
    result = run(game, apply_fn, cfg, params, jnp.int32(1), 2.0, jax.random.key(3), b)
    d, a = game.observation_size, game.num_actions

    adv, strat, c = result.advantage, result.strategy, result.counters
    assert adv.observation.shape == (b * probes, d) and adv.regret.shape == (b * probes, a)
    assert strat.observation.shape == (b * max_strategy, d) and strat.strategy.shape == (b * max_strategy, a)
    for leaf in jax.tree_util.tree_leaves((adv, strat)):
        assert bool(jnp.all(jnp.isfinite(leaf.astype(jnp.float32))))

    adv_valid = np.asarray(result.advantage_valid)
    strat_valid = np.asarray(result.strategy_valid)
    assert adv_valid.sum() == int(c.advantage_samples)
    assert strat_valid.sum() == int(c.strategy_samples)
    assert int(c.truncated) == 0
    # Player 0 moves first and every game lasts at least 44 turns of 2 decisions, so the
    # opponent of traverser 1 makes at least 44 decisions per traversal.
    assert int(c.strategy_samples) + int(c.dropped_samples) >= 44 * b
    # Regret samples are zero off the legal actions.
    regret = np.asarray(adv.regret)[adv_valid]
    mask = np.asarray(adv.mask)[adv_valid]
    assert np.all(regret[~mask] == 0)
    strategies = np.asarray(strat.strategy)[strat_valid]
    np.testing.assert_allclose(strategies.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.asarray(strat.iteration)[strat_valid] == 2.0)
    # Rollouts from every probed node reach terminal states: many more nodes than the main
    # trajectories alone.
    assert int(c.nodes) >= 88 * b
    if adv_valid.any():
        assert int(c.nodes) > 88 * b + adv_valid.sum()
