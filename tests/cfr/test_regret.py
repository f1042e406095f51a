"""Exact tests of regret matching."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.cfr.regret import powered_apply, regret_matching, regret_power

T, F = True, False


@pytest.mark.parametrize(
    "regrets, mask, expected",
    [
        # Proportional to positive regret; the illegal action's large regret is ignored.
        ([1.0, 2.0, -1.0, 3.0], [T, T, T, F], [1 / 3, 2 / 3, 0.0, 0.0]),
        ([0.5, 0.0, 1.5, -2.0], [T, T, T, T], [0.25, 0.0, 0.75, 0.0]),
        # All legal regrets negative: argmax, ties split evenly.
        ([-3.0, -1.0, -1.0, -2.0], [T, T, T, T], [0.0, 0.5, 0.5, 0.0]),
        ([-3.0, -4.0, -7.0], [T, T, T], [1.0, 0.0, 0.0]),
        # Only an illegal action is positive: still the legal argmax (tie of two).
        ([-3.0, -2.0, 5.0, -2.0], [T, T, F, T], [0.0, 0.5, 0.0, 0.5]),
        # All zero: every legal action ties.
        ([0.0, 0.0, 0.0], [T, F, T], [0.5, 0.0, 0.5]),
        ([0.0, 0.0, 0.0, 0.0], [T, T, T, F], [1 / 3, 1 / 3, 1 / 3, 0.0]),
        # Single legal action, positive or negative regret.
        ([-5.0, 7.0, 2.0], [T, F, F], [1.0, 0.0, 0.0]),
        ([4.0, 7.0, 2.0], [T, F, F], [1.0, 0.0, 0.0]),
        # No legal action at all: zeros, no NaN.
        ([1.0, -1.0, 0.0], [F, F, F], [0.0, 0.0, 0.0]),
        # Non-finite values on illegal actions never leak.
        ([np.nan, 1.0, np.inf], [F, T, F], [0.0, 1.0, 0.0]),
        ([np.nan, -1.0, -np.inf, -1.0], [F, T, F, T], [0.0, 0.5, 0.0, 0.5]),
    ],
)
def test_hand_computed(regrets, mask, expected):
    got = regret_matching(jnp.array(regrets, jnp.float32), jnp.array(mask))
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), np.array(expected, np.float32), rtol=1e-6, atol=0)
    # Illegal actions get exactly zero.
    assert np.all(np.asarray(got)[~np.array(mask)] == 0.0)


def _reference(regrets: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row-by-row numpy regret matching."""
    out = np.zeros(regrets.shape, np.float64)
    for index in np.ndindex(regrets.shape[:-1]):
        r, m = regrets[index].astype(np.float64), mask[index]
        if not m.any():
            continue
        positive = np.where(m, np.maximum(r, 0.0), 0.0)
        if positive.sum() > 0:
            out[index] = positive / positive.sum()
        else:
            best = r[m].max()
            ties = m & (r == best)
            out[index] = ties / ties.sum()
    return out


def test_batch_matches_reference_under_jit():
    rng = np.random.default_rng(0)
    # Small integers make ties and all-non-positive rows frequent.
    regrets = rng.integers(-3, 3, size=(5, 7, 6)).astype(np.float32)
    mask = rng.random((5, 7, 6)) < 0.6
    mask[0, 0] = False  # a row with no legal action
    got = np.asarray(jax.jit(regret_matching)(regrets, mask))
    assert got.shape == (5, 7, 6)
    np.testing.assert_allclose(got, _reference(regrets, mask), rtol=1e-6, atol=1e-7)
    sums = got.sum(-1)
    legal_rows = mask.any(-1)
    np.testing.assert_allclose(sums[legal_rows], 1.0, rtol=1e-6)
    assert np.all(sums[~legal_rows] == 0.0)
    assert np.all(got[~mask] == 0.0) and np.all(got >= 0.0)


def test_mask_broadcasts_and_low_precision_input():
    regrets = jnp.array([[2.0, 2.0, -1.0], [-1.0, -2.0, -1.0]], jnp.bfloat16)
    mask = jnp.array([T, T, F])
    got = regret_matching(regrets, mask)
    assert got.dtype == jnp.float32 and got.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(got), [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "regrets, mask, exponent, expected",
    [
        # Squared positive regrets: 1 and 4 out of 5.
        ([1.0, 2.0, -1.0, 3.0], [T, T, T, F], 2.0, [0.2, 0.8, 0.0, 0.0]),
        ([0.5, 0.0, 1.5, -2.0], [T, T, T, T], 2.0, [0.1, 0.0, 0.9, 0.0]),
        # Square root: sqrt(1) : sqrt(4) = 1 : 2.
        ([1.0, 4.0, -9.0], [T, T, T], 0.5, [1 / 3, 2 / 3, 0.0]),
        # No positive regret: the fallback still plays the largest one, ties split.
        ([-3.0, -1.0, -1.0, -2.0], [T, T, T, T], 2.0, [0.0, 0.5, 0.5, 0.0]),
        ([-3.0, -4.0, -0.5], [T, T, T], 3.0, [0.0, 0.0, 1.0]),
    ],
)
def test_regret_power_is_hart_mas_colell_strategy(regrets, mask, exponent, expected):
    """Regret matching on `regret_power` plays max(r, 0) ** exponent, normalised."""
    powered = regret_power(jnp.array(regrets, jnp.float32), exponent)
    got = regret_matching(powered, jnp.array(mask))
    np.testing.assert_allclose(np.asarray(got), np.array(expected, np.float32), rtol=1e-6, atol=1e-7)


def test_regret_power_is_scale_free_and_identity_at_one():
    """A positive rescaling of the regrets (a network predicting a weighted mean instead of a
    sum) leaves the strategy unchanged; exponent 1 is plain regret matching."""
    rng = np.random.default_rng(1)
    regrets = rng.normal(size=(64, 6)).astype(np.float32)
    mask = rng.random((64, 6)) < 0.7
    for exponent in (0.5, 2.0, 3.0):
        a = regret_matching(regret_power(regrets, exponent), mask)
        b = regret_matching(regret_power(0.01 * regrets, exponent), mask)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(regret_power(regrets, 1.0)), regrets)
    bf16 = regret_power(jnp.asarray(regrets, jnp.bfloat16), 2.0)
    assert bf16.dtype == jnp.float32


def test_powered_apply_wraps_the_forward():
    def apply(params, x):
        return params * x

    assert powered_apply(apply, 1.0) is apply
    out = powered_apply(apply, 2.0)(jnp.float32(2.0), jnp.array([1.0, -3.0, 0.0]))
    np.testing.assert_allclose(np.asarray(out), [4.0, -36.0, 0.0])
