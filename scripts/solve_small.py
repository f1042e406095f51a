"""Deep CFR on Kuhn or Leduc poker for a wall-clock budget, with exact exploitability.

    python scripts/solve_small.py --game kuhn --scheme external --seconds 60 --out runs/kuhn
    python scripts/solve_small.py --game leduc --scheme probe --seconds 600 --out runs/leduc \
        --set traversal.traversals_per_player=2048 --set optimization.learning_rate=3e-3

The solver runs for `--seconds` of *solver* wall-clock time. That clock starts before the
solver is built, so it includes every JIT compilation (the first iteration compiles the
traversal, memory insertion and training programs; this is most of a short run on CPU) and
the host-side bookkeeping of each iteration. The run stops after the iteration past which
another one as long would end beyond the budget, so `seconds` stays within it up to timing
noise; with `strategy_train_every > 1` the last iteration also trains the strategy network.
The machine's other load counts too: note it (e.g. `uptime`) with the results;
`cpu_seconds` in the curve is this process's CPU time on the solver clock, a load-independent
companion to `seconds`.

Exploitability of the average policy (the strategy network) is computed exactly every
`--eval-every` iterations (default: whenever the strategy network was trained, i.e. every
`strategy_train_every` iterations) and after the last one. Measuring runs on a separate
clock: it is excluded from the budget, from `seconds` and from `nodes_per_second`. So is
building the game tree it needs, which happens before the solver clock starts.

Outputs in `--out` (default `runs/<game>_<scheme>_seed<seed>`, so the same command run again
replaces its earlier results):

* `curve.jsonl`: one JSON object per measurement, with `seconds` (solver clock),
  `iteration`, `nodes` (cumulative game states visited by traversals), `nodes_per_second`
  (nodes / seconds, so compilation is included), `exploitability` (chips), plus
  `traversal_nodes_per_second` (nodes / time spent inside traversal calls only),
  `iteration_seconds`, `time_*_seconds` (that iteration's phases; `time_compile_seconds`
  is the first iteration's parallel compilation),
  `cpu_seconds`, `eval_seconds` (the separate clock, cumulative), `wall_seconds` (since
  start, everything included), and the solver's loss and memory metrics of that iteration.
* `policy.json`: the final average policy as {OpenSpiel information-state string:
  probabilities over all action ids}; see `lcjax.cfr.exploitability.export_openspiel_policy`.
* `config.json`: the game, scheme, seed and the full SolverConfig of the run (nested by
  section).

Per-game default settings come from `lcjax.config.small_game_config` (configs/deep_cfr/kuhn.yaml
and leduc.yaml); `--set key=value` overrides any SolverConfig key by its path, e.g.
`network.hidden_size=32` or `traversal.probe.max_probes=4` (the value is read as YAML).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any, Callable

import jax

from lcjax.cfr import exploitability as ex
from lcjax.cfr.solver import DeepCFR, make_solver
from lcjax.cfr.solver_config import SCHEMES
from lcjax.config import parse_override, small_game_config
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker

# One object per game: `make_solver` returns one solver per equal (game, config), and the
# exploitability module caches its game tree per game.
GAMES = {"kuhn": KuhnPoker(), "leduc": LeducPoker()}
# Metrics of the measured iteration copied into its curve row ("/" becomes "_"), when present.
_COPIED = (
    "time/compile_seconds",
    "loss/advantage_0",
    "loss/advantage_1",
    "loss/strategy",
    "memory/advantage_0",
    "memory/advantage_1",
    "memory/strategy",
    "traversal/dropped_samples",
    "traversal/truncated",
    "time/traversal_seconds",
    "time/memory_add_seconds",
    "time/advantage_train_seconds",
    "time/strategy_train_seconds",
    "time/value_data_seconds",
    "time/value_train_seconds",
)


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """{key path: value} from `key=value` strings; `small_game_config` checks them."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, value = parse_override(item)
        if key == "traversal.scheme":
            raise ValueError("--set traversal.scheme: use --scheme")
        out[key] = value
    return out


def solve(
    game_name: str,
    scheme: str,
    seconds: float,
    out_dir: str,
    *,
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
    eval_every: int | None = None,
    max_iterations: int = 0,
    log: Callable[[str], None] | None = print,
) -> dict[str, Any]:
    """Run Deep CFR for `seconds` of solver time and write curve.jsonl, policy.json, config.json.

    Args:
      game_name: "kuhn" or "leduc".
      scheme: "external", "probe" or "value".
      seconds: solver wall-clock budget (compilation included).
      out_dir: output folder (created if missing).
      seed: PRNG seed of the run.
      overrides: {SolverConfig key path: value} replacing the per-game defaults.
      eval_every: measure exploitability every this many iterations (and after the last);
        None: every `strategy_train_every` iterations, i.e. whenever the strategy network
        was trained. Iterations that did not train it are never measured (nothing changed).
      max_iterations: also stop after this many iterations (0 = no limit).
      log: progress printer (None = silent).

    Returns:
      The last curve row, plus `config` (the SolverConfig as a dict).
    """
    if game_name not in GAMES:
        raise ValueError(f"unknown game {game_name!r}: allowed {', '.join(GAMES)}")
    if eval_every is not None and eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    log = log or (lambda _: None)
    wall_start = time.perf_counter()
    game = GAMES[game_name]
    config = small_game_config(game_name, scheme, **(overrides or {}))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({"game": game_name, "scheme": scheme, "seed": seed, "seconds": seconds, **dataclasses.asdict(config)}, f, indent=1)

    # Running totals. Measurement infrastructure first, on its own clock.
    totals = {"solver_seconds": 0.0, "solver_cpu": 0.0, "eval_seconds": 0.0, "nodes": 0, "traversal_seconds": 0.0}
    t0 = time.perf_counter()
    ex.game_tree(game)
    totals["eval_seconds"] += time.perf_counter() - t0

    t0, c0 = time.perf_counter(), time.process_time()
    solver = make_solver(game, config)
    state = jax.block_until_ready(solver.init(jax.random.key(seed)))
    totals["solver_seconds"] += time.perf_counter() - t0
    totals["solver_cpu"] += time.process_time() - c0
    if eval_every is None:
        # Measure whenever the strategy network has been trained.
        eval_every = config.optimization.strategy_train_every

    row: dict[str, Any] = {}
    log(f"{game_name}/{scheme} seed={seed} budget={seconds:g}s config={config}")
    with open(os.path.join(out_dir, "curve.jsonl"), "w") as curve:
        while True:
            state, metrics, stop, duration = _budgeted_iteration(solver, state, totals, seconds, max_iterations)
            iteration = metrics["iteration"]
            # Measure on the cadence, only when the strategy network changed, and at the end.
            if stop or (iteration % eval_every == 0 and "loss/strategy" in metrics):
                row = _measure(game, solver, state, metrics, totals, duration, wall_start)
                curve.write(json.dumps(row) + "\n")
                curve.flush()
                log(
                    f"it {iteration:5d}  t {row['seconds']:7.1f}s  expl {row['exploitability']:.5f}  nodes {row['nodes']:.3g}"
                    f"  ({row['nodes_per_second']:.3g}/s)  it_time {duration:.2f}s"
                    f"  cpu {row['cpu_seconds']:.0f}s  loss_s {metrics.get('loss/strategy', float('nan')):.4f}"
                )
            if stop:
                break

    t0 = time.perf_counter()
    policy = ex.export_openspiel_policy(game, solver.average_policy_fn(state))
    with open(os.path.join(out_dir, "policy.json"), "w") as f:
        json.dump(policy, f)
    totals["eval_seconds"] += time.perf_counter() - t0
    log(
        f"done: {row.get('iteration')} iterations, {row.get('seconds', 0):.1f}s solver, "
        f"exploitability {row.get('exploitability', float('nan')):.5f}, eval {totals['eval_seconds']:.1f}s"
    )
    return {**row, "config": dataclasses.asdict(config)}


def _budgeted_iteration(solver: DeepCFR, state, totals: dict, seconds: float, max_iterations: int):
    """One solver iteration on the solver clock, and whether the run stops after it.

    The run stops when the next iteration, as long as this one, would end past the budget
    (the first iteration compiles, so its duration says nothing about the next), or after
    `max_iterations`. A stopping iteration also trains the strategy network if its cadence
    skipped it, so the run ends with it up to date. Adds to `totals`' solver seconds, CPU
    seconds, nodes and traversal seconds.

    Returns (state, metrics, stop, seconds of this iteration).
    """
    t0, c0 = time.perf_counter(), time.process_time()
    state, metrics = solver.iteration(state)
    iteration = metrics["iteration"]
    elapsed = time.perf_counter() - t0
    after = totals["solver_seconds"] + elapsed
    stop = bool(max_iterations and iteration >= max_iterations) or after >= seconds
    stop = stop or (iteration > 1 and after + elapsed > seconds)
    if stop and "loss/strategy" not in metrics:
        state, extra = solver.train_strategy(state)
        metrics.update(extra)
    jax.block_until_ready(state)
    duration = time.perf_counter() - t0
    totals["solver_seconds"] += duration
    totals["solver_cpu"] += time.process_time() - c0
    totals["nodes"] += int(metrics["traversal/nodes"])
    totals["traversal_seconds"] += metrics["time/traversal_seconds"]
    return state, metrics, stop, duration


def _measure(game, solver: DeepCFR, state, metrics: dict, totals: dict, duration: float, wall_start: float) -> dict:
    """The exploitability of the average policy, timed on the evaluation clock, as a curve
    row with the iteration's `_COPIED` metrics."""
    t0 = time.perf_counter()
    value = ex.exploitability(game, solver.average_policy_fn(state))
    totals["eval_seconds"] += time.perf_counter() - t0
    row = curve_row(
        seconds=totals["solver_seconds"], iteration=metrics["iteration"], nodes=totals["nodes"], exploitability=value,
        traversal_seconds=totals["traversal_seconds"], iteration_seconds=duration,
        cpu_seconds=totals["solver_cpu"], eval_seconds=totals["eval_seconds"], wall_start=wall_start,
    )
    row.update({k.replace("/", "_"): metrics[k] for k in _COPIED if k in metrics})
    return row


def curve_row(
    *,
    seconds: float,
    iteration: int,
    nodes: int,
    exploitability: float,
    traversal_seconds: float,
    iteration_seconds: float,
    cpu_seconds: float,
    eval_seconds: float,
    wall_start: float,
) -> dict[str, Any]:
    """A measurement's row of curve.jsonl (see the module docstring): solver-clock `seconds`,
    cumulative `nodes`, the two node rates, and the clocks; `wall_start` is the
    `time.perf_counter()` at the start of the run."""
    return {
        "seconds": seconds,
        "iteration": iteration,
        "nodes": nodes,
        "nodes_per_second": nodes / max(seconds, 1e-9),
        "exploitability": exploitability,
        "traversal_nodes_per_second": nodes / max(traversal_seconds, 1e-9),
        "iteration_seconds": iteration_seconds,
        "cpu_seconds": cpu_seconds,
        "eval_seconds": eval_seconds,
        "wall_seconds": time.perf_counter() - wall_start,
    }


def default_out_dir(game_name: str, scheme: str, seed: int) -> str:
    """The output folder of a run without `--out`: runs/<game>_<scheme>_seed<seed>."""
    return os.path.join("runs", f"{game_name}_{scheme}_seed{seed}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", choices=sorted(GAMES), required=True)
    parser.add_argument("--scheme", choices=SCHEMES, default="external")
    parser.add_argument("--seconds", type=float, required=True, help="solver wall-clock budget, compilation included")
    parser.add_argument("--out", default=None, help="output folder (default: runs/<game>_<scheme>_seed<seed>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a SolverConfig key, e.g. network.hidden_size=32")
    parser.add_argument(
        "--eval-every", type=int, default=None, help="iterations between measurements (default: strategy_train_every)"
    )
    parser.add_argument("--max-iterations", type=int, default=0, help="also stop after this many (0 = no limit)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        overrides = parse_overrides(args.set)
        small_game_config(args.game, args.scheme, **overrides)  # reject bad values up front
    except ValueError as e:
        parser.error(str(e))
    return solve(
        args.game,
        args.scheme,
        args.seconds,
        args.out or default_out_dir(args.game, args.scheme, args.seed),
        seed=args.seed,
        overrides=overrides,
        eval_every=args.eval_every,
        max_iterations=args.max_iterations,
        log=None if args.quiet else lambda s: print(s, flush=True),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
