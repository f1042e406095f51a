"""Value sampling: regret samples read off a learned history value (ESCHER).

ESCHER (McAleer, Farina, Lanctot, Sandholm, 2022, "ESCHER: Eschewing Importance Sampling in
Games by Computing a History Value Function to Estimate Regret", arXiv 2206.04122) replaces
the rollouts of `probe` by a history-value network Q(h, a): the expected return of the
acting player after action a at history h when both players follow their current
strategies. Its input is the history (`game.observe_history`: both players' private cards
and all public information, never the undealt deck order).

Two jitted calls per iteration:

* `value_data`: games with both players on their current strategies (mixed with
  `exploration` uniform). Each node is recorded with probability `record_probability` (at
  most `max_records` per game) as a training item for Q: the history, the action taken and
  the acting player's final return divided by `return_scale`. With `exploring_records` a
  recorded node's action is drawn uniformly from the legal ones, which gives every
  action's value equal coverage at the price of a few off-policy moves per game. With
  `traversal_prefix` one player per game plays uniformly until its one record, as the
  traverser does on its trajectories, so that the items' states follow the distribution of
  the states whose children the traversals value. `sampling_prefix` does the same with
  several items per game: one player per game plays the traversals' sampling policy for a
  random number of moves, and only the nodes after that prefix are recorded.
* `value_sampling`: the traverser's main trajectories, exactly as `probe` runs them (the
  traverser on the fixed sampling policy, the opponent on its current strategy, recorded as
  strategy samples), except that every selected traverser node (each with probability
  `sample_probability`) yields the regret sample

      r(a) = Q(h, a) - sum_b sigma(b) Q(h, b)      over the legal actions,

  from one batched forward of Q after the loop. No rollouts. With `value_head: state` the
  network is a state value V(h) of the player to act instead, and q(h, a) is read off the
  child: V(h.a), or -V(h.a) when the opponent acts there, or the exact return when h.a is
  terminal (one forward per legal action of a sampled node).

Expectation: if Q equals the true history value of the current strategies, q_sigma(h, a)
(with a state head: if V equals v_sigma, so that the child's value is q_sigma(h, a) in
expectation over a chance outcome it reveals),
a traversal's expected sum of regret samples at an information set I of the traverser is

    sample_probability * pi_b(I) * r_cf(I, a),

where pi_b(I) is the traverser's own reach under the fixed sampling policy and r_cf the
counterfactual regret: the sum over h in I of the opponent's and chance's reach times
q_sigma(h, a) - v_sigma(h). The factor is a per-infoset constant that never changes across
iterations (the sampling policy is fixed and depends only on what the traverser sees), so
regret matching's fixed point is preserved. `hidden_average` keeps it too: given the
trajectory reached I, the history h in I was drawn with probability proportional to
chance times the opponent's reach, exactly the posterior the sample then averages over, so
each sample is replaced by its conditional expectation given I. With a learned Q the
samples carry Q's approximation error instead of rollout noise; that trade is what ESCHER
measures. With `chance_samples` > 1 the child of an action that reveals a chance outcome
(Lost Cities' deck draw) is valued by the mean of V over several independent draws of that
outcome given h: the same expectation, with less spread. Fitting V on lambda-returns
(`value_lambda` < 1) instead of single returns adds a bias of its own (V's error at the
states it bootstraps on) in exchange for far less target variance.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from lcjax.cfr.networks import ACTIVATIONS
from lcjax.cfr.samples import AdvantageSample, ValueSample
from lcjax.cfr.training import LR_SCHEDULES
from lcjax.cfr.traversal import lanes as ln
from lcjax.cfr.traversal import trajectory as tj
from lcjax.cfr.traversal.results import TraversalCounters, TraversalResult, strategy_samples
from lcjax.env import protocol
from lcjax.settings import Bool, Choice, ConfigError, Float, Int, Settings, setting

Array = jax.Array

# The history value's two forms (`ValueConfig.value_head`).
VALUE_HEADS = ("actions", "state")


@dataclasses.dataclass(frozen=True)
class ValueConfig(Settings):
    """The value scheme's settings (the `traversal.value` section).

    Attributes:
      sample_probability: chance that a traverser node on the main trajectory yields a
        regret sample (1 = every node).
      max_samples: regret samples kept per traversal (further ones are dropped and counted).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      max_steps: bound on a trajectory's length (longer games are cut and counted).
      lanes: trajectories advanced together (0 = 2048, or fewer when there are fewer).
      value_games: games per iteration that train the history value.
      record_probability: chance that a node of such a game becomes a value item.
      max_records: value items kept per game.
      value_capacity: items in the value memory, a sliding window over the most recent
        iterations' items (Q is fitted on all of it).
      exploration: probability of a uniform random action at the other nodes (0 = on-policy).
      exploring_records: recorded nodes play a uniformly random action (else the
        strategies' own action, so rarely played actions get few targets). With a state
        head the item is the child of that move instead (so that states the strategies
        seldom reach are covered, while the target still follows the strategies from the
        recorded state on). The exploring moves are part of every earlier item's
        continuation, so keep them few per game:
        when most nodes explore, Q learns the value of uniform play instead of the
        strategies' (on Kuhn, 0.8 of the nodes exploring locks the solver on a pure best
        response to uniform play, exploitability 1/3).
      traversal_prefix: the value games reach their recorded states the way the traversals
        reach the states whose children they value: in each game one player (alternating
        between games) plays uniformly at random until its record, as the traverser's
        sampling policy does with no `sampling_bot`, and is recorded only at its own nodes;
        the other player and everything after the record follow the current strategies.
        Else records are taken anywhere on the strategies' own games, and V meets the
        traversals' states (reached by a uniform traverser) only by generalization. Needs
        `exploring_records`, `max_records: 1` and no `sampling_bot`.
      sampling_prefix: the value games begin the way the traversals' trajectories do: in
        game g player g % 2 plays the traversals' fixed sampling policy (uniform, or mixed
        with `sampling_bot`) and the other player its current strategy, until the game
        switches, at each move with probability 1 / sampling_prefix (so the prefix lasts a
        geometric number of moves with this mean). From the switch on both players follow
        their current strategies (with `exploration`), and only those nodes are recorded:
        every item's target is still a return (or lambda-return) of the current strategies,
        now from states like the ones whose children the traversals value, several per game.
        0 = no prefix (records anywhere on the strategies' own games). At least 1; not with
        `traversal_prefix`.
      return_scale: returns are divided by this before they become targets, so that values
        and regrets are O(1) (0 = the game's `return_scale`, or 1 if it has none).
      value_steps, value_batch: Adam steps and minibatch size fitting Q each iteration.
      value_learning_rate: Adam learning rate of Q.
      value_lr_schedule: the learning rate within each fit of Q: "constant", or
        "cosine"/"linear" decay from `value_learning_rate` to 0 over its `value_steps`
        (`lcjax.cfr.training.phase_schedule`; a warm-started Q restarts at the full rate
        each fit). A decayed fit ends on small steps, so the Q the traversals read carries
        less of the last minibatches' noise, but it also moves Q less toward a target that
        changes every iteration: on Lost Cities cosine learned slower than constant
        (docs/strength.md, "Fitting V less, gentler or faster").
      value_warm_start: Q continues from the previous iteration (else it is re-initialised).
      fit_each_player: fit Q (new games, `value_steps` more steps) before each player's
        traversals, not only once per iteration: player 1's traversals meet player 0's
        strategy as just updated by its advantage phase, and Q fitted before that update
        values their continuations under the old one (regrets of a mix of two iterations).
        Doubles the value phase's cost.
      value_lambda: the targets of a state head are lambda-returns (`lambda_returns`):
        1 = the game's own return (Monte Carlo); below 1, the return is mixed with V's
        values at the game's later recorded states, which trades variance (the cards still
        to be drawn) for V's bias. Only with `value_head: state`.
      value_head: "actions": the network is Q(h, .) with one output per action, trained on
        the action taken, and a node's values are one forward; "state": the network is a
        state value V(h) of the player to act (one output, trained on every recorded state
        to predict the change of the return from `game.returns` as h stands to the end),
        and q(h, a) is read off the child h.a (exact returns where the child is terminal,
        -V where the opponent acts next), one forward per action. With "state", an action
        the strategies seldom take is valued like any other state, and the child's input
        already shows the action's immediate effect (an expedition opened, a card given
        away); "actions" must extrapolate to untaken actions from few targets.
      hidden_average: a regret sample is the posterior mean of r(h', a) over the histories
        h' the traverser cannot tell from the sampled one (`game.hidden_alternatives`: on
        Kuhn and Leduc, every private card the opponent may hold), each weighted by its
        chance probability given what the traverser has seen times the opponent's reach
        under its current strategy. Same expectation per information set, without the
        spread between the opponent's hands, which is most of the regret targets' variance
        on Leduc; measured, it did not make Kuhn or Leduc learn faster (docs/strength.md),
        so the shipped configs leave it off. Only for games with `hidden_alternatives`.
      chance_samples: with a state head, the value of an action whose child reveals a
        chance outcome (`game.chance_actions`: Lost Cities' deck draw, whose child shows
        the card drawn) is the mean of V over this many children: the dealt outcome and
        chance_samples - 1 independent redraws of it (`game.resample_chance`). Same
        expectation, less spread: one drawn card moves V by about as much as separates
        drawing from the deck and from a pile (docs/strength.md). 1 = the dealt child
        only. Only for games with `resample_chance`.
      value_activation: the history-value network's hidden nonlinearity: "network" (the
        `network.activation` of the other networks) or a key of
        `lcjax.cfr.networks.ACTIVATIONS`. ReLU units of a warm-started value network die
        (docs/strength.md, "Kuhn: dead ReLUs"); on Leduc SiLU hurts the advantage networks,
        fitted afresh every iteration, and is neutral for V ("Leduc: SiLU hurts the
        advantage networks"), so V's activation can be set apart.
      value_hidden_size: width of the history-value network's hidden layers (0 = the
        `network.hidden_size` of the other networks). V is fitted every iteration and read
        on every legal child of every sampled node, so its width sets most of the value
        phase's and the traversals' cost.
    """

    sample_probability: float = setting(1.0, Float(0.0, 1.0, lo_open=True))
    max_samples: int = setting(64, Int(1))
    max_strategy: int = setting(64, Int(1))
    max_steps: int = setting(512, Int(1))
    lanes: int = setting(0, Int(0))
    value_games: int = setting(256, Int(1))
    record_probability: float = setting(0.03, Float(0.0, 1.0, lo_open=True))
    max_records: int = setting(32, Int(1))
    value_capacity: int = setting(65536, Int(1))
    exploration: float = setting(0.0, Float(0.0, 1.0))
    exploring_records: bool = setting(True, Bool())
    traversal_prefix: bool = setting(False, Bool())
    sampling_prefix: float = setting(0.0, Float(0.0))
    return_scale: float = setting(0.0, Float(0.0))
    value_steps: int = setting(256, Int(1))
    value_batch: int = setting(512, Int(1))
    value_learning_rate: float = setting(1e-3, Float(0.0, lo_open=True))
    value_lr_schedule: str = setting("constant", Choice(LR_SCHEDULES))
    value_warm_start: bool = setting(True, Bool())
    fit_each_player: bool = setting(False, Bool())
    value_head: str = setting("actions", Choice(VALUE_HEADS))
    value_lambda: float = setting(1.0, Float(0.0, 1.0))
    hidden_average: bool = setting(False, Bool())
    chance_samples: int = setting(1, Int(1))
    value_activation: str = setting("network", Choice(("network", *ACTIVATIONS)))
    value_hidden_size: int = setting(0, Int(0))

    def __post_init__(self):
        super().__post_init__()
        if self.traversal_prefix and (self.max_records != 1 or not self.exploring_records):
            raise ConfigError(
                f"traversal_prefix needs max_records: 1 and exploring_records: true (got {self.max_records}, "
                f"{self.exploring_records})", "traversal_prefix",
            )
        if 0.0 < self.sampling_prefix < 1.0:
            raise ConfigError(
                f"sampling_prefix is a mean number of moves: 0 (off) or at least 1 (got {self.sampling_prefix})",
                "sampling_prefix",
            )
        if self.sampling_prefix > 0.0 and self.traversal_prefix:
            raise ConfigError(
                "sampling_prefix and traversal_prefix are two prefixes of the value games: set one of them",
                "sampling_prefix",
            )
        if self.chance_samples > 1 and self.value_head != "state":
            raise ConfigError(
                f"chance_samples {self.chance_samples} > 1 averages V over children, so it needs value_head: state "
                f"(got {self.value_head!r})", "chance_samples",
            )
        if self.chance_samples > 1 and self.hidden_average:
            raise ConfigError(
                "chance_samples > 1 and hidden_average both average the regret samples: set one of them", "chance_samples"
            )
        if self.value_lambda < 1.0 and self.value_head != "state":
            raise ConfigError(
                f"value_lambda {self.value_lambda} < 1 needs value_head: state (got {self.value_head!r}); "
                "set value_lambda: 1.0 or value_head: state", "value_lambda",
            )

    def game_methods_needed(self) -> tuple[tuple[str, str], ...]:
        """(setting, game method) pairs: the optional protocol methods the game must have
        for these settings (`hidden_average` reads `hidden_alternatives`, `chance_samples`
        > 1 reads `resample_chance`)."""
        needed = (("hidden_average", "hidden_alternatives", self.hidden_average),
                  ("chance_samples", "resample_chance", self.chance_samples > 1))
        return tuple((setting, method) for setting, method, on in needed if on)


def return_scale(game, cfg: ValueConfig) -> float:
    """The divisor of returns: `cfg.return_scale`, else the game's (`protocol.return_scale`)."""
    return float(cfg.return_scale) if cfg.return_scale > 0 else protocol.return_scale(game)


# ---------------------------------------------------------------------------- value data
class _DataSetup(NamedTuple):
    game: ln.BatchedGame
    packer: ln.Packer
    apply_fn: object
    params: object
    cfg: ValueConfig
    seeds: Array  # uint32[3, 2]: actions, exploration, recording
    # With `sampling_prefix`: the prefix player's sampling policy, and uint32[4, 2] seeds of
    # the switch draws, the policy's mixing draws and its keys (two).
    sampling: tj.SamplingPolicy
    prefix_seeds: Array
    num_games: int
    roots: Array  # int32[G, F]
    roots_live: Array  # bool[G]


class _DataCarry(NamedTuple):
    cursor: Array  # int32[F, W]
    live: Array  # bool[W]: the lane plays a game
    game_id: Array  # int32[W]: which game
    next_game: Array  # int32: the next game to start
    records: Array  # int32[W]: items recorded in the current game
    prefix: Array  # bool[W]: the current game is still in its sampling prefix
    moves: Array  # int32[W]: moves of the current game
    nodes: Array  # int32[W] per-lane totals
    truncated: Array
    step: Array
    rec_state: Array  # int32[G * R, F]: recorded states
    rec_action: Array  # int32[G * R]: the action taken there
    rec_player: Array  # int32[G * R]: the acting player
    rec_valid: Array  # bool[G * R]
    final: Array  # float32[G + 1, 2]: each game's returns (last row: dump)
    finished: Array  # bool[G + 1]: the game reached its end (not cut)


def _data_step(s: _DataSetup, c: _DataCarry) -> _DataCarry:
    """One move of every live on-policy game; sampled nodes recorded."""
    flag = c.step >= 0
    g_total, per_game = s.num_games, s.cfg.max_records
    states = s.packer.unpack(c.cursor)
    player = states.current_player
    mask = s.game.legal(states)
    obs_rows, mask, player = ln.materialize(flag, s.game.observe_rows(states, player).T, mask, player)
    lane = jnp.arange(mask.shape[1])
    u = ln.uniforms(s.seeds[0], c.step, lane)
    # Keyed by the node (game, move number), like probe decisions: independent of scheduling.
    record = c.live & (ln.uniforms(s.seeds[2], c.moves, c.game_id) < s.cfg.record_probability)
    record = record & (c.records < per_game)
    explore = ln.uniforms(s.seeds[1], c.step, lane) < s.cfg.exploration
    # Game g's "traverser" (the player of either prefix) is player g % 2.
    own = player == c.game_id % 2
    if s.cfg.traversal_prefix:
        # Uniform until its record, recorded only there.
        record = record & own
        explore = explore | (own & (c.records == 0))
    prefix = c.prefix
    if s.cfg.sampling_prefix > 0.0:
        # The switch is drawn at every prefix node (keyed by the node); the node it falls on
        # is already the strategies' own, and may be recorded.
        prefix = prefix & (ln.uniforms(s.prefix_seeds[0], c.moves, c.game_id) >= 1.0 / s.cfg.sampling_prefix)
        record = record & ~prefix
        explore = explore & ~prefix
    if s.cfg.exploring_records:
        explore = explore | record
    # The prefix player's moves are the sampling policy's and exploring moves are uniform:
    # neither reads the strategy, so neither lane goes through a network.
    on_policy = c.live & ~explore
    if s.cfg.sampling_prefix > 0.0:
        on_policy = on_policy & ~(prefix & own)
    # Chunks of half a call's rows: the two players split the lanes about evenly, so each
    # player's rows round up to 2-3 chunks of 128 on 256 CPU lanes instead of 2 of 256 (the
    # value games of a trained run: 2.4 s instead of 3.0 with the skipped lanes above).
    sigma = ln.lane_strategy(
        s.apply_fn, s.params, obs_rows, mask, player, on_policy, flag, chunk=max(ln.eval_chunk_size() // 2, 1)
    )
    action = jnp.where(explore, ln.uniform_columns(mask, u), ln.sample_columns(sigma, u))
    if s.cfg.sampling_prefix > 0.0:
        sampled = tj.policy_actions(s.sampling, s.prefix_seeds[1:], states, mask, u, c.moves, c.game_id)
        action = jnp.where(prefix & own, sampled, action)
    child = s.game.step(states, action)
    # A state value's exploring record is the child of the uniform move (the strategies play
    # on from it, so its target is V of the child), kept only when the child is not terminal.
    child_record = s.cfg.exploring_records and s.cfg.value_head == "state"
    if child_record:
        record = record & ~child.terminated
    row = jnp.where(record, c.game_id * per_game + c.records, g_total * per_game)
    moves = c.moves + c.live.astype(jnp.int32)
    ended = c.live & child.terminated
    cut = c.live & ~child.terminated & (moves >= s.cfg.max_steps)
    final_row = jnp.where(ended, c.game_id, g_total)
    ret = s.game.returns(child).T  # [W, 2]
    packed, ended, cut, ret, row = ln.materialize(flag, s.packer.pack(child), ended, cut, ret, row)
    recorded, recorded_player = (packed, child.current_player) if child_record else (c.cursor, player)
    cursor = jnp.where(c.live[None], packed, c.cursor)
    nxt = ln.refill(~c.live | ended | cut, c.next_game, g_total)
    root = ln.materialize(flag, s.roots[nxt.item]).T
    start = nxt.start
    return _DataCarry(
        cursor=jnp.where(start[None], root, cursor),
        live=jnp.where(start, s.roots_live[nxt.item], c.live & ~(ended | cut)),
        game_id=jnp.where(start, nxt.item, c.game_id),
        next_game=nxt.next_item,
        records=jnp.where(start, 0, c.records + record.astype(jnp.int32)),
        prefix=jnp.where(start, s.cfg.sampling_prefix > 0.0, prefix),
        moves=jnp.where(start, 0, moves),
        nodes=c.nodes + c.live.astype(jnp.int32) + start.astype(jnp.int32),
        truncated=c.truncated + cut.astype(jnp.int32),
        step=c.step + 1,
        rec_state=c.rec_state.at[row].set(recorded.T, mode="drop"),
        rec_action=c.rec_action.at[row].set(action, mode="drop"),
        rec_player=c.rec_player.at[row].set(recorded_player, mode="drop"),
        rec_valid=c.rec_valid.at[row].set(True, mode="drop"),
        final=c.final.at[final_row].set(ret, mode="drop"),
        finished=c.finished.at[final_row].set(True, mode="drop"),
    )


class ValueData(NamedTuple):
    """Fixed-shape output of `value_data`: the kept items, compacted to the front.

    K = min(G * max_records, value_capacity) rows. Game g's record r is the row
    g * max_records + r of the games' records; the kept items are whole games' valid
    records in that order, at most K of them (more could not fit in the value window
    together, so they are never built: the window's `ring_add` would overwrite them with
    the same batch).

    Attributes:
      items: ValueSample with leading axis K.
      valid: bool[K], which rows are kept items (a prefix: rows past it are zero fill).
      rows: int32[K], each kept item's record row g * max_records + r (G * max_records on
        the fill rows).
      nodes: int32 scalar, states visited.
      truncated: int32 scalar, games cut at `max_steps`.
      players: int32[K], the acting player of each item's state.
    """

    items: ValueSample
    valid: Array
    rows: Array
    nodes: Array
    truncated: Array
    players: Array


def kept_rows(valid: Array, records_per_game: int, keep: int) -> Array:
    """int32[keep]: the record rows kept, in order: whole games' valid rows, at most `keep`.

    A game whose valid rows do not all fit is dropped with every later one, so that each
    kept item's game has all its items (its lambda-return reads them). Rows past the last
    kept one are len(valid).

    Args:
      valid: bool[G * R], the records that are items (R = `records_per_game`, static).
      keep: static number of rows returned.
    """
    per_game = valid.reshape(-1, records_per_game).sum(axis=1)
    fits = jnp.cumsum(per_game) <= keep
    rows, _ = ln.lanes_of(valid & jnp.repeat(fits, records_per_game), keep)
    return rows


def value_data(
    game, apply_fn, cfg: ValueConfig, params, iteration: Array, key: Array, num_games: int,
    sampling: tj.SamplingPolicy = tj.UNIFORM,
) -> ValueData:
    """`num_games` on-policy games; their recorded nodes as training items of Q.

    Args:
      game: a game of the protocol with `observe_history` (static).
      apply_fn: the advantage networks' `apply(params, x)` (static).
      cfg: static value settings.
      params: (player 0's, player 1's) advantage network parameters.
      iteration: the CFR iteration t, stored in every item.
      key: PRNG key.
      num_games: static number of games G.
      sampling: the traversals' fixed sampling policy, played in the `sampling_prefix`
        (static; unused without one).
    """
    k_init, k_act, k_explore, k_rec = jax.random.split(key, 4)
    seeds = tj.loop_seeds(k_act, k_explore, k_rec)
    # Folded off the key, so that the games without a prefix stay what they were.
    prefix_seeds = tj.loop_seeds(*jax.random.split(jax.random.fold_in(key, 1), 4))
    packer, roots, roots_live = ln.deal_roots(game, k_init, num_games)
    s = _DataSetup(
        ln.BatchedGame(game), packer, apply_fn, params, cfg, seeds, sampling, prefix_seeds, num_games, roots, roots_live
    )
    width = min(cfg.lanes if cfg.lanes > 0 else tj.DEFAULT_LANES, num_games)
    n_rows = num_games * cfg.max_records
    zi = jnp.zeros((width,), jnp.int32)
    carry = _DataCarry(
        cursor=roots[:width].T, live=roots_live[:width], game_id=jnp.arange(width, dtype=jnp.int32),
        next_game=jnp.int32(width), records=zi, prefix=jnp.full((width,), cfg.sampling_prefix > 0.0), moves=zi,
        nodes=jnp.ones((width,), jnp.int32), truncated=zi,
        step=jnp.int32(0), rec_state=jnp.zeros((n_rows, packer.size), jnp.int32),
        rec_action=jnp.zeros((n_rows,), jnp.int32), rec_player=jnp.zeros((n_rows,), jnp.int32),
        rec_valid=jnp.zeros((n_rows,), bool), final=jnp.zeros((num_games + 1, 2), jnp.float32),
        finished=jnp.zeros((num_games + 1,), bool),
    )
    more = lambda c: jnp.any(c.live) | (c.next_game < num_games)  # noqa: E731
    c = lax.while_loop(more, lambda c: _data_step(s, c), carry)
    game_of = jnp.arange(n_rows) // cfg.max_records
    # Only the kept rows become items: a game records up to max_records nodes but, once
    # its players play sensibly, uses a fraction of them (Lost Cities: ~30 of 128), and the
    # histories and the relabelling forward cost as much per row as the games' own moves.
    rows = kept_rows(c.rec_valid & c.finished[game_of], cfg.max_records, min(n_rows, cfg.value_capacity))
    valid = rows < n_rows
    at = jnp.minimum(rows, n_rows - 1)
    player = c.rec_player[at]
    mine = _of_player(c.final[game_of[at]].T, player)
    history, returns_now = _kept_histories(s.game, packer, c.rec_state[at], jnp.sum(valid.astype(jnp.int32)))
    if cfg.value_head == "actions":
        action = jax.nn.one_hot(c.rec_action[at], game.num_actions, dtype=jnp.bool_)
    else:
        # V(h): the single output is always the one trained, on the change of the return from
        # where the recorded state stands, so the immediate effect of an action is exact.
        action = jnp.ones((rows.shape[0], 1), jnp.bool_)
        mine = mine - _of_player(returns_now, player)
    target = jnp.where(valid, mine / return_scale(game, cfg), 0.0)
    t = jnp.full(rows.shape, jnp.asarray(iteration, jnp.float32))
    items = ValueSample(history, action, target, t)
    return ValueData(items, valid, rows, jnp.sum(c.nodes), jnp.sum(c.truncated), player)


def _kept_histories(game: ln.BatchedGame, packer: ln.Packer, packed: Array, count: Array):
    """(float32[K, H], float32[2, K]): `observe_history` and `returns` of K packed states
    (int32[K, F]), in chunks of 1,024; chunks that start at or after `count` are skipped
    (zeros). The kept items are a prefix of their rows, so this costs what the items need:
    a row of history costs about as much as a move of the games."""
    def history_and_returns(x):
        states = packer.unpack(x.T)
        return game.observe_history(states).T.astype(jnp.float32), game.returns(states).T.astype(jnp.float32)

    history, returns_now = ln.map_prefix_chunks(history_and_returns, packed, 1024, count)
    return history, returns_now.T


def relabelled_targets(values: Array, data: ValueData, num_rows: int, records_per_game: int, lam: float) -> Array:
    """float32[K]: `lambda_returns` of `data`'s kept items, given V at them (float32[K]).

    The items go back to their record rows (`data.rows`, `num_rows` = G * R of them, static)
    so that each game's items are in recording order, and come back compacted.
    """
    def spread(x, fill):
        return jnp.full((num_rows + 1,), fill, x.dtype).at[data.rows].set(x)[:num_rows]

    g = lambda_returns(
        spread(data.items.target, 0.0), spread(values, 0.0), spread(data.valid, False), spread(data.players, 0),
        records_per_game, lam,
    )
    return jnp.where(data.valid, g[jnp.minimum(data.rows, num_rows - 1)], 0.0)


def lambda_returns(targets: Array, values: Array, valid: Array, players: Array, records_per_game: int, lam: float) -> Array:
    """float32[G * R]: lambda-return targets of a state head's items (`value_lambda`).

    Within one game, with items in recording order (valid rows are a prefix of the game's R
    rows), write u_i for item i's Monte Carlo target (the change of the return to the end
    of the game) and w_i for V at its state, both in player 0's units (the games are
    zero-sum). Then G_last = u_last and

        G_i = (u_i - u_{i+1}) + (1 - lam) * w_{i+1} + lam * G_{i+1},

    the score gained until the next recorded state plus a mix of V there and the return
    after it. lam = 1 gives back u_i; lam = 0 is the one-step bootstrap to the next
    recorded state. Returned in each item's acting player's units, 0 on invalid rows.

    Args:
      targets: float32[G * R], the items' Monte Carlo targets (acting player's units).
      values: float32[G * R], V at the items' states (acting player's units).
      valid: bool[G * R]; players: int32[G * R], the acting player of each item.
      records_per_game: R (static); lam: lambda in [0, 1] (static).
    """
    sign = jnp.where(players == 0, 1.0, -1.0)
    u = (sign * targets).reshape(-1, records_per_game)
    w = (sign * values).reshape(-1, records_per_game)
    ok = valid.reshape(-1, records_per_game)
    shift = lambda x, fill: jnp.concatenate([x[:, 1:], jnp.full_like(x[:, :1], fill)], axis=1)  # noqa: E731
    u_next, w_next, ok_next = shift(u, 0.0), shift(w, 0.0), shift(ok, False)

    def back(g_next, xs):
        u_i, u_n, w_n, has_next = xs
        g = jnp.where(has_next, (u_i - u_n) + (1.0 - lam) * w_n + lam * g_next, u_i)
        return g, g

    columns = lambda x: x.T[::-1]  # noqa: E731 (scan from the last record backwards)
    _, g = lax.scan(back, jnp.zeros(u.shape[0], u.dtype), (columns(u), columns(u_next), columns(w_next), columns(ok_next)))
    g = g[::-1].T.reshape(-1)
    return jnp.where(valid, sign * g, 0.0)


def _of_player(values: Array, player: Array) -> Array:
    """float32[N]: column n of `values` (float32[2, N]) read at row `player[n]`."""
    return jnp.where(player == 0, values[0], values[1])


def history_rows(game, packer: ln.Packer, packed: Array) -> Array:
    """float32[N, H]: `game.observe_history` of N packed states (int32[N, F])."""
    return ln.BatchedGame(game).observe_history(packer.unpack(packed.T)).T.astype(jnp.float32)


def history_values(value_apply, value_params, rows: Array, chunk: int = 0, count: Array | None = None) -> Array:
    """float32[N, A]: Q of N history rows, in chunks of `eval_chunk_size(chunk)` rows.

    With `count` (int32 scalar) only rows before it are evaluated: chunks that start at or
    after it are skipped and their rows are 0.
    """
    return ln.map_prefix_chunks(
        lambda x: value_apply(value_params, x).astype(jnp.float32), rows, ln.eval_chunk_size(chunk), count
    )


def child_values(game, packer: ln.Packer, packed: Array, need: Array, value_apply, value_params, scale: float) -> Array:
    """float32[N, A]: the acting player's value of each needed child h.a of N packed histories.

    A terminal child is worth its exact return / `scale`; otherwise V(h.a), the value of the
    player to act there, negated when that is the opponent (the games are zero-sum). V is
    the return as the child stands (`game.returns`) plus the network's output, which is
    trained on the change from there to the end (`value_data`). The child after a draw
    shows the card drawn: one sample of the chance outcome, so the value is unbiased over
    the undealt cards. Only the (node, action) pairs in `need` are
    evaluated, packed into chunks of `eval_chunk_size()` pairs (about a third of all pairs
    are legal actions of a sampled node in Lost Cities); the other entries are 0.

    Args:
      packed: int32[N, F] packed nonterminal states.
      need: bool[N, A], the pairs to evaluate (a sampled node's legal actions).
      value_apply: V's `apply(params, history) -> float32[..., 1]`.
    """
    n, n_act = need.shape
    chunk = min(ln.eval_chunk_size(), n * n_act)
    count = jnp.sum(need.astype(jnp.int32))
    # Pair indices in order, padded by one chunk so that the last slice stays in bounds.
    (pair,) = jnp.nonzero(need.reshape(-1), size=n * n_act + chunk, fill_value=0)
    batched = ln.BatchedGame(game)

    def evaluate_chunk(carry):
        i, out = carry
        start = i * chunk
        pairs = lax.dynamic_slice(pair, (start,), (chunk,))
        states = packer.unpack(packed[pairs // n_act].T)
        actor = states.current_player
        child = batched.step(states, (pairs % n_act).astype(jnp.int32))
        history = batched.observe_history(child).T.astype(jnp.float32)
        change = value_apply(value_params, history).astype(jnp.float32)[:, 0]
        ret = batched.returns(child) / scale  # [2, chunk], as the child stands (final if terminal)
        mover = child.current_player
        v = change + _of_player(ret, mover)  # V of the player to act at the child
        exact = _of_player(ret, actor)
        value = jnp.where(child.terminated, exact, jnp.where(mover == actor, v, -v))
        slots = jnp.where(start + jnp.arange(chunk) < count, pairs, n * n_act)  # past the end: dropped
        return i + 1, out.at[slots].set(value, mode="drop")

    out = jnp.zeros((n * n_act,), jnp.float32)
    _, out = lax.while_loop(lambda c: c[0] * chunk < count, evaluate_chunk, (jnp.int32(0), out))
    return out.reshape(n, n_act)


# ---------------------------------------------------------------------------- regret samples
def _regret_values(game, cfg: ValueConfig, packer: ln.Packer, packed: Array, need: Array, value_apply, value_params) -> Array:
    """float32[N, A]: q(h, a) of N packed histories, from Q's outputs or V at the children."""
    if cfg.value_head == "actions":
        return history_values(value_apply, value_params, history_rows(game, packer, packed))
    return child_values(game, packer, packed, need, value_apply, value_params, return_scale(game, cfg))


def chance_averaged_values(
    game, cfg: ValueConfig, packer: ln.Packer, packed: Array, need: Array, value_apply, value_params, key: Array
) -> Array:
    """float32[N, A]: `_regret_values` of N packed histories, where each needed chance action
    (`game.chance_actions`) is valued by the mean over `cfg.chance_samples` children: the
    one of the dealt outcome and those of `chance_samples - 1` redraws of the outcome it
    reveals (`game.resample_chance`, copy j of row i keyed by `fold_in(key, j)` and i).
    Each redrawn child is an independent draw of the outcome given the history, so the mean
    has the dealt child's expectation and a k-th of its spread over the outcome.
    """
    k = cfg.chance_samples
    n, n_act = need.shape
    batched = ln.BatchedGame(game)
    states = packer.unpack(packed.T)
    chance = batched.chance_actions(states).T & need  # [N, A]
    rows = jnp.arange(n, dtype=jnp.int32)

    def redraw(j):
        seed = jax.random.bits(jax.random.fold_in(key, j), (2,), jnp.uint32)
        bits = jnp.stack([ln.random_bits(seed, jnp.int32(0), rows), ln.random_bits(seed, jnp.int32(1), rows)], -1)
        return packer.pack(batched.resample_chance(states, jax.random.wrap_key_data(bits, impl="threefry2x32"))).T

    packed_all = jnp.concatenate([packed] + [redraw(j) for j in range(1, k)], axis=0)
    need_all = jnp.concatenate([need] + [chance] * (k - 1), axis=0)
    q = _regret_values(game, cfg, packer, packed_all, need_all, value_apply, value_params).reshape(k, n, n_act)
    # child_values leaves the entries it did not evaluate at 0.
    return jnp.where(chance, jnp.sum(q, axis=0) / k, q[0])


def value_sampling(
    game, apply_fn, cfg: ValueConfig, params, traverser: Array, iteration: Array, key: Array, num_traversals: int,
    *, value_apply, value_params, sampling: tj.SamplingPolicy = tj.UNIFORM,
) -> TraversalResult:
    """`num_traversals` value traversals for `traverser` (see the module docstring).

    Args:
      game: a game of the protocol with `observe_history` (static).
      apply_fn: the advantage networks' `apply(params, x)` (static).
      cfg: static value settings.
      params: (player 0's, player 1's) advantage network parameters.
      traverser: int32 scalar.
      iteration: the CFR iteration t (>= 1), stored in every sample.
      key: PRNG key.
      num_traversals: static batch size B.
      value_apply: Q's `apply(params, history) -> float32[..., A]` (static).
      value_params: Q's parameters.
      sampling: the traverser's fixed sampling policy (static).

    Returns:
      TraversalResult with S_a = B * max_samples and S_s = B * max_strategy rows; traversal
      b owns rows [b * max_samples, (b + 1) * max_samples) of the advantage buffer (its
      sampled nodes in trajectory order) and likewise for strategy rows. Regrets are in
      units of `return_scale`.
    """
    n_act = game.num_actions
    k_init, k_loop = jax.random.split(key)
    s = tj.setup(
        game, apply_fn, params, traverser, k_init, tj.loop_seeds(*jax.random.split(k_loop, 5)), num_traversals,
        select_probability=cfg.sample_probability, max_selected=cfg.max_samples, max_strategy=cfg.max_strategy,
        max_steps=cfg.max_steps, sampling=sampling, alternatives=cfg.hidden_average,
    )
    m = tj.run_main(s, min(cfg.lanes if cfg.lanes > 0 else tj.DEFAULT_LANES, num_traversals), game.observation_size)
    valid, mask, sigma = tj.selected_parts(m, n_act)
    if cfg.hidden_average:
        total = jnp.sum(m.selected_alt, axis=-1, keepdims=True)
        valid = valid & (total[:, 0] > 0)
        weights = m.selected_alt / jnp.where(total > 0, total, 1.0)  # [N, K], the posterior
        k = weights.shape[1]
        states = s.packer.unpack(m.selected_state.T)
        alt, _ = s.game.alternatives(states, jnp.broadcast_to(s.traverser, valid.shape))
        packed = jnp.transpose(jax.vmap(s.packer.pack)(alt), (0, 2, 1)).reshape(k * valid.shape[0], -1)
        need = (mask & valid[:, None])[None] & (weights.T > 0)[:, :, None]  # [K, N, A]
        q = _regret_values(game, cfg, s.packer, packed, need.reshape(k * valid.shape[0], n_act), value_apply, value_params)
        q = q.reshape(k, valid.shape[0], n_act)
        baseline = jnp.sum(jnp.where(mask[None], sigma[None] * q, 0.0), axis=-1, keepdims=True)
        regret = jnp.sum(weights.T[:, :, None] * jnp.where(need, q - baseline, 0.0), axis=0)
    else:
        need = mask & valid[:, None]
        if cfg.chance_samples > 1:
            # fold_in, not a third split: the other keys stay those of chance_samples: 1.
            q = chance_averaged_values(
                game, cfg, s.packer, m.selected_state, need, value_apply, value_params, jax.random.fold_in(key, 1)
            )
        else:
            q = _regret_values(game, cfg, s.packer, m.selected_state, need, value_apply, value_params)
        baseline = jnp.sum(jnp.where(mask, sigma * q, 0.0), axis=-1, keepdims=True)
        regret = jnp.where(mask & valid[:, None], q - baseline, 0.0)
    t = jnp.asarray(iteration, jnp.float32)
    adv = AdvantageSample(m.selected_obs, mask, regret, jnp.full(valid.shape, t, jnp.float32))
    strat, strat_valid = strategy_samples(m.strat_obs, m.strat_rows, n_act, iteration)
    counters = TraversalCounters(
        nodes=jnp.sum(m.nodes).astype(jnp.int32),
        evaluations=jnp.sum(m.evaluations).astype(jnp.int32),
        advantage_samples=jnp.sum(valid.astype(jnp.int32)),
        strategy_samples=jnp.sum(strat_valid.astype(jnp.int32)),
        dropped_samples=jnp.sum(m.dropped),
        truncated=jnp.sum(m.truncated),
    )
    return TraversalResult(adv, valid, strat, strat_valid, counters)
