"""Network-size sweep for Deep CFR on Lost Cities: learning per unit of compute.

    # CPU, reduced scale (a smoke-sized comparison of two widths):
    python scripts/sweep_model_size.py --scale reduced --configs 512x3,768x3 --out runs/sweep_cpu
    # GPU, full scale (the issue's grid, 200 iterations per network):
    python scripts/sweep_model_size.py --scale full --out runs/sweep_gpu
    python scripts/sweep_model_size.py --scale full --hidden 512,1024 --layers 3,6
    # continue a sweep that stopped (completed runs are kept, the rest run):
    python scripts/sweep_model_size.py --resume runs/sweep_gpu

What it does. Every network of the grid (hidden width x hidden layers; by default the issue's
{512, 768, 1024, 1536} x {3, 4, 6, 8}) is trained from scratch with Deep CFR for a fixed
number of iterations, all else equal. The base configuration is `configs/deep_cfr/default.yaml`
(or `--config FILE`) with `--set section.key=value` overrides applied exactly as `lcjax train`
applies them; only `network.hidden_size` and `network.num_layers` change between runs. The
base configuration's own network (512 x 3 in default.yaml) is the *reference* of the
recommendation; it is always run, and first, even when the grid does not list it.

The solver is driven directly (`lcjax.run.run_solver`, `init`, `iteration`): no run
directory, no checkpoints. Every `eval_every` iterations and after the last one the average
policy plays `games` games against each of the config's `evaluation.opponents`
(`lcjax.evaluate.evaluate_against_bots`, seats alternated). The evaluation key depends only
on the seed and the iteration (`lcjax.run.eval_key`), so every network is dealt the same
games: common random numbers make the comparison sharper than independent deals.

Measured per run (network, seed):

* `compile_seconds`: the first iteration's compilation of the solver's phases (reported by
  the solver); `first_iteration_seconds`: that whole first iteration.
* `iteration_seconds`: wall seconds of every iteration, evaluation excluded; the first one
  with its compilation subtracted. `seconds_per_iteration` is the median over iterations
  2..N (the first still warms caches), or the first one's when N = 1.
* `params` (of one network; the solver has three alike) and `forward_flops`: 2 * sum of
  in * out over the dense layers for one state (input: the game's observation size,
  output: its number of actions).
* the learning curve: one row per evaluation with `iteration`, `train_seconds` (cumulative
  training wall time, compilation and evaluation excluded: the compute axis), `nodes`
  (cumulative traversal states), `compute_flops` (a hardware-independent estimate of
  cumulative compute: network evaluations in traversals x forward_flops, plus 3 x
  forward_flops per trained sample for the forward and backward passes), and every metric
  `evaluate_against_bots` returns, under its own key (`eval/<bot>/score_diff`,
  `eval/<bot>/score_diff_ci95_low`, `eval/<bot>/win_rate`, ...).

Scales (`--scale`; `auto`, the default, is `full` on a GPU/TPU backend and `reduced` on CPU):

* full: 200 iterations, evaluation every 20 iterations with 1000 games per opponent, the
  configuration's own traversal, training and memory sizes.
* reduced: 6 iterations, evaluation every 3 with 200 games, and `REDUCED_OVERRIDES` applied
  before the user's `--set`s (which win): the probe scheme with a uniform traverser, 32
  probe traversals per player in one batch of 32 with branch probability 0.01 and at most
  8 probes, 64 Adam steps on minibatches of 256 for each advantage and strategy phase,
  reservoirs of 200,000. On an idle 2 vCPU machine a
  512 x 3 iteration takes ~7 s and a 768 x 3 one ~14 s, plus ~30 s of compilation and
  about a minute for the first evaluation (the matches compile). This scale checks the
  sweep end to end and gives a rough time-per-iteration ratio, not a verdict worth acting
  on.

`--iterations`, `--eval-every` and `--games` override either scale.

Seeds. Every network runs with `--seed` (default 0). Then a second seed (`--seed + 1`)
runs for the *boundary* networks, where one seed cannot separate the candidates. The
headline score of a run is its mean score difference, with its 95% CI, against the headline
opponent (`--headline`; default safe_heuristic when it is among the opponents, the strongest
bot there, else the last opponent) at the final evaluation. Take R = the reference and B = the
network with the best first-seed headline score (possibly R itself). The boundary networks are
both members of every pair (R, c) or (B, c), c another network, whose first-seed headline CIs
overlap: exactly the comparisons the verdict makes that one seed cannot settle. (So R gets a
second seed as soon as any network is within its CI.) `--no-second-seed` skips the second
seed.

Where a network has two seeds its headline score is their mean, and its CI half-width is the
larger of sqrt(h1^2 + h2^2) / 2 (the game-sampling error of the mean of two independent
estimates, h = half-widths) and |m1 - m2| / 2 (the seeds' own disagreement), so a network whose
seeds disagree gets a wider interval rather than a spuriously narrow one.

Recommendation (`recommend`). Every network is compared with the reference R:

* clearly better: its headline CI lower bound exceeds R's CI upper bound (non-overlapping
  intervals);
* too slow: its seconds per iteration exceed `--max-slowdown` (default 2.0) times R's.

Verdicts: "new_default" for the clearly-better, not-too-slow network with the highest
headline score; else "defer" for the clearly-better, too-slow network with the highest score
(it wins but costs too much now); else "keep" the reference (nothing is clearly better). The
slowdown limit is what makes the rule "per unit of compute": at a fixed number of iterations
a bigger network has had more compute, so it must win by a clear margin at an affordable price.

Outputs in `--out` (default `runs/sweep_model_size_<UTC timestamp>`):

* `sweep.json`: `settings` (scale, iterations, schedule, opponents, seeds, the base config,
  backend), `runs` (one per network and seed, with the learning curve), `summary` (one per
  network, seeds combined), `boundary`, `recommendation` ({"verdict", "network", "reason",
  ...}) and `complete`. It is rewritten atomically after every run, so a crash loses at most
  the run in progress; `--resume DIR` continues a sweep with the settings saved in
  DIR/sweep.json, skipping the runs it holds (new networks may be added with the grid flags).
  `--json FILE` writes the same JSON to FILE too.
* `sweep.png`: headline score difference against cumulative training seconds, one line per
  run (95% band for the first seed; dashed for the second), and seconds per iteration per
  network.

Progress prints one line per iteration and one per evaluation; at the end a table (network,
parameters, forward MFLOP, time per iteration, compile time, final score difference with its
CI per opponent, verdict) and the recommendation with its reason.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from lcjax.argtypes import nonnegative_int, positive_float, positive_int, positive_int_list

from common import DEFAULT_CONFIG, dense_widths, loadavg, network_name, parse_network, parse_networks, write_json
from common import forward_flops as common_forward_flops

GRID_HIDDEN = (512, 768, 1024, 1536)
GRID_LAYERS = (3, 4, 6, 8)

# Schedule per scale: iterations per run, iterations between evaluations, games per opponent.
SCALES = {
    "full": {"iterations": 200, "eval_every": 20, "games": 1000},
    "reduced": {"iterations": 6, "eval_every": 3, "games": 200},
}
# The reduced scale's config overrides (applied before the user's --set, which win), sized so
# that a 512 x 3 run fits in minutes on two CPU cores: few traversals in one batch, rare
# probes (each probe costs a rollout per legal action, the bulk of a traversal), short
# training phases on small minibatches, and reservoirs far larger than the ~10k samples an
# iteration adds, so nothing is evicted.
REDUCED_OVERRIDES = (
    # The probe scheme by a uniform traverser, as this scale was measured with (default.yaml
    # now runs the value scheme, whose iteration on a CPU takes minutes at these widths).
    "traversal.scheme=probe",
    "traversal.sampling_bot=null",
    "traversal.traversals_per_player=32",
    "traversal.traversal_batch=32",
    "traversal.probe.branch_probability=0.01",
    "traversal.probe.max_probes=8",
    "optimization.advantage_steps=64",
    "optimization.advantage_batch=256",
    "optimization.strategy_steps=64",
    "optimization.strategy_batch=256",
    # The last fit as long as the others, as this scale was measured with.
    "optimization.final_strategy_steps=0",
    "memory.advantage_capacity=200000",
    "memory.strategy_capacity=200000",
)
VERDICTS = ("new_default", "keep", "defer")
SWEEP_FILE = "sweep.json"
PLOT_FILE = "sweep.png"
# Settings that --resume takes from the saved sweep (giving them again is an error).
_RESUME_FIXED = ("config", "set", "scale", "iterations", "eval_every", "games", "seed", "headline")


# ----------------------------------------------------------------------------- parsing
def _network_list(text: str) -> list[tuple[int, int]]:
    """An argparse type for --configs: comma-separated HxL with positive H and L."""
    return parse_networks(text, min_layers=1)


def _unique(items: Iterable) -> list:
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def grid_networks(hidden: Sequence[int] | None, layers: Sequence[int] | None, configs=None) -> list[tuple[int, int]]:
    """The networks to run: an explicit `configs` list, or hidden x layers (missing axes
    take the issue's grid values)."""
    if configs:
        return _unique(tuple(c) for c in configs)
    return _unique((h, l) for h in (hidden or GRID_HIDDEN) for l in (layers or GRID_LAYERS))


def off_grid(networks: Iterable[tuple[int, int]]) -> list[str]:
    """Names of the networks whose width or depth is not on the issue's grid."""
    return [network_name(h, l) for h, l in networks if h not in GRID_HIDDEN or l not in GRID_LAYERS]


def resolve_scale(scale: str, backend: str) -> str:
    """"full" or "reduced"; "auto" is full on an accelerator backend, reduced on CPU."""
    if scale != "auto":
        return scale
    return "reduced" if backend == "cpu" else "full"


# ----------------------------------------------------------------------------- sizes
def mlp_param_count(in_size: int, out_size: int, hidden: int, layers: int, layer_norm: bool = False) -> int:
    """Parameters of one MLP: weights and biases of every dense layer (+ LayerNorm scale and
    bias on the last hidden features when enabled)."""
    widths = dense_widths(in_size, out_size, hidden, layers)
    count = sum(i * o + o for i, o in zip(widths[:-1], widths[1:]))
    if layer_norm:
        count += 2 * (hidden if layers else in_size)
    return count


def forward_flops(in_size: int, out_size: int, hidden: int, layers: int) -> int:
    """Multiply-add FLOPs of one state's forward pass: 2 * sum(in * out) (biases, ReLUs and
    skip additions are negligible next to the matrix products)."""
    return common_forward_flops(dense_widths(in_size, out_size, hidden, layers))


# ----------------------------------------------------------------------------- statistics
def combine(estimates: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(mean, low, high) of several seeds' (mean, CI low, CI high) estimates.

    The mean is the plain average; the CI half-width is the larger of the sampling error of
    that average, sqrt(sum h_i^2) / n, and half the spread of the seeds' means (see the
    module docstring). One estimate comes back unchanged.
    """
    if not estimates:
        raise ValueError("combine needs at least one estimate")
    if len(estimates) == 1:
        m, lo, hi = estimates[0]
        return float(m), float(lo), float(hi)
    n = len(estimates)
    means = [float(e[0]) for e in estimates]
    halves = [(float(e[2]) - float(e[1])) / 2 for e in estimates]
    mean = sum(means) / n
    half = max(math.sqrt(sum(h * h for h in halves)) / n, (max(means) - min(means)) / 2)
    return mean, mean - half, mean + half


def _overlap(a: dict, b: dict) -> bool:
    return a["score_ci95_low"] <= b["score_ci95_high"] and b["score_ci95_low"] <= a["score_ci95_high"]


def boundary_networks(results: dict[str, dict], reference: str) -> list[str]:
    """Networks that need a second seed (see the module docstring).

    Both members of every pair (X, c), X the reference or the best network and c another
    network, whose first-seed headline CIs overlap: one seed cannot tell them apart, and
    the verdict compares exactly such pairs.

    Args:
      results: {network: {"score", "score_ci95_low", "score_ci95_high", ...}} of one seed.
      reference: the reference network's name (none are boundary without it).

    Returns:
      The boundary networks, in the order of `results`.
    """
    if reference not in results:
        return []
    best = max(results, key=lambda n: results[n]["score"])
    marked = set()
    for anchor in (reference, best):
        for name, r in results.items():
            if name != anchor and _overlap(r, results[anchor]):
                marked.update((name, anchor))
    return [n for n in results if n in marked]


def _fmt_score(r: dict) -> str:
    return f"{r['score']:+.1f} [{r['score_ci95_low']:+.1f}, {r['score_ci95_high']:+.1f}]"


def recommend(results: dict[str, dict], reference: str, max_slowdown: float = 2.0) -> dict[str, Any]:
    """The sweep's verdict; see the module docstring for the rule.

    Args:
      results: {network name: {"score", "score_ci95_low", "score_ci95_high",
        "seconds_per_iteration"}}: final headline score (seeds combined) and time per iteration.
      reference: the current default network's name; must be in `results`.
      max_slowdown: a network slower per iteration than this times the reference is too slow.

    Returns:
      {"verdict": "new_default" | "defer" | "keep", "network": name, "reason": one line,
       "reference": ..., "max_slowdown": ..., "clearly_better": [...], "too_slow": [...],
       "slowdown": {name: seconds per iteration / the reference's}}.
    """
    if reference not in results:
        raise ValueError(f"the reference network {reference} has no results")
    ref = results[reference]
    ref_time = ref["seconds_per_iteration"]
    slowdown = {n: r["seconds_per_iteration"] / ref_time if ref_time > 0 else math.inf for n, r in results.items()}
    # Clearly better: the whole CI above the reference's (the intervals do not overlap).
    better = [n for n, r in results.items() if n != reference and r["score_ci95_low"] > ref["score_ci95_high"]]
    # Too slow: the per-iteration price exceeds the budget relative to the reference.
    slow = [n for n in results if n != reference and slowdown[n] > max_slowdown]
    by_score = lambda names: max(names, key=lambda n: (results[n]["score"], -slowdown[n]))  # noqa: E731
    affordable = [n for n in better if n not in slow]
    common = {
        "reference": reference,
        "max_slowdown": max_slowdown,
        "clearly_better": better,
        "too_slow": slow,
        "slowdown": slowdown,
    }
    ref_text = f"the reference {reference} at {_fmt_score(ref)}"
    # The best affordable winner becomes the default; failing that, the best winner defers.
    for verdict, candidates, price in (("new_default", affordable, "at"), ("defer", better, "but costs")):
        if candidates:
            name = by_score(candidates)
            reason = (
                f"{name} scores {_fmt_score(results[name])}, clearly above {ref_text}, {price} "
                f"{slowdown[name]:.2f}x its time per iteration (limit {max_slowdown:g}x)"
            )
            return {"verdict": verdict, "network": name, "reason": reason, **common}
    others = [n for n in results if n != reference]
    if others:
        top = by_score(others)
        reason = (
            f"no network's CI lies above {ref_text}; the best other, {top}, scores {_fmt_score(results[top])}"
        )
    else:
        reason = f"only the reference {reference} was measured"
    return {"verdict": "keep", "network": reference, "reason": reason, **common}


# ----------------------------------------------------------------------------- training
def _headline(row: dict, opponent: str) -> tuple[float, float, float]:
    p = f"eval/{opponent}/score_diff"
    return row[p], row[f"{p}_ci95_low"], row[f"{p}_ci95_high"]


def _count_leaves(tree) -> int:
    import jax

    return int(sum(x.size for x in jax.tree.leaves(tree)))


def train_network(
    config,
    seed: int,
    *,
    iterations: int,
    eval_every: int,
    games: int,
    headline: str,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train one network with Deep CFR for `iterations` and return its run record.

    Evaluates against `config.evaluation.opponents` (with `config.evaluation.policy`) every
    `eval_every` iterations and after the last; see the module docstring for the fields.
    """
    import jax

    from lcjax.run import run_solver

    net = config.network
    name = network_name(net.hidden_size, net.num_layers)
    wall0 = time.perf_counter()
    solver = run_solver(config)
    game = solver.game
    flops = forward_flops(game.observation_size, game.num_actions, net.hidden_size, net.num_layers)
    state = solver.init(jax.random.key(seed))
    params = _count_leaves(state.strategy_params)
    tag = f"{name} seed {seed}"
    log(f"{tag}: {params:,} parameters per network, {flops / 1e6:.2f} MFLOP per forward")
    measured = _train_and_evaluate(
        solver, state, config, seed, flops, tag, iterations=iterations, eval_every=eval_every, games=games, log=log
    )
    del state  # free the reservoirs before the next network is allocated
    iteration_seconds = measured["iteration_seconds"]
    rest = iteration_seconds[1:] or iteration_seconds
    h = _headline(measured["curve"][-1], headline)
    return {
        "network": name,
        "hidden_size": net.hidden_size,
        "num_layers": net.num_layers,
        "seed": seed,
        "params": params,
        "forward_flops": flops,
        "iterations": iterations,
        "compile_seconds": measured["compile_seconds"],
        "first_iteration_seconds": measured["first_iteration_seconds"],
        "iteration_seconds": iteration_seconds,
        "seconds_per_iteration": statistics.median(rest),
        "seconds_per_iteration_mean": statistics.fmean(rest),
        "phase_seconds_mean": {k: statistics.fmean(v[1:] or v) for k, v in measured["phases"].items()},
        "train_seconds": measured["train_seconds"],
        "eval_seconds": measured["eval_seconds"],
        "wall_seconds": time.perf_counter() - wall0,
        "nodes": measured["nodes"],
        "compute_flops": measured["compute_flops"],
        "curve": measured["curve"],
        "headline": {"opponent": headline, "score": h[0], "score_ci95_low": h[1], "score_ci95_high": h[2]},
    }


def _train_and_evaluate(solver, state, config, seed: int, flops: int, tag: str, *, iterations: int,
                        eval_every: int, games: int, log: Callable[[str], None]) -> dict[str, Any]:
    """The iterations of one run, with its evaluations on the schedule.

    Returns the per-iteration seconds (compilation subtracted) and phase seconds, the
    first iteration's compile and total seconds, the cumulative training and evaluation
    seconds, traversal nodes and compute FLOPs, and the learning curve.
    """
    opt = config.optimization
    out: dict[str, Any] = {
        "iteration_seconds": [], "phases": {}, "curve": [], "compile_seconds": 0.0, "first_iteration_seconds": 0.0,
        "train_seconds": 0.0, "eval_seconds": 0.0, "nodes": 0, "compute_flops": 0.0,
    }
    for it in range(1, iterations + 1):
        state, m = solver.iteration(state)
        total = float(m["time/iteration_seconds"])
        if it == 1:
            out["compile_seconds"], out["first_iteration_seconds"] = float(m["time/compile_seconds"]), total
        # The first iteration's compilation is reported separately, never as training time.
        seconds = total - float(m["time/compile_seconds"])
        out["iteration_seconds"].append(seconds)
        out["train_seconds"] += seconds
        for phase in ("traversal", "memory_add", "advantage_train", "strategy_train"):
            out["phases"].setdefault(phase, []).append(float(m[f"time/{phase}_seconds"]))
        out["nodes"] += int(m["traversal/nodes"])
        trained = 2 * opt.advantage_steps * opt.advantage_batch
        if "loss/strategy" in m:
            trained += opt.strategy_steps * opt.strategy_batch
        # Forward and backward of a trained sample: about three forwards.
        out["compute_flops"] += flops * (int(m["traversal/evaluations"]) + 3 * trained)
        log(
            f"{tag}  it {it:4d}/{iterations}  {seconds:8.2f} s"
            + (f" (+{out['compile_seconds']:.1f} s compile)" if it == 1 and out["compile_seconds"] else "")
            + f"  traversal {m['time/traversal_seconds']:.2f} s"
            f"  train {m['time/advantage_train_seconds'] + m['time/strategy_train_seconds']:.2f} s"
            f"  nodes {int(m['traversal/nodes']):,}"
        )
        if it % eval_every == 0 or it == iterations:
            row = _evaluation_row(solver, state, config, games, seed, it, out)
            out["eval_seconds"] += row["eval_seconds"]
            out["curve"].append(row)
            scores = "  ".join(
                f"{o} {row[f'eval/{o}/score_diff']:+.1f} [{row[f'eval/{o}/score_diff_ci95_low']:+.1f}, "
                f"{row[f'eval/{o}/score_diff_ci95_high']:+.1f}]"
                for o in config.evaluation.opponents
            )
            log(f"{tag}  eval it {it}: score diff {scores}  ({row['eval_seconds']:.1f} s)")
    return out


def _evaluation_row(solver, state, config, games: int, seed: int, it: int, totals: dict) -> dict:
    """One learning-curve row: the policy's matches against every opponent at iteration `it`,
    with the run's cumulative training seconds, nodes and compute so far."""
    from lcjax.evaluate import evaluate_against_bots
    from lcjax.run import eval_key

    opponents = list(config.evaluation.opponents)
    t0 = time.perf_counter()
    metrics = evaluate_against_bots(solver, state, opponents, games, eval_key(seed, it), policy=config.evaluation.policy)
    took = time.perf_counter() - t0
    return {
        "iteration": it,
        "train_seconds": totals["train_seconds"],
        "nodes": totals["nodes"],
        "compute_flops": totals["compute_flops"],
        "eval_seconds": took,
        **metrics,
    }


# ----------------------------------------------------------------------------- summary
def summarize(runs: Sequence[dict], opponents: Sequence[str], headline: str) -> dict[str, dict]:
    """One entry per network, its seeds combined (`combine`), in first-appearance order."""
    by_net: dict[str, list[dict]] = {}
    for r in runs:
        by_net.setdefault(r["network"], []).append(r)
    out = {}
    for name, rs in by_net.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        finals = [r["curve"][-1] for r in rs]
        per_opp = {}
        for o in opponents:
            m, lo, hi = combine([_headline(f, o) for f in finals])
            w = combine([(f[f"eval/{o}/win_rate"], f[f"eval/{o}/win_rate_ci95_low"], f[f"eval/{o}/win_rate_ci95_high"]) for f in finals])
            per_opp[o] = {"score_diff": m, "score_diff_ci95_low": lo, "score_diff_ci95_high": hi, "win_rate": w[0]}
        score = per_opp[headline]
        h, l = parse_network(name)
        out[name] = {
            "network": name,
            "hidden_size": h,
            "num_layers": l,
            "on_grid": h in GRID_HIDDEN and l in GRID_LAYERS,
            "seeds": [r["seed"] for r in rs],
            "params": rs[0]["params"],
            "forward_flops": rs[0]["forward_flops"],
            "score": score["score_diff"],
            "score_ci95_low": score["score_diff_ci95_low"],
            "score_ci95_high": score["score_diff_ci95_high"],
            "seconds_per_iteration": statistics.fmean(r["seconds_per_iteration"] for r in rs),
            "compile_seconds": max(r["compile_seconds"] for r in rs),
            "train_seconds": statistics.fmean(r["train_seconds"] for r in rs),
            "final": per_opp,
        }
    return out


def first_seed_results(runs: Sequence[dict], seed: int, headline: str) -> dict[str, dict]:
    """{network: headline score and CI} of the first-seed runs."""
    out = {}
    for r in runs:
        if r["seed"] == seed:
            m, lo, hi = _headline(r["curve"][-1], headline)
            out[r["network"]] = {"score": m, "score_ci95_low": lo, "score_ci95_high": hi}
    return out


# ----------------------------------------------------------------------------- output
def plot(data: dict, path: Path) -> Path:
    """sweep.png: headline score against training seconds per run, and time per iteration."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    settings = data["settings"]
    headline = settings["headline"]
    summary = data.get("summary", {})
    names = list(summary)
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    colors = {n: cmap(i % cmap.N) for i, n in enumerate(names)}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    key = f"eval/{headline}/score_diff"
    for r in data["runs"]:
        xs = [row["train_seconds"] for row in r["curve"]]
        ys = [row[key] for row in r["curve"]]
        first = r["seed"] == settings["seed"]
        label = r["network"] + ("" if first else f" (seed {r['seed']})")
        width = 2.5 if r["network"] == data.get("reference") else 1.5
        ax.plot(xs, ys, marker=".", ls="-" if first else "--", lw=width, color=colors.get(r["network"]), label=label)
        if first:
            lo = [row[f"{key}_ci95_low"] for row in r["curve"]]
            hi = [row[f"{key}_ci95_high"] for row in r["curve"]]
            ax.fill_between(xs, lo, hi, color=colors.get(r["network"]), alpha=0.12)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("cumulative training seconds (compilation and evaluation excluded)")
    ax.set_ylabel(f"mean score difference vs {headline}")
    ax.set_title(f"learning per unit of compute ({settings['scale']} scale, {settings['iterations']} iterations)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    secs = [summary[n]["seconds_per_iteration"] for n in names]
    bars = bx.bar(range(len(names)), secs, color=[colors[n] for n in names])
    for b, n in zip(bars, names):
        p = summary[n]["params"]
        bx.annotate(f"{p / 1e6:.2f}M" if p >= 100_000 else f"{p:,}", (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=7)
    bx.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    bx.set_ylabel("seconds per iteration (median; label: parameters)")
    bx.grid(alpha=0.3, axis="y")
    rec = data.get("recommendation")
    if rec:
        fig.suptitle(f"recommendation: {rec['verdict'].replace('_', ' ')} {rec['network']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _fmt_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def print_table(data: dict, out=None) -> None:
    """The summary table and the recommendation."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out) if out is not None else Console()
    if not console.is_terminal and console.width < 160:
        console = Console(file=out, width=160)
    settings = data["settings"]
    opponents = settings["opponents"]
    rec = data.get("recommendation") or {}
    table = Table(title=f"model-size sweep: final score difference at iteration {settings['iterations']} "
                        f"({settings['games']} games per opponent, 95% CI)")
    for col in ("network", "params", "MFLOP/fwd", "time/iter", "compile", "seeds"):
        table.add_column(col, justify="right")
    for o in opponents:
        table.add_column(o + (" *" if o == settings["headline"] else ""), justify="right")
    table.add_column("verdict")
    for name, s in data["summary"].items():
        notes = []
        if name == data.get("reference"):
            notes.append("reference")
        if name in rec.get("clearly_better", []):
            notes.append("clearly better")
        if name in rec.get("too_slow", []):
            notes.append(f"too slow ({rec['slowdown'][name]:.1f}x)")
        if rec and name == rec["network"]:
            notes.append(f"<- {rec['verdict'].replace('_', ' ')}")
        cells = [
            name,
            f"{s['params']:,}",
            f"{s['forward_flops'] / 1e6:.2f}",
            _fmt_seconds(s["seconds_per_iteration"]),
            f"{s['compile_seconds']:.1f} s",
            ",".join(str(x) for x in s["seeds"]),
        ]
        for o in opponents:
            f = s["final"][o]
            cells.append(f"{f['score_diff']:+.1f} [{f['score_diff_ci95_low']:+.1f}, {f['score_diff_ci95_high']:+.1f}]")
        table.add_row(*cells, ", ".join(notes))
    console.print(table)
    console.print(f"* headline opponent: {settings['headline']}")
    if rec:
        console.print(f"recommendation: {rec['verdict'].replace('_', ' ')}: {rec['network']} ({rec['reason']})")


# ----------------------------------------------------------------------------- driver
def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help=f"base config (default: {DEFAULT_CONFIG.name} of configs/deep_cfr)")
    p.add_argument("--set", action="append", default=None, metavar="SECTION.KEY=VALUE",
                   help="config override, as for lcjax train (repeatable)")
    p.add_argument("--scale", choices=("full", "reduced", "auto"), default=None,
                   help="full (200 iterations), reduced (CPU-sized), or auto: full on GPU/TPU, reduced on CPU")
    p.add_argument("--hidden", type=positive_int_list, default=None,
                   help="hidden widths, comma-separated (default 512,768,1024,1536)")
    p.add_argument("--layers", type=positive_int_list, default=None,
                   help="hidden layer counts, comma-separated (default 3,4,6,8)")
    p.add_argument("--configs", type=_network_list, default=None,
                   help="explicit networks HxL, comma-separated (instead of --hidden/--layers)")
    p.add_argument("--iterations", type=positive_int, default=None,
                   help="iterations per run (overrides the scale's)")
    p.add_argument("--eval-every", type=positive_int, default=None,
                   help="iterations between evaluations (overrides the scale's)")
    p.add_argument("--games", type=positive_int, default=None,
                   help="games per opponent per evaluation (overrides the scale's)")
    p.add_argument("--headline", default=None,
                   help="opponent of the headline score (default: safe_heuristic if evaluated, else the last opponent)")
    p.add_argument("--seed", type=nonnegative_int, default=None, help="seed of every run (default 0)")
    p.add_argument("--no-second-seed", action="store_true", help="skip the second seed of the boundary networks")
    p.add_argument("--max-slowdown", type=positive_float, default=2.0,
                   help="a network slower per iteration than this times the reference is too slow (default 2.0)")
    p.add_argument("--out", default=None, help="output folder (default runs/sweep_model_size_<UTC timestamp>)")
    p.add_argument("--json", default=None, help="also write sweep.json's content to this file")
    p.add_argument("--resume", default=None, metavar="DIR", help="continue the sweep in DIR (its sweep.json)")
    p.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    return p


def _settings_from_args(args, backend: str) -> dict[str, Any]:
    """The sweep's settings (everything but the network list) for a new sweep."""
    from lcjax.config import ConfigError, config_to_dict, load_config

    scale = resolve_scale(args.scale or "auto", backend)
    config_path = args.config or str(DEFAULT_CONFIG)
    user_sets = list(args.set or [])
    overrides = (list(REDUCED_OVERRIDES) if scale == "reduced" else []) + user_sets
    try:
        config = load_config(config_path, overrides)
    except ConfigError as err:
        raise _UsageError(str(err)) from None
    if config.game != "lost_cities":
        raise _UsageError(f"the sweep plays bot matches, which need game lost_cities; {config_path} has {config.game}")
    opponents = list(config.evaluation.opponents)
    if not opponents:
        raise _UsageError("evaluation.opponents is empty: the sweep needs at least one bot to play")
    headline = args.headline or ("safe_heuristic" if "safe_heuristic" in opponents else opponents[-1])
    if headline not in opponents:
        raise _UsageError(f"--headline {headline!r} is not among evaluation.opponents {opponents}")
    schedule = dict(SCALES[scale])
    for flag in ("iterations", "eval_every", "games"):
        if getattr(args, flag) is not None:
            schedule[flag] = getattr(args, flag)
    return {
        "scale": scale,
        **schedule,
        "opponents": opponents,
        "headline": headline,
        "policy": config.evaluation.policy,
        "seed": 0 if args.seed is None else args.seed,
        "config_file": str(config_path),
        "set": user_sets,
        "scale_overrides": list(REDUCED_OVERRIDES) if scale == "reduced" else [],
        "config": config_to_dict(config),
        "reference": network_name(config.network.hidden_size, config.network.num_layers),
    }


class _UsageError(ValueError):
    """Bad input found after argument parsing; printed as one 'error:' line."""


def _default_out() -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"sweep_model_size_{stamp}"


def run_sweep(
    settings: dict,
    networks: list[tuple[int, int]],
    out_dir: Path,
    *,
    runs: list[dict] | None = None,
    second_seed: bool = True,
    max_slowdown: float = 2.0,
    json_copy: Path | None = None,
    log: Callable[[str], None] = print,
    train: Callable[..., dict] | None = None,
) -> dict:
    """Run every (network, seed) not already in `runs`, writing sweep.json after each.

    Args:
      settings: the sweep's settings (see `_settings_from_args`; saved in sweep.json).
      networks: (hidden, layers) to run; the reference runs first in any case.
      out_dir: where sweep.json and sweep.png go.
      runs: completed run records (from a resumed sweep.json); those are not run again.
      second_seed: run the second seed of the boundary networks.
      max_slowdown: see `recommend`.
      json_copy: also write the JSON here.
      log: progress printer.
      train: the training function (default `train_network`).

    Returns the final sweep data (the content of sweep.json).
    """
    train = train or train_network
    from lcjax.config import apply_overrides, config_from_dict

    base = config_from_dict(settings["config"])
    reference = settings["reference"]
    seed = settings["seed"]
    runs = list(runs or [])
    names = _unique([reference] + [network_name(h, l) for h, l in networks])
    settings = {**settings, "networks": _unique(settings.get("networks", []) + names)}
    data: dict[str, Any] = {"settings": settings, "reference": reference}

    def done(name: str, s: int) -> bool:
        return any(r["network"] == name and r["seed"] == s for r in runs)

    def save(complete: bool) -> None:
        data["runs"] = runs
        _save_sweep(data, boundary, complete, max_slowdown, out_dir, json_copy)

    def run_one(name: str, s: int) -> None:
        h, l = parse_network(name)
        config = apply_overrides(base, [f"network.hidden_size={h}", f"network.num_layers={l}"])
        log(f"=== {name} seed {s}")
        runs.append(
            train(
                config,
                s,
                iterations=settings["iterations"],
                eval_every=settings["eval_every"],
                games=settings["games"],
                headline=settings["headline"],
                log=log,
            )
        )
        save(False)

    boundary: list[str] = []
    for name in names:
        if done(name, seed):
            log(f"=== {name} seed {seed}: already in {out_dir / SWEEP_FILE}, skipped")
            continue
        run_one(name, seed)
    if second_seed:
        # Judged on the first seed only, so a resumed sweep picks the same networks.
        boundary = boundary_networks(first_seed_results(runs, seed, settings["headline"]), reference)
        for name in names:
            if name in boundary and not done(name, seed + 1):
                run_one(name, seed + 1)
    save(True)
    return data


def _save_sweep(data: dict, boundary: list[str], complete: bool, max_slowdown: float, out_dir: Path,
                json_copy: Path | None) -> None:
    """Summarize `data["runs"]` and recommend, then write sweep.json (and its copy) and sweep.png."""
    settings, reference = data["settings"], data["reference"]
    data["summary"] = summarize(data["runs"], settings["opponents"], settings["headline"])
    data["boundary"] = boundary
    data["recommendation"] = (
        recommend(data["summary"], reference, max_slowdown) if reference in data["summary"] else None
    )
    data["complete"] = complete
    write_json(data, out_dir / SWEEP_FILE)
    if json_copy is not None:
        write_json(data, json_copy)
    if data["runs"]:
        plot(data, out_dir / PLOT_FILE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.configs is not None and (args.hidden is not None or args.layers is not None):
        parser.error("--configs lists networks explicitly; it cannot be combined with --hidden/--layers")
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))

    import jax

    backend = jax.default_backend()
    try:
        if args.resume is not None:
            given = [f"--{k.replace('_', '-')}" for k in _RESUME_FIXED if getattr(args, k) is not None]
            if given or args.out is not None:
                raise _UsageError(
                    f"--resume takes the sweep's settings from its {SWEEP_FILE}; drop {', '.join(given + (['--out'] if args.out else []))}"
                )
            out_dir = Path(args.resume)
            path = out_dir / SWEEP_FILE
            try:
                saved = json.loads(path.read_text())
                settings, runs = saved["settings"], saved["runs"]
            except (OSError, ValueError, KeyError) as err:
                raise _UsageError(f"--resume {args.resume}: cannot read {path}: {err}") from None
            if args.configs is None and args.hidden is None and args.layers is None:
                networks = [parse_network(n) for n in settings["networks"]]
            else:
                networks = grid_networks(args.hidden, args.layers, args.configs)
        else:
            settings = _settings_from_args(args, backend)
            networks = grid_networks(args.hidden, args.layers, args.configs)
            out_dir = Path(args.out) if args.out else _default_out()
            if (out_dir / SWEEP_FILE).exists():
                raise _UsageError(f"--out {out_dir} already holds a {SWEEP_FILE}; use --resume {out_dir} to continue it")
            runs = []
            settings.update({
                "backend": backend,
                "device": jax.devices()[0].device_kind,
                "jax_version": jax.__version__,
                "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "load_average_at_start": loadavg(),
                "second_seed": not args.no_second_seed,
            })
    except _UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    off = off_grid(networks)
    if off:
        grid = f"hidden {{{', '.join(map(str, GRID_HIDDEN))}}} x layers {{{', '.join(map(str, GRID_LAYERS))}}}"
        log(f"note: off the issue's grid ({grid}): {', '.join(off)}")
    if settings["reference"] not in [network_name(h, l) for h, l in networks]:
        log(f"note: the reference {settings['reference']} (the base config's network) runs too: the verdict needs it")
    log(
        f"sweep: {settings['scale']} scale, {settings['iterations']} iterations per run, evaluation every "
        f"{settings['eval_every']} with {settings['games']} games vs {', '.join(settings['opponents'])} "
        f"(headline {settings['headline']}); backend {backend}; load average {loadavg()}; output {out_dir}"
    )
    try:
        data = run_sweep(
            settings,
            networks,
            out_dir,
            runs=runs,
            second_seed=settings.get("second_seed", True) and not args.no_second_seed,
            max_slowdown=args.max_slowdown,
            json_copy=Path(args.json) if args.json else None,
            log=log,
        )
    except KeyboardInterrupt:
        print(f"\ninterrupted; completed runs are in {out_dir / SWEEP_FILE} (continue with --resume {out_dir})",
              file=sys.stderr)
        return 130
    print_table(data)
    print(f"wrote {out_dir / SWEEP_FILE} and {out_dir / PLOT_FILE}" + (f" and {args.json}" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
