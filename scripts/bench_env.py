"""Random-play throughput of the Lost Cities environment under jit(vmap(...)).

Each measured call advances B games by T steps inside one jitted `lax.scan`; every step
computes the legal mask, picks a uniformly random legal action and applies it. Games start
fresh and T is below the shortest possible game, so every counted step is a real move.

    python scripts/bench_env.py                      # table over batch sizes 1..16384
    python scripts/bench_env.py --json bench_env.json --colors 6
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from lcjax.argtypes import positive_int
from lcjax.env.lost_cities import LostCities, Rules

from common import machine_facts, write_result


def make_runner(game: LostCities, steps: int):
    """A jitted function advancing a batch of games `steps` random moves; returns live steps."""

    def pick(u, mask):
        # One uniform per game: the k-th legal action with k = floor(u * number legal).
        counts = jnp.cumsum(mask, axis=-1)
        k = jnp.floor(u * counts[:, -1]).astype(counts.dtype)
        return jnp.argmax(counts > k[:, None], axis=-1).astype(jnp.int32)

    def run(states, key):
        def body(s, k):
            mask = jax.vmap(game.legal_action_mask)(s)
            action = pick(jax.random.uniform(k, s.turn.shape), mask)
            return jax.vmap(game.step)(s, action), jnp.sum(~s.terminated)

        states, live = jax.lax.scan(body, states, jax.random.split(key, steps))
        return states, live.sum()

    return jax.jit(run)


def bench(game: LostCities, batch: int, steps: int, repeats: int, seed: int = 0) -> dict:
    run = make_runner(game, steps)
    states = jax.jit(jax.vmap(game.init))(jax.random.split(jax.random.key(seed), batch))
    jax.block_until_ready(run(states, jax.random.key(seed)))  # compile
    times, live = [], 0
    for r in range(repeats):
        t0 = time.perf_counter()
        _, n = run(states, jax.random.key(seed + r + 1))
        n = int(n)  # blocks
        times.append(time.perf_counter() - t0)
        live = n
    best = min(times)
    return {"batch": batch, "steps_per_call": steps, "live_steps": live, "seconds": best, "steps_per_second": live / best}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,4,16,64,256,1024,4096,16384", help="comma-separated batch sizes")
    parser.add_argument("--steps", type=positive_int, default=64, help="steps per jitted call (below the shortest game)")
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed calls per batch size; the best is kept")
    parser.add_argument("--colors", type=int, default=5, help="n_colors (6 = purple variant)")
    parser.add_argument("--json", dest="json_path", help="write the results to this JSON file")
    args = parser.parse_args(argv)

    game = LostCities(Rules(n_colors=args.colors))
    min_game = 2 * (game.rules.deck_size - 2 * game.rules.hand_size)
    if args.steps > min_game:
        parser.error(f"--steps must be at most {min_game} (the shortest game) so every step is a real move")
    batches = [int(b) for b in args.batches.split(",")]
    print(f"Lost Cities random play, {args.colors} colors, jax {jax.__version__} on {jax.devices()[0].platform}")
    print(f"{'batch':>7} {'steps/s':>14} {'us/step':>9}")
    rows = []
    for b in batches:
        row = bench(game, b, args.steps, args.repeats)
        rows.append(row)
        print(f"{b:>7} {row['steps_per_second']:>14,.0f} {1e6 / row['steps_per_second']:>9.3f}", flush=True)
    best = max(rows, key=lambda r: r["steps_per_second"])
    print(f"best: {best['steps_per_second']:,.0f} steps/s at batch {best['batch']}")
    if args.json_path:
        write_result(args.json_path, {
            "best_steps_per_second": best["steps_per_second"],
            "best_batch": best["batch"],
            "rows": rows,
            "n_colors": args.colors,
            **machine_facts("platform", "device", "cpu_count", "machine", "jax_version"),
        })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
