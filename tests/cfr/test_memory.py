"""Tests of the on-device reservoir buffer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.cfr.memory import (
    Reservoir,
    reservoir_add,
    reservoir_cumulative_weights,
    reservoir_draws,
    reservoir_init,
    reservoir_sample,
    reservoir_sample_weighted,
    ring_add,
)
from lcjax.cfr.samples import AdvantageSample



@jax.jit
def _add_and_draws(key, reservoir, items, valid):
    """reservoir_add, plus the draws it used, recomputed from the same key and state.

    Compiling is the slow part of these tests on CPU, so most tests share this one
    program (same shapes) instead of jitting each function separately.
    """
    return reservoir_add(key, reservoir, items, valid), reservoir_draws(key, reservoir.seen, valid)


def _add(key, reservoir, items, valid):
    return _add_and_draws(key, reservoir, items, valid)[0]


CAPACITY = 8
BATCH = 12


def _example():
    """One item: an int id, a float payload and a bool flag (shapes differ per leaf)."""
    return {
        "id": jnp.zeros((), jnp.int32),
        "x": jnp.zeros((2,), jnp.float32),
        "flag": jnp.zeros((), bool),
    }


def _items(ids: np.ndarray):
    ids = np.asarray(ids, np.int32)
    return {
        "id": jnp.asarray(ids),
        "x": jnp.asarray(np.stack([ids * 0.5, -ids], axis=-1).astype(np.float32)),
        "flag": jnp.asarray(ids % 2 == 1),
    }


def test_fill_below_capacity_keeps_order_and_skips_invalid():
    reservoir = reservoir_init(CAPACITY, _example())
    assert int(reservoir.size) == 0 and int(reservoir.seen) == 0
    valid = np.zeros(BATCH, bool)
    valid[[0, 2, 3, 7]] = True
    ids = np.arange(100, 100 + BATCH)
    reservoir = _add(jax.random.key(0), reservoir, _items(ids), jnp.asarray(valid))
    assert int(reservoir.size) == 4 and int(reservoir.seen) == 4
    np.testing.assert_array_equal(reservoir.data["id"][:4], [100, 102, 103, 107])
    np.testing.assert_array_equal(reservoir.data["id"][4:], 0)  # untouched zero fill
    np.testing.assert_array_equal(reservoir.data["x"][:4, 1], [-100, -102, -103, -107])
    np.testing.assert_array_equal(reservoir.data["flag"][:4], [False, False, True, True])

    # A second batch continues where the first stopped, then fills up to capacity.
    valid2 = np.zeros(BATCH, bool)
    valid2[[1, 5]] = True
    reservoir = _add(jax.random.key(1), reservoir, _items(ids + 100), jnp.asarray(valid2))
    assert int(reservoir.size) == 6 and int(reservoir.seen) == 6
    np.testing.assert_array_equal(reservoir.data["id"][:6], [100, 102, 103, 107, 201, 205])


def test_ring_add_keeps_the_most_recent_items():
    ring = jax.jit(ring_add)
    buffer = reservoir_init(CAPACITY, _example())
    valid = np.ones(BATCH, bool)
    valid[[1, 4]] = False  # 10 valid items: 100, 102, 103, 105, ..., 111
    ids = np.arange(100, 100 + BATCH)
    buffer = ring(buffer, _items(ids), jnp.asarray(valid))
    assert int(buffer.size) == CAPACITY and int(buffer.seen) == 10
    kept = ids[valid]
    # Item n (0-based among valid ones) sits in slot n % 8: the last 8 of the 10 remain.
    want = np.empty(CAPACITY, int)
    for n, item in enumerate(kept):
        want[n % CAPACITY] = item
    np.testing.assert_array_equal(buffer.data["id"], want)
    assert set(np.asarray(buffer.data["id"]).tolist()) == set(kept[-CAPACITY:].tolist())
    # The next batch overwrites the oldest slots first.
    buffer = ring(buffer, _items(ids + 100), jnp.asarray(np.arange(BATCH) < 3))
    assert int(buffer.seen) == 13
    assert set(np.asarray(buffer.data["id"]).tolist()) == set(kept[-5:].tolist()) | {200, 201, 202}


def test_invalid_items_change_nothing_even_when_full():
    reservoir = reservoir_init(CAPACITY, _example())
    all_valid = jnp.ones(BATCH, bool)
    reservoir = _add(jax.random.key(0), reservoir, _items(np.arange(BATCH)), all_valid)
    assert int(reservoir.size) == CAPACITY and int(reservoir.seen) == BATCH
    nothing = jnp.zeros(BATCH, bool)
    after = _add(jax.random.key(1), reservoir, _items(np.arange(BATCH) + 50), nothing)
    for a, b in zip(jax.tree.leaves(reservoir), jax.tree.leaves(after)):
        np.testing.assert_array_equal(a, b)


def _python_algorithm_r(capacity, batches):
    """One-by-one algorithm R over (ids, valid, draws) batches.

    Returns the stored ids per slot, the count seen, and how often an item overwrote a slot
    already written in the same batch.
    """
    slots = [0] * capacity
    seen = 0
    conflicts = 0
    for ids, valid, draws in batches:
        written = set()
        for b in range(len(ids)):
            if not valid[b]:
                continue
            n = seen
            assert 0 <= draws[b] <= n
            slot = n if n < capacity else int(draws[b])
            if slot < capacity:
                conflicts += slot in written
                written.add(slot)
                slots[slot] = int(ids[b])
            seen += 1
    return slots, seen, conflicts


def test_matches_one_by_one_algorithm_r_with_same_draws():
    rng = np.random.default_rng(0)
    reservoir = reservoir_init(CAPACITY, _example())
    key = jax.random.key(42)
    batches = []
    next_id = 1
    for _ in range(25):
        key, add_key = jax.random.split(key)
        ids = np.arange(next_id, next_id + BATCH)
        next_id += BATCH
        valid = rng.random(BATCH) < 0.7
        reservoir, draws = _add_and_draws(add_key, reservoir, _items(ids), jnp.asarray(valid))
        batches.append((ids, valid, np.asarray(draws)))

    expected, seen, conflicts = _python_algorithm_r(CAPACITY, batches)
    # Same-slot writes inside one batch did happen, so last-writer-wins was exercised.
    assert conflicts > 0
    assert int(reservoir.seen) == seen and int(reservoir.size) == CAPACITY
    np.testing.assert_array_equal(reservoir.data["id"], expected)
    # The other leaves moved together with the id.
    ids = np.asarray(reservoir.data["id"])
    np.testing.assert_array_equal(reservoir.data["x"][:, 0], ids * 0.5)
    np.testing.assert_array_equal(reservoir.data["flag"], ids % 2 == 1)


def test_seen_saturates_instead_of_wrapping():
    limit = np.iinfo(np.int32).max
    reservoir = reservoir_init(CAPACITY, _example())
    reservoir = reservoir.replace(seen=jnp.int32(limit - 3), size=jnp.int32(CAPACITY))
    reservoir = _add(jax.random.key(0), reservoir, _items(np.arange(BATCH)), jnp.ones(BATCH, bool))
    assert int(reservoir.seen) == limit and int(reservoir.size) == CAPACITY


def test_inclusion_frequency_is_uniform():
    """After n items into capacity c, every item is stored with probability c/n."""
    capacity, batch, num_batches, num_seeds = 64, 125, 8, 4000
    n = batch * num_batches
    ids = jnp.arange(n, dtype=jnp.int32).reshape(num_batches, batch)

    def run(key):
        reservoir = reservoir_init(capacity, jnp.zeros((), jnp.int32))

        def body(reservoir, inputs):
            add_key, batch_ids = inputs
            return reservoir_add(add_key, reservoir, batch_ids, jnp.ones(batch, bool)), None

        keys = jax.random.split(key, num_batches)
        reservoir, _ = jax.lax.scan(body, reservoir, (keys, ids))
        return reservoir.data

    stored = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(7), num_seeds)))
    # Each seed holds c distinct items.
    assert all(len(set(row)) == capacity for row in stored[:50])
    counts = np.bincount(stored.ravel(), minlength=n)
    assert counts.sum() == capacity * num_seeds

    p = capacity / n
    freq = counts / num_seeds
    # Per item: count ~ Binomial(num_seeds, p), std = sqrt(p (1-p) / S) ~= 0.0039; with
    # 1000 items the largest |z| is ~3.3 typically, so 5 std bounds it safely.
    item_std = np.sqrt(p * (1 - p) / num_seeds)
    assert np.max(np.abs(freq - p)) < 5 * item_std
    # Per block of 100 consecutive items (catches order bias, e.g. early vs late items):
    # the mean of 100 item frequencies has std <= item_std / 10 (the items of a seed are
    # negatively correlated, which only shrinks it).
    block = freq.reshape(10, 100).mean(axis=1)
    assert np.max(np.abs(block - p)) < 5 * item_std / 10
    # Dispersion across items: sum of squared z-scores is ~chi2 with ~n dof (mean n,
    # std sqrt(2n) ~= 45); a wrong per-item probability inflates it.
    chi2 = np.sum((freq - p) ** 2) / item_std**2
    assert abs(chi2 - n) < 5 * np.sqrt(2 * n)


def test_sample_is_uniform_over_stored_items():
    # Ten items stored in a buffer of 32 (filled through `data` directly).
    reservoir = reservoir_init(32, jnp.zeros((), jnp.int32))
    reservoir = reservoir.replace(
        data=reservoir.data.at[:10].set(jnp.arange(1, 11)), size=jnp.int32(10), seen=jnp.int32(10)
    )
    sample = jax.jit(reservoir_sample, static_argnums=2)
    draws = np.asarray(sample(jax.random.key(1), reservoir, 100_000))
    assert draws.shape == (100_000,)
    # Only stored items (1..10) are drawn, never the zero-filled empty slots.
    assert draws.min() == 1 and draws.max() == 10
    counts = np.bincount(draws, minlength=11)[1:]
    # Each count ~ Binomial(1e5, 0.1): std ~= 95; allow 5 std.
    assert np.max(np.abs(counts - 10_000)) < 5 * np.sqrt(100_000 * 0.1 * 0.9)


@jax.jit
def _weighted_draws(key, reservoir, weights):
    cumulative = reservoir_cumulative_weights(reservoir, weights)
    return reservoir_sample_weighted(key, reservoir, cumulative, 100_000)


def test_weighted_sample_draws_in_proportion_to_the_weights():
    # Ten items stored in a buffer of 32; slots past the size hold large weights that must
    # count as 0, and item 3 has weight 0.
    reservoir = reservoir_init(32, jnp.zeros((), jnp.int32))
    reservoir = reservoir.replace(
        data=reservoir.data.at[:10].set(jnp.arange(1, 11)), size=jnp.int32(10), seen=jnp.int32(10)
    )
    weights = np.full(32, 1000.0, np.float32)
    weights[:10] = np.arange(1, 11) ** 2
    weights[2] = 0.0
    draws = np.asarray(_weighted_draws(jax.random.key(2), reservoir, jnp.asarray(weights)))
    assert draws.min() >= 1 and draws.max() <= 10
    counts = np.bincount(draws, minlength=11)[1:]
    assert counts[2] == 0
    p = weights[:10] / weights[:10].sum()
    # Each count ~ Binomial(1e5, p_i); allow 5 std.
    assert np.all(np.abs(counts - 100_000 * p) < 5 * np.sqrt(100_000 * p * (1 - p)) + 1)


def test_weighted_sample_without_weight_is_uniform_over_stored_items():
    reservoir = reservoir_init(32, jnp.zeros((), jnp.int32))
    reservoir = reservoir.replace(
        data=reservoir.data.at[:10].set(jnp.arange(1, 11)), size=jnp.int32(10), seen=jnp.int32(10)
    )
    weights = np.zeros(32, np.float32)
    weights[10:] = 5.0  # past the size: ignored
    draws = np.asarray(_weighted_draws(jax.random.key(3), reservoir, jnp.asarray(weights)))
    counts = np.bincount(draws, minlength=11)[1:]
    assert draws.min() == 1 and draws.max() == 10
    assert np.max(np.abs(counts - 10_000)) < 5 * np.sqrt(100_000 * 0.1 * 0.9)
    # An empty reservoir yields slot 0's zero fill, as reservoir_sample does.
    empty = reservoir_init(32, jnp.zeros((), jnp.int32))
    assert not np.asarray(_weighted_draws(jax.random.key(4), empty, jnp.ones(32))).any()


@jax.jit
def _add_and_sample(key, reservoir, items, valid):
    add_key, sample_key = jax.random.split(key)
    reservoir = reservoir_add(add_key, reservoir, items, valid)
    return reservoir, reservoir_sample(sample_key, reservoir, 64)


def test_storage_dtypes_round_trip_and_empty_sample():
    example = AdvantageSample(
        observation=jnp.zeros(5, jnp.float32),
        mask=jnp.zeros(3, bool),
        regret=jnp.zeros(3, jnp.float32),
        iteration=jnp.zeros((), jnp.float32),
    )
    storage = AdvantageSample(observation=jnp.bfloat16, mask=jnp.uint8, regret=None, iteration=None)
    empty = reservoir_init(16, example, storage)
    assert empty.data.observation.dtype == jnp.uint16  # bfloat16 bits
    assert empty.data.mask.dtype == jnp.uint8
    assert empty.data.regret.dtype == jnp.float32
    assert empty.data.observation.shape == (16, 5) and empty.data.iteration.shape == (16,)

    rng = np.random.default_rng(0)
    items = AdvantageSample(
        observation=jnp.asarray(rng.normal(size=(4, 5)).astype(np.float32)),
        mask=jnp.asarray(rng.random((4, 3)) < 0.5),
        regret=jnp.asarray(rng.normal(size=(4, 3)).astype(np.float32)),
        iteration=jnp.arange(1.0, 5.0),
    )

    # Nothing valid offered: the reservoir stays empty and sampling it gives the decoded
    # zero fill, no NaN.
    still_empty, batch = _add_and_sample(jax.random.key(0), empty, items, jnp.zeros(4, bool))
    assert int(still_empty.size) == 0
    for got, want in zip(batch, example):
        assert got.dtype == want.dtype and got.shape == (64, *want.shape)
        assert not np.any(np.asarray(got))

    reservoir, batch = _add_and_sample(jax.random.key(1), empty, items, jnp.ones(4, bool))
    assert isinstance(batch, AdvantageSample)
    for got, want in zip(batch, example):
        assert got.dtype == want.dtype
    # Identify each sampled row by its exactly stored iteration, then compare fields.
    rows = np.asarray(batch.iteration).astype(int) - 1
    assert sorted(set(rows)) == [0, 1, 2, 3]
    np.testing.assert_array_equal(batch.mask, np.asarray(items.mask)[rows])
    np.testing.assert_array_equal(batch.regret, np.asarray(items.regret)[rows])
    rounded = np.asarray(items.observation.astype(jnp.bfloat16).astype(jnp.float32))
    np.testing.assert_array_equal(batch.observation, rounded[rows])


def test_reservoir_is_a_pytree_through_jit():
    reservoir = reservoir_init(4, jnp.zeros(2, jnp.float32), jnp.bfloat16)
    out = jax.jit(lambda r: r)(reservoir)
    assert isinstance(out, Reservoir)
    assert out.item_dtypes == (jnp.float32,) and out.data.dtype == jnp.uint16
    # The item dtypes are static structure, not leaves: only data, size and seen are arrays.
    assert [x.shape for x in jax.tree.leaves(reservoir)] == [(4, 2), (), ()]
    assert jax.eval_shape(lambda: reservoir).item_dtypes == (jnp.float32,)


def test_bfloat16_storage_inserts_without_touching_the_whole_buffer():
    """bfloat16 is stored as uint16 bits: XLA:CPU lowers a bfloat16 scatter to a float32
    round trip of the whole buffer, which cost seconds per insert at 2M items."""
    capacity = 100_000
    reservoir = reservoir_init(capacity, jnp.zeros(7, jnp.float32), jnp.bfloat16)
    items = jnp.asarray(np.random.default_rng(0).normal(size=(8, 7)).astype(np.float32))
    add = jax.jit(reservoir_add, donate_argnums=(1,))
    hlo = add.lower(jax.random.key(0), reservoir, items).compile().as_text()
    assert f"f32[{capacity},7]" not in hlo and f"bf16[{capacity},7]" not in hlo
    reservoir = add(jax.random.key(0), reservoir, items)
    stored = jax.lax.bitcast_convert_type(reservoir.data[:8], jnp.bfloat16)
    np.testing.assert_array_equal(stored, items.astype(jnp.bfloat16))
    assert reservoir_sample(jax.random.key(1), reservoir, 4).dtype == jnp.float32
    with pytest.raises(ValueError, match="bfloat16"):
        reservoir_init(4, jnp.zeros(2, jnp.float32), jnp.uint16)
