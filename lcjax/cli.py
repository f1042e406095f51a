"""The `lcjax` command line.

    lcjax match --a safe_heuristic --b random --games 1000

Subcommands:
  match   play two Lost Cities bots against each other (seats alternate) and print win
          rates and score differences with 95% confidence intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _cmd_match(args: argparse.Namespace) -> int:
    import jax

    from lcjax.env.arena import play_games, summarize
    from lcjax.env.bots import BOT_NAMES, make_bot
    from lcjax.env.lost_cities import LostCities, Rules

    for flag, name in (("--a", args.a), ("--b", args.b)):
        if name not in BOT_NAMES:
            print(f"error: {flag} {name!r} is not a bot; choose from: {', '.join(BOT_NAMES)}", file=sys.stderr)
            return 2
    try:
        rules = Rules(n_colors=args.colors, max_turns=args.max_turns)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    game = LostCities(rules)
    bot_a, bot_b = make_bot(args.a, game), make_bot(args.b, game)
    start = time.perf_counter()
    result = play_games(game, bot_a, bot_b, jax.random.key(args.seed), args.games)
    seconds = time.perf_counter() - start
    summary = summarize(result)
    _print_match(args.a, args.b, summary, seconds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"a": args.a, "b": args.b, "seed": args.seed, "n_colors": args.colors, **summary}, f, indent=2)
        print(f"wrote {args.json}")
    return 0


def _print_match(a: str, b: str, s: dict, seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{a} (A) vs {b} (B), {s['n_games']} games, seats alternated")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    lo, hi = s["win_rate_a_ci95"]
    table.add_row("win rate A", f"{s['win_rate_a']:.1%}", f"[{lo:.1%}, {hi:.1%}]")
    table.add_row("draw rate", f"{s['draw_rate']:.1%}", "")
    table.add_row("loss rate A", f"{s['loss_rate_a']:.1%}", "")
    lo, hi = s["mean_diff_ci95"]
    table.add_row("score difference (A - B)", f"{s['mean_diff']:+.1f}", f"[{lo:+.1f}, {hi:+.1f}]")
    table.add_row("mean score A", f"{s['mean_score_a']:.1f}", "")
    table.add_row("mean score B", f"{s['mean_score_b']:.1f}", "")
    table.add_row("turns per game", f"{s['mean_turns']:.1f}", "")
    table.add_row("turn-cap rate", f"{s['cap_hit_rate']:.1%}", "")
    console = Console()
    console.print(table)
    console.print(f"played in {seconds:.1f} s (compilation included)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lcjax", description="Deep CFR for Lost Cities, in JAX.")
    sub = parser.add_subparsers(dest="command", required=True)

    match = sub.add_parser("match", help="play two bots against each other")
    match.add_argument("--a", default="safe_heuristic", help="bot A (default: safe_heuristic)")
    match.add_argument("--b", default="random", help="bot B (default: random)")
    match.add_argument("--games", type=_positive_int, default=1000, help="number of games (default: 1000)")
    match.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")
    match.add_argument("--colors", type=int, default=5, help="n_colors, 6 = purple variant (default: 5)")
    match.add_argument("--max-turns", type=_positive_int, default=200, help="turn cap (default: 200)")
    match.add_argument("--json", help="also write the summary to this JSON file")
    match.set_defaults(func=_cmd_match)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
