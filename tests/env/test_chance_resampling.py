"""Lost Cities' `resample_chance` and `chance_actions` (the optional `ChanceResampling`
protocol): a redraw keeps the history and draws the next card of the deck again, and
exactly the deck draw reveals it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.env.lost_cities import PHASE_DRAW, LostCities, draw_deck_action
from midgame import random_midgame_states  # tests/env/midgame.py


@pytest.fixture(scope="module")
def game():
    return LostCities()


@pytest.fixture(scope="module")
def states(game):
    """Mid-game states of two random bots, about half in each phase (an odd or even number
    of decisions)."""
    return random_midgame_states(game, 96, 1, 140)


def test_resample_keeps_the_history_and_changes_only_the_undealt_deck(game, states):
    keys = jax.random.split(jax.random.key(1), 96)
    redrawn = jax.jit(jax.vmap(game.resample_chance))(states, keys)
    history = jax.jit(jax.vmap(game.observe_history))
    np.testing.assert_array_equal(np.asarray(history(redrawn)), np.asarray(history(states)))
    for field in states._fields:
        if field != "deck":
            np.testing.assert_array_equal(np.asarray(getattr(redrawn, field)), np.asarray(getattr(states, field)))
    deck, new, pos = np.asarray(states.deck), np.asarray(redrawn.deck), np.asarray(states.deck_pos)
    moved = 0
    for i in range(len(pos)):
        np.testing.assert_array_equal(new[i, : pos[i]], deck[i, : pos[i]])  # dealt: unchanged
        assert sorted(new[i, pos[i]:]) == sorted(deck[i, pos[i]:])  # undealt: the same cards
        moved += not np.array_equal(new[i, pos[i]:], deck[i, pos[i]:])
    assert moved > 80  # the top card moves unless it drew its own position
    # An empty deck (deck_pos = N) has nothing to redraw.
    emptied = jax.tree.map(lambda x: x[0], states)._replace(deck_pos=jnp.int32(game.deck_size))
    np.testing.assert_array_equal(np.asarray(game.resample_chance(emptied, jax.random.key(4)).deck), deck[0])


def test_resample_draws_the_next_card_uniformly_from_the_undealt_ones(game, states):
    state = jax.tree.map(lambda x: x[0], states)
    pos = int(state.deck_pos)
    undealt = np.asarray(state.deck)[pos:]
    draws = 4000
    tops = np.asarray(jax.jit(jax.vmap(game.resample_chance, in_axes=(None, 0)))(
        state, jax.random.split(jax.random.key(2), draws)
    ).deck)[:, pos]
    counts = np.array([(tops == c).sum() for c in undealt])
    assert counts.sum() == draws
    expected = draws / len(undealt)
    # Each count is Binomial(draws, 1/len): within 5 standard deviations.
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))


def test_chance_actions_are_the_actions_a_redraw_changes(game, states):
    """An action is a chance action exactly when its child's history can differ between the
    state and a redraw of it: the deck draw, in the draw phase."""
    chance = np.asarray(jax.jit(jax.vmap(game.chance_actions))(states))
    phase, done = np.asarray(states.phase), np.asarray(states.terminated)
    deck = draw_deck_action(game.rules)
    expected = np.zeros_like(chance)
    expected[:, deck] = (phase == PHASE_DRAW) & ~done
    np.testing.assert_array_equal(chance, expected)
    assert expected[:, deck].sum() > 20

    keys = jax.random.split(jax.random.key(3), 96)
    redrawn = jax.vmap(game.resample_chance)(states, keys)
    legal = np.asarray(jax.vmap(game.legal_action_mask)(states))
    child_history = jax.jit(jax.vmap(jax.vmap(lambda s, a: game.observe_history(game.step(s, a)), in_axes=(None, 0)),
                                      in_axes=(0, None)))
    actions = jnp.arange(game.num_actions)
    same = np.all(np.asarray(child_history(states, actions)) == np.asarray(child_history(redrawn, actions)), axis=-1)
    # Non-chance legal actions: the same child history. Chance actions: a different one
    # whenever the redraw brought another card to the top.
    np.testing.assert_array_equal(same[legal & ~chance], True)
    top = np.minimum(np.asarray(states.deck_pos), game.deck_size - 1)  # deck_pos = N once the deck is empty
    top_moved = np.asarray(states.deck)[np.arange(96), top] != np.asarray(redrawn.deck)[np.arange(96), top]
    rows = chance[:, deck] & top_moved
    assert rows.sum() > 10
    assert not same[rows, deck].any()
