"""The games lcjax plays, by name, and what the rest of the package needs to know of each.

`make_game(name, **rules)` builds a game; `game_info(name)` and `info_of(game)` say how it is
evaluated and whether a person can play it, so code outside `lcjax.env` asks the registry
instead of testing for a game class.

A new game plugs in with one `GameInfo` entry in `_GAMES` below: its name, its class (an
implementation of `lcjax.env.protocol.Game`), a constructor taking the rules as keyword
arguments, and how it is evaluated.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from lcjax.env import bots
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.env.lost_cities import LostCities, Rules

# How a game's policies are judged (`GameInfo.evaluation`).
EXPLOITABILITY = "exploitability"  # exact best-response value over the whole game tree
BOT_MATCHES = "bot_matches"  # matches against the scripted bots of `lcjax.env.bots`


@dataclasses.dataclass(frozen=True)
class GameInfo:
    """What the package knows of one registered game.

    Attributes:
      name: the name in configs and on the command line.
      game_type: the class of the game objects `build` returns.
      build: (**rules) -> game; a game without rules takes no arguments.
      rules_type: the dataclass of its rules (its fields are the keyword arguments of
        `make_game`), or None for a game without rules.
      evaluation: EXPLOITABILITY (small games: exact, `lcjax.cfr.exploitability`) or
        BOT_MATCHES (matches against `lcjax.env.bots`).
      human_play: whether `lcjax play` can show it to a person (`lcjax.env.render`).
      bot_names: the game's named scripted policies (`make_bot`); empty for a game without.
      bot_factory: (name, game) -> act(key, state) -> int32[], or None without bots.
    """

    name: str
    game_type: type
    build: Callable[..., Any]
    rules_type: type | None
    evaluation: str
    human_play: bool
    bot_names: tuple[str, ...] = ()
    bot_factory: Callable[[str, Any], Callable] | None = None

    def make_bot(self, name: str, game) -> Callable:
        """The scripted policy `name` of this game: act(key, state) -> int32[] for one state.

        Its action depends only on what the acting player sees (`tests/env/test_bots.py`), so
        it may serve as a traverser's sampling policy.

        Raises:
          ValueError: `name` is not one of `bot_names` (the message lists them).
        """
        if name not in self.bot_names:
            allowed = f"choose one of: {', '.join(self.bot_names)}" if self.bot_names else "it has none"
            raise ValueError(f"unknown bot {name!r} for game {self.name!r}; {allowed}")
        return self.bot_factory(name, game)

    @property
    def exact_evaluation(self) -> bool:
        """True when the game is evaluated by exact exploitability, False for bot matches."""
        return self.evaluation == EXPLOITABILITY


def _lost_cities(**rules) -> LostCities:
    return LostCities(Rules(**rules))


_GAMES: dict[str, GameInfo] = {
    info.name: info
    for info in (
        GameInfo(
            "lost_cities", LostCities, _lost_cities, Rules, BOT_MATCHES, human_play=True,
            bot_names=bots.BOT_NAMES, bot_factory=bots.make_bot,
        ),
        GameInfo("kuhn", KuhnPoker, KuhnPoker, None, EXPLOITABILITY, human_play=False),
        GameInfo("leduc", LeducPoker, LeducPoker, None, EXPLOITABILITY, human_play=False),
    )
}
GAME_NAMES: tuple[str, ...] = tuple(_GAMES)


def game_info(name: str) -> GameInfo:
    """The registry entry of the game called `name`.

    Raises:
      ValueError: `name` is not one of `GAME_NAMES` (the message lists them).
    """
    info = _GAMES.get(name) if isinstance(name, str) else None
    if info is None:
        raise ValueError(f"unknown game {name!r}; choose one of: {', '.join(GAME_NAMES)}")
    return info


def make_game(name: str, **rules):
    """A new game `name` with the given rules (the fields of its `rules_type`).

    `make_game("lost_cities", n_colors=4)` is `LostCities(Rules(n_colors=4))`;
    `make_game("kuhn")` is `KuhnPoker()`.

    Raises:
      ValueError: an unknown game, a rule the game does not have (both listing the allowed
        names), or a rule value the game rejects.
    """
    info = game_info(name)
    if info.rules_type is None:
        if rules:
            raise ValueError(f"game {name!r} takes no rules, got {', '.join(sorted(rules))}")
        return info.build()
    allowed = [f.name for f in dataclasses.fields(info.rules_type)]
    unknown = sorted(set(rules) - set(allowed))
    if unknown:
        raise ValueError(
            f"game {name!r} has no rule {unknown[0]!r}; its rules are: {', '.join(allowed)}"
        )
    return info.build(**rules)


def info_of(game) -> GameInfo:
    """The registry entry of a game object (an instance of a registered game class).

    Raises:
      TypeError: `game` is not an instance of a registered game.
    """
    for info in _GAMES.values():
        if isinstance(game, info.game_type):
            return info
    raise TypeError(f"{type(game).__name__} is not a registered game ({', '.join(GAME_NAMES)})")
