"""The value scheme's value phase on a trained checkpoint, by part.

Every iteration of the `value` scheme first plays `traversal.value.value_games` games of
the current strategies, relabels their items with lambda-returns (V as it stands), inserts
them into V's window and fits V on it (`lcjax.cfr.history_value`). How long the games take
depends on the strategies (a near-uniform player's Lost Cities game has ~330 decisions, a
trained one's ~120), so this script times the parts on a run's checkpoint rather than on
fresh networks:

* value_games: the games and the kept items' histories (`HistoryValue.collect`);
* relabel: V's forward on the kept items and their lambda-returns (`HistoryValue.relabel`;
  0 with `value_lambda: 1`);
* add: the insert into an empty window (`HistoryValue.add`);
* fit: `value_steps` Adam steps on that window (`HistoryValue.train`).

Value settings can be changed with `--set traversal.value.KEY=VALUE` (e.g. `lanes`,
`value_games`, `max_records`, `value_capacity`) as long as V's network stays the same.
Each part is compiled and run once, then timed `--repeats` times; the median is reported.

    python scripts/bench_value_phase.py --checkpoint runs/<run>
    python scripts/bench_value_phase.py --checkpoint runs/<run> --set traversal.value.lanes=2048 --json before.json

`--json FILE` writes the per-part seconds (`value_games_seconds`, `relabel_seconds`,
`add_seconds`, `fit_seconds`, `total_seconds`), the games' states and kept items, the
settings and the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import common


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, metavar="RUN_DIR", help="a run of the value scheme")
    parser.add_argument("--step", type=int, default=None, help="checkpoint iteration (default: the latest)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="traversal.value.KEY=VALUE",
                        help="override a value setting (repeatable)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls of each part (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed of the games")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    bad = [o for o in args.overrides if not o.startswith("traversal.value.")]
    if bad:
        parser.error(f"--set {bad[0]}: only traversal.value.* settings can change here")

    import jax
    import jax.numpy as jnp
    import numpy as np

    from lcjax.cfr.history_value import HistoryValue
    from lcjax.config import ConfigError, apply_overrides, solver_config
    from lcjax.run import RunError, load_run

    try:
        solver, state, config = load_run(args.checkpoint, args.step)
        config = apply_overrides(config, args.overrides)
    except (RunError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if config.traversal.scheme != "value":
        print(f"error: {args.checkpoint} runs traversal.scheme={config.traversal.scheme!r}; this needs 'value'", file=sys.stderr)
        return 2
    v = config.traversal.value
    hv = HistoryValue(solver.game, solver_config(config), solver.spec, solver.regret_apply, jax.jit)
    t = jnp.float32(int(state.iteration) + 1)
    key = jax.random.key(args.seed)

    def timed(call):
        out = jax.block_until_ready(call())  # compiles
        seconds = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = jax.block_until_ready(call())
            seconds.append(time.perf_counter() - t0)
        return out, statistics.median(seconds)

    print(f"{args.checkpoint} at iteration {int(state.iteration)}: {v.value_games} value games, lanes {v.lanes}, "
          f"max_records {v.max_records}, window {v.value_capacity}, {jax.default_backend()}", flush=True)
    data, games_s = timed(lambda: hv.collect(state.advantage_params, t, key))
    items = data.items
    relabel_s = 0.0
    if hv.relabels:
        items, relabel_s = timed(lambda: hv.relabel(state.value_params, data))
    memory, add_s = timed(lambda: hv.add(hv.init_memory(), items, data.valid))
    opt = hv.optimizer.init(state.value_params)
    _, fit_s = timed(lambda: hv.train(key, state.value_params, opt, memory))
    result = {
        "value_games_seconds": games_s, "relabel_seconds": relabel_s, "add_seconds": add_s, "fit_seconds": fit_s,
        "total_seconds": games_s + relabel_s + add_s + fit_s,
        "states": int(data.nodes), "items": int(np.asarray(data.valid).sum()), "item_rows": int(data.valid.shape[0]),
        "checkpoint": str(args.checkpoint), "iteration": int(state.iteration),
        "settings": {"value_games": v.value_games, "lanes": v.lanes, "max_records": v.max_records,
                     "value_capacity": v.value_capacity, "value_steps": v.value_steps, "value_batch": v.value_batch,
                     "overrides": args.overrides, "repeats": args.repeats},
        **common.machine_facts("backend", "device", "cpu_count", "jax_version"),
    }
    for part in ("value_games", "relabel", "add", "fit", "total"):
        print(f"  {part:12s} {result[part + '_seconds']:7.3f} s")
    print(f"  {result['states']:,} states, {result['items']:,} items kept in {result['item_rows']:,} rows")
    if args.json:
        common.write_json(result, args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
