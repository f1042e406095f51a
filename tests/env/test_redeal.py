"""`lcjax.env.redeal.redeal_unseen`: a re-deal keeps what the player sees and moves the rest."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from lcjax.env.lost_cities import LostCities
from lcjax.env.redeal import redeal_unseen
from midgame import random_midgame_states  # tests/env/midgame.py


@pytest.fixture(scope="module")
def game():
    return LostCities()


@pytest.fixture(scope="module")
def states(game):
    """Mid-game states of two random bots, some with cards taken from a pile (known)."""
    return random_midgame_states(game, 64, 20, 60)


def test_redeal_keeps_the_observation_and_moves_hidden_cards(game, states):
    players = states.current_player
    keys = jax.random.split(jax.random.key(1), players.shape[0])
    redealt = jax.jit(jax.vmap(lambda s, p, k: redeal_unseen(game, s, p, k)))(states, players, keys)
    before = np.asarray(jax.vmap(game.observe)(states, players))
    after = np.asarray(jax.vmap(game.observe)(redealt, players))
    np.testing.assert_array_equal(after, before)

    s, r = jax.tree.map(np.asarray, states), jax.tree.map(np.asarray, redealt)
    rows = np.arange(len(s.turn))
    opp = 1 - s.current_player
    live = ~s.terminated
    # The player's own hand, the public cards and the counters stay.
    np.testing.assert_array_equal(r.hands[rows, 1 - opp], s.hands[rows, 1 - opp])
    for field in ("expeditions", "pile_pos", "known", "deck_pos", "turn", "phase", "current_player"):
        np.testing.assert_array_equal(getattr(r, field), getattr(s, field), err_msg=field)
    for i in rows:
        n, pos = game.deck_size, s.deck_pos[i]
        # Dealt cards keep their place; the unseen cards are the same multiset.
        np.testing.assert_array_equal(r.deck[i, :pos], s.deck[i, :pos])
        unseen_before = np.sort(np.concatenate([s.hands[i, opp[i]], s.deck[i, pos:]]))
        unseen_after = np.sort(np.concatenate([r.hands[i, opp[i]], r.deck[i, pos:]]))
        np.testing.assert_array_equal(unseen_after, unseen_before)
        # The opponent's hand stays sorted, and the cards the player saw it take stay in it.
        hand = r.hands[i, opp[i]]
        assert (np.diff(hand.astype(int)) >= 0).all()
        known = np.flatnonzero(s.known[i, opp[i]])
        assert set(known) <= set(hand[hand < n].tolist())
    hand_moved = np.any(r.hands[rows, opp] != s.hands[rows, opp], axis=1)
    deck_moved = np.array([np.any(r.deck[i, s.deck_pos[i]:] != s.deck[i, s.deck_pos[i]:]) for i in rows])
    assert hand_moved[live].mean() > 0.9 and deck_moved[live & (s.deck_pos < game.deck_size - 2)].all()
    assert s.known.any(), "the test states should include cards known to the player"


def test_redeal_depends_on_the_key(game, states):
    first = jax.tree.map(lambda x: x[0], states)
    a = redeal_unseen(game, first, first.current_player, jax.random.key(5))
    b = redeal_unseen(game, first, first.current_player, jax.random.key(6))
    assert not np.array_equal(np.asarray(a.deck), np.asarray(b.deck))


def test_redeal_is_gather_free(game, states):
    from lcjax.onehot import indexing_primitives

    keys = jax.random.split(jax.random.key(2), states.turn.shape[0])
    fn = jax.vmap(lambda s, k: redeal_unseen(game, s, s.current_player, k))
    assert indexing_primitives(fn, states, keys) == set()
