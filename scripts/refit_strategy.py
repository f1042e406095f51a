"""Refit a run's average-strategy network on its own strategy reservoir with other sample
weights, and measure each refitted network.

    python scripts/refit_strategy.py --checkpoint runs/<run> --strategy-weight-power 1 2 4 \
        --games 1000 --opponents passive_discard,safe_heuristic --json refit.json

Nothing in training reads the average-strategy network (traversals and value games play the
current strategies), and `optimization.strategy_weight_power` changes only the weight each
stored strategy sample carries, not which samples the reservoir keeps. So a run trained with
power p holds the reservoir of the same run trained with any other power, each item's weight
(t - d) ** p instead; refitting the finished run's network with those weights gives the
network that run would have fitted, without training it (the test checks this bit for bit).

A run's sample of iteration t is stored weighing w = (t - d0) ** p0, with p0 and d0 its
config's `strategy_weight_power` and `strategy_weight_delay`, so t = w ** (1 / p0) + d0; a
refit weighs it (t - d) ** p, and 0 where t <= d. A `--strategy-weight-delay` d > d0 thus
ignores the items of iterations d0 < t <= d, where a run trained with that delay would not
have stored them and would hold more later items instead: the refit's delay is a
conservative stand-in for the setting, not its exact result. A run of power 0 stored no
iteration (every weight 1) and cannot be refitted.

Each refit is one strategy phase of the run's own settings (`strategy_steps`,
`strategy_batch`, `strategy_learning_rate`, `strategy_warm_start`: a fresh network where the
run fits fresh ones), drawn from the same key for every weighting, so the rows differ only
by their weights; a run's last fit takes `final_strategy_steps` where the run sets them.
`--strategy-steps` fits every row with another number of Adam steps (the learning-rate
schedule spans them): the network a run with that `final_strategy_steps` ends on, as the
count changes neither the samples kept nor any other network. The first row is the
checkpoint's own network. Lost Cities plays each read-off of `--policy` against every bot
of `--opponents`, every row on the same deals (those `lcjax evaluate` plays with the same
`--opponents` list and `--seed`: each bot's deals follow from its place in the list); Kuhn
and Leduc report the exploitability. Prints a table and writes the rows as JSON (`--json`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
from common import write_json

from lcjax.argtypes import positive_int
from lcjax.env.bots import BOT_NAMES
from lcjax.env.registry import info_of
from lcjax.evaluate import READOUTS, evaluate_readouts
from lcjax.run import RunError, load_run, strategy_fit_solver

STRATEGY_READOUTS = ("average", "average_greedy")


def reweigh(weights: jax.Array, run_power: float, run_delay: int, power: float, delay: int) -> jax.Array:
    """float32[N]: stored strategy weights (t - run_delay) ** run_power as (t - delay) ** power,
    0 for t <= delay.

    Raises:
      ValueError: run_power is 0 (the weights hold no iteration), or delay < run_delay (the
        reservoir holds no item of the iterations that delay would keep).
    """
    if run_power <= 0:
        raise ValueError("the run's optimization.strategy_weight_power is 0: its strategy samples carry no iteration")
    if delay < run_delay:
        raise ValueError(f"--strategy-weight-delay {delay} is below the run's strategy_weight_delay {run_delay}")
    w = weights.astype(jnp.float32)
    if power == run_power and delay == run_delay:
        return w  # the run's own weights, bit for bit
    # The stored power's root is exact for the integer t of power 1; round away the float
    # error of other powers so that t <= delay compares whole iterations.
    t = (w if run_power == 1.0 else jnp.round(w ** (1.0 / run_power))) + run_delay
    return jnp.where(t > delay, jnp.maximum(t - delay, 1.0) ** power, 0.0)


def refit_weights(solver, state, power: float, delay: int = 0) -> jax.Array:
    """float32[capacity]: the state's strategy reservoir weights as (t - delay) ** power.

    Raises:
      ValueError: the reservoir is empty, no stored sample keeps a weight, or `reweigh`'s.
    """
    opt = solver.config.optimization
    memory = state.strategy_memory
    size = int(memory.size)
    if size == 0:
        raise ValueError("the checkpoint's strategy reservoir is empty (saved without reservoirs, or before any sample)")
    weights = reweigh(memory.data.iteration, opt.strategy_weight_power, opt.strategy_weight_delay, power, delay)
    if not bool(jnp.any(weights[:size] > 0)):
        raise ValueError(f"--strategy-weight-delay {delay} leaves no stored sample with a weight")
    return weights


def refit(solver, state, power: float, delay: int = 0):
    """`state` with its strategy network refitted on its reservoir weighted (t - delay) ** power.

    One strategy phase of the solver's settings, from a key folded out of the state's
    (`DeepCFR.train_strategy(keep_key=True)`): the same key for every weighting. The
    returned state keeps the stored reservoir and key.

    Returns:
      (state, the phase's metrics).

    Raises:
      ValueError: as `refit_weights`.
    """
    memory = state.strategy_memory
    weighted = memory.replace(data=memory.data._replace(iteration=refit_weights(solver, state, power, delay)))
    fitted, metrics = solver.train_strategy(state._replace(strategy_memory=weighted), keep_key=True)
    return fitted._replace(strategy_memory=memory), metrics


def measure(solver, state, policies, opponents, games: int, seed: int) -> dict[str, float]:
    """Each read-off's `readout/<policy>/...` metrics: bot matches on the deals `lcjax
    evaluate` plays for the same `opponents` and `seed` (Lost Cities), or the exploitability
    (Kuhn, Leduc)."""
    return evaluate_readouts(solver, state, policies, opponents, games, jax.random.key(seed))


def _row_text(label: str, metrics: dict[str, float], policies, opponents, exact: bool) -> str:
    cells = []
    for policy in policies:
        if exact:
            cells.append(f"{policy} {metrics[f'readout/{policy}/exploitability']:.4f}")
            continue
        for name in opponents:
            prefix = f"readout/{policy}/{name}/"
            cells.append(
                f"{policy} vs {name} {metrics[prefix + 'score_diff']:+.1f} "
                f"[{metrics[prefix + 'score_diff_ci95_low']:+.1f}, {metrics[prefix + 'score_diff_ci95_high']:+.1f}]"
            )
    return f"{label:>24}  " + "   ".join(cells)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True, help="a run directory")
    p.add_argument("--step", type=int, default=None, help="checkpoint iteration (default: the latest)")
    p.add_argument(
        "--strategy-weight-power", type=float, nargs="+", default=[1.0, 2.0],
        help="refit with samples of iteration t weighing (t - delay) ** this; several values, one row each",
    )
    p.add_argument("--strategy-weight-delay", type=int, default=None, help="the delay d (default: the run's own)")
    p.add_argument(
        "--strategy-steps", type=positive_int, default=None,
        help="Adam steps of each refit (default: those of the run's last fit, optimization.final_strategy_steps "
        "or else strategy_steps)",
    )
    p.add_argument("--policy", default="average,average_greedy", help=f"read-offs: {', '.join(STRATEGY_READOUTS)}")
    p.add_argument("--opponents", default="passive_discard,safe_heuristic", help="bots (Lost Cities)")
    p.add_argument("--games", type=positive_int, default=1000, help="games per opponent (seats alternate)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the games (as lcjax evaluate's --seed)")
    p.add_argument("--json", default=None, help="write the rows here")
    args = p.parse_args(argv)
    args.policies = [s.strip() for s in args.policy.split(",") if s.strip()]
    bad = [s for s in args.policies if s not in STRATEGY_READOUTS]
    if not args.policies or bad:
        known = f"; {', '.join(READOUTS)} are lcjax evaluate's" if bad and bad[0] in READOUTS else ""
        p.error(f"--policy {args.policy!r}: each read-off must be one of: {', '.join(STRATEGY_READOUTS)}{known}")
    args.opponents = [s.strip() for s in args.opponents.split(",") if s.strip()]
    bad = [s for s in args.opponents if s not in BOT_NAMES]
    if bad:
        p.error(f"--opponents: unknown bot {bad[0]!r}; choose from: {', '.join(BOT_NAMES)}")
    if any(power < 0 for power in args.strategy_weight_power):
        p.error("--strategy-weight-power: each power must be >= 0")
    if args.strategy_weight_delay is not None and args.strategy_weight_delay < 0:
        p.error("--strategy-weight-delay must be >= 0")
    return args


def main(argv=None) -> dict[str, Any]:
    args = parse_args(argv)
    try:
        solver, state, config = load_run(args.checkpoint, args.step, with_memory=True)
    except RunError as err:
        sys.exit(f"error: {err}")
    # The run's last network took `final_strategy_steps` where it sets them.
    run_steps = solver.config.optimization.last_strategy_steps
    solver = strategy_fit_solver(solver, config, args.strategy_steps or run_steps)
    opt = solver.config.optimization
    delay = opt.strategy_weight_delay if args.strategy_weight_delay is None else args.strategy_weight_delay
    try:  # every weighting's errors before any game is played
        for power in args.strategy_weight_power:
            refit_weights(solver, state, power, delay)
    except ValueError as err:
        sys.exit(f"error: {err}")
    exact = info_of(solver.game).exact_evaluation
    opponents = [] if exact else args.opponents
    print(
        f"{args.checkpoint} at iteration {int(state.iteration)}: {int(state.strategy_memory.size)} strategy samples, "
        f"stored weighing (t - {opt.strategy_weight_delay}) ** {opt.strategy_weight_power:g}; refits of "
        f"{opt.strategy_steps} steps (the run's: {run_steps})",
        flush=True,
    )
    metrics = measure(solver, state, args.policies, opponents, args.games, args.seed)
    rows = [{"weights": "checkpoint", **metrics}]
    print(_row_text("checkpoint's network", metrics, args.policies, opponents, exact), flush=True)
    for power in args.strategy_weight_power:
        t0 = time.perf_counter()
        fitted, fit = refit(solver, state, power, delay)
        metrics = measure(solver, fitted, args.policies, opponents, args.games, args.seed)
        row = {"weights": {"power": power, "delay": delay}, "loss/strategy": fit["loss/strategy"], **metrics}
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(_row_text(f"(t - {delay}) ** {power:g}", metrics, args.policies, opponents, exact), flush=True)
    result = {
        "checkpoint": str(args.checkpoint),
        "iteration": int(state.iteration),
        "games": 0 if exact else args.games,
        "seed": args.seed,
        "strategy_steps": opt.strategy_steps,
        "rows": rows,
    }
    if args.json:
        write_json(result, args.json)
        print(f"wrote {args.json}")
    return result


if __name__ == "__main__":
    main()
