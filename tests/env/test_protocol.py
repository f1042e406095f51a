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
