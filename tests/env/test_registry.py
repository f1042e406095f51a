"""The game registry: names, construction with rules, and what it says about each game."""

from __future__ import annotations

import dataclasses

import pytest

from lcjax.env import bots, registry
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.env.lost_cities import LostCities, Rules
from lcjax.env.protocol import Game


def test_names():
    assert registry.GAME_NAMES == ("lost_cities", "kuhn", "leduc")


@pytest.mark.parametrize("name", registry.GAME_NAMES)
def test_every_game_builds_and_reports_itself(name):
    game = registry.make_game(name)
    assert isinstance(game, Game)
    info = registry.info_of(game)
    assert info is registry.game_info(name) and info.name == name
    assert isinstance(game, info.game_type)
    assert info.evaluation in (registry.EXPLOITABILITY, registry.BOT_MATCHES)


def test_what_the_registry_says_about_each_game():
    lc, kuhn, leduc = (registry.game_info(n) for n in ("lost_cities", "kuhn", "leduc"))
    assert not lc.exact_evaluation and lc.evaluation == registry.BOT_MATCHES and lc.human_play
    assert lc.rules_type is Rules
    for small in (kuhn, leduc):
        assert small.exact_evaluation and small.evaluation == registry.EXPLOITABILITY
        assert not small.human_play and small.rules_type is None
    assert isinstance(registry.make_game("kuhn"), KuhnPoker)
    assert isinstance(registry.make_game("leduc"), LeducPoker)


def test_lost_cities_rules_are_keyword_arguments():
    game = registry.make_game("lost_cities", n_colors=4, max_turns=50)
    assert isinstance(game, LostCities)
    assert game.rules == Rules(n_colors=4, max_turns=50)
    assert registry.make_game("lost_cities").rules == Rules()
    assert registry.make_game("lost_cities", **dataclasses.asdict(Rules(hand_size=5))).rules.hand_size == 5


def test_unknown_name_lists_the_allowed_names():
    with pytest.raises(ValueError, match="unknown game 'chess'; choose one of: lost_cities, kuhn, leduc"):
        registry.make_game("chess")
    with pytest.raises(ValueError, match="lost_cities, kuhn, leduc"):
        registry.game_info(None)


def test_bad_rules_raise_value_error():
    with pytest.raises(ValueError, match="no rule 'colours'.*n_colors"):
        registry.make_game("lost_cities", colours=4)
    with pytest.raises(ValueError, match="n_colors"):
        registry.make_game("lost_cities", n_colors=9)
    with pytest.raises(ValueError, match="'kuhn' takes no rules"):
        registry.make_game("kuhn", n_colors=4)


def test_bots_by_game():
    lc = registry.game_info("lost_cities")
    game = registry.make_game("lost_cities")
    assert lc.bot_names == bots.BOT_NAMES and "safe_heuristic" in lc.bot_names
    for name in lc.bot_names:
        assert lc.make_bot(name, game) is bots.make_bot(name, game)
    with pytest.raises(ValueError, match="unknown bot 'best'.*choose one of: random, passive_discard"):
        lc.make_bot("best", game)
    for small in ("kuhn", "leduc"):
        info = registry.game_info(small)
        assert info.bot_names == ()
        with pytest.raises(ValueError, match=f"unknown bot 'random' for game '{small}'; it has none"):
            info.make_bot("random", registry.make_game(small))


def test_info_of_an_unregistered_object():
    with pytest.raises(TypeError, match="not a registered game"):
        registry.info_of(object())
