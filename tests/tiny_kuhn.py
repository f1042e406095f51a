"""A tiny Kuhn run config for the tests that train one: it compiles in seconds and
exercises every phase of the driver (traversal, both fits, checkpoints, evaluation)."""

from __future__ import annotations

TINY_KUHN = {
    "game": "kuhn",
    "run": {"name": "tiny", "seed": 3, "max_iterations": 4},
    "network": {"hidden_size": 8, "num_layers": 1},
    "traversal": {
        "scheme": "external",
        "traversals_per_player": 32,
        "traversal_batch": 32,
        "external": {"max_depth": 4, "max_advantage": 4, "max_strategy": 4},
    },
    "optimization": {"advantage_steps": 4, "advantage_batch": 16, "strategy_steps": 4, "strategy_batch": 16},
    "memory": {"advantage_capacity": 256, "strategy_capacity": 256},
    "checkpoint": {"save_every": 2, "keep": 3},
    "evaluation": {"eval_every": 2},
}


def tiny_kuhn(**sections: dict) -> dict:
    """TINY_KUHN with each given section's keys replaced (one level deep), a fresh dict."""
    out = {name: dict(value) if isinstance(value, dict) else value for name, value in TINY_KUHN.items()}
    for name, keys in sections.items():
        out[name] = {**out.get(name, {}), **keys}
    return out
