"""Vectorized Deep CFR traversals, generic over any game of `lcjax.env.protocol`.

Both schemes advance a batch of traversals in lockstep inside one jitted computation. The
per-traversal logic is written for one game and `jax.vmap`ped, so every network evaluation
of a loop step is one batched forward over all traversals (the vmapped matmul), with no
per-node dispatch. The traverser's and the opponent's current strategies come from regret
matching on the two players' advantage networks; both networks run on the whole batch and
each traversal keeps the output of the player to act (a per-traversal choice of weights
would turn the matmul into a batched one with a weight copy per traversal).

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
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

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


def batch_strategy(
    apply_fn: ApplyFn, params: tuple[Params, Params], obs: Array, mask: Array, player: Array, live: Array
) -> Array:
    """`current_strategy` for an explicit batch, running one network when it can.

    When every live row has the same acting player only that player's network runs (a
    `lax.cond` on the whole batch); otherwise both run and each row keeps its own. Games
    whose turns alternate in lockstep (Lost Cities rollouts grouped by player) pay for one
    forward instead of two.

    Args:
      obs: float32[B, D]; mask: bool[B, A]; player: int32[B]; live: bool[B].
    """
    first = player[jnp.argmax(live)]
    same = jnp.all(~live | (player == first))

    def one(x):
        return jax.lax.cond(first == 0, lambda y: apply_fn(params[0], y), lambda y: apply_fn(params[1], y), x)

    def both(x):
        return jnp.where((player == 0)[:, None], apply_fn(params[0], x), apply_fn(params[1], x))

    regrets = jax.lax.cond(same, one, both, obs)
    return regret_matching(regrets, mask)


def _sample_action(key: Array, probs: Array) -> Array:
    """An action drawn from `probs` (float32[A]) with one uniform draw."""
    cdf = jnp.cumsum(probs)
    u = jax.random.uniform(key) * cdf[-1]
    # The last action with positive probability also absorbs rounding at the top end.
    last = probs.shape[-1] - 1 - jnp.argmax(probs[::-1] > 0)
    return jnp.minimum(jnp.argmax(cdf > u), last).astype(jnp.int32)


def _uniform_action(key: Array, mask: Array) -> Array:
    """A uniformly random legal action (one uniform draw)."""
    counts = jnp.cumsum(mask.astype(jnp.int32))
    k = jnp.floor(jax.random.uniform(key) * counts[-1]).astype(jnp.int32)
    return jnp.argmax(counts > k).astype(jnp.int32)


def _buffer(size: int, example: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: jnp.zeros((size,) + jnp.shape(x), jnp.asarray(x).dtype), example)


def _write(buffer: Any, count: Array, item: Any, do: Array):
    """Write `item` at row `count` when `do` and there is room; returns (buffer, count, dropped)."""
    size = jax.tree_util.tree_leaves(buffer)[0].shape[0]
    fits = do & (count < size)
    row = jnp.where(fits, count, size)  # out of range: dropped by mode="drop"
    buffer = jax.tree_util.tree_map(lambda b, x: b.at[row].set(x.astype(b.dtype), mode="drop"), buffer, item)
    return buffer, count + fits.astype(jnp.int32), (do & ~fits).astype(jnp.int32)


def _tree_select(pred: Array, a: Any, b: Any) -> Any:
    return jax.tree_util.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


def _tree_get(tree: Any, i: Array) -> Any:
    return jax.tree_util.tree_map(lambda x: x[i], tree)


def _tree_set(tree: Any, i: Array, item: Any) -> Any:
    return jax.tree_util.tree_map(lambda x, y: x.at[i].set(y), tree, item)


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
    """

    max_depth: int
    max_advantage: int
    max_strategy: int
    node_budget: int = 0
    max_loop_steps: int = 1_000_000


def _external_one(game, apply_fn, cfg: ExternalConfig, params, traverser, iteration, key):
    """One external-sampling traversal for `traverser`; see `external_sampling`."""
    a_size = game.num_actions
    k_init, k_loop = jax.random.split(key)
    root = game.init(k_init)
    depth = cfg.max_depth
    frames = _tree_set(_buffer(depth, root), 0, root)
    obs0 = game.observe(root, root.current_player)
    adv_buf = _buffer(cfg.max_advantage, AdvantageSample(obs0, jnp.zeros(a_size, bool), jnp.zeros(a_size), jnp.float32(0)))
    str_buf = _buffer(cfg.max_strategy, StrategySample(obs0, jnp.zeros(a_size, bool), jnp.zeros(a_size), jnp.float32(0)))
    zeros_i = jnp.int32(0)
    carry = dict(
        frames=frames,
        sigma=jnp.zeros((depth, a_size), jnp.float32),
        mask=jnp.zeros((depth, a_size), bool),
        values=jnp.zeros((depth, a_size), jnp.float32),
        next=jnp.full((depth,), a_size, jnp.int32),
        evaluated=jnp.zeros((depth,), bool),
        sp=zeros_i,
        key=k_loop,
        adv=adv_buf,
        adv_n=zeros_i,
        strat=str_buf,
        strat_n=zeros_i,
        nodes=zeros_i,
        evals=zeros_i,
        dropped=zeros_i,
        loops=zeros_i,
        truncated=jnp.bool_(False),
    )
    actions = jnp.arange(a_size)
    t = jnp.asarray(iteration, jnp.float32)

    def alive(c):
        return c["sp"] >= 0

    def body(c):
        sp = c["sp"]
        key, k_act = jax.random.split(c["key"])
        top = _tree_get(c["frames"], sp)
        terminal = top.terminated
        evaluated = c["evaluated"][sp]
        player = top.current_player
        mask = game.legal_action_mask(top)
        obs = game.observe(top, player)
        sigma_now = current_strategy(apply_fn, params, obs, mask, player)
        is_trav = player == traverser

        opp_node = ~terminal & ~evaluated & ~is_trav
        trav_node = ~terminal & ~evaluated & is_trav
        finish = ~terminal & evaluated

        # Opponent node: sample, record the strategy, continue in the same frame.
        opp_action = _sample_action(k_act, sigma_now)
        strat, strat_n, drop_s = _write(c["strat"], c["strat_n"], StrategySample(obs, mask, sigma_now, t), opp_node)

        # Traverser node: record sigma, expand the first legal action.
        first = jnp.argmax(mask).astype(jnp.int32)
        sigma = c["sigma"].at[sp].set(jnp.where(trav_node, sigma_now, c["sigma"][sp]))
        masks = c["mask"].at[sp].set(jnp.where(trav_node, mask, c["mask"][sp]))
        values = c["values"].at[sp].set(jnp.where(trav_node, 0.0, c["values"][sp]))
        nxt = c["next"].at[sp].set(jnp.where(trav_node, first, c["next"][sp]))
        evaluated_arr = c["evaluated"].at[sp].set(evaluated | trav_node)

        # Finished traverser node: regret sample, then return its value to the parent.
        sig_f, mask_f, val_f = c["sigma"][sp], c["mask"][sp], c["values"][sp]
        node_value = jnp.sum(sig_f * val_f)
        regret = jnp.where(mask_f, val_f - node_value, 0.0)
        adv, adv_n, drop_a = _write(c["adv"], c["adv_n"], AdvantageSample(obs, mask_f, regret, t), finish)

        # A value goes back to the parent frame (terminal states and finished nodes).
        returning = terminal | finish
        value = jnp.where(terminal, game.returns(top)[traverser], node_value)
        parent = jnp.maximum(sp - 1, 0)
        has_parent = returning & (sp > 0)
        p_action = nxt[parent]
        values = values.at[parent, p_action].set(jnp.where(has_parent, value, values[parent, p_action]))
        later = (actions > p_action) & masks[parent]
        p_next = jnp.where(later.any(), jnp.argmax(later), a_size).astype(jnp.int32)
        nxt = nxt.at[parent].set(jnp.where(has_parent, p_next, nxt[parent]))
        sibling = has_parent & (p_next < a_size)

        # Frame updates: replace in place (opponent move, next sibling) or push a child.
        # One `step` serves all three cases: pick its input state and action first.
        push = trav_node
        target = jnp.minimum(jnp.where(push, sp + 1, sp), depth - 1)
        overflow = push & (sp + 1 >= depth)
        source = _tree_select(sibling, _tree_get(c["frames"], parent), top)
        action = jnp.where(opp_node, opp_action, jnp.where(push, first, jnp.minimum(p_next, a_size - 1)))
        new_state = game.step(source, action)
        write = (opp_node | push | sibling) & ~overflow
        frames = c["frames"]
        frames = _tree_set(frames, target, _tree_select(write, new_state, _tree_get(frames, target)))
        evaluated_arr = evaluated_arr.at[target].set(jnp.where(write, False, evaluated_arr[target]))
        # A returning frame whose parent has no more actions pops; the parent finishes next.
        pop = returning & ~sibling
        new_sp = jnp.where(push, sp + 1, jnp.where(pop, sp - 1, sp))

        nodes = c["nodes"] + (terminal | opp_node | trav_node).astype(jnp.int32)
        evals = c["evals"] + (opp_node | trav_node).astype(jnp.int32)
        loops = c["loops"] + 1
        over_budget = (cfg.node_budget > 0) & (nodes >= cfg.node_budget)
        stop = overflow | over_budget | (loops >= cfg.max_loop_steps)
        truncated = c["truncated"] | (stop & (new_sp >= 0))
        new_sp = jnp.where(stop, -1, new_sp)
        return dict(
            frames=frames,
            sigma=sigma,
            mask=masks,
            values=values,
            next=nxt,
            evaluated=evaluated_arr,
            sp=new_sp,
            key=key,
            adv=adv,
            adv_n=adv_n,
            strat=strat,
            strat_n=strat_n,
            nodes=nodes,
            evals=evals,
            dropped=c["dropped"] + drop_a + drop_s,
            loops=loops,
            truncated=truncated,
        )

    c = jax.lax.while_loop(alive, body, carry)
    adv_valid = jnp.arange(cfg.max_advantage) < c["adv_n"]
    strat_valid = jnp.arange(cfg.max_strategy) < c["strat_n"]
    counters = TraversalCounters(c["nodes"], c["evals"], c["adv_n"], c["strat_n"], c["dropped"], c["truncated"].astype(jnp.int32))
    return c["adv"], adv_valid, c["strat"], strat_valid, counters


def _flatten_result(adv, adv_valid, strat, strat_valid, counters) -> TraversalResult:
    flat = lambda tree: jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)
    total = jax.tree_util.tree_map(lambda x: jnp.sum(x).astype(jnp.int32), counters)
    return TraversalResult(flat(adv), adv_valid.reshape(-1), flat(strat), strat_valid.reshape(-1), total)


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
    """`num_traversals` external-sampling traversals for `traverser`, advanced in lockstep.

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
      TraversalResult with S_a = B * max_advantage and S_s = B * max_strategy rows.
    """
    keys = jax.random.split(key, num_traversals)
    one = functools.partial(_external_one, game, apply_fn, cfg, params, traverser, iteration)
    return _flatten_result(*jax.vmap(one)(keys))


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
      rollout_batch: rollouts advanced together per chunk (bounds memory; 0 = min(all, 2048)).
        Real rollouts are packed first, so chunks holding none cost nothing.
    """

    branch_probability: float
    max_probes: int
    max_strategy: int
    max_steps: int
    rollout_batch: int = 0


def _probe_main_one(game, apply_fn, cfg: ProbeConfig, params, traverser, iteration, key):
    """The main trajectory of one probe traversal: probe roots and strategy samples."""
    a_size = game.num_actions
    k_init, k_loop = jax.random.split(key)
    state = game.init(k_init)
    obs0 = game.observe(state, state.current_player)
    t = jnp.asarray(iteration, jnp.float32)
    roots = _buffer(cfg.max_probes, state)
    root_adv = _buffer(cfg.max_probes, AdvantageSample(obs0, jnp.zeros(a_size, bool), jnp.zeros(a_size), t))
    strat = _buffer(cfg.max_strategy, StrategySample(obs0, jnp.zeros(a_size, bool), jnp.zeros(a_size), t))
    zero = jnp.int32(0)
    carry = (state, k_loop, roots, root_adv, zero, strat, zero, zero, zero, zero)

    def alive(c):
        return ~c[0].terminated & (c[9] < cfg.max_steps)

    def body(c):
        state, key, roots, root_adv, n_probe, strat, n_strat, nodes, dropped, steps = c
        key, k_act, k_probe = jax.random.split(key, 3)
        player = state.current_player
        mask = game.legal_action_mask(state)
        obs = game.observe(state, player)
        sigma = current_strategy(apply_fn, params, obs, mask, player)
        is_trav = player == traverser
        probe = is_trav & (jax.random.uniform(k_probe) < cfg.branch_probability)
        size = cfg.max_probes
        fits = probe & (n_probe < size)
        row = jnp.where(fits, n_probe, size)
        roots = jax.tree_util.tree_map(lambda b, x: b.at[row].set(x, mode="drop"), roots, state)
        # The regret slot holds the traverser's current strategy until the rollouts return.
        root_adv = jax.tree_util.tree_map(
            lambda b, x: b.at[row].set(x.astype(b.dtype), mode="drop"), root_adv, AdvantageSample(obs, mask, sigma, t)
        )
        n_probe = n_probe + fits.astype(jnp.int32)
        strat, n_strat, drop_s = _write(strat, n_strat, StrategySample(obs, mask, sigma, t), ~is_trav)
        action = jnp.where(is_trav, _uniform_action(k_act, mask), _sample_action(k_act, sigma))
        state = game.step(state, action)
        dropped = dropped + drop_s + (probe & ~fits).astype(jnp.int32)
        return state, key, roots, root_adv, n_probe, strat, n_strat, nodes + 1, dropped, steps + 1

    state, _, roots, root_adv, n_probe, strat, n_strat, nodes, dropped, steps = jax.lax.while_loop(alive, body, carry)
    truncated = ~state.terminated
    return roots, root_adv, n_probe, strat, n_strat, nodes + 1, dropped, truncated


def _rollouts(game, apply_fn, max_steps, params, traverser, states, keys):
    """Play every state in `states` (leading axis R) to the end on the current strategies.

    Returns (float32[R] traverser returns, int32 nodes visited, int32 truncated count).
    """

    def alive(c):
        return jnp.any(~c[0].terminated) & (c[3] < max_steps)

    def body(c):
        s, k, nodes, steps = c
        k, sub = jax.vmap(lambda x: tuple(jax.random.split(x)))(k)
        live = ~s.terminated
        player = s.current_player
        mask = jax.vmap(game.legal_action_mask)(s)
        obs = jax.vmap(game.observe)(s, player)
        sigma = batch_strategy(apply_fn, params, obs, mask, player, live)
        action = jax.vmap(_sample_action)(sub, sigma)
        s = jax.vmap(game.step)(s, action)
        return s, k, nodes + jnp.sum(live).astype(jnp.int32), steps + 1

    s, _, nodes, _ = jax.lax.while_loop(alive, body, (states, keys, jnp.int32(0), jnp.int32(0)))
    g = jax.vmap(game.returns)(s)[:, 0]
    g = jnp.where(traverser == 0, g, -g)
    return g, nodes + jnp.sum(s.terminated).astype(jnp.int32), jnp.sum(~s.terminated).astype(jnp.int32)


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
      TraversalResult with S_a = B * max_probes and S_s = B * max_strategy rows.
    """
    a_size = game.num_actions
    k_main, k_roll = jax.random.split(key)
    main = functools.partial(_probe_main_one, game, apply_fn, cfg, params, traverser, iteration)
    roots, root_adv, n_probe, strat, n_strat, nodes, dropped, truncated = jax.vmap(main)(
        jax.random.split(k_main, num_traversals)
    )
    b, p = num_traversals, cfg.max_probes
    root_valid = jnp.arange(p)[None, :] < n_probe[:, None]  # [B, P]
    flat = lambda tree: jax.tree_util.tree_map(lambda x: x.reshape((b * p,) + x.shape[2:]), tree)
    roots, root_adv, root_valid = flat(roots), flat(root_adv), root_valid.reshape(-1)
    sigma = root_adv.regret  # [B*P, A], the traverser's current strategy at each root
    masks = root_adv.mask & root_valid[:, None]

    # Every (root, action) pair is one rollout; the actions of a root share its deck and,
    # for lower variance, the same random stream (common random numbers).
    children = jax.vmap(lambda s: jax.vmap(lambda a: game.step(s, a))(jnp.arange(a_size)))(roots)
    flat_children = jax.tree_util.tree_map(lambda x: x.reshape((b * p * a_size,) + x.shape[2:]), children)
    root_keys = jax.random.split(k_roll, b * p)
    pair_keys = jnp.repeat(root_keys, a_size, axis=0)
    pair_valid = masks.reshape(-1)
    # Illegal or unused pairs start terminated, so they cost no loop iterations of their own.
    flat_children = flat_children._replace(terminated=flat_children.terminated | ~pair_valid)

    # Compact: real rollouts first, grouped by the player to move, so that chunks past the
    # last real rollout end at once and rollouts of one chunk tend to move in lockstep.
    total = b * p * a_size
    sort_key = (~pair_valid).astype(jnp.int32) * 2 + flat_children.current_player
    order = jnp.argsort(sort_key, stable=True)
    ordered = jax.tree_util.tree_map(lambda x: x[order], flat_children)
    ordered_keys = pair_keys[order]
    chunk = cfg.rollout_batch if cfg.rollout_batch > 0 else min(total, 2048)
    n_chunks = -(-total // chunk)
    pad = n_chunks * chunk - total
    if pad:
        ordered = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]), ordered)
        ordered = ordered._replace(terminated=ordered.terminated.at[total:].set(True))
        ordered_keys = jnp.concatenate([ordered_keys, jnp.repeat(ordered_keys[:1], pad, axis=0)])
    chunked = jax.tree_util.tree_map(lambda x: x.reshape((n_chunks, chunk) + x.shape[1:]), (ordered, ordered_keys))

    def run_chunk(_, xs):
        s, k = xs
        g, n, tr = _rollouts(game, apply_fn, cfg.max_steps, params, traverser, s, k)
        return None, (g, n, tr)

    _, (g_sorted, roll_nodes, roll_trunc) = jax.lax.scan(run_chunk, None, chunked)
    g = jnp.zeros((total,), jnp.float32).at[order].set(g_sorted.reshape(-1)[:total])
    g = g.reshape(b * p, a_size)
    # Count only real rollouts' states: pairs that started terminated visited nothing.
    roll_nodes = jnp.sum(roll_nodes) - jnp.int32(n_chunks * chunk) + jnp.sum(pair_valid).astype(jnp.int32)
    g = jnp.where(masks, g, 0.0)
    baseline = jnp.sum(sigma * g, axis=-1, keepdims=True)
    regret = jnp.where(masks, g - baseline, 0.0)
    adv = root_adv._replace(regret=regret)

    strat_valid = jnp.arange(cfg.max_strategy)[None, :] < n_strat[:, None]
    flat_s = lambda tree: jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)
    n_adv = jnp.sum(root_valid).astype(jnp.int32)
    counters = TraversalCounters(
        nodes=(jnp.sum(nodes) + roll_nodes).astype(jnp.int32),
        evaluations=(jnp.sum(nodes) - num_traversals + roll_nodes - jnp.sum(pair_valid)).astype(jnp.int32),
        advantage_samples=n_adv,
        strategy_samples=jnp.sum(n_strat).astype(jnp.int32),
        dropped_samples=jnp.sum(dropped).astype(jnp.int32),
        truncated=(jnp.sum(truncated) + jnp.sum(roll_trunc)).astype(jnp.int32),
    )
    return TraversalResult(adv, root_valid, flat_s(strat), strat_valid.reshape(-1), counters)
