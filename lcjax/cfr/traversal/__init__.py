"""Vectorized Deep CFR traversals, generic over any game of `lcjax.env.protocol`.

Every scheme advances a batch of traversals in lockstep inside one jitted computation, with
one batched network forward per loop step (a matmul over all lanes, no per-node dispatch),
and returns a `TraversalResult`: fixed-shape advantage and strategy sample buffers with
validity masks, and counters. The players' current strategies come from regret matching on
their advantage networks. Every sample carries its iteration t for Linear CFR weighting.

Modules:
  results   TraversalResult, TraversalCounters and the packed sample rows.
  lanes     the lane pool shared by the schemes: packed states, batched game functions,
            batched forwards of the lanes that need one, refill, random numbers.
  external  external sampling (exact reference on small games).
  trajectory  main trajectories: the traverser on a fixed sampling policy, the opponent
            on its current strategy (shared by probe and value).
  probe     selected traverser nodes probed by rollouts.
  value     selected traverser nodes' regrets read off a learned history value (ESCHER).
  schemes   the scheme and the sampling policy a `traversal` settings section names.

A new scheme is a module with a static config and a function
`scheme(game, apply_fn, cfg, params, traverser, iteration, key, num_traversals) ->
TraversalResult` built from `lanes`, selected by name in `schemes.traversal_fn`.
"""

from lcjax.cfr.traversal.external import ExternalConfig, external_sampling
from lcjax.cfr.traversal.probe import ProbeConfig, probe_sampling
from lcjax.cfr.traversal.results import TraversalCounters, TraversalResult
from lcjax.cfr.traversal.schemes import sampling_policy, traversal_fn
from lcjax.cfr.traversal.trajectory import SamplingPolicy
from lcjax.cfr.traversal.value import (
    VALUE_HEADS, ValueConfig, ValueData, history_values, kept_rows, lambda_returns, relabelled_targets, value_data,
    value_sampling,
)

__all__ = [
    "ExternalConfig",
    "ProbeConfig",
    "SamplingPolicy",
    "ValueConfig",
    "ValueData",
    "VALUE_HEADS",
    "TraversalCounters",
    "TraversalResult",
    "external_sampling",
    "history_values",
    "kept_rows",
    "lambda_returns",
    "relabelled_targets",
    "probe_sampling",
    "sampling_policy",
    "traversal_fn",
    "value_data",
    "value_sampling",
]
