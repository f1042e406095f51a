"""Hand features of the Lost Cities observation (`LostCities.observe`): per hand slot and
per color.

A network could compute the per-color sums from the card planes, but only after learning
sums over colors and the "above the expedition's top card" rule from noisy targets. Given
directly, the value of keeping a color closed or opening it is a short function of the input.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lcjax import onehot
from lcjax.env.lost_cities_rules import Rules, card_color, card_face, card_is_wager

Array = jax.Array

FEATURES_PER_COLOR = 4


def slot_features(rules: Rules, hand: Array, playable: Array) -> Array:
    """float32[H * (C + 3)]: per hand slot (int32[H] card ids, N = empty), color one-hot,
    is-wager, face / max face, and `playable` (bool[H]: playable on the own expedition)."""
    features = [
        onehot.mask(card_color(rules, hand), rules.n_colors).astype(jnp.float32),
        card_is_wager(rules, hand).astype(jnp.float32)[:, None],
        (card_face(rules, hand).astype(jnp.float32) / rules.max_face)[:, None],
        playable.astype(jnp.float32)[:, None],
    ]
    return jnp.concatenate(features, axis=1).reshape(-1)


def color_features(rules: Rules, faces: Array, hand: Array, expedition: Array, unseen: Array) -> Array:
    """float32[4 * C]: for each color, a player's prospects on their expedition.

    Args:
      rules: the game's rules.
      faces: int32[C, K], each card's face value (0 for wagers).
      hand: bool[N], the player's hand as a card plane.
      expedition: bool[N], the player's expedition.
      unseen: bool[N], cards whose place the observer does not know (deck, hidden hands).

    Returns, color by color (C blocks of 4, each scaled to about [-1, 1]):
      playable face sum in hand: number cards above the expedition's top card / color total;
      playable cards in hand (wagers too while no number card is down) / cards per color;
      face sum of unseen cards above the top / color total;
      projected score: (expedition sum + playable hand sum - cost) * (1 + wagers down and
        playable in hand) / 100, the score if every playable hand card were played now
        (0 for a color with nothing down and nothing playable).
    """
    c, k = rules.n_colors, rules.cards_per_color
    w = rules.n_wagers
    index = jnp.arange(k, dtype=jnp.int32)
    down = expedition.reshape(c, k)
    top = jnp.max(jnp.where(down, index, -1), axis=1, keepdims=True)  # [C, 1], -1 = empty
    is_wager = index < w
    playable = jnp.where(is_wager, top < w, index > top)  # [C, K]
    number_above = playable & ~is_wager
    held = hand.reshape(c, k)
    total = jnp.maximum(jnp.sum(faces, axis=1), 1).astype(jnp.float32)
    hand_sum = jnp.sum(jnp.where(held & number_above, faces, 0), axis=1)
    hand_count = jnp.sum(held & playable, axis=1)
    unseen_sum = jnp.sum(jnp.where(unseen.reshape(c, k) & number_above, faces, 0), axis=1)
    down_sum = jnp.sum(jnp.where(down, faces, 0), axis=1)
    wagers = jnp.sum(down & is_wager, axis=1) + jnp.sum(held & playable & is_wager, axis=1)
    any_cards = jnp.any(down, axis=1) | (hand_count > 0)
    projected = jnp.where(any_cards, (down_sum + hand_sum - rules.expedition_cost) * (1 + wagers), 0)
    features = jnp.stack(
        [hand_sum / total, hand_count.astype(jnp.float32) / k, unseen_sum / total, projected.astype(jnp.float32) / 100.0],
        axis=1,
    )
    return features.reshape(-1)
