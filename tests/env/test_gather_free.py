"""The game functions that traversal and the arena vmap index small arrays by one-hot selects.

Under `jax.vmap`, reading or writing a small array at a per-game (traced) index lowers to a
gather or scatter with batched indices, which XLA:CPU runs as a slow per-element loop; the
one-hot selects of `lcjax.onehot` stay elementwise and fuse. These tests trace the vmapped
functions on a batch of states and assert that no indexing primitive appears anywhere in the
jaxpr, nested jaxprs (jit, cond, while, custom rules) included.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from lcjax.env import bots, registry
from lcjax.env.lost_cities import LostCities, Rules
from lcjax.onehot import indexing_primitives

BATCH = 8


# Every registered game (a new one is checked without touching this file), plus small rules.
GAMES = {name: registry.make_game(name) for name in registry.GAME_NAMES}
GAMES["lost_cities_small"] = LostCities(Rules(n_colors=2, n_ranks=4, n_wagers=1, hand_size=3))


@pytest.fixture(scope="module", params=sorted(GAMES))
def game_and_states(request):
    """A game and a batch of BATCH states, some advanced by one legal action."""
    game = GAMES[request.param]
    states = jax.vmap(game.init)(jax.random.split(jax.random.key(0), BATCH))
    first_legal = jnp.argmax(jax.vmap(game.legal_action_mask)(states), axis=-1)
    stepped = jax.vmap(game.step)(states, first_legal)
    advance = jnp.arange(BATCH) % 2 == 1
    states = jax.tree.map(lambda s, n: jnp.where(advance.reshape((-1,) + (1,) * (s.ndim - 1)), n, s), states, stepped)
    return game, states


def test_step_is_gather_free(game_and_states):
    game, states = game_and_states
    actions = jnp.arange(BATCH, dtype=jnp.int32) % game.num_actions
    assert indexing_primitives(jax.vmap(game.step), states, actions) == set()


def test_legal_action_mask_is_gather_free(game_and_states):
    game, states = game_and_states
    assert indexing_primitives(jax.vmap(game.legal_action_mask), states) == set()


def test_observe_is_gather_free(game_and_states):
    game, states = game_and_states
    players = jnp.arange(BATCH, dtype=jnp.int32) % 2
    assert indexing_primitives(jax.vmap(game.observe), states, players) == set()
    # The acting player's view, the call traversal makes.
    assert indexing_primitives(jax.vmap(lambda s: game.observe(s, s.current_player)), states) == set()


def test_observe_history_is_gather_free(game_and_states):
    game, states = game_and_states
    assert indexing_primitives(jax.vmap(game.observe_history), states) == set()


def test_returns_and_init_are_gather_free(game_and_states):
    game, states = game_and_states
    assert indexing_primitives(jax.vmap(game.returns), states) == set()
    keys = jax.random.split(jax.random.key(1), BATCH)
    decks = jax.vmap(lambda k: jax.random.permutation(k, game.deck_size))(keys)
    assert indexing_primitives(jax.vmap(game.init), keys) == set()
    assert indexing_primitives(jax.vmap(game.init_from_deck), decks) == set()


@pytest.mark.parametrize("name", bots.BOT_NAMES)
def test_bots_are_gather_free(name):
    game = registry.make_game("lost_cities")
    states = jax.vmap(game.init)(jax.random.split(jax.random.key(0), BATCH))
    keys = jax.random.split(jax.random.key(1), BATCH)
    assert indexing_primitives(jax.vmap(bots.make_bot(name, game)), keys, states) == set()
