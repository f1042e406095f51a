"""Text views of Lost Cities positions, from one player's side (host-side, not jittable).

`render` shows exactly what `player` may know: their own hand, both expeditions, the discard
piles, the deck count, whose move it is, the blocked pile, and the cards in either hand that
are public because they were taken from a discard pile. The opponent's other cards and the deck
order never appear, so two states that differ only there render identically.

Everything is read through public `LostCities` queries (`hand`, `expedition_cards`,
`expedition_scores`, `pile_cards`, `known_cards`, `cards_left`, `card_color`, `card_name`),
never from the storage layout of `State`.
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.env.lost_cities import COLOR_NAMES, NO_PILE, PHASE_PLAY, LostCities, State

# One compiled function of each kind per game, dropped with the game. They stay: host loops
# (`lcjax play`, rendering a position) call them once per move, outside any solver.
_VIEW_CACHE: "weakref.WeakKeyDictionary[LostCities, object]" = weakref.WeakKeyDictionary()
_MASK_CACHE: "weakref.WeakKeyDictionary[LostCities, object]" = weakref.WeakKeyDictionary()


def _mask_fn(game: LostCities):
    """`game.legal_action_mask`, jitted once per game (host loops call it per position)."""
    fn = _MASK_CACHE.get(game)
    if fn is None:
        fn = _MASK_CACHE[game] = jax.jit(game.legal_action_mask)
    return fn


def _view_fn(game: LostCities):
    """A jitted (state, player) -> dict of the public facts of `state` seen by `player`.

    Output (N cards, C colors, H slots), all from `player`'s side (row 0 = player):
      hand int32[H]; expeditions bool[2, N]; expedition_scores int32[2, C];
      pile_cards int32[C, K]; known_opponent bool[N] (opponent's cards that `player` saw
      them take from a pile); known_own bool[N] (own cards the opponent saw us take);
      cards_left int32[].
    """
    fn = _VIEW_CACHE.get(game)
    if fn is not None:
        return fn

    def view(state: State, player):
        player = jnp.asarray(player, jnp.int32)

        def mine_first(rows):
            return jnp.where(player == 0, rows, rows[::-1])

        known = mine_first(game.known_cards(state))
        return {
            "hand": game.hand(state, player),
            "expeditions": mine_first(game.expedition_cards(state)),
            "expedition_scores": mine_first(game.expedition_scores(state)),
            "pile_cards": game.pile_cards(state),
            "known_opponent": known[1],
            "known_own": known[0],
            "cards_left": game.cards_left(state),
        }

    fn = _VIEW_CACHE[game] = jax.jit(view)
    return fn


def _public_view(game: LostCities, state: State, player: int) -> dict:
    """Host numpy copy of `_view_fn`'s output."""
    return jax.device_get(_view_fn(game)(state, player))


def _cards(game: LostCities, cards) -> str:
    """Card names separated by spaces, '-' when there are none."""
    names = [game.card_name(c) for c in cards]
    return " ".join(names) if names else "-"


def render(game: LostCities, state: State, player: int) -> str:
    """A multi-line text view of a single (unbatched) `state` as `player` (0 or 1) sees it.

    Shows: turn, deck cards left, who moves and in which phase (or the final result), the
    blocked pile, `player`'s hand with slot numbers, both expeditions by color with their
    current scores, each discard pile from bottom to top (top in brackets), the cards the
    opponent is known to hold, and the own cards the opponent knows of.
    """
    player = int(player)
    if player not in (0, 1):
        raise ValueError(f"player must be 0 or 1, got {player!r}")
    if np.ndim(state.current_player) != 0:
        raise ValueError("render takes a single state, not a batch")
    r = game.rules
    n = r.deck_size
    view = _public_view(game, state, player)
    names = COLOR_NAMES[: r.n_colors]
    width = max(len(c) for c in names)
    to_move = int(state.current_player)
    lines = [f"Lost Cities - you are player {player}"]
    lines.append(f"Turn {int(state.turn)}, {int(view['cards_left'])} cards left in the deck")

    totals = view["expedition_scores"].sum(-1)
    if bool(state.terminated):
        lines.append(f"Game over: you {int(totals[0])}, opponent {int(totals[1])}")
    else:
        who = "you" if to_move == player else "opponent"
        what = "play or discard a card" if int(state.phase) == PHASE_PLAY else "draw a card"
        lines.append(f"To move: player {to_move} ({who}), {what}")
        blocked = int(state.blocked_pile)
        if blocked != NO_PILE:
            lines.append(f"Blocked pile: {COLOR_NAMES[blocked]} (discarded to this turn)")

    hand = [int(c) for c in view["hand"] if int(c) < n]
    lines.append("")
    lines.append("Your hand: " + "  ".join(f"{i}:{game.card_name(c)}" for i, c in enumerate(hand)))

    # Expedition cards in card-id order, which is play order (wagers first, then ascending).
    colors = np.asarray(game.card_color(np.arange(n)))
    cells = []
    for side in range(2):
        ids = np.flatnonzero(view["expeditions"][side])
        cells.append([_cards(game, ids[colors[ids] == c]) for c in range(r.n_colors)])
    col = max(12, max(len(x) for x in cells[0]) + 8)
    lines.append("")
    lines.append("Expeditions (score, cards):")
    lines.append(f"  {'':<{width}}  {'you':<{col}}| opponent")
    for c, name in enumerate(names):
        own = f"{int(view['expedition_scores'][0, c]):>4}  {cells[0][c]}"
        opp = f"{int(view['expedition_scores'][1, c]):>4}  {cells[1][c]}"
        lines.append(f"  {name:<{width}}  {own:<{col}}| {opp}")
    lines.append(f"  {'total':<{width}}  {int(totals[0]):>4}{'':<{col - 4}}| {int(totals[1]):>4}")

    lines.append("")
    lines.append("Discard piles (bottom -> top, [top]):")
    for c, name in enumerate(names):
        pile = [int(x) for x in view["pile_cards"][c] if int(x) < n]
        text = " ".join(game.card_name(x) for x in pile[:-1])
        text = (text + " " if text else "") + f"[{game.card_name(pile[-1])}]" if pile else "-"
        lines.append(f"  {name:<{width}}  {text}")

    known = np.flatnonzero(view["known_opponent"])
    lines.append("")
    lines.append(f"Opponent is known to hold: {_cards(game, known)}")
    lines.append(f"Opponent knows you hold: {_cards(game, np.flatnonzero(view['known_own']))}")
    return "\n".join(lines)


def render_legal_actions(game: LostCities, state: State) -> list[tuple[int, str]]:
    """(action id, readable name) for each legal action of a single state, in id order."""
    if np.ndim(state.current_player) != 0:
        raise ValueError("render_legal_actions takes a single state, not a batch")
    mask = np.asarray(jax.device_get(_mask_fn(game)(state)))
    return [(int(a), game.action_name(int(a), state)) for a in np.flatnonzero(mask)]
