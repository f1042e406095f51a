"""The game protocol that every lcjax game implements.

A game is a set of pure functions on a fixed-shape state pytree, so that a batch of games
advances with `jax.vmap` inside one `jax.jit`. Chance is drawn up front: `init(key)` samples
every chance outcome of the game (the shuffled deck) and stores it in the state, so `step`
is deterministic. `init_from_deck(deck)` builds the same state from an explicit chance
sequence, which is how tests pin positions and how exact solvers enumerate chance.

Every game is two-player and zero-sum. The code in `lcjax.cfr` uses only the names below.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax

Array = jax.Array


@runtime_checkable
class GameState(Protocol):
    """Fields every state pytree carries (other fields are game-specific).

    Attributes:
      current_player: int32 scalar, the player to act (0 or 1). Meaningless once terminated.
      terminated: bool scalar, True once the game is over.
    """

    current_player: Array
    terminated: Array


@runtime_checkable
class Game(Protocol):
    """A two-player, zero-sum game of pure, jittable functions on fixed shapes.

    Attributes:
      num_actions: size A of the action space; actions are int32 in [0, A).
      observation_size: size D of `observe`'s output.
      history_size: size E of `observe_history`'s output.
      num_players: always 2.
      return_scale (optional): float, the typical magnitude of `returns`, by which value and
        regret targets are divided to make them O(1). A game without it has scale 1.0; read
        it with `return_scale(game)`.
    """

    num_actions: int
    observation_size: int
    history_size: int
    num_players: int

    def init(self, key: Array) -> Any:
        """A new game with all chance pre-drawn from `key`."""

    def init_from_deck(self, deck: Array) -> Any:
        """A new game whose chance outcomes are `deck` (int[deck_size], top card first)."""

    def step(self, state: Any, action: Array) -> Any:
        """The state after `action` (int32 scalar). A terminated state is returned unchanged."""

    def legal_action_mask(self, state: Any) -> Array:
        """bool[A]: the legal actions of `state.current_player`; all False once terminated."""

    def observe(self, state: Any, player: Array) -> Array:
        """float32[D]: `player`'s information state; depends on nothing hidden from them."""

    def observe_history(self, state: Any) -> Array:
        """float32[E]: the history as an observer of both players' private cards sees it.

        Everything dealt so far and all public information (both hands, the board, the
        betting, the deck size...), from the perspective of `state.current_player`: it holds
        at least the information of `observe(state, state.current_player)`, plus the
        opponent's private cards. It does not depend on the order of undealt chance outcomes
        (cards still in the deck are indistinguishable). Finite on terminated states too.
        Input of history-value networks Q(h, a) (the acting player's expected return).
        """

    def returns(self, state: Any) -> Array:
        """float32[2]: the players' utilities; zero-sum; final once `state.terminated`."""


class HiddenAlternatives(Protocol):
    """Optional: the histories a player cannot tell apart (Kuhn, Leduc; read by
    `traversal.value.hidden_average`, which averages regret samples over them).

    Attributes:
      num_alternatives: K, the number of alternatives (e.g. one per card the opponent may
        hold).
    """

    num_alternatives: int

    def hidden_alternatives(self, state: Any, player: Array) -> tuple[Any, Array]:
        """(states, prior): K states `player` cannot tell from `state`, and their chances.

        `states` has every leaf of `state` behind a leading axis K; alternative k replaces
        what `player` cannot see (the opponent's private cards) by assignment k, which must
        mean the same assignment at every state of a game (so that the opponent's reach of
        alternative k can be multiplied up along a trajectory), with any undealt chance
        outcomes left a valid draw given it. `prior` float32[K] is the chance probability
        of assignment k given what `player` has seen, 0 where it is impossible (then the
        alternative may be anything). Every alternative with prior > 0 is observed by
        `player` exactly as `state` is. Meant for states still in play.
        """


class ChanceResampling(Protocol):
    """Optional: chance outcomes still to come, drawn again (Lost Cities' deck; read by
    `traversal.value.chance_samples`, which averages a child's value over such draws)."""

    def chance_actions(self, state: Any) -> Array:
        """bool[A]: the actions whose child reveals a chance outcome (e.g. a card drawn
        from the deck); the child of any other action follows from the history alone."""

    def resample_chance(self, state: Any, key: Array) -> Any:
        """`state` with the chance outcome that a chance action reveals next drawn again from
        its distribution given the history, independently of the state's own (later
        outcomes may stay as they were): `observe_history` (hence `observe`) of the result
        equals the state's."""


def return_scale(game: Any) -> float:
    """The game's `return_scale` (typical magnitude of its returns), 1.0 when it has none."""
    return float(getattr(game, "return_scale", 1.0))
