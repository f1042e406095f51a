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


def make_act(game, policy: PolicyFn, *, greedy: bool = False):
    """A game-playing policy `act(params, key, state) -> int32 action` for ONE state.

    It observes the state from the acting player's side and samples from (or, with
    `greedy`, takes the most likely action of) `policy(params, obs, mask)`. Callers vmap it
    over games; `params` stays unbatched, so the forward is one batched matmul.

    Args:
      game: a game of `lcjax.env.protocol`.
      policy: from `average_policy` or `current_policy`.
      greedy: play the argmax instead of sampling.
    """

    def act(params: Params, key: Array, state) -> Array:
        mask = game.legal_action_mask(state)
        obs = game.observe(state, state.current_player)
        probs = policy(params, obs[None], mask[None])[0]
        if greedy:
            return jnp.argmax(jnp.where(mask, probs, -1.0)).astype(jnp.int32)
        # A legal action even if rounding leaves the cumulative sum short of the draw.
        cdf = jnp.cumsum(probs)
        u = jax.random.uniform(key) * cdf[-1]
        last = probs.shape[-1] - 1 - jnp.argmax(probs[::-1] > 0)
        return jnp.minimum(jnp.argmax(cdf > u), last).astype(jnp.int32)

    return act
