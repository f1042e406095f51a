"""Vectorized Deep CFR traversals, generic over any game of `lcjax.env.protocol`.

Both schemes advance a batch of traversals in lockstep inside one jitted computation, with
one batched network forward per loop step (a matmul over all lanes, no per-node dispatch).
The traverser's and the opponent's current strategies come from regret matching on the two
players' advantage networks.

Schemes:

* `external_sampling`: textbook external sampling (the traverser branches on every legal
  action, the opponent and chance are sampled). Depth-first with an explicit fixed-size
  stack per traversal advanced by `lax.while_loop`; an optional node budget cuts it short.
  The expected sum of a traversal's regret samples at an information set I is the exact
  counterfactual regret of I.
* `probe`: ESCHER-style probing. A main trajectory where the traverser follows a fixed
  uniform sampling policy and the opponent its current strategy (recorded as strategy
  samples). At each traverser node, with fixed probability `branch_probability`, every
  legal action is probed by one rollout to the end with both players on their current
  strategies; all rollouts of all traversals run as one batch in one `lax.while_loop`,
  sharing the pre-drawn chance (the deck in the state) across the actions of a node. The
  regret sample is r(a) = G(a) - sum_b sigma(b) G(b). A traversal's expected sum of regret
  samples at I is `branch_probability * pi_uniform(I) * r_cf(I)`, where pi_uniform(I) is
  the traverser's own reach under the uniform sampling policy: a per-infoset constant
  that never changes across iterations, so it preserves regret matching's fixed point.

Every sample carries its iteration t for Linear CFR weighting.

Implementation notes (what makes the loops fast, measured on XLA:CPU; see
`scripts/bench_traversal_small.py`):

* Lanes are batch-last ("structure of arrays"): a game state is packed into one int32
  array [F, W] with the W lanes on the minor axis, so elementwise work vectorizes; per-lane
  arrays of shape [W, small] are avoided except where a matmul or a row write needs them.
* The game's functions are vmapped after a small jaxpr rewrite (`_dense`): dynamic
  indexing of small arrays (`x[i]`, `x.at[i].set(v)` with traced scalar indices) becomes
  one-hot selects instead of gathers/scatters, which XLA:CPU runs as slow per-element loops
  once vmapped. Anything else is left as it is, so any protocol game works.
* Intermediates that feed several large consumers are materialized (`_materialize`): XLA
  otherwise fuses a producer (e.g. a whole `game.step`) into every consumer and recomputes
  it for every element of every output.
* The forward pass follows the lanes that need it (`_lane_strategy`): each player's
  needing lanes are gathered into a compact block that goes through that player's network
  in fixed-size chunks, and chunks past the last needing lane are skipped. A lane never
  runs the other player's network, and idle lanes (a draining pool, traverser moves that
  need no strategy) cost no forward work.
* Both schemes keep a fixed pool of lanes and hand each lane new work (a traversal, a
  main trajectory, a rollout) as soon as its previous one ends, so the loop does not run
  idle lanes until the slowest item of the batch is done. Samples are written with one
  row write per loop step straight into the per-traversal output rows.
* Opponent actions draw from a counter-based hash of a seed taken from the call's key;
  probe rollouts key it by (probed node, move number), so the rollouts of a node's
  actions share their random numbers (common random numbers, as before). The main
  trajectory evaluates only the nodes whose strategy it uses (opponent nodes and probed
  traverser nodes); `counters.evaluations` counts those.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core

from lcjax.cfr.regret import regret_matching
from lcjax.cfr.samples import AdvantageSample, StrategySample

Array = jax.Array
Params = Any
ApplyFn = Callable[[Params, Array], Array]


class TraversalCounters(NamedTuple):
    """Totals over one traversal call (int32 scalars).

    Attributes:
      nodes: game states visited (decision and terminal states, rollouts included).
      evaluations: states whose strategy was computed from the networks.
      advantage_samples: valid advantage samples produced.
      strategy_samples: valid strategy samples produced.
      dropped_samples: samples lost because a per-traversal buffer was full.
      truncated: traversals cut short by the node budget or the step limit.
    """

    nodes: Array
    evaluations: Array
    advantage_samples: Array
    strategy_samples: Array
    dropped_samples: Array
    truncated: Array


class TraversalResult(NamedTuple):
    """Fixed-shape output of a traversal call.

    Rows are grouped by traversal: row r of `advantage` belongs to traversal
    `r // (S_a / B)` (S_a / B = `max_advantage` or `max_probes`), row r of `strategy` to
    traversal `r // max_strategy`; see `sample_traversal`.

    Attributes:
      advantage: AdvantageSample with leading axis S_a (all traversals' buffers, flattened).
      advantage_valid: bool[S_a], which rows are real samples.
      strategy: StrategySample with leading axis S_s.
      strategy_valid: bool[S_s].
      counters: TraversalCounters.
    """

    advantage: AdvantageSample
    advantage_valid: Array
    strategy: StrategySample
    strategy_valid: Array
    counters: TraversalCounters


def sample_traversal(num_rows: int, num_traversals: int) -> np.ndarray:
    """int64[num_rows]: the traversal (0..B-1) that produced each row of a sample buffer.

    Works for `TraversalResult.advantage` (num_rows = S_a) and `.strategy` (S_s) of both
    schemes: each traversal owns a contiguous block of `num_rows // num_traversals` rows.
    """
    per = num_rows // num_traversals
    return np.arange(num_rows) // per


def current_strategy(apply_fn: ApplyFn, params: tuple[Params, Params], obs: Array, mask: Array, player: Array) -> Array:
    """Regret matching on the advantage network of `player`.

    Args:
      apply_fn: `apply(params, x) -> float32[..., A]`.
      params: (player 0's, player 1's) advantage network parameters.
      obs: float32[D], the acting player's observation (or a batch [..., D]).
      mask: bool[A] legal actions (or [..., A]).
      player: int32 scalar (or [...]), the acting player.

    Returns:
      float32[A] (or [..., A]): the current strategy.
    """
    r0 = apply_fn(params[0], obs)
    r1 = apply_fn(params[1], obs)
    regrets = jnp.where(jnp.expand_dims(player, -1) == 0, r0, r1)
    return regret_matching(regrets, mask)


# ---------------------------------------------------------------------------------------
# Batched building blocks (lanes on the last axis)
# ---------------------------------------------------------------------------------------


def _materialize(flag: Array, *xs):
    """Returns `xs` unchanged, but computed once into buffers.

    XLA:CPU fuses cheap elementwise producers into each consumer and recomputes them for
    every element the consumer writes; a `lax.cond` boundary (on a traced predicate that is
    always true) forces the values into memory first. `optimization_barrier` does not stop
    that fusion on CPU.
    """
    out = lax.cond(flag, lambda *a: list(a), lambda *a: [jnp.zeros_like(x) for x in a], *xs)
    return out[0] if len(xs) == 1 else tuple(out)


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


_DENSE_MAX = 4096  # operands up to this many elements get one-hot indexing
_CALL_PRIMITIVES = ("pjit", "jit", "closed_call", "core_call")


def _onehot_dim(shape, dim: int, index: Array) -> Array:
    """bool broadcastable to `shape`: True at position `index` along `dim`."""
    bshape = [1] * len(shape)
    bshape[dim] = shape[dim]
    return lax.broadcasted_iota(jnp.int32, tuple(bshape), dim) == index.astype(jnp.int32)


def _dense_dynamic_slice(operand, *starts, slice_sizes):
    x = operand
    for d, (size, start) in enumerate(zip(slice_sizes, starts)):
        dim = operand.shape[d]
        if size == dim:
            continue
        if size != 1:
            return None
        hit = _onehot_dim(x.shape, d, jnp.clip(start, 0, dim - 1))
        if x.dtype == jnp.bool_:
            x = jnp.any(hit & x, axis=d, keepdims=True)
        else:
            x = jnp.sum(jnp.where(hit, x, jnp.zeros((), x.dtype)), axis=d, keepdims=True).astype(x.dtype)
    return x


def _dense_dynamic_update_slice(operand, update, *starts):
    hit = None
    for d, start in enumerate(starts):
        dim, size = operand.shape[d], update.shape[d]
        if size == dim:
            continue
        if size != 1:
            return None
        h = _onehot_dim(operand.shape, d, jnp.clip(start, 0, dim - 1))
        hit = h if hit is None else hit & h
    if hit is None:
        return update
    return jnp.where(hit, jnp.broadcast_to(update, operand.shape), operand)


def _dense_scatter(name, operand, indices, updates, *, dimension_numbers, mode, **_):
    """A scatter of one scalar at one point (`x.at[i, j].set(v)` / `.add(v)`), else None."""
    dn = dimension_numbers
    if (
        dn.update_window_dims != ()
        or tuple(getattr(dn, "operand_batching_dims", ())) != ()
        or indices.ndim != 1
        or updates.ndim != 0
        or tuple(sorted(dn.inserted_window_dims)) != tuple(range(operand.ndim))
        or len(dn.scatter_dims_to_operand_dims) != operand.ndim
        or mode not in (lax.GatherScatterMode.FILL_OR_DROP, lax.GatherScatterMode.PROMISE_IN_BOUNDS)
    ):
        return None
    hit = None
    for k, d in enumerate(dn.scatter_dims_to_operand_dims):
        h = _onehot_dim(operand.shape, d, indices[k])  # out of range: no hit, i.e. dropped
        hit = h if hit is None else hit & h
    hit = jnp.broadcast_to(hit, operand.shape)
    upd = updates.astype(operand.dtype)
    if name == "scatter":
        return jnp.where(hit, upd, operand)
    return operand + jnp.where(hit, upd, jnp.zeros((), operand.dtype))


def _eval_dense(jaxpr, consts, args):
    env = {}

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        out = None
        small = bool(eqn.invars) and _numel(getattr(eqn.invars[0].aval, "shape", (_DENSE_MAX + 1,))) <= _DENSE_MAX
        if name == "dynamic_slice" and small:
            out = _dense_dynamic_slice(ins[0], *ins[1:], slice_sizes=eqn.params["slice_sizes"])
        elif name == "dynamic_update_slice" and small:
            out = _dense_dynamic_update_slice(*ins)
        elif name in ("scatter", "scatter-add") and small:
            out = _dense_scatter(name, *ins, **eqn.params)
        elif name in _CALL_PRIMITIVES and "jaxpr" in eqn.params:
            closed = eqn.params["jaxpr"]
            out = _eval_dense(closed.jaxpr, closed.consts, ins)
        if out is None:
            out = eqn.primitive.bind(*ins, **eqn.params)
        if not isinstance(out, (list, tuple)):
            out = [out]
        for v, x in zip(eqn.outvars, out):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _dense(fn):
    """`fn` with dynamic indexing of small arrays rewritten as one-hot selects.

    Same results; under `vmap` the selects stay elementwise while gathers and scatters with
    batched indices become per-element loops on XLA:CPU. Falls back to `fn` if the rewrite
    cannot trace.
    """

    @functools.wraps(fn)
    def wrapped(*args):
        try:
            closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
            outs = _eval_dense(closed.jaxpr, closed.consts, jax.tree_util.tree_leaves(args))
        except Exception:  # an unusual primitive: use the game's own function
            return fn(*args)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)

    return wrapped


class _Packer:
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


def _deal_roots(game, key: Array, num: int) -> tuple[_Packer, Array, Array]:
    """Deals `num` initial states: (packer, packed rows int32[num, F], live bool[num])."""
    roots = jax.vmap(game.init)(jax.random.split(key, num))
    packer = _Packer(jax.tree_util.tree_map(lambda x: x[0], roots))
    rows = packer.pack(jax.tree_util.tree_map(lambda x: jnp.moveaxis(x, 0, -1), roots)).T
    return packer, rows, ~roots.terminated


class _Batched:
    """The game's functions over lanes on the last axis (states [..., W])."""

    def __init__(self, game):
        last = dict(in_axes=-1, out_axes=-1)
        self.step = jax.vmap(_dense(game.step), **last)
        self.legal = jax.vmap(_dense(game.legal_action_mask), **last)  # bool[A, W]
        self.observe_rows = jax.vmap(_dense(game.observe), in_axes=-1, out_axes=-1)  # [D, W]
        self.returns = jax.vmap(_dense(game.returns), **last)  # float32[2, W]


def _fmix32(x: Array) -> Array:
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def _uniforms(seed: Array, counter: Array, lane: Array) -> Array:
    """float32[W] in [0, 1): a counter-based hash of (seed, counter, lane).

    Cheaper than a `jax.random` call per loop step (threefry runs as a loop of small
    kernels on XLA:CPU); `seed` is uint32[2] drawn once from the call's key.
    """
    x = lane.astype(jnp.uint32) * jnp.uint32(0x9E3779B9) + counter.astype(jnp.uint32) * jnp.uint32(0x632BE5AB)
    x = _fmix32(_fmix32(x + seed[0]) ^ seed[1])
    return (x >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)


def _prefix_count(x: Array, block: int = 128) -> Array:
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


def _read_level(arr: Array, onehot: Array) -> Array:
    """arr[level[w], ..., w] for arr [L, ..., W] and onehot bool[L, W] of `level`."""
    out = arr[0]
    for lvl in range(1, arr.shape[0]):
        hit = onehot[lvl].reshape((1,) * (arr.ndim - 2) + onehot.shape[1:])
        out = jnp.where(hit, arr[lvl], out)
    return out


def _first_after(mask: Array, a: Array) -> Array:
    """The first legal action above a (mask bool[A, W], a int32[W]); A if there is none."""
    n = mask.shape[0]
    later = mask & (jnp.arange(n)[:, None] > a[None])
    return jnp.where(later.any(0), jnp.argmax(later, axis=0), n).astype(jnp.int32)


def _sample_columns(sigma: Array, u: Array) -> Array:
    """An action per lane from sigma float32[A, W] with one uniform u[W] each.

    The rule of a one-draw inverse-CDF sampler: the first action whose CDF exceeds
    u * total, clipped to the last action with positive probability.
    """
    n = sigma.shape[0]
    cdf = jnp.cumsum(sigma, axis=0)
    idx = jnp.argmax(cdf > (u * cdf[-1])[None], axis=0)
    last = n - 1 - jnp.argmax((sigma > 0)[::-1], axis=0)
    return jnp.minimum(idx, last).astype(jnp.int32)


def _uniform_columns(mask: Array, u: Array) -> Array:
    """A uniformly random legal action per lane (mask bool[A, W], one uniform u[W] each)."""
    counts = jnp.cumsum(mask.astype(jnp.int32), axis=0)
    k = jnp.floor(u * counts[-1].astype(jnp.float32)).astype(jnp.int32)
    return jnp.argmax(counts > k[None], axis=0).astype(jnp.int32)


def _lanes_of(need: Array, count: int) -> tuple[Array, Array]:
    """The first `count` lanes with `need` set, in lane order, and each lane's rank.

    Returns (lanes int32[count], rank int32[W]): lanes[j] is the lane of the j-th set entry
    (W where there are fewer than j + 1), rank[i] is the number of set entries before lane i.
    """
    inclusive = _prefix_count(need.astype(jnp.int32))
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


def _lane_strategy(apply_fn, params, obs_rows, mask, player, need, flag, chunk: int = 0):
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
        lanes, rank = _lanes_of(need_p, cap)
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
    return _materialize(flag, sigma)


# ---------------------------------------------------------------------------------------
# External sampling
# ---------------------------------------------------------------------------------------


class ExternalConfig(NamedTuple):
    """Static sizes of the external-sampling traversal.

    Attributes:
      max_depth: stack frames per traversal: 1 + the most traverser decisions on a path.
      max_advantage: advantage samples kept per traversal (one per traverser node).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      node_budget: stop a traversal after this many visited states (0 = no budget).
      max_loop_steps: safety bound on loop iterations per traversal.
      lanes: traversals advanced together (the vector width of the loop); a lane that
        finishes its traversal starts the next one not yet started. 0 = min(B, 1024).
      eval_chunk: rows per network call in the loop (0 = `eval_chunk_size()`'s default
        for the backend).
    """

    max_depth: int
    max_advantage: int
    max_strategy: int
    node_budget: int = 0
    max_loop_steps: int = 1_000_000
    lanes: int = 0
    eval_chunk: int = 0


class _Pending(NamedTuple):
    """Frame writes decided in one loop step and applied at the start of the next.

    Deferring them makes every input of the writes a loop-carried (materialized) value.
    """

    push: Array  # bool[W]: a traverser node is pushed at level push_lvl
    push_lvl: Array
    state: Array  # int32[F, W]
    data: Array  # float32[3A, W]: sigma, values (zero), legal mask
    first: Array  # int32[W]: the action explored first
    ret: Array  # bool[W]: a child value returns to frame ret_lvl, action ret_act
    ret_lvl: Array
    ret_act: Array
    value: Array
    ret_next: Array  # int32[W]: that frame's next action to explore (A when exhausted)


class _ExtCarry(NamedTuple):
    cur: Array  # int32[F, W]: the node at the lane's cursor
    has_cur: Array  # bool[W]: cur is a non-terminal node still to evaluate
    sp: Array  # int32[W]: traverser frames on the stack
    frames: Array  # int32[L, F, W]: traverser nodes on the path
    f_data: Array  # float32[L, 3A, W]: their sigma, child values, legal mask
    f_next: Array  # int32[L, W]: the action being explored (A: all done)
    pend: _Pending
    active: Array  # bool[W]: the lane runs a traversal
    tid: Array  # int32[W]: the traversal it runs
    next_tid: Array  # int32: the next traversal to start
    lsteps: Array  # loop steps of the current traversal
    lnodes: Array  # states visited by the current traversal
    adv_n: Array  # samples of the current traversal
    strat_n: Array
    nodes: Array  # per-lane totals
    evals: Array
    dropped: Array
    truncated: Array
    step: Array
    a_obs: Array  # float32[B * S_a, D]
    a_rest: Array  # float32[B * S_a, 2A + 1]: mask, regret, valid
    s_obs: Array
    s_rest: Array


def _unpack_rows(obs, rest, n_actions, iteration, cls):
    t = jnp.asarray(iteration, jnp.float32)
    a = n_actions
    sample = cls(obs, rest[:, :a] > 0.5, rest[:, a : 2 * a], jnp.full((obs.shape[0],), t, jnp.float32))
    return sample, rest[:, 2 * a] > 0.5


def external_sampling(
    game,
    apply_fn: ApplyFn,
    cfg: ExternalConfig,
    params: tuple[Params, Params],
    traverser: Array,
    iteration: Array,
    key: Array,
    num_traversals: int,
) -> TraversalResult:
    """`num_traversals` external-sampling traversals for `traverser`.

    Depth-first: each traversal keeps an explicit stack of its traverser decisions
    (`max_depth - 1` frames); the traversals of a lane pool (`cfg.lanes`) advance in one
    `lax.while_loop` with at most one network evaluation per lane per iteration (one
    batched forward), and a lane whose traversal ends starts the next one.

    Args:
      game: a game of the protocol (static).
      apply_fn: the advantage networks' `apply(params, x)` (static).
      cfg: static buffer sizes and budget.
      params: (player 0's, player 1's) advantage network parameters.
      traverser: int32 scalar, the player whose regrets are sampled.
      iteration: the CFR iteration t (>= 1), stored in every sample.
      key: PRNG key (deals and opponent actions).
      num_traversals: static batch size B.

    Returns:
      TraversalResult with S_a = B * max_advantage and S_s = B * max_strategy rows;
      traversal b owns rows [b * max_advantage, (b + 1) * max_advantage) of the advantage
      buffer (in the order its traverser nodes finished) and likewise for strategy rows.
    """
    n_act, dim = game.num_actions, game.observation_size
    b_total = num_traversals
    w = min(cfg.lanes if cfg.lanes > 0 else 1024, b_total)
    depth = max(cfg.max_depth - 1, 1)  # traverser frames; the root level holds no frame
    s_a, s_s = cfg.max_advantage, cfg.max_strategy
    traverser = jnp.asarray(traverser, jnp.int32)
    k_init, k_loop = jax.random.split(key)
    seed = jax.random.bits(k_loop, (2,), jnp.uint32)
    packer, root_rows, root_live = _deal_roots(game, k_init, b_total)
    g = _Batched(game)
    f_size = packer.size

    zi = jnp.zeros((w,), jnp.int32)
    zb = jnp.zeros((w,), bool)
    pend0 = _Pending(
        zb, zi, jnp.zeros((f_size, w), jnp.int32), jnp.zeros((3 * n_act, w), jnp.float32), zi, zb, zi, zi,
        jnp.zeros((w,), jnp.float32), zi,
    )
    lane = jnp.arange(w)
    rest = 2 * n_act + 1
    carry = _ExtCarry(
        cur=root_rows[:w].T,
        has_cur=root_live[:w],
        sp=zi,
        frames=jnp.zeros((depth, f_size, w), jnp.int32),
        f_data=jnp.zeros((depth, 3 * n_act, w), jnp.float32),
        f_next=jnp.zeros((depth, w), jnp.int32),
        pend=pend0,
        active=root_live[:w],
        tid=lane.astype(jnp.int32),
        next_tid=jnp.int32(w),
        lsteps=zi,
        lnodes=jnp.ones((w,), jnp.int32),
        adv_n=zi,
        strat_n=zi,
        nodes=jnp.ones((w,), jnp.int32),
        evals=zi,
        dropped=zi,
        truncated=zi,
        step=jnp.int32(0),
        a_obs=jnp.zeros((b_total * s_a, dim), jnp.float32),
        a_rest=jnp.zeros((b_total * s_a, rest), jnp.float32),
        s_obs=jnp.zeros((b_total * s_s, dim), jnp.float32),
        s_rest=jnp.zeros((b_total * s_s, rest), jnp.float32),
    )
    levels = jnp.arange(depth)[:, None]
    actions = jnp.arange(n_act)[:, None]
    no_rows = jnp.zeros((n_act, w), bool)

    def apply_pending(c: _ExtCarry):
        p = c.pend
        at = (levels == p.push_lvl[None]) & p.push[None]
        frames = jnp.where(at[:, None, :], p.state[None], c.frames)
        f_data = jnp.where(at[:, None, :], p.data[None], c.f_data)
        f_next = jnp.where(at, p.first[None], c.f_next)
        at = (levels == p.ret_lvl[None]) & p.ret[None]
        value_row = jnp.concatenate([no_rows, actions == p.ret_act[None], no_rows])
        f_data = jnp.where(at[:, None, :] & value_row[None], p.value[None, None], f_data)
        f_next = jnp.where(at, p.ret_next[None], f_next)
        return frames, f_data, f_next

    def body(c: _ExtCarry) -> _ExtCarry:
        flag = c.step >= 0  # traced "true" for _materialize
        frames, f_data, f_next = apply_pending(c)
        alive = c.active

        # Phase 1, lanes without a cursor: the top frame either is exhausted (finish it:
        # regret sample, pop, its value goes to the parent) or expands its next action.
        idle = alive & ~c.has_cur
        top = jnp.maximum(c.sp - 1, 0)
        at_top = levels == top[None]
        t_state = _read_level(frames, at_top)
        t_data = _read_level(f_data, at_top)
        t_next = _read_level(f_next, at_top)
        t_state, t_data, t_next = _materialize(flag, t_state, t_data, t_next)
        t_sig, t_val, t_mask = t_data[:n_act], t_data[n_act : 2 * n_act], t_data[2 * n_act :] > 0.5
        fin = idle & (t_next >= n_act)
        gen = idle & (t_next < n_act)
        t_states = packer.unpack(t_state)
        g_child = g.step(t_states, jnp.minimum(t_next, n_act - 1))
        g_term = g_child.terminated
        g_ret = g.returns(g_child)[traverser]
        g_packed, g_term, g_ret = _materialize(flag, packer.pack(g_child), g_term, g_ret)
        cur = jnp.where(gen[None], g_packed, c.cur)
        has_cur = c.has_cur | (gen & ~g_term)
        node_value = jnp.sum(t_sig * t_val, axis=0)
        regret = jnp.where(t_mask, t_val - node_value[None], 0.0)
        cur, has_cur, node_value, regret = _materialize(flag, cur, has_cur, node_value, regret)

        # Phase 2, lanes with a cursor: evaluate it (opponent: sample an action and record
        # the strategy; traverser: push a frame and expand the first legal action).
        states = packer.unpack(cur)
        player = states.current_player
        need = alive & has_cur
        obs_state = jax.tree_util.tree_map(lambda a, b: jnp.where(fin, a, b), t_states, states)
        obs_player = jnp.where(fin, traverser, player)  # finishing lanes: the frame's observation
        mask = g.legal(states)
        obs_rows, mask, player = _materialize(flag, g.observe_rows(obs_state, obs_player).T, mask, player)
        sigma = _lane_strategy(apply_fn, params, obs_rows, mask, player, need, flag, cfg.eval_chunk)
        ev = need  # every lane that needs its strategy gets it
        is_trav = player == traverser
        opp = ev & ~is_trav
        overflow = ev & is_trav & (c.sp >= depth)
        push = ev & is_trav & ~overflow
        a_opp = _sample_columns(sigma, _uniforms(seed, c.step, lane))
        first = jnp.argmax(mask, axis=0).astype(jnp.int32)
        child = g.step(states, jnp.where(is_trav, first, a_opp))
        c_term = child.terminated
        c_ret = g.returns(child)[traverser]
        c_packed, c_term, c_ret, first, push, opp, overflow = _materialize(
            flag, packer.pack(child), c_term, c_ret, first, push, opp, overflow
        )

        # The child is visited unless the traversal is out of nodes (the evaluated node was
        # the last one its budget allows) or of stack frames.
        visit = ev & ~overflow
        if cfg.node_budget > 0:
            visit = visit & (c.lnodes + gen.astype(jnp.int32) < cfg.node_budget)

        # At most one value returns to a frame per lane and step: a finished frame's value
        # to its parent, or a terminal child's value to the frame that expanded it.
        sp = c.sp - fin.astype(jnp.int32) + push.astype(jnp.int32)
        ret = (fin & (sp > 0)) | (gen & g_term) | (visit & c_term & (sp > 0))
        value = jnp.where(fin, node_value, jnp.where(gen & g_term, g_ret, c_ret))
        r = jnp.maximum(sp - 1, 0)
        at_r = levels == r[None]
        r_next = jnp.where(push, first, _read_level(f_next, at_r))
        r_mask = jnp.where(push[None], mask, _read_level(f_data[:, 2 * n_act :], at_r) > 0.5)
        r_after = _first_after(r_mask, r_next)
        done = (fin & (sp == 0)) | (visit & c_term & (sp == 0)) | overflow
        made = gen.astype(jnp.int32) + visit.astype(jnp.int32)  # new states visited
        new_cur = visit & ~c_term
        ret, r, r_next, value, r_after, new_cur, done, sp, made = _materialize(
            flag, ret, r, r_next, value, r_after, new_cur, done, sp, made
        )
        data = jnp.concatenate([sigma, jnp.zeros_like(sigma), mask.astype(jnp.float32)])
        pend = _Pending(push, c.sp, cur, data, first, ret, r, r_next, value, r_after)
        cur = jnp.where(new_cur[None], c_packed, cur)
        has_cur = jnp.where(ev, new_cur, has_cur)

        # Samples: one row write per kind, straight into the traversal's rows.
        a_slot, s_slot = c.adv_n, c.strat_n
        a_row = jnp.where(fin & (a_slot < s_a), c.tid * s_a + a_slot, b_total * s_a)  # out of range: dropped
        s_row = jnp.where(opp & (s_slot < s_s), c.tid * s_s + s_slot, b_total * s_s)
        dropped = c.dropped + (fin & (a_slot >= s_a)).astype(jnp.int32) + (opp & (s_slot >= s_s)).astype(jnp.int32)
        row_mask = jnp.where(fin[None], t_mask, mask)
        row_vec = jnp.where(fin[None], regret, sigma)
        rows = jnp.concatenate([row_mask.astype(jnp.float32), row_vec, jnp.ones((1, w), jnp.float32)]).T
        rows, a_row, s_row = _materialize(flag, rows, a_row, s_row)
        a_obs = c.a_obs.at[a_row].set(obs_rows, mode="drop")
        a_rest = c.a_rest.at[a_row].set(rows, mode="drop")
        s_obs = c.s_obs.at[s_row].set(obs_rows, mode="drop")
        s_rest = c.s_rest.at[s_row].set(rows, mode="drop")
        adv_n = c.adv_n + fin.astype(jnp.int32)
        strat_n = c.strat_n + opp.astype(jnp.int32)

        # End of a traversal (done, budget or step limit): the lane starts the next one.
        lsteps = c.lsteps + 1
        lnodes = c.lnodes + made
        limit = lsteps >= cfg.max_loop_steps
        if cfg.node_budget > 0:  # out of nodes: stop once the last one is evaluated
            limit = limit | ((lnodes >= cfg.node_budget) & ~has_cur)
        stop = alive & ~done & limit
        truncated = c.truncated + (overflow | stop).astype(jnp.int32)
        free = ~(alive & ~done & ~stop)
        new_tid = c.next_tid + _prefix_count(free.astype(jnp.int32)) - 1
        start = free & (new_tid < b_total)
        new_tid = jnp.minimum(new_tid, b_total - 1)
        root = _materialize(flag, root_rows[new_tid]).T
        root_ok = root_live[new_tid]
        return _ExtCarry(
            cur=jnp.where(start[None], root, cur),
            has_cur=jnp.where(start, root_ok, has_cur),
            sp=jnp.where(start, 0, sp),
            frames=frames,
            f_data=f_data,
            f_next=f_next,
            pend=pend,
            active=jnp.where(start, root_ok, ~free),
            tid=jnp.where(start, new_tid, c.tid),
            next_tid=jnp.minimum(c.next_tid + jnp.sum(free.astype(jnp.int32)), b_total),
            lsteps=jnp.where(start, 0, lsteps),
            lnodes=jnp.where(start, 1, lnodes),
            adv_n=jnp.where(start, 0, adv_n),
            strat_n=jnp.where(start, 0, strat_n),
            nodes=c.nodes + made + start.astype(jnp.int32),
            evals=c.evals + ev.astype(jnp.int32),
            dropped=dropped,
            truncated=truncated,
            step=c.step + 1,
            a_obs=a_obs,
            a_rest=a_rest,
            s_obs=s_obs,
            s_rest=s_rest,
        )

    c = lax.while_loop(lambda c: jnp.any(c.active) | (c.next_tid < b_total), body, carry)
    adv, adv_valid = _unpack_rows(c.a_obs, c.a_rest, n_act, iteration, AdvantageSample)
    strat, strat_valid = _unpack_rows(c.s_obs, c.s_rest, n_act, iteration, StrategySample)
    counters = TraversalCounters(
        nodes=jnp.sum(c.nodes),
        evaluations=jnp.sum(c.evals),
        advantage_samples=jnp.sum(adv_valid.astype(jnp.int32)),
        strategy_samples=jnp.sum(strat_valid.astype(jnp.int32)),
        dropped_samples=jnp.sum(c.dropped),
        truncated=jnp.sum(c.truncated),
    )
    return TraversalResult(adv, adv_valid, strat, strat_valid, counters)


# ---------------------------------------------------------------------------------------
# Probe (ESCHER-style) sampling
# ---------------------------------------------------------------------------------------


class ProbeConfig(NamedTuple):
    """Static sizes of the probe traversal.

    Attributes:
      branch_probability: chance that a traverser node on the main trajectory is probed.
      max_probes: probed nodes kept per traversal (further ones are dropped and counted).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      max_steps: bound on the main trajectory's and each rollout's length (a game longer
        than this is cut short and counted as truncated).
      rollout_batch: lanes of the loops (the trajectories, and separately the rollouts,
        advanced together; a lane that finishes its trajectory or rollout takes the next
        one). 0 = 2048 (or fewer when there are fewer trajectories or rollouts).
      eval_chunk: rows per network call in the loops (0 = `eval_chunk_size()`'s default
        for the backend).
    """

    branch_probability: float
    max_probes: int
    max_strategy: int
    max_steps: int
    rollout_batch: int = 0
    eval_chunk: int = 0


class _MainCarry(NamedTuple):
    cur: Array  # int32[F, W]
    live: Array  # bool[W]: the lane plays a trajectory
    tid: Array  # int32[W]: its traversal
    next_tid: Array  # int32: the next traversal to start
    n_probe: Array  # probes of the current traversal
    n_strat: Array
    moves: Array  # moves of the current traversal (its node index)
    nodes: Array  # per-lane totals
    evals: Array
    dropped: Array
    truncated: Array
    step: Array
    r_state: Array  # int32[B * P, F]: probed states
    r_obs: Array  # float32[B * P, D]
    r_rest: Array  # float32[B * P, 2A + 1]: mask, sigma, valid
    s_obs: Array  # float32[B * S_s, D]
    s_rest: Array  # float32[B * S_s, 2A + 1]: mask, sigma, valid


class _RollCarry(NamedTuple):
    cur: Array  # int32[F, W]
    act: Array  # int32[W]: the root action still to play (-1: none)
    live: Array  # bool[W]: the lane plays a rollout
    pair: Array  # int32[W]: its (root, action) pair
    length: Array  # int32[W]: moves made in the rollout
    next_pos: Array  # int32: next rollout (position in the compacted order) to start
    nodes: Array
    evals: Array
    truncated: Array
    step: Array
    g: Array  # float32[N + 1]: traverser returns per pair (last entry: dump)


def _drain_widths(w: int) -> list[int]:
    """Lane-pool widths of the rollout loop's stages: the full pool, then 1/16 of it."""
    return [w] + ([w // 16] if w // 16 >= 8 else [])


def _compact_rollouts(c: _RollCarry, width: int) -> _RollCarry:
    """The rollout pool narrowed to `width` lanes holding its live rollouts (at most
    `width` of them, the caller's loop condition ensures it), counters kept as totals."""
    lanes, _ = _lanes_of(c.live, width)
    keep = lanes < c.live.shape[0]
    idx = jnp.minimum(lanes, c.live.shape[0] - 1)
    total = lambda x: jnp.zeros((width,), x.dtype).at[0].set(jnp.sum(x))  # noqa: E731
    return c._replace(
        cur=jnp.take(c.cur, idx, axis=1),
        act=jnp.where(keep, c.act[idx], -1),
        live=keep & c.live[idx],
        pair=c.pair[idx],
        length=c.length[idx],
        nodes=total(c.nodes),
        evals=total(c.evals),
        truncated=total(c.truncated),
    )


def probe_sampling(
    game,
    apply_fn: ApplyFn,
    cfg: ProbeConfig,
    params: tuple[Params, Params],
    traverser: Array,
    iteration: Array,
    key: Array,
    num_traversals: int,
) -> TraversalResult:
    """`num_traversals` probe traversals for `traverser` (see the module docstring).

    Args:
      game: a game of the protocol (static).
      apply_fn: the advantage networks' `apply(params, x)` (static).
      cfg: static probe settings.
      params: (player 0's, player 1's) advantage network parameters.
      traverser: int32 scalar.
      iteration: the CFR iteration t (>= 1), stored in every sample.
      key: PRNG key.
      num_traversals: static batch size B.

    Returns:
      TraversalResult with S_a = B * max_probes and S_s = B * max_strategy rows; traversal
      b owns rows [b * max_probes, (b + 1) * max_probes) of the advantage buffer (its probed
      nodes in trajectory order) and likewise for strategy rows.
    """
    n_act, dim = game.num_actions, game.observation_size
    b_total, n_probes, s_s = num_traversals, cfg.max_probes, cfg.max_strategy
    traverser = jnp.asarray(traverser, jnp.int32)
    k_init, k_main, k_probe, k_roll = jax.random.split(key, 4)
    seed_main = jax.random.bits(k_main, (2,), jnp.uint32)
    seed_probe = jax.random.bits(k_probe, (2,), jnp.uint32)
    seed_roll = jax.random.bits(k_roll, (2,), jnp.uint32)
    g = _Batched(game)
    rest = 2 * n_act + 1
    lanes = cfg.rollout_batch if cfg.rollout_batch > 0 else 2048

    # --- main trajectories: a pool of lanes, each starting the next traversal when done
    packer, root_rows, root_live = _deal_roots(game, k_init, b_total)
    f_size = packer.size
    wm = min(lanes, b_total)
    mlane = jnp.arange(wm)
    ones = jnp.ones((1, wm), jnp.float32)
    zi = jnp.zeros((wm,), jnp.int32)
    carry = _MainCarry(
        cur=root_rows[:wm].T,
        live=root_live[:wm],
        tid=mlane.astype(jnp.int32),
        next_tid=jnp.int32(wm),
        n_probe=zi,
        n_strat=zi,
        moves=zi,
        nodes=jnp.ones((wm,), jnp.int32),
        evals=zi,
        dropped=zi,
        truncated=zi,
        step=jnp.int32(0),
        r_state=jnp.zeros((b_total * n_probes, f_size), jnp.int32),
        r_obs=jnp.zeros((b_total * n_probes, dim), jnp.float32),
        r_rest=jnp.zeros((b_total * n_probes, rest), jnp.float32),
        s_obs=jnp.zeros((b_total * s_s, dim), jnp.float32),
        s_rest=jnp.zeros((b_total * s_s, rest), jnp.float32),
    )

    def main_body(c: _MainCarry) -> _MainCarry:
        flag = c.step >= 0
        states = packer.unpack(c.cur)
        player = states.current_player
        mask = g.legal(states)
        obs_rows, mask, player = _materialize(flag, g.observe_rows(states, player).T, mask, player)
        is_trav = player == traverser
        # The probe decision is keyed by the node (traversal, index on the trajectory), not
        # by lane or loop step, so it does not depend on how the lanes are scheduled.
        probe = c.live & is_trav & (_uniforms(seed_probe, c.moves, c.tid) < cfg.branch_probability)
        need = c.live & (~is_trav | probe)
        sigma = _lane_strategy(apply_fn, params, obs_rows, mask, player, need, flag, cfg.eval_chunk)
        ev = need  # every lane that needs its strategy gets it
        acts = c.live & (ev | (is_trav & ~probe))  # lanes that move this step
        u = _uniforms(seed_main, c.step, mlane)
        action = jnp.where(is_trav, _uniform_columns(mask, u), _sample_columns(sigma, u))
        child = g.step(states, action)
        opp = ev & ~is_trav
        probed = ev & is_trav
        p_row = jnp.where(probed & (c.n_probe < n_probes), c.tid * n_probes + c.n_probe, b_total * n_probes)
        s_row = jnp.where(opp & (c.n_strat < s_s), c.tid * s_s + c.n_strat, b_total * s_s)
        rows = jnp.concatenate([mask.astype(jnp.float32), sigma, ones]).T
        moves = c.moves + acts.astype(jnp.int32)
        ended = acts & child.terminated
        cut = acts & ~child.terminated & (moves >= cfg.max_steps)
        rows, p_row, s_row, child, acts, probed, opp, ended, cut = _materialize(
            flag, rows, p_row, s_row, packer.pack(child), acts, probed, opp, ended, cut
        )
        cur = jnp.where(acts[None], child, c.cur)
        free = ~c.live | ended | cut
        new_tid = c.next_tid + _prefix_count(free.astype(jnp.int32)) - 1
        start = free & (new_tid < b_total)
        new_tid = jnp.minimum(new_tid, b_total - 1)
        root = _materialize(flag, root_rows[new_tid]).T
        return _MainCarry(
            cur=jnp.where(start[None], root, cur),
            live=jnp.where(start, root_live[new_tid], c.live & ~free),
            tid=jnp.where(start, new_tid, c.tid),
            next_tid=jnp.minimum(c.next_tid + jnp.sum(free.astype(jnp.int32)), b_total),
            n_probe=jnp.where(start, 0, c.n_probe + probed.astype(jnp.int32)),
            n_strat=jnp.where(start, 0, c.n_strat + opp.astype(jnp.int32)),
            moves=jnp.where(start, 0, moves),
            nodes=c.nodes + acts.astype(jnp.int32) + start.astype(jnp.int32),
            evals=c.evals + ev.astype(jnp.int32),
            dropped=c.dropped + (probed & (c.n_probe >= n_probes)).astype(jnp.int32)
            + (opp & (c.n_strat >= s_s)).astype(jnp.int32),
            truncated=c.truncated + cut.astype(jnp.int32),
            step=c.step + 1,
            r_state=c.r_state.at[p_row].set(c.cur.T, mode="drop"),
            r_obs=c.r_obs.at[p_row].set(obs_rows, mode="drop"),
            r_rest=c.r_rest.at[p_row].set(rows, mode="drop"),
            s_obs=c.s_obs.at[s_row].set(obs_rows, mode="drop"),
            s_rest=c.s_rest.at[s_row].set(rows, mode="drop"),
        )

    m = lax.while_loop(lambda c: jnp.any(c.live) | (c.next_tid < b_total), main_body, carry)

    # --- rollouts: every legal action of every probed node, in a refilled lane pool
    n_roots = b_total * n_probes
    n_pairs = n_roots * n_act
    root_valid = m.r_rest[:, 2 * n_act] > 0.5  # [B * P]
    root_mask = m.r_rest[:, :n_act] > 0.5
    pair_valid = (root_mask & root_valid[:, None]).reshape(-1)
    position = _prefix_count(pair_valid.astype(jnp.int32)) - 1
    n_valid = jnp.sum(pair_valid.astype(jnp.int32))
    order = jnp.zeros((n_pairs,), jnp.int32).at[jnp.where(pair_valid, position, n_pairs)].set(
        jnp.arange(n_pairs, dtype=jnp.int32), mode="drop"
    )  # order[j] = the j-th valid pair
    w = min(lanes, n_pairs)
    rlane = jnp.arange(w)

    def fetch(pos, want):
        """The root state and action of the rollouts at `pos` (a start mask `want`)."""
        pair = order[jnp.minimum(pos, n_pairs - 1)]
        state = _materialize(want.any(), m.r_state[pair // n_act]).T
        return pair, state, pair % n_act

    start = rlane < n_valid
    pair0, state0, act0 = fetch(rlane, start)
    rcarry = _RollCarry(
        cur=state0,
        act=jnp.where(start, act0, -1),
        live=start,
        pair=pair0,
        length=jnp.zeros((w,), jnp.int32),
        next_pos=jnp.minimum(jnp.int32(w), n_valid),
        nodes=jnp.zeros((w,), jnp.int32),
        evals=jnp.zeros((w,), jnp.int32),
        truncated=jnp.zeros((w,), jnp.int32),
        step=jnp.int32(0),
        g=jnp.zeros((n_pairs + 1,), jnp.float32),
    )

    def roll_body(c: _RollCarry) -> _RollCarry:
        flag = c.step >= 0
        states = packer.unpack(c.cur)
        player = states.current_player
        fresh = c.live & (c.act >= 0)  # plays the probed action (no evaluation)
        need = c.live & ~fresh
        mask = g.legal(states)
        obs_rows, mask, player = _materialize(flag, g.observe_rows(states, player).T, mask, player)
        sigma = _lane_strategy(apply_fn, params, obs_rows, mask, player, need, flag, cfg.eval_chunk)
        ev = need  # every lane that needs its strategy gets it
        # Common random numbers: the rollouts of a probed node's actions draw the same
        # uniforms, keyed by the node and the move number (not by lane or loop step).
        u = _uniforms(seed_roll, c.length, c.pair // n_act)
        action = jnp.where(fresh, c.act, _sample_columns(sigma, u))
        moving = fresh | ev
        child = g.step(states, action)
        cur = jnp.where(moving[None], packer.pack(child), c.cur)
        length = c.length + moving.astype(jnp.int32)
        over = child.terminated | (length > cfg.max_steps)  # max_steps moves after the probed one
        end = moving & over
        ret = g.returns(child)[traverser]
        cur, end, ret, length, moving = _materialize(flag, cur, end, ret, length, moving)
        g_out = c.g.at[jnp.where(end, c.pair, n_pairs)].set(ret, mode="drop")
        truncated = c.truncated + (end & ~child.terminated).astype(jnp.int32)
        # Finished lanes take the next rollouts.
        free = ~c.live | end
        pos = c.next_pos + _prefix_count(free.astype(jnp.int32)) - 1
        begin = free & (pos < n_valid)
        pair, state, act = fetch(pos, begin)
        return _RollCarry(
            cur=jnp.where(begin[None], state, cur),
            act=jnp.where(begin, act, jnp.where(moving, -1, c.act)),
            live=jnp.where(begin, True, c.live & ~end),
            pair=jnp.where(begin, pair, c.pair),
            length=jnp.where(begin, 0, length),
            next_pos=jnp.minimum(c.next_pos + jnp.sum(free.astype(jnp.int32)), n_valid),
            nodes=c.nodes + moving.astype(jnp.int32),
            evals=c.evals + ev.astype(jnp.int32),
            truncated=truncated,
            step=c.step + 1,
            g=g_out,
        )

    # Draining: once every rollout has started, the live lanes dwindle while each step
    # still costs the whole pool, so the loop continues on a narrower pool of the survivors.
    r = rcarry
    widths = _drain_widths(w)
    for k, width in enumerate(widths):
        if k > 0:
            r = _compact_rollouts(r, width)
        if k + 1 < len(widths):
            narrower = widths[k + 1]
            more = lambda c, n=narrower: jnp.any(c.live) & (  # noqa: E731
                (c.next_pos < n_valid) | (jnp.sum(c.live.astype(jnp.int32)) > n)
            )
        else:
            more = lambda c: jnp.any(c.live)  # noqa: E731
        r = lax.while_loop(more, roll_body, r)
    returns = jnp.where(pair_valid, r.g[:n_pairs], 0.0).reshape(n_roots, n_act)
    sigma = m.r_rest[:, n_act : 2 * n_act]
    baseline = jnp.sum(sigma * returns, axis=-1, keepdims=True)
    regret = jnp.where(root_mask & root_valid[:, None], returns - baseline, 0.0)
    t = jnp.asarray(iteration, jnp.float32)
    adv = AdvantageSample(m.r_obs, root_mask, regret, jnp.full((n_roots,), t, jnp.float32))
    strat, strat_valid = _unpack_rows(m.s_obs, m.s_rest, n_act, iteration, StrategySample)
    counters = TraversalCounters(
        nodes=(jnp.sum(m.nodes) + jnp.sum(r.nodes)).astype(jnp.int32),
        evaluations=(jnp.sum(m.evals) + jnp.sum(r.evals)).astype(jnp.int32),
        advantage_samples=jnp.sum(root_valid.astype(jnp.int32)),
        strategy_samples=jnp.sum(strat_valid.astype(jnp.int32)),
        dropped_samples=jnp.sum(m.dropped),
        truncated=(jnp.sum(m.truncated) + jnp.sum(r.truncated)).astype(jnp.int32),
    )
    return TraversalResult(adv, root_valid, strat, strat_valid, counters)
