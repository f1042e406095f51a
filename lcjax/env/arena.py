"""Batched head-to-head matches between two Lost Cities policies.

`play_games` runs a whole match as one jitted computation: every game advances in lockstep
(vmap over games inside a `lax.while_loop` over decisions) until all are over. Seats
alternate so that neither policy profits from moving first: game i has policy A in seat
i % 2. Policies have the signature of `lcjax.env.bots`: `act(key, state) -> int32[]`, or,
for policies with run-time parameters (networks), `act(params, key, state) -> int32[]` with
the parameters passed to `play_games`: they are arguments of the compiled match, so new
values (new weights every evaluation) reuse the compiled code.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lcjax import onehot
from lcjax.env.lost_cities import LostCities, State

Array = jax.Array
Policy = Callable[[Array, State], Array]


class MatchResult(NamedTuple):
    """Per-game outcomes of a match, as numpy arrays of length num_games.

    Attributes:
      score_a, score_b: int32, final scores of policy A and policy B.
      a_seat: int32, the seat (0 moves first) of policy A.
      turns: int32, completed turns.
      cap_hit: bool, the game did not end by emptying the deck (the max_turns cap, or the
        max_steps cut of `play_games`).
      finished: bool, the game reached a terminal state within max_steps.
      illegal_moves: int32, decisions on which the acting policy chose an illegal action
        (always 0 for correct policies; an illegal action leaves the state unchanged).

    Policy A's expeditions in the final position (the last one reached, for a cut game):
      opened_a: int32, colors A opened (expeditions holding at least one card).
      negative_a: int32, A's opened expeditions with a negative score.
      bonus_a: int32, A's expeditions with at least `rules.bonus_threshold` cards.
      wagers_a: int32, wager cards A played.
    These four are None in results built without them (`summarize` then leaves out the
    statistics derived from them); `play_games` always fills them in.
    """

    score_a: np.ndarray
    score_b: np.ndarray
    a_seat: np.ndarray
    turns: np.ndarray
    cap_hit: np.ndarray
    finished: np.ndarray
    illegal_moves: np.ndarray
    opened_a: np.ndarray | None = None
    negative_a: np.ndarray | None = None
    bonus_a: np.ndarray | None = None
    wagers_a: np.ndarray | None = None


def default_max_steps(game: LostCities) -> int:
    """Decisions enough for any game: two per turn up to the max_turns cap."""
    return 2 * game.rules.max_turns + 2


def _agent_stats(game: LostCities, states: State, a_seat: Array):
    """(opened, negative, bonus, wagers), each int32[G]: policy A's expeditions in a batch
    of states, A sitting in seat a_seat[g] of game g."""
    count, wagers, _ = jax.vmap(game.expedition_stats)(states)  # [G, 2, C] each
    score = jax.vmap(game.expedition_scores)(states)

    def own(x):
        return jnp.where((a_seat == 0)[:, None], x[:, 0], x[:, 1])

    count, wagers, score = own(count), own(wagers), own(score)
    opened = count > 0
    return (
        opened.sum(-1).astype(jnp.int32),
        (opened & (score < 0)).sum(-1).astype(jnp.int32),
        (count >= game.rules.bonus_threshold).sum(-1).astype(jnp.int32),
        wagers.sum(-1).astype(jnp.int32),
    )


def _build_match(
    game: LostCities,
    act_a: Callable,
    act_b: Callable,
    num_games: int,
    max_steps: int,
    with_params_a: bool = False,
    with_params_b: bool = False,
    sharding: Any = None,
):
    """A jitted function (key, params_a, params_b) -> (outputs, final states) for one match
    configuration. outputs are per-game device arrays in `MatchResult` field order; the
    params of a policy without them are ignored (pass None). With `with_params_x`, act_x
    is called as act_x(params_x, key, state); the params are never batched. With a
    `sharding` (see `play_games`) the games are split by it and the outputs replicated."""
    split = (lambda x: x) if sharding is None else (lambda x: jax.lax.with_sharding_constraint(x, sharding))

    def decide(state: State, a_seat: Array, key: Array, t: Array, params_a, params_b):
        """One game's action at decision t (int32[]) and whether it is legal (bool[])."""
        key_a, key_b = jax.random.split(jax.random.fold_in(key, t))
        action_a = act_a(params_a, key_a, state) if with_params_a else act_a(key_a, state)
        action_b = act_b(params_b, key_b, state) if with_params_b else act_b(key_b, state)
        # Both policies run and a select keeps one: branch-free under vmap.
        action = jnp.where(state.current_player == a_seat, action_a, action_b)
        legal = onehot.take(game.legal_action_mask(state), action)
        return action.astype(jnp.int32), legal

    def run(key: Array, params_a, params_b):
        init_key, play_key = jax.random.split(key)
        a_seat = split(jnp.arange(num_games, dtype=jnp.int32) % 2)
        states = split(jax.vmap(game.init)(split(jax.random.split(init_key, num_games))))
        game_keys = split(jax.random.split(play_key, num_games))

        def cond(carry):
            states, _, t = carry
            return jnp.any(~states.terminated) & (t < max_steps)

        def body(carry):
            states, illegal, t = carry
            actions, legal = jax.vmap(decide, in_axes=(0, 0, 0, None, None, None))(
                states, a_seat, game_keys, t, params_a, params_b
            )
            illegal = illegal + (~legal & ~states.terminated).astype(jnp.int32)
            return jax.vmap(game.step)(states, actions), illegal, t + 1

        carry = (states, jnp.zeros((num_games,), jnp.int32), jnp.int32(0))
        states, illegal, _ = jax.lax.while_loop(cond, body, carry)
        scores = jax.vmap(game.scores)(states)  # [G, 2]
        score_a = jnp.where(a_seat == 0, scores[:, 0], scores[:, 1])
        score_b = jnp.where(a_seat == 0, scores[:, 1], scores[:, 0])
        deck_empty = jax.vmap(game.cards_left)(states) == 0
        outputs = (score_a, score_b, a_seat, states.turn, ~deck_empty, states.terminated, illegal)
        outputs = outputs + _agent_stats(game, states, a_seat)
        if sharding is not None:  # every process reads every game's outcome
            whole = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
            outputs = jax.lax.with_sharding_constraint(outputs, whole)
        return outputs, states

    return jax.jit(run)


# Compiled matches keyed by (game, act_a, act_b, num_games, max_steps, params_a is not None,
# params_b is not None), plus the sharding when the games are split: policies are closures,
# so identity is the right key (`bots.make_bot` returns one object per (name, game), a
# solver one per policy, and `lcjax.cfr.solver.make_solver` one solver per (game, config,
# mesh)); params values are arguments of the compiled function, so they are not part of the
# key. This cache stays: it is the only one of compiled matches, and the env knows nothing
# of solvers.
_MATCH_CACHE: dict[tuple, Callable] = {}


def play_games(
    game: LostCities,
    act_a: Callable,
    act_b: Callable,
    key: Array,
    num_games: int,
    max_steps: int | None = None,
    *,
    params_a: Any = None,
    params_b: Any = None,
    sharding: Any = None,
) -> MatchResult:
    """Play `num_games` games of A against B with alternating seats, as one jitted call.

    Args:
      game: the game.
      act_a, act_b: policies `act(key, state) -> int32[]` for one state, or
        `act(params, key, state) -> int32[]` when params are given.
      key: PRNG key for the deals and the policies' randomness.
      num_games: number of games (> 0); game i has A in seat i % 2.
      max_steps: cut after this many decisions; default `default_max_steps(game)`, enough
        for every game to end.
      params_a, params_b: run-time parameters (any pytree; None = the policy takes none).
        When given, act_x is called as act_x(params_x, key, state), with the same
        unbatched params for every game. They are arguments of the compiled match: new
        values of the same shapes and dtypes reuse it.
      sharding: None (one device), or a `jax.sharding.NamedSharding` splitting the games'
        leading axis over a mesh's devices (e.g. `NamedSharding(mesh, P("data"))`): the
        match is still one program, with its games split over the devices.

    Returns:
      A `MatchResult` of numpy arrays, one row per game.
    """
    if not isinstance(num_games, (int, np.integer)) or num_games <= 0:
        raise ValueError(f"num_games must be a positive integer, got {num_games!r}")
    max_steps = default_max_steps(game) if max_steps is None else int(max_steps)
    if max_steps <= 0:
        raise ValueError(f"max_steps must be positive, got {max_steps!r}")
    flags = (params_a is not None, params_b is not None)
    cache_key = (game, act_a, act_b, int(num_games), max_steps) + flags + ((sharding,) if sharding is not None else ())
    fn = _MATCH_CACHE.get(cache_key)
    if fn is None:
        fn = _MATCH_CACHE[cache_key] = _build_match(game, act_a, act_b, int(num_games), max_steps, *flags, sharding)
    outputs, _ = fn(key, params_a, params_b)  # the final states stay on the device
    return MatchResult(*(np.asarray(x) for x in jax.device_get(outputs)))


def summarize(result: MatchResult) -> dict:
    """Summary statistics of a match from A's side, as plain Python numbers.

    Keys: n_games; win_rate_a, draw_rate, loss_rate_a (sum to 1); win_rate_a_ci95 (lo, hi),
    normal approximation; mean_score_a, mean_score_b; mean_diff (A minus B) and
    mean_diff_ci95 (lo, hi) = mean +- 1.96 * std / sqrt(n) (sample std); mean_turns;
    cap_hit_rate; illegal_moves (total). When the result has A's expedition statistics (as
    from `play_games`): opened_colors and wagers_played (means per game);
    negative_expedition_rate and bonus_rate (negative resp. bonus expeditions over all opened
    expeditions, summed over games; 0 when A opened none).
    """
    diff = np.asarray(result.score_a, np.float64) - np.asarray(result.score_b, np.float64)
    n = diff.size
    if n == 0:
        raise ValueError("cannot summarize an empty match")
    win = float(np.mean(diff > 0))
    draw = float(np.mean(diff == 0))
    loss = 1.0 - win - draw
    mean_diff = float(diff.mean())
    std = float(diff.std(ddof=1)) if n > 1 else 0.0
    half = 1.96 * std / math.sqrt(n)
    win_half = 1.96 * math.sqrt(win * (1.0 - win) / n)
    summary = {
        "n_games": int(n),
        "win_rate_a": win,
        "draw_rate": draw,
        "loss_rate_a": loss,
        "win_rate_a_ci95": (win - win_half, win + win_half),
        "mean_score_a": float(np.mean(result.score_a)),
        "mean_score_b": float(np.mean(result.score_b)),
        "mean_diff": mean_diff,
        "mean_diff_ci95": (mean_diff - half, mean_diff + half),
        "mean_turns": float(np.mean(result.turns)),
        "cap_hit_rate": float(np.mean(result.cap_hit)),
        "illegal_moves": int(np.sum(result.illegal_moves)),
    }
    stats = (result.opened_a, result.negative_a, result.bonus_a, result.wagers_a)
    if all(x is not None for x in stats):
        opened = int(np.sum(result.opened_a))
        summary["opened_colors"] = float(np.mean(result.opened_a))
        summary["negative_expedition_rate"] = int(np.sum(result.negative_a)) / opened if opened else 0.0
        summary["bonus_rate"] = int(np.sum(result.bonus_a)) / opened if opened else 0.0
        summary["wagers_played"] = float(np.mean(result.wagers_a))
    return summary
