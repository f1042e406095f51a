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
  probe     fixed-policy main trajectories probed by rollouts.

A new scheme is a module with a static config and a function
`scheme(game, apply_fn, cfg, params, traverser, iteration, key, num_traversals) ->
TraversalResult` built from `lanes`; `lcjax.cfr.solver` selects it by name.
"""

from lcjax.cfr.traversal.external import ExternalConfig, external_sampling
from lcjax.cfr.traversal.probe import ProbeConfig, probe_sampling
from lcjax.cfr.traversal.results import TraversalCounters, TraversalResult

__all__ = [
    "ExternalConfig",
    "ProbeConfig",
    "TraversalCounters",
    "TraversalResult",
    "external_sampling",
    "probe_sampling",
]
