"""Text rendering of Lost Cities states (lcjax.env.render)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from lcjax.env import bots, render
from lcjax.env.lost_cities import COLOR_NAMES, LostCities, draw_deck_action, draw_pile_action


@pytest.fixture(scope="module")
def game() -> LostCities:
    return LostCities()


@pytest.fixture(scope="module")
def step(game):
    return jax.jit(game.step)


@pytest.fixture(scope="module")
def deal(game):
    """Jitted init_from_deck, from a numpy seed."""
    init = jax.jit(game.init_from_deck)
    return lambda seed: init(np.random.default_rng(seed).permutation(game.rules.deck_size).astype(np.int32))


@pytest.fixture(scope="module")
def play_out(game):
    """Jitted: play a single state to the end with uniformly random legal actions."""
    act = bots.random_bot(game)

    @jax.jit
    def run(state, key):
        def body(carry):
            state, key = carry
            key, sub = jax.random.split(key)
            return game.step(state, act(sub, state)), key

        return jax.lax.while_loop(lambda c: ~c[0].terminated, body, (state, key))[0]

    return run


def _deck(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n).astype(np.int32)


def _hand_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("Your hand:"))


def _line(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(prefix))


def _pile_line(text: str, color: str) -> str:
    piles = text.split("Discard piles")[1]
    return next(line for line in piles.splitlines() if line.strip().startswith(color + " "))


def _slot_of(game, state, player, card) -> int:
    return int(np.flatnonzero(np.asarray(game.hand(state, player)) == card)[0])


def test_render_shows_own_hand(game, deal):
    state = deal(0)
    for player in (0, 1):
        line = _hand_line(render.render(game, state, player))
        hand = np.asarray(game.hand(state, player))
        for slot, card in enumerate(hand):
            assert f"{slot}:{game.card_name(card)}" in line
    text = render.render(game, state, 0)
    assert f"{game.rules.deck_size - 2 * game.rules.hand_size} cards left" in text
    assert "Turn 0" in text and "player 0 (you)" in text and "play or discard" in text
    assert "player 0 (opponent)" in render.render(game, state, 1)


def test_render_hides_opponent_hand(game, step):
    init = jax.jit(game.init_from_deck)
    # Swap player 1's first card with a card deep in the deck: only player 1's hand (and the
    # hidden deck order) differ, so player 0's view must be identical, player 1's not.
    deck = _deck(1, game.rules.deck_size)
    other = deck.copy()
    other[[1, 40]] = other[[40, 1]]
    states = [init(d) for d in (deck, other)]
    assert not np.array_equal(game.hand(states[0], 1), game.hand(states[1], 1))
    np.testing.assert_array_equal(game.hand(states[0], 0), game.hand(states[1], 0))
    views = [render.render(game, s, 0) for s in states]
    assert views[0] == views[1]
    assert render.render(game, states[0], 1) != render.render(game, states[1], 1)
    # Player 0 takes a turn (discard slot 0, draw from the deck): still indistinguishable.
    h = game.rules.hand_size
    states = [step(step(s, h), draw_deck_action(game.rules)) for s in states]
    assert render.render(game, states[0], 0) == render.render(game, states[1], 0)
    hidden = set(np.asarray(game.hand(states[0], 1))) ^ set(np.asarray(game.hand(states[1], 1)))
    for card in hidden:
        assert game.card_name(card) not in _hand_line(render.render(game, states[0], 0))


def test_render_piles_and_known_cards(game, step, deal):
    r = game.rules
    h = r.hand_size
    state = deal(2)
    # Player 0 discards its first card X, then draws from the deck.
    x = int(game.hand(state, 0)[0])
    x_color = int(game.card_color(x))
    state = step(step(state, h + 0), draw_deck_action(r))
    text = render.render(game, state, 1)
    assert _pile_line(text, COLOR_NAMES[x_color]).endswith(f"[{game.card_name(x)}]")
    # Player 1 discards a card of another color, then takes X from its pile.
    hand1 = np.asarray(game.hand(state, 1))
    slot = int(np.flatnonzero(np.asarray(game.card_color(hand1)) != x_color)[0])
    state = step(state, h + slot)
    blocked = COLOR_NAMES[int(game.card_color(hand1[slot]))]
    assert f"Blocked pile: {blocked}" in render.render(game, state, 0)
    state = step(state, draw_pile_action(r, x_color))
    assert int(state.turn) == 2
    seen_by_0 = render.render(game, state, 0)
    seen_by_1 = render.render(game, state, 1)
    assert _line(seen_by_0, "Opponent is known to hold:").endswith(game.card_name(x))
    assert _line(seen_by_1, "Opponent knows you hold:").endswith(game.card_name(x))
    assert _line(seen_by_1, "Opponent is known to hold:").endswith("-")
    assert _pile_line(seen_by_0, COLOR_NAMES[x_color]).endswith("-")  # the pile is empty again
    assert f"{_slot_of(game, state, 1, x)}:{game.card_name(x)}" in _hand_line(seen_by_1)


def test_render_finished_game(game, play_out, deal):
    state = play_out(deal(5), jax.random.key(6))
    assert bool(state.terminated)
    scores = np.asarray(game.scores(state))
    exp_scores = np.asarray(game.expedition_scores(state))
    exp_cards = np.asarray(game.expedition_cards(state))
    colors = np.asarray(game.card_color(np.arange(game.rules.deck_size)))
    for player in (0, 1):
        text = render.render(game, state, player)
        you, opp = scores[player], scores[1 - player]
        assert f"Game over: you {you}, opponent {opp}" in text
        total = _line(text, "total")
        assert total.split("|")[0].split()[-1] == str(you)
        assert total.split("|")[1].split()[0] == str(opp)
        for c, name in enumerate(COLOR_NAMES[: game.rules.n_colors]):
            mine, theirs = _line(text, name + " ").split("|")
            assert mine.split()[1] == str(exp_scores[player, c])
            assert theirs.split()[0] == str(exp_scores[1 - player, c])
            # The cards after each score, in id order ('-' for an empty expedition).
            for side, listed in ((player, mine.split()[2:]), (1 - player, theirs.split()[1:])):
                ids = np.flatnonzero(exp_cards[side] & (colors == c))
                assert listed == ([game.card_name(i) for i in ids] or ["-"])


def test_render_legal_actions(game, step, deal):
    r = game.rules
    state = deal(3)
    for _ in range(2):
        listed = render.render_legal_actions(game, state)
        mask = np.asarray(render._mask_fn(game)(state))  # the jitted legal_action_mask
        assert [a for a, _ in listed] == list(np.flatnonzero(mask))
        assert all(name == game.action_name(a, state) for a, name in listed)
        state = step(state, r.hand_size)  # discard slot 0: now the draw phase
    assert (draw_deck_action(r), "draw deck") in listed


def test_render_rejects_bad_input(game, deal):
    state = deal(0)
    with pytest.raises(ValueError, match="player"):
        render.render(game, state, 2)
    batch = jax.tree.map(lambda *x: np.stack(x), state, deal(1))
    with pytest.raises(ValueError, match="single state"):
        render.render(game, batch, 0)
    with pytest.raises(ValueError, match="single state"):
        render.render_legal_actions(game, batch)
