"""Kuhn poker as pure JAX functions, with the rules and encodings of OpenSpiel's `kuhn_poker`.

Three cards, ids 0 < 1 < 2 (J, Q, K, as in OpenSpiel). Each player antes 1 and gets one card;
player 0 acts first. Actions (OpenSpiel's ids): 0 = pass (check, or fold when facing a bet),
1 = bet (bet 1, or call a bet). The game ends after pass-pass, bet-pass, bet-bet, pass-bet-pass
or pass-bet-bet; at a showdown the higher card takes the pot.

Observations are perfect-recall information states laid out exactly like OpenSpiel's
`information_state_tensor` (size 11):

  [0:2]   the observing player, one-hot;
  [2:5]   the observing player's card, one-hot;
  [5:11]  the betting history, 3 slots x (pass, bet) one-hot, slot i = i-th action; empty
          slots are all zero.

`observe_history` (size 14) is the acting player's observation followed by the opponent's
card, one-hot: the whole history but for the undealt third card.

`information_state_string` gives OpenSpiel's `information_state_string`: the card id
followed by one letter per action, "p" or "b" (e.g. "2pb").
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lcjax import onehot

Array = jax.Array

NUM_CARDS = 3
PASS = 0
BET = 1
_MAX_MOVES = 3


class KuhnState(NamedTuple):
    """State of one Kuhn poker game. All fields are arrays; a batch adds leading axes.

    Attributes:
      current_player: int32[], the player to act. Once terminated it is left at the player
        who made the last move (not meaningful for play).
      terminated: bool[], True once the game is over.
      cards: int32[2], the private card of each player (ids 0..2, 2 highest).
      history: int32[3], the actions taken so far in order, -1 in unused slots.
      num_moves: int32[], how many actions have been taken (0..3).
      contributions: int32[2], chips each player has put in the pot (ante included).
      payoffs: float32[2], each player's final chips won/lost; zeros until terminated.
    """

    current_player: Array
    terminated: Array
    cards: Array
    history: Array
    num_moves: Array
    contributions: Array
    payoffs: Array


class KuhnPoker:
    """Two-player Kuhn poker implementing `lcjax.env.protocol.Game`.

    Attributes:
      num_actions: 2 (0 = pass, 1 = bet).
      observation_size: 11.
      history_size: 14, the size of `observe_history`.
      num_players: 2.
      return_scale: 2.0, the largest win (ante plus bet).
      deck_size: 3, the length of the deck `init` shuffles.
      num_alternatives: 3, the size of `hidden_alternatives`' leading axis (one per card).

    An illegal action (outside {0, 1}) or any action on a terminated state leaves the state
    unchanged, so `step` never raises under `jit`.
    """

    num_actions: int = 2
    observation_size: int = 11
    history_size: int = 11 + NUM_CARDS
    num_players: int = 2
    return_scale: float = 2.0
    num_alternatives: int = NUM_CARDS

    # Instances hold no data, so every instance is the same game: caches keyed on games
    # (`lcjax.cfr.solver.make_solver`, the arena's compiled matches) treat them as one.
    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))
    deck_size: int = NUM_CARDS

    def init(self, key: Array) -> KuhnState:
        """A new game whose deal is a uniformly shuffled deck drawn from `key`."""
        deck = jax.random.permutation(key, NUM_CARDS).astype(jnp.int32)
        return self.init_from_deck(deck)

    def init_from_deck(self, deck: Array) -> KuhnState:
        """A new game dealing deck[0] to player 0 and deck[1] to player 1.

        Args:
          deck: int[k], k >= 2, card ids in OpenSpiel's numbering (0..2); entries after the
            first two are ignored.
        """
        deck = jnp.asarray(deck, dtype=jnp.int32)
        return KuhnState(
            current_player=jnp.int32(0),
            terminated=jnp.bool_(False),
            cards=deck[:2],
            history=jnp.full((_MAX_MOVES,), -1, dtype=jnp.int32),
            num_moves=jnp.int32(0),
            contributions=jnp.ones((2,), dtype=jnp.int32),
            payoffs=jnp.zeros((2,), dtype=jnp.float32),
        )

    def step(self, state: KuhnState, action: Array) -> KuhnState:
        """The state after the current player plays `action` (int32[]).

        A terminated state, or an action outside {0, 1}, returns `state` unchanged.
        """
        action = jnp.asarray(action, dtype=jnp.int32)
        valid = (~state.terminated) & (action >= 0) & (action < self.num_actions)
        p = state.current_player
        opp = 1 - p
        # Indexing at the traced player and slot goes through `onehot` (fast under vmap).
        facing = onehot.take(state.contributions, opp) > onehot.take(state.contributions, p)
        is_bet = action == BET
        contributions = onehot.add(state.contributions, p, is_bet.astype(jnp.int32))
        slot = jnp.clip(state.num_moves, 0, _MAX_MOVES - 1)
        history = onehot.put(state.history, slot, action)
        num_moves = state.num_moves + 1

        fold = facing & ~is_bet
        call = facing & is_bet
        check_check = ~facing & ~is_bet & (num_moves == 2)
        terminal = fold | call | check_check
        showdown_winner = jnp.where(state.cards[0] > state.cards[1], 0, 1)
        winner = jnp.where(fold, opp, showdown_winner)
        # The loser forfeits everything they put in (at a showdown both put in the same).
        amount = onehot.take(contributions, 1 - winner).astype(jnp.float32)
        won = jnp.where(onehot.mask(winner, 2), amount, -amount)
        payoffs = jnp.where(terminal, won, state.payoffs)

        new = KuhnState(
            current_player=jnp.where(terminal, p, opp).astype(jnp.int32),
            terminated=terminal,
            cards=state.cards,
            history=history,
            num_moves=num_moves,
            contributions=contributions,
            payoffs=payoffs,
        )
        return jax.tree.map(lambda n, o: jnp.where(valid, n, o), new, state)

    def legal_action_mask(self, state: KuhnState) -> Array:
        """bool[2]: both actions are always legal; all False once terminated."""
        return jnp.broadcast_to(~state.terminated, (self.num_actions,))

    def observe(self, state: KuhnState, player: Array) -> Array:
        """float32[11]: `player`'s information state, equal to OpenSpiel's tensor."""
        player = jnp.asarray(player, dtype=jnp.int32)
        position = onehot.mask(player, 2)
        card = onehot.mask(onehot.take(state.cards, player), NUM_CARDS)
        betting = onehot.mask(state.history, 2).reshape(-1)  # unused slots (-1): all zero
        return jnp.concatenate([position, card, betting]).astype(jnp.float32)

    def observe_history(self, state: KuhnState) -> Array:
        """float32[14]: `observe(state, current_player)`, then the opponent's card one-hot.

        Everything dealt and played, from the acting player's seat; defined once terminated.
        """
        p = state.current_player
        opponent_card = onehot.mask(onehot.take(state.cards, 1 - p), NUM_CARDS)
        return jnp.concatenate([self.observe(state, p), opponent_card.astype(jnp.float32)])

    def hidden_alternatives(self, state: KuhnState, player: Array) -> tuple[KuhnState, Array]:
        """The histories `player` cannot tell from `state`: alternative k gives the opponent card k.

        Returns (states, prior): `state` with the opponent's card replaced by k, every leaf
        with a leading axis of 3 (k = the card id), and float32[3], the chance probability
        of each card given `player`'s own (1/2 for the two other cards, 0 for its own; that
        alternative is `state` unchanged). Meant for states still in play: on a terminated
        state the alternatives keep its payoffs.
        """
        player = jnp.asarray(player, dtype=jnp.int32)
        opponent = 1 - player
        own = onehot.take(state.cards, player)
        cards = jnp.arange(NUM_CARDS, dtype=jnp.int32)
        possible = cards != own
        # A batch of states differing only in the opponent's card (itself where impossible).
        alt_cards = jnp.where(
            possible[:, None] & onehot.mask(opponent, 2)[None, :], cards[:, None], state.cards[None, :]
        )
        states = jax.tree.map(lambda x: jnp.broadcast_to(x, (NUM_CARDS,) + jnp.shape(x)), state)
        prior = possible.astype(jnp.float32) / (NUM_CARDS - 1)
        return states._replace(cards=alt_cards), prior

    def returns(self, state: KuhnState) -> Array:
        """float32[2]: chips won by each player; zeros before the end."""
        return state.payoffs

    def all_decks(self) -> np.ndarray:
        """int32[6, 2]: every ordered deal (player 0's card, player 1's card), equally likely."""
        return np.array(list(itertools.permutations(range(NUM_CARDS), 2)), dtype=np.int32)

    def information_state_string(self, state: KuhnState, player: int) -> str:
        """OpenSpiel's `information_state_string(player)` for `state` (host-side)."""
        return information_state_string(state, player)


def information_state_string(state: KuhnState, player: int) -> str:
    """OpenSpiel's `information_state_string(player)` for an unbatched `state` (host-side).

    The card id of `player` followed by "p"/"b" for each action so far, e.g. "0pb".
    """
    cards = np.asarray(state.cards)
    history = np.asarray(state.history)[: int(state.num_moves)]
    return str(int(cards[int(player)])) + "".join("pb"[int(a)] for a in history)
