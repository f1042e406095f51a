"""Evaluation of a Deep CFR solver state: matches against bots, or exact exploitability.

* Lost Cities: the agent's policy (average or current) plays batched matches against
  named bots with seats alternated (`lcjax.env.arena`); per opponent it reports win rate,
  mean score difference with its 95% confidence interval, mean score, opened colors,
  negative-expedition rate, bonus rate, wagers played, turns and turn-cap rate.
* Kuhn and Leduc poker: exact exploitability of the policy (`lcjax.cfr.exploitability`).

Metric keys are flat, `eval/<opponent>/<metric>` and `eval/exploitability`, so that run
drivers can log them next to the training metrics.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

from lcjax.cfr import exploitability as xpl
from lcjax.env.arena import play_games, summarize
from lcjax.env.bots import BOT_NAMES, make_bot
from lcjax.env.registry import info_of

POLICIES = ("average", "current")


def _check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} is not one of: {', '.join(POLICIES)}")


def agent_act(solver, policy: str = "average"):
    """(act(params, key, state), params getter) for the solver's `policy`.

    The act is the solver's own object (`DeepCFR.policy_act`), and `make_solver` gives one
    solver per (game, config), so every later evaluation reuses the arena's compiled match.
    Policies come from `lcjax.cfr.policy`: the current one plays the acting seat's network.
    """
    _check_policy(policy)
    return solver.policy_act(policy), lambda state: solver.policy_params(state, policy)


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
    solver, state, opponents: Sequence[str], games: int, key, *, policy: str = "average"
) -> dict[str, float]:
    """Matches of the solver's policy against each bot in `opponents` (Lost Cities only).

    Returns:
      {"eval/<opponent>/<metric>": value} for every opponent.
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
        result = play_games(game, act, make_bot(name, game), jax.random.fold_in(key, i), games, params_a=params_of(state))
        metrics.update(match_metrics(summarize(result), f"eval/{name}"))
    return metrics


def evaluate_head_to_head(solver_a, state_a, solver_b, state_b, games: int, key, *, policy: str = "average") -> dict:
    """Checkpoint against checkpoint on Lost Cities: A's metrics with B as the opponent."""
    act_a, params_a = agent_act(solver_a, policy)
    act_b, params_b = agent_act(solver_b, policy)
    result = play_games(
        solver_a.game, act_a, act_b, key, games, params_a=params_a(state_a), params_b=params_b(state_b)
    )
    return match_metrics(summarize(result), "eval/other")


def evaluate_exploitability(solver, state, *, policy: str = "average") -> dict[str, float]:
    """Exact exploitability (chips) of a small game's policy; `eval/exploitability`."""
    _check_policy(policy)
    tree = xpl.game_tree(solver.game)
    # The policy on every information set, each read off for its acting player.
    table = solver.policy_fn(state, policy)(tree.infoset_obs, tree.infoset_mask, tree.infoset_player)
    fn = xpl.tabular_policy_fn(tree, np.asarray(table))
    return {"eval/exploitability": float(xpl.exploitability(solver.game, fn))}


def evaluate(solver, state, evaluation: Any, key, *, extended: bool = False) -> dict[str, float]:
    """The evaluation a run logs: exploitability for small games, bot matches otherwise.

    Args:
      solver: a DeepCFR.
      state: its SolverState.
      evaluation: the config's evaluation section (opponents, games, policy,
        extended_opponents, extended_games).
      key: PRNG key of the matches.
      extended: also play the extended opponents.
    """
    if info_of(solver.game).exact_evaluation:
        return evaluate_exploitability(solver, state, policy=evaluation.policy)
    metrics = evaluate_against_bots(solver, state, evaluation.opponents, evaluation.games, key, policy=evaluation.policy)
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
