"""float32 vs bfloat16 network compute on this backend: the evidence behind `precision: auto`.

The configuration's `run.precision: auto` resolves to bfloat16 on GPU/TPU backends and to
float32 on CPU (`lcjax.config.resolve_precision`). This script is what justifies that choice
per backend: it measures both precisions side by side, in the same process, on the two
network workloads of Deep CFR with Lost Cities' sizes (input 503, output 22):

(a) forward: the jitted `apply(params, x)` on a large batch (`--forward-batch`, default
    4096), the traversal's workload;
(b) train step: one advantage-network step, i.e. `make_train_fn` (`train_steps`) with Adam
    after gradient clipping (`make_optimizer`) and `advantage_loss`, on minibatches of
    `--train-batch` (default 1024) drawn inside the scan from a filled reservoir; one call
    runs `--train-steps` steps and the time is reported per step.

Both precisions use the same float32 parameters (bfloat16 is only the hidden layers'
compute dtype), the same inputs and the same reservoir. For each workload it prints the
best time of each precision, the ratio bf16/fp32 and the fp32/bf16 speedup, and the max abs
difference between the two precisions' outputs: of the forward pass with the initial
parameters, and of the forward pass after each precision trained from the same start on
the same minibatches.

`recommended_precision` is bfloat16 only if bfloat16 is faster by more than 10% (speedup
fp32/bf16 > 1.10) on every measured workload of every measured network, else float32; the
JSON also records what `auto` resolves to here and whether the two agree.

    python scripts/bench_precision.py                          # 512x3
    python scripts/bench_precision.py --networks 512x3,1024x6 --json precision.json
    python scripts/bench_precision.py --networks 64x2 --forward-batch 256 --train-steps 5 --repeats 2

Everything is compiled first; then the two precisions are timed interleaved, repeat by
repeat, so that they share the machine's load drift. Timings are best-of-`--repeats`
(medians are in the JSON). On a shared machine, compare precisions within one run, and look
at the load average the script prints.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.argtypes import positive_int
from lcjax.cfr.memory import Reservoir, reservoir_init
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.cfr.samples import AdvantageSample
from lcjax.cfr.training import advantage_loss, make_optimizer, make_train_fn
from lcjax.env.lost_cities import LostCities

from common import loadavg, machine_facts, networks_flag, time_interleaved, write_result

PRECISIONS = ("float32", "bfloat16")
SPEEDUP_THRESHOLD = 1.10  # bf16 must be > 10% faster (fp32 time / bf16 time) to be recommended


def random_observations(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """float32[n, size] of 0/1 features (like the game's mostly one-hot observations)."""
    return (rng.random((n, size)) < 0.15).astype(np.float32)


def filled_reservoir(game: LostCities, capacity: int, seed: int = 0) -> Reservoir:
    """A full reservoir (size == seen == capacity) of random AdvantageSamples.

    Offering `capacity` items to an empty reservoir puts the n-th one in slot n
    (`reservoir_add`'s algorithm R), so the buffer is simply the items; they are made with
    NumPy and placed directly, which spares compiling a fill program for a benchmark.
    """
    d, a = game.observation_size, game.num_actions
    rng = np.random.default_rng(seed)
    mask = rng.random((capacity, a)) < 0.4
    mask[:, 0] = True  # at least one legal action per sample
    items = AdvantageSample(
        observation=random_observations(rng, capacity, d),
        mask=mask,
        regret=(5.0 * rng.standard_normal((capacity, a))).astype(np.float32),
        iteration=rng.integers(1, 101, capacity).astype(np.float32),
    )
    example = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), items)
    empty = reservoir_init(capacity, example)
    return empty.replace(
        data=jax.tree.map(lambda buf, x: jnp.asarray(x, buf.dtype), empty.data, items),
        size=jnp.asarray(capacity, jnp.int32),
        seen=jnp.asarray(capacity, jnp.int32),
    )


def _ratio_entry(times: dict, extra: dict | None = None) -> dict:
    fp32, bf16 = times["float32"], times["bfloat16"]
    entry = {
        "float32_seconds": fp32["best"],
        "bfloat16_seconds": bf16["best"],
        "float32_seconds_median": fp32["median"],
        "bfloat16_seconds_median": bf16["median"],
        "ratio_bf16_over_fp32": bf16["best"] / fp32["best"],
        "speedup_fp32_over_bf16": fp32["best"] / bf16["best"],
    }
    entry.update(extra or {})
    return entry


def bench_network(game: LostCities, hidden: int, layers: int, reservoir, args) -> dict:
    """Forward and train-step timings of both precisions for one architecture."""
    d, a = game.observation_size, game.num_actions
    specs = {p: NetworkSpec(d, a, hidden, layers, dtype=p) for p in PRECISIONS}
    # Parameters are float32 in both precisions; share one set so outputs are comparable.
    params = init_params(specs["float32"], jax.random.key(0))
    x = jnp.asarray(random_observations(np.random.default_rng(1), args.forward_batch, d))
    optimizer = make_optimizer(args.learning_rate, args.grad_clip)
    opt_state = optimizer.init(params)
    train_key = jax.random.key(2)

    fwd_out, fwd_compile, fwd_calls = {}, {}, {}
    train_compile, trained_out, losses, train_calls = {}, {}, {}, {}
    for p in PRECISIONS:  # compile (and check) everything first, then time interleaved
        apply_raw = make_apply(network_graphdef(specs[p]))
        apply_fn = jax.jit(apply_raw)
        t0 = time.perf_counter()
        fwd_out[p] = np.asarray(jax.block_until_ready(apply_fn(params, x)))
        fwd_compile[p] = time.perf_counter() - t0
        fwd_calls[p] = functools.partial(apply_fn, params, x)

        train = make_train_fn(apply_fn=apply_raw, optimizer=optimizer, loss_fn=advantage_loss,
                              num_steps=args.train_steps, batch_size=args.train_batch)
        t0 = time.perf_counter()
        new_params, _, metrics = jax.block_until_ready(train(train_key, params, opt_state, reservoir))
        train_compile[p] = time.perf_counter() - t0
        train_calls[p] = functools.partial(train, train_key, params, opt_state, reservoir)
        trained_out[p] = np.asarray(apply_fn(new_params, x))
        losses[p] = {"mean_loss": float(metrics.loss), "final_loss": float(metrics.final_loss),
                     "nonfinite_steps": int(metrics.nonfinite_steps)}

    fwd_times = time_interleaved(fwd_calls, args.repeats, args.min_time, warmup=1)
    train_times = {
        p: {k: (v / args.train_steps if k != "number" else v) for k, v in t.items()}
        for p, t in time_interleaved(train_calls, args.repeats, 0.0, warmup=1).items()
    }

    def max_diff(out):
        return float(np.max(np.abs(out["bfloat16"] - out["float32"])))

    forward = _ratio_entry(fwd_times, {
        "batch": args.forward_batch,
        "float32_us_per_state": 1e6 * fwd_times["float32"]["best"] / args.forward_batch,
        "bfloat16_us_per_state": 1e6 * fwd_times["bfloat16"]["best"] / args.forward_batch,
        "max_abs_diff": max_diff(fwd_out),
        "max_abs_output": float(np.max(np.abs(fwd_out["float32"]))),
        "compile_seconds": fwd_compile,
    })
    train = _ratio_entry(train_times, {
        "batch": args.train_batch,
        "steps_per_call": args.train_steps,
        "max_abs_diff_after_training": max_diff(trained_out),
        "max_abs_output_after_training": float(np.max(np.abs(trained_out["float32"]))),
        "losses": losses,
        "compile_seconds": train_compile,
    })
    return {"network": f"{hidden}x{layers}", "forward": forward, "train_step": train}


def recommend(results: list[dict]) -> str:
    """bfloat16 only if it is > 10% faster on every workload of every network."""
    speedups = [r[w]["speedup_fp32_over_bf16"] for r in results for w in ("forward", "train_step")]
    return "bfloat16" if speedups and min(speedups) > SPEEDUP_THRESHOLD else "float32"


def auto_precision(backend: str) -> str:
    """What the config's `run.precision: auto` resolves to on `backend`."""
    from lcjax.config import Config, resolve_precision

    return resolve_precision(Config(), backend)


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:,.1f} us"


def print_result(r: dict) -> None:
    f, t = r["forward"], r["train_step"]
    print(f"\n{r['network']}")
    print(f"{'workload':<22} {'float32':>14} {'bfloat16':>14} {'bf16/fp32':>10} {'fp32/bf16':>10} {'max |diff|':>11}")
    print(f"{'forward, batch ' + str(f['batch']):<22} {_fmt_time(f['float32_seconds']):>14} "
          f"{_fmt_time(f['bfloat16_seconds']):>14} {f['ratio_bf16_over_fp32']:>10.2f} "
          f"{f['speedup_fp32_over_bf16']:>10.2f} {f['max_abs_diff']:>11.2e}")
    print(f"{'train step, batch ' + str(t['batch']):<22} {_fmt_time(t['float32_seconds']):>14} "
          f"{_fmt_time(t['bfloat16_seconds']):>14} {t['ratio_bf16_over_fp32']:>10.2f} "
          f"{t['speedup_fp32_over_bf16']:>10.2f} {t['max_abs_diff_after_training']:>11.2e}")
    print(f"  forward per state: fp32 {f['float32_us_per_state']:.3f} us, bf16 {f['bfloat16_us_per_state']:.3f} us; "
          f"max |output| {f['max_abs_output']:.3g}")
    print(f"  after {t['steps_per_call']} steps from the same start: max |output| "
          f"{t['max_abs_output_after_training']:.3g}, final loss fp32 {t['losses']['float32']['final_loss']:.4g}, "
          f"bf16 {t['losses']['bfloat16']['final_loss']:.4g}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--networks", default="512x3", help="comma-separated HIDDENxLAYERS list, e.g. 512x3,1024x6")
    parser.add_argument("--forward-batch", type=positive_int, default=4096)
    parser.add_argument("--train-batch", type=positive_int, default=1024, help="minibatch size of a train step")
    parser.add_argument("--train-steps", type=positive_int, default=20, help="steps per timed train call")
    parser.add_argument("--capacity", type=positive_int, default=65536, help="reservoir size (filled before timing)")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed repeats per measurement")
    parser.add_argument("--min-time", type=float, default=0.05,
                        help="seconds each forward repeat should last (calls are repeated to fill it)")
    parser.add_argument("--json", dest="json_path", help="write the numbers and the recommendation here")
    args = parser.parse_args(argv)
    networks = networks_flag(parser, args.networks)

    game = LostCities()
    device = jax.devices()[0]
    backend = jax.default_backend()
    load_start = loadavg()
    print(f"float32 vs bfloat16 compute; jax {jax.__version__} on {device.platform} ({device.device_kind}); "
          f"{os.cpu_count()} CPUs, load average {load_start}")
    reservoir = filled_reservoir(game, args.capacity)
    results = []
    for hidden, layers in networks:
        result = bench_network(game, hidden, layers, reservoir, args)
        print_result(result)
        results.append(result)
    load_end = loadavg()

    recommended = recommend(results)
    auto = auto_precision(backend)
    print(f"\nrecommended precision on {backend}: {recommended} "
          f"(bfloat16 only if > {SPEEDUP_THRESHOLD - 1:.0%} faster on every workload); "
          f"`precision: auto` resolves to {auto} here{'' if auto == recommended else ' (DISAGREES)'}")
    print(f"load average at the end: {load_end}")

    if args.json_path:
        write_result(args.json_path, {
            "results": results,
            "recommended_precision": recommended,
            "auto_precision": auto,
            "auto_agrees": auto == recommended,
            "speedup_threshold": SPEEDUP_THRESHOLD,
            **machine_facts("backend", "device_kind"),
            "settings": {k: v for k, v in vars(args).items() if k != "json_path"},
            "input_size": game.observation_size,
            "output_size": game.num_actions,
            **machine_facts("jax_version", "cpu_count"),
            "loadavg_start": load_start,
            "loadavg_end": load_end,
        })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
