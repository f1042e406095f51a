"""Re-dealing the cards a Lost Cities player cannot see: a sample of the hidden state.

A player knows their own hand, both expeditions, the discard piles and the opponent's cards
they saw taken from a pile (`known_cards`). Everything else, the opponent's other hand cards
and the undealt deck, is unseen: any permutation of those cards among their places is a
state the player cannot tell apart from the real one. `redeal_unseen` draws one uniformly,
so averaging a quantity over re-deals estimates its expectation given the player's
information (under a uniform prior over the unseen cards, which ignores what the opponent's
play reveals about its hand).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lcjax import onehot
from lcjax.env.lost_cities import LostCities, State

Array = jax.Array


def unseen_slots(game: LostCities, state: State, player: Array) -> tuple[Array, Array]:
    """(cards int32[H + N], unseen bool[H + N]): the opponent's hand slots followed by the
    deck positions, and which of them hold a card `player` has not seen."""
    n = game.deck_size
    opponent = 1 - jnp.asarray(player, jnp.int32)
    hand = game.hand(state, opponent)  # int32[H], N = empty slot
    known = onehot.take(game.known_cards(state), opponent)  # bool[N]
    in_hand = hand < n
    hand_known = jnp.any(jax.nn.one_hot(jnp.where(in_hand, hand, n), n + 1, dtype=bool)[:, :n] & known[None], -1)
    deck = state.deck.astype(jnp.int32)
    undealt = jnp.arange(n) >= state.deck_pos
    cards = jnp.concatenate([hand, deck])
    return cards, jnp.concatenate([in_hand & ~hand_known, undealt])


def redeal_unseen(game: LostCities, state: State, player: Array, key: Array) -> State:
    """`state` with the cards `player` has not seen permuted uniformly among their places.

    The opponent's unknown hand cards and the undealt deck (from `deck_pos` on) are shuffled
    together; the opponent's hand is sorted again. `game.observe(result, player)` equals
    `game.observe(state, player)`; the opponent's view and the deck order change.

    Args:
      game: a LostCities game.
      state: one (unbatched) State; vmap for a batch.
      player: int32[], the player whose information is kept.
      key: PRNG key of the permutation.
    """
    h = game.rules.hand_size
    cards, unseen = unseen_slots(game, state, player)
    size = cards.shape[0]
    # The unseen cards in a random order (seen ones sorted last), then the k-th unseen slot
    # (in slot order) takes the k-th of them. One-hot selects instead of gathers: they stay
    # vectorized under vmap on CPU.
    priority = jnp.where(unseen, jax.random.uniform(key, (size,)), 2.0)
    order = jnp.argsort(priority)
    shuffled = jnp.sum(jax.nn.one_hot(order, size, dtype=jnp.int32) * cards[None], -1)
    rank = jnp.cumsum(unseen) - 1
    dealt = jnp.sum(jax.nn.one_hot(rank, size, dtype=jnp.int32) * shuffled[None], -1)
    cards = jnp.where(unseen, dealt, cards)
    opponent = 1 - jnp.asarray(player, jnp.int32)
    hand = jnp.sort(cards[:h])
    hands = jnp.where(jnp.arange(2)[:, None] == opponent, hand[None], state.hands.astype(jnp.int32))
    return state._replace(hands=hands.astype(state.hands.dtype), deck=cards[h:].astype(state.deck.dtype))


__all__ = ["redeal_unseen", "unseen_slots"]
