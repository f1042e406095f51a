"""Probe sampling: selected traverser nodes of the main trajectory probed by rollouts.

ESCHER-style (McAleer et al., 2022, arXiv 2206.04122) without a learned value. The main
trajectories come from `trajectory`: the traverser follows the fixed sampling policy, the
opponent its current strategy (recorded as strategy samples), and each traverser node is
selected with fixed probability `branch_probability`. Every legal action of a selected
node is probed by one rollout to the end with both players on their current strategies;
the rollouts of a node's actions share their random numbers (the deck is pre-drawn in the
state; the players' draws are keyed by node and move number). The regret sample is
r(a) = G(a) - sum_b sigma(b) G(b).

Expectation: a traversal's expected sum of regret samples at an information set I is
`branch_probability * pi_b(I) * r_cf(I)`, where pi_b(I) is the traverser's own reach under
the fixed sampling policy: a per-infoset constant that never changes across iterations, so
regret matching's fixed point is preserved (see `trajectory`).

After the main loop, `_rollout_step` plays every (probed node, legal action) pair out in a
refilled pool of lanes (`lanes.refill`); once every rollout has started, the pool narrows to
its survivors (`_compact_rollouts`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from lcjax.cfr.samples import AdvantageSample
from lcjax.cfr.traversal import lanes as ln
from lcjax.cfr.traversal import trajectory as tj
from lcjax.cfr.traversal.results import TraversalCounters, TraversalResult, strategy_samples
from lcjax.settings import Float, Int, Settings, setting

Array = jax.Array


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


def _probe_pairs(m: tj.Main, n_act: int) -> _Pairs:
    """The (probed node, legal action) pairs to roll out, compacted in pair order."""
    root_valid = m.selected_rows[:, 2 * n_act] > 0.5
    valid = ((m.selected_rows[:, :n_act] > 0.5) & root_valid[:, None]).reshape(-1)
    n_pairs = valid.shape[0]
    position = ln.prefix_count(valid.astype(jnp.int32)) - 1
    order = jnp.zeros((n_pairs,), jnp.int32).at[jnp.where(valid, position, n_pairs)].set(
        jnp.arange(n_pairs, dtype=jnp.int32), mode="drop"
    )
    return _Pairs(valid, order, jnp.sum(valid.astype(jnp.int32)))


def _fetch_rollouts(m: tj.Main, pairs: _Pairs, n_act: int, pos: Array, want: Array):
    """(pair int32[W], probed state int32[F, W], action int32[W]) of the rollouts at `pos`."""
    n_pairs = pairs.valid.shape[0]
    pair = pairs.order[jnp.minimum(pos, n_pairs - 1)]
    state = ln.materialize(want.any(), m.selected_state[pair // n_act]).T
    return pair, state, pair % n_act


def _rollout_step(s: tj.Setup, cfg: ProbeConfig, seed: Array, m: tj.Main, pairs: _Pairs, c: _RollCarry) -> _RollCarry:
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
    u = ln.uniforms(seed, c.length, c.pair // n_act)
    moving = fresh | need
    child = s.game.step(states, jnp.where(fresh, c.action, ln.sample_columns(sigma, u)))
    cursor = jnp.where(moving[None], s.packer.pack(child), c.cursor)
    length = c.length + moving.astype(jnp.int32)
    end = moving & (child.terminated | (length > cfg.max_steps))  # max_steps moves after the probed one
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


def _run_rollouts(s: tj.Setup, cfg: ProbeConfig, seed: Array, m: tj.Main, pairs: _Pairs, lanes: int) -> _RollCarry:
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
        r = lax.while_loop(more, lambda c: _rollout_step(s, cfg, seed, m, pairs, c), r)
    return r


def probe_sampling(
    game, apply_fn, cfg: ProbeConfig, params, traverser: Array, iteration: Array, key: Array, num_traversals: int,
    *, sampling: tj.SamplingPolicy = tj.UNIFORM,
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
      sampling: the traverser's fixed sampling policy (static; uniform by default).

    Returns:
      TraversalResult with S_a = B * max_probes and S_s = B * max_strategy rows; traversal
      b owns rows [b * max_probes, (b + 1) * max_probes) of the advantage buffer (its probed
      nodes in trajectory order) and likewise for strategy rows.
    """
    n_act = game.num_actions
    k_init, k_main, k_probe, k_roll = jax.random.split(key, 4)
    k_mix, k_bot0, k_bot1 = jax.random.split(k_probe, 3)
    s = tj.setup(
        game, apply_fn, params, traverser, k_init, tj.loop_seeds(k_main, k_probe, k_mix, k_bot0, k_bot1),
        num_traversals, select_probability=cfg.branch_probability, max_selected=cfg.max_probes,
        max_strategy=cfg.max_strategy, max_steps=cfg.max_steps, sampling=sampling,
    )
    lanes = cfg.rollout_batch if cfg.rollout_batch > 0 else tj.DEFAULT_LANES
    m = tj.run_main(s, min(lanes, num_traversals), game.observation_size)
    pairs = _probe_pairs(m, n_act)
    r = _run_rollouts(s, cfg, tj.loop_seeds(k_roll)[0], m, pairs, lanes)
    n_roots = num_traversals * cfg.max_probes
    returns = jnp.where(pairs.valid, r.returns[:-1], 0.0).reshape(n_roots, n_act)
    root_valid, root_mask, sigma = tj.selected_parts(m, n_act)
    baseline = jnp.sum(sigma * returns, axis=-1, keepdims=True)
    regret = jnp.where(root_mask & root_valid[:, None], returns - baseline, 0.0)
    t = jnp.asarray(iteration, jnp.float32)
    adv = AdvantageSample(m.selected_obs, root_mask, regret, jnp.full((n_roots,), t, jnp.float32))
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
