"""Two-player Lost Cities as pure, jittable JAX functions on fixed-shape arrays.

Cards. With K = n_wagers + n_ranks cards per color, card id = color * K + k: k < n_wagers is a
wager (an "investment" card), otherwise the number card of face value
min_rank + k - n_wagers. The deck holds N = n_colors * K cards, all distinct ids.

Turns. Player 0 starts. A turn is two decisions by the same player:
  1. play a hand card onto their own expedition of its color, or discard it onto the color's
     shared discard pile;
  2. draw the top card of the deck or of any non-empty discard pile, except the pile they
     discarded to in step 1.
The game ends after the draw that empties the deck, or after the `max_turns`-th completed
turn (a stalling cap), and is scored as it stands.

Actions (H = hand_size, C = n_colors, A = 2H + 1 + C):
  play hand slot i       -> i            (PLAY_0 + i)
  discard hand slot i    -> H + i
  draw from the deck     -> 2H
  draw from pile c       -> 2H + 1 + c
The hand is kept sorted by card id, so slot i is the i-th card in canonical order. Equal
wagers are the same move: a play or discard of slot i is illegal when slot i-1 holds a wager
of the same color, which removes duplicate branches from every search.

Illegal actions. `step` cannot raise under jit; an illegal action (including any action on
a terminated state) returns the state unchanged. Use `check_action` on the host to get a
`ValueError` instead.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

PHASE_PLAY = 0  # play or discard a hand card
PHASE_DRAW = 1  # draw from the deck or a discard pile
NO_PILE = -1  # `blocked_pile` when no pile is blocked


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


class State(NamedTuple):
    """A Lost Cities position. N = deck size, H = hand size.

    Attributes:
      deck: int8[N], the shuffled deck; deck[0] is the top card. Cards below `deck_pos`
        have been dealt or drawn.
      deck_pos: int32, index of the next card to draw (2H right after the deal).
      hands: int8[2, H], each player's hand sorted by card id; the value N marks an empty
        slot (the last slot is empty between a player's play/discard and their draw).
      expeditions: bool[2, N], expeditions[p, card] is True when `card` lies in p's expedition.
      pile_pos: int8[N], 0 when the card is not on a discard pile, else its 1-based height in
        its color's pile (the top card has the largest height of its color).
      known: bool[2, N], known[p, card]: p took `card` from a discard pile and still holds it,
        so the opponent knows it is in p's hand.
      current_player: int32, the player to act.
      phase: int32, PHASE_PLAY or PHASE_DRAW.
      blocked_pile: int32, the color discarded to in this turn (may not be drawn), or NO_PILE.
      turn: int32, number of completed turns.
      terminated: bool, True once the game is over.
    """

    deck: Array
    deck_pos: Array
    hands: Array
    expeditions: Array
    pile_pos: Array
    known: Array
    current_player: Array
    phase: Array
    blocked_pile: Array
    turn: Array
    terminated: Array


class LostCities:
    """The game: pure functions of a `State`. All methods jit and vmap.

    Args:
      rules: the game parameters.
    """

    num_players = 2

    def __init__(self, rules: Rules = Rules()):
        if not isinstance(rules, Rules):
            raise TypeError(f"rules must be a Rules instance, got {type(rules).__name__}")
        self.rules = rules
        r = rules
        self._n = r.deck_size
        self._k = r.cards_per_color
        self._h = r.hand_size
        card = np.arange(self._n)
        # Per-card constants, indexed by card id. The extra entry at index N describes the
        # empty-slot sentinel so that lookups of hand slots need no special case.
        kk = np.append(card % self._k, self._k)
        value = np.where(kk >= r.n_wagers, r.min_rank + kk - r.n_wagers, 0)
        # Host copies for rendering and names; device copies for jitted code.
        self._np_color = np.append(card // self._k, r.n_colors).astype(np.int32)
        self._np_is_wager = np.append(card % self._k < r.n_wagers, False)
        self._np_value = value.astype(np.int32)
        self._value_table = jnp.asarray(self._np_value[: self._n].reshape(r.n_colors, self._k))
        self._max_value = r.min_rank + r.n_ranks - 1

    # A game is its rules: equal rules make equal games, so caches keyed on games
    # (`lcjax.cfr.solver.make_solver`, the arena's compiled matches) share their entries.
    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.rules == self.rules

    def __hash__(self) -> int:
        return hash((type(self), self.rules))

    # ------------------------------------------------------------------ sizes
    @property
    def num_actions(self) -> int:
        return self.rules.num_actions

    @property
    def observation_size(self) -> int:
        n, h, c = self._n, self._h, self.rules.n_colors
        # 7 card planes, per-slot card features, scalars (see `observe`).
        return 7 * n + h * (c + 3) + 2 * c + c + 4

    # ------------------------------------------------------------------ init
    def init(self, key: Array) -> State:
        """A new game with a uniformly shuffled deck drawn from `key`."""
        deck = jax.random.permutation(key, self._n)
        return self.init_from_deck(deck)

    def init_from_deck(self, deck: Array) -> State:
        """A new game dealt from `deck` (int[N], a permutation of card ids, top card first).

        Cards are dealt alternately one at a time, player 0 first; later draws take the next
        card from the top.
        """
        n, h = self._n, self._h
        deck = jnp.asarray(deck).astype(jnp.int8)
        dealt = deck[: 2 * h].reshape(h, 2).T  # [2, H]: row p holds deck[p], deck[p+2], ...
        hands = jnp.sort(dealt, axis=1)
        return State(
            deck=deck,
            deck_pos=jnp.int32(2 * h),
            hands=hands,
            expeditions=jnp.zeros((2, n), jnp.bool_),
            pile_pos=jnp.zeros((n,), jnp.int8),
            known=jnp.zeros((2, n), jnp.bool_),
            current_player=jnp.int32(0),
            phase=jnp.int32(PHASE_PLAY),
            blocked_pile=jnp.int32(NO_PILE),
            turn=jnp.int32(0),
            terminated=jnp.bool_(False),
        )

    # ------------------------------------------------------------------ helpers
    # Under vmap, a gather with a per-game index compiles to a slow generic gather loop on
    # CPU; selecting with a one-hot comparison fuses into the surrounding elementwise code.
    # The helpers below therefore never index arrays with traced values.

    def _card_attributes(self, cards: Array):
        """(color, k) int32 arrays for card ids; the empty-slot sentinel N has color C."""
        cards = jnp.asarray(cards).astype(jnp.int32)
        return cards // self._k, cards % self._k

    def _expedition_top(self, expedition: Array) -> Array:
        """int32[C]: highest k in each color of one player's expedition, -1 if empty."""
        k = jnp.arange(self._k, dtype=jnp.int32)
        return jnp.max(jnp.where(expedition.reshape(-1, self._k), k, -1), axis=1)

    def _pile_heights(self, pile_pos: Array) -> Array:
        """int32[C]: number of cards on each color's discard pile."""
        return jnp.max(pile_pos.reshape(-1, self._k).astype(jnp.int32), axis=1)

    def _per_color(self, values: Array, color: Array) -> Array:
        """values[color] for int32[C] `values` and any-shaped `color` (0 when out of range)."""
        onehot = color[..., None] == jnp.arange(self.rules.n_colors)
        return jnp.sum(jnp.where(onehot, values, 0), axis=-1)

    def _hand_slot_masks(self, hand: Array, expedition: Array):
        """(playable bool[H], occupied-and-distinct bool[H]) for one sorted hand."""
        w = self.rules.n_wagers
        hand = hand.astype(jnp.int32)
        color, k = self._card_attributes(hand)
        occupied = hand < self._n
        is_wager = occupied & (k < w)
        prev_color = jnp.concatenate([jnp.full((1,), -1, jnp.int32), color[:-1]])
        # Sorted hand: equal wagers of one color are adjacent, so only the first is a move.
        distinct = occupied & ~(is_wager & (prev_color == color))
        top = self._per_color(self._expedition_top(expedition), color)
        playable = distinct & jnp.where(is_wager, top < w, k > top)
        return playable, distinct

    @staticmethod
    def _player_row(rows: Array, player: Array) -> Array:
        """rows[player] for a [2, ...] array, as a select rather than a gather."""
        return jnp.where(player == 0, rows[0], rows[1])

    # ------------------------------------------------------------------ rules
    def legal_action_mask(self, state: State) -> Array:
        """bool[A]: legal actions of the current player; all False once terminated."""
        p = state.current_player
        playable, distinct = self._hand_slot_masks(
            self._player_row(state.hands, p), self._player_row(state.expeditions, p)
        )
        heights = self._pile_heights(state.pile_pos)
        colors = jnp.arange(self.rules.n_colors)
        pile_ok = (heights > 0) & (colors != state.blocked_pile)
        is_play = (state.phase == PHASE_PLAY) & ~state.terminated
        is_draw = (state.phase == PHASE_DRAW) & ~state.terminated
        return jnp.concatenate(
            [playable & is_play, distinct & is_play, jnp.reshape(is_draw, (1,)), pile_ok & is_draw]
        )

    def step(self, state: State, action: Array) -> State:
        """The state after `action`. Illegal actions and terminated states: unchanged."""
        n, h, k = self._n, self._h, self._k
        action = jnp.asarray(action, jnp.int32)
        mask = self.legal_action_mask(state)
        legal = jnp.any(mask & (jnp.arange(self.num_actions) == action))
        p = state.current_player
        hand = self._player_row(state.hands, p).astype(jnp.int32)
        cards = jnp.arange(n, dtype=jnp.int32)
        slots = jnp.arange(h)
        heights = self._pile_heights(state.pile_pos)
        card_color = cards // k

        # Decision 1: play or discard `slot`.
        is_play = legal & (action < h)
        is_discard = legal & (action >= h) & (action < 2 * h)
        slot = jnp.where(action < h, action, action - h)
        out_card = jnp.sum(jnp.where(slots == slot, hand, 0))
        out_card = jnp.where(is_play | is_discard, out_card, n)
        out_color = out_card // k
        hand_removed = jnp.where(slots < slot, hand, jnp.append(hand[1:], n))
        out_onehot = cards == out_card
        new_height = self._per_color(heights, out_color) + 1

        # Decision 2: draw from the deck or from pile `pile`.
        from_deck = legal & (action == 2 * h)
        from_pile = legal & (action > 2 * h)
        pile = action - (2 * h + 1)
        pile_top = (
            from_pile
            & (card_color == pile)
            & (state.pile_pos.astype(jnp.int32) == self._per_color(heights, pile))
            & (state.pile_pos > 0)
        )
        deck_card = jnp.sum(jnp.where(cards == state.deck_pos, state.deck.astype(jnp.int32), 0))
        pile_card = jnp.sum(jnp.where(pile_top, cards, 0))
        in_card = jnp.where(from_deck, deck_card, jnp.where(from_pile, pile_card, n))
        # Insert into the sorted hand, whose last slot is empty during the draw phase.
        prev = jnp.concatenate([jnp.full((1,), -1, jnp.int32), hand[:-1]])
        hand_inserted = jnp.where(hand < in_card, hand, jnp.where(prev < in_card, in_card, prev))

        is_draw = from_deck | from_pile
        is_out = is_play | is_discard
        new_hand = jnp.where(is_draw, hand_inserted, jnp.where(is_out, hand_removed, hand))
        mine = jnp.arange(2)[:, None] == p
        hands = jnp.where(mine, new_hand.astype(jnp.int8)[None], state.hands)

        expeditions = state.expeditions | (mine & out_onehot & is_play)
        pile_pos = jnp.where(out_onehot & is_discard, new_height.astype(jnp.int8), state.pile_pos)
        pile_pos = jnp.where(pile_top, jnp.int8(0), pile_pos)
        known = (state.known & ~(mine & out_onehot)) | (mine & pile_top)

        deck_pos = state.deck_pos + from_deck.astype(jnp.int32)
        turn = state.turn + is_draw.astype(jnp.int32)
        ends = is_draw & ((deck_pos >= n) | (turn >= self.rules.max_turns))
        phase = jnp.where(is_draw, PHASE_PLAY, jnp.where(is_out, PHASE_DRAW, state.phase))
        blocked = jnp.where(is_discard, out_color, jnp.where(is_draw | is_play, NO_PILE, state.blocked_pile))
        return State(
            deck=state.deck,
            deck_pos=deck_pos,
            hands=hands,
            expeditions=expeditions,
            pile_pos=pile_pos,
            known=known,
            current_player=jnp.where(is_draw, 1 - p, p).astype(jnp.int32),
            phase=phase.astype(jnp.int32),
            blocked_pile=blocked.astype(jnp.int32),
            turn=turn,
            terminated=state.terminated | ends,
        )

    # ------------------------------------------------------------------ scoring
    def expedition_scores(self, state: State) -> Array:
        """int32[2, C]: each expedition's score as it stands."""
        r = self.rules
        count, wagers, total = self.expedition_stats(state)
        score = (total - r.expedition_cost) * (1 + wagers) + jnp.where(count >= r.bonus_threshold, r.bonus, 0)
        return jnp.where(count > 0, score, 0).astype(jnp.int32)

    def scores(self, state: State) -> Array:
        """int32[2]: each player's total score as it stands."""
        return self.expedition_scores(state).sum(-1)

    def returns(self, state: State) -> Array:
        """float32[2]: score differences (own minus opponent's), zero-sum and unscaled.

        Final once `state.terminated`; before that, the difference as the game stands.
        """
        s = self.scores(state).astype(jnp.float32)
        return jnp.stack([s[0] - s[1], s[1] - s[0]])

    # ------------------------------------------------------------------ queries
    # Read-only views for policies (bots), rendering and tests, so they need not know how
    # `State` stores things. All jit and vmap.

    def card_color(self, cards: Array) -> Array:
        """int32 like `cards`: each card's color (C for the empty-slot sentinel N)."""
        return self._card_attributes(cards)[0]

    def card_is_wager(self, cards: Array) -> Array:
        """bool like `cards`: True for wager cards (False for the sentinel)."""
        cards = jnp.asarray(cards, jnp.int32)
        return (cards < self._n) & (cards % self._k < self.rules.n_wagers)

    def card_face(self, cards: Array) -> Array:
        """int32 like `cards`: face value of number cards, 0 for wagers and the sentinel."""
        cards = jnp.asarray(cards, jnp.int32)
        k = cards % self._k
        number = (cards < self._n) & (k >= self.rules.n_wagers)
        return jnp.where(number, self.rules.min_rank + k - self.rules.n_wagers, 0)

    def hand(self, state: State, player: Array) -> Array:
        """int32[H]: `player`'s hand, sorted by card id; N marks an empty slot."""
        return self._player_row(state.hands, jnp.asarray(player, jnp.int32)).astype(jnp.int32)

    def expedition_tops(self, state: State) -> Array:
        """int32[2, C]: highest card index k (0..K-1) in each expedition, -1 if empty."""
        return jax.vmap(self._expedition_top)(state.expeditions)

    def expedition_stats(self, state: State):
        """(cards, wagers, face_sum), each int32[2, C], for every expedition."""
        r = self.rules
        exp = state.expeditions.reshape(2, r.n_colors, self._k).astype(jnp.int32)
        return exp.sum(-1), exp[..., : r.n_wagers].sum(-1), (exp * self._value_table).sum(-1)

    def expedition_cards(self, state: State) -> Array:
        """bool[2, N]: [p, card] is True when `card` lies in p's expedition."""
        return state.expeditions

    def known_cards(self, state: State) -> Array:
        """bool[2, N]: [p, card] is True when p holds `card` and the opponent knows it
        (p took it from a discard pile and has not played or discarded it since)."""
        return state.known

    def pile_heights(self, state: State) -> Array:
        """int32[C]: number of cards on each color's discard pile."""
        return self._pile_heights(state.pile_pos)

    def pile_tops(self, state: State) -> Array:
        """int32[C]: the top card id of each discard pile, N when the pile is empty."""
        heights = self._pile_heights(state.pile_pos)
        pos = state.pile_pos.reshape(-1, self._k).astype(jnp.int32)
        is_top = (pos == heights[:, None]) & (pos > 0)
        ids = jnp.arange(self._n, dtype=jnp.int32).reshape(-1, self._k)
        return jnp.where(heights > 0, jnp.sum(jnp.where(is_top, ids, 0), axis=1), self._n)

    def pile_cards(self, state: State) -> Array:
        """int32[C, K]: each pile's cards from bottom to top, padded with N."""
        pos = state.pile_pos.reshape(-1, self._k).astype(jnp.int32)
        ids = jnp.arange(self._n, dtype=jnp.int32).reshape(-1, self._k)
        height = jnp.arange(1, self._k + 1)
        match = pos[:, None, :] == height[None, :, None]  # [C, height, k]
        return jnp.where(match.any(-1), jnp.sum(jnp.where(match, ids[:, None, :], 0), -1), self._n)

    def cards_left(self, state: State) -> Array:
        """int32: cards still in the deck."""
        return self._n - state.deck_pos

    # ------------------------------------------------------------------ observation
    def observe(self, state: State, player: Array) -> Array:
        """float32[D]: `player`'s information state, D = `observation_size`.

        Layout (N cards, H slots, C colors), all public information plus the observer's hand:
          [0N, 1N)  own hand, one-hot by card id
          [1N, 2N)  own expedition
          [2N, 3N)  opponent's expedition
          [3N, 4N)  discard piles: height / cards_per_color (0 = not on a pile); gives order
          [4N, 5N)  discard piles: 1 for the top card of each pile
          [5N, 6N)  cards the opponent is known to hold (taken from a pile, not yet played)
          [6N, 7N)  own cards the opponent knows of
          then H * (C + 3) per-slot features: color one-hot, is-wager, face value / max face
                    value, playable now on own expedition
          then 2C   expedition scores as they stand / 100 (own colors, then opponent's)
          then C    blocked pile one-hot
          then 4    deck cards left / N, phase, observer to act, turns / max_turns
        """
        r, n = self.rules, self._n
        player = jnp.asarray(player, jnp.int32)
        opp = 1 - player
        hand = self._player_row(state.hands, player).astype(jnp.int32)
        own_expedition = self._player_row(state.expeditions, player)
        opp_expedition = self._player_row(state.expeditions, opp)
        hand_plane = jnp.any(hand[:, None] == jnp.arange(n)[None, :], axis=0)
        heights = self._pile_heights(state.pile_pos)
        pile_top = (state.pile_pos > 0) & (
            state.pile_pos.reshape(-1, self._k).astype(jnp.int32) == heights[:, None]
        ).reshape(-1)
        playable, _ = self._hand_slot_masks(hand, own_expedition)
        color, k = self._card_attributes(hand)
        occupied = hand < n
        is_wager = occupied & (k < r.n_wagers)
        slot_color = (color[:, None] == jnp.arange(r.n_colors)[None, :]).astype(jnp.float32)
        slot_wager = is_wager.astype(jnp.float32)
        face = jnp.where(occupied & ~is_wager, r.min_rank + k - r.n_wagers, 0)
        slot_value = face.astype(jnp.float32) / self._max_value
        slot_features = jnp.concatenate(
            [slot_color, slot_wager[:, None], slot_value[:, None], playable[:, None].astype(jnp.float32)], axis=1
        ).reshape(-1)
        exp_scores = self.expedition_scores(state).astype(jnp.float32) / 100.0
        exp_scores = jnp.concatenate([self._player_row(exp_scores, player), self._player_row(exp_scores, opp)])
        blocked = (jnp.arange(r.n_colors) == state.blocked_pile).astype(jnp.float32)
        scalars = jnp.stack(
            [
                (n - state.deck_pos).astype(jnp.float32) / n,
                state.phase.astype(jnp.float32),
                (state.current_player == player).astype(jnp.float32),
                state.turn.astype(jnp.float32) / r.max_turns,
            ]
        )
        planes = [
            hand_plane,
            own_expedition,
            opp_expedition,
            state.pile_pos.astype(jnp.float32) / self._k,
            pile_top,
            self._player_row(state.known, opp),
            self._player_row(state.known, player),
        ]
        planes = [x.astype(jnp.float32) for x in planes]
        return jnp.concatenate(planes + [slot_features, exp_scores, blocked, scalars])

    # ------------------------------------------------------------------ host-side
    def check_action(self, state: State, action: int) -> None:
        """Raise ValueError (listing the legal actions) if `action` is illegal in `state`.

        Host-side only: `state` must be a single, concrete (non-traced) state.
        """
        mask = np.asarray(self.legal_action_mask(state))
        if mask.ndim != 1:
            raise ValueError("check_action takes a single state, not a batch")
        legal = [int(a) for a in np.flatnonzero(mask)]
        a = int(action)
        if not 0 <= a < self.num_actions or not mask[a]:
            if bool(state.terminated):
                raise ValueError(f"action {a} is illegal: the game is over")
            names = ", ".join(f"{i} ({self.action_name(i)})" for i in legal)
            raise ValueError(f"action {a} is illegal here; legal actions: {names}")

    def card_name(self, card: int) -> str:
        """A short name for a card id, e.g. 'R7' or 'Rw' (wager); '--' for an empty slot."""
        card = int(card)
        if card >= self._n or card < 0:
            return "--"
        letter = COLOR_LETTERS[self._np_color[card]]
        if self._np_is_wager[card]:
            return f"{letter}w"
        return f"{letter}{self._np_value[card]}"

    def action_name(self, action: int, state: State | None = None) -> str:
        """A readable name for `action`, naming the card when `state` is given."""
        h = self._h
        a = int(action)
        if a < 2 * h:
            verb = "play" if a < h else "discard"
            slot = a % h
            if state is not None:
                card = int(np.asarray(state.hands)[int(state.current_player), slot])
                return f"{verb} {self.card_name(card)}"
            return f"{verb} slot {slot}"
        if a == 2 * h:
            return "draw deck"
        return f"draw pile {COLOR_NAMES[a - 2 * h - 1]}"


COLOR_NAMES = ("red", "green", "white", "blue", "yellow", "purple")
COLOR_LETTERS = ("R", "G", "W", "B", "Y", "P")


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
