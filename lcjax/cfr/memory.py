"""An on-device reservoir buffer over an arbitrary pytree of arrays.

Deep CFR keeps its advantage and strategy memories as reservoir samples of everything ever
offered to them, so that each stored item is a uniform sample of the whole history. This
module implements that with fixed shapes so that it lives inside `jax.jit`:

* `reservoir_init` allocates a zero-filled buffer of `capacity` items, optionally stored in
  a more compact dtype per leaf (e.g. float32 observations as bfloat16, bool masks as
  uint8) to save device memory.
* `reservoir_add` inserts a batch with the exact semantics of inserting the valid items one
  by one with Vitter's algorithm R, including when several items of the batch land in the
  same slot (the later one wins).
* `reservoir_sample` draws a uniform minibatch (with replacement) and decodes it back to the
  dtypes of the example item; `reservoir_sample_weighted` draws item i with probability
  proportional to a weight w_i, from the cumulative weights `reservoir_cumulative_weights`
  computes once for many draws.

For large buffers, jit the caller with the reservoir donated (`donate_argnums`) so that XLA
updates it in place instead of copying `capacity` items on every insert.

bfloat16 storage is held as the uint16 bit patterns of the bfloat16 values (a uint16 leaf
whose example dtype is floating): XLA:CPU has no bfloat16 scatter and would convert the
whole buffer to float32 and back on every insert (seconds at millions of items), while a
uint16 scatter writes only the inserted rows. Sampling bitcasts the rows back.

The `seen` counter is int32: it saturates at 2**31 - 1 items offered, after which new items
are still accepted with probability capacity / (2**31 - 1) (algorithm R's rate at that
point), so a run never wraps around.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from lcjax.settings import Choice, Int, Settings, setting

Array = jax.Array
PyTree = Any

# Dtypes the observations of the solver's memories may be stored in.
STORAGE_DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class MemoryConfig(Settings):
    """The solver's reservoirs (the `memory` section).

    Attributes:
      advantage_capacity: items per player's advantage reservoir.
      strategy_capacity: items in the strategy reservoir.
      observation_storage: dtype observations are stored in, "float32" or "bfloat16"
        (half the memory).
    """

    advantage_capacity: int = setting(1_000_000, Int(1))
    strategy_capacity: int = setting(1_000_000, Int(1))
    observation_storage: str = setting("float32", Choice(STORAGE_DTYPES))


_INT32_MAX = np.iinfo(np.int32).max


@flax.struct.dataclass
class Reservoir:
    """A reservoir buffer; a pytree, so it passes through `jit`, `scan` and `vmap`.

    Attributes:
      data: pytree like one item, every leaf of shape [capacity, *item_shape] in its storage
        dtype. Slots [0, size) hold the stored items.
      size: int32 scalar, number of items stored (<= capacity).
      seen: int32 scalar, number of valid items ever offered (saturates at 2**31 - 1).
      item_dtypes: static (not a leaf): the item's own dtype for each leaf of `data`, in
        `jax.tree.leaves` order; `reservoir_sample` decodes rows back to these. Being part
        of the tree structure, it goes through `jit` and `eval_shape` without any array.
    """

    data: PyTree
    size: Array
    seen: Array
    item_dtypes: tuple[np.dtype, ...] = flax.struct.field(pytree_node=False)


def reservoir_init(capacity: int, example: PyTree, storage_dtypes: PyTree = None) -> Reservoir:
    """A zero-filled, empty reservoir.

    Args:
      capacity: static int > 0, number of items the buffer holds.
      example: pytree of arrays (or ShapeDtypeStructs) describing ONE item; only shapes
        and dtypes are used.
      storage_dtypes: None (store every leaf in its own dtype), or a pytree with the
        structure of `example` whose leaves are a dtype or None (keep that leaf's dtype).
        Values are converted with `astype` on insert and back on sample, so pick a dtype
        that holds them (bool as uint8 is exact; float32 as bfloat16 keeps ~3 digits, and is
        held as uint16 bits, see the module docstring).

    Returns:
      Reservoir with `size == seen == 0`.
    """
    if capacity <= 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    leaves, treedef = jax.tree.flatten(example)
    if storage_dtypes is None:
        stored = [None] * len(leaves)
    else:
        # flatten_up_to keeps None leaves (a plain flatten would drop them).
        stored = treedef.flatten_up_to(storage_dtypes)
    # ShapeDtypeStructs carry .shape/.dtype; anything else goes through jnp.asarray.
    leaves = [x if hasattr(x, "dtype") and hasattr(x, "shape") else jnp.asarray(x) for x in leaves]
    data = [
        jnp.zeros((capacity, *x.shape), _buffer_dtype(x.dtype, d))
        for x, d in zip(leaves, stored)
    ]
    return Reservoir(
        data=jax.tree.unflatten(treedef, data),
        size=jnp.zeros((), jnp.int32),
        seen=jnp.zeros((), jnp.int32),
        item_dtypes=tuple(jnp.dtype(x.dtype) for x in leaves),
    )


def _buffer_dtype(item_dtype, storage_dtype) -> np.dtype:
    """The dtype of a leaf's buffer: the storage dtype, bfloat16 kept as uint16 bits."""
    if storage_dtype is None:
        storage_dtype = item_dtype
    storage_dtype = jnp.dtype(storage_dtype)
    floating = jnp.issubdtype(jnp.dtype(item_dtype), jnp.floating)
    if storage_dtype == jnp.uint16 and floating:
        raise ValueError("uint16 storage of a floating leaf is reserved for bfloat16 bits; ask for bfloat16")
    if storage_dtype == jnp.bfloat16:
        return jnp.dtype(jnp.uint16)
    return storage_dtype


def _encode(buffer_dtype, x: Array) -> Array:
    """Items `x` in a buffer's dtype (bfloat16 values as uint16 bits, see the module doc)."""
    if buffer_dtype == jnp.uint16 and jnp.issubdtype(x.dtype, jnp.floating):
        return jax.lax.bitcast_convert_type(x.astype(jnp.bfloat16), jnp.uint16)
    return x.astype(buffer_dtype)


def _decode(x: Array, item_dtype) -> Array:
    """Rows of a buffer back in the item's dtype."""
    if x.dtype == jnp.uint16 and jnp.issubdtype(item_dtype, jnp.floating):
        x = jax.lax.bitcast_convert_type(x, jnp.bfloat16)
    return x.astype(item_dtype)


def _positions(seen: Array, valid: Array) -> Array:
    """int32[B]: each item's 0-based index n among all valid items ever offered.

    For an invalid item this is the index the next valid item would get; it is never used.
    Saturates at 2**31 - 2 so that `n + 1` cannot overflow.
    """
    offsets = jnp.cumsum(valid.astype(jnp.int32)) - valid.astype(jnp.int32)
    headroom = _INT32_MAX - 1 - seen
    return seen + jnp.minimum(offsets, headroom)


def reservoir_draws(key: Array, seen: Array, valid: Array) -> Array:
    """The random draws `reservoir_add` uses: j_b uniform in [0, n_b] for each item b.

    Exposed so that tests (or callers) can reproduce `reservoir_add(key, ...)` exactly:
    `reservoir_add(key, r, items, valid)` equals
    `reservoir_insert(r, items, valid, reservoir_draws(key, r.seen, valid))`.

    Args:
      key: PRNG key.
      seen: int32 scalar, the reservoir's `seen` before the insert.
      valid: bool[B], which items are offered.

    Returns:
      int32[B]: draw j_b, uniform on [0, n_b] where n_b is item b's index among all valid
      items ever offered (see `_positions`). Only used once n_b >= capacity.
    """
    n = _positions(jnp.asarray(seen, jnp.int32), jnp.asarray(valid, bool))
    return jax.random.randint(key, n.shape, 0, n + 1, dtype=jnp.int32)


def _target_slots(capacity: int, seen: Array, valid: Array, draws: Array) -> Array:
    """int32[B]: the slot each item is written to under algorithm R, `capacity` for none.

    Args:
      capacity: static int.
      seen: int32 scalar, items offered before this batch.
      valid: bool[B].
      draws: int32[B], j_b uniform in [0, n_b] (from `reservoir_draws`).
    """
    n = _positions(seen, valid)
    slot = jnp.where(n < capacity, n, draws)
    keep = valid & (slot < capacity)
    return jnp.where(keep, slot, capacity)


def _last_writer(slots: Array) -> Array:
    """bool[B]: True for the item that, inserted in batch order, writes its slot last.

    XLA leaves the order of duplicate scatter indices undefined, so conflicts are resolved
    here: a stable sort groups items by slot while keeping batch order inside a group, and
    the last item of each group wins. O(B log B), with no capacity-sized temporary.
    """
    order = jnp.argsort(slots, stable=True)
    sorted_slots = slots[order]
    is_last_sorted = jnp.concatenate([sorted_slots[1:] != sorted_slots[:-1], jnp.array([True])])
    return jnp.zeros(slots.shape, bool).at[order].set(is_last_sorted)


def reservoir_insert(reservoir: Reservoir, items: PyTree, valid: Array, draws: Array) -> Reservoir:
    """Deterministic algorithm R insert given the random draws (see `reservoir_draws`).

    Args:
      reservoir: the buffer, capacity C.
      items: pytree like the reservoir's items, every leaf with leading axis B (any dtype
        castable to the storage dtype).
      valid: bool[B], which items are offered; invalid ones change nothing.
      draws: int32[B], j_b in [0, n_b] for item b.

    Returns:
      The updated Reservoir.
    """
    capacity = jax.tree.leaves(reservoir.data)[0].shape[0]
    valid = jnp.asarray(valid, bool)
    slots = _target_slots(capacity, reservoir.seen, valid, jnp.asarray(draws, jnp.int32))
    # Writers whose slot is overwritten later in the same batch are sent out of bounds and
    # dropped, which leaves only unique in-bounds indices for the scatter.
    slots = jnp.where(_last_writer(slots), slots, capacity)

    def write(buffer: Array, new: Array) -> Array:
        return buffer.at[slots].set(_encode(buffer.dtype, new), mode="drop")

    data = jax.tree.map(write, reservoir.data, items)
    count = jnp.sum(valid.astype(jnp.int32))
    seen = reservoir.seen + jnp.minimum(count, _INT32_MAX - reservoir.seen)
    size = jnp.minimum(seen, capacity).astype(jnp.int32)
    return reservoir.replace(data=data, size=size, seen=seen)


def reservoir_add(
    key: Array, reservoir: Reservoir, items: PyTree, valid: Array | None = None
) -> Reservoir:
    """Insert a batch with sequential reservoir semantics (Vitter's algorithm R).

    The valid items are processed in batch order: the n-th valid item overall (0-based)
    goes to slot n while n < capacity; otherwise it draws j uniform in [0, n] and replaces
    slot j if j < capacity. When several items of the batch hit the same slot the later
    one wins, exactly as if inserted one by one. Jits with capacity and B static.

    Args:
      key: PRNG key.
      reservoir: the buffer.
      items: pytree like one item, every leaf with a leading batch axis B.
      valid: bool[B], which items are offered (None: all).

    Returns:
      The updated Reservoir.
    """
    batch = jax.tree.leaves(items)[0].shape[0]
    if valid is None:
        valid = jnp.ones((batch,), bool)
    draws = reservoir_draws(key, reservoir.seen, valid)
    return reservoir_insert(reservoir, items, valid, draws)


def ring_add(reservoir: Reservoir, items: PyTree, valid: Array | None = None) -> Reservoir:
    """Insert a batch first in, first out: a sliding window over the items offered.

    The n-th valid item overall (0-based, in batch order) goes to slot n % capacity, so the
    buffer holds the most recent `capacity` items: for data that must follow a moving
    target (values of the current strategies) rather than sample the whole history. It is
    `reservoir_insert` with the draw n % capacity, which algorithm R would accept.

    Args:
      reservoir: the buffer.
      items: pytree like one item, every leaf with a leading batch axis B.
      valid: bool[B], which items are offered (None: all).

    Returns:
      The updated Reservoir (`size` = min(items offered, capacity)).
    """
    batch = jax.tree.leaves(items)[0].shape[0]
    if valid is None:
        valid = jnp.ones((batch,), bool)
    capacity = jax.tree.leaves(reservoir.data)[0].shape[0]
    draws = _positions(reservoir.seen, jnp.asarray(valid, bool)) % capacity
    return reservoir_insert(reservoir, items, valid, draws)


def reservoir_sample(key: Array, reservoir: Reservoir, batch_size: int) -> PyTree:
    """A uniform minibatch, with replacement, from the stored items.

    Args:
      key: PRNG key.
      reservoir: the buffer.
      batch_size: static int, number of items drawn.

    Returns:
      pytree like one item, every leaf with leading axis batch_size, in the example's
      dtypes. When the reservoir is empty (size == 0) every row is slot 0, i.e. the zero
      fill decoded: zeros/False, never NaN. Callers that weight samples (e.g. by
      iteration) therefore get zero weight from an empty reservoir.
    """
    high = jnp.maximum(reservoir.size, 1)
    index = jax.random.randint(key, (batch_size,), 0, high, dtype=jnp.int32)
    return _gather(reservoir, index)


def _gather(reservoir: Reservoir, index: Array) -> PyTree:
    """The items in slots `index` (int32[B]), decoded to the example's dtypes."""
    buffers, treedef = jax.tree.flatten(reservoir.data)
    rows = [_decode(buffer[index], dtype) for buffer, dtype in zip(buffers, reservoir.item_dtypes)]
    return jax.tree.unflatten(treedef, rows)


def reservoir_cumulative_weights(reservoir: Reservoir, weights: Array) -> Array:
    """float32[capacity]: running sums of `weights` over the stored items, for
    `reservoir_sample_weighted`.

    Args:
      reservoir: the buffer.
      weights: float[capacity], a non-negative weight per slot (e.g. a decoded leaf of
        `reservoir.data`); slots past `reservoir.size` count as 0.

    The sums are float32, after dividing by the largest weight. Rounding shifts up to about
    1e-7 x the total weight between neighbouring slots: a single item far lighter than that
    may be drawn too often or too rarely, but any run of slots keeps its total share to that
    precision, and no slot of weight 0 (or past the size) is ever drawn.
    """
    stored = jnp.arange(weights.shape[0]) < reservoir.size
    weights = jnp.where(stored, jnp.maximum(weights.astype(jnp.float32), 0.0), 0.0)
    scale = jnp.max(weights)
    return jnp.cumsum(weights / jnp.where(scale > 0.0, scale, 1.0))


def reservoir_sample_weighted(key: Array, reservoir: Reservoir, cumulative: Array, batch_size: int) -> PyTree:
    """A minibatch drawn with replacement, item i with probability w_i / sum_j w_j.

    Args:
      key: PRNG key.
      reservoir: the buffer.
      cumulative: float32[capacity], `reservoir_cumulative_weights(reservoir, w)`.
      batch_size: static int, number of items drawn.

    Returns:
      pytree like one item (as `reservoir_sample`). When every weight is 0 (e.g. an empty
      reservoir) the draws fall back to uniform over the stored items.
    """
    total = cumulative[-1]
    u = jax.random.uniform(key, (batch_size,), jnp.float32) * total
    # The first slot whose running sum exceeds u; zero-weight slots are never picked.
    weighted = jnp.searchsorted(cumulative, u, side="right").astype(jnp.int32)
    high = jnp.maximum(reservoir.size, 1)
    uniform = jax.random.randint(key, (batch_size,), 0, high, dtype=jnp.int32)
    index = jnp.where(total > 0.0, jnp.minimum(weighted, high - 1), uniform)
    return _gather(reservoir, index)
