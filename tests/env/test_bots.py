"""Scripted Lost Cities bots (lcjax.env.bots); matches between them are in test_arena.py.

Compilation dominates the cost here, so every jitted function is built once per module:
one sampling of states, one function running every bot over them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.env import bots
from lcjax.env.lost_cities import PHASE_DRAW, PHASE_PLAY, LostCities, Rules


@pytest.fixture(scope="module")
def game() -> LostCities:
    return LostCities()


@pytest.fixture(scope="module")
def sample_states(game):
    """~32k states (flat batch) from whole games: half noisy-safe self-play, half random play.

    Every state along each game is kept, so both phases and early to final positions occur.
    """
    batch, steps = 256, 128
    noisy = bots.noisy_safe_bot(game, epsilon=0.1)
    uniform = bots.random_bot(game)

    def policy(key, state, index):
        return jnp.where(index % 2 == 0, noisy(key, state), uniform(key, state))

    @jax.jit
    def run(key):
        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, batch))
        index = jnp.arange(batch)

        def body(states, k):
            actions = jax.vmap(policy)(jax.random.split(k, batch), states, index)
            return jax.vmap(game.step)(states, actions), states

        _, history = jax.lax.scan(body, states, jax.random.split(play_key, steps))
        return jax.tree.map(lambda x: x.reshape((batch * steps,) + x.shape[2:]), history)

    return run(jax.random.key(2))


@pytest.fixture(scope="module")
def run_bots(game):
    """jitted (key, states) -> every registered bot's action, plus noisy_safe at epsilon 0
    and 1, and the legal mask; game g uses the g-th of `key` split over the batch."""
    policies = {name: bots.make_bot(name, game) for name in bots.BOT_NAMES}
    policies["noisy_safe_eps0"] = bots.noisy_safe_bot(game, epsilon=0.0)
    policies["noisy_safe_eps1"] = bots.noisy_safe_bot(game, epsilon=1.0)

    @jax.jit
    def run(key, states):
        keys = jax.random.split(key, states.turn.shape[0])
        out = {name: jax.vmap(act)(keys, states) for name, act in policies.items()}
        out["mask"] = jax.vmap(game.legal_action_mask)(states)
        return out

    return run


@pytest.fixture(scope="module")
def bot_actions(run_bots, sample_states):
    """Every registered bot's action, plus noisy_safe at epsilon 0 and 1, on sample_states."""
    return jax.device_get(run_bots(jax.random.key(3), sample_states))


# ---------------------------------------------------------------------------- registry
def test_registry_names():
    assert set(bots.BOT_NAMES) == {
        "random",
        "passive_discard",
        "safe_heuristic_loose",
        "safe_heuristic",
        "safe_heuristic_strict",
        "noisy_safe",
    }


def test_make_bot_bad_name_lists_names(game):
    with pytest.raises(ValueError) as info:
        bots.make_bot("alphazero", game)
    message = str(info.value)
    assert "alphazero" in message
    for name in bots.BOT_NAMES:
        assert name in message


def test_make_bot_returns_same_function(game):
    # Same object for equal (name, game) pairs, so arena's compile cache is reused; games
    # are equal when their rules are.
    assert bots.make_bot("random", game) is bots.make_bot("random", game)
    same_rules = LostCities(game.rules)
    assert bots.make_bot("random", game) is bots.make_bot("random", same_rules)
    other_rules = LostCities(Rules(n_colors=game.rules.n_colors + 1 if game.rules.n_colors < 6 else 5))
    assert bots.make_bot("random", game) is not bots.make_bot("random", other_rules)


def test_noisy_safe_rejects_bad_epsilon(game):
    with pytest.raises(ValueError, match="epsilon"):
        bots.noisy_safe_bot(game, epsilon=1.5)


def test_param_sets_differ():
    loose, default, strict = bots.SAFE_LOOSE, bots.SAFE_DEFAULT, bots.SAFE_STRICT
    assert loose.open_margin < default.open_margin < strict.open_margin
    assert loose.min_deck_to_open < default.min_deck_to_open < strict.min_deck_to_open


# ---------------------------------------------------------------------------- policies
def test_sample_states_cover_both_phases(sample_states):
    live = ~np.asarray(sample_states.terminated)
    phase = np.asarray(sample_states.phase)[live]
    assert (phase == PHASE_PLAY).sum() > 1000 and (phase == PHASE_DRAW).sum() > 1000
    assert np.asarray(sample_states.terminated).sum() > 0  # some games finish


@pytest.mark.parametrize("name", list(bots.BOT_NAMES) + ["noisy_safe_eps0", "noisy_safe_eps1"])
def test_bot_picks_legal_actions(bot_actions, name):
    mask = bot_actions["mask"]
    actions = bot_actions[name]
    assert actions.dtype == np.int32
    live = mask.any(axis=1)
    chosen = mask[np.arange(len(actions)), actions]
    assert chosen[live].all(), f"{name} chose illegal actions in {np.sum(~chosen[live])} states"


def test_noisy_safe_eps0_equals_safe(bot_actions):
    np.testing.assert_array_equal(bot_actions["noisy_safe_eps0"], bot_actions["safe_heuristic"])


def test_noisy_safe_deviates_sometimes(bot_actions):
    live = bot_actions["mask"].sum(axis=1) > 1
    differs = bot_actions["noisy_safe"][live] != bot_actions["safe_heuristic"][live]
    # epsilon = 0.1 and the random pick can coincide with the safe one: well below 10%.
    assert 0.01 < differs.mean() < 0.1


def test_passive_discard_only_discards_and_draws_deck(game, bot_actions, sample_states):
    h = game.rules.hand_size
    live = bot_actions["mask"].any(axis=1)
    play = live & (np.asarray(sample_states.phase) == PHASE_PLAY)
    draw = live & (np.asarray(sample_states.phase) == PHASE_DRAW)
    actions = bot_actions["passive_discard"]
    assert ((actions[play] >= h) & (actions[play] < 2 * h)).all()
    assert (actions[draw] == 2 * h).all()


def test_uniform_legal_is_uniform():
    # A grid of u values must hit each legal action equally often and never an illegal one.
    mask = jnp.array([False, True, True, False, True, False, False, True])
    u = (jnp.arange(4000) + 0.5) / 4000
    picks = np.asarray(jax.vmap(bots._uniform_legal, in_axes=(0, None))(u, mask))
    counts = np.bincount(picks, minlength=8)
    np.testing.assert_array_equal(counts, [0, 1000, 1000, 0, 1000, 0, 0, 1000])
    assert int(bots._uniform_legal(jnp.float32(0.7), jnp.zeros(8, bool))) == 0


def test_random_bot_spreads_over_legal_actions(bot_actions):
    mask = bot_actions["mask"]
    live = mask.sum(axis=1) > 1
    # Uniform over >= 2 legal actions: the first legal one is picked at most half the time.
    first = np.argmax(mask, axis=1)
    assert (bot_actions["random"][live] == first[live]).mean() < 0.5


# ---------------------------------------------------------------------------- hidden information
def _redeal_hidden(game, states, rng):
    """`states` with the cards the player to act cannot see dealt anew.

    The opponent's hand cards that the acting player does not know of (`known_cards`) and the
    undealt deck are shuffled among themselves: the acting player's hand, both expeditions,
    the piles, the opponent's known cards, hand size and deck size all stay.
    """
    s = jax.tree.map(np.array, states)
    n = game.deck_size
    for i in range(len(s.turn)):
        opp = 1 - int(s.current_player[i])
        hand = s.hands[i, opp]
        hidden = (hand < n) & ~s.known[i, opp, np.minimum(hand, n - 1)]
        pos = int(s.deck_pos[i])
        pool = rng.permutation(np.concatenate([hand[hidden], s.deck[i, pos:]]))
        m = int(hidden.sum())
        s.hands[i, opp] = np.sort(np.concatenate([hand[~hidden], pool[:m]]))
        s.deck[i, pos:] = pool[m:]
    return s


def test_bots_see_only_what_the_acting_player_sees(game, run_bots, sample_states, bot_actions):
    """Every bot, with the same key, plays the same action after the hidden cards (opponent's
    unknown hand cards and undealt deck) are re-dealt among themselves: so a bot may serve
    as a traverser's sampling policy, which must depend only on the traverser's information."""
    redealt = _redeal_hidden(game, sample_states, np.random.default_rng(4))
    live = ~np.asarray(sample_states.terminated)
    opp = 1 - np.asarray(sample_states.current_player)
    rows = np.arange(len(opp))
    hand_changed = np.any(redealt.hands[rows, opp] != np.asarray(sample_states.hands)[rows, opp], axis=1)
    assert hand_changed[live].mean() > 0.9  # the test does move hidden cards
    np.testing.assert_array_equal(redealt.hands[rows, 1 - opp], np.asarray(sample_states.hands)[rows, 1 - opp])
    after = jax.device_get(run_bots(jax.random.key(3), redealt))
    np.testing.assert_array_equal(after["mask"], bot_actions["mask"])
    for name in list(bots.BOT_NAMES) + ["noisy_safe_eps0", "noisy_safe_eps1"]:
        differ = np.flatnonzero(live & (after[name] != bot_actions[name]))
        assert differ.size == 0, f"{name} changed its action on {differ.size} states after a re-deal of hidden cards"
