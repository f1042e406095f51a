"""lcjax.onehot gives what jnp indexing gives, without gathers or scatters under vmap."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax import onehot


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.int32, jnp.float32, jnp.bool_])
@pytest.mark.parametrize("shape", [(2,), (2, 5), (7,), (3, 4, 2)])
def test_take_put_add_match_indexing(shape, dtype):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(0, 5, size=shape)).astype(dtype)
    for axis in range(len(shape)):
        for i in range(shape[axis]):
            idx = (slice(None),) * axis + (i,)
            np.testing.assert_array_equal(onehot.take(x, jnp.int32(i), axis=axis), x[idx])
            value = jnp.ones(x[idx].shape, dtype)
            np.testing.assert_array_equal(onehot.put(x, jnp.int32(i), value, axis=axis), x.at[idx].set(value))
            np.testing.assert_array_equal(onehot.put(x, jnp.int32(i), True, axis=axis), x.at[idx].set(True))
            if dtype != jnp.bool_:
                np.testing.assert_array_equal(onehot.add(x, jnp.int32(i), 3, axis=axis), x.at[idx].add(3))
        assert onehot.take(x, jnp.int32(i), axis=axis).dtype == x.dtype


def test_tuple_index_reads_and_writes_one_element():
    x = jnp.arange(24, dtype=jnp.int32).reshape(2, 3, 4)
    assert int(onehot.take(x, (jnp.int32(1), jnp.int32(2)))[3]) == int(x[1, 2, 3])
    np.testing.assert_array_equal(onehot.put(x, (1, 2), -1), x.at[1, 2].set(-1))
    np.testing.assert_array_equal(onehot.put(x, (0, 1), 7, axis=1), x.at[:, 0, 1].set(7))
    np.testing.assert_array_equal(onehot.add(x, (1, 0), 5), x.at[1, 0].add(5))


def test_out_of_range_reads_zero_and_writes_nothing():
    x = jnp.array([4, 5, 6], jnp.int32)
    for i in (-1, 3, 10):
        assert int(onehot.take(x, jnp.int32(i))) == 0
        np.testing.assert_array_equal(onehot.put(x, jnp.int32(i), 9), x)
        np.testing.assert_array_equal(onehot.add(x, jnp.int32(i), 9), x)
    assert int(onehot.take(jnp.array([4, 5]), jnp.int32(2))) == 0
    assert not bool(onehot.take(jnp.array([True, True]), jnp.int32(-1)))


def test_mask_and_lookup():
    idx = jnp.array([[0, 2], [-1, 5]], jnp.int8)
    m = onehot.mask(idx, 3)
    assert m.shape == (2, 2, 3) and m.dtype == jnp.bool_
    np.testing.assert_array_equal(m, np.eye(4, 3, dtype=bool)[np.array([[0, 2], [3, 3]])])
    assert onehot.mask(jnp.int8(100), 200)[100]  # no int8 overflow of the iota
    table = jnp.array([1.5, -2.0, 3.0])
    np.testing.assert_array_equal(onehot.lookup(table, jnp.array([2, 0, 7])), [3.0, 1.5, 0.0])
    np.testing.assert_array_equal(onehot.lookup(jnp.array([True, False]), jnp.array([0, 1, 2])), [True, False, False])


def test_vmapped_helpers_hold_no_gather_or_scatter():
    x = jnp.zeros((16, 3, 4), jnp.int32)
    i = jnp.arange(16, dtype=jnp.int32) % 3
    j = jnp.arange(16, dtype=jnp.int32) % 4
    fns = [
        lambda x, i, j: onehot.take(x, i),
        lambda x, i, j: onehot.take(x, (i, j)),
        lambda x, i, j: onehot.put(x, (i, j), 1),
        lambda x, i, j: onehot.add(x, i, 1),
        lambda x, i, j: onehot.lookup(x[0], j),
    ]
    for fn in fns:
        assert onehot.indexing_primitives(jax.vmap(fn), x, i, j) == set()
    # The same reads written as indexing do gather: the check above can fail.
    assert onehot.indexing_primitives(jax.vmap(lambda x, i, j: x[i, j]), x, i, j)


def test_walker_finds_nested_indexing():
    """The walker sees a gather inside a cond inside a jit (so a pass means something)."""

    @jax.jit
    def fn(x, i):
        return jax.lax.cond(i > 0, lambda: x[i], lambda: x[0])

    found = onehot.indexing_primitives(jax.vmap(fn), jnp.zeros((8, 4)), jnp.arange(8))
    assert found & {"gather", "dynamic_slice"}
