"""A tiny Lost Cities config and a run directory holding one untrained checkpoint.

Shared by the tests of `lcjax evaluate` and `lcjax play`, which need a checkpoint to load
but no training.
"""

from __future__ import annotations

from pathlib import Path

import jax

from lcjax.checkpoint import Checkpointer
from lcjax.config import config_from_dict, save_config
from lcjax.run import run_solver

TINY_LC = {
    "game": "lost_cities",
    "run": {"name": "untrained", "seed": 0, "max_iterations": 1},
    "network": {"hidden_size": 8, "num_layers": 1},
    "traversal": {
        "traversals_per_player": 4,
        "traversal_batch": 4,
        "external": {"max_strategy": 4},
        "probe": {"max_probes": 1, "max_strategy": 4},
    },
    "memory": {"advantage_capacity": 16, "strategy_capacity": 16},
    "evaluation": {"eval_every": 0},
}


def write_untrained_run(path: Path) -> Path:
    """`path` as a run directory: TINY_LC's config.yaml and a checkpoint of step 0."""
    path.mkdir()
    config = config_from_dict(TINY_LC)
    save_config(config, path / "config.yaml")
    with Checkpointer.open(path / "checkpoints", keep=1, create=True) as ckpt:
        ckpt.save(0, run_solver(config).init(jax.random.key(0)), metadata={"note": "untrained"})
    return path
