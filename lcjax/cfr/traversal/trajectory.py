"""Main trajectories: the traverser on a fixed sampling policy, the opponent on its strategy.

Shared by the `probe` and `value` schemes. A pool of lanes plays `B` games (one per
traversal), refilled as games end. At each move:

* the opponent samples from its current strategy, recorded as a strategy sample;
* the traverser acts by the fixed `SamplingPolicy` (uniform over the legal actions, or a
  mixture of uniform and a named policy such as a bot). Each traverser node is selected
  with probability `select_probability` (keyed by the node, not by lane or loop step, so
  scheduling does not change which nodes are selected); a selected node is stored with its
  packed state, observation, legal mask and the traverser's current strategy, from which
  the scheme computes its regret sample after the loop.

Why a fixed sampling policy keeps regret matching's fixed point: a traverser node h is
reached with probability pi_b(I) * (opponent's and chance's reach of h), where pi_b(I), the
traverser's own reach under the sampling policy, depends only on the traverser's
information set I when the policy sees only what the traverser sees. So the expected sum of
samples at I is select_probability * pi_b(I) * r_cf(I) for an unbiased per-node estimate
of q(h, a) - v(h): a positive constant per infoset that never changes across iterations,
which scales I's regrets but not their signs or regret matching's strategy. The policy must
give every legal action positive probability (the uniform part does), so every infoset the
opponent and chance can reach is sampled.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from lcjax.cfr.traversal import lanes as ln
from lcjax.cfr.traversal.results import pack_sample_rows, sample_row_width

Array = jax.Array

DEFAULT_LANES = 2048


class SamplingPolicy(NamedTuple):
    """The traverser's fixed sampling policy on main trajectories.

    With probability `weight` the action of `act`, otherwise a uniformly random legal
    action; so every legal action keeps probability >= (1 - weight) / (legal actions).

    Attributes:
      act: `act(key, state) -> int32[]` for one state; it must depend only on what the
        acting player observes (and on `key`), and be the same function in every
        iteration. None = uniform only.
      weight: float in [0, 1), the share of `act`.
    """

    act: Callable[[Array, Any], Array] | None = None
    weight: float = 0.0


UNIFORM = SamplingPolicy()


class Setup(NamedTuple):
    """The constants of one traversal call's main trajectories."""

    game: ln.BatchedGame
    packer: ln.Packer
    apply_fn: Any
    params: Any  # (player 0's, player 1's) advantage network parameters
    traverser: Array  # int32 scalar
    seeds: Array  # uint32[5, 2]: actions, selection, policy mixing, policy keys (2)
    num_actions: int
    num_traversals: int
    roots: Array  # int32[B, F]: every traversal's dealt root
    roots_live: Array  # bool[B]
    select_probability: float
    max_selected: int  # P: selected nodes kept per traversal
    max_strategy: int  # S_s: strategy samples kept per traversal
    max_steps: int
    sampling: SamplingPolicy
    # Track the opponent's reach of each of the traverser's indistinguishable histories
    # (`game.hidden_alternatives`, K = `num_alternatives` of them; K = 1 and unused when off).
    alternatives: bool
    num_alternatives: int


class Main(NamedTuple):
    """The main loop's carry; after the loop, its result."""

    cursor: Array  # int32[F, W]
    live: Array  # bool[W]: the lane plays a trajectory
    traversal: Array  # int32[W]: its traversal
    next_traversal: Array  # int32: the next traversal to start
    selected_count: Array  # int32[W]: selected nodes of the current traversal
    strategy_count: Array
    moves: Array  # int32[W]: moves of the current traversal (its node index)
    nodes: Array  # int32[W] per-lane totals
    evaluations: Array
    dropped: Array
    truncated: Array
    step: Array
    selected_state: Array  # int32[B * P, F]: selected traverser states
    selected_obs: Array  # float32[B * P, D]
    selected_rows: Array  # float32[B * P, 2A + 1]: mask, sigma, valid
    strat_obs: Array  # float32[B * S_s, D]
    strat_rows: Array  # float32[B * S_s, 2A + 1]: mask, sigma, valid
    # With `alternatives` (else K = 1, all ones / zeros):
    alt_reach: Array  # float32[K, W]: the opponent's reach of each alternative history so far
    selected_alt: Array  # float32[B * P, K]: prior x opponent reach of each alternative, per selected node


def setup(game, apply_fn, params, traverser, key: Array, seeds: Array, num_traversals: int, *,
          select_probability: float, max_selected: int, max_strategy: int, max_steps: int,
          sampling: SamplingPolicy = UNIFORM, alternatives: bool = False) -> Setup:
    """Deals the `num_traversals` roots from `key` and gathers the call's constants.

    `seeds` (uint32[5, 2]) feed the loop's random numbers: actions, selection, policy
    mixing and the policy's keys (two). With `alternatives` (a game with
    `hidden_alternatives`), every selected node also records the weights of the histories
    the traverser cannot tell from it (`Main.selected_alt`).
    """
    if alternatives and not hasattr(game, "hidden_alternatives"):
        raise ValueError(f"{type(game).__name__} has no hidden_alternatives")
    packer, roots, roots_live = ln.deal_roots(game, key, num_traversals)
    return Setup(
        game=ln.BatchedGame(game), packer=packer, apply_fn=apply_fn, params=params,
        traverser=jnp.asarray(traverser, jnp.int32), seeds=seeds, num_actions=game.num_actions,
        num_traversals=num_traversals, roots=roots, roots_live=roots_live,
        select_probability=select_probability, max_selected=max_selected, max_strategy=max_strategy,
        max_steps=max_steps, sampling=sampling, alternatives=bool(alternatives),
        num_alternatives=int(game.num_alternatives) if alternatives else 1,
    )


def loop_seeds(*keys: Array) -> Array:
    """uint32[len(keys), 2]: one `random_bits` seed per key."""
    return jnp.stack([jax.random.bits(k, (2,), jnp.uint32) for k in keys])


def policy_actions(
    policy: SamplingPolicy, seeds: Array, states, mask: Array, u: Array, move: Array, item: Array
) -> Array:
    """int32[W]: each lane's action under the fixed sampling `policy`, keyed by the node.

    Args:
      seeds: uint32[3, 2]: the mixing draws and the policy's keys (two words).
      states: the lanes' states (fields with a trailing lane axis W).
      mask: bool[A, W] legal actions; u: float32[W], the uniform draw of the uniform part.
      move, item: int32[W], the node's index in its game and the game's number, so that a
        node's action does not depend on which lane or loop step plays it.
    """
    uniform = ln.uniform_columns(mask, u)
    if policy.act is None or policy.weight <= 0.0:
        return uniform
    mix = ln.uniforms(seeds[0], move, item) < policy.weight
    bits = jnp.stack([ln.random_bits(seeds[1], move, item), ln.random_bits(seeds[2], move, item)], -1)
    keys = jax.random.wrap_key_data(bits, impl="threefry2x32")
    chosen = jax.vmap(policy.act, in_axes=(0, -1))(keys, states).astype(jnp.int32)
    return jnp.where(mix, chosen, uniform)


def sampling_actions(s: Setup, states, mask: Array, u: Array, c: Main) -> Array:
    """int32[W]: the traverser's action under the fixed sampling policy (keyed by the node)."""
    return policy_actions(s.sampling, s.seeds[2:5], states, mask, u, c.moves, c.traversal)


def _main_step(s: Setup, c: Main) -> Main:
    """One move of every live main trajectory; selected nodes and opponent strategies recorded."""
    flag = c.step >= 0
    b_total, n_sel, s_s = s.num_traversals, s.max_selected, s.max_strategy
    states = s.packer.unpack(c.cursor)
    player = states.current_player
    mask = s.game.legal(states)
    obs_rows, mask, player = ln.materialize(flag, s.game.observe_rows(states, player).T, mask, player)
    is_trav = player == s.traverser
    # Selection is keyed by the node (traversal, index on the trajectory), not by lane or
    # loop step, so it does not depend on how the lanes are scheduled.
    select = c.live & is_trav & (ln.uniforms(s.seeds[1], c.moves, c.traversal) < s.select_probability)
    need = c.live & (~is_trav | select)
    sigma = ln.lane_strategy(s.apply_fn, s.params, obs_rows, mask, player, need, flag)
    acts = c.live & (need | (is_trav & ~select))  # lanes that move this step
    u = ln.uniforms(s.seeds[0], c.step, jnp.arange(mask.shape[1]))
    action = jnp.where(is_trav, sampling_actions(s, states, mask, u, c), ln.sample_columns(sigma, u))
    child = s.game.step(states, action)
    opponent = need & ~is_trav
    selected = need & is_trav
    alt_reach, alt_weights = _alternative_reaches(s, c, states, player, opponent, action, flag)
    p_row = jnp.where(selected & (c.selected_count < n_sel), c.traversal * n_sel + c.selected_count, b_total * n_sel)
    s_row = jnp.where(opponent & (c.strategy_count < s_s), c.traversal * s_s + c.strategy_count, b_total * s_s)
    rows = pack_sample_rows(mask, sigma)
    moves = c.moves + acts.astype(jnp.int32)
    ended = acts & child.terminated
    cut = acts & ~child.terminated & (moves >= s.max_steps)
    rows, p_row, s_row, child, acts, selected, opponent, ended, cut, alt_reach, alt_weights = ln.materialize(
        flag, rows, p_row, s_row, s.packer.pack(child), acts, selected, opponent, ended, cut, alt_reach, alt_weights
    )
    cursor = jnp.where(acts[None], child, c.cursor)
    nxt = ln.refill(~c.live | ended | cut, c.next_traversal, b_total)
    start = nxt.start
    root = ln.materialize(flag, s.roots[nxt.item]).T
    lost = (selected & (c.selected_count >= n_sel)).astype(jnp.int32) + (opponent & (c.strategy_count >= s_s)).astype(jnp.int32)
    return Main(
        cursor=jnp.where(start[None], root, cursor),
        live=jnp.where(start, s.roots_live[nxt.item], c.live & ~(ended | cut)),
        traversal=jnp.where(start, nxt.item, c.traversal),
        next_traversal=nxt.next_item,
        selected_count=jnp.where(start, 0, c.selected_count + selected.astype(jnp.int32)),
        strategy_count=jnp.where(start, 0, c.strategy_count + opponent.astype(jnp.int32)),
        moves=jnp.where(start, 0, moves),
        nodes=c.nodes + acts.astype(jnp.int32) + start.astype(jnp.int32),
        evaluations=c.evaluations + need.astype(jnp.int32),
        dropped=c.dropped + lost,
        truncated=c.truncated + cut.astype(jnp.int32),
        step=c.step + 1,
        selected_state=c.selected_state.at[p_row].set(c.cursor.T, mode="drop"),
        selected_obs=c.selected_obs.at[p_row].set(obs_rows, mode="drop"),
        selected_rows=c.selected_rows.at[p_row].set(rows, mode="drop"),
        strat_obs=c.strat_obs.at[s_row].set(obs_rows, mode="drop"),
        strat_rows=c.strat_rows.at[s_row].set(rows, mode="drop"),
        alt_reach=jnp.where(start[None], 1.0, alt_reach),
        selected_alt=c.selected_alt.at[p_row].set(alt_weights.T, mode="drop"),
    )


def _alternative_reaches(s: Setup, c: Main, states, player: Array, opponent: Array, action: Array, flag: Array):
    """(alt_reach float32[K, W] after this move, weights float32[K, W] at this node).

    For each history the traverser cannot tell from the lane's (`game.hidden_alternatives`:
    alternative k is the same across the trajectory, e.g. "the opponent holds card k"), the
    opponent's reach is the product of its current strategy's probabilities of the actions
    it took, evaluated in that alternative; at a node, prior (chance, given what the
    traverser has seen) x that reach is the alternative's posterior weight, unnormalized.
    Costs K opponent forwards per opponent node. Without alternatives: ones and zeros.
    """
    if not s.alternatives:
        return c.alt_reach, jnp.zeros_like(c.alt_reach)
    k, w = c.alt_reach.shape
    alt, prior = s.game.alternatives(states, jnp.broadcast_to(s.traverser, player.shape))
    obs = jax.vmap(s.game.observe_rows, in_axes=(0, None))(alt, player)  # [K, D, W]
    mask = jax.vmap(s.game.legal)(alt)  # [K, A, W]
    obs_rows = jnp.transpose(obs, (0, 2, 1)).reshape(k * w, -1)
    masks = jnp.transpose(mask, (1, 0, 2)).reshape(mask.shape[1], k * w)
    obs_rows, masks, prior = ln.materialize(flag, obs_rows, masks, prior)
    need = jnp.tile(opponent, k)
    sigma = ln.lane_strategy(s.apply_fn, s.params, obs_rows, masks, jnp.tile(player, k), need, flag)
    sigma = sigma.reshape(sigma.shape[0], k, w)
    taken = jnp.sum(jnp.where(jnp.arange(sigma.shape[0])[:, None, None] == action[None, None], sigma, 0.0), axis=0)
    return jnp.where(opponent[None], c.alt_reach * taken, c.alt_reach), prior * c.alt_reach


def run_main(s: Setup, width: int, obs_size: int) -> Main:
    """All main trajectories, `width` lanes at a time."""
    b_total, n_sel, s_s = s.num_traversals, s.max_selected, s.max_strategy
    row = sample_row_width(s.num_actions)
    zi = jnp.zeros((width,), jnp.int32)
    carry = Main(
        cursor=s.roots[:width].T,
        live=s.roots_live[:width],
        traversal=jnp.arange(width, dtype=jnp.int32),
        next_traversal=jnp.int32(width),
        selected_count=zi,
        strategy_count=zi,
        moves=zi,
        nodes=jnp.ones((width,), jnp.int32),
        evaluations=zi,
        dropped=zi,
        truncated=zi,
        step=jnp.int32(0),
        selected_state=jnp.zeros((b_total * n_sel, s.packer.size), jnp.int32),
        selected_obs=jnp.zeros((b_total * n_sel, obs_size), jnp.float32),
        selected_rows=jnp.zeros((b_total * n_sel, row), jnp.float32),
        strat_obs=jnp.zeros((b_total * s_s, obs_size), jnp.float32),
        strat_rows=jnp.zeros((b_total * s_s, row), jnp.float32),
        alt_reach=jnp.ones((s.num_alternatives, width), jnp.float32),
        selected_alt=jnp.zeros((b_total * n_sel, s.num_alternatives), jnp.float32),
    )
    more = lambda c: jnp.any(c.live) | (c.next_traversal < b_total)  # noqa: E731
    return lax.while_loop(more, lambda c: _main_step(s, c), carry)


def selected_parts(m: Main, num_actions: int) -> tuple[Array, Array, Array]:
    """(valid bool[N], mask bool[N, A], sigma float32[N, A]) of the selected-node rows."""
    a = num_actions
    return m.selected_rows[:, 2 * a] > 0.5, m.selected_rows[:, :a] > 0.5, m.selected_rows[:, a : 2 * a]
