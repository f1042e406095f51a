"""Lost Cities `probe` or `value` traversal throughput beside the network-forward roofline.

The roofline is the best states per second of one advantage-network forward pass on this
machine, measured in the same run over batch sizes: a traversal that evaluates a network at
every state it visits cannot be faster. lcjax's traversal runs one forward per state that
needs a strategy (each lane with its own player's network), so its ceiling is 100% of the
roofline; terminal states and unprobed traverser moves on the main trajectory need none.

The traversal settings (network, branch probability, probes, step bound, lane pool) are the
run config's (`configs/deep_cfr/default.yaml` unless `--config`), with `--set` overrides as
in `lcjax train`; only the number of traversals per call varies, over `--batches`. One probe
call of 256 traversals visits about ten million states, minutes on a CPU, so the default
batches are smaller; on a GPU add 256 (the default config's `traversal_batch` is 1024).

    python scripts/bench_traversal.py                               # default config, batches 4,16,64
    python scripts/bench_traversal.py --batches 16,64,256 --json bench_traversal.json
    python scripts/bench_traversal.py --set network.hidden_size=64 --set network.num_layers=2
    python scripts/bench_traversal.py --scheme value --batches 16,64,256

`--scheme value` times the ESCHER traversal (`traversal.value` settings; a random history
value network stands in for a trained one, which costs the same): it visits the same kind
of main trajectories but reads every selected node's regrets off the value network instead
of running rollouts, so its advantage samples per second are the figure to compare.

Each batch is compiled, then timed `--repeats` times (fresh keys, alternating traverser);
the fastest call is kept. `--json FILE` writes `nodes_per_second`,
`advantage_samples_per_second`, `roofline_states_per_second` and `roofline_fraction` of the
default configuration (the largest batch measured, where the lanes are fullest), and every row.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import jax
import jax.numpy as jnp

from lcjax import config as lc_config
from lcjax.argtypes import positive_int
from lcjax.cfr import traversal as tr
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef, network_spec
from lcjax.cfr.history_value import value_spec

from common import add_config_arguments, config_path_for_json, load_lost_cities_config, machine_facts, write_result


def roofline(spec: NetworkSpec, batches=(64, 256, 1024, 4096), repeats: int = 5) -> dict:
    """Best forward throughput (states/s) of a network over `batches`."""
    apply_fn = jax.jit(make_apply(network_graphdef(spec)))
    params = init_params(spec, jax.random.key(0))
    best = {"states_per_second": 0.0}
    for b in batches:
        x = jax.random.uniform(jax.random.key(1), (b, spec.in_size))
        jax.block_until_ready(apply_fn(params, x))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(apply_fn(params, x))
            times.append(time.perf_counter() - t0)
        rate = b / min(times)
        if rate > best["states_per_second"]:
            best = {"states_per_second": rate, "batch": b, "us_per_state": 1e6 / rate}
    return best


def traversal_call(game, spec: NetworkSpec, scheme: str, cfg, batch: int):
    """`run(traverser, key) -> TraversalResult`: `batch` traversals of `scheme`, jitted."""
    apply_fn = make_apply(network_graphdef(spec))
    params = (init_params(spec, jax.random.key(0)), init_params(spec, jax.random.key(1)))
    if scheme == "probe":
        return jax.jit(lambda trav, key: tr.probe_sampling(game, apply_fn, cfg, params, trav, 1.0, key, batch))
    history_spec = value_spec(game, cfg, spec)
    value_apply = make_apply(network_graphdef(history_spec))
    value_params = init_params(history_spec, jax.random.key(2))
    return jax.jit(lambda trav, key: tr.value_sampling(
        game, apply_fn, cfg, params, trav, 1.0, key, batch, value_apply=value_apply, value_params=value_params))


def bench_scheme(game, spec: NetworkSpec, scheme: str, batch: int, cfg, repeats: int) -> dict:
    """The fastest of `repeats` timed calls of `batch` traversals of `scheme` (after compiling)."""
    run = traversal_call(game, spec, scheme, cfg, batch)
    t0 = time.perf_counter()
    jax.block_until_ready(run(jnp.int32(0), jax.random.key(0)))
    compile_s = time.perf_counter() - t0
    best = None
    for r in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(run(jnp.int32(r % 2), jax.random.key(r + 1)))
        dt = time.perf_counter() - t0
        c = jax.device_get(out.counters)
        nodes, evals = int(c.nodes), int(c.evaluations)
        samples = int(c.advantage_samples) + int(c.strategy_samples)
        row = {"batch": batch, "seconds": dt, "nodes": nodes, "evaluations": evals, "samples": samples,
               "advantage_samples": int(c.advantage_samples), "nodes_per_second": nodes / dt,
               "evaluations_per_second": evals / dt, "samples_per_second": samples / dt,
               "advantage_samples_per_second": int(c.advantage_samples) / dt, "compile_seconds": compile_s}
        if best is None or row["nodes_per_second"] > best["nodes_per_second"]:
            best = row
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_arguments(parser)
    parser.add_argument("--scheme", choices=("probe", "value"), default="probe", help="traversal scheme (probe)")
    parser.add_argument("--batches", default="4,16,64", help="traversals per call, comma-separated (default: 4,16,64)")
    parser.add_argument("--repeats", type=positive_int, default=2, help="timed calls per batch; the fastest is kept (2)")
    parser.add_argument("--json", dest="json_path", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    try:
        batches = [int(x) for x in args.batches.split(",") if x.strip()]
        if not batches or min(batches) <= 0:
            raise ValueError
    except ValueError:
        parser.error(f"--batches: expected positive integers separated by commas, got {args.batches!r}")
    config = load_lost_cities_config(args, "this benchmark measures Lost Cities")
    if config is None:
        return 2
    try:
        sc = lc_config.solver_config(config)
    except lc_config.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    game = lc_config.make_game(config)
    net, cfg = sc.network, getattr(sc.traversal, args.scheme)
    spec = network_spec(net, game.observation_size, game.num_actions, sc.precision)
    detail = (f"branch_probability {cfg.branch_probability}, max_probes {cfg.max_probes}" if args.scheme == "probe"
              else f"sample_probability {cfg.sample_probability}, max_samples {cfg.max_samples}")
    print(f"Lost Cities {args.scheme} traversal, {net.hidden_size} x {net.num_layers} {sc.precision} network, "
          f"{detail}; jax {jax.__version__} on {jax.devices()[0].platform} ({os.cpu_count()} CPUs)")
    roof = roofline(spec)
    print(f"network roofline: {roof['states_per_second']:,.0f} states/s "
          f"({roof['us_per_state']:.2f} us/state at batch {roof['batch']})")
    print(f"{'batch':>6} {'nodes':>10} {'nodes/s':>10} {'evals/s':>10} {'samples/s':>10} {'adv. s/s':>10} "
          f"{'fraction':>9} {'compile s':>10}")
    rows = []
    for b in batches:
        row = bench_scheme(game, spec, args.scheme, b, cfg, args.repeats)
        row["roofline_fraction"] = row["nodes_per_second"] / roof["states_per_second"]
        rows.append(row)
        print(f"{b:>6} {row['nodes']:>10,} {row['nodes_per_second']:>10,.0f} {row['evaluations_per_second']:>10,.0f} "
              f"{row['samples_per_second']:>10,.0f} {row['advantage_samples_per_second']:>10,.0f} "
              f"{row['roofline_fraction']:>9.1%} {row['compile_seconds']:>10.1f}", flush=True)
    head = max(rows, key=lambda r: r["batch"])
    print(f"batch {head['batch']}: {head['nodes_per_second']:,.0f} nodes/s = {head['roofline_fraction']:.1%} of the "
          f"roofline (goal: 50%)")
    if args.json_path:
        write_result(args.json_path, {
            "nodes_per_second": head["nodes_per_second"],
            "samples_per_second": head["samples_per_second"],
            "advantage_samples_per_second": head["advantage_samples_per_second"],
            "scheme": args.scheme,
            "roofline_states_per_second": roof["states_per_second"],
            "roofline_fraction": head["roofline_fraction"],
            "batch": head["batch"],
            "network": {"hidden": net.hidden_size, "layers": net.num_layers, "precision": sc.precision},
            args.scheme: dataclasses.asdict(cfg),
            "config": config_path_for_json(args.config),
            "overrides": args.overrides,
            "rows": rows,
            "roofline": roof,
            **machine_facts("platform", "cpu_count", "jax_version"),
        })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
