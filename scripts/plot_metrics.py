"""Plot a training run's metrics.jsonl as PNG figures.

    python scripts/plot_metrics.py runs/<run> [--out DIR]

Writes into DIR (default: RUN_DIR/plots):
  evaluation.png   win rate and mean score difference per opponent over iterations, with
                   95% confidence bands (or exploitability, for Kuhn and Leduc runs)
  losses.png       advantage and strategy losses per iteration (log scale)
  time_split.png   seconds per phase per iteration, stacked
  learning_curve.png  against training minutes (wall-clock, evaluation and checkpoints
                   included): the mean score difference per opponent (one color each; the
                   primary policy of config.yaml solid, each other evaluation.readouts
                   read-off in a line style of its own; or exploitability, for Kuhn and
                   Leduc), and the probe diagnostics of lcjax.diagnostics (each
                   advantage network's correlation with the reference values, and its argmax
                   agreement)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402

PHASES = ("traversal", "memory_add", "advantage_train", "strategy_train", "evaluation", "checkpoint")


def load_rows(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} a run directory?")
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def series(rows: list[dict], key: str):
    """(iterations, values) of the rows that have a numeric `key`."""
    pts = [(r["iteration"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _line_with_band(ax, rows: list[dict], key: str, label: str) -> None:
    """Plot `key` over iterations with its `<key>_ci95_low/high` band when logged."""
    x, y = series(rows, key)
    _, lo = series(rows, f"{key}_ci95_low")
    _, hi = series(rows, f"{key}_ci95_high")
    (line,) = ax.plot(x, y, marker=".", label=label)
    if len(lo) == len(x) and len(hi) == len(x):
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _log_axes(ax, ylabel: str) -> None:
    """A log-scale y axis over iterations."""
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def plot_evaluation(rows: list[dict], out: Path) -> Path:
    path = out / "evaluation.png"
    xs, ys = series(rows, "eval/exploitability")
    if xs:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(xs, ys, marker=".")
        _log_axes(ax, "exploitability (chips)")
        return _save(fig, path)
    opponents = sorted({k.split("/")[1] for r in rows for k in r if k.startswith("eval/") and k.endswith("/win_rate")})
    fig, (ax_w, ax_d) = plt.subplots(1, 2, figsize=(12, 4.5))
    for opp in opponents:
        _line_with_band(ax_w, rows, f"eval/{opp}/win_rate", opp)
        _line_with_band(ax_d, rows, f"eval/{opp}/score_diff", opp)
    ax_w.set_ylabel("win rate")
    ax_w.set_ylim(0, 1)
    ax_d.set_ylabel("mean score difference")
    ax_d.axhline(0, color="black", lw=0.8)
    for ax in (ax_w, ax_d):
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
        if opponents:
            ax.legend()
    fig.suptitle("evaluation (95% confidence bands)")
    return _save(fig, path)


def plot_losses(rows: list[dict], out: Path) -> Path:
    path = out / "losses.png"
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in sorted({k for r in rows for k in r if k.startswith("loss/")}):
        x, y = series(rows, key)
        ax.plot(x, y, marker=".", label=key.split("/", 1)[1])
    _log_axes(ax, "training loss")
    ax.legend()
    return _save(fig, path)


def plot_time_split(rows: list[dict], out: Path) -> Path:
    path = out / "time_split.png"
    its = [r["iteration"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * len(rows)
    for phase in PHASES:
        vals = [float(r.get(f"time/{phase}_seconds") or 0.0) for r in rows]
        ax.bar(its, vals, bottom=bottom, label=phase, width=1.0)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xlabel("iteration")
    ax.set_ylabel("seconds")
    ax.set_title("time per phase")
    ax.legend(fontsize=8)
    return _save(fig, path)


def training_minutes(rows: list[dict]) -> dict[int, float]:
    """{iteration: wall-clock minutes from the run's start to the end of that row}: the
    iteration's seconds (or its training phases', when not logged) plus its evaluation and
    checkpoint seconds, summed over the rows so far."""
    total, out = 0.0, {}
    for r in rows:
        seconds = r.get("time/iteration_seconds")
        if not isinstance(seconds, (int, float)):
            seconds = sum(float(r.get(f"time/{p}_seconds") or 0.0) for p in PHASES if p not in ("evaluation", "checkpoint"))
        total += seconds + float(r.get("time/evaluation_seconds") or 0.0) + float(r.get("time/checkpoint_seconds") or 0.0)
        out[r["iteration"]] = total / 60.0
    return out


def _against_minutes(rows: list[dict], key: str, minutes: dict[int, float]):
    x, y = series(rows, key)
    return [minutes[i] for i in x], y


def plot_learning_curve(rows: list[dict], out: Path, policy: str = "policy") -> Path:
    path = out / "learning_curve.png"
    minutes = training_minutes(rows)
    keys = {k for r in rows for k in r}
    fig, (ax_s, ax_d) = plt.subplots(1, 2, figsize=(12, 4.5))
    if "eval/exploitability" in keys:
        for key in sorted(k for k in keys if k.endswith("exploitability")):
            label = "policy" if key.startswith("eval/") else key.split("/")[1]
            ax_s.plot(*_against_minutes(rows, key, minutes), marker=".", ls="-" if label == "policy" else "--", label=label)
        _log_axes(ax_s, "exploitability (chips)")
    else:
        colors: dict[str, str] = {}
        for key in sorted(k for k in keys if k.startswith("eval/") and k.endswith("/score_diff")):
            opp = key.split("/")[1]
            (line,) = ax_s.plot(*_against_minutes(rows, key, minutes), marker=".", label=f"{opp} ({policy})")
            colors[opp] = line.get_color()
        # One color per opponent, one line style per read-off; a read-off whose series is the
        # primary policy's (the same matches) is not drawn twice.
        styles = iter(("--", ":", "-.", (0, (5, 1, 1, 1))))
        style_of: dict[str, object] = {}
        for key in sorted(k for k in keys if k.startswith("readout/") and k.endswith("/score_diff")):
            _, readout, opp, _ = key.split("/")
            xy = _against_minutes(rows, key, minutes)
            if xy == _against_minutes(rows, f"eval/{opp}/score_diff", minutes):
                continue
            if readout not in style_of:
                style_of[readout] = next(styles, "--")
            ax_s.plot(*xy, ls=style_of[readout], lw=1.2, marker=".", ms=4, color=colors.get(opp), label=f"{opp} ({readout})")
        ax_s.set_ylabel("mean score difference")
        ax_s.axhline(0, color="black", lw=0.8)
    diag = sorted(k for k in keys if k.startswith("diag/") and k.endswith(("/correlation", "/argmax_agreement")))
    for key in diag:
        name = key.split("/", 1)[1]
        ax_d.plot(*_against_minutes(rows, key, minutes), marker=".", ls="-" if key.endswith("correlation") else ":", label=name)
    ax_d.set_ylabel("probe diagnostics (correlation, argmax agreement)")
    if not diag:
        ax_d.text(0.5, 0.5, "no diagnostics logged", ha="center", va="center", transform=ax_d.transAxes)
    for ax in (ax_s, ax_d):
        ax.set_xlabel("training minutes")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle("learning curve")
    return _save(fig, path)


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> list[Path]:
    """Write the four figures for `run_dir`; returns their paths."""
    run_dir = Path(run_dir)
    rows = load_rows(run_dir)
    if not rows:
        raise ValueError(f"{run_dir}/metrics.jsonl has no rows yet")
    out = Path(out) if out else run_dir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    return [plot_evaluation(rows, out), plot_losses(rows, out), plot_time_split(rows, out), plot_learning_curve(rows, out, _primary_policy(run_dir))]


def _primary_policy(run_dir: Path) -> str:
    """The run's evaluation.policy (the eval/... rows' read-off), from its config.yaml."""
    try:
        with open(run_dir / "config.yaml") as f:
            return str(yaml.safe_load(f)["evaluation"]["policy"])
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return "policy"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run directory holding metrics.jsonl")
    parser.add_argument("--out", help="output directory (default: RUN_DIR/plots)")
    args = parser.parse_args(argv)
    try:
        paths = plot_run(args.run_dir, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for p in paths:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
