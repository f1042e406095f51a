"""Lane machinery shared by the traversal schemes (lanes on the last axis).

A traversal loop advances a fixed pool of W lanes in lockstep, one game state per lane,
packed "structure of arrays": a state is one int32[F, W] array with the lanes on the minor
axis, so elementwise work vectorizes. What is here:

* `Packer`, `deal_roots`: pack states into int32[F, W] and back; deal a batch of roots.
* `BatchedGame`: the game's functions vmapped over the lane axis. Games index small
  arrays at traced positions through `lcjax.onehot` (one-hot selects), so the vmapped
  functions hold no gathers or scatters, which XLA:CPU would run as per-element loops.
* `materialize`: force intermediates into buffers (XLA:CPU otherwise recomputes a fused
  producer, e.g. a whole `game.step`, for every element of every consumer).
* `uniforms`: counter-based random numbers, cheaper than `jax.random` per loop step.
* `lane_strategy`: the current strategies of the lanes that need one, each player's lanes
  gathered into compact chunks through that player's network (idle lanes cost nothing).
* `refill`: a lane whose item (a traversal, a trajectory, a rollout) ended takes the next
  item not yet handed out, so the loop never runs idle lanes while work remains.
* small lane-wise helpers: prefix counts, one-hot level reads, action sampling.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from lcjax.cfr.regret import regret_matching

Array = jax.Array
Params = Any
ApplyFn = Callable[[Params, Array], Array]


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def materialize(flag: Array, *xs):
    """Returns `xs` unchanged, but computed once into buffers.

    XLA:CPU fuses cheap elementwise producers into each consumer and recomputes them for
    every element the consumer writes; a `lax.cond` boundary (on a traced predicate that is
    always true) forces the values into memory first. `optimization_barrier` does not stop
    that fusion on CPU.
    """
    out = lax.cond(flag, lambda *a: list(a), lambda *a: [jnp.zeros_like(x) for x in a], *xs)
    return out[0] if len(xs) == 1 else tuple(out)


class Packer:
    """Packs a game state (leaves [..., W], lanes last) into one int32[F, W] and back."""

    def __init__(self, example):
        leaves, self.treedef = jax.tree_util.tree_flatten(example)
        self.shapes = [tuple(np.shape(x)) for x in leaves]
        self.dtypes = [jnp.asarray(x).dtype for x in leaves]
        self.sizes = [_numel(s) for s in self.shapes]
        self.size = sum(self.sizes)

    def pack(self, state) -> Array:
        rows = []
        for x, dt in zip(jax.tree_util.tree_leaves(state), self.dtypes):
            x = x.reshape((-1, x.shape[-1]))
            if jnp.issubdtype(dt, jnp.floating):
                x = lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
            rows.append(x.astype(jnp.int32))
        return jnp.concatenate(rows, axis=0)

    def unpack(self, packed: Array):
        w = packed.shape[-1]
        out, o = [], 0
        for shape, dt, n in zip(self.shapes, self.dtypes, self.sizes):
            x = packed[o : o + n].reshape(shape + (w,))
            o += n
            if dt == jnp.bool_:
                x = x != 0
            elif jnp.issubdtype(dt, jnp.floating):
                x = lax.bitcast_convert_type(x, jnp.float32).astype(dt)
            else:
                x = x.astype(dt)
            out.append(x)
        return jax.tree_util.tree_unflatten(self.treedef, out)


def deal_roots(game, key: Array, num: int) -> tuple[Packer, Array, Array]:
    """Deals `num` initial states: (packer, packed rows int32[num, F], live bool[num])."""
    roots = jax.vmap(game.init)(jax.random.split(key, num))
    packer = Packer(jax.tree_util.tree_map(lambda x: x[0], roots))
    rows = packer.pack(jax.tree_util.tree_map(lambda x: jnp.moveaxis(x, 0, -1), roots)).T
    return packer, rows, ~roots.terminated


class BatchedGame:
    """The game's functions over lanes on the last axis (states [..., W])."""

    def __init__(self, game):
        lanes_last = dict(in_axes=-1, out_axes=-1)
        self.step = jax.vmap(game.step, **lanes_last)
        self.legal = jax.vmap(game.legal_action_mask, **lanes_last)  # bool[A, W]
        self.observe_rows = jax.vmap(game.observe, **lanes_last)  # float32[D, W]
        self.returns = jax.vmap(game.returns, **lanes_last)  # float32[2, W]
        # Traced only by schemes that read histories (games with `observe_history`).
        self.observe_history = jax.vmap(game.observe_history, **lanes_last)  # float32[H, W]
        # Games with `resample_chance` only: states [..., W], keys [W].
        if hasattr(game, "resample_chance"):
            self.chance_actions = jax.vmap(game.chance_actions, **lanes_last)  # bool[A, W]
            self.resample_chance = jax.vmap(game.resample_chance, in_axes=(-1, 0), out_axes=-1)
        # Games with `hidden_alternatives` only: states [K, ..., W] and prior float32[K, W].
        if hasattr(game, "hidden_alternatives"):
            self.alternatives = jax.vmap(game.hidden_alternatives, **lanes_last)


def _fmix32(x: Array) -> Array:
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def random_bits(seed: Array, counter: Array, lane: Array) -> Array:
    """uint32[W]: a counter-based hash of (seed, counter, lane); `seed` is uint32[2].

    Cheaper than a `jax.random` call per loop step (threefry runs as a loop of small
    kernels on XLA:CPU); the seed is drawn once from the call's key.
    """
    x = lane.astype(jnp.uint32) * jnp.uint32(0x9E3779B9) + counter.astype(jnp.uint32) * jnp.uint32(0x632BE5AB)
    return _fmix32(_fmix32(x + seed[0]) ^ seed[1])


def uniforms(seed: Array, counter: Array, lane: Array) -> Array:
    """float32[W] in [0, 1) from `random_bits(seed, counter, lane)`."""
    return (random_bits(seed, counter, lane) >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)


def prefix_count(x: Array, block: int = 128) -> Array:
    """Inclusive prefix sum of a 0/1 int32[W] (exact): blocks of small matmuls.

    `jnp.cumsum` of a long vector lowers to an O(W^2) reduce-window on XLA:CPU.
    """
    w = x.shape[0]
    n = -(-w // block) * block
    xf = jnp.pad(x.astype(jnp.float32), (0, n - w)).reshape(-1, block)
    tri = (jnp.arange(block)[:, None] <= jnp.arange(block)[None, :]).astype(jnp.float32)
    local = xf @ tri
    tot = local[:, -1]
    off = jnp.cumsum(tot) - tot
    return (local + off[:, None]).reshape(-1)[:w].astype(jnp.int32)


def read_level(arr: Array, onehot: Array) -> Array:
    """arr[level[w], ..., w] for arr [L, ..., W] and onehot bool[L, W] of `level`."""
    out = arr[0]
    for lvl in range(1, arr.shape[0]):
        hit = onehot[lvl].reshape((1,) * (arr.ndim - 2) + onehot.shape[1:])
        out = jnp.where(hit, arr[lvl], out)
    return out


def first_after(mask: Array, a: Array) -> Array:
    """The first legal action above a (mask bool[A, W], a int32[W]); A if there is none."""
    n = mask.shape[0]
    later = mask & (jnp.arange(n)[:, None] > a[None])
    return jnp.where(later.any(0), jnp.argmax(later, axis=0), n).astype(jnp.int32)


def sample_columns(sigma: Array, u: Array) -> Array:
    """An action per lane from sigma float32[A, W] with one uniform u[W] each.

    The rule of a one-draw inverse-CDF sampler: the first action whose CDF exceeds
    u * total, clipped to the last action with positive probability.
    """
    n = sigma.shape[0]
    cdf = jnp.cumsum(sigma, axis=0)
    idx = jnp.argmax(cdf > (u * cdf[-1])[None], axis=0)
    last = n - 1 - jnp.argmax((sigma > 0)[::-1], axis=0)
    return jnp.minimum(idx, last).astype(jnp.int32)


def uniform_columns(mask: Array, u: Array) -> Array:
    """A uniformly random legal action per lane (mask bool[A, W], one uniform u[W] each)."""
    counts = jnp.cumsum(mask.astype(jnp.int32), axis=0)
    k = jnp.floor(u * counts[-1].astype(jnp.float32)).astype(jnp.int32)
    return jnp.argmax(counts > k[None], axis=0).astype(jnp.int32)


def lanes_of(need: Array, count: int) -> tuple[Array, Array]:
    """The first `count` lanes with `need` set, in lane order, and each lane's rank.

    Returns (lanes int32[count], rank int32[W]): lanes[j] is the lane of the j-th set entry
    (W where there are fewer than j + 1), rank[i] is the number of set entries before lane i.
    """
    inclusive = prefix_count(need.astype(jnp.int32))
    lanes = jnp.searchsorted(inclusive, jnp.arange(1, count + 1, dtype=jnp.int32)).astype(jnp.int32)
    return lanes, inclusive - need.astype(jnp.int32)


def eval_chunk_size(requested: int = 0) -> int:
    """Rows per network call inside the traversal loops (`requested`, or 0 = by backend).

    On CPU a 512-wide MLP runs fastest per row at a few hundred rows (the activations stay
    in cache; see `scripts/profile_forward.py`), so 256; accelerators want large calls.
    """
    if requested > 0:
        return requested
    return 256 if jax.default_backend() == "cpu" else 2048


def map_prefix_chunks(fn, xs: Array, chunk: int, count: Array | None = None):
    """`fn` over the rows of `xs` (leading axis N) in chunks of `chunk` rows, one `lax.map`.

    `fn(x)` takes `chunk` rows and returns a pytree of arrays with leading axis `chunk`; the
    result has leading axis N. With `count` (int32 scalar) the rows used are a prefix: chunks
    that start at or after it are skipped and their rows are zeros, so the cost follows
    `count`, not N.
    """
    n = xs.shape[0]
    c = min(chunk, n)
    n_chunks = -(-n // c)
    padded = jnp.pad(xs, ((0, n_chunks * c - n),) + ((0, 0),) * (xs.ndim - 1)).reshape((n_chunks, c) + xs.shape[1:])
    shapes = jax.eval_shape(fn, padded[0])

    def one(i):
        if count is None:
            return fn(padded[i])
        zeros = lambda: jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)  # noqa: E731
        return lax.cond(i * c < count, lambda: fn(padded[i]), zeros)

    out = lax.map(one, jnp.arange(n_chunks))
    return jax.tree.map(lambda a: a.reshape((n_chunks * c,) + a.shape[2:])[:n], out)


def lane_strategy(apply_fn, params, obs_rows, mask, player, need, flag, chunk: int = 0):
    """Current strategies of the lanes that need one this step: float32[A, W].

    Each player's needing lanes are gathered into a compact block of rows (in lane order)
    and go through that player's network in chunks of `eval_chunk_size(chunk)` rows; chunks
    past the last needing lane are skipped. So the forward cost follows the number of
    lanes that need an evaluation (rounded up to whole chunks per player), not the lane
    count W, and every needing lane advances every step.

    Args:
      obs_rows: float32[W, D]; mask: bool[A, W]; player: int32[W]; need: bool[W], lanes
        that want an evaluation (others get an arbitrary distribution).
    """
    w = obs_rows.shape[0]
    n_act = mask.shape[0]
    c = min(eval_chunk_size(chunk), w)
    n_chunks = -(-w // c)
    cap = n_chunks * c
    logits = jnp.zeros((w, n_act), jnp.float32)
    for p in (0, 1):
        need_p = need & (player == p)
        lanes, rank = lanes_of(need_p, cap)
        count = jnp.sum(need_p.astype(jnp.int32))

        def chunk_logits(i, lanes=lanes, count=count, p=p):
            rows = lax.dynamic_slice_in_dim(lanes, i * c, c)
            x = jnp.take(obs_rows, jnp.minimum(rows, w - 1), axis=0)  # a row gather
            return lax.cond(
                i * c < count,
                lambda: apply_fn(params[p], x).astype(jnp.float32),
                lambda: jnp.zeros((c, n_act), jnp.float32),
            )

        block = lax.map(chunk_logits, jnp.arange(n_chunks)).reshape(cap, n_act)
        mine = jnp.take(block, jnp.minimum(rank, cap - 1), axis=0)
        logits = jnp.where(need_p[:, None], mine, logits)
    sigma = regret_matching(logits, mask.T).T
    return materialize(flag, sigma)


class Refill(NamedTuple):
    """Which lanes take a new item this step (see `refill`).

    Attributes:
      start: bool[W], lanes that start an item.
      item: int32[W], the item each starting lane takes (clipped into range elsewhere).
      next_item: int32 scalar, the first item not yet handed out afterwards.
    """

    start: Array
    item: Array
    next_item: Array


def refill(free: Array, next_item: Array, total) -> Refill:
    """Hands items next_item, next_item + 1, ... to the `free` lanes (bool[W]) in lane order.

    `total` (int or int32 scalar) is the number of items; lanes beyond it start nothing.
    """
    item = next_item + prefix_count(free.astype(jnp.int32)) - 1
    start = free & (item < total)
    next_item = jnp.minimum(next_item + jnp.sum(free.astype(jnp.int32)), total)
    return Refill(start, jnp.clip(item, 0, jnp.maximum(total - 1, 0)), next_item)
