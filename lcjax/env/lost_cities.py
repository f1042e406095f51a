"""Two-player Lost Cities as pure, jittable JAX functions on fixed-shape arrays.

Cards, action ids and `Rules` are defined in `lcjax.env.lost_cities_rules` (re-exported
here): card id = color * K + k (k < n_wagers: a wager), actions play slot i = i, discard
slot i = H + i, draw deck = 2H, draw pile c = 2H + 1 + c.

Turns. Player 0 starts. A turn is two decisions by the same player:
  1. play a hand card onto their own expedition of its color, or discard it onto the color's
     shared discard pile;
  2. draw the top card of the deck or of any non-empty discard pile, except the pile they
     discarded to in step 1.
The game ends after the draw that empties the deck, or after the `max_turns`-th completed
turn (a stalling cap), and is scored as it stands.

The hand is kept sorted by card id, so slot i is the i-th card in canonical order. Equal
wagers are the same move: a play or discard of slot i is illegal when slot i-1 holds a wager
of the same color, which removes duplicate branches from every search.

Illegal actions. `step` cannot raise under jit; an illegal action (including any action on
a terminated state) returns the state unchanged. Use `check_action` on the host to get a
`ValueError` instead.

Indexing. Under vmap a gather or scatter at a per-game index runs as a slow loop on CPU, so
every read or write at a traced position goes through the one-hot selects of `lcjax.onehot`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lcjax import onehot
from lcjax.env.lost_cities_features import FEATURES_PER_COLOR, color_features, slot_features
from lcjax.env.lost_cities_rules import (  # noqa: F401  (re-exported: the game's public names)
    COLOR_LETTERS,
    COLOR_NAMES,
    Rules,
    action_name,
    card_color,
    card_face,
    card_index,
    card_is_wager,
    card_name,
    discard_action,
    draw_deck_action,
    draw_pile_action,
    face_table,
    play_action,
)

Array = jax.Array

PHASE_PLAY = 0  # play or discard a hand card
PHASE_DRAW = 1  # draw from the deck or a discard pile
NO_PILE = -1  # `blocked_pile` when no pile is blocked


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
    # Typical size of `returns`, to scale value and regret targets to O(1). Measured over
    # 1,000 games of the classic rules: the score difference has std 23 between two
    # safe_heuristic bots, 31 between two random ones, 37 safe_heuristic vs random (mean 123).
    return_scale = 50.0

    def __init__(self, rules: Rules = Rules()):
        if not isinstance(rules, Rules):
            raise TypeError(f"rules must be a Rules instance, got {type(rules).__name__}")
        self.rules = rules
        self._n = rules.deck_size
        self._k = rules.cards_per_color
        self._h = rules.hand_size
        self._face_table = jnp.asarray(face_table(rules))  # int32[C, K]

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
    def deck_size(self) -> int:
        return self._n

    @property
    def observation_size(self) -> int:
        n, h, c = self._n, self._h, self.rules.n_colors
        # 7 card planes, per-slot card features, scalars, per-color features (see `observe`).
        return 7 * n + h * (c + 3) + 2 * c + c + 4 + FEATURES_PER_COLOR * c

    @property
    def history_size(self) -> int:
        # The observation, then the opponent's hand: card plane, per-slot and per-color features.
        return self.observation_size + self._n + self._h * (self.rules.n_colors + 3) + FEATURES_PER_COLOR * self.rules.n_colors

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
    def _expedition_top(self, expedition: Array) -> Array:
        """int32[C]: highest k in each color of one player's expedition (bool[N]), -1 if empty."""
        k = jnp.arange(self._k, dtype=jnp.int32)
        return jnp.max(jnp.where(expedition.reshape(-1, self._k), k, -1), axis=1)

    def _laid_out(self, state: State) -> Array:
        """bool[N]: cards on an expedition or a discard pile (seen by both players)."""
        return state.expeditions[0] | state.expeditions[1] | (state.pile_pos > 0)

    def _pile_heights(self, pile_pos: Array) -> Array:
        """int32[C]: number of cards on each color's discard pile."""
        return jnp.max(pile_pos.reshape(-1, self._k).astype(jnp.int32), axis=1)

    def _pile_top_cards(self, pile_pos: Array, heights: Array) -> Array:
        """bool[N]: True for the top card of each non-empty discard pile."""
        pos = pile_pos.reshape(-1, self._k).astype(jnp.int32)
        return (pile_pos > 0) & (pos == heights[:, None]).reshape(-1)

    def _hand_slot_masks(self, hand: Array, expedition: Array):
        """(playable bool[H], occupied-and-distinct bool[H]) for one sorted hand."""
        w = self.rules.n_wagers
        hand = hand.astype(jnp.int32)
        color, k = card_color(self.rules, hand), card_index(self.rules, hand)
        occupied = hand < self._n
        is_wager = occupied & (k < w)
        prev_color = jnp.concatenate([jnp.full((1,), -1, jnp.int32), color[:-1]])
        # Sorted hand: equal wagers of one color are adjacent, so only the first is a move.
        distinct = occupied & ~(is_wager & (prev_color == color))
        top = onehot.lookup(self._expedition_top(expedition), color)
        playable = distinct & jnp.where(is_wager, top < w, k > top)
        return playable, distinct

    # ------------------------------------------------------------------ rules
    def legal_action_mask(self, state: State) -> Array:
        """bool[A]: legal actions of the current player; all False once terminated."""
        p = state.current_player
        playable, distinct = self._hand_slot_masks(onehot.take(state.hands, p), onehot.take(state.expeditions, p))
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
        n, h = self._n, self._h
        action = jnp.asarray(action, jnp.int32)
        legal = onehot.take(self.legal_action_mask(state), action)
        p = state.current_player
        hand = onehot.take(state.hands, p).astype(jnp.int32)
        cards = jnp.arange(n, dtype=jnp.int32)
        heights = self._pile_heights(state.pile_pos)

        # Decision 1: play or discard `slot`.
        is_play = legal & (action < h)
        is_discard = legal & (action >= h) & (action < 2 * h)
        slot = jnp.where(action < h, action, action - h)
        out_card = jnp.where(is_play | is_discard, onehot.take(hand, slot), n)
        out_color = card_color(self.rules, out_card)
        hand_removed = jnp.where(jnp.arange(h) < slot, hand, jnp.append(hand[1:], n))
        out_onehot = cards == out_card
        new_height = onehot.lookup(heights, out_color) + 1

        # Decision 2: draw from the deck or from pile `pile`.
        from_deck = legal & (action == 2 * h)
        from_pile = legal & (action > 2 * h)
        pile = action - (2 * h + 1)
        pile_top = from_pile & (card_color(self.rules, cards) == pile) & self._pile_top_cards(state.pile_pos, heights)
        deck_card = onehot.take(state.deck.astype(jnp.int32), state.deck_pos)
        pile_card = jnp.sum(jnp.where(pile_top, cards, 0))
        in_card = jnp.where(from_deck, deck_card, jnp.where(from_pile, pile_card, n))
        # Insert into the sorted hand, whose last slot is empty during the draw phase.
        prev = jnp.concatenate([jnp.full((1,), -1, jnp.int32), hand[:-1]])
        hand_inserted = jnp.where(hand < in_card, hand, jnp.where(prev < in_card, in_card, prev))

        is_draw = from_deck | from_pile
        is_out = is_play | is_discard
        new_hand = jnp.where(is_draw, hand_inserted, jnp.where(is_out, hand_removed, hand))
        mine = onehot.mask(p, 2)[:, None]  # bool[2, 1]: the acting player's rows

        deck_pos = state.deck_pos + from_deck.astype(jnp.int32)
        turn = state.turn + is_draw.astype(jnp.int32)
        ends = is_draw & ((deck_pos >= n) | (turn >= self.rules.max_turns))
        pile_pos = jnp.where(out_onehot & is_discard, new_height.astype(jnp.int8), state.pile_pos)
        phase = jnp.where(is_draw, PHASE_PLAY, jnp.where(is_out, PHASE_DRAW, state.phase))
        blocked = jnp.where(is_discard, out_color, jnp.where(is_draw | is_play, NO_PILE, state.blocked_pile))
        return State(
            deck=state.deck,
            deck_pos=deck_pos,
            hands=onehot.put(state.hands, p, new_hand),
            expeditions=state.expeditions | (mine & out_onehot & is_play),
            pile_pos=jnp.where(pile_top, jnp.int8(0), pile_pos),
            known=(state.known & ~(mine & out_onehot)) | (mine & pile_top),
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
        return card_color(self.rules, cards)

    def card_is_wager(self, cards: Array) -> Array:
        """bool like `cards`: True for wager cards (False for the sentinel)."""
        return card_is_wager(self.rules, cards)

    def card_face(self, cards: Array) -> Array:
        """int32 like `cards`: face value of number cards, 0 for wagers and the sentinel."""
        return card_face(self.rules, cards)

    def hand(self, state: State, player: Array) -> Array:
        """int32[H]: `player`'s hand, sorted by card id; N marks an empty slot."""
        return onehot.take(state.hands, jnp.asarray(player, jnp.int32)).astype(jnp.int32)

    def expedition_tops(self, state: State) -> Array:
        """int32[2, C]: highest card index k (0..K-1) in each expedition, -1 if empty."""
        return jax.vmap(self._expedition_top)(state.expeditions)

    def expedition_stats(self, state: State):
        """(cards, wagers, face_sum), each int32[2, C], for every expedition."""
        r = self.rules
        exp = state.expeditions.reshape(2, r.n_colors, self._k).astype(jnp.int32)
        return exp.sum(-1), exp[..., : r.n_wagers].sum(-1), (exp * self._face_table).sum(-1)

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
        is_top = self._pile_top_cards(state.pile_pos, heights).reshape(-1, self._k)
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
          then 4C   per color: playable hand sum, playable hand cards, unseen sum above the
                    own top card, projected score (`lost_cities_features.color_features`)
        """
        r, n = self.rules, self._n
        player = jnp.asarray(player, jnp.int32)
        opp = 1 - player
        hand = self.hand(state, player)
        own_expedition = onehot.take(state.expeditions, player)
        held = onehot.mask(hand, n).any(axis=0)
        planes = [
            held,
            own_expedition,
            onehot.take(state.expeditions, opp),
            state.pile_pos.astype(jnp.float32) / self._k,
            self._pile_top_cards(state.pile_pos, self._pile_heights(state.pile_pos)),
            onehot.take(state.known, opp),
            onehot.take(state.known, player),
        ]
        planes = [x.astype(jnp.float32) for x in planes]
        exp_scores = self.expedition_scores(state).astype(jnp.float32) / 100.0
        exp_scores = jnp.concatenate([onehot.take(exp_scores, player), onehot.take(exp_scores, opp)])
        blocked = onehot.mask(state.blocked_pile, r.n_colors).astype(jnp.float32)
        scalars = jnp.stack(
            [
                (n - state.deck_pos).astype(jnp.float32) / n,
                state.phase.astype(jnp.float32),
                (state.current_player == player).astype(jnp.float32),
                state.turn.astype(jnp.float32) / r.max_turns,
            ]
        )
        slots = slot_features(r, hand, self._hand_slot_masks(hand, own_expedition)[0])
        colors = color_features(r, self._face_table, held, own_expedition, ~(held | self._laid_out(state)))
        return jnp.concatenate(planes + [slots, exp_scores, blocked, scalars, colors])

    def observe_history(self, state: State) -> Array:
        """float32[history_size]: `observe(state, current_player)`, then the opponent's hand
        encoded like the own one (card plane [N], per-slot features [H * (C + 3)], per-color
        features [4C], judged on the opponent's expedition; unseen = the undealt cards).
        Hides only the order of the undealt deck."""
        p = state.current_player
        hand = self.hand(state, 1 - p)
        plane = onehot.mask(hand, self._n).any(axis=0)
        expedition = onehot.take(state.expeditions, 1 - p)
        slots = slot_features(self.rules, hand, self._hand_slot_masks(hand, expedition)[0])
        in_hands = onehot.mask(state.hands.reshape(-1), self._n).any(axis=0)
        colors = color_features(self.rules, self._face_table, plane, expedition, ~(in_hands | self._laid_out(state)))
        return jnp.concatenate([self.observe(state, p), plane.astype(jnp.float32), slots, colors])

    # ------------------------------------------------------------------ chance
    def chance_actions(self, state: State) -> Array:
        """bool[A]: the actions whose child reveals a chance outcome. Drawing from the deck
        in the draw phase (the card drawn is the undealt deck's top); every other action's
        child follows from the history alone."""
        deck_draw = jnp.arange(self.num_actions) == draw_deck_action(self.rules)
        return deck_draw & (state.phase == PHASE_DRAW) & ~state.terminated

    def resample_chance(self, state: State, key: Array) -> State:
        """`state` with the next card of the deck drawn again: the top undealt card swapped
        with a uniformly random undealt position (itself included).

        The deck was a uniform shuffle and the history shows only the cards dealt from it,
        so given the history the next card is uniform over the undealt ones, and after the
        swap it is again, whichever card was on top. Only the deck draw reveals a chance
        outcome, and it reveals the top card, so that is all a redrawn child needs; the
        rest of the undealt order is left as it was. `observe_history` and `observe` of
        the result equal the state's.
        """
        n = self._n
        position = jnp.arange(n)
        undealt = jnp.maximum(n - state.deck_pos, 1)
        j = state.deck_pos + jnp.minimum((jax.random.uniform(key) * undealt).astype(jnp.int32), undealt - 1)
        deck = state.deck.astype(jnp.int32)
        # One-hot selects, not gathers: they stay vectorized under vmap on CPU.
        at_top = jnp.sum(jnp.where(position == state.deck_pos, deck, 0))
        at_j = jnp.sum(jnp.where(position == j, deck, 0))
        # An empty deck (deck_pos = n) has j = n too: no position matches, nothing changes.
        deck = jnp.where(position == state.deck_pos, at_j, jnp.where(position == j, at_top, deck))
        return state._replace(deck=deck.astype(state.deck.dtype))

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
        return card_name(self.rules, card)

    def action_name(self, action: int, state: State | None = None) -> str:
        """A readable name for `action`, naming the card when `state` is given."""
        card = None
        if state is not None and int(action) < 2 * self._h:
            card = int(np.asarray(state.hands)[int(state.current_player), int(action) % self._h])
        return action_name(self.rules, action, card)
