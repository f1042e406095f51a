"""Lost Cities rules: the game parameters, card ids and action ids, and their names.

Cards. With K = n_wagers + n_ranks cards per color, card id = color * K + k: k < n_wagers is a
wager (an "investment" card), otherwise the number card of face value
min_rank + k - n_wagers. The deck holds N = n_colors * K cards, all distinct ids. The id N
marks an empty hand slot; the card functions below accept it (color C, not a wager, face 0).

Actions (H = hand_size, C = n_colors, A = 2H + 1 + C):
  play hand slot i       -> i
  discard hand slot i    -> H + i
  draw from the deck     -> 2H
  draw from pile c       -> 2H + 1 + c

The game itself (state, step, observation) is `lcjax.env.lost_cities`, which re-exports the
names of this module.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

COLOR_NAMES = ("red", "green", "white", "blue", "yellow", "purple")
COLOR_LETTERS = ("R", "G", "W", "B", "Y", "P")


@dataclasses.dataclass(frozen=True)
class Rules:
    """Game parameters. The defaults are the classic two-player game.

    Attributes:
      n_colors: number of expedition colors, 1..6 (6 is the purple variant).
      n_ranks: number cards per color, face values min_rank .. min_rank + n_ranks - 1.
      min_rank: face value of the lowest number card.
      n_wagers: wager cards per color.
      hand_size: cards in hand between turns.
      expedition_cost: subtracted from the sum of an opened expedition.
      bonus_threshold: an expedition of at least this many cards (wagers count) earns `bonus`.
      bonus: the length bonus, added after the wager multiplier.
      max_turns: the game ends after this many completed turns (stalling cap).
    """

    n_colors: int = 5
    n_ranks: int = 9
    min_rank: int = 2
    n_wagers: int = 3
    hand_size: int = 8
    expedition_cost: int = 20
    bonus_threshold: int = 8
    bonus: int = 20
    max_turns: int = 200

    def __post_init__(self):
        for name in ("n_ranks", "hand_size", "max_turns", "bonus_threshold"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"Rules.{name} must be a positive integer, got {value!r}")
        for name in ("min_rank", "n_wagers", "expedition_cost", "bonus"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"Rules.{name} must be a non-negative integer, got {value!r}")
        if not isinstance(self.n_colors, (int, np.integer)) or not 1 <= self.n_colors <= 6:
            raise ValueError(f"Rules.n_colors must be an integer in 1..6, got {self.n_colors!r}")
        if self.deck_size < 2 * self.hand_size + 1:
            raise ValueError(
                f"Rules.hand_size={self.hand_size} is too large: the deck of {self.deck_size} "
                f"cards (n_colors * (n_wagers + n_ranks)) must deal two hands and leave a card"
            )

    @property
    def cards_per_color(self) -> int:
        return self.n_wagers + self.n_ranks

    @property
    def deck_size(self) -> int:
        return self.n_colors * self.cards_per_color

    @property
    def num_actions(self) -> int:
        return 2 * self.hand_size + 1 + self.n_colors

    @property
    def max_face(self) -> int:
        """The highest face value of a number card."""
        return self.min_rank + self.n_ranks - 1


# ---------------------------------------------------------------------------- cards (jittable)
def card_color(rules: Rules, cards: Array) -> Array:
    """int32 like `cards`: each card's color (C for the empty-slot id N)."""
    return jnp.asarray(cards).astype(jnp.int32) // rules.cards_per_color


def card_index(rules: Rules, cards: Array) -> Array:
    """int32 like `cards`: each card's index k within its color, 0..K-1 (0 for the id N)."""
    return jnp.asarray(cards).astype(jnp.int32) % rules.cards_per_color


def card_is_wager(rules: Rules, cards: Array) -> Array:
    """bool like `cards`: True for wager cards (False for the empty-slot id N)."""
    cards = jnp.asarray(cards, jnp.int32)
    return (cards < rules.deck_size) & (card_index(rules, cards) < rules.n_wagers)


def card_face(rules: Rules, cards: Array) -> Array:
    """int32 like `cards`: face value of number cards, 0 for wagers and the empty-slot id N."""
    cards = jnp.asarray(cards, jnp.int32)
    k = card_index(rules, cards)
    number = (cards < rules.deck_size) & (k >= rules.n_wagers)
    return jnp.where(number, rules.min_rank + k - rules.n_wagers, 0)


def face_table(rules: Rules) -> np.ndarray:
    """int32[C, K]: the face value of every card (0 for wagers), row c = color c's cards."""
    k = np.arange(rules.cards_per_color)
    faces = np.where(k >= rules.n_wagers, rules.min_rank + k - rules.n_wagers, 0)
    return np.tile(faces, (rules.n_colors, 1)).astype(np.int32)


# ---------------------------------------------------------------------------- actions
def play_action(rules: Rules, slot: int) -> int:
    """Action id of playing hand slot `slot`."""
    return slot


def discard_action(rules: Rules, slot: int) -> int:
    """Action id of discarding hand slot `slot`."""
    return rules.hand_size + slot


def draw_deck_action(rules: Rules) -> int:
    """Action id of drawing from the deck."""
    return 2 * rules.hand_size


def draw_pile_action(rules: Rules, color: int) -> int:
    """Action id of drawing from the discard pile of `color`."""
    return 2 * rules.hand_size + 1 + color


# ---------------------------------------------------------------------------- names (host-side)
def card_name(rules: Rules, card: int) -> str:
    """A short name for a card id, e.g. 'R7' or 'Rw' (wager); '--' for an empty slot."""
    card = int(card)
    if card >= rules.deck_size or card < 0:
        return "--"
    color, k = divmod(card, rules.cards_per_color)
    if k < rules.n_wagers:
        return f"{COLOR_LETTERS[color]}w"
    return f"{COLOR_LETTERS[color]}{rules.min_rank + k - rules.n_wagers}"


def action_name(rules: Rules, action: int, card: int | None = None) -> str:
    """A readable name for `action`; a play or discard names `card` (its hand slot's card) if given."""
    h = rules.hand_size
    a = int(action)
    if a < 2 * h:
        verb = "play" if a < h else "discard"
        if card is not None:
            return f"{verb} {card_name(rules, card)}"
        return f"{verb} slot {a % h}"
    if a == 2 * h:
        return "draw deck"
    return f"draw pile {COLOR_NAMES[a - 2 * h - 1]}"
