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
