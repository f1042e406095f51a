"""What tests/test_distributed.py runs in subprocesses, where JAX starts with forced host
devices or joins other processes (both must be set before JAX initializes its backend).

    python tests/distributed_worker.py devices ROOT      # with 4 forced host devices
    python tests/distributed_worker.py process ID PORT ROOT

Each prints one line "RESULT <json>" that the tests read.
"""

from __future__ import annotations

import hashlib
import json
import sys

# A Leduc solver small enough to compile in seconds, trained enough to lower exploitability.
LEDUC = {
    "network.hidden_size": 32, "network.num_layers": 2,
    "traversal.traversals_per_player": 128, "traversal.traversal_batch": 128,
    "optimization.advantage_steps": 60, "optimization.advantage_batch": 128,
    "optimization.strategy_steps": 60, "optimization.strategy_batch": 128, "optimization.strategy_train_every": 1,
    "memory.advantage_capacity": 8192, "memory.strategy_capacity": 8192,
}

# A run of the driver, smaller still.
RUN = {
    "game": "leduc",
    "run": {"name": "dist", "seed": 1, "max_iterations": 4},
    "network": {"hidden_size": 16, "num_layers": 1},
    "traversal": {"scheme": "external", "traversals_per_player": 32, "traversal_batch": 32,
                  "external": {"max_depth": 5, "max_advantage": 12, "max_strategy": 12}},
    "optimization": {"advantage_steps": 4, "advantage_batch": 32, "strategy_steps": 4, "strategy_batch": 32},
    "memory": {"advantage_capacity": 1024, "strategy_capacity": 1024},
    "checkpoint": {"save_every": 2, "keep": 2},
    "evaluation": {"eval_every": 2},
}


def fingerprint(tree) -> str:
    """sha256 of every leaf's bytes (PRNG keys as their key data)."""
    import jax
    import numpy as np

    h = hashlib.sha256()
    for x in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        h.update(np.asarray(x).tobytes())
    return h.hexdigest()


def _solver_run(devices: int, iterations: int = 8) -> dict:
    """A Leduc solver on `devices` devices: exploitability, sample counts and shard sizes."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    from lcjax.config import small_game_config
    from lcjax.cfr.solver import DeepCFR
    from lcjax.env.registry import make_game
    from lcjax.evaluate import evaluate_exploitability

    solver = DeepCFR(make_game("leduc"), small_game_config("leduc", "external", **LEDUC), Mesh(np.array(jax.devices()[:devices]), ("data",)))
    state = solver.init(jax.random.key(0))
    offered = {"advantage": 0, "strategy": 0}
    for _ in range(iterations):
        state, metrics = solver.iteration(state)
        offered["advantage"] += metrics["traversal/advantage_samples"]
        offered["strategy"] += metrics["traversal/strategy_samples"]
    memories = {"advantage_0": state.advantage_memory[0], "advantage_1": state.advantage_memory[1], "strategy": state.strategy_memory}
    return {
        "exploitability": evaluate_exploitability(solver, state)["eval/exploitability"],
        "offered": offered,
        "seen": {k: np.atleast_1d(np.asarray(m.seen)).tolist() for k, m in memories.items()},
        "size": {k: np.atleast_1d(np.asarray(m.size)).tolist() for k, m in memories.items()},
        "capacity": {k: int(jax.tree.leaves(m.data)[0].shape[0]) for k, m in memories.items()},
        "memory_metrics": {k: metrics[f"memory/{k}"] for k in memories},
        "params_sharding": str(jax.tree.leaves(state.strategy_params)[0].sharding.spec) if devices > 1 else "",
    }


def _run_checks(root: str) -> dict:
    """The run driver on 4 devices: straight vs stopped and resumed, and refusals."""
    from pathlib import Path

    from lcjax.config import config_from_dict
    from lcjax.run import RunError, read_metrics, train

    def strip(rows):
        return [{k: v for k, v in r.items() if not k.startswith("time/") and "per_second" not in k} for r in rows]

    four = config_from_dict({**RUN, "distributed": {"devices": 4}})
    straight = train(four, run_dir=Path(root) / "straight")
    train(four, run_dir=Path(root) / "resumed", max_iterations=2)
    resumed = train(None, resume=Path(root) / "resumed")
    out = {
        "straight": fingerprint(straight.state),
        "resumed": fingerprint(resumed.state),
        "same_metrics": strip(read_metrics(straight.run_dir)) == strip(read_metrics(resumed.run_dir)),
        "rows": len(read_metrics(straight.run_dir)),
    }
    try:
        train(config_from_dict({**RUN, "distributed": {"devices": 2}}), resume=Path(root) / "resumed", max_iterations=6)
        out["two_devices"] = "resumed"
    except RunError as err:
        out["two_devices"] = str(err)
    one = train(config_from_dict({**RUN, "distributed": {"devices": 1}}), run_dir=Path(root) / "one")
    out["one_device"] = fingerprint(one.state)
    out["one_device_is_plain"] = one.solver.mesh is None
    return out


def _arena_split() -> bool:
    """Whether a match with its games split over the 4 devices plays exactly the same games."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from lcjax.env.arena import play_games
    from lcjax.env.bots import make_bot
    from lcjax.env.lost_cities import LostCities, Rules

    game = LostCities(Rules(n_colors=2, n_ranks=3, hand_size=3, max_turns=30))
    bot = make_bot("random", game)
    split = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
    whole = play_games(game, bot, bot, jax.random.key(0), 16)
    parts = play_games(game, bot, bot, jax.random.key(0), 16, sharding=split)
    return all(np.array_equal(x, y) for x, y in zip(whole, parts))


def devices(root: str) -> dict:
    import jax

    from lcjax.cfr.solver import DeepCFR
    from lcjax.config import config_from_dict, make_game, solver_config

    assert len(jax.devices()) == 4, jax.devices()
    result = {"one": _solver_run(1), "four": _solver_run(4), "run": _run_checks(root), "arena_split": _arena_split()}
    # The plain single-device solver of the same config and seed, outside the run driver.
    config = config_from_dict({**RUN, "distributed": {"devices": 1}})
    solver = DeepCFR(make_game(config), solver_config(config))
    state = solver.init(jax.random.key(config.run.seed))
    for _ in range(config.run.max_iterations):
        state, _ = solver.iteration(state)
    result["plain"] = fingerprint(state)
    return result


def process(pid: int, port: int, root: str) -> dict:
    from lcjax.config import config_from_dict
    from lcjax.run import train

    settings = {"coordinator_address": f"127.0.0.1:{port}", "num_processes": 2, "process_id": pid, "initialization_timeout": 120}
    config = config_from_dict({**RUN, "run": {**RUN["run"], "max_iterations": 2}, "distributed": settings})
    first = train(config, runs_root=root, name="two")
    # Both processes continue the run from its checkpoint, each with its own process id.
    result = train(config, resume=first.run_dir, max_iterations=3)
    return {
        "run_dir": str(result.run_dir),
        "first_iteration": first.iteration,
        "iteration": result.iteration,
        "params": fingerprint((result.state.advantage_params, result.state.strategy_params)),
        "exploitability": result.last_eval.get("eval/exploitability"),
    }


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "devices":
        out = devices(sys.argv[2])
    else:
        out = process(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    print("RESULT " + json.dumps(out), flush=True)
