"""Leduc hold'em as pure JAX functions, with the rules and encodings of OpenSpiel's `leduc_poker`.

Six cards in OpenSpiel's numbering: card c has rank c // 2 (0 = J, 1 = Q, 2 = K) and suit
c % 2, so 0,1 are the jacks, 2,3 the queens, 4,5 the kings. Each player antes 1 and gets a
private card; player 0 opens both betting rounds. Actions (OpenSpiel's ids): 0 = fold (legal
only when facing a bet), 1 = call/check, 2 = raise (legal while the round has had fewer than 2
raises). A raise puts in 2 chips more than the opponent in round 1 and 4 in round 2. After
round 1 the public card is revealed. At the showdown a private card pairing the public card
wins; otherwise the higher private rank wins; equal ranks split the pot.

Observations are perfect-recall information states laid out exactly like OpenSpiel's
`information_state_tensor` (size 30):

  [0:2]    the observing player, one-hot;
  [2:8]    the observing player's private card, one-hot;
  [8:14]   the public card, one-hot, all zero until it is revealed (round 2);
  [14:22]  round 1 betting: 4 slots x 2 bits, slot i = i-th action of the round, call = (1, 0),
           raise = (0, 1); a fold and an unused slot are both (0, 0);
  [22:30]  round 2 betting, same layout.

`observe_history` (size 36) is the acting player's observation followed by the opponent's
private card, one-hot: the whole history, with the public card only once it is revealed.

`information_state_string` gives OpenSpiel's `information_state_string`, e.g.
"[Observer: 0][Private: 5][Round 2][Player: 0][Pot: 10][Money: 95 95][Public: 0]"
"[Round1: 2 2 1][Round2: ]".
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lcjax import onehot

Array = jax.Array

NUM_CARDS = 6
FOLD = 0
CALL = 1
RAISE = 2
MAX_RAISES = 2
# 3 * num_players - 2 in OpenSpiel: the longest round is call, raise, raise, call/fold.
MAX_ROUND_ACTIONS = 4
_RAISE_AMOUNTS = (2, 4)
# OpenSpiel's money per player; only visible in the information-state string.
_STARTING_MONEY = 100


class LeducState(NamedTuple):
    """State of one Leduc hold'em game. All fields are arrays; a batch adds leading axes.

    Attributes:
      current_player: int32[], the player to act. Once terminated it is left at the player
        who made the last move (as OpenSpiel's internal `cur_player_`).
      terminated: bool[], True once the game is over.
      private_cards: int32[2], each player's private card (ids 0..5, rank = id // 2).
      public_card: int32[], the public card, drawn up front; players see it only once
        `round` is 1.
      round: int32[], the betting round, 0 or 1 (OpenSpiel prints it as 1 or 2).
      history: int32[2, 4], the actions of each round in order, -1 in unused slots.
      round_lengths: int32[2], number of actions taken in each round.
      num_raises: int32[], raises so far in the current round (0..2).
      num_calls: int32[], calls/checks since the last raise of the current round.
      contributions: int32[2], chips each player has put in the pot (ante included).
      payoffs: float32[2], each player's final chips won/lost; zeros until terminated.
    """

    current_player: Array
    terminated: Array
    private_cards: Array
    public_card: Array
    round: Array
    history: Array
    round_lengths: Array
    num_raises: Array
    num_calls: Array
    contributions: Array
    payoffs: Array


def _hand_strength(private_card: Array, public_card: Array) -> Array:
    """int32: a pair beats any high card; otherwise the private rank decides."""
    rank = private_card // 2
    pair = rank == public_card // 2
    return jnp.where(pair, 10, 0) + rank


class LeducPoker:
    """Two-player Leduc hold'em implementing `lcjax.env.protocol.Game`.

    Attributes:
      num_actions: 3 (0 = fold, 1 = call, 2 = raise).
      observation_size: 30.
      history_size: 36, the size of `observe_history`.
      num_players: 2.
      return_scale: 13.0, the largest pot a player can win (1 ante + 2 + 2 + 4 + 4).
      deck_size: 6, the length of the deck `init` shuffles.
      num_alternatives: 6, the size of `hidden_alternatives`' leading axis (one per card).

    An illegal action (fold when not facing a bet, a third raise in a round, an id outside
    {0, 1, 2}) or any action on a terminated state leaves the state unchanged, so `step`
    never raises under `jit`.
    """

    num_actions: int = 3
    observation_size: int = 30
    history_size: int = 30 + NUM_CARDS
    num_players: int = 2
    return_scale: float = 13.0
    num_alternatives: int = NUM_CARDS

    # Instances hold no data, so every instance is the same game: caches keyed on games
    # (`lcjax.cfr.solver.make_solver`, the arena's compiled matches) treat them as one.
    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))
    deck_size: int = NUM_CARDS

    def init(self, key: Array) -> LeducState:
        """A new game whose cards come from a uniformly shuffled deck drawn from `key`."""
        deck = jax.random.permutation(key, NUM_CARDS).astype(jnp.int32)
        return self.init_from_deck(deck)

    def init_from_deck(self, deck: Array) -> LeducState:
        """A new game with private cards deck[0] (player 0), deck[1] (player 1), public deck[2].

        Args:
          deck: int[k], k >= 3, distinct card ids in OpenSpiel's numbering (0..5); entries
            after the first three are ignored.
        """
        deck = jnp.asarray(deck, dtype=jnp.int32)
        return LeducState(
            current_player=jnp.int32(0),
            terminated=jnp.bool_(False),
            private_cards=deck[:2],
            public_card=deck[2],
            round=jnp.int32(0),
            history=jnp.full((2, MAX_ROUND_ACTIONS), -1, dtype=jnp.int32),
            round_lengths=jnp.zeros((2,), dtype=jnp.int32),
            num_raises=jnp.int32(0),
            num_calls=jnp.int32(0),
            contributions=jnp.ones((2,), dtype=jnp.int32),
            payoffs=jnp.zeros((2,), dtype=jnp.float32),
        )

    def legal_action_mask(self, state: LeducState) -> Array:
        """bool[3]: fold only when facing a bet, call always, raise below 2 raises this round.

        All False once terminated.
        """
        p = state.current_player
        facing = onehot.take(state.contributions, 1 - p) > onehot.take(state.contributions, p)
        mask = jnp.stack([facing, jnp.bool_(True), state.num_raises < MAX_RAISES])
        return mask & ~state.terminated

    def step(self, state: LeducState, action: Array) -> LeducState:
        """The state after the current player plays `action` (int32[]).

        A terminated state, or an illegal action, returns `state` unchanged.
        """
        action = jnp.asarray(action, dtype=jnp.int32)
        mask = self.legal_action_mask(state)
        valid = (action >= 0) & (action < self.num_actions)
        valid = valid & onehot.take(mask, action)
        # Indexing at the traced player, round and slot goes through `onehot` (fast under vmap).

        p = state.current_player
        opp = 1 - p
        r = state.round
        fold = action == FOLD
        call = action == CALL
        raise_ = action == RAISE
        stakes = jnp.max(state.contributions)
        raise_amount = jnp.where(r == 0, _RAISE_AMOUNTS[0], _RAISE_AMOUNTS[1])
        own = jnp.where(raise_, stakes + raise_amount, onehot.take(state.contributions, p))
        own = jnp.where(call, stakes, own)
        contributions = onehot.put(state.contributions, p, own)

        slot = jnp.clip(onehot.take(state.round_lengths, r), 0, MAX_ROUND_ACTIONS - 1)
        history = onehot.put(state.history, (r, slot), action)
        round_lengths = onehot.add(state.round_lengths, r, 1)

        num_raises = state.num_raises + raise_.astype(jnp.int32)
        num_calls = jnp.where(raise_, 0, state.num_calls + call.astype(jnp.int32))
        # OpenSpiel's ReadyForNextRound: both checked, or the last raise was called.
        round_over = call & (
            ((num_raises == 0) & (num_calls == 2)) | ((num_raises > 0) & (num_calls == 1))
        )
        showdown = round_over & (r == 1)
        next_round = round_over & (r == 0)
        terminal = fold | showdown

        s0 = _hand_strength(state.private_cards[0], state.public_card)
        s1 = _hand_strength(state.private_cards[1], state.public_card)
        showdown_sign = jnp.sign(s0 - s1).astype(jnp.float32)
        # Contributions are equal at a showdown; on a fold the folder loses what they put in.
        showdown_won = showdown_sign * contributions[0].astype(jnp.float32) * jnp.array([1.0, -1.0])
        folded_amount = onehot.take(contributions, p).astype(jnp.float32)
        fold_won = jnp.where(onehot.mask(p, 2), -folded_amount, folded_amount)
        payoffs = jnp.where(fold, fold_won, jnp.where(showdown, showdown_won, state.payoffs))

        new = LeducState(
            current_player=jnp.where(terminal, p, jnp.where(next_round, 0, opp)).astype(jnp.int32),
            terminated=terminal,
            private_cards=state.private_cards,
            public_card=state.public_card,
            round=jnp.where(next_round, 1, r).astype(jnp.int32),
            history=history,
            round_lengths=round_lengths,
            num_raises=jnp.where(next_round, 0, num_raises).astype(jnp.int32),
            num_calls=jnp.where(next_round, 0, num_calls).astype(jnp.int32),
            contributions=contributions,
            payoffs=payoffs.astype(jnp.float32),
        )
        return jax.tree.map(lambda n, o: jnp.where(valid, n, o), new, state)

    def observe(self, state: LeducState, player: Array) -> Array:
        """float32[30]: `player`'s information state, equal to OpenSpiel's tensor."""
        player = jnp.asarray(player, dtype=jnp.int32)
        position = onehot.mask(player, 2).astype(jnp.float32)
        private = onehot.mask(onehot.take(state.private_cards, player), NUM_CARDS).astype(jnp.float32)
        public = onehot.mask(state.public_card, NUM_CARDS).astype(jnp.float32)
        public = public * (state.round == 1).astype(jnp.float32)
        betting = jnp.stack([state.history == CALL, state.history == RAISE], axis=-1)
        return jnp.concatenate([position, private, public, betting.astype(jnp.float32).reshape(-1)])

    def observe_history(self, state: LeducState) -> Array:
        """float32[36]: `observe(state, current_player)`, then the opponent's private card one-hot.

        Everything dealt and played, from the acting player's seat; the public card appears
        only once revealed (it is still undealt in round 1). Defined once terminated.
        """
        p = state.current_player
        opponent_card = onehot.mask(onehot.take(state.private_cards, 1 - p), NUM_CARDS)
        return jnp.concatenate([self.observe(state, p), opponent_card.astype(jnp.float32)])

    def hidden_alternatives(self, state: LeducState, player: Array) -> tuple[LeducState, Array]:
        """The histories `player` cannot tell from `state`: alternative k gives the opponent card k.

        Returns (states, prior): every leaf with a leading axis of 6 (k = the card id), and
        float32[6], the chance probability of each card given what `player` has seen: uniform
        over the cards other than its own and, once revealed, the public card; 0 for those
        (such an alternative is `state` unchanged). Before the reveal, the alternative that
        gives the opponent the undealt public card swaps the two, so the public card to come
        is still a uniform draw from the rest of the deck given the alternative's cards.
        Meant for states still in play: on a terminated state the alternatives keep its
        payoffs.
        """
        player = jnp.asarray(player, dtype=jnp.int32)
        opponent = 1 - player
        own = onehot.take(state.private_cards, player)
        actual = onehot.take(state.private_cards, opponent)
        cards = jnp.arange(NUM_CARDS, dtype=jnp.int32)
        revealed = state.round == 1
        possible = (cards != own) & ~(revealed & (cards == state.public_card))
        take = possible[:, None] & onehot.mask(opponent, 2)[None, :]
        private = jnp.where(take, cards[:, None], state.private_cards[None, :])
        public = jnp.where(possible & (cards == state.public_card), actual, state.public_card)
        states = jax.tree.map(lambda x: jnp.broadcast_to(x, (NUM_CARDS,) + jnp.shape(x)), state)
        prior = possible.astype(jnp.float32) / jnp.sum(possible.astype(jnp.float32))
        return states._replace(private_cards=private, public_card=public), prior

    def returns(self, state: LeducState) -> Array:
        """float32[2]: chips won by each player; zeros before the end."""
        return state.payoffs

    def all_decks(self) -> np.ndarray:
        """int32[120, 3]: every ordered (p0 card, p1 card, public card); all equally likely."""
        return np.array(list(itertools.permutations(range(NUM_CARDS), 3)), dtype=np.int32)

    def information_state_string(self, state: LeducState, player: int) -> str:
        """OpenSpiel's `information_state_string(player)` for `state` (host-side)."""
        return information_state_string(state, player)


def information_state_string(state: LeducState, player: int) -> str:
    """OpenSpiel's `information_state_string(player)` for an unbatched `state` (host-side).

    Mirrors OpenSpiel's fields: the pot is 0 and each player's money includes their winnings
    once the game is over, and "Player" is the last mover at a terminal state.
    """
    s = jax.tree.map(np.asarray, state)
    player = int(player)
    terminated = bool(s.terminated)
    contributions = s.contributions.astype(np.int64)
    if terminated:
        pot = 0
        money = [_STARTING_MONEY + float(x) for x in s.payoffs]
    else:
        pot = int(contributions.sum())
        money = [_STARTING_MONEY - int(c) for c in contributions]
    parts = [
        f"[Observer: {player}]",
        f"[Private: {int(s.private_cards[player])}]",
        f"[Round {int(s.round) + 1}]",
        f"[Player: {int(s.current_player)}]",
        f"[Pot: {pot}]",
        f"[Money: {' '.join(_format_number(m) for m in money)}]",
    ]
    if int(s.round) == 1:
        parts.append(f"[Public: {int(s.public_card)}]")
    rounds = [
        " ".join(str(int(a)) for a in s.history[r, : int(s.round_lengths[r])]) for r in range(2)
    ]
    parts.append(f"[Round1: {rounds[0]}][Round2: {rounds[1]}]")
    return "".join(parts)


def _format_number(x: float) -> str:
    """Formats like absl::StrCat does a double: integral values without a decimal point."""
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:g}"
