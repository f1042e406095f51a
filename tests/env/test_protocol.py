"""Every game passes the protocol harness of `lcjax.env.api_test`."""

from __future__ import annotations

import pytest

from lcjax.env.api_test import api_test
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.env.lost_cities import LostCities, Rules
from lcjax.env.protocol import Game


@pytest.mark.parametrize(
    "game, max_steps",
    [
        (KuhnPoker(), 8),
        (LeducPoker(), 16),
        (LostCities(), 2 * 200 + 2),
        (LostCities(Rules(n_colors=6, max_turns=60)), 2 * 60 + 2),
    ],
    ids=["kuhn", "leduc", "lost_cities", "lost_cities_6_colors_capped"],
)
def test_game_passes_api_test(game, max_steps):
    assert isinstance(game, Game)
    api_test(game, num_games=32, max_steps=max_steps)


def test_api_test_catches_a_broken_game():
    class NotZeroSum(KuhnPoker):
        def returns(self, state):
            return super().returns(state) + 1.0

    with pytest.raises(AssertionError, match="zero-sum"):
        api_test(NotZeroSum(), num_games=8, max_steps=8)


@pytest.mark.parametrize(
    "broken, message",
    [("hands", "resample_chance"), ("no_chance", "non-chance action.s child")],
)
def test_api_test_catches_a_broken_chance_redraw(broken, message):
    """A redraw that moves dealt cards, or a deck draw not declared a chance action, fails."""

    class Broken(LostCities):
        def resample_chance(self, state, key):
            state = super().resample_chance(state, key)
            return state._replace(hands=state.hands[::-1]) if broken == "hands" else state

        def chance_actions(self, state):
            return super().chance_actions(state) & (broken != "no_chance")

    with pytest.raises(AssertionError, match=message):
        api_test(Broken(Rules(max_turns=20)), num_games=8, max_steps=2 * 20 + 2)
