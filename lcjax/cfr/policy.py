"""Policies read off a Deep CFR solver: batched, pure functions of network parameters.

* The average policy is the strategy network's masked softmax: it approximates the
  iteration-weighted average strategy, which is what converges to a Nash equilibrium. One
  network serves both players.
* The current policy (the current strategy) is regret matching on the acting player's
  advantage network: the strategy the last iteration would play. This module is its one
  definition for evaluation (`lcjax.evaluate`, bot matches and exploitability alike). The
  solver hands it the advantage forward through `lcjax.cfr.regret.powered_apply`, so it
  follows `optimization.regret_exponent` as the traversals do.

Both have the signature `(params, observations f32[N, D], masks bool[N, A],
players int32[N]) -> f32[N, A]`, where `players` is each row's acting player (the average
policy ignores it), and jit; `bind` fixes the parameters, and `make_act` turns a policy
into a game-playing `act(params, key, state)`.
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
PolicyFn = Callable[[Params, Array, Array, Array], Array]


def average_policy(apply_fn: ApplyFn) -> PolicyFn:
    """The average policy of a strategy network with forward `apply_fn`.

    Returns:
      `policy(params, observations f32[N, D], masks bool[N, A], players) -> f32[N, A]`;
      `players` is ignored (None is fine).
    """

    def policy(params: Params, observations: Array, masks: Array, players: Array | None = None) -> Array:
        del players  # one strategy network for both seats
        return masked_logits_to_probs(apply_fn(params, observations), masks)

    return policy


def current_policy(apply_fn: ApplyFn) -> PolicyFn:
    """Regret matching on the acting player's advantage network (forward `apply_fn`).

    Returns:
      `policy((params_0, params_1), observations f32[N, D], masks bool[N, A],
      players int32[N]) -> f32[N, A]`: row n uses player `players[n]`'s network. Both
      networks run on every row and a select keeps one (branch-free under vmap).
    """

    def policy(params: tuple[Params, Params], observations: Array, masks: Array, players: Array) -> Array:
        regrets_0 = apply_fn(params[0], observations)
        regrets_1 = apply_fn(params[1], observations)
        regrets = jnp.where(jnp.expand_dims(players, -1) == 0, regrets_0, regrets_1)
        return regret_matching(regrets, masks)

    return policy


def bind(policy: PolicyFn, params: Params) -> Callable[..., Array]:
    """`policy` with `params` fixed and jitted: `(observations, masks, players=None) -> probs`.

    JAX keys its trace cache on the function object, so binding the same `policy` to new
    parameters of the same shapes reuses the compiled read-off.
    """
    jitted = jax.jit(policy)

    def bound(observations: Array, masks: Array, players: Array | None = None) -> Array:
        players = None if players is None else jnp.asarray(players, jnp.int32)
        return jitted(params, jnp.asarray(observations, jnp.float32), jnp.asarray(masks, bool), players)

    return bound


def make_act(game, policy: PolicyFn, *, greedy: bool = False):
    """A game-playing policy `act(params, key, state) -> int32 action` for ONE state.

    It observes the state from the acting player's side and samples from (or, with
    `greedy`, takes the most likely action of) `policy(params, obs, mask)`. Callers vmap it
    over games; `params` stays unbatched, so the forward is one batched matmul.

    Args:
      game: a game of `lcjax.env.protocol`.
      policy: from `average_policy` or `current_policy`; it gets the acting player.
      greedy: play the argmax instead of sampling.
    """

    def act(params: Params, key: Array, state) -> Array:
        mask = game.legal_action_mask(state)
        obs = game.observe(state, state.current_player)
        probs = policy(params, obs[None], mask[None], state.current_player[None])[0]
        if greedy:
            return jnp.argmax(jnp.where(mask, probs, -1.0)).astype(jnp.int32)
        # A legal action even if rounding leaves the cumulative sum short of the draw.
        cdf = jnp.cumsum(probs)
        u = jax.random.uniform(key) * cdf[-1]
        last = probs.shape[-1] - 1 - jnp.argmax(probs[::-1] > 0)
        return jnp.minimum(jnp.argmax(cdf > u), last).astype(jnp.int32)

    return act
