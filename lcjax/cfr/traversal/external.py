"""External sampling (Lanctot et al., 2009) as a vectorized depth-first traversal.

The traverser branches on every legal action; the opponent's action is sampled from its
current strategy (recorded as a strategy sample) and chance is pre-drawn in the dealt
state. When the traverser has explored every action of a node, the node yields the regret
sample r(a) = v(a) - sum_b sigma(b) v(b). The expected sum of a traversal's regret samples
at an information set I is the exact counterfactual regret of I.

Each traversal keeps an explicit stack of its traverser decisions (`max_depth - 1`
frames). A pool of lanes advances in one `lax.while_loop`; each loop step is four stages:

1. `_finish_or_expand`: a lane without a cursor looks at its top frame, which is either
   exhausted (finish it: regret sample, pop, its value goes to the parent) or expands its
   next action into the cursor.
2. `_evaluate`: a lane with a cursor gets the cursor's strategy (one batched forward); an
   opponent node samples its action, a traverser node is pushed and expands its first
   legal action.
3. `_advance_stack` and `_write_samples`: values return to frames, frame writes are
   deferred to the next step (`_Pending`), samples are written with one row write each.
4. `_start_next`: a lane whose traversal ended (done, overflow or node budget) starts the
   next traversal not yet started.

Exact on Kuhn and Leduc; a Lost Cities traversal is far too large to finish.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from lcjax.cfr.traversal import lanes as ln
from lcjax.cfr.traversal.results import (
    TraversalCounters,
    TraversalResult,
    advantage_samples,
    pack_sample_rows,
    sample_row_width,
    strategy_samples,
)
from lcjax.settings import Int, Settings, setting

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class ExternalConfig(Settings):
    """Static sizes of the external-sampling traversal (the `traversal.external` settings).

    Attributes:
      max_depth: stack frames per traversal: 1 + the most traverser decisions on a path.
      max_advantage: advantage samples kept per traversal (one per traverser node).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      node_budget: stop a traversal after this many visited states (0 = no budget).
      lanes: traversals advanced together (the vector width of the loop); a lane that
        finishes its traversal starts the next one not yet started. 0 = min(B, 1024).
    """

    max_depth: int = setting(16, Int(1))
    max_advantage: int = setting(64, Int(1))
    max_strategy: int = setting(64, Int(1))
    node_budget: int = setting(0, Int(0))
    lanes: int = setting(0, Int(0))


class _Setup(NamedTuple):
    """The constants of one call, shared by the loop's stages."""

    game: ln.BatchedGame
    packer: ln.Packer
    apply_fn: Any
    params: Any
    cfg: ExternalConfig
    traverser: Array  # int32 scalar
    seed: Array  # uint32[2]
    num_actions: int
    depth: int  # traverser frames (the root level holds none)
    num_traversals: int
    roots: Array  # int32[B, F]: every traversal's dealt root
    roots_live: Array  # bool[B]: the root is not terminal


class _Pending(NamedTuple):
    """Frame writes decided in one loop step and applied at the start of the next.

    Deferring them makes every input of the writes a loop-carried (materialized) value.
    """

    push: Array  # bool[W]: a traverser node is pushed at level push_level
    push_level: Array
    state: Array  # int32[F, W]
    data: Array  # float32[3A, W]: sigma, child values (zero), legal mask
    first: Array  # int32[W]: the action explored first
    ret: Array  # bool[W]: a child value returns to frame ret_level, action ret_action
    ret_level: Array
    ret_action: Array
    value: Array  # float32[W]
    ret_next: Array  # int32[W]: that frame's next action to explore (A when exhausted)


class _Frames(NamedTuple):
    """The traverser nodes on each lane's path (L = max_depth - 1 levels)."""

    state: Array  # int32[L, F, W]
    data: Array  # float32[L, 3A, W]: sigma, child values, legal mask
    next: Array  # int32[L, W]: the action being explored (A: all done)


class _Carry(NamedTuple):
    cursor: Array  # int32[F, W]: the node at the lane's cursor
    has_cursor: Array  # bool[W]: the cursor is a non-terminal node still to evaluate
    stack_size: Array  # int32[W]: traverser frames on the stack
    frames: _Frames
    pending: _Pending
    active: Array  # bool[W]: the lane runs a traversal
    traversal: Array  # int32[W]: the traversal it runs
    next_traversal: Array  # int32: the next traversal to start
    traversal_nodes: Array  # int32[W]: states visited by the current traversal
    advantage_count: Array  # int32[W]: samples of the current traversal
    strategy_count: Array
    nodes: Array  # int32[W] per-lane totals
    evaluations: Array
    dropped: Array
    truncated: Array
    step: Array  # int32: loop step
    adv_obs: Array  # float32[B * S_a, D]
    adv_rows: Array  # float32[B * S_a, 2A + 1]: mask, regret, valid
    strat_obs: Array  # float32[B * S_s, D]
    strat_rows: Array  # float32[B * S_s, 2A + 1]: mask, sigma, valid


class _Top(NamedTuple):
    """Stage 1's outcome for the lanes without a cursor."""

    finish: Array  # bool[W]: the top frame is exhausted and yields its regret sample
    expand: Array  # bool[W]: the top frame expands its next action
    state: Any  # the top frame's game state (lanes last)
    mask: Array  # bool[A, W]: its legal actions
    value: Array  # float32[W]: its value under sigma
    regret: Array  # float32[A, W]
    child_terminal: Array  # bool[W]: the expanded child is terminal
    child_return: Array  # float32[W]: the traverser's return there
    cursor: Array  # int32[F, W] and bool[W]: the cursor after expanding
    has_cursor: Array


class _Eval(NamedTuple):
    """Stage 2's outcome for the lanes with a cursor."""

    evaluated: Array  # bool[W]
    obs_rows: Array  # float32[W, D]: the cursor's observation (the frame's when finishing)
    mask: Array  # bool[A, W]
    sigma: Array  # float32[A, W]
    opponent: Array  # bool[W]: an opponent node (a strategy sample)
    overflow: Array  # bool[W]: a traverser node with no stack frame left
    push: Array  # bool[W]: a traverser node pushed as a frame
    first: Array  # int32[W]: its first legal action
    child: Array  # int32[F, W]: the packed child state
    child_terminal: Array
    child_return: Array


class _Advance(NamedTuple):
    """Stage 3's outcome: the stack after this step."""

    pending: _Pending
    cursor: Array
    has_cursor: Array
    stack_size: Array
    done: Array  # bool[W]: the traversal is complete
    made: Array  # int32[W]: new states visited


def _apply_pending(s: _Setup, c: _Carry) -> _Frames:
    """The previous step's frame writes: pushed frames, and values returned to frames."""
    n_act, p = s.num_actions, c.pending
    levels = jnp.arange(s.depth)[:, None]
    actions = jnp.arange(n_act)[:, None]
    no_rows = jnp.zeros((n_act, p.push.shape[0]), bool)
    at = (levels == p.push_level[None]) & p.push[None]
    state = jnp.where(at[:, None, :], p.state[None], c.frames.state)
    data = jnp.where(at[:, None, :], p.data[None], c.frames.data)
    nxt = jnp.where(at, p.first[None], c.frames.next)
    at = (levels == p.ret_level[None]) & p.ret[None]
    value_row = jnp.concatenate([no_rows, actions == p.ret_action[None], no_rows])
    data = jnp.where(at[:, None, :] & value_row[None], p.value[None, None], data)
    nxt = jnp.where(at, p.ret_next[None], nxt)
    return _Frames(state, data, nxt)


def _finish_or_expand(s: _Setup, c: _Carry, frames: _Frames, flag: Array) -> _Top:
    """Stage 1: lanes without a cursor finish their top frame or expand its next action."""
    n_act = s.num_actions
    idle = c.active & ~c.has_cursor
    at_top = jnp.arange(s.depth)[:, None] == jnp.maximum(c.stack_size - 1, 0)[None]
    state = ln.read_level(frames.state, at_top)
    data = ln.read_level(frames.data, at_top)
    nxt = ln.read_level(frames.next, at_top)
    state, data, nxt = ln.materialize(flag, state, data, nxt)
    sigma, values, mask = data[:n_act], data[n_act : 2 * n_act], data[2 * n_act :] > 0.5
    finish = idle & (nxt >= n_act)
    expand = idle & (nxt < n_act)
    states = s.packer.unpack(state)
    child = s.game.step(states, jnp.minimum(nxt, n_act - 1))
    child_ret = s.game.returns(child)[s.traverser]
    packed, child_term, child_ret = ln.materialize(flag, s.packer.pack(child), child.terminated, child_ret)
    cursor = jnp.where(expand[None], packed, c.cursor)
    has_cursor = c.has_cursor | (expand & ~child_term)
    value = jnp.sum(sigma * values, axis=0)
    regret = jnp.where(mask, values - value[None], 0.0)
    cursor, has_cursor, value, regret = ln.materialize(flag, cursor, has_cursor, value, regret)
    return _Top(finish, expand, states, mask, value, regret, child_term, child_ret, cursor, has_cursor)


def _evaluate(s: _Setup, c: _Carry, top: _Top, flag: Array) -> _Eval:
    """Stage 2: the cursor's strategy; opponents sample, traverser nodes expand their first action."""
    states = s.packer.unpack(top.cursor)
    player = states.current_player
    need = c.active & top.has_cursor
    # Finishing lanes observe their frame, for the regret sample's row.
    obs_state = jax.tree_util.tree_map(lambda a, b: jnp.where(top.finish, a, b), top.state, states)
    obs_player = jnp.where(top.finish, s.traverser, player)
    mask = s.game.legal(states)
    obs_rows, mask, player = ln.materialize(flag, s.game.observe_rows(obs_state, obs_player).T, mask, player)
    sigma = ln.lane_strategy(s.apply_fn, s.params, obs_rows, mask, player, need, flag)
    is_trav = player == s.traverser
    opponent = need & ~is_trav
    overflow = need & is_trav & (c.stack_size >= s.depth)
    push = need & is_trav & ~overflow
    lane = jnp.arange(mask.shape[1])
    sampled = ln.sample_columns(sigma, ln.uniforms(s.seed, c.step, lane))
    first = jnp.argmax(mask, axis=0).astype(jnp.int32)
    child = s.game.step(states, jnp.where(is_trav, first, sampled))
    child_ret = s.game.returns(child)[s.traverser]
    packed, child_term, child_ret, first, push, opponent, overflow = ln.materialize(
        flag, s.packer.pack(child), child.terminated, child_ret, first, push, opponent, overflow
    )
    return _Eval(need, obs_rows, mask, sigma, opponent, overflow, push, first, packed, child_term, child_ret)


def _advance_stack(s: _Setup, c: _Carry, frames: _Frames, top: _Top, ev: _Eval, flag: Array) -> _Advance:
    """Stage 3a: pops, pushes and the value (at most one per lane) returned to a frame."""
    n_act = s.num_actions
    # The child is visited unless the traversal is out of nodes (the evaluated node was the
    # last one its budget allows) or of stack frames.
    visit = ev.evaluated & ~ev.overflow
    if s.cfg.node_budget > 0:
        visit = visit & (c.traversal_nodes + top.expand.astype(jnp.int32) < s.cfg.node_budget)
    size = c.stack_size - top.finish.astype(jnp.int32) + ev.push.astype(jnp.int32)
    # A finished frame's value goes to its parent, a terminal child's to its frame.
    ret = (top.finish & (size > 0)) | (top.expand & top.child_terminal) | (visit & ev.child_terminal & (size > 0))
    value = jnp.where(top.finish, top.value, jnp.where(top.expand & top.child_terminal, top.child_return, ev.child_return))
    level = jnp.maximum(size - 1, 0)
    at_level = jnp.arange(s.depth)[:, None] == level[None]
    level_next = jnp.where(ev.push, ev.first, ln.read_level(frames.next, at_level))
    level_mask = jnp.where(ev.push[None], ev.mask, ln.read_level(frames.data[:, 2 * n_act :], at_level) > 0.5)
    after = ln.first_after(level_mask, level_next)
    done = (top.finish & (size == 0)) | (visit & ev.child_terminal & (size == 0)) | ev.overflow
    made = top.expand.astype(jnp.int32) + visit.astype(jnp.int32)
    new_cursor = visit & ~ev.child_terminal
    ret, level, level_next, value, after, new_cursor, done, size, made = ln.materialize(
        flag, ret, level, level_next, value, after, new_cursor, done, size, made
    )
    data = jnp.concatenate([ev.sigma, jnp.zeros_like(ev.sigma), ev.mask.astype(jnp.float32)])
    pending = _Pending(ev.push, c.stack_size, top.cursor, data, ev.first, ret, level, level_next, value, after)
    cursor = jnp.where(new_cursor[None], ev.child, top.cursor)
    has_cursor = jnp.where(ev.evaluated, new_cursor, top.has_cursor)
    return _Advance(pending, cursor, has_cursor, size, done, made)


def _write_samples(s: _Setup, c: _Carry, top: _Top, ev: _Eval, flag: Array) -> dict[str, Array]:
    """Stage 3b: one row write per kind, straight into the traversal's rows."""
    b_total, s_a, s_s = s.num_traversals, s.cfg.max_advantage, s.cfg.max_strategy
    a_slot, s_slot = c.advantage_count, c.strategy_count
    a_row = jnp.where(top.finish & (a_slot < s_a), c.traversal * s_a + a_slot, b_total * s_a)  # out of range: dropped
    s_row = jnp.where(ev.opponent & (s_slot < s_s), c.traversal * s_s + s_slot, b_total * s_s)
    lost = (top.finish & (a_slot >= s_a)).astype(jnp.int32) + (ev.opponent & (s_slot >= s_s)).astype(jnp.int32)
    row_mask = jnp.where(top.finish[None], top.mask, ev.mask)
    row_vec = jnp.where(top.finish[None], top.regret, ev.sigma)
    rows, a_row, s_row = ln.materialize(flag, pack_sample_rows(row_mask, row_vec), a_row, s_row)
    return dict(
        adv_obs=c.adv_obs.at[a_row].set(ev.obs_rows, mode="drop"),
        adv_rows=c.adv_rows.at[a_row].set(rows, mode="drop"),
        strat_obs=c.strat_obs.at[s_row].set(ev.obs_rows, mode="drop"),
        strat_rows=c.strat_rows.at[s_row].set(rows, mode="drop"),
        advantage_count=c.advantage_count + top.finish.astype(jnp.int32),
        strategy_count=c.strategy_count + ev.opponent.astype(jnp.int32),
        dropped=c.dropped + lost,
    )


def _start_next(s, c: _Carry, frames: _Frames, ev: _Eval, adv: _Advance, written: dict, flag: Array) -> _Carry:
    """Stage 4: a lane whose traversal ended (done, overflow or budget) starts the next one."""
    alive = c.active
    traversal_nodes = c.traversal_nodes + adv.made
    stop = jnp.zeros_like(alive)
    if s.cfg.node_budget > 0:  # out of nodes: stop once the last one is evaluated
        stop = alive & ~adv.done & (traversal_nodes >= s.cfg.node_budget) & ~adv.has_cursor
    free = ~(alive & ~adv.done & ~stop)
    nxt = ln.refill(free, c.next_traversal, s.num_traversals)
    start = nxt.start
    root = ln.materialize(flag, s.roots[nxt.item]).T
    root_ok = s.roots_live[nxt.item]
    return _Carry(
        cursor=jnp.where(start[None], root, adv.cursor),
        has_cursor=jnp.where(start, root_ok, adv.has_cursor),
        stack_size=jnp.where(start, 0, adv.stack_size),
        frames=frames,
        pending=adv.pending,
        active=jnp.where(start, root_ok, ~free),
        traversal=jnp.where(start, nxt.item, c.traversal),
        next_traversal=nxt.next_item,
        traversal_nodes=jnp.where(start, 1, traversal_nodes),
        advantage_count=jnp.where(start, 0, written["advantage_count"]),
        strategy_count=jnp.where(start, 0, written["strategy_count"]),
        nodes=c.nodes + adv.made + start.astype(jnp.int32),
        evaluations=c.evaluations + ev.evaluated.astype(jnp.int32),
        dropped=written["dropped"],
        truncated=c.truncated + (ev.overflow | stop).astype(jnp.int32),
        step=c.step + 1,
        adv_obs=written["adv_obs"],
        adv_rows=written["adv_rows"],
        strat_obs=written["strat_obs"],
        strat_rows=written["strat_rows"],
    )


def _loop_body(s: _Setup, c: _Carry) -> _Carry:
    flag = c.step >= 0  # traced "true" for `materialize`
    frames = _apply_pending(s, c)
    top = _finish_or_expand(s, c, frames, flag)
    ev = _evaluate(s, c, top, flag)
    adv = _advance_stack(s, c, frames, top, ev, flag)
    written = _write_samples(s, c, top, ev, flag)
    return _start_next(s, c, frames, ev, adv, written, flag)


def _initial_carry(s: _Setup, width: int, state_size: int, obs_size: int) -> _Carry:
    n_act, b_total = s.num_actions, s.num_traversals
    zi = jnp.zeros((width,), jnp.int32)
    zb = jnp.zeros((width,), bool)
    pending = _Pending(
        zb, zi, jnp.zeros((state_size, width), jnp.int32), jnp.zeros((3 * n_act, width), jnp.float32),
        zi, zb, zi, zi, jnp.zeros((width,), jnp.float32), zi,
    )
    frames = _Frames(
        jnp.zeros((s.depth, state_size, width), jnp.int32),
        jnp.zeros((s.depth, 3 * n_act, width), jnp.float32),
        jnp.zeros((s.depth, width), jnp.int32),
    )
    row = sample_row_width(n_act)
    s_a, s_s = s.cfg.max_advantage, s.cfg.max_strategy
    return _Carry(
        cursor=s.roots[:width].T,
        has_cursor=s.roots_live[:width],
        stack_size=zi,
        frames=frames,
        pending=pending,
        active=s.roots_live[:width],
        traversal=jnp.arange(width, dtype=jnp.int32),
        next_traversal=jnp.int32(width),
        traversal_nodes=jnp.ones((width,), jnp.int32),
        advantage_count=zi,
        strategy_count=zi,
        nodes=jnp.ones((width,), jnp.int32),
        evaluations=zi,
        dropped=zi,
        truncated=zi,
        step=jnp.int32(0),
        adv_obs=jnp.zeros((b_total * s_a, obs_size), jnp.float32),
        adv_rows=jnp.zeros((b_total * s_a, row), jnp.float32),
        strat_obs=jnp.zeros((b_total * s_s, obs_size), jnp.float32),
        strat_rows=jnp.zeros((b_total * s_s, row), jnp.float32),
    )


def external_sampling(
    game, apply_fn, cfg: ExternalConfig, params, traverser: Array, iteration: Array, key: Array, num_traversals: int
) -> TraversalResult:
    """`num_traversals` external-sampling traversals for `traverser` (see the module docstring).

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
    n_act = game.num_actions
    width = min(cfg.lanes if cfg.lanes > 0 else 1024, num_traversals)
    k_init, k_loop = jax.random.split(key)
    packer, roots, roots_live = ln.deal_roots(game, k_init, num_traversals)
    s = _Setup(
        game=ln.BatchedGame(game), packer=packer, apply_fn=apply_fn, params=params, cfg=cfg,
        traverser=jnp.asarray(traverser, jnp.int32), seed=jax.random.bits(k_loop, (2,), jnp.uint32),
        num_actions=n_act, depth=max(cfg.max_depth - 1, 1), num_traversals=num_traversals,
        roots=roots, roots_live=roots_live,
    )
    carry = _initial_carry(s, width, packer.size, game.observation_size)
    more = lambda c: jnp.any(c.active) | (c.next_traversal < num_traversals)  # noqa: E731
    c = lax.while_loop(more, lambda c: _loop_body(s, c), carry)
    adv, adv_valid = advantage_samples(c.adv_obs, c.adv_rows, n_act, iteration)
    strat, strat_valid = strategy_samples(c.strat_obs, c.strat_rows, n_act, iteration)
    counters = TraversalCounters(
        nodes=jnp.sum(c.nodes),
        evaluations=jnp.sum(c.evaluations),
        advantage_samples=jnp.sum(adv_valid.astype(jnp.int32)),
        strategy_samples=jnp.sum(strat_valid.astype(jnp.int32)),
        dropped_samples=jnp.sum(c.dropped),
        truncated=jnp.sum(c.truncated),
    )
    return TraversalResult(adv, adv_valid, strat, strat_valid, counters)
