"""KuhnPoker against OpenSpiel's kuhn_poker on every history of every deal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest

from lcjax.env import kuhn
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.protocol import Game, GameState


@pytest.fixture(scope="module")
def game() -> KuhnPoker:
    return KuhnPoker()


@pytest.fixture(scope="module")
def spiel_game():
    return pyspiel.load_game("kuhn_poker")


@pytest.fixture(scope="module")
def fns(game):
    """Jitted functions, compiled once for the whole module."""

    def inspect(state):
        return {
            "terminated": state.terminated,
            "player": state.current_player,
            "mask": game.legal_action_mask(state),
            "obs": jnp.stack([game.observe(state, 0), game.observe(state, 1)]),
            "returns": game.returns(state),
        }

    return {
        "init": jax.jit(game.init_from_deck),
        "step": jax.jit(game.step),
        "inspect": jax.jit(inspect),
    }


def test_protocol(game, fns):
    assert isinstance(game, Game)
    state = fns["init"](np.array([0, 1], np.int32))
    assert isinstance(state, GameState)
    assert state.current_player.dtype == jnp.int32 and state.current_player.shape == ()
    assert state.terminated.dtype == jnp.bool_ and state.terminated.shape == ()
    assert (game.num_players, game.num_actions, game.observation_size) == (2, 2, 11)


def test_all_decks(game):
    decks = game.all_decks()
    assert decks.dtype == np.int32 and decks.shape == (6, 2)
    assert len({tuple(d) for d in decks}) == 6
    assert all(d[0] != d[1] for d in decks)


def _walk(game, fns, spiel_state, state, counts):
    """Depth-first over both games in lockstep, comparing everything observable."""
    info = jax.device_get(fns["inspect"](state))
    counts["nodes"] += 1
    assert bool(info["terminated"]) == spiel_state.is_terminal()
    for p in range(2):
        assert kuhn.information_state_string(state, p) == spiel_state.information_state_string(p)
        assert game.information_state_string(state, p) == spiel_state.information_state_string(p)
        np.testing.assert_array_equal(
            info["obs"][p], np.asarray(spiel_state.information_state_tensor(p), np.float32)
        )
    if spiel_state.is_terminal():
        counts["terminal"] += 1
        expected = np.asarray(spiel_state.returns(), np.float32)
        np.testing.assert_array_equal(info["returns"], expected)
        assert not info["mask"].any()
        # A terminated state is a fixed point of step.
        after = fns["step"](state, np.int32(0))
        jax.tree.map(np.testing.assert_array_equal, after, state)
        return
    np.testing.assert_array_equal(info["returns"], np.zeros(2, np.float32))
    assert int(info["player"]) == spiel_state.current_player()
    assert list(np.flatnonzero(info["mask"])) == spiel_state.legal_actions()
    for action in spiel_state.legal_actions():
        child = spiel_state.clone()
        child.apply_action(action)
        _walk(game, fns, child, fns["step"](state, np.int32(action)), counts)


def test_every_history_matches_openspiel(game, spiel_game, fns):
    counts = {"nodes": 0, "terminal": 0}
    for deck in game.all_decks():
        spiel_state = spiel_game.new_initial_state()
        for card in deck:
            spiel_state.apply_action(int(card))
        _walk(game, fns, spiel_state, fns["init"](deck), counts)
    # Per deal: 4 decision nodes (root, p, b, pb) and 5 terminals.
    assert counts == {"nodes": 6 * 9, "terminal": 6 * 5}


def test_illegal_action_is_a_no_op(game, fns):
    state = fns["init"](np.array([2, 0], np.int32))
    for bad in (-1, 2, 7):
        after = fns["step"](state, np.int32(bad))
        jax.tree.map(np.testing.assert_array_equal, after, state)


@pytest.fixture(scope="module")
def playouts(game):
    """A batch of uniformly random games played to the end under one jit(vmap)."""
    batch = 256

    @jax.jit
    def play(key):
        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, batch))
        # The longest game is 3 actions.
        noise = jax.random.uniform(play_key, (3, batch, game.num_actions))

        def body(i, states):
            masks = jax.vmap(game.legal_action_mask)(states)
            # Uniform over legal actions; terminated rows pick anything, a no-op for them.
            actions = jnp.argmax(jnp.where(masks, noise[i], -1.0), axis=-1).astype(jnp.int32)
            return jax.vmap(game.step)(states, actions)

        states = jax.lax.fori_loop(0, 3, body, states)
        return states, jax.vmap(game.returns)(states)

    # An "rbg" key: XLA compiles threefry's bit generator slowly on CPU, and init takes any key.
    return jax.device_get(play(jax.random.key(2, impl="rbg")))


def test_init_deals_distinct_cards(playouts):
    cards = playouts[0].cards
    assert (cards[:, 0] != cards[:, 1]).all()
    assert set(cards.ravel()) == {0, 1, 2}


def test_vmap_random_playouts_are_zero_sum(playouts):
    states, returns = playouts
    assert states.terminated.all()
    np.testing.assert_array_equal(returns.sum(-1), 0.0)
    assert set(np.abs(returns[:, 0])) <= {1.0, 2.0}
    assert (returns[:, 0] > 0).any() and (returns[:, 0] < 0).any()
