"""Per-color features of the Lost Cities observation, checked on hand-built positions."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from lcjax.env.lost_cities import LostCities, Rules
from lcjax.env.lost_cities_features import FEATURES_PER_COLOR, color_features
from lcjax.env.lost_cities_rules import face_table

RULES = Rules()
N, K = RULES.deck_size, RULES.cards_per_color


def card(color: int, face: int | None) -> int:
    """Card id of a number card (`face`) or the first wager (None) of `color`."""
    return color * K + (0 if face is None else RULES.n_wagers + face - RULES.min_rank)


def plane(*cards: int) -> jnp.ndarray:
    x = np.zeros(N, bool)
    x[list(cards)] = True
    return jnp.asarray(x)


def features(hand, expedition, unseen) -> np.ndarray:
    out = color_features(RULES, jnp.asarray(face_table(RULES)), hand, expedition, unseen)
    return np.asarray(out).reshape(RULES.n_colors, FEATURES_PER_COLOR)


def test_playable_sums_counts_and_projection():
    red, green = 0, 1
    hand = plane(card(red, 3), card(red, 9), card(red, None), card(green, 2), card(green, 8))
    expedition = plane(card(green, 5))  # green: only cards above 5 (the 8) are playable
    unseen = plane(card(red, 10), card(green, 4), card(green, 7))
    f = features(hand, expedition, unseen)
    total = 54.0  # 2 + ... + 10
    # Red: nothing down; 3 and 9 and the wager playable; projected (12 - 20) * (1 + 1).
    np.testing.assert_allclose(f[red], [12 / total, 3 / K, 10 / total, -0.16], atol=1e-6)
    # Green: the 2 is dead under the 5; the wager rule no longer applies; unseen 4 is dead.
    np.testing.assert_allclose(f[green], [8 / total, 1 / K, 7 / total, (5 + 8 - 20) / 100], atol=1e-6)
    # Other colors: nothing held, nothing down: all zero except the unseen sum.
    np.testing.assert_allclose(f[2:], 0.0)


def test_observation_ends_with_the_observers_color_features():
    game = LostCities()
    state = game.init_from_deck(jnp.arange(N))
    obs = np.asarray(game.observe(state, 1))
    assert obs.shape == (game.observation_size,)
    hand = np.zeros(N, bool)
    hand[np.asarray(game.hand(state, 1))] = True
    unseen = ~hand  # nothing is on an expedition or a pile yet; the opponent's hand is unseen
    want = features(jnp.asarray(hand), jnp.zeros(N, bool), jnp.asarray(unseen)).reshape(-1)
    np.testing.assert_allclose(obs[-FEATURES_PER_COLOR * RULES.n_colors:], want, atol=1e-6)
    # The history adds the opponent's (player 0's) features, with only the deck unseen.
    hist = np.asarray(game.observe_history(state._replace(current_player=jnp.int32(1))))
    opp = np.zeros(N, bool)
    opp[np.asarray(game.hand(state, 0))] = True
    want = features(jnp.asarray(opp), jnp.zeros(N, bool), jnp.asarray(~(opp | hand))).reshape(-1)
    np.testing.assert_allclose(hist[-FEATURES_PER_COLOR * RULES.n_colors:], want, atol=1e-6)
