"""Lost Cities `probe` traversal throughput beside the network-forward roofline.

The roofline is the best states per second of one advantage-network forward pass on this
machine (measured in the same run, over batch sizes): a traversal cannot visit states faster
than it can evaluate a network on them. The traversal evaluates the advantage networks of
both players at every live state, so its own ceiling is half the roofline.

    python scripts/bench_traversal.py                       # default 512 x 3 network
    python scripts/bench_traversal.py --batches 64,256 --hidden 64 --layers 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp

from lcjax.cfr import traversal as tr
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.env.lost_cities import LostCities


def roofline(spec: NetworkSpec, batches=(256, 1024, 4096), repeats: int = 5) -> dict:
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


def bench_probe(game, spec: NetworkSpec, batch: int, cfg: tr.ProbeConfig, repeats: int) -> dict:
    apply_fn = make_apply(network_graphdef(spec))
    params = (init_params(spec, jax.random.key(0)), init_params(spec, jax.random.key(1)))
    run = jax.jit(tr.probe_sampling, static_argnums=(0, 1, 2, 7))
    t0 = time.perf_counter()
    jax.block_until_ready(run(game, apply_fn, cfg, params, jnp.int32(0), 1.0, jax.random.key(0), batch))
    compile_s = time.perf_counter() - t0
    best = None
    for r in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(run(game, apply_fn, cfg, params, jnp.int32(r % 2), 1.0, jax.random.key(r + 1), batch))
        dt = time.perf_counter() - t0
        nodes = int(out.counters.nodes)
        samples = int(out.counters.advantage_samples) + int(out.counters.strategy_samples)
        row = {"batch": batch, "seconds": dt, "nodes": nodes, "samples": samples,
               "nodes_per_second": nodes / dt, "samples_per_second": samples / dt, "compile_seconds": compile_s}
        if best is None or row["nodes_per_second"] > best["nodes_per_second"]:
            best = row
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="16,64,256", help="traversal batch sizes")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--precision", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--branch-probability", type=float, default=0.05)
    parser.add_argument("--max-probes", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)

    game = LostCities()
    spec = NetworkSpec(game.observation_size, game.num_actions, args.hidden, args.layers, dtype=args.precision)
    cfg = tr.ProbeConfig(
        branch_probability=args.branch_probability,
        max_probes=args.max_probes,
        max_strategy=2 * game.rules.max_turns // 2 + 2,
        max_steps=2 * game.rules.max_turns + 2,
    )
    print(f"Lost Cities probe traversal, {args.hidden} x {args.layers} {args.precision} network, "
          f"jax {jax.__version__} on {jax.devices()[0].platform}")
    roof = roofline(spec)
    print(f"network roofline: {roof['states_per_second']:,.0f} states/s "
          f"({roof['us_per_state']:.2f} us/state at batch {roof['batch']})")
    print(f"{'batch':>6} {'nodes/s':>12} {'samples/s':>12} {'fraction':>9} {'compile s':>10}")
    rows = []
    for b in [int(x) for x in args.batches.split(",")]:
        row = bench_probe(game, spec, b, cfg, args.repeats)
        row["roofline_fraction"] = row["nodes_per_second"] / roof["states_per_second"]
        rows.append(row)
        print(f"{b:>6} {row['nodes_per_second']:>12,.0f} {row['samples_per_second']:>12,.0f} "
              f"{row['roofline_fraction']:>9.1%} {row['compile_seconds']:>10.1f}", flush=True)
    best = max(rows, key=lambda r: r["nodes_per_second"])
    print(f"best: {best['nodes_per_second']:,.0f} nodes/s at batch {best['batch']}, "
          f"{best['roofline_fraction']:.1%} of the roofline (both players' networks run per state: ceiling 50%)")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({
                "nodes_per_second": best["nodes_per_second"],
                "samples_per_second": best["samples_per_second"],
                "roofline_states_per_second": roof["states_per_second"],
                "roofline_fraction": best["roofline_fraction"],
                "network": {"hidden": args.hidden, "layers": args.layers, "precision": args.precision},
                "rows": rows,
                "roofline": roof,
                "platform": jax.devices()[0].platform,
                "jax_version": jax.__version__,
            }, f, indent=2)
        print(f"wrote {args.json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
