"""Deep CFR iterations on 1, 2, 4, ... devices: traversal and training rates per device count.

For each count of `--devices`, a fresh Python process builds the run config's solver on a
mesh of that many devices (`lcjax.cfr.mesh`; one device runs the plain single-device
programs), runs one iteration to compile every phase, then `--repeats` timed iterations,
and reports their medians:

* nodes_per_second: game states the traversal phase visits per second (all devices);
* train_steps_per_second: Adam steps of the training phases per second (every step is
  one minibatch of the config's size, split over the devices);
* iteration_seconds: a whole iteration.

The work per iteration is the same for every count (the config's traversals, steps and
minibatches are totals, split over the devices). On a machine with GPUs (or TPUs) the
counts are real devices, and counts beyond what it has are skipped. On a CPU machine each
count is forced host devices (XLA_FLAGS=--xla_force_host_platform_device_count=N) that
share the same cores, so the figures there show the cost of sharding, not a speed-up.

    python scripts/bench_scaling.py --devices 1,2,4 --json bench_scaling.json
    python scripts/bench_scaling.py --config configs/deep_cfr/leduc.yaml --devices 1,2 --repeats 1

`--json FILE` writes {"rows": [{"devices", "nodes_per_second", "train_steps_per_second",
"iteration_seconds"}, ...]}, one row per count measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from common import add_config_arguments, write_result

ROW_KEYS = ("devices", "nodes_per_second", "train_steps_per_second", "iteration_seconds")


def parse_counts(text: str) -> list[int]:
    """"1,2,4" -> [1, 2, 4]: positive, increasing without repeats."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--devices {text!r}: expected counts like 1,2,4") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"--devices {text!r}: expected distinct positive counts like 1,2,4")
    return sorted(counts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_arguments(parser)
    parser.add_argument("--devices", type=parse_counts, default=[1, 2, 4], help="device counts (1,2,4)")
    parser.add_argument("--repeats", type=int, default=2, help="timed iterations after the compiling one (2)")
    parser.add_argument("--json", dest="json_path", help="write the rows to this JSON file")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # one count, in a child process
    return parser


# ----------------------------------------------------------------------------- worker
def measure(config, devices: int, repeats: int) -> dict:
    """One row: the medians of `repeats` iterations after a compiling one, on `devices`."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from lcjax.cfr.solver import DeepCFR
    from lcjax.config import make_game, solver_config

    mesh = Mesh(np.array(jax.devices()[:devices]), ("data",))
    solver = DeepCFR(make_game(config), solver_config(config), mesh)
    state = solver.init(jax.random.key(config.run.seed))
    state, _ = solver.iteration(state)
    o = solver.config.optimization
    rows = []
    for _ in range(max(1, repeats)):
        state, m = solver.iteration(state)
        steps = 2 * o.advantage_steps + (o.strategy_steps if "loss/strategy" in m else 0)  # strategy: on its cadence
        train_seconds = m["time/advantage_train_seconds"] + m["time/strategy_train_seconds"]
        rows.append((m["traversal/nodes_per_second"], steps / max(train_seconds, 1e-9), m["time/iteration_seconds"]))
    nodes, steps, seconds = (statistics.median(column) for column in zip(*rows))
    return {"devices": devices, "nodes_per_second": nodes, "train_steps_per_second": steps, "iteration_seconds": seconds}


def worker(args) -> int:
    from lcjax import config as lc_config

    config = lc_config.load_config(args.config, args.overrides)
    print("RESULT " + json.dumps(measure(config, args.worker, args.repeats)), flush=True)
    return 0


# ----------------------------------------------------------------------------- parent
def accelerators() -> int:
    """How many non-CPU devices this machine has (0 on a CPU-only machine), asked in a child
    process so that this one never holds a GPU the measured runs need."""
    probe = "import jax; d = jax.devices(); print(0 if d[0].platform == 'cpu' else len(d))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: JAX cannot start: {tail}")
    return int(done.stdout.split()[-1])


def run_count(args, count: int, forced: bool) -> dict:
    """The row of `count` devices, measured in a child process."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if forced:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
        env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={count}"])
        env["JAX_PLATFORMS"] = "cpu"
    argv = [sys.executable, __file__, "--config", args.config, "--repeats", str(args.repeats), "--worker", str(count)]
    argv += [a for item in args.overrides for a in ("--set", item)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: the run on {count} device(s) failed: {tail}")
    return json.loads(lines[-1][len("RESULT "):])


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from lcjax import config as lc_config

    try:
        lc_config.load_config(args.config, args.overrides)
    except (lc_config.ConfigError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.worker:
        return worker(args)
    present = accelerators()
    kind = "accelerator devices" if present else "forced host devices sharing this machine's CPU cores"
    print(f"Deep CFR iterations on {', '.join(map(str, args.devices))} {kind}")
    rows = []
    for count in args.devices:
        if present and count > present:
            print(f"{count} devices: skipped, this machine has {present}")
            continue
        row = run_count(args, count, forced=not present)
        rows.append({key: row[key] for key in ROW_KEYS})
        print(f"{count} devices: {row['nodes_per_second']:,.0f} states/s, "
              f"{row['train_steps_per_second']:,.1f} train steps/s, {row['iteration_seconds']:.2f} s per iteration", flush=True)
    if args.json_path:
        write_result(args.json_path, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
