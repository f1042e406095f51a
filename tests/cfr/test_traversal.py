"""The traversal schemes' regret samples are unbiased estimates of counterfactual regret.

On Kuhn poker with fixed random advantage networks, the exact counterfactual regret of
every traverser information set is computed by enumerating the whole tree (every deal,
every action) with both players on their current strategies. Many traversals are then
run, their regret samples summed per information set and divided by the number of
traversals; for `probe` this is further divided by the sampling weight
`branch_probability * pi_uniform(I)`. Each estimate must be within 5 standard errors
(measured from the per-traversal sums, which are i.i.d.) of the exact value: with about
20 compared entries the chance of a false failure is below 1e-5.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.cfr import traversal as tr
from lcjax.cfr.regret import regret_matching
from lcjax.cfr.traversal import lanes
from lcjax.cfr.networks import NetworkSpec, init_params, network_graphdef, make_apply
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.env.lost_cities import LostCities
from lcjax.onehot import indexing_primitives

GAME = KuhnPoker()
SPEC = NetworkSpec(GAME.observation_size, GAME.num_actions, hidden_size=16, num_layers=1)
APPLY = make_apply(network_graphdef(SPEC))
# Large init scale so that the random strategies are far from uniform.
PARAMS = tuple(
    jax.tree_util.tree_map(lambda x: 3.0 * x, init_params(SPEC, jax.random.key(seed))) for seed in (1, 2)
)


def current_strategy(obs, mask, player):
    """Regret matching on `player`'s advantage network (obs [..., D], mask [..., A])."""
    regrets = jnp.where(jnp.expand_dims(player, -1) == 0, APPLY(PARAMS[0], obs), APPLY(PARAMS[1], obs))
    return regret_matching(regrets, mask)


def sample_traversal(num_rows: int, num_traversals: int) -> np.ndarray:
    """The traversal that produced each row of a result buffer (contiguous blocks per traversal)."""
    return np.arange(num_rows) // (num_rows // num_traversals)


@functools.lru_cache(maxsize=None)
def _single_fns():
    strategy = jax.jit(current_strategy)
    return jax.jit(GAME.step), jax.jit(GAME.legal_action_mask), jax.jit(GAME.observe), jax.jit(GAME.returns), strategy


def exact_regrets(traverser: int):
    """{obs bytes: (counterfactual regret float64[A], uniform reach of the traverser)}."""
    step, legal, observe, returns, strategy = _single_fns()
    decks = GAME.all_decks()
    chance = 1.0 / len(decks)
    out: dict[bytes, list] = {}

    def value(state, reach_opp, reach_uniform):
        if bool(state.terminated):
            return float(returns(state)[traverser])
        player = int(state.current_player)
        mask = np.asarray(legal(state))
        obs = observe(state, player)
        sigma = np.asarray(strategy(obs, jnp.asarray(mask), jnp.int32(player)), np.float64)
        actions = np.flatnonzero(mask)
        child_values = np.zeros(GAME.num_actions)
        for a in actions:
            child = step(state, int(a))
            if player == traverser:
                child_values[a] = value(child, reach_opp, reach_uniform / len(actions))
            else:
                child_values[a] = value(child, reach_opp * sigma[a], reach_uniform)
        v = float(np.dot(sigma, child_values))
        if player == traverser:
            key = np.asarray(obs).tobytes()
            entry = out.setdefault(key, [np.zeros(GAME.num_actions), reach_uniform])
            entry[0] += np.where(mask, reach_opp * chance * (child_values - v), 0.0)
            assert entry[1] == reach_uniform  # perfect recall: one uniform reach per infoset
        return v

    for deck in decks:
        value(GAME.init_from_deck(jnp.asarray(deck)), 1.0, 1.0)
    return out


@functools.lru_cache(maxsize=None)
def _traverse(scheme: str):
    """The scheme's traversal, jitted once and shared by the tests (the traverser is traced)."""
    fn = tr.external_sampling if scheme == "external" else tr.probe_sampling
    return jax.jit(fn, static_argnums=(0, 1, 2, 7))


def sampled_regrets(result, num_traversals: int, keys: list[bytes]):
    """Mean per-traversal regret sum per infoset and its standard error, float64[I, A] each."""
    obs = np.asarray(result.advantage.observation)
    regret = np.asarray(result.advantage.regret, np.float64)
    valid = np.asarray(result.advantage_valid)
    traversal = sample_traversal(valid.shape[0], num_traversals)
    index = {k: i for i, k in enumerate(keys)}
    sums = np.zeros((num_traversals, len(keys), GAME.num_actions))
    for row in np.flatnonzero(valid):
        sums[traversal[row], index[obs[row].tobytes()]] += regret[row]
    return sums.mean(0), sums.std(0, ddof=1) / np.sqrt(num_traversals)


@pytest.mark.parametrize("traverser", [0, 1])
@pytest.mark.parametrize("scheme", ["external", "probe"])
def test_mean_sampled_regret_matches_exact_counterfactual_regret(scheme, traverser):
    exact = exact_regrets(traverser)
    keys = list(exact)
    b = 20_000
    if scheme == "external":
        cfg = tr.ExternalConfig(max_depth=3, max_advantage=4, max_strategy=4)
        scale = {k: 1.0 for k in keys}
    else:
        cfg = tr.ProbeConfig(branch_probability=0.5, max_probes=2, max_strategy=4, max_steps=8)
        scale = {k: cfg.branch_probability * exact[k][1] for k in keys}
    run = _traverse(scheme)
    result = run(GAME, APPLY, cfg, PARAMS, jnp.int32(traverser), 1.0, jax.random.key(7 + traverser), b)
    assert int(result.counters.dropped_samples) == 0 and int(result.counters.truncated) == 0
    mean, se = sampled_regrets(result, b, keys)
    worst = 0.0
    for i, k in enumerate(keys):
        want = exact[k][0]
        got, err = mean[i] / scale[k], se[i] / scale[k]
        assert np.all(np.abs(got - want) <= 5 * err + 1e-6), (scheme, i, got, want, err)
        worst = max(worst, float(np.max(np.abs(want))))
    assert worst > 0.05  # the test has teeth: regrets are far from zero


def test_counters_and_sample_shapes():
    cfg = tr.ExternalConfig(max_depth=3, max_advantage=4, max_strategy=4)
    result = _traverse("external")(GAME, APPLY, cfg, PARAMS, jnp.int32(0), 3.0, jax.random.key(0), 64)
    d, a = GAME.observation_size, GAME.num_actions
    assert result.advantage.observation.shape == (64 * 4, d)
    assert result.advantage.regret.shape == (64 * 4, a)
    assert result.strategy.strategy.shape == (64 * 4, a)
    valid = np.asarray(result.advantage_valid)
    assert valid.sum() == int(result.counters.advantage_samples) > 0
    assert np.all(np.asarray(result.advantage.iteration)[valid] == 3.0)
    # Strategy samples are probability vectors over legal actions.
    sv = np.asarray(result.strategy_valid)
    probs = np.asarray(result.strategy.strategy)[sv]
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    assert np.all(probs[~np.asarray(result.strategy.mask)[sv]] == 0)
    # Every traversal visits at least the root, a traverser decision and a terminal state.
    assert int(result.counters.nodes) >= 3 * 64


@pytest.mark.parametrize("game", [KuhnPoker(), LeducPoker(), LostCities()], ids=["kuhn", "leduc", "lost_cities"])
def test_lane_functions_are_gather_free(game):
    """The traversal loops' batched game functions (lanes last) hold no gather or scatter,
    which XLA:CPU would run as per-element loops; the games index through `lcjax.onehot`."""
    w = 16
    batched = lanes.BatchedGame(game)
    state = jax.vmap(game.init, out_axes=-1)(jax.random.split(jax.random.key(0), w))
    action = jnp.zeros((w,), jnp.int32)
    player = state.current_player
    for fn, args in [(batched.step, (state, action)), (batched.legal, (state,)),
                     (batched.observe_rows, (state, player)), (batched.returns, (state,))]:
        assert indexing_primitives(fn, *args) == set()


def test_helpers():
    x = (jax.random.uniform(jax.random.key(0), (1000,)) < 0.3).astype(jnp.int32)
    np.testing.assert_array_equal(lanes.prefix_count(x), np.cumsum(np.asarray(x)))
    u = np.asarray(lanes.uniforms(jnp.array([1, 2], jnp.uint32), jnp.int32(5), jnp.arange(100_000)))
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    assert sample_traversal(12, 3).tolist() == [0] * 4 + [1] * 4 + [2] * 4


@pytest.mark.parametrize("w, chunk, p1_share, need_share", [(64, 16, 0.5, 0.9), (64, 0, 0.9, 0.3), (7, 4, 0.4, 1.0), (1, 0, 1.0, 1.0), (16, 8, 0.5, 0.0)])
def test_every_needing_lane_gets_its_own_players_strategy(w, chunk, p1_share, need_share):
    """`_lane_strategy` evaluates each lane that needs it with its own player's network,
    whatever the mix of players and however the rows split into chunks."""
    keys = jax.random.split(jax.random.key(w), 4)
    obs = jax.random.normal(keys[0], (w, GAME.observation_size))
    player = (jax.random.uniform(keys[1], (w,)) < p1_share).astype(jnp.int32)
    need = jax.random.uniform(keys[2], (w,)) < need_share
    mask = jnp.ones((GAME.num_actions, w), bool).at[0, : w // 2].set(False)
    fn = jax.jit(functools.partial(lanes.lane_strategy, APPLY, PARAMS, chunk=chunk))
    sigma = np.asarray(fn(obs, mask, player, need, jnp.bool_(True)))
    need = np.asarray(need)
    expected = np.asarray(jax.vmap(current_strategy)(obs, mask.T, player)).T
    np.testing.assert_allclose(sigma[:, need], expected[:, need], rtol=1e-5, atol=1e-6)
    assert lanes.eval_chunk_size(chunk) == (chunk or lanes.eval_chunk_size())


def test_refill_hands_out_items_in_lane_order():
    free = jnp.array([True, False, True, True, False, True])
    r = lanes.refill(free, jnp.int32(5), 7)
    # Free lanes 0, 2, 3, 5 would take items 5, 6, 7, 8; only 5 and 6 exist.
    assert np.asarray(r.start).tolist() == [True, False, True, False, False, False]
    assert np.asarray(r.item)[[0, 2]].tolist() == [5, 6]
    assert int(r.next_item) == 7
    r = lanes.refill(jnp.zeros((4,), bool), jnp.int32(0), jnp.int32(0))
    assert not np.asarray(r.start).any() and int(r.next_item) == 0
