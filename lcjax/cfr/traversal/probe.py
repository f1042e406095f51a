"""Probe sampling: a fixed-policy main trajectory whose traverser nodes are probed by rollouts.

ESCHER-style (McAleer et al., 2022, arXiv 2206.04122) without a learned value: on the main
trajectory the traverser follows a fixed uniform sampling policy and the opponent its
current strategy (recorded as strategy samples). At each traverser node, with fixed
probability `branch_probability`, every legal action is probed by one rollout to the end
with both players on their current strategies; the rollouts of a node's actions share
their random numbers (the deck is pre-drawn in the state; the players' draws are keyed by
node and move number). The regret sample is r(a) = G(a) - sum_b sigma(b) G(b).

Expectation: a traversal's expected sum of regret samples at an information set I is
`branch_probability * pi_uniform(I) * r_cf(I)`, where pi_uniform(I) is the traverser's own
reach under the uniform sampling policy: a per-infoset constant that never changes across
iterations, so regret matching's fixed point is preserved.

Two loops, each over a refilled pool of lanes (`lanes.refill`):
1. `_main_step`: the main trajectories; probed nodes are stored with their strategy.
2. `_rollout_step`: every (probed node, legal action) pair played out; once every rollout
   has started, the pool narrows to its survivors (`_compact_rollouts`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from lcjax.cfr.samples import AdvantageSample
from lcjax.cfr.traversal import lanes as ln
from lcjax.cfr.traversal.results import (
    TraversalCounters,
    TraversalResult,
    pack_sample_rows,
    sample_row_width,
    strategy_samples,
)
from lcjax.settings import Float, Int, Settings, setting

Array = jax.Array

_DEFAULT_LANES = 2048


@dataclasses.dataclass(frozen=True)
class ProbeConfig(Settings):
    """Static sizes of the probe traversal (the `traversal.probe` settings).

    Attributes:
      branch_probability: chance that a traverser node on the main trajectory is probed.
      max_probes: probed nodes kept per traversal (further ones are dropped and counted).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      max_steps: bound on the main trajectory's and each rollout's length (a game longer
        than this is cut short and counted as truncated).
      rollout_batch: lanes of the loops (the trajectories, and separately the rollouts,
        advanced together; a lane that finishes its trajectory or rollout takes the next
        one). 0 = 2048 (or fewer when there are fewer trajectories or rollouts).
    """

    branch_probability: float = setting(0.2, Float(0.0, 1.0, lo_open=True))
    max_probes: int = setting(8, Int(1))
    max_strategy: int = setting(64, Int(1))
    max_steps: int = setting(512, Int(1))
    rollout_batch: int = setting(0, Int(0))


class _Setup(NamedTuple):
    """The constants of one call, shared by both loops."""

    game: ln.BatchedGame
    packer: ln.Packer
    apply_fn: Any
    params: Any
    cfg: ProbeConfig
    traverser: Array  # int32 scalar
    seeds: Array  # uint32[3, 2]: main actions, probe decisions, rollout actions
    num_actions: int
    num_traversals: int
    roots: Array  # int32[B, F]
    roots_live: Array  # bool[B]


class _MainCarry(NamedTuple):
    cursor: Array  # int32[F, W]
    live: Array  # bool[W]: the lane plays a trajectory
    traversal: Array  # int32[W]: its traversal
    next_traversal: Array  # int32: the next traversal to start
    probe_count: Array  # int32[W]: probes of the current traversal
    strategy_count: Array
    moves: Array  # int32[W]: moves of the current traversal (its node index)
    nodes: Array  # int32[W] per-lane totals
    evaluations: Array
    dropped: Array
    truncated: Array
    step: Array
    probe_state: Array  # int32[B * P, F]: probed states
    probe_obs: Array  # float32[B * P, D]
    probe_rows: Array  # float32[B * P, 2A + 1]: mask, sigma, valid
    strat_obs: Array  # float32[B * S_s, D]
    strat_rows: Array  # float32[B * S_s, 2A + 1]: mask, sigma, valid


class _RollCarry(NamedTuple):
    cursor: Array  # int32[F, W]
    action: Array  # int32[W]: the probed action still to play (-1: none)
    live: Array  # bool[W]: the lane plays a rollout
    pair: Array  # int32[W]: its (probed node, action) pair
    length: Array  # int32[W]: moves made in the rollout
    next_pos: Array  # int32: next rollout (position in the compacted order) to start
    nodes: Array
    evaluations: Array
    truncated: Array
    step: Array
    returns: Array  # float32[N + 1]: traverser returns per pair (last entry: dump)


class _Pairs(NamedTuple):
    """The rollouts to run: every legal action of every valid probed node."""

    valid: Array  # bool[N], N = B * P * A pairs
    order: Array  # int32[N]: order[j] = the j-th valid pair
    count: Array  # int32: valid pairs


def _main_step(s: _Setup, c: _MainCarry) -> _MainCarry:
    """One move of every live main trajectory; probed nodes and opponent strategies recorded."""
    flag = c.step >= 0
    n_act, b_total = s.num_actions, s.num_traversals
    n_probes, s_s = s.cfg.max_probes, s.cfg.max_strategy
    states = s.packer.unpack(c.cursor)
    player = states.current_player
    mask = s.game.legal(states)
    obs_rows, mask, player = ln.materialize(flag, s.game.observe_rows(states, player).T, mask, player)
    is_trav = player == s.traverser
    # The probe decision is keyed by the node (traversal, index on the trajectory), not by
    # lane or loop step, so it does not depend on how the lanes are scheduled.
    probe = c.live & is_trav & (ln.uniforms(s.seeds[1], c.moves, c.traversal) < s.cfg.branch_probability)
    need = c.live & (~is_trav | probe)
    sigma = ln.lane_strategy(s.apply_fn, s.params, obs_rows, mask, player, need, flag)
    acts = c.live & (need | (is_trav & ~probe))  # lanes that move this step
    u = ln.uniforms(s.seeds[0], c.step, jnp.arange(mask.shape[1]))
    action = jnp.where(is_trav, ln.uniform_columns(mask, u), ln.sample_columns(sigma, u))
    child = s.game.step(states, action)
    opponent = need & ~is_trav
    probed = need & is_trav
    p_row = jnp.where(probed & (c.probe_count < n_probes), c.traversal * n_probes + c.probe_count, b_total * n_probes)
    s_row = jnp.where(opponent & (c.strategy_count < s_s), c.traversal * s_s + c.strategy_count, b_total * s_s)
    rows = pack_sample_rows(mask, sigma)
    moves = c.moves + acts.astype(jnp.int32)
    ended = acts & child.terminated
    cut = acts & ~child.terminated & (moves >= s.cfg.max_steps)
    rows, p_row, s_row, child, acts, probed, opponent, ended, cut = ln.materialize(
        flag, rows, p_row, s_row, s.packer.pack(child), acts, probed, opponent, ended, cut
    )
    cursor = jnp.where(acts[None], child, c.cursor)
    nxt = ln.refill(~c.live | ended | cut, c.next_traversal, b_total)
    start = nxt.start
    root = ln.materialize(flag, s.roots[nxt.item]).T
    lost = (probed & (c.probe_count >= n_probes)).astype(jnp.int32) + (opponent & (c.strategy_count >= s_s)).astype(jnp.int32)
    return _MainCarry(
        cursor=jnp.where(start[None], root, cursor),
        live=jnp.where(start, s.roots_live[nxt.item], c.live & ~(ended | cut)),
        traversal=jnp.where(start, nxt.item, c.traversal),
        next_traversal=nxt.next_item,
        probe_count=jnp.where(start, 0, c.probe_count + probed.astype(jnp.int32)),
        strategy_count=jnp.where(start, 0, c.strategy_count + opponent.astype(jnp.int32)),
        moves=jnp.where(start, 0, moves),
        nodes=c.nodes + acts.astype(jnp.int32) + start.astype(jnp.int32),
        evaluations=c.evaluations + need.astype(jnp.int32),
        dropped=c.dropped + lost,
        truncated=c.truncated + cut.astype(jnp.int32),
        step=c.step + 1,
        probe_state=c.probe_state.at[p_row].set(c.cursor.T, mode="drop"),
        probe_obs=c.probe_obs.at[p_row].set(obs_rows, mode="drop"),
        probe_rows=c.probe_rows.at[p_row].set(rows, mode="drop"),
        strat_obs=c.strat_obs.at[s_row].set(obs_rows, mode="drop"),
        strat_rows=c.strat_rows.at[s_row].set(rows, mode="drop"),
    )


def _run_main(s: _Setup, width: int, obs_size: int) -> _MainCarry:
    """All main trajectories, `width` at a time."""
    b_total, n_probes, s_s = s.num_traversals, s.cfg.max_probes, s.cfg.max_strategy
    row = sample_row_width(s.num_actions)
    zi = jnp.zeros((width,), jnp.int32)
    carry = _MainCarry(
        cursor=s.roots[:width].T,
        live=s.roots_live[:width],
        traversal=jnp.arange(width, dtype=jnp.int32),
        next_traversal=jnp.int32(width),
        probe_count=zi,
        strategy_count=zi,
        moves=zi,
        nodes=jnp.ones((width,), jnp.int32),
        evaluations=zi,
        dropped=zi,
        truncated=zi,
        step=jnp.int32(0),
        probe_state=jnp.zeros((b_total * n_probes, s.packer.size), jnp.int32),
        probe_obs=jnp.zeros((b_total * n_probes, obs_size), jnp.float32),
        probe_rows=jnp.zeros((b_total * n_probes, row), jnp.float32),
        strat_obs=jnp.zeros((b_total * s_s, obs_size), jnp.float32),
        strat_rows=jnp.zeros((b_total * s_s, row), jnp.float32),
    )
    more = lambda c: jnp.any(c.live) | (c.next_traversal < b_total)  # noqa: E731
    return lax.while_loop(more, lambda c: _main_step(s, c), carry)


def _probe_pairs(m: _MainCarry, n_act: int) -> _Pairs:
    """The (probed node, legal action) pairs to roll out, compacted in pair order."""
    root_valid = m.probe_rows[:, 2 * n_act] > 0.5
    valid = ((m.probe_rows[:, :n_act] > 0.5) & root_valid[:, None]).reshape(-1)
    n_pairs = valid.shape[0]
    position = ln.prefix_count(valid.astype(jnp.int32)) - 1
    order = jnp.zeros((n_pairs,), jnp.int32).at[jnp.where(valid, position, n_pairs)].set(
        jnp.arange(n_pairs, dtype=jnp.int32), mode="drop"
    )
    return _Pairs(valid, order, jnp.sum(valid.astype(jnp.int32)))


def _fetch_rollouts(m: _MainCarry, pairs: _Pairs, n_act: int, pos: Array, want: Array):
    """(pair int32[W], probed state int32[F, W], action int32[W]) of the rollouts at `pos`."""
    n_pairs = pairs.valid.shape[0]
    pair = pairs.order[jnp.minimum(pos, n_pairs - 1)]
    state = ln.materialize(want.any(), m.probe_state[pair // n_act]).T
    return pair, state, pair % n_act


def _rollout_step(s: _Setup, m: _MainCarry, pairs: _Pairs, c: _RollCarry) -> _RollCarry:
    """One move of every live rollout; a finished rollout's lane takes the next one."""
    flag = c.step >= 0
    n_act, n_pairs = s.num_actions, pairs.valid.shape[0]
    states = s.packer.unpack(c.cursor)
    player = states.current_player
    fresh = c.live & (c.action >= 0)  # plays the probed action (no evaluation)
    need = c.live & ~fresh
    mask = s.game.legal(states)
    obs_rows, mask, player = ln.materialize(flag, s.game.observe_rows(states, player).T, mask, player)
    sigma = ln.lane_strategy(s.apply_fn, s.params, obs_rows, mask, player, need, flag)
    # Common random numbers: the rollouts of a probed node's actions draw the same
    # uniforms, keyed by the node and the move number (not by lane or loop step).
    u = ln.uniforms(s.seeds[2], c.length, c.pair // n_act)
    moving = fresh | need
    child = s.game.step(states, jnp.where(fresh, c.action, ln.sample_columns(sigma, u)))
    cursor = jnp.where(moving[None], s.packer.pack(child), c.cursor)
    length = c.length + moving.astype(jnp.int32)
    end = moving & (child.terminated | (length > s.cfg.max_steps))  # max_steps moves after the probed one
    ret = s.game.returns(child)[s.traverser]
    cursor, end, ret, length, moving = ln.materialize(flag, cursor, end, ret, length, moving)
    returns = c.returns.at[jnp.where(end, c.pair, n_pairs)].set(ret, mode="drop")
    nxt = ln.refill(~c.live | end, c.next_pos, pairs.count)
    begin = nxt.start
    pair, state, act = _fetch_rollouts(m, pairs, n_act, nxt.item, begin)
    return _RollCarry(
        cursor=jnp.where(begin[None], state, cursor),
        action=jnp.where(begin, act, jnp.where(moving, -1, c.action)),
        live=jnp.where(begin, True, c.live & ~end),
        pair=jnp.where(begin, pair, c.pair),
        length=jnp.where(begin, 0, length),
        next_pos=nxt.next_item,
        nodes=c.nodes + moving.astype(jnp.int32),
        evaluations=c.evaluations + need.astype(jnp.int32),
        truncated=c.truncated + (end & ~child.terminated).astype(jnp.int32),
        step=c.step + 1,
        returns=returns,
    )


def _drain_widths(w: int) -> list[int]:
    """Lane-pool widths of the rollout loop's stages: the full pool, then 1/16 of it."""
    return [w] + ([w // 16] if w // 16 >= 8 else [])


def _compact_rollouts(c: _RollCarry, width: int) -> _RollCarry:
    """The rollout pool narrowed to `width` lanes holding its live rollouts (at most
    `width` of them, the caller's loop condition ensures it), counters kept as totals."""
    lanes, _ = ln.lanes_of(c.live, width)
    keep = lanes < c.live.shape[0]
    idx = jnp.minimum(lanes, c.live.shape[0] - 1)
    total = lambda x: jnp.zeros((width,), x.dtype).at[0].set(jnp.sum(x))  # noqa: E731
    return c._replace(
        cursor=jnp.take(c.cursor, idx, axis=1),
        action=jnp.where(keep, c.action[idx], -1),
        live=keep & c.live[idx],
        pair=c.pair[idx],
        length=c.length[idx],
        nodes=total(c.nodes),
        evaluations=total(c.evaluations),
        truncated=total(c.truncated),
    )


def _run_rollouts(s: _Setup, m: _MainCarry, pairs: _Pairs, lanes: int) -> _RollCarry:
    """Every valid pair's rollout in a refilled pool, narrowed as it drains."""
    n_act, n_pairs = s.num_actions, pairs.valid.shape[0]
    w = min(lanes, n_pairs)
    lane = jnp.arange(w)
    start = lane < pairs.count
    pair0, state0, act0 = _fetch_rollouts(m, pairs, n_act, lane, start)
    zi = jnp.zeros((w,), jnp.int32)
    r = _RollCarry(
        cursor=state0,
        action=jnp.where(start, act0, -1),
        live=start,
        pair=pair0,
        length=zi,
        next_pos=jnp.minimum(jnp.int32(w), pairs.count),
        nodes=zi,
        evaluations=zi,
        truncated=zi,
        step=jnp.int32(0),
        returns=jnp.zeros((n_pairs + 1,), jnp.float32),
    )
    # Draining: once every rollout has started, the live lanes dwindle while each step
    # still costs the whole pool, so the loop continues on a narrower pool of the survivors.
    widths = _drain_widths(w)
    for k, width in enumerate(widths):
        if k > 0:
            r = _compact_rollouts(r, width)
        if k + 1 < len(widths):
            narrower = widths[k + 1]
            more = lambda c, n=narrower: jnp.any(c.live) & (  # noqa: E731
                (c.next_pos < pairs.count) | (jnp.sum(c.live.astype(jnp.int32)) > n)
            )
        else:
            more = lambda c: jnp.any(c.live)  # noqa: E731
        r = lax.while_loop(more, lambda c: _rollout_step(s, m, pairs, c), r)
    return r


def probe_sampling(
    game, apply_fn, cfg: ProbeConfig, params, traverser: Array, iteration: Array, key: Array, num_traversals: int
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
    n_act = game.num_actions
    k_init, k_main, k_probe, k_roll = jax.random.split(key, 4)
    seeds = jnp.stack([jax.random.bits(k, (2,), jnp.uint32) for k in (k_main, k_probe, k_roll)])
    packer, roots, roots_live = ln.deal_roots(game, k_init, num_traversals)
    s = _Setup(
        game=ln.BatchedGame(game), packer=packer, apply_fn=apply_fn, params=params, cfg=cfg,
        traverser=jnp.asarray(traverser, jnp.int32), seeds=seeds, num_actions=n_act,
        num_traversals=num_traversals, roots=roots, roots_live=roots_live,
    )
    lanes = cfg.rollout_batch if cfg.rollout_batch > 0 else _DEFAULT_LANES
    m = _run_main(s, min(lanes, num_traversals), game.observation_size)
    pairs = _probe_pairs(m, n_act)
    r = _run_rollouts(s, m, pairs, lanes)
    n_roots = num_traversals * cfg.max_probes
    returns = jnp.where(pairs.valid, r.returns[:-1], 0.0).reshape(n_roots, n_act)
    root_valid = m.probe_rows[:, 2 * n_act] > 0.5
    root_mask = m.probe_rows[:, :n_act] > 0.5
    sigma = m.probe_rows[:, n_act : 2 * n_act]
    baseline = jnp.sum(sigma * returns, axis=-1, keepdims=True)
    regret = jnp.where(root_mask & root_valid[:, None], returns - baseline, 0.0)
    t = jnp.asarray(iteration, jnp.float32)
    adv = AdvantageSample(m.probe_obs, root_mask, regret, jnp.full((n_roots,), t, jnp.float32))
    strat, strat_valid = strategy_samples(m.strat_obs, m.strat_rows, n_act, iteration)
    counters = TraversalCounters(
        nodes=(jnp.sum(m.nodes) + jnp.sum(r.nodes)).astype(jnp.int32),
        evaluations=(jnp.sum(m.evaluations) + jnp.sum(r.evaluations)).astype(jnp.int32),
        advantage_samples=jnp.sum(root_valid.astype(jnp.int32)),
        strategy_samples=jnp.sum(strat_valid.astype(jnp.int32)),
        dropped_samples=jnp.sum(m.dropped),
        truncated=(jnp.sum(m.truncated) + jnp.sum(r.truncated)).astype(jnp.int32),
    )
    return TraversalResult(adv, root_valid, strat, strat_valid, counters)
