"""Throughput of the Deep CFR traversals on Kuhn and Leduc poker.

For each game, scheme (external, probe) and batch size B, one jitted call runs B
traversals for player 0 with fixed random advantage networks (two hidden layers of 64 by
default); after compiling, the call is timed `--repeats` times with fresh keys and the
fastest run is kept. Reported: traversal nodes per second (`counters.nodes` / wall seconds:
states visited, terminals and rollouts included) and samples per second (valid advantage
plus strategy samples / wall seconds).

    python scripts/bench_traversal_small.py
    python scripts/bench_traversal_small.py --games leduc --schemes external --batches 4096,16384
    python scripts/bench_traversal_small.py --json bench_traversal_small.json

`--impl FILE` benchmarks a single-file traversal module instead (e.g. `lcjax/cfr/traversal.py`
of a revision before the traversal became a package, `git show REV:lcjax/cfr/traversal.py`)
with the same settings, for before/after comparisons in one process environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import time

import jax
import jax.numpy as jnp

from lcjax.argtypes import nonnegative_int, positive_int
from lcjax.cfr import traversal as default_traversal
from lcjax.cfr.networks import NetworkSpec, make_apply, make_network
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker

from common import machine_facts, write_result

GAMES = {"kuhn": KuhnPoker, "leduc": LeducPoker}

# Buffer sizes as the solver's small-game defaults (`lcjax.cfr.solver`): large enough that
# random networks drop no samples.
EXTERNAL = {
    "kuhn": dict(max_depth=3, max_advantage=4, max_strategy=4),
    "leduc": dict(max_depth=5, max_advantage=12, max_strategy=12),
}
PROBE = {
    "kuhn": dict(branch_probability=0.5, max_probes=2, max_strategy=2, max_steps=4),
    "leduc": dict(branch_probability=0.5, max_probes=4, max_strategy=4, max_steps=10),
}


def load_impl(path: str | None):
    """The traversal module to benchmark: lcjax's, or a copy loaded from `path`."""
    if path is None:
        return default_traversal
    spec = importlib.util.spec_from_file_location("traversal_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_call(tr, game, scheme: str, apply_fn, batch: int, lanes: int):
    if scheme == "external":
        fields = dict(EXTERNAL[game_name(game)])
        if lanes and "lanes" in _field_names(tr.ExternalConfig):
            fields["lanes"] = lanes
        cfg = tr.ExternalConfig(**fields)
        fn = tr.external_sampling
    else:
        fields = dict(PROBE[game_name(game)])
        cfg = tr.ProbeConfig(**fields)
        fn = tr.probe_sampling
    run = jax.jit(fn, static_argnums=(0, 1, 2, 7))
    return lambda params, key: run(game, apply_fn, cfg, params, jnp.int32(0), 1.0, key, batch), cfg


def _field_names(config_class) -> list[str]:
    """Fields of a traversal config class: a settings dataclass, or the NamedTuple of a
    traversal module from before the settings sections (when comparing against one)."""
    if hasattr(config_class, "_fields"):
        return list(config_class._fields)
    return [f.name for f in dataclasses.fields(config_class)]


def game_name(game) -> str:
    return "kuhn" if isinstance(game, KuhnPoker) else "leduc"


def bench(tr, name: str, scheme: str, batch: int, hidden: int, layers: int, repeats: int, lanes: int) -> dict:
    game = GAMES[name]()
    spec = NetworkSpec(game.observation_size, game.num_actions, hidden_size=hidden, num_layers=layers)
    graphdef, p0 = make_network(spec, jax.random.key(1))
    _, p1 = make_network(spec, jax.random.key(2))
    apply_fn = make_apply(graphdef)
    params = (p0, p1)
    call, cfg = make_call(tr, game, scheme, apply_fn, batch, lanes)
    t0 = time.perf_counter()
    jax.block_until_ready(call(params, jax.random.key(0)))
    compile_s = time.perf_counter() - t0
    best, best_result = float("inf"), None
    for r in range(repeats):
        t0 = time.perf_counter()
        result = call(params, jax.random.key(r + 1))
        jax.block_until_ready(result)
        dt = time.perf_counter() - t0
        if dt < best:
            best, best_result = dt, result
    c = {k: int(v) for k, v in best_result.counters._asdict().items()}
    samples = c["advantage_samples"] + c["strategy_samples"]
    return {
        "game": name,
        "scheme": scheme,
        "batch": batch,
        "seconds": best,
        "nodes_per_second": c["nodes"] / best,
        "samples_per_second": samples / best,
        "compile_seconds": compile_s,
        "config": {k: getattr(cfg, k) for k in _field_names(type(cfg))},
        **c,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", default="kuhn,leduc", help="comma-separated: kuhn, leduc")
    parser.add_argument("--schemes", default="external,probe", help="comma-separated: external, probe")
    parser.add_argument("--batches", default="1024,4096,16384", help="comma-separated numbers of traversals per call")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls per setting; the fastest is kept")
    parser.add_argument("--hidden", type=positive_int, default=64, help="hidden layer width of the advantage networks")
    parser.add_argument("--layers", type=nonnegative_int, default=2, help="hidden layers of the advantage networks")
    parser.add_argument("--lanes", type=nonnegative_int, default=0, help="external: ExternalConfig.lanes (0: its default)")
    parser.add_argument("--impl", help="benchmark this single-file traversal module instead (an older revision's lcjax/cfr/traversal.py)")
    parser.add_argument("--json", dest="json_path", help="write the results to this JSON file")
    args = parser.parse_args(argv)

    tr = load_impl(args.impl)
    games = [g for g in args.games.split(",") if g]
    schemes = [s for s in args.schemes.split(",") if s]
    batches = [int(b) for b in args.batches.split(",") if b]
    print(f"Deep CFR traversal throughput, {args.layers}x{args.hidden} networks, jax {jax.__version__} "
          f"on {jax.devices()[0].platform} ({jax.devices()[0].device_kind})")
    print(f"{'game':6} {'scheme':8} {'batch':>6} {'nodes/s':>12} {'samples/s':>11} {'seconds':>8} {'nodes':>9} "
          f"{'dropped':>7} {'trunc':>5} {'compile':>7}")
    rows = []
    for name in games:
        for scheme in schemes:
            for batch in batches:
                row = bench(tr, name, scheme, batch, args.hidden, args.layers, args.repeats, args.lanes)
                rows.append(row)
                print(
                    f"{name:6} {scheme:8} {batch:6d} {row['nodes_per_second']:12,.0f} "
                    f"{row['samples_per_second']:11,.0f} {row['seconds']:8.3f} {row['nodes']:9d} "
                    f"{row['dropped_samples']:7d} {row['truncated']:5d} {row['compile_seconds']:7.1f}",
                    flush=True,
                )
    best = []
    for name in games:
        for scheme in schemes:
            cands = [r for r in rows if r["game"] == name and r["scheme"] == scheme]
            top = max(cands, key=lambda r: r["nodes_per_second"])
            best.append({k: top[k] for k in ("game", "scheme", "batch", "nodes_per_second", "samples_per_second")})
            print(f"best {name} {scheme}: {top['nodes_per_second']:,.0f} nodes/s at batch {top['batch']}")
    if args.json_path:
        meta = {
            "jax": jax.__version__,
            **machine_facts("platform", "machine"),
            "network": f"{args.layers}x{args.hidden}",
            "impl": "lcjax" if args.impl is None else "external file",
        }
        write_result(args.json_path, {"meta": meta, "rows": rows, "best": best})


if __name__ == "__main__":
    main()
