"""The training samples Deep CFR stores in its reservoirs.

One sample describes one information state; a batch has the same fields with a leading
batch axis. `iteration` is the CFR iteration t (1-based) the sample was produced in, used
as the Linear-CFR weight of the sample in the losses of `lcjax.cfr.training`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax

Array = jax.Array


class AdvantageSample(NamedTuple):
    """A sampled instantaneous regret vector for the advantage network.

    Attributes:
      observation: float32[D], the acting player's information state.
      mask: bool[A], legal actions.
      regret: float32[A], sampled instantaneous regrets (only legal entries are read).
      iteration: float32 scalar, the CFR iteration t; the Linear-CFR weight.
    """

    observation: Array
    mask: Array
    regret: Array
    iteration: Array


class StrategySample(NamedTuple):
    """A strategy the acting player played, for the average-strategy network.

    Attributes:
      observation: float32[D], the acting player's information state.
      mask: bool[A], legal actions.
      strategy: float32[A], the iteration's strategy (0 on illegal actions).
      iteration: float32 scalar, the CFR iteration t; the Linear-CFR weight.
    """

    observation: Array
    mask: Array
    strategy: Array
    iteration: Array


class ValueSample(NamedTuple):
    """A realized return after one action, for the history-value network Q(h, a).

    Attributes:
      history: float32[H], the history `game.observe_history(state)` (acting player's view
        plus the opponent's private cards).
      action: bool[A], one-hot of the action taken (bool[1], always True, for a state
        value V(h)).
      target: float32 scalar, the acting player's final return divided by the return scale.
      iteration: float32 scalar, the CFR iteration t whose strategies played the game.
    """

    history: Array
    action: Array
    target: Array
    iteration: Array
