"""The `lcjax` command line.

    lcjax train --config configs/deep_cfr/smoke.yaml
    lcjax evaluate --checkpoint runs/<run> --opponents random,safe_heuristic
    lcjax play --checkpoint runs/<run> --seat 0
    lcjax match --a safe_heuristic --b random --games 1000

Subcommands:
  train     run (or resume) Deep CFR training from a YAML config
  evaluate  evaluate a run's checkpoint against bots or another run
  play      play against a trained agent in the terminal
  match     play two Lost Cities bots against each other (seats alternate) and print win
            rates and score differences with 95% confidence intervals

Errors in the input (configs, checkpoints, names) print one line starting with "error:"
and exit with status 2; nothing is overwritten.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from lcjax.argtypes import positive_int


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


# ----------------------------------------------------------------------------- train
class _TrainDisplay:
    """A live progress panel fed by the run driver's events.

    The panel appears at the driver's "start" event, which comes after every check of the
    config, run directory and checkpoint: a run that cannot start prints only its error.
    """

    def __init__(self, console, max_minutes):
        from rich.live import Live

        self.console = console
        self.max_minutes = max_minutes
        self.start = time.monotonic()
        self.phase = "starting"
        self.iteration = 0
        self.max_iterations = 0
        self.row: dict = {}
        self.last_eval: dict = {}
        self.durations: list[float] = []
        self.live = Live(self._render(), console=console, refresh_per_second=2, transient=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.live.is_started:
            return False
        self.live.update(self._render())
        return self.live.__exit__(*exc)

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "start":
            self.start = time.monotonic()
            self.live.start(refresh=True)
            self.iteration = event["iteration"]
            self.max_iterations = event["max_iterations"]
            self.console.print(f"run directory: {event['run_dir']}")
        elif kind == "phase":
            steps = f", {event['steps']:,} Adam steps" if "steps" in event else ""
            self.phase = f"{event['phase']}{steps} (iteration {event['iteration']})"
        elif kind == "iteration":
            self.row = event["row"]
            self.last_eval = event["last_eval"]
            self.iteration = self.row["iteration"]
            self.durations.append(self.row.get("time/iteration_seconds", 0.0))
            self.phase = "iteration done"
        elif kind == "warning":
            self.console.print(f"[yellow]warning:[/] {event['message']}")
        elif kind == "end":
            self.phase = f"stopped ({event['stopped_by']})"
        self.live.update(self._render())

    def _render(self):
        from rich.table import Table

        elapsed = time.monotonic() - self.start
        table = Table(show_header=False, box=None)
        table.add_row("iteration", f"{self.iteration} / {self.max_iterations}")
        table.add_row("phase", self.phase)
        table.add_row("elapsed", _hms(elapsed))
        left = []
        if self.durations and self.max_iterations:
            recent = self.durations[-5:]
            left.append(sum(recent) / len(recent) * max(self.max_iterations - self.iteration, 0))
        if self.max_minutes:
            left.append(max(self.max_minutes * 60 - elapsed, 0.0))
        table.add_row("time left", _hms(min(left)) if left else "?")
        if self.row:
            table.add_row("nodes/s", f"{self.row.get('traversal/nodes_per_second', 0):,.0f}")
            losses = [f"{k.split('/')[1]}={v:.4g}" for k, v in self.row.items() if k.startswith("loss/") and v is not None]
            table.add_row("losses", ", ".join(losses))
        for key, value in sorted(self.last_eval.items()):
            # The primary policy's results, each read-off's score difference, and the
            # diagnostics' correlations: the rest is in metrics.jsonl and the final table.
            shown = key.startswith("eval/") and key.endswith(("/win_rate", "/score_diff", "exploitability"))
            shown |= key.startswith("readout/") and key.endswith(("/score_diff", "exploitability"))
            shown |= key.startswith("diag/") and key.endswith("/correlation")
            if shown and value is not None:
                table.add_row(key, f"{value:.4g}")
        return table


def _hms(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _eval_rows(metrics: dict) -> list[tuple[str, str, dict]]:
    """(read-off, opponent, {metric: value}) for the primary `eval/` rows (read-off "") and
    every `readout/<readout>/` row, in the order they were measured."""
    groups: dict[tuple[str, str], dict] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if parts[0] == "eval" and len(parts) == 3:
            groups.setdefault(("", parts[1]), {})[parts[2]] = value
        elif parts[0] == "readout" and len(parts) == 4:
            groups.setdefault((parts[1], parts[2]), {})[parts[3]] = value
    return [(readout, opp, m) for (readout, opp), m in groups.items()]


def _print_eval_table(console, metrics: dict, title: str, primary: str = "") -> None:
    from rich.table import Table

    if "eval/exploitability" in metrics:
        console.print(f"{title}: exploitability {metrics['eval/exploitability']:.5f} chips")
        for key, value in metrics.items():
            if key.startswith("readout/") and key.endswith("/exploitability"):
                console.print(f"  {key.split('/')[1]} read-off: exploitability {value:.5f} chips")
        return
    rows = _eval_rows(metrics)
    readouts = {r for r, _, _ in rows if r}
    # The primary policy's rows that are also a read-off's (the same matches) are shown once;
    # its extended opponents (eval/ keys only) stay.
    duplicate = {opp for r, opp, _ in rows if r == primary and primary}
    rows = [row for row in rows if row[0] or row[1] not in duplicate]
    # Grouped by read-off, the primary policy first (stable: opponents keep their order).
    labels = list(dict.fromkeys([primary] + [r for r, _, _ in rows if r]))
    rows.sort(key=lambda row: labels.index(row[0] or primary))
    table = Table(title=title)
    columns = ("opponent", "games", "win rate", "score diff [95% CI]", "score", "opened", "neg. exp.", "bonus", "wagers", "turns", "cap")
    for col in (("read-off",) if readouts else ()) + columns:
        table.add_column(col, justify="right")
    for readout, opp, m in rows:
        cells = (
            opp,
            f"{m.get('games', 0):.0f}",
            f"{m['win_rate']:.1%}",
            f"{m['score_diff']:+.1f} [{m['score_diff_ci95_low']:+.1f}, {m['score_diff_ci95_high']:+.1f}]",
            f"{m['score']:.1f}",
            f"{m.get('opened_colors', float('nan')):.2f}",
            f"{m.get('negative_expedition_rate', float('nan')):.1%}",
            f"{m.get('bonus_rate', float('nan')):.1%}",
            f"{m.get('wagers_played', float('nan')):.2f}",
            f"{m['turns']:.1f}",
            f"{m['cap_hit_rate']:.1%}",
        )
        table.add_row(*(((readout or primary or "policy"),) if readouts else ()) + cells)
    console.print(table)
    diag = {k: v for k, v in metrics.items() if k.startswith("diag/") and isinstance(v, (int, float))}
    if diag:
        console.print("diagnostics: " + ", ".join(f"{k[5:]} {v:.3f}" for k, v in diag.items()))


def _console():
    """A rich console; wide enough for the evaluation table when output is not a terminal."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and console.width < 150:
        console = Console(width=150)
    return console


def _cmd_train(args: argparse.Namespace) -> int:
    from lcjax.config import load_config
    from lcjax.run import train

    console = _console()
    config = None
    if args.config:
        config = load_config(args.config, args.set or [])
    elif not args.resume:
        raise UsageError("--config is required unless --resume is given")
    elif args.set:
        raise UsageError("--set needs --config when resuming (the run's config.yaml is used otherwise)")
    max_minutes = config.run.max_minutes if config else None
    with _TrainDisplay(console, max_minutes) as display:
        result = train(config, resume=args.resume, runs_root=args.runs_root, name=args.name, progress=display)
    console.print()
    console.print(f"stopped after iteration {result.iteration} ({result.stopped_by}); run directory: {result.run_dir}")
    if result.last_eval:
        policy = config.evaluation.policy if config else ""
        _print_eval_table(console, result.last_eval, f"evaluation at iteration {result.last_eval_iteration}", policy)
    return 130 if result.stopped_by == "interrupt" else 0


# ----------------------------------------------------------------------------- evaluate
def _parse_policies(text: str) -> list[str]:
    """The read-offs of `--policy`: one name or a comma-separated list of them."""
    from lcjax.evaluate import READOUTS

    names = [part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if n not in READOUTS]
    if not names or bad:
        raise UsageError(f"--policy {text!r}: each read-off must be one of: {', '.join(READOUTS)}")
    if len(set(names)) != len(names):
        raise UsageError(f"--policy {text!r}: a read-off is listed twice")
    return names


def _evaluate_metrics(args, solver, state, config, policies: list[str]) -> dict:
    """The metrics `lcjax evaluate` prints: the first read-off's `eval/` keys, and with more
    than one read-off every read-off's `readout/<readout>/` keys too."""
    import jax

    from lcjax.env.bots import BOT_NAMES
    from lcjax.env.registry import info_of
    from lcjax.evaluate import evaluate_against_bots, evaluate_exploitability, evaluate_head_to_head, evaluate_readouts
    from lcjax.run import load_run

    key = jax.random.key(args.seed)
    primary = policies[0]
    games = args.games or config.evaluation.games
    if info_of(solver.game).exact_evaluation:
        metrics = evaluate_exploitability(solver, state, policy=primary)
        opponents: list[str] = []
    elif args.against:
        if len(policies) > 1:
            raise UsageError("--against plays one read-off; give --policy a single name")
        other_solver, other_state, other_config = load_run(args.against, args.against_step)
        if other_solver.game.rules != solver.game.rules:
            raise UsageError("--against: the two runs play different rules")
        return evaluate_head_to_head(solver, state, other_solver, other_state, games, key, policy=primary)
    else:
        opponents = args.opponents.split(",") if args.opponents else list(config.evaluation.opponents)
        bad = [o for o in opponents if o not in BOT_NAMES]
        if bad:
            raise UsageError(f"--opponents: unknown bot {bad[0]!r}; choose from: {', '.join(BOT_NAMES)}")
        metrics = evaluate_against_bots(solver, state, opponents, games, key, policy=primary)
    if len(policies) > 1:
        metrics.update(evaluate_readouts(solver, state, policies, opponents, games, key, known={primary: metrics}))
    return metrics


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from lcjax.run import load_run

    console = _console()
    policies = _parse_policies(args.policy)
    solver, state, config = load_run(args.checkpoint, args.step)
    step = int(state.iteration)
    metrics = _evaluate_metrics(args, solver, state, config, policies)
    primary = policies[0] if len(policies) > 1 else ""
    _print_eval_table(console, metrics, f"{args.checkpoint} at iteration {step} ({args.policy} policy)", primary)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"checkpoint": str(args.checkpoint), "iteration": step, "policy": args.policy, **metrics}, f, indent=2)
        console.print(f"wrote {args.json}")
    return 0


# ----------------------------------------------------------------------------- play
def _cmd_play(args: argparse.Namespace) -> int:
    import jax
    import jax.numpy as jnp

    from lcjax.env.registry import info_of
    from lcjax.env.render import render, render_legal_actions
    from lcjax.evaluate import agent_act
    from lcjax.run import load_run

    solver, state, _ = load_run(args.checkpoint, args.step)
    game = solver.game
    if not info_of(game).human_play:
        raise UsageError(f"play needs a Lost Cities run, not {info_of(game).name}")
    act, params_of = agent_act(solver, args.policy)
    agent = jax.jit(act)
    params = params_of(state)
    step, scores = jax.jit(game.step), jax.jit(game.scores)
    key = jax.random.key(args.seed)
    key, deal = jax.random.split(key)
    s = jax.jit(game.init)(deal)
    human = args.seat
    print(f"You are seat {human} ({'first' if human == 0 else 'second'} to move). Type a move number, or q to quit.")
    while not bool(s.terminated):
        if int(s.current_player) == human:
            print()
            print(render(game, s, human))
            moves = render_legal_actions(game, s)
            for i, (_, name) in enumerate(moves):
                print(f"  {i:>2}: {name}")
            choice = None
            while choice is None:
                try:
                    text = input("your move> ").strip()
                except EOFError:
                    print("\nbye")
                    return 0
                if text.lower() in ("q", "quit", "exit"):
                    print("bye")
                    return 0
                if text.isdigit() and int(text) < len(moves):
                    choice = moves[int(text)][0]
                else:
                    print(f"please type a number from 0 to {len(moves) - 1}, or q to quit")
            s = step(s, jnp.int32(choice))
        else:
            key, sub = jax.random.split(key)
            a = int(agent(params, sub, s))
            print(f"agent: {game.action_name(a, s)}")
            s = step(s, jnp.int32(a))
    final = [int(x) for x in scores(s)]
    print()
    print(render(game, s, human))
    you, them = final[human], final[1 - human]
    verdict = "you win" if you > them else "the agent wins" if them > you else "a draw"
    print(f"final score: you {you}, agent {them}: {verdict}")
    return 0


class UsageError(ValueError):
    """A bad command-line value; printed as one line."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lcjax", description="Deep CFR for Lost Cities, in JAX.")
    sub = parser.add_subparsers(dest="command", required=True)

    tr = sub.add_parser("train", help="run or resume Deep CFR training")
    tr.add_argument("--config", help="YAML config (e.g. configs/deep_cfr/smoke.yaml)")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value, e.g. traversal.traversals_per_player=512 (repeatable)")
    tr.add_argument("--name", help="run name (default: run.name from the config)")
    tr.add_argument("--resume", metavar="RUN_DIR", help="continue this run from its latest checkpoint")
    tr.add_argument("--runs-root", default="runs", help="where run directories are created (default: runs)")
    tr.set_defaults(func=_cmd_train)

    ev = sub.add_parser("evaluate", help="evaluate a run's checkpoint")
    ev.add_argument("--checkpoint", required=True, metavar="RUN_DIR", help="the run directory")
    ev.add_argument("--step", type=int, help="checkpoint iteration (default: the latest)")
    ev.add_argument("--opponents", help="comma-separated bots (default: the run's evaluation.opponents)")
    ev.add_argument("--games", type=positive_int, help="games per opponent (default: the run's evaluation.games)")
    readouts = "average (strategy network), current (regret matching), average_greedy or current_greedy (argmax)"
    ev.add_argument("--policy", default="average", help=f"read-off: {readouts}; a comma-separated list evaluates each")
    ev.add_argument("--against", metavar="OTHER_RUN_DIR", help="play against another run's checkpoint instead of bots")
    ev.add_argument("--against-step", type=int, help="checkpoint iteration of --against (default: latest)")
    ev.add_argument("--seed", type=int, default=0, help="PRNG seed of the games (default: 0)")
    ev.add_argument("--json", help="also write the metrics to this JSON file")
    ev.set_defaults(func=_cmd_evaluate)

    pl = sub.add_parser("play", help="play against a trained agent in the terminal")
    pl.add_argument("--checkpoint", required=True, metavar="RUN_DIR", help="the run directory")
    pl.add_argument("--step", type=int, help="checkpoint iteration (default: the latest)")
    pl.add_argument("--seat", type=int, choices=(0, 1), default=0, help="your seat: 0 moves first (default: 0)")
    pl.add_argument("--policy", default="average", choices=("average", "current"), help="the agent's policy")
    pl.add_argument("--seed", type=int, default=0, help="PRNG seed of the deal and the agent (default: 0)")
    pl.set_defaults(func=_cmd_play)

    match = sub.add_parser("match", help="play two bots against each other")
    match.add_argument("--a", default="safe_heuristic", help="bot A (default: safe_heuristic)")
    match.add_argument("--b", default="random", help="bot B (default: random)")
    match.add_argument("--games", type=positive_int, default=1000, help="number of games (default: 1000)")
    match.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")
    match.add_argument("--colors", type=int, default=5, help="n_colors, 6 = purple variant (default: 5)")
    match.add_argument("--max-turns", type=positive_int, default=200, help="turn cap (default: 200)")
    match.add_argument("--json", help="also write the summary to this JSON file")
    match.set_defaults(func=_cmd_match)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from lcjax.checkpoint import CheckpointError
    from lcjax.config import ConfigError
    from lcjax.run import RunError

    try:
        return args.func(args)
    except (UsageError, ConfigError, RunError, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
