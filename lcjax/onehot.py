"""Reading and writing small arrays at traced indices with one-hot selects.

Under `jax.vmap`, `x[i]` and `x.at[i].set(v)` with a traced (per-example) index `i` lower to
a gather or scatter with batched indices, and XLA:CPU runs those as a loop over elements
that neither vectorizes nor fuses with the code around it. Comparing an iota with the index
and selecting (`jnp.where(jnp.arange(n) == i, ...)`, or summing the selected values) is
elementwise: it fuses into its neighbours and vectorizes across the batch. For the small
arrays of game states (a few to a few hundred elements) the extra arithmetic costs less than
the loop, on every backend.

Every function here takes unbatched arrays and scalar indices (vmap adds the batch), never
indexes with a traced value, and is exact: it returns what the indexing it replaces returns
for an index in range. An index out of range reads zeros (False) and writes nothing, where
jnp indexing would clamp or wrap; callers that may pass such an index say so.

The game engines in `lcjax.env` use these for all indexing at traced positions, so nothing
downstream has to rewrite them; `tests/env/test_gather_free.py` checks that no gather,
scatter or dynamic slice is left in their vmapped functions.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array


def mask(index: Array, size: int) -> Array:
    """bool[*index.shape, size]: True at position `index` along a new last axis.

    Args:
      index: int array of any shape; entries outside [0, size) give an all-False row.
      size: the length of the new axis.
    """
    index = jnp.asarray(index).astype(jnp.int32)  # int8 card ids would overflow the iota
    return index[..., None] == jnp.arange(size, dtype=jnp.int32)


def _axis_hit(shape: Sequence[int], axis: int, index: Array) -> Array:
    """bool broadcastable to `shape` (size 1 on all axes but `axis`): True at `index` there."""
    bshape = [1] * len(shape)
    bshape[axis] = shape[axis]
    return lax.broadcasted_iota(jnp.int32, tuple(bshape), axis) == jnp.asarray(index, jnp.int32)


def _hit(shape: Sequence[int], index, axis: int) -> tuple[Array, tuple[int, ...]]:
    """(bool mask broadcastable to `shape`, the indexed axes) for a scalar or a tuple index."""
    indices = index if isinstance(index, tuple) else (index,)
    axis = axis % len(shape)
    axes = tuple(range(axis, axis + len(indices)))
    hit = _axis_hit(shape, axes[0], indices[0])
    for a, i in zip(axes[1:], indices[1:]):
        hit = hit & _axis_hit(shape, a, i)
    return hit, axes


def take(x: Array, index, axis: int = 0) -> Array:
    """`x[index]` along `axis`, as a select: the shape of `x` without the indexed axes.

    Args:
      x: any array; the same dtype comes back.
      index: an int scalar, or a tuple of int scalars indexing consecutive axes starting at
        `axis` (`take(x, (i, j))` is `x[i, j]`). Out of range: zeros (False for bool).
      axis: the first indexed axis.
    """
    x = jnp.asarray(x)
    # Also for two rows (a player's row): a masked sum measured faster under vmap on CPU
    # than `jnp.where(index == 0, x[0], x[1])`.
    hit, axes = _hit(x.shape, index, axis)
    if x.dtype == jnp.bool_:
        return jnp.any(hit & x, axis=axes)
    return jnp.sum(jnp.where(hit, x, jnp.zeros((), x.dtype)), axis=axes, dtype=x.dtype)


def lookup(table: Array, indices: Array) -> Array:
    """`table[indices]` for a 1-D table and int `indices` of any shape (0 / False out of range).

    Args:
      table: [n], the values, e.g. one per color.
      indices: int, any shape.

    Returns:
      indices.shape, table's dtype.
    """
    table = jnp.asarray(table)
    hit = mask(indices, table.shape[0])
    if table.dtype == jnp.bool_:
        return jnp.any(hit & table, axis=-1)
    return jnp.sum(jnp.where(hit, table, jnp.zeros((), table.dtype)), axis=-1, dtype=table.dtype)


def _slice_value(x: Array, value, axes: tuple[int, ...]) -> Array:
    """`value` in x's dtype with size-1 axes at `axes`, so it broadcasts against `x`."""
    value = jnp.asarray(value).astype(x.dtype)
    if value.ndim == 0:
        return value
    return jnp.expand_dims(value, axes)


def put(x: Array, index, value, axis: int = 0) -> Array:
    """`x.at[index].set(value)` along `axis`, as a select; an index out of range writes nothing.

    Args:
      x: any array; the result has its shape and dtype.
      index: an int scalar, or a tuple of int scalars for consecutive axes from `axis`.
      value: a scalar, or an array shaped like `x` without the indexed axes.
      axis: the first indexed axis.
    """
    x = jnp.asarray(x)
    hit, axes = _hit(x.shape, index, axis)
    return jnp.where(hit, _slice_value(x, value, axes), x)


def add(x: Array, index, value, axis: int = 0) -> Array:
    """`x.at[index].add(value)` along `axis`, as a select; an index out of range adds nothing.

    Args: as for `put`.
    """
    x = jnp.asarray(x)
    hit, axes = _hit(x.shape, index, axis)
    return jnp.where(hit, x + _slice_value(x, value, axes), x)


# ---------------------------------------------------------------------------- checking
_INDEXING_PRIMITIVES = ("gather", "dynamic_slice", "dynamic_update_slice")


def _subjaxprs(value):
    """The jaxprs held by one equation parameter (a jaxpr, or a tuple/list holding some)."""
    from jax.extend.core import ClosedJaxpr, Jaxpr

    if isinstance(value, ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _subjaxprs(item)


def _primitive_names(jaxpr) -> set[str]:
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for value in eqn.params.values():
            for sub in _subjaxprs(value):
                names |= _primitive_names(sub)
    return names


def indexing_primitives(fn, *args) -> set[str]:
    """The gather, scatter and dynamic-slice primitives in the jaxpr of `fn(*args)`.

    Walks nested jaxprs too (jit, cond branches, loop bodies, custom rules), through the
    public `jax.extend.core` types. For tests: trace `jax.vmap(fn)` on a batch and assert
    the result is empty to know that `fn` indexes only through this module's selects.
    """
    names = _primitive_names(jax.make_jaxpr(fn)(*args).jaxpr)
    return {n for n in names if n in _INDEXING_PRIMITIVES or n.startswith("scatter")}
