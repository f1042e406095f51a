"""Time one forward pass of the advantage network over batch sizes: the network roofline.

For each network (hidden width x hidden layers, with Lost Cities' observation size as input
and its number of actions as output) and each compute precision, this times the jitted
`apply(params, x)` of `lcjax.cfr.networks` for batch sizes 1, 2, 4, ... up to `--max-batch`.
Parameters are a call argument (as in the traversal, which passes them in every call), the
input is float32 (the observation dtype; a bfloat16 network casts it itself), and every call
is waited for with `block_until_ready`, so a figure includes dispatch and is a true latency.

For each batch size every precision is compiled and warmed up first; then `--repeats`
rounds time the precisions in turn (interleaved, so they share the machine's load drift),
each running the call enough times back to back (each one waited for) to last `--min-time`
seconds; the per-call time of a repeat is its mean. The table shows the best and the median repeat, per
call and per state. The best per-state figure over all batch sizes is the machine's network
roofline for that network and precision: no traversal can evaluate the network on states
faster than that.

    python scripts/profile_forward.py                                  # 512x3 and 1024x6, fp32 and bf16
    python scripts/profile_forward.py --networks 512x3 --precisions float32 --json forward.json
    python scripts/profile_forward.py --networks 64x2 --max-batch 64 --repeats 3

The JSON (`--json FILE`) holds every row and, under `roofline`, one entry per network and
precision: {network, precision, us_per_state, states_per_second, batch}. The machine's load
average is recorded at the start and the end: on a shared machine, compare variants from
the same run rather than across runs.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.env.lost_cities import LostCities

from common import (
    dense_widths,
    forward_flops,
    loadavg,
    machine_facts,
    network_name,
    networks_flag,
    time_interleaved,
    write_result,
)

PRECISIONS = ("float32", "bfloat16")
SHORT = {"float32": "fp32", "bfloat16": "bf16"}


def flops_per_state(spec: NetworkSpec) -> int:
    """Multiply-adds x 2 of one forward pass on one state (the dense layers only)."""
    return forward_flops(dense_widths(spec.in_size, spec.out_size, spec.hidden_size, spec.num_layers))


def batch_sizes(max_batch: int, min_batch: int = 1) -> list[int]:
    """Powers of two from `min_batch` (rounded up to one) through `max_batch`."""
    b = 1 << max(0, math.ceil(math.log2(max(1, min_batch))))
    sizes = []
    while b <= max_batch:
        sizes.append(b)
        b *= 2
    return sizes


def profile_network(
    specs: list[NetworkSpec], params, batches: list[int], repeats: int, min_time: float
) -> dict[str, list[dict]]:
    """One row per batch size for each of `specs`, one architecture in several precisions.

    For each batch size the precisions are compiled, then timed interleaved.

    Args:
      specs: the same architecture, differing in `dtype` (the compute precision).
      params: float32 parameters of that architecture (the same for every precision).

    Returns:
      {precision: rows}.
    """
    rng = np.random.default_rng(0)
    out = {str(jnp.dtype(s.dtype)): [] for s in specs}
    applies = {str(jnp.dtype(s.dtype)): jax.jit(make_apply(network_graphdef(s))) for s in specs}
    flops = flops_per_state(specs[0])
    for b in batches:
        x = jnp.asarray(rng.random((b, specs[0].in_size), dtype=np.float32))
        compile_s = {}
        for p, apply_fn in applies.items():
            t0 = time.perf_counter()
            jax.block_until_ready(apply_fn(params, x))
            compile_s[p] = time.perf_counter() - t0
        times = time_interleaved({p: functools.partial(f, params, x) for p, f in applies.items()},
                                 repeats, min_time)
        for p, t in times.items():
            out[p].append({
                "network": network_name(specs[0].hidden_size, specs[0].num_layers),
                "precision": p,
                "batch": b,
                "us_per_call": 1e6 * t["best"],
                "us_per_call_median": 1e6 * t["median"],
                "us_per_state": 1e6 * t["best"] / b,
                "us_per_state_median": 1e6 * t["median"] / b,
                "states_per_second": b / t["best"],
                "gflops": flops * b / t["best"] / 1e9,
                "calls_per_repeat": t["number"],
                "repeats": repeats,
                "compile_seconds": compile_s[p],
            })
    return out


def roofline(rows: list[dict]) -> dict:
    """The row with the best per-state time, reduced to the roofline entry."""
    best = min(rows, key=lambda r: r["us_per_state"])
    return {k: best[k] for k in ("network", "precision", "us_per_state", "states_per_second", "batch")}


def print_table(rows: list[dict], spec: NetworkSpec) -> None:
    head = rows[0]
    widths = dense_widths(spec.in_size, spec.out_size, spec.hidden_size, spec.num_layers)
    params = sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))
    print(f"\n{head['network']} {head['precision']}  ({params / 1e6:.2f} M params, "
          f"{flops_per_state(spec) / 1e6:.2f} MFLOP/state)")
    print(f"{'batch':>6} {'us/call best':>13} {'us/call med':>12} {'us/state best':>14} "
          f"{'us/state med':>13} {'states/s':>12} {'GFLOP/s':>8}")
    for r in rows:
        print(f"{r['batch']:>6} {r['us_per_call']:>13,.1f} {r['us_per_call_median']:>12,.1f} "
              f"{r['us_per_state']:>14.3f} {r['us_per_state_median']:>13.3f} "
              f"{r['states_per_second']:>12,.0f} {r['gflops']:>8.1f}")
    roof = roofline(rows)
    print(f"roofline: {roof['us_per_state']:.3f} us/state = {roof['states_per_second']:,.0f} states/s "
          f"at batch {roof['batch']}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--networks", default="512x3,1024x6",
                        help="comma-separated HIDDENxLAYERS list (default: 512x3,1024x6)")
    parser.add_argument("--precisions", default="float32,bfloat16",
                        help="comma-separated compute dtypes among float32,bfloat16")
    parser.add_argument("--max-batch", type=int, default=4096, help="largest batch size (powers of two up to it)")
    parser.add_argument("--min-batch", type=int, default=1, help="smallest batch size")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats per batch size")
    parser.add_argument("--min-time", type=float, default=0.02,
                        help="seconds each repeat should last (calls are repeated to fill it)")
    parser.add_argument("--json", dest="json_path", help="write all rows and the rooflines here")
    args = parser.parse_args(argv)

    networks = networks_flag(parser, args.networks)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    for p in precisions:
        if p not in PRECISIONS:
            parser.error(f"unknown precision {p!r}; allowed: {', '.join(PRECISIONS)}")
    batches = batch_sizes(args.max_batch, args.min_batch)
    if not batches or not networks or not precisions:
        parser.error("nothing to profile: check --networks, --precisions, --min-batch/--max-batch")

    game = LostCities()
    device = jax.devices()[0]
    load_start = loadavg()
    print(f"network forward, input {game.observation_size}, output {game.num_actions}; "
          f"jax {jax.__version__} on {device.platform} ({device.device_kind}); "
          f"{os.cpu_count()} CPUs, load average {load_start}")
    rows, rooflines = [], []
    for hidden, layers in networks:
        # Parameters are float32 in every precision: initialize once per architecture.
        params = init_params(NetworkSpec(game.observation_size, game.num_actions, hidden, layers), jax.random.key(0))
        specs = [NetworkSpec(game.observation_size, game.num_actions, hidden, layers, dtype=p) for p in precisions]
        by_precision = profile_network(specs, params, batches, args.repeats, args.min_time)
        for spec in specs:
            config_rows = by_precision[str(jnp.dtype(spec.dtype))]
            print_table(config_rows, spec)
            rows.extend(config_rows)
            rooflines.append(roofline(config_rows))
    load_end = loadavg()

    print("\nnetwork roofline (best per-state time over batch sizes):")
    print(f"{'network':>8} {'precision':>9} {'us/state':>9} {'states/s':>12} {'batch':>6}")
    for r in rooflines:
        print(f"{r['network']:>8} {r['precision']:>9} {r['us_per_state']:>9.3f} "
              f"{r['states_per_second']:>12,.0f} {r['batch']:>6}")
    print(f"load average at the end: {load_end}")

    if args.json_path:
        write_result(args.json_path, {
            "rows": rows,
            "roofline": rooflines,
            "input_size": game.observation_size,
            "output_size": game.num_actions,
            "settings": {"networks": [network_name(*n) for n in networks], "precisions": precisions,
                         "batches": batches, "repeats": args.repeats, "min_time": args.min_time},
            **machine_facts("platform", "device_kind", "jax_version", "cpu_count"),
            "loadavg_start": load_start,
            "loadavg_end": load_end,
        })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
