"""A conformance harness that every lcjax game must pass.

`api_test(game)` plays a batch of random games under `jit(vmap(...))` and checks, at every
step, what the rest of lcjax relies on: fixed dtypes and shapes, a non-empty legal mask
until the end and an empty one after, a no-op `step` on terminated states, finite
observations of the declared size for both players, a finite history of the declared
size (`observe_history`, terminated states included), and zero-sum returns. A game with
the optional `hidden_alternatives` is also checked, at every step and for both players:
a non-negative float32[num_alternatives] prior that sums to 1, alternatives with the
state's fields behind a leading num_alternatives axis, and each possible one (prior > 0)
observed by the player exactly as the state is. A game with the optional
`resample_chance` (and `chance_actions`) is checked at every step too: a redraw has the
state's history, and the random action's child has the same history from the state and
from the redraw unless it is a chance action. It raises `AssertionError` naming the first
broken property.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np

from lcjax.env.protocol import Game


def _random_legal(key, mask):
    """A uniformly random legal action (0 if none is legal)."""
    counts = jnp.cumsum(mask)
    pick = jnp.floor(jax.random.uniform(key) * counts[-1]).astype(jnp.int32)
    return jnp.argmax(counts > pick).astype(jnp.int32)


def _check_shapes(game: Game, single, num_games: int, seed: int):
    """The batched init's states (checking the shapes and dtypes of what every function returns)."""
    a, d, e = game.num_actions, game.observation_size, game.history_size
    init = jax.jit(jax.vmap(game.init))
    keys = jax.random.split(jax.random.key(seed), num_games)
    states = init(keys)
    mask = jax.vmap(game.legal_action_mask)(states)
    obs = jax.vmap(game.observe)(states, jnp.zeros(num_games, jnp.int32))
    rets = jax.vmap(game.returns)(states)
    hist = jax.jit(jax.vmap(game.observe_history))(states)
    try:
        chex.assert_shape(mask, (num_games, a))
        chex.assert_type(mask, bool)
        chex.assert_shape(obs, (num_games, d))
        chex.assert_type(obs, jnp.float32)
        chex.assert_shape(rets, (num_games, 2))
        chex.assert_type(rets, jnp.float32)
        chex.assert_shape(hist, (num_games, e))
        chex.assert_type(hist, jnp.float32)
        # init must give the same shapes and dtypes batched as single.
        chex.assert_trees_all_equal_shapes_and_dtypes(single, jax.tree_util.tree_map(lambda x: x[0], states))
    except AssertionError as err:
        raise AssertionError(
            "legal mask must be bool[A], observe float32[D], observe_history float32[E], "
            f"returns float32[2]: {err}"
        ) from err
    if hasattr(game, "hidden_alternatives"):
        _check_alternative_shapes(game, single, states, num_games)
    return states


def _check_alternative_shapes(game: Game, single, states, num_games: int) -> None:
    """`hidden_alternatives`: prior float32[K], the state's leaves behind a leading K axis."""
    k = game.num_alternatives
    # Shapes only: traced, not compiled or run.
    players = jnp.zeros(num_games, jnp.int32)
    alts, prior = jax.eval_shape(jax.vmap(game.hidden_alternatives), states, players)
    expected = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct((num_games, k) + x.shape, x.dtype), single
    )
    try:
        chex.assert_shape(prior, (num_games, k))
        chex.assert_type(prior, jnp.float32)
        chex.assert_trees_all_equal_shapes_and_dtypes(alts, expected)
    except (AssertionError, ValueError) as err:
        raise AssertionError(
            "hidden_alternatives must return (states whose leaves have a leading axis of "
            f"num_alternatives = {k} and otherwise the state's shapes and dtypes, prior "
            f"float32[num_alternatives]): {err}"
        ) from err


def _alternative_flags(game: Game, num_games: int, state) -> dict:
    """{property: bool scalar over the batch} of `hidden_alternatives`, for both players."""
    sums_to_one = indistinguishable = jnp.bool_(True)
    for player in (0, 1):
        players = jnp.full(num_games, player, jnp.int32)
        alts, prior = jax.vmap(game.hidden_alternatives)(state, players)
        obs = jax.vmap(game.observe)(state, players)  # [N, D]
        # Each alternative k as `player` sees it: [N, K, D].
        alt_obs = jax.vmap(jax.vmap(game.observe, in_axes=(0, None)))(alts, players)
        same = jnp.all(alt_obs == obs[:, None], axis=-1)
        sums_to_one &= jnp.all(prior >= 0) & jnp.all(jnp.abs(prior.sum(-1) - 1.0) <= 1e-5)
        indistinguishable &= jnp.all((prior <= 0) | same)
    return {
        "hidden_alternatives: prior is non-negative and sums to 1": sums_to_one,
        "hidden_alternatives: observe(alternative, player) == observe(state, player) "
        "wherever prior > 0": indistinguishable,
    }


def _step_checks(game: Game, num_games: int, state, key):
    """(the state after a random legal action, {property: bool scalar over the batch})."""
    mask = jax.vmap(game.legal_action_mask)(state)
    obs0 = jax.vmap(game.observe)(state, jnp.zeros(num_games, jnp.int32))
    obs1 = jax.vmap(game.observe)(state, jnp.ones(num_games, jnp.int32))
    hist = jax.vmap(game.observe_history)(state)
    action = jax.vmap(_random_legal)(jax.random.split(key, num_games), mask)
    nxt = jax.vmap(game.step)(state, action)
    live = ~state.terminated
    same = jax.tree_util.tree_map(
        lambda x, y: jnp.all((x == y).reshape(num_games, -1), axis=1), state, nxt
    )
    unchanged = jnp.all(jnp.stack(jax.tree_util.tree_leaves(same)), axis=0)
    rets = jax.vmap(game.returns)(state)
    flags = {
        "legal mask non-empty before the end": jnp.all(~live | mask.any(-1)),
        "legal mask empty once terminated": jnp.all(live | ~mask.any(-1)),
        "step on a terminated state is a no-op": jnp.all(live | unchanged),
        "a legal step changes the state": jnp.all(~live | ~unchanged),
        "observations are finite": jnp.all(jnp.isfinite(obs0)) & jnp.all(jnp.isfinite(obs1)),
        "histories are finite": jnp.all(jnp.isfinite(hist)),
        "returns are zero-sum": jnp.all(jnp.abs(rets.sum(-1)) < 1e-5),
        "current player is 0 or 1": jnp.all(live | (state.current_player == 0) | (state.current_player == 1)),
    }
    if hasattr(game, "hidden_alternatives"):
        flags.update(_alternative_flags(game, num_games, state))
    if hasattr(game, "resample_chance"):
        flags.update(_chance_flags(game, num_games, state, action, nxt, hist, jax.random.fold_in(key, 1)))
    return nxt, flags


def _chance_flags(game: Game, num_games: int, state, action, nxt, hist, key) -> dict:
    """{property: bool scalar over the batch} of `resample_chance` and `chance_actions`."""
    redrawn = jax.vmap(game.resample_chance)(state, jax.random.split(key, num_games))
    chance = jax.vmap(game.chance_actions)(state)  # [N, A]
    taken_is_chance = jnp.take_along_axis(chance, action[:, None], axis=1)[:, 0]
    child_same = jnp.all(
        jax.vmap(game.observe_history)(jax.vmap(game.step)(redrawn, action)) == jax.vmap(game.observe_history)(nxt), -1
    )
    return {
        "resample_chance keeps observe_history": jnp.all(jax.vmap(game.observe_history)(redrawn) == hist),
        "chance_actions is bool[A]": jnp.bool_(chance.shape == (num_games, game.num_actions) and chance.dtype == jnp.bool_),
        "a non-chance action's child has the same history after resample_chance": jnp.all(taken_is_chance | child_same),
    }


def api_test(game: Game, *, num_games: int = 64, max_steps: int = 1000, seed: int = 0) -> None:
    """Check that `game` implements the protocol of `lcjax.env.protocol`.

    Args:
      game: the game under test.
      num_games: random games played side by side.
      max_steps: every game must have ended after this many steps.
      seed: PRNG seed of the deal and the random play.
    """
    assert game.num_players == 2, "only two-player games are supported"

    single = jax.jit(game.init)(jax.random.key(seed))
    assert single.current_player.shape == () and single.current_player.dtype == jnp.int32, (
        "current_player must be an int32 scalar"
    )
    assert single.terminated.shape == () and single.terminated.dtype == jnp.bool_, (
        "terminated must be a bool scalar"
    )

    states = _check_shapes(game, single, num_games, seed)
    checks = functools.partial(_step_checks, game, num_games)

    def play(states, key):
        def body(carry, key):
            state, ok = carry
            nxt, flags = checks(state, key)
            return (nxt, {k: ok[k] & v for k, v in flags.items()}), None

        ok = {k: jnp.bool_(True) for k in checks(states, key)[1]}
        (final, ok), _ = jax.lax.scan(body, (states, ok), jax.random.split(key, max_steps))
        return final, ok

    try:
        final, ok = jax.jit(play)(states, jax.random.key(seed + 1))
    except TypeError as err:  # lax.scan rejects a carry whose shape or dtype changes
        raise AssertionError(f"step changed a state field's shape or dtype: {err}") from err
    for name, value in ok.items():
        assert bool(value), name
    assert bool(np.all(np.asarray(final.terminated))), f"some games did not end within {max_steps} steps"
    final_hist = jax.jit(jax.vmap(game.observe_history))(final)
    assert bool(jnp.all(jnp.isfinite(final_hist))), "histories are finite on terminated states"
