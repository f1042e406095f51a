"""The value scheme's sample stream replayed with tables instead of networks (Kuhn, Leduc).

    python scripts/tabular_replay.py --game leduc --iterations 600 --order alternating
    python scripts/tabular_replay.py --game leduc --iterations 600 --noise 0.015
    python scripts/tabular_replay.py --game kuhn --iterations 800 --traversals 256 \
        --advantage-power 2 --strategy-power 1 --order alternating --fresh-value

What would the solver reach if its networks were exact? Each iteration this computes the
current strategies by regret matching on a cumulative regret table (the best action where
no regret is positive, as `lcjax.cfr.regret.regret_matching` does), the exact values of
those strategies on the game tree, and then draws `--traversals` traversals per player the
way the value scheme does with no sampling bot: the traverser plays uniformly, the
opponent its current strategy; every traverser node adds the regret sample
q(h, a) - sum_b sigma(b) q(h, b), weighted t ** advantage_power, to its information set's
row, every opponent node adds its strategy, weighted t ** strategy_power, to the average.

`--order alternating` updates player 0's regrets before player 1 traverses (as the solver
does); the values player 1's samples read are those of the iteration's start unless
`--fresh-value` (the solver's `traversal.value.fit_each_player`). `--order simultaneous`
draws both players' samples from the same strategies. `--full-width` replaces the sampling
by exact counterfactual regrets and reach-weighted averages (tabular CFR with the same
weights). `--noise s` adds Gaussian noise of RMS s, in return-scale units, to the mean
regret table the strategies are computed from (fresh each iteration, or one draw for the
whole run with `--fixed-noise`): a stand-in for the advantage networks' error, to be
compared with the fit error the solver's networks actually have.

Prints the exploitability of the average strategy every `--every` iterations and writes
them as JSON (`--json`).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from lcjax.cfr import exploitability as ex
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker

GAMES = {"kuhn": KuhnPoker, "leduc": LeducPoker}


def regret_matching(regrets: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float64[I, A]: positive regrets normalized; all best actions where none is positive.

    The rule of `lcjax.cfr.regret.regret_matching`, in float64 numpy: that one computes in
    float32, whose rounding would change which actions the replay samples.
    """
    positive = np.where(mask, np.maximum(regrets, 0.0), 0.0)
    total = positive.sum(-1, keepdims=True)
    legal = np.where(mask, regrets, -np.inf)
    best = mask & (legal == legal.max(-1, keepdims=True))
    greedy = best / best.sum(-1, keepdims=True)
    return np.where(total > 0, positive / np.where(total > 0, total, 1.0), greedy)


def replay(args: argparse.Namespace) -> list[dict]:
    """Runs the replay; returns one row {iteration, exploitability, seconds} per measurement."""
    game = GAMES[args.game]()
    tree = ex.game_tree(game)
    mask = tree.infoset_mask
    num_infosets, num_actions = mask.shape
    roots = np.flatnonzero(tree.parent < 0)
    scale = float(getattr(game, "return_scale", 1.0) or 1.0)
    rng = np.random.default_rng(args.seed)
    regret_sum = np.zeros((num_infosets, num_actions))
    regret_weight = np.zeros(num_infosets)  # the samples' total weight per set (mean = sum / weight)
    strategy_sum = np.zeros((num_infosets, num_actions))
    fixed = rng.standard_normal(regret_sum.shape)

    def strategies() -> np.ndarray:
        if args.noise == 0:
            return regret_matching(regret_sum, mask)
        mean = regret_sum / np.maximum(regret_weight, 1e-300)[:, None] / scale
        noise = fixed if args.fixed_noise else rng.standard_normal(mean.shape)
        return regret_matching(mean + args.noise * noise, mask)

    def full_width(player: int, sigma: np.ndarray, values: np.ndarray, wa: float, ws: float) -> None:
        reach = ex._reaches(tree, sigma)
        nodes = np.flatnonzero((tree.player == player) & ~tree.terminal)
        sets = tree.infoset[nodes]
        children = tree.children[nodes]
        q = np.where(children >= 0, values[np.maximum(children, 0), player], 0.0)
        regrets = np.where(children >= 0, q - values[nodes, player][:, None], 0.0)
        np.add.at(regret_sum, sets, wa * reach[nodes, 1 - player][:, None] * regrets)
        np.add.at(regret_weight, sets, wa)
        np.add.at(strategy_sum, sets, ws * reach[nodes, player][:, None] * sigma[sets])

    def sampled(player: int, sigma: np.ndarray, values: np.ndarray, wa: float, ws: float) -> None:
        node = roots[rng.integers(len(roots), size=args.traversals)]
        while True:
            live = ~tree.terminal[node]
            if not live.any():
                return
            n = node[live]
            sets = tree.infoset[n]
            legal = mask[sets]
            traverser = tree.player[n] == player
            probs = np.where(traverser[:, None], legal / legal.sum(-1, keepdims=True), sigma[sets])
            cumulative = np.cumsum(probs, -1)
            u = rng.random(len(n))[:, None] * cumulative[:, -1:]
            action = np.minimum((cumulative <= u).sum(-1), num_actions - 1)
            # Guard against rounding picking an illegal action: take the last legal one.
            action = np.where(legal[np.arange(len(n)), action], action, num_actions - 1 - np.argmax(legal[:, ::-1], -1))
            if traverser.any():
                t_nodes, t_sets = n[traverser], sets[traverser]
                children = tree.children[t_nodes]
                q = np.where(children >= 0, values[np.maximum(children, 0), player], 0.0)
                baseline = (sigma[t_sets] * q).sum(-1, keepdims=True)
                np.add.at(regret_sum, t_sets, wa * np.where(children >= 0, q - baseline, 0.0))
                np.add.at(regret_weight, t_sets, wa)
            if (~traverser).any():
                o_sets = sets[~traverser]
                np.add.at(strategy_sum, o_sets, ws * sigma[o_sets])
            node = node.copy()
            node[live] = tree.children[n, action]

    rows = []
    start = time.perf_counter()
    for t in range(1, args.iterations + 1):
        wa, ws = float(t) ** args.advantage_power, float(t) ** args.strategy_power
        sigma = strategies()
        values = ex._expected_values(tree, sigma)
        for player in (0, 1):
            if player == 1 and args.order == "alternating":
                sigma = strategies()
                if args.fresh_value:
                    values = ex._expected_values(tree, sigma)
            (full_width if args.full_width else sampled)(player, sigma, values, wa, ws)
        if t % args.every == 0 or t == args.iterations:
            total = strategy_sum.sum(-1, keepdims=True)
            average = np.where(total > 0, strategy_sum / np.where(total > 0, total, 1.0), mask / mask.sum(-1, keepdims=True))
            value = ex.exploitability(game, ex.tabular_policy_fn(tree, average))
            rows.append({"iteration": t, "exploitability": value, "seconds": time.perf_counter() - start})
            print(f"it {t:5d}  exploitability {value:.4f}", flush=True)
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--game", choices=sorted(GAMES), default="leduc")
    p.add_argument("--iterations", type=int, default=600)
    p.add_argument("--traversals", type=int, default=1024, help="traversals per player per iteration")
    p.add_argument("--advantage-power", type=float, default=2.0, help="regret samples weigh t ** this")
    p.add_argument("--strategy-power", type=float, default=0.5, help="strategy samples weigh t ** this")
    p.add_argument("--order", choices=("alternating", "simultaneous"), default="alternating")
    p.add_argument("--fresh-value", action="store_true", help="recompute the values for player 1 (alternating)")
    p.add_argument("--full-width", action="store_true", help="exact regrets and averages instead of samples")
    p.add_argument("--noise", type=float, default=0.0, help="RMS noise on the mean regrets (return-scale units)")
    p.add_argument("--fixed-noise", action="store_true", help="one noise draw for the whole run")
    p.add_argument("--every", type=int, default=50, help="measure every this many iterations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the measurements here")
    args = p.parse_args(argv)
    for name in ("iterations", "traversals", "every"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.noise < 0:
        p.error("--noise must be >= 0")
    return args


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    rows = replay(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "curve": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
