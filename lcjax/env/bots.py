"""Scripted opponents for Lost Cities: jittable, vmappable, branch-free policies.

A policy is `act(key, state) -> int32[]`, the action for ONE state (callers `jax.vmap` it
over games and keys). Every policy returns a legal action whenever one is legal; on a
terminated state (no legal action) it returns some action id, which `step` ignores.

Policies read the state only through the public queries of `LostCities` plus
`state.current_player` and `state.phase` (the blocked pile enters via the legal mask), so
they survive changes of the storage layout.

Bots (see `BOT_NAMES`, `make_bot`):
  random                 uniform over the legal actions.
  passive_discard        always discards its first legal slot and draws from the deck; never
                         opens an expedition, so it scores 0 in every game.
  safe_heuristic[_loose|_strict]
                         a cautious rule-based player (`SafeParams`): opens a color only when
                         held plus played points (and a shrinking credit for future draws)
                         clear the expedition cost, plays low cards in order, wagers early on
                         strong colors only, discards what helps neither side, draws from a
                         pile only for a card it can play at once. Loose/default/strict
                         differ in how readily they open colors and wager.
  noisy_safe             the default safe heuristic, replaced with probability `epsilon` by a
                         uniform random legal action.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from lcjax import onehot
from lcjax.env.lost_cities import PHASE_PLAY, LostCities, State

Array = jax.Array
Policy = Callable[[Array, State], Array]

# Score bands of the safe heuristic, in rough "points". Plays that the rules of the heuristic
# forbid get _FORBIDDEN (still above illegal moves, so argmax stays legal); illegal moves get
# _ILLEGAL. Finite values keep argmax well defined when every entry is masked.
_ILLEGAL = -1e9
_FORBIDDEN = -1e6
_WAGER_BASE = 12.0  # wager on a strong color: before its first number card
_PLAY_BASE = 10.0  # next card on an open expedition
_OPEN_BASE = 8.0  # first number card of a new color
_DISCARD_OFFSET = 1.0  # a free discard (dead card) ranks below any ungapped play
_GIFT_BASE = 100.0  # discarding a card the opponent's open expedition can use: last resort
_BURN_WEIGHT = 2.0  # per face point of own lower cards that a play would make unplayable
_WAGER_KEEP_VALUE = 5.0  # worth of holding a still-playable wager on a promising color


@dataclasses.dataclass(frozen=True)
class SafeParams:
    """Parameters of the safe heuristic (face-value points unless said otherwise).

    Attributes:
      open_margin: open a color when its potential >= expedition_cost + open_margin, where
        potential = face sum already played + playable number cards in hand + a credit for
        future draws, draw_credit * (cards left) / (cards left after the deal).
      draw_credit: points expected from future draws into a color, with a full deck.
      min_deck_to_open: open no new color once fewer cards than this remain in the deck.
      wager_margin: play a wager only on a color whose potential clears the opening bar by
        this much (>= 0: a wager goes only on a color the heuristic would open).
      wager_min_numbers: ... and the hand holds at least this many number cards of the color.
      max_wagers: at most this many wagers on one expedition.
      wager_min_deck: play wagers only while at least this many cards remain in the deck.
      gap_cost: play score lost per face value skipped on an open expedition.
      max_draw_gap: draw a pile's top card only when it lands on an own open expedition
        skipping at most this many face values.
      endgame_deck: with at most this many cards left, gaps cost nothing (play everything).
      gift_weight: weight of the opponent's gain from a discard, relative to one's own loss.
    """

    open_margin: int = 4
    draw_credit: float = 8.0
    min_deck_to_open: int = 12
    wager_margin: int = 0
    wager_min_numbers: int = 2
    max_wagers: int = 3
    wager_min_deck: int = 18
    gap_cost: float = 9.0
    max_draw_gap: int = 2
    endgame_deck: int = 10
    gift_weight: float = 1.0


# Three strengths of caution. Loose opens colors and wagers readily and lets gaps pass;
# strict waits for more points, opens nothing in the last ~third and wagers rarely.
SAFE_LOOSE = SafeParams(
    open_margin=-2,
    draw_credit=12.0,
    min_deck_to_open=8,
    wager_margin=0,
    wager_min_numbers=2,
    max_wagers=3,
    wager_min_deck=14,
    gap_cost=7.0,
    max_draw_gap=3,
    endgame_deck=10,
)
SAFE_DEFAULT = SafeParams()
SAFE_STRICT = SafeParams(
    open_margin=6,
    draw_credit=8.0,
    min_deck_to_open=16,
    wager_margin=6,
    wager_min_numbers=3,
    max_wagers=2,
    wager_min_deck=24,
    gap_cost=10.0,
    max_draw_gap=1,
    endgame_deck=10,
)


# ---------------------------------------------------------------------------- features
class _View(NamedTuple):
    """What the player to act sees, as small arrays (H slots, C colors).

    Per slot (H): card int32, occupied/is_wager/is_number bool, color/k/face int32 (k is the
    index within the color, 0..K-1), onehot bool[H, C].
    Per color (C, int32): own_top/opp_top (highest k, -1 if empty), own_count, own_wagers,
    own_sum, opp_count, opp_wagers.
    Scalar: cards_left int32.
    """

    card: Array
    occupied: Array
    is_wager: Array
    is_number: Array
    color: Array
    k: Array
    face: Array
    onehot: Array
    own_top: Array
    opp_top: Array
    own_count: Array
    own_wagers: Array
    own_sum: Array
    opp_count: Array
    opp_wagers: Array
    cards_left: Array


def _slot_value(per_color: Array, v: _View) -> Array:
    """[H]: a per-color [C] array looked up at each hand slot's color (0 off-board).

    A one-hot select, not a gather: gathers at per-game indices are slow under vmap on CPU.
    """
    return onehot.lookup(per_color, v.color)


def _view(game: LostCities, state: State) -> _View:
    """The current player's `_View` of `state`, built from public queries only."""
    r = game.rules
    p = state.current_player
    card = game.hand(state, p)
    occupied = card < r.deck_size
    color = game.card_color(card)
    is_wager = game.card_is_wager(card)
    tops = game.expedition_tops(state)
    count, wagers, total = game.expedition_stats(state)
    return _View(
        card=card,
        occupied=occupied,
        is_wager=is_wager,
        is_number=occupied & ~is_wager,
        color=color,
        k=card - color * r.cards_per_color,
        face=game.card_face(card),
        onehot=onehot.mask(color, r.n_colors),
        own_top=onehot.take(tops, p),
        opp_top=onehot.take(tops, 1 - p),
        own_count=onehot.take(count, p),
        own_wagers=onehot.take(wagers, p),
        own_sum=onehot.take(total, p),
        opp_count=onehot.take(count, 1 - p),
        opp_wagers=onehot.take(wagers, 1 - p),
        cards_left=game.cards_left(state),
    )


# ---------------------------------------------------------------------------- simple bots
def _uniform_legal(u: Array, mask: Array) -> Array:
    """int32[]: the floor(u * n)-th legal action of bool[A] `mask` (n legal), u in [0, 1).

    One uniform per decision and a cumulative count: cheaper than sampling from logits.
    With no legal action it returns 0 (a no-op on terminated states).
    """
    n = jnp.sum(mask, dtype=jnp.int32)
    target = jnp.minimum(jnp.floor(u * n).astype(jnp.int32), n - 1)
    # The target-th legal action is at the first index whose running count exceeds target,
    # i.e. the number of indices whose running count is still <= target.
    running = jnp.cumsum(mask, dtype=jnp.int32)
    return jnp.sum(running <= target, dtype=jnp.int32)


def random_bot(game: LostCities) -> Policy:
    """A policy picking uniformly among the legal actions."""

    def act(key: Array, state: State) -> Array:
        return _uniform_legal(jax.random.uniform(key), game.legal_action_mask(state))

    return act


def passive_discard_bot(game: LostCities) -> Policy:
    """A policy that discards its first legal slot and draws from the deck, never playing."""
    h = game.rules.hand_size

    def act(key: Array, state: State) -> Array:
        mask = game.legal_action_mask(state)
        # In the play phase slot 0 is always a legal discard; argmax keeps this exact anyway.
        discard = h + jnp.argmax(mask[h : 2 * h]).astype(jnp.int32)
        # The deck is never empty in a draw phase: the game ends on the draw that empties it.
        return jnp.where(state.phase == PHASE_PLAY, discard, jnp.int32(2 * h))

    return act


# ---------------------------------------------------------------------------- safe heuristic
class _Plan(NamedTuple):
    """The heuristic's per-color judgement (C colors) and per-slot facts (H slots).

    Attributes:
      number_live: bool[H], a number card still playable on the own expedition.
      potential: float32[C], played face sum + live hand face sum + future-draw credit.
      opened: bool[C], own expedition started.
      can_open: bool[C], the heuristic would start this color now.
      wager_ok: bool[C], the heuristic would put a wager on this color now.
      promise: float32[C], 0..1, how close an unopened color is to being worth opening.
    """

    number_live: Array
    potential: Array
    opened: Array
    can_open: Array
    wager_ok: Array
    promise: Array


def _plan(game: LostCities, v: _View, params: SafeParams) -> _Plan:
    """Which colors to start, wager on, or keep hoping for; see `_Plan`."""
    r = game.rules
    slot_top = _slot_value(v.own_top, v)
    number_live = v.is_number & (v.k > slot_top)
    live = v.onehot & number_live[:, None]  # [H, C]
    hand_sum = jnp.sum(jnp.where(live, v.face[:, None], 0), axis=0)
    hand_numbers = jnp.sum(live, axis=0)
    # Roughly half of the remaining deck comes to us, spread over the colors: credit an
    # early color with some of it, a late one with little.
    after_deal = r.deck_size - 2 * r.hand_size
    credit = params.draw_credit * v.cards_left.astype(jnp.float32) / after_deal
    potential = (v.own_sum + hand_sum).astype(jnp.float32) + credit
    opened = v.own_count > 0
    open_at = r.expedition_cost + params.open_margin
    can_open = ~opened & (v.cards_left >= params.min_deck_to_open) & (potential >= open_at)
    wager_ok = (
        (v.own_top < r.n_wagers)  # no number card played yet, so a wager is still playable
        & (v.own_wagers < params.max_wagers)
        & (potential >= open_at + params.wager_margin)
        & (hand_numbers >= params.wager_min_numbers)
        & (v.cards_left >= max(params.wager_min_deck, params.min_deck_to_open))
    )
    promise = jnp.clip(potential / max(open_at, 1), 0.0, 1.0)
    promise = jnp.where(v.cards_left >= params.min_deck_to_open, promise, 0.0)
    return _Plan(number_live, potential, opened, can_open, wager_ok, promise)


def _slot_flag(flags: Array, v: _View) -> Array:
    """bool[H]: a per-color bool[C] flag looked up for each hand slot (False off-board)."""
    return onehot.lookup(flags, v.color)


def _play_scores(game: LostCities, v: _View, plan: _Plan, params: SafeParams) -> Array:
    """float32[H]: the heuristic's score for playing each hand slot (_FORBIDDEN if it won't)."""
    r = game.rules
    w = r.n_wagers
    slot_top = _slot_value(v.own_top, v)
    # Own lower live cards of the same color that playing this slot would strand.
    same = v.color[:, None] == v.color[None, :]
    lower = v.k[None, :] < v.k[:, None]
    burn = jnp.sum(jnp.where(same & lower & plan.number_live[None, :], v.face[None, :], 0), axis=1)
    # Face values skipped above the expedition's top number; none before the first number,
    # since opening with one's lowest held card is the best one can do.
    top_face = r.min_rank + slot_top - w
    gap = jnp.where(slot_top < w, 0, v.face - top_face - 1)
    # Near the end skipped cards would not come anyway, and every card played is points.
    gap_cost = jnp.where(v.cards_left <= params.endgame_deck, 0.0, params.gap_cost)

    slot_potential = _slot_value(plan.potential, v)
    on_open = _PLAY_BASE - gap_cost * gap - _BURN_WEIGHT * burn
    # Open with the lowest held card of the color only, preferring the strongest color.
    opening = jnp.where(burn == 0, _OPEN_BASE + 0.1 * slot_potential, _FORBIDDEN)
    number = jnp.where(
        _slot_flag(plan.opened, v),
        on_open,
        jnp.where(_slot_flag(plan.can_open, v), opening, _FORBIDDEN),
    )
    wager = jnp.where(_slot_flag(plan.wager_ok, v), _WAGER_BASE + 0.1 * slot_potential, _FORBIDDEN)
    score = jnp.where(v.is_wager, wager, jnp.where(plan.number_live, number, _FORBIDDEN))
    return score.astype(jnp.float32)


def _discard_scores(game: LostCities, v: _View, plan: _Plan, params: SafeParams) -> Array:
    """float32[H]: minus the loss of discarding each slot (own future use + gift to opponent)."""
    w = game.rules.n_wagers
    slot_top = _slot_value(v.own_top, v)
    slot_opp_top = _slot_value(v.opp_top, v)
    slot_opened = _slot_flag(plan.opened, v)
    slot_promise = _slot_value(plan.promise, v)
    slot_own_wagers = _slot_value(v.own_wagers, v)

    # Own loss: a live card's face (times the wager multiplier once opened), scaled by the
    # color's promise while unopened; wagers a fixed amount; dead cards nothing.
    number_own = jnp.where(slot_opened, v.face * (1 + slot_own_wagers), v.face * slot_promise)
    wager_live = v.is_wager & (slot_top < w)
    wager_own = jnp.where(slot_opened, _WAGER_KEEP_VALUE, _WAGER_KEEP_VALUE * slot_promise)
    own_value = jnp.where(plan.number_live, number_own, jnp.where(wager_live, wager_own, 0.0))

    # The opponent's gain: cards their open expedition can still take are near-forbidden.
    opp_opened = _slot_flag(v.opp_count > 0, v)
    opp_wagers = _slot_value(v.opp_wagers, v)
    opp_number_live = v.is_number & (v.k > slot_opp_top)
    opp_wager_live = v.is_wager & (slot_opp_top < w)
    number_gift = jnp.where(opp_opened, v.face * (1 + opp_wagers), 0.5 * v.face)
    wager_gift = jnp.where(opp_opened, 0.0, 2.0)
    gift = params.gift_weight * jnp.where(
        opp_number_live, number_gift, jnp.where(opp_wager_live, wager_gift, 0.0)
    )
    # A fixed surcharge, independent of gift_weight, keeps "never feed an open opposing
    # expedition while another discard exists" (own values stay far below it).
    feeds = opp_opened & (opp_number_live | opp_wager_live)
    gift = gift + jnp.where(feeds, _GIFT_BASE, 0.0)
    score = -_DISCARD_OFFSET - own_value - gift
    return score.astype(jnp.float32)


def _draw_scores(game: LostCities, state: State, v: _View, params: SafeParams) -> Array:
    """float32[1 + C]: scores of drawing from the deck (0) and from each pile."""
    r = game.rules
    w = r.n_wagers
    top_card = game.pile_tops(state)  # [C], N when empty
    top_k = top_card - jnp.arange(r.n_colors) * r.cards_per_color
    is_number = (top_card < r.deck_size) & ~game.card_is_wager(top_card)
    own_face = r.min_rank + v.own_top - w  # face of the expedition's top number card
    gap = jnp.where(v.own_top < w, 0, game.card_face(top_card) - own_face - 1)
    takes = is_number & (v.own_count > 0) & (top_k > v.own_top) & (gap <= params.max_draw_gap)
    # The blocked pile and empty piles are illegal anyway; the legal mask removes them.
    pile = jnp.where(takes, _PLAY_BASE - gap, _FORBIDDEN)
    return jnp.concatenate([jnp.zeros((1,), jnp.float32), pile.astype(jnp.float32)])


def safe_scores(game: LostCities, state: State, params: SafeParams = SAFE_DEFAULT) -> Array:
    """float32[A]: the safe heuristic's preference for every action; illegal ones _ILLEGAL.

    The heuristic plays argmax of this. Exposed for tests and for analysis.
    """
    v = _view(game, state)
    plan = _plan(game, v, params)
    scores = jnp.concatenate(
        [
            _play_scores(game, v, plan, params),
            _discard_scores(game, v, plan, params),
            _draw_scores(game, state, v, params),
        ]
    )
    return jnp.where(game.legal_action_mask(state), scores, _ILLEGAL)


def safe_heuristic_bot(game: LostCities, params: SafeParams = SAFE_DEFAULT) -> Policy:
    """A deterministic cautious policy (the key is unused); see `SafeParams`."""

    def act(key: Array, state: State) -> Array:
        # argmax over finite scores: a legal action whenever one exists.
        return jnp.argmax(safe_scores(game, state, params)).astype(jnp.int32)

    return act


def noisy_safe_bot(game: LostCities, epsilon: float = 0.1, params: SafeParams = SAFE_DEFAULT) -> Policy:
    """The safe heuristic, replaced with probability `epsilon` by a uniform legal action."""
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
    safe = safe_heuristic_bot(game, params)

    def act(key: Array, state: State) -> Array:
        coin, pick = jax.random.uniform(key, (2,))
        uniform = _uniform_legal(pick, game.legal_action_mask(state))
        return jnp.where(coin < epsilon, uniform, safe(key, state))

    return act


# ---------------------------------------------------------------------------- registry
_FACTORIES: dict[str, Callable[[LostCities], Policy]] = {
    "random": random_bot,
    "passive_discard": passive_discard_bot,
    "safe_heuristic_loose": functools.partial(safe_heuristic_bot, params=SAFE_LOOSE),
    "safe_heuristic": functools.partial(safe_heuristic_bot, params=SAFE_DEFAULT),
    "safe_heuristic_strict": functools.partial(safe_heuristic_bot, params=SAFE_STRICT),
    "noisy_safe": noisy_safe_bot,
}
BOT_NAMES: tuple[str, ...] = tuple(_FACTORIES)


# Stays: the arena keys its compiled matches on the policy object, so a bot must be one
# object per (name, game) (games are equal by their rules).
@functools.lru_cache(maxsize=128)
def _cached_bot(name: str, game: LostCities) -> Policy:
    return _FACTORIES[name](game)


def make_bot(name: str, game: LostCities) -> Policy:
    """The policy registered as `name` for `game`.

    Returns the same function object for the same (name, game), so jit caches keyed on the
    policy (as in `lcjax.env.arena`) are reused across calls.

    Raises:
      ValueError: `name` is not in `BOT_NAMES`.
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown bot {name!r}; choose one of: {', '.join(BOT_NAMES)}")
    if not isinstance(game, LostCities):
        raise TypeError(f"game must be a LostCities instance, got {type(game).__name__}")
    return _cached_bot(name, game)
