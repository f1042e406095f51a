"""Policies read off a Deep CFR solver: batched, pure functions of network parameters.

* The average policy is the strategy network's masked softmax: it approximates the
  iteration-weighted average strategy, which is what converges to a Nash equilibrium.
* The current policy is regret matching on one player's advantage network: the strategy
  the last iteration would play.

Both have the signature `(params, observations f32[N, D], masks bool[N, A]) -> f32[N, A]`
and jit; `bind` turns one into the `(observations, masks) -> probs` form that
`lcjax.cfr.exploitability` and the evaluators take.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from lcjax.cfr.networks import masked_logits_to_probs
from lcjax.cfr.regret import regret_matching

Array = jax.Array
Params = Any
ApplyFn = Callable[[Params, Array], Array]
PolicyFn = Callable[[Params, Array, Array], Array]


def average_policy(apply_fn: ApplyFn) -> PolicyFn:
    """The average policy of a strategy network with forward `apply_fn`.

    Returns:
      `policy(params, observations f32[N, D], masks bool[N, A]) -> f32[N, A]`.
    """

    def policy(params: Params, observations: Array, masks: Array) -> Array:
        return masked_logits_to_probs(apply_fn(params, observations), masks)

    return policy


def current_policy(apply_fn: ApplyFn) -> PolicyFn:
    """Regret matching on an advantage network with forward `apply_fn`.

    Give it the parameters of the player whose observations are passed.

    Returns:
      `policy(params, observations f32[N, D], masks bool[N, A]) -> f32[N, A]`.
    """

    def policy(params: Params, observations: Array, masks: Array) -> Array:
        return regret_matching(apply_fn(params, observations), masks)

    return policy


def bind(policy: PolicyFn, params: Params) -> Callable[[Array, Array], Array]:
    """`policy` with `params` fixed and jitted: `(observations, masks) -> probs`."""
    jitted = jax.jit(policy)

    def bound(observations: Array, masks: Array) -> Array:
        return jitted(params, jnp.asarray(observations, jnp.float32), jnp.asarray(masks, bool))

    return bound
