"""Regret matching: turn cumulative (or predicted) regrets into a strategy.

Generic over the game: it only sees a regret vector and a legal-action mask.

`regret_power` generalises it to Hart and Mas-Colell's potential-based strategies (S. Hart
and A. Mas-Colell, 2001, "A General Class of Adaptive Strategies", Journal of Economic
Theory 98: 26-54): with the potential sum_a max(R(a), 0) ** p, the strategy plays each
action with probability proportional to max(R(a), 0) ** (p - 1). For every p >= 2 this is
the polynomially weighted forecaster, whose regret grows as sqrt(T) (N. Cesa-Bianchi and
G. Lugosi, 2006, "Prediction, Learning, and Games", Corollary 2.1), the no-regret
guarantee CFR needs at each information set (p = 2 is regret matching).
Exponents above 1 put less weight on actions whose positive regret is small, which with
noisy, learned regrets is mostly noise. The strategy is unchanged when all regrets are
scaled by one positive factor, so it can be read off a network that predicts a weighted
mean of regrets instead of their sum.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def regret_power(regrets: Array, exponent: float) -> Array:
    """float32[...]: sign(r) * |r| ** exponent, elementwise.

    Monotone and sign-preserving, so `regret_matching` of the result plays each legal
    action with probability proportional to max(r, 0) ** exponent (Hart and Mas-Colell's
    strategy for the potential with p = exponent + 1; the module docstring), and its
    fallback still plays the largest regret. `exponent` 1 returns the regrets as float32.
    """
    regrets = jnp.asarray(regrets, jnp.float32)
    if exponent == 1.0:
        return regrets
    return jnp.sign(regrets) * jnp.abs(regrets) ** exponent


def powered_apply(apply_fn, exponent: float):
    """`apply_fn(params, x)` followed by `regret_power(., exponent)`: the regrets as the
    current strategy weighs them (`apply_fn` itself when `exponent` is 1)."""
    if exponent == 1.0:
        return apply_fn

    def apply(params, x):
        return regret_power(apply_fn(params, x), exponent)

    return apply


def regret_matching(regrets: Array, mask: Array) -> Array:
    """The regret-matching strategy over the legal actions.

    Plays each legal action with probability proportional to its positive regret. When no
    legal action has positive regret, plays the legal action(s) of largest regret, splitting
    ties evenly between all legal maximizers (the Deep CFR paper's choice; better than
    uniform when the regrets are network predictions).

    Args:
      regrets: float[..., A], any float dtype; illegal entries may hold anything finite or
        not, they are never read into the result.
      mask: bool[..., A], True for the legal actions; broadcastable against `regrets`.

    Returns:
      float32[..., A]: a probability vector per row; exactly 0 on illegal actions. A row
      with no legal action is all zeros (never NaN).
    """
    regrets = jnp.asarray(regrets, jnp.float32)
    mask = jnp.asarray(mask, bool)
    regrets, mask = jnp.broadcast_arrays(regrets, mask)

    # Select (not multiply) so that NaN/inf in illegal entries cannot leak in.
    positive = jnp.where(mask, jnp.maximum(regrets, 0.0), 0.0)
    total = jnp.sum(positive, axis=-1, keepdims=True)
    has_positive = total > 0.0
    proportional = positive / jnp.where(has_positive, total, 1.0)

    # Fallback: uniform over the legal argmax set. Exact equality keeps ties exact.
    legal_regrets = jnp.where(mask, regrets, -jnp.inf)
    best = jnp.max(legal_regrets, axis=-1, keepdims=True)
    is_best = mask & (legal_regrets == best)
    num_best = jnp.sum(is_best, axis=-1, keepdims=True)
    greedy = jnp.where(is_best, 1.0 / jnp.maximum(num_best, 1).astype(jnp.float32), 0.0)

    return jnp.where(has_positive, proportional, greedy)
