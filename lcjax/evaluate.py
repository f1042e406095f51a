"""Evaluation of a Deep CFR solver state: matches against bots, or exact exploitability.

* Lost Cities: the agent's policy (average or current) plays batched matches against
  named bots with seats alternated (`lcjax.env.arena`); per opponent it reports win rate,
  mean score difference with its 95% confidence interval, mean score, opened colors,
  negative-expedition rate, bonus rate, wagers played, turns and turn-cap rate.
* Kuhn and Leduc poker: exact exploitability of the policy (`lcjax.cfr.exploitability`).

A solver on a mesh of several devices (`lcjax.cfr.mesh`) splits each match's games over them.

Read-offs (`READOUTS`): "average" (the strategy network, sampled), "average_greedy" (its
most likely legal action), "current" (regret matching on the acting seat's advantage
network, sampled) and "current_greedy" (its most likely legal action). Greedy play is
deterministic and can stall until the turn cap: every row reports its cap rate.

Metric keys are flat, so that run drivers can log them next to the training metrics:
`eval/<opponent>/<metric>` and `eval/exploitability` for the primary policy
(`evaluation.policy`), and `readout/<readout>/<opponent>/<metric>` and
`readout/<readout>/exploitability` for every read-off of `evaluation.readouts`. A run also
logs the probe diagnostics of `lcjax.diagnostics` (`diag/...`).
"""

from __future__ import annotations

from typing import Any, Sequence

import functools

import jax
import numpy as np

from lcjax import diagnostics
from lcjax.cfr import exploitability as xpl
from lcjax.cfr.mesh import sharded
from lcjax.cfr.policy import make_act
from lcjax.env.arena import play_games, summarize
from lcjax.env.bots import BOT_NAMES, make_bot
from lcjax.env.registry import info_of

POLICIES = ("average", "current")
READOUTS = ("average", "average_greedy", "current", "current_greedy")
GREEDY = "_greedy"


def _check_policy(policy: str) -> None:
    if policy not in READOUTS:
        raise ValueError(f"policy {policy!r} is not one of: {', '.join(READOUTS)}")


def base_policy(readout: str) -> str:
    """The solver policy a read-off plays: "average_greedy" -> "average"."""
    return readout[: -len(GREEDY)] if readout.endswith(GREEDY) else readout


@functools.lru_cache(maxsize=32)
def _greedy_act(solver, base: str):
    # One act object per (solver, policy), so later evaluations reuse the compiled match.
    return make_act(solver.game, solver.policy(base), greedy=True)


def agent_act(solver, policy: str = "average"):
    """(act(params, key, state), params getter) for the solver's read-off `policy`.

    A sampled read-off's act is the solver's own object (`DeepCFR.policy_act`), a greedy
    one is built once per solver from the same `lcjax.cfr.policy` functions (argmax over the
    legal actions), and `make_solver` gives one solver per (game, config), so every later
    evaluation reuses the arena's compiled match.
    """
    _check_policy(policy)
    base = base_policy(policy)
    act = _greedy_act(solver, base) if policy.endswith(GREEDY) else solver.policy_act(base)
    return act, lambda state: solver.policy_params(state, base)


def games_sharding(solver):
    """How a solver's matches split their games: over its mesh's devices (`lcjax.cfr.mesh`),
    or None on one device."""
    mesh = getattr(solver, "mesh", None)
    return None if mesh is None else sharded(mesh)


def match_metrics(summary: dict, prefix: str) -> dict[str, float]:
    """Flatten an arena summary into `prefix/<metric>` keys."""
    lo, hi = summary["mean_diff_ci95"]
    wlo, whi = summary["win_rate_a_ci95"]
    out = {
        "win_rate": summary["win_rate_a"],
        "win_rate_ci95_low": wlo,
        "win_rate_ci95_high": whi,
        "draw_rate": summary["draw_rate"],
        "score_diff": summary["mean_diff"],
        "score_diff_ci95_low": lo,
        "score_diff_ci95_high": hi,
        "score": summary["mean_score_a"],
        "opponent_score": summary["mean_score_b"],
        "turns": summary["mean_turns"],
        "cap_hit_rate": summary["cap_hit_rate"],
        "games": summary["n_games"],
    }
    for key in ("opened_colors", "negative_expedition_rate", "bonus_rate", "wagers_played"):
        if key in summary:
            out[key] = summary[key]
    return {f"{prefix}/{k}": float(v) for k, v in out.items()}


def evaluate_against_bots(
    solver, state, opponents: Sequence[str], games: int, key, *, policy: str = "average", prefix: str = "eval"
) -> dict[str, float]:
    """Matches of the solver's read-off `policy` against each bot in `opponents` (Lost
    Cities only). Every read-off plays the same deals (the same `key`).

    Returns:
      {"<prefix>/<opponent>/<metric>": value} for every opponent.
    """
    game = solver.game
    if info_of(game).exact_evaluation:
        raise ValueError(f"bot matches need a game evaluated by them; {info_of(game).name} uses exploitability")
    for name in opponents:
        if name not in BOT_NAMES:
            raise ValueError(f"unknown opponent {name!r}; choose from: {', '.join(BOT_NAMES)}")
    act, params_of = agent_act(solver, policy)
    metrics: dict[str, float] = {}
    for i, name in enumerate(opponents):
        result = play_games(
            game, act, make_bot(name, game), jax.random.fold_in(key, i), games, params_a=params_of(state),
            sharding=games_sharding(solver),
        )
        metrics.update(match_metrics(summarize(result), f"{prefix}/{name}"))
    return metrics


def evaluate_readouts(
    solver, state, readouts: Sequence[str], opponents: Sequence[str], games: int, key, *, known: dict | None = None
) -> dict[str, float]:
    """Every read-off of `readouts` against every bot of `opponents` (Lost Cities), or its
    exploitability (Kuhn, Leduc): `readout/<readout>/...` keys.

    Args:
      known: metrics already measured with the same key for one read-off, as
        {readout: {"eval/...": value}}: reused (renamed) instead of played again.
    """
    metrics: dict[str, float] = {}
    for readout in readouts:
        prefix = f"readout/{readout}"
        if known and readout in known:
            found = known[readout]
        elif info_of(solver.game).exact_evaluation:
            found = evaluate_exploitability(solver, state, policy=readout)
        else:
            found = evaluate_against_bots(solver, state, opponents, games, key, policy=readout)
        metrics.update({prefix + k[len("eval") :]: v for k, v in found.items() if k.startswith("eval/")})
    return metrics


def evaluate_head_to_head(solver_a, state_a, solver_b, state_b, games: int, key, *, policy: str = "average") -> dict:
    """Checkpoint against checkpoint on Lost Cities: A's metrics with B as the opponent."""
    act_a, params_a = agent_act(solver_a, policy)
    act_b, params_b = agent_act(solver_b, policy)
    result = play_games(
        solver_a.game, act_a, act_b, key, games, params_a=params_a(state_a), params_b=params_b(state_b),
        sharding=games_sharding(solver_a),
    )
    return match_metrics(summarize(result), "eval/other")


def evaluate_exploitability(solver, state, *, policy: str = "average") -> dict[str, float]:
    """Exact exploitability (chips) of a small game's policy; `eval/exploitability`."""
    _check_policy(policy)
    tree = xpl.game_tree(solver.game)
    # The policy on every information set, each read off for its acting player.
    table = np.asarray(solver.policy_fn(state, base_policy(policy))(tree.infoset_obs, tree.infoset_mask, tree.infoset_player))
    if policy.endswith(GREEDY):
        mask = np.asarray(tree.infoset_mask, bool)
        best = np.argmax(np.where(mask, table, -1.0), -1)
        table = np.eye(table.shape[-1], dtype=table.dtype)[best]
    fn = xpl.tabular_policy_fn(tree, table)
    return {"eval/exploitability": float(xpl.exploitability(solver.game, fn))}


def evaluate(solver, state, evaluation: Any, key, *, extended: bool = False, seed: int | None = None) -> dict[str, float]:
    """The evaluation a run logs: exploitability for small games, bot matches otherwise,
    each for the primary policy (`eval/...`) and every read-off (`readout/...`), and the
    probe diagnostics (`diag/...`) on games that have them.

    Args:
      solver: a DeepCFR.
      state: its SolverState.
      evaluation: the config's evaluation section (opponents, games, policy, readouts,
        extended_opponents, extended_games, diagnostic_states, diagnostic_redeals).
      key: PRNG key of the matches.
      extended: also play the extended opponents.
      seed: the run seed the probe states are built from (None = no diagnostics).
    """
    readouts = getattr(evaluation, "readouts", ())
    if info_of(solver.game).exact_evaluation:
        metrics = evaluate_exploitability(solver, state, policy=evaluation.policy)
        return metrics | evaluate_readouts(solver, state, readouts, (), 0, key, known={evaluation.policy: metrics})
    metrics = evaluate_against_bots(solver, state, evaluation.opponents, evaluation.games, key, policy=evaluation.policy)
    metrics.update(
        evaluate_readouts(
            solver, state, readouts, evaluation.opponents, evaluation.games, key, known={evaluation.policy: metrics}
        )
    )
    states = getattr(evaluation, "diagnostic_states", 0)
    if seed is not None and states and diagnostics.has_diagnostics(solver.game):
        probes = diagnostics.run_probe_set(solver.game, seed, states, evaluation.diagnostic_redeals)
        metrics.update(diagnostics.probe_metrics(solver, state, probes))
    if extended and evaluation.extended_opponents:
        metrics.update(
            evaluate_against_bots(
                solver,
                state,
                evaluation.extended_opponents,
                evaluation.extended_games,
                jax.random.fold_in(key, 1000),
                policy=evaluation.policy,
            )
        )
    return metrics
