"""LeducPoker against OpenSpiel's leduc_poker on every history of every deal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest

from lcjax.env import leduc
from lcjax.env.leduc import LeducPoker
from lcjax.env.protocol import Game, GameState

from batching import chunked  # tests/env/batching.py

# Every batched call is padded to this many rows, so each jitted function compiles once.
CHUNK = 1024


@pytest.fixture(scope="module")
def game() -> LeducPoker:
    return LeducPoker()


@pytest.fixture(scope="module")
def spiel_game():
    return pyspiel.load_game("leduc_poker")


@pytest.fixture(scope="module")
def fns(game):
    """Jitted functions, compiled once for the whole module."""

    def with_info(state):
        info = {
            "mask": game.legal_action_mask(state),
            "obs": jnp.stack([game.observe(state, 0), game.observe(state, 1)]),
            "returns": game.returns(state),
        }
        return state, info

    return {
        "init": jax.jit(game.init_from_deck),
        "step": jax.jit(game.step),
        "batch_init": jax.jit(jax.vmap(lambda deck: with_info(game.init_from_deck(deck)))),
        "batch_step": jax.jit(jax.vmap(lambda state, action: with_info(game.step(state, action)))),
    }


def _chunked(fn, *args):
    return chunked(fn, CHUNK, *args)


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _deal(spiel_game, deck):
    state = spiel_game.new_initial_state()
    state.apply_action(int(deck[0]))
    state.apply_action(int(deck[1]))
    return state


def _apply(spiel_state, action, deck):
    child = spiel_state.clone()
    child.apply_action(action)
    if child.is_chance_node():
        # OpenSpiel deals the public card between the rounds; lcjax drew it up front.
        child.apply_action(int(deck[2]))
    return child


@pytest.fixture(scope="module")
def walk(game, spiel_game, fns):
    """Breadth-first over every history of every deal in lcjax and OpenSpiel side by side.

    Returns a list of levels (states, info, spiel_states) with states/info as numpy batches.
    """
    decks = game.all_decks()
    levels = []
    states, info = _chunked(fns["batch_init"], decks)
    spiel_states = [_deal(spiel_game, deck) for deck in decks]
    deck_ids = np.arange(len(decks))
    while len(spiel_states):
        levels.append((states, info, spiel_states))
        parents, actions, children = [], [], []
        for i, spiel_state in enumerate(spiel_states):
            for action in [] if spiel_state.is_terminal() else spiel_state.legal_actions():
                parents.append(i)
                actions.append(action)
                children.append(_apply(spiel_state, action, decks[deck_ids[i]]))
        if not children:
            break
        parents = np.array(parents)
        parent_states = jax.tree.map(lambda x: x[parents], states)
        states, info = _chunked(fns["batch_step"], parent_states, np.array(actions, np.int32))
        spiel_states = children
        deck_ids = deck_ids[parents]
    return levels


def test_protocol(game, fns):
    assert isinstance(game, Game)
    state = fns["init"](np.array([0, 1, 2], np.int32))
    assert isinstance(state, GameState)
    assert state.current_player.dtype == jnp.int32 and state.current_player.shape == ()
    assert state.terminated.dtype == jnp.bool_ and state.terminated.shape == ()
    assert (game.num_players, game.num_actions, game.observation_size) == (2, 3, 30)


def test_all_decks(game):
    decks = game.all_decks()
    assert decks.dtype == np.int32 and decks.shape == (120, 3)
    assert len({tuple(d) for d in decks}) == 120
    assert all(len(set(d)) == 3 for d in decks)


def test_every_history_matches_openspiel(game, walk):
    num_nodes = num_terminal = 0
    for states, info, spiel_states in walk:
        num_nodes += len(spiel_states)
        terminal = np.array([s.is_terminal() for s in spiel_states])
        num_terminal += terminal.sum()
        np.testing.assert_array_equal(states.terminated, terminal)
        np.testing.assert_array_equal(
            info["returns"], np.array([s.returns() for s in spiel_states], np.float32)
        )
        live = ~terminal
        np.testing.assert_array_equal(
            states.current_player[live],
            np.array([s.current_player() for s in spiel_states if not s.is_terminal()]),
        )
        expected_masks = np.zeros((len(spiel_states), game.num_actions), bool)
        for i, s in enumerate(spiel_states):
            expected_masks[i, [] if s.is_terminal() else s.legal_actions()] = True
        np.testing.assert_array_equal(info["mask"], expected_masks)
        for p in range(2):
            np.testing.assert_array_equal(
                info["obs"][:, p],
                np.array([s.information_state_tensor(p) for s in spiel_states], np.float32),
            )
            ours = [
                leduc.information_state_string(_row(states, i), p) for i in range(len(spiel_states))
            ]
            assert ours == [s.information_state_string(p) for s in spiel_states]
    # Per deal: 6 decision nodes in round 1 and 5 ways into round 2 with 6 each; 4 folds in
    # round 1 and 4 folds plus 1 showdown after each way into round 2.
    assert (num_nodes, num_terminal) == (120 * (6 + 5 * 6 + 4 + 5 * 9), 120 * (4 + 5 * 9))


def test_method_string_matches_function(game, walk):
    states = walk[3][0]
    for i in range(0, len(states.terminated), 97):
        for p in range(2):
            state = _row(states, i)
            expected = leduc.information_state_string(state, p)
            assert game.information_state_string(state, p) == expected


def test_illegal_actions_are_no_ops(game, fns, walk):
    """Every action that is not legal (all of them once terminated) leaves the state alone."""
    states = jax.tree.map(lambda *xs: np.concatenate(xs), *[level[0] for level in walk])
    masks = np.concatenate([level[1]["mask"] for level in walk])
    for action in (-1, *range(game.num_actions), game.num_actions, 100):
        after, _ = _chunked(fns["batch_step"], states, np.full(len(masks), action, np.int32))
        in_range = 0 <= action < game.num_actions
        illegal = ~masks[:, action] if in_range else np.ones(len(masks), bool)
        assert illegal.any()
        jax.tree.map(
            lambda x, y: np.testing.assert_array_equal(x[illegal], y[illegal]), after, states
        )


def test_showdown_ranks(fns):
    """Pair beats high card, high card by private rank, same rank splits (check-check twice)."""

    def showdown(deck):
        state = fns["init"](np.array(deck, np.int32))
        for _ in range(4):
            state = fns["step"](state, np.int32(1))
        assert bool(state.terminated)
        return list(np.asarray(state.payoffs))

    assert showdown([0, 4, 1]) == [1.0, -1.0]  # J pairs the public J and beats K.
    assert showdown([2, 4, 0]) == [-1.0, 1.0]  # K high beats Q high.
    assert showdown([4, 5, 0]) == [0.0, 0.0]  # Two kings split.


@pytest.fixture(scope="module")
def playouts(game):
    """A batch of uniformly random games played to the end under one jit(vmap)."""
    batch = 256

    @jax.jit
    def play(key):
        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, batch))
        # The longest game is 4 actions per round.
        noise = jax.random.uniform(play_key, (8, batch, game.num_actions))

        def body(i, states):
            masks = jax.vmap(game.legal_action_mask)(states)
            # Uniform over legal actions; terminated rows pick anything, a no-op for them.
            actions = jnp.argmax(jnp.where(masks, noise[i], -1.0), axis=-1).astype(jnp.int32)
            return jax.vmap(game.step)(states, actions)

        states = jax.lax.fori_loop(0, 8, body, states)
        return states, jax.vmap(game.returns)(states)

    # An "rbg" key: XLA compiles threefry's bit generator slowly on CPU, and init takes any key.
    return jax.device_get(play(jax.random.key(2, impl="rbg")))


def test_init_deals_distinct_cards(playouts):
    states = playouts[0]
    cards = np.concatenate([states.private_cards, states.public_card[:, None]], axis=1)
    assert all(len(set(row)) == 3 for row in cards)
    assert set(cards.ravel()) == set(range(6))


def test_vmap_random_playouts_are_zero_sum(playouts):
    states, returns = playouts
    assert states.terminated.all()
    np.testing.assert_array_equal(returns.sum(-1), 0.0)
    assert np.abs(returns).max() <= 13.0
    assert (returns[:, 0] > 0).any() and (returns[:, 0] < 0).any()
    assert (returns[:, 0] == 0).any()
