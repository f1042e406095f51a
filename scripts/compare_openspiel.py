"""lcjax against OpenSpiel's Deep CFR on Leduc poker: nodes/s and exploitability over time.

    python scripts/compare_openspiel.py --seconds 600 --json compare_openspiel.json
    python scripts/compare_openspiel.py --seconds 120 --implementations lcjax,openspiel_jax \
        --hidden 64 --layers 2 --out runs/compare

Runs each implementation in turn, in this process, for `--seconds` of *solver* wall-clock
time each, on Leduc poker with the same network size (`--hidden` units x `--layers` hidden
layers for every network of every implementation; default lcjax's Leduc setting, 128 x 3):

* `lcjax`: `lcjax.cfr.solver.DeepCFR` with `small_game_config("leduc", "external")`, the
  network overridden, through `scripts/solve_small.py` (`--set key=value` overrides any
  other SolverConfig key, e.g. `--set optimization.learning_rate=1e-3`).
* `openspiel_jax`: `open_spiel.python.jax.deep_cfr.DeepCFRSolver` (flax.nnx + optax).
* `openspiel_torch`: `open_spiel.python.pytorch.deep_cfr.DeepCFRSolver`.

OpenSpiel's settings are those of its Deep CFR example (`examples/deep_cfr_{jax,pytorch}.py`):
375 traversals per player per iteration, learning rate 1e-3, batch size 256 for both
networks, memory capacity 1e5, 375 advantage and 2500 policy training steps, advantage
networks re-initialized every iteration; `--openspiel-*` flags change them. OpenSpiel's JAX
solver trains its policy network for `advantage_network_train_steps` steps (its own code
does so); the PyTorch one for `policy_network_train_steps`. PyTorch runs with
`--torch-threads` threads (default 1: on a small, shared machine OpenMP's spin-waiting made
a 2-thread Adam step 20x slower than a 1-thread one, and the networks are too small to gain
from threads).

Clocks. Each implementation's clock starts before its solver is built, so JIT compilation
and warm-up count against every budget alike. OpenSpiel's `solve()` runs all iterations at
once, so its loop is driven here with the solver's own methods, as `solve()` does (traverse
`num_traversals` times for each player, re-initialize and train that player's advantage
network, next iteration), stopping like lcjax: after the iteration past which another one
as long (plus the last policy-network training) would end beyond the budget; lcjax exempts
its first iteration, which is mostly compilation, OpenSpiel's is not. The policy
(strategy) network is trained once at the end on the solver clock, as in `solve()`.
Exploitability is measured on a separate clock, excluded from the budget, from `seconds` and
from nodes/s, for all implementations. At an intermediate OpenSpiel measurement the policy
network is trained, measured and re-initialized (as `solve()` does with
`print_nash_convs`), all on the measurement clock, and the random-number state is restored
afterwards, so measuring does not change the run. lcjax measures whenever its strategy
network was trained (`solve_small`'s cadence, or every `--lcjax-eval-every` iterations);
OpenSpiel every `--measure-every` seconds of solver time and after its last iteration.
The machine's other load counts too: the JSON records `os.getloadavg()` before and after.

Nodes are game states visited by traversals, counted the same way for all: decision and
terminal states (lcjax's `traversal/nodes`). For OpenSpiel they are the calls of the
solver's recursive `_traverse_game_tree` (each visits one state) at non-chance states; the
calls at chance states are reported separately (`chance_calls`). `nodes_per_traversal`
checks that the counts are comparable. nodes/s = nodes / solver seconds (compilation and
training included); `traversal_nodes_per_second` = nodes / time inside traversals only.

Exploitability is in chips (big blinds = antes), the mean of the two best-response values:
`lcjax.cfr.exploitability` for lcjax, `open_spiel.python.algorithms.exploitability` for
OpenSpiel (its policy tabulated in one batched forward of the policy network, equal to the
solver's `action_probabilities`, renormalized over the legal actions as lcjax does; the
PyTorch network's softmax leaves some mass on illegal actions). Both are evaluated on the
uniform policy first (`settings.uniform_exploitability`) to show that the units agree.

Outputs: a side-by-side table (iterations, nodes, nodes/s, traversal nodes/s,
exploitability at a quarter, half and three quarters of the budget, i.e. the latest
measurement at or before that time, and at the end) and the ratios lcjax / OpenSpiel of
nodes/s and final exploitability. `--json FILE` writes {"settings", "implementations":
{name: {"available", "ran", "reason", "curve": [{"seconds", "iteration", "nodes",
"nodes_per_second", "exploitability", ...}], "nodes_per_second", "final_exploitability",
...}}, "ratios": {"nodes_per_second", "traversal_nodes_per_second", "exploitability"},
"headline"}. `--out DIR` keeps each implementation's files (lcjax: solve_small's
curve.jsonl, policy.json, config.json; OpenSpiel: curve.jsonl) in DIR/<implementation>/.

OpenSpiel and PyTorch are optional (`pip install -e ".[compare]"`): an implementation whose
packages are missing is skipped with the reason printed and recorded.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import sys
import tempfile
import time
from typing import Any, Callable

import jax
import numpy as np

from lcjax.argtypes import nonnegative_int, positive_float, positive_int
from lcjax.cfr import exploitability as ex
from lcjax.config import small_game_config

import solve_small
from common import loadavg

IMPLEMENTATIONS = ("lcjax", "openspiel_jax", "openspiel_torch")
OPENSPIEL = ("openspiel_jax", "openspiel_torch")
INSTALL_HINT = 'pip install -e ".[compare]"'
GAME = "leduc"
SCHEME = "external"
OPENSPIEL_GAME = "leduc_poker"
# OpenSpiel's Deep CFR example settings (examples/deep_cfr_jax.py and deep_cfr_pytorch.py).
OPENSPIEL_DEFAULTS = dict(
    num_traversals=375,
    learning_rate=1e-3,
    batch_size_advantage=256,
    batch_size_strategy=256,
    memory_capacity=100_000,
    policy_network_train_steps=2500,
    advantage_network_train_steps=375,
    reinitialize_advantage_networks=True,
)
# Fractions of the budget at which the table shows exploitability.
TABLE_FRACTIONS = (0.25, 0.5, 0.75)


def unavailable_reason(name: str) -> str | None:
    """Why implementation `name` cannot run here (a missing package), or None if it can."""
    if name == "lcjax":
        return None
    if importlib.util.find_spec("pyspiel") is None or importlib.util.find_spec("open_spiel") is None:
        return f"open_spiel is not installed (install it with: {INSTALL_HINT})"
    if name == "openspiel_torch" and importlib.util.find_spec("torch") is None:
        return f"torch is not installed (install it with: {INSTALL_HINT})"
    module = _MODULES[name]
    try:
        importlib.import_module(module)
    except ImportError as e:  # e.g. dm-tree, which OpenSpiel's PyTorch Deep CFR imports
        return f"cannot import {module}: {e} (install the extra: {INSTALL_HINT})"
    return None


_MODULES = {
    "openspiel_jax": "open_spiel.python.jax.deep_cfr",
    "openspiel_torch": "open_spiel.python.pytorch.deep_cfr",
}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(), "jax": jax.__version__}
    for dist in ("flax", "optax", "open_spiel", "torch"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


# ----------------------------------------------------------------------------------------
# lcjax


def run_lcjax(
    seconds: float,
    out_dir: str,
    *,
    hidden: int,
    layers: int,
    seed: int,
    overrides: dict[str, Any],
    eval_every: int | None,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """lcjax's Deep CFR on Leduc via `solve_small.solve`; the result entry for the JSON."""
    overrides = {**overrides, "network.hidden_size": hidden, "network.num_layers": layers}
    last = solve_small.solve(
        GAME, SCHEME, seconds, out_dir, seed=seed, overrides=overrides, eval_every=eval_every,
        log=lambda s: log(f"[lcjax] {s}"),
    )
    with open(os.path.join(out_dir, "curve.jsonl")) as f:
        curve = [json.loads(line) for line in f if line.strip()]
    config = last["config"]
    # traversals_per_player is rounded up to whole chunks of traversal_batch.
    traversal = config["traversal"]
    chunks = -(-traversal["traversals_per_player"] // traversal["traversal_batch"])
    traversals = curve[-1]["iteration"] * 2 * chunks * traversal["traversal_batch"]
    return {
        "curve": curve,
        "settings": {"game": GAME, "scheme": SCHEME, "seed": seed, "solver_config": config},
        "traversals": traversals,
    }


# ----------------------------------------------------------------------------------------
# OpenSpiel


def make_openspiel_solver(name: str, game, *, hidden: int, layers: int, seed: int, params: dict[str, Any]):
    """OpenSpiel's DeepCFRSolver of implementation `name` with `layers` x `hidden` networks."""
    module = importlib.import_module(_MODULES[name])
    net = (hidden,) * layers
    return module.DeepCFRSolver(
        game, policy_network_layers=net, advantage_network_layers=net,
        num_iterations=1,  # unused: the loop is driven by run_openspiel
        seed=seed, **params,
    )


def count_traversal_calls(solver) -> dict[str, int]:
    """Wrap the solver's recursive `_traverse_game_tree` to count the states it visits.

    The recursion calls `self._traverse_game_tree`, which finds the instance attribute first,
    so every level is counted. Returns the live counters {"nodes", "chance_calls"}.
    """
    counts = {"nodes": 0, "chance_calls": 0}
    traverse = solver._traverse_game_tree

    def counted(state, player):
        if state.is_chance_node():
            counts["chance_calls"] += 1
        else:
            counts["nodes"] += 1
        return traverse(state, player)

    solver._traverse_game_tree = counted
    return counts


def openspiel_policy_inputs(game):
    """OpenSpiel's TabularPolicy over every information state, with the network inputs.

    Returns (tabular_policy, info_state_tensors f32[I, D], legal masks bool[I, A]).
    """
    from open_spiel.python import policy as os_policy

    table = os_policy.TabularPolicy(game)
    obs = np.asarray([s.information_state_tensor() for s in table.states], dtype=np.float32)
    return table, obs, np.asarray(table.legal_actions_mask, dtype=bool)


def openspiel_policy_table(name: str, solver, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The solver's `action_probabilities` for every row of `obs`, in one batched forward.

    OpenSpiel's method runs the network once per state (un-jitted, so about 20 ms a state
    for the JAX solver); this computes the same numbers for all states at once: JAX, a
    softmax of the logits with illegal actions masked out; PyTorch, the network's own
    softmax restricted to the legal actions. Rows are renormalized over the legal actions
    (a no-op for JAX), as lcjax's exploitability does.
    """
    if name == "openspiel_jax":
        import jax.numpy as jnp

        logits = solver._policy_network(jnp.asarray(obs))
        logits = jnp.where(jnp.asarray(mask), logits, jnp.finfo(jnp.float32).min)
        probs = np.asarray(jax.nn.softmax(logits, axis=-1), dtype=np.float64)
    else:
        import torch

        with torch.inference_mode():
            probs = solver._policy_network(torch.from_numpy(obs)).cpu().numpy().astype(np.float64)
    probs = np.where(mask, probs, 0.0)
    total = probs.sum(axis=1, keepdims=True)
    uniform = mask / mask.sum(axis=1, keepdims=True)
    return np.where(total > 0, probs / np.where(total > 0, total, 1.0), uniform)


def _rng_state(name: str, solver) -> tuple:
    """Every random-number state the solver's methods draw from (to restore after measuring)."""
    torch_state = None
    if name == "openspiel_torch":
        import torch

        torch_state = torch.get_rng_state()
    return np.random.get_state(), getattr(solver, "_rngkey", None), torch_state


def _set_rng_state(name: str, solver, saved: tuple) -> None:
    np_state, key, torch_state = saved
    np.random.set_state(np_state)
    if key is not None:
        solver._rngkey = key
    if torch_state is not None:
        import torch

        torch.set_rng_state(torch_state)


def _loss(value) -> float | None:
    return None if value is None else float(value)  # float() also waits for JAX's result


def run_openspiel(
    name: str,
    seconds: float,
    out_dir: str | None,
    *,
    hidden: int,
    layers: int,
    seed: int,
    params: dict[str, Any],
    measure_every: float,
    torch_threads: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """OpenSpiel's Deep CFR `name` on Leduc for `seconds` of solver time; the JSON entry."""
    import pyspiel

    wall_start = time.perf_counter()
    game = pyspiel.load_game(OPENSPIEL_GAME)
    # Running totals. Measurement infrastructure first, on its own clock.
    totals = {"clock": 0.0, "cpu": 0.0, "eval_seconds": 0.0, "traversal_seconds": 0.0}
    t0 = time.perf_counter()
    policy_inputs = openspiel_policy_inputs(game)
    totals["eval_seconds"] += time.perf_counter() - t0

    _seed_openspiel(name, seed, torch_threads)
    t0, c0 = time.perf_counter(), time.process_time()
    solver = make_openspiel_solver(name, game, hidden=hidden, layers=layers, seed=seed, params=params)
    counts = count_traversal_calls(solver)
    totals["clock"] += time.perf_counter() - t0
    totals["cpu"] += time.process_time() - c0

    log(f"[{name}] leduc budget={seconds:g}s network={layers}x{hidden} {params}")
    curve: list[dict[str, Any]] = []
    policy_train_estimate = 0.0
    next_measure = measure_every
    iteration = 0
    while True:
        losses, elapsed, stop, policy_loss = _openspiel_iteration(solver, game, totals, seconds, policy_train_estimate)
        iteration += 1
        if stop or totals["clock"] >= next_measure:
            t0 = time.perf_counter()
            # At the end the policy network has just been trained, as solve() ends; between,
            # it is trained for the measurement only.
            value, loss, train_seconds = openspiel_exploitability(name, solver, game, policy_inputs, train=not stop)
            if not stop:
                policy_loss, policy_train_estimate = loss, train_seconds
            totals["eval_seconds"] += time.perf_counter() - t0
            while next_measure <= totals["clock"]:
                next_measure += measure_every
            row = solve_small.curve_row(
                seconds=totals["clock"], iteration=iteration, nodes=counts["nodes"], exploitability=value,
                traversal_seconds=totals["traversal_seconds"], iteration_seconds=elapsed, cpu_seconds=totals["cpu"],
                eval_seconds=totals["eval_seconds"], wall_start=wall_start,
            )
            row.update(chance_calls=counts["chance_calls"], loss_advantage_0=losses[0], loss_advantage_1=losses[1],
                       loss_policy=policy_loss)
            curve.append(row)
            log(
                f"[{name}] it {iteration:4d}  t {row['seconds']:7.1f}s  expl {value:.5f}  nodes {row['nodes']:.3g}"
                f"  ({row['nodes_per_second']:.3g}/s)  it_time {elapsed:.2f}s"
            )
        if stop:
            break

    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "curve.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in curve)
    return {
        "curve": curve,
        "settings": _openspiel_settings(name, hidden=hidden, layers=layers, seed=seed, params=params,
                                        measure_every=measure_every),
        "traversals": iteration * game.num_players() * solver._num_traversals,
    }


def _seed_openspiel(name: str, seed: int, torch_threads: int) -> None:
    """Seed the generators OpenSpiel's solvers draw from (and set PyTorch's threads)."""
    if name == "openspiel_torch":
        import torch

        if torch_threads > 0:
            torch.set_num_threads(torch_threads)
        torch.manual_seed(seed)
    # Both solvers sample chance outcomes and opponent actions with numpy's global generator.
    np.random.seed(seed)


def _openspiel_iteration(solver, game, totals: dict, seconds: float, policy_train_estimate: float):
    """One OpenSpiel iteration, driven with the solver's own methods as `solve()` does, on the
    solver clock; and whether the run stops after it (then the policy network is trained,
    as `solve()` ends). Adds to `totals`' clock, CPU and traversal seconds.

    Returns (the players' advantage losses, this iteration's seconds before any policy
    training, stop, the policy loss or None).
    """
    t0, c0 = time.perf_counter(), time.process_time()
    losses = []
    for player in range(game.num_players()):
        t1 = time.perf_counter()
        for _ in range(solver._num_traversals):
            solver._traverse_game_tree(solver._root_node, player)
        totals["traversal_seconds"] += time.perf_counter() - t1
        if solver._reinitialize_advantage_networks:
            solver._reinitialize_advantage_network(player)
        losses.append(_loss(solver._learn_advantage_network(player)))
    solver._iteration += 1
    elapsed = time.perf_counter() - t0
    # solve_small's stopping rule plus the policy training that ends the run, applied from
    # the first iteration on: unlike lcjax's, OpenSpiel's first iteration is mostly
    # steady-state work (its per-call jits compile in seconds), so it predicts the next.
    after = totals["clock"] + elapsed
    stop = after + elapsed + policy_train_estimate > seconds
    policy_loss = _loss(solver._learn_strategy_network()) if stop else None
    totals["clock"] += time.perf_counter() - t0
    totals["cpu"] += time.process_time() - c0
    return losses, elapsed, stop, policy_loss


def openspiel_exploitability(name: str, solver, game, policy_inputs: tuple, *, train: bool):
    """Exploitability of the solver's policy network, from `openspiel_policy_inputs`.

    With `train` (a measurement before the end), the policy network is first trained on the
    data so far and afterwards re-initialized, as `solve(print_nash_convs)` does, and the
    random-number state is put back, so that the run continues unchanged.

    Returns (exploitability, policy loss, policy-training seconds); the last two are None
    without `train`.
    """
    from open_spiel.python.algorithms import exploitability as os_exploitability

    table, obs, mask = policy_inputs
    loss = train_seconds = None
    if train:
        saved = _rng_state(name, solver)
        t0 = time.perf_counter()
        loss = _loss(solver._learn_strategy_network())
        train_seconds = time.perf_counter() - t0
    table.action_probability_array[:] = openspiel_policy_table(name, solver, obs, mask)
    value = float(os_exploitability.exploitability(game, table))
    if train:
        solver._reinitialize_policy_network()
        _set_rng_state(name, solver, saved)
    if hasattr(solver, "_cached_policy"):
        solver._cached_policy.clear()  # JAX: action_probabilities caches network outputs
    return value, loss, train_seconds


def _openspiel_settings(name: str, *, hidden: int, layers: int, seed: int, params: dict[str, Any],
                        measure_every: float) -> dict[str, Any]:
    """The settings entry of an OpenSpiel run."""
    settings: dict[str, Any] = {
        "game": OPENSPIEL_GAME,
        "seed": seed,
        "policy_network_layers": [hidden] * layers,
        "advantage_network_layers": [hidden] * layers,
        **params,
        # What the JAX solver's _learn_strategy_network actually runs (see the docstring).
        "policy_train_steps_used": params["advantage_network_train_steps"]
        if name == "openspiel_jax"
        else params["policy_network_train_steps"],
        "measure_every_seconds": measure_every,
    }
    if name == "openspiel_torch":
        import torch

        settings["torch_threads"] = torch.get_num_threads()
    return settings


# ----------------------------------------------------------------------------------------
# Summary, table, ratios


def summarize(entry: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Add the headline numbers of a finished run's curve to its entry."""
    curve = entry["curve"]
    last = curve[-1]
    values = [r["exploitability"] for r in curve]
    at = []
    for fraction in TABLE_FRACTIONS:
        t = fraction * seconds
        before = [r for r in curve if r["seconds"] <= t]
        at.append({
            "time": t,
            "measured_at": before[-1]["seconds"] if before else None,
            "exploitability": before[-1]["exploitability"] if before else None,
        })
    entry.update(
        iterations=last["iteration"],
        seconds=last["seconds"],
        nodes=last["nodes"],
        nodes_per_second=last["nodes_per_second"],
        traversal_nodes_per_second=last.get("traversal_nodes_per_second"),
        nodes_per_traversal=last["nodes"] / max(entry.pop("traversals"), 1),
        final_exploitability=last["exploitability"],
        best_exploitability=min(values),
        exploitability_at=at,
        eval_seconds=last.get("eval_seconds"),
        wall_seconds=last.get("wall_seconds"),
    )
    return entry


def _ratio(a, b) -> float | None:
    if a is None or b is None or not b:
        return None
    return a / b


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """lcjax / OpenSpiel quotients of nodes/s, traversal nodes/s and final exploitability."""
    out: dict[str, dict[str, float | None]] = {}
    for metric, key in (
        ("nodes_per_second", "nodes_per_second"),
        ("traversal_nodes_per_second", "traversal_nodes_per_second"),
        ("exploitability", "final_exploitability"),
    ):
        out[metric] = {
            f"lcjax/{name}": _ratio(results["lcjax"].get(key), results[name].get(key)) for name in OPENSPIEL
        }
    return out


def _fmt(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def format_table(results: dict[str, dict[str, Any]], seconds: float) -> str:
    """The side-by-side table of every implementation (skipped ones with their reason)."""
    heads = ["implementation", "iters", "nodes", "nodes/s", "trav nodes/s", "nodes/trav"]
    heads += [f"expl@{f * seconds:g}s" for f in TABLE_FRACTIONS] + ["final expl", "seconds"]
    rows = []
    for name, r in results.items():
        if not r["ran"]:
            rows.append([name, f"skipped: {r['reason']}"])
            continue
        rows.append(
            [name, str(r["iterations"]), f"{r['nodes']:,}", _fmt(r["nodes_per_second"], ",.0f"),
             _fmt(r["traversal_nodes_per_second"], ",.0f"), _fmt(r["nodes_per_traversal"], ".1f")]
            + [_fmt(a["exploitability"], ".4f") for a in r["exploitability_at"]]
            + [_fmt(r["final_exploitability"], ".4f"), _fmt(r["seconds"], ".1f")]
        )
    full = [row for row in rows if len(row) == len(heads)]
    widths = [max(len(h), *(len(row[i]) for row in full)) if full else len(h) for i, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(heads, widths)))]
    for row in rows:
        if len(row) == len(heads):
            lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        else:
            lines.append(f"{row[0].ljust(widths[0])}  {row[1]}")
    return "\n".join(lines)


def format_ratios(ratio: dict[str, dict[str, float | None]]) -> str:
    lines = []
    labels = {
        "nodes_per_second": "nodes/s (higher = lcjax faster)",
        "traversal_nodes_per_second": "traversal nodes/s",
        "exploitability": "final exploitability (lower = lcjax better)",
    }
    for metric, label in labels.items():
        parts = [f"{k} = {_fmt(v, '.3g')}" for k, v in ratio[metric].items()]
        lines.append(f"{label}: " + ", ".join(parts))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# Command line


def _parse_implementations(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in IMPLEMENTATIONS]
    if bad or not names:
        raise ValueError(
            f"--implementations: unknown {', '.join(bad) or '(empty)'}; allowed: {', '.join(IMPLEMENTATIONS)}"
        )
    return [n for n in IMPLEMENTATIONS if n in names]  # fixed order: lcjax first


def _uniform_exploitability(openspiel_ok: bool) -> dict[str, float | None]:
    """The uniform policy's exploitability from lcjax and from OpenSpiel (same units)."""
    out: dict[str, float | None] = {
        "lcjax": float(ex.exploitability(solve_small.GAMES[GAME], ex.uniform_policy)),
        "openspiel": None,
    }
    if openspiel_ok:
        import pyspiel
        from open_spiel.python import policy as os_policy
        from open_spiel.python.algorithms import exploitability as os_exploitability

        game = pyspiel.load_game(OPENSPIEL_GAME)
        out["openspiel"] = float(os_exploitability.exploitability(game, os_policy.UniformRandomPolicy(game)))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=positive_float, default=600.0,
                        help="solver budget per implementation (default 600)")
    parser.add_argument(
        "--implementations", default=",".join(IMPLEMENTATIONS),
        help=f"comma list of {', '.join(IMPLEMENTATIONS)} (default: all; missing packages are skipped)",
    )
    parser.add_argument(
        "--measure-every", type=positive_float, default=None,
        help="OpenSpiel: seconds of solver time between exploitability measurements (default: seconds / 8)",
    )
    parser.add_argument(
        "--lcjax-eval-every", type=positive_int, default=None,
        help="lcjax: iterations between measurements (default: whenever the strategy network trains)",
    )
    parser.add_argument("--hidden", type=positive_int, default=128, help="hidden units per layer, all networks (default 128)")
    parser.add_argument("--layers", type=positive_int, default=3, help="hidden layers, all networks (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="lcjax: override a SolverConfig key, e.g. optimization.learning_rate=1e-3")
    parser.add_argument("--openspiel-traversals", type=positive_int, default=OPENSPIEL_DEFAULTS["num_traversals"],
                        help="OpenSpiel: traversals per player per iteration (default %(default)s)")
    parser.add_argument("--openspiel-advantage-steps", type=positive_int,
                        default=OPENSPIEL_DEFAULTS["advantage_network_train_steps"],
                        help="OpenSpiel: advantage training steps per iteration (default %(default)s)")
    parser.add_argument("--openspiel-policy-steps", type=positive_int,
                        default=OPENSPIEL_DEFAULTS["policy_network_train_steps"],
                        help="OpenSpiel: policy training steps (default %(default)s; the JAX solver uses the advantage steps)")
    parser.add_argument("--openspiel-batch", type=positive_int, default=OPENSPIEL_DEFAULTS["batch_size_advantage"],
                        help="OpenSpiel: batch size of both networks (default %(default)s)")
    parser.add_argument("--openspiel-memory", type=positive_int, default=OPENSPIEL_DEFAULTS["memory_capacity"],
                        help="OpenSpiel: reservoir capacity (default %(default)s)")
    parser.add_argument("--torch-threads", type=nonnegative_int, default=1,
                        help="PyTorch threads (default 1; 0 = torch's default)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results here")
    parser.add_argument("--out", default=None, metavar="DIR", help="keep each implementation's files in DIR/<name>/")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], dict[str, Any]]:
    """(arguments, implementations to run, lcjax's SolverConfig overrides); bad values exit
    with a usage error before anything runs."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        names = _parse_implementations(args.implementations)
        overrides = solve_small.parse_overrides(args.set)
        for key in ("network.hidden_size", "network.num_layers"):
            if key in overrides:
                raise ValueError(f"--set {key}: use --hidden/--layers (they apply to every implementation)")
        # Reject bad lcjax values before anything runs.
        network = {"network.hidden_size": args.hidden, "network.num_layers": args.layers}
        small_game_config(GAME, SCHEME, **overrides, **network)
    except ValueError as e:
        parser.error(str(e))
    return args, names, overrides


def _availability(names: list[str]) -> dict[str, dict[str, Any]]:
    """{implementation: {"available", "ran", "reason"}} for all of them; the requested ones
    whose packages are missing are skipped with the reason printed."""
    results: dict[str, dict[str, Any]] = {}
    for name in IMPLEMENTATIONS:
        reason = unavailable_reason(name)
        if name not in names:
            results[name] = {"available": reason is None, "ran": False, "reason": "not requested"}
        elif reason is not None:
            results[name] = {"available": False, "ran": False, "reason": reason}
            print(f"{name}: skipped: {reason}", flush=True)
        else:
            results[name] = {"available": True, "ran": True, "reason": None}
    return results


def _run_all(args, names, results, overrides, params, measure_every, log) -> None:
    """Run every available requested implementation in turn; its summary goes into `results`."""
    with tempfile.TemporaryDirectory() as scratch:
        base = args.out or scratch
        for name in names:
            if not results[name]["ran"]:
                continue
            out_dir = os.path.join(base, name)
            if name == "lcjax":
                run = run_lcjax(
                    args.seconds, out_dir, hidden=args.hidden, layers=args.layers, seed=args.seed,
                    overrides=overrides, eval_every=args.lcjax_eval_every, log=log,
                )
            else:
                run = run_openspiel(
                    name, args.seconds, out_dir if args.out else None, hidden=args.hidden, layers=args.layers,
                    seed=args.seed, params=params, measure_every=measure_every,
                    torch_threads=args.torch_threads, log=log,
                )
            results[name].update(summarize(run, args.seconds))


def _load_text(load: list[float] | None) -> str:
    return "-" if load is None else f"{load[0]:.1f}"


def print_summary(args, results: dict, ratio: dict, load_before, load_after) -> None:
    """The side-by-side table, the ratios, the skipped implementations and the headline."""
    print()
    print(f"Leduc, {args.seconds:g} s per implementation, {args.layers} x {args.hidden} networks, "
          f"load {_load_text(load_before)} -> {_load_text(load_after)}")
    print(format_table(results, args.seconds))
    print()
    print("ratios lcjax / OpenSpiel:")
    print(format_ratios(ratio))
    for name in OPENSPIEL:
        if results[name]["reason"] and results[name]["reason"] != "not requested":
            print(f"{name} skipped: {results[name]['reason']}")
    labels = {"lcjax/openspiel_jax": "OpenSpiel JAX", "lcjax/openspiel_torch": "OpenSpiel PyTorch"}
    parts = [f"{_fmt(v, '.3g')}x ({labels[k]})" for k, v in ratio["nodes_per_second"].items() if v is not None]
    missing = "- (needs lcjax and at least one OpenSpiel implementation)"
    print("headline: lcjax/OpenSpiel nodes/s = " + (", ".join(parts) if parts else missing))


def main(argv: list[str] | None = None) -> int:
    args, names, overrides = _parse_args(argv)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    measure_every = args.measure_every or args.seconds / 8
    params = dict(
        OPENSPIEL_DEFAULTS,
        num_traversals=args.openspiel_traversals,
        advantage_network_train_steps=args.openspiel_advantage_steps,
        policy_network_train_steps=args.openspiel_policy_steps,
        batch_size_advantage=args.openspiel_batch,
        batch_size_strategy=args.openspiel_batch,
        memory_capacity=args.openspiel_memory,
    )
    results = _availability(names)
    openspiel_ok = unavailable_reason("openspiel_jax") is None or unavailable_reason("openspiel_torch") is None
    load_before = loadavg()
    uniform = _uniform_exploitability(openspiel_ok)
    log(f"uniform policy exploitability: lcjax {uniform['lcjax']:.6f}, OpenSpiel {_fmt(uniform['openspiel'], '.6f')}")
    _run_all(args, names, results, overrides, params, measure_every, log)

    ratio = ratios(results)
    settings = {
        "game": GAME,
        "seconds": args.seconds,
        "implementations": names,
        "hidden": args.hidden,
        "layers": args.layers,
        "seed": args.seed,
        "lcjax_overrides": overrides,
        "lcjax_eval_every": args.lcjax_eval_every,
        "openspiel": params,
        "measure_every_seconds": measure_every,
        "torch_threads": args.torch_threads,
        "uniform_exploitability": uniform,
        "load_before": load_before,
        "load_after": loadavg(),
        "cpu_count": os.cpu_count(),
        "backend": jax.default_backend(),
        "versions": _versions(),
    }
    print_summary(args, results, ratio, load_before, settings["load_after"])
    if args.json:
        data = {"settings": settings, "implementations": results, "ratios": ratio,
                "headline": {"metric": "nodes_per_second", **ratio["nodes_per_second"]}}
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
