"""scripts/plot_metrics.py writes its four figures for Lost Cities and small-game runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "plot_metrics.py"
spec = importlib.util.spec_from_file_location("plot_metrics", SCRIPT)
plot_metrics = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_metrics)


def _write_run(path: Path, rows: list[dict]) -> Path:
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(i: int, **extra) -> dict:
    return {
        "iteration": i,
        "loss/advantage_0": 1.0 / i,
        "loss/advantage_1": 2.0 / i,
        "loss/strategy": 0.5 / i,
        "time/traversal_seconds": 1.0,
        "time/advantage_train_seconds": 2.0,
        "time/strategy_train_seconds": 0.5,
        **extra,
    }


def test_lost_cities_run(tmp_path):
    rows = [_row(i) for i in range(1, 6)]
    for r in rows[1::2]:
        for opp in ("random", "safe_heuristic"):
            r.update({f"eval/{opp}/win_rate": 0.5, f"eval/{opp}/win_rate_ci95_low": 0.4,
                      f"eval/{opp}/win_rate_ci95_high": 0.6, f"eval/{opp}/score_diff": -3.0,
                      f"eval/{opp}/score_diff_ci95_low": -5.0, f"eval/{opp}/score_diff_ci95_high": -1.0})
        for readout in ("average_greedy", "current"):
            r.update({f"readout/{readout}/random/score_diff": 2.0, f"readout/{readout}/random/win_rate": 0.6})
        r.update({"diag/advantage_0/correlation": 0.1 * r["iteration"], "diag/advantage_1/correlation": 0.2,
                  "diag/advantage_0/argmax_agreement": 0.3, "diag/advantage_1/argmax_agreement": 0.4})
    run = _write_run(tmp_path / "run", rows)
    assert plot_metrics.main([str(run)]) == 0
    for name in ("evaluation.png", "losses.png", "time_split.png", "learning_curve.png"):
        png = run / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_small_game_run_and_bad_input(tmp_path, capsys):
    run = _write_run(tmp_path / "kuhn", [_row(i, **{"eval/exploitability": 0.3 / i}) for i in range(1, 4)])
    assert plot_metrics.main([str(run), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "evaluation.png").exists()
    assert plot_metrics.main([str(tmp_path / "missing")]) == 2
    assert "metrics.jsonl" in capsys.readouterr().err


def test_training_minutes_add_up_all_phases():
    rows = [
        {"iteration": 1, "time/iteration_seconds": 60.0, "time/evaluation_seconds": 30.0, "time/checkpoint_seconds": 30.0},
        {"iteration": 2, "time/traversal_seconds": 30.0, "time/advantage_train_seconds": 30.0},
    ]
    assert plot_metrics.training_minutes(rows) == {1: 2.0, 2: 3.0}


def test_learning_curve_plots_readouts_and_diagnostics(tmp_path, monkeypatch):
    # The primary policy's own read-off (the same matches as eval/...) is not drawn twice.
    rows = [_row(i, **{"eval/random/score_diff": -1.0 * i, "readout/average/random/score_diff": -1.0 * i,
                       "readout/average_greedy/random/score_diff": 0.5 * i,
                       "readout/current/random/score_diff": 1.0 * i,
                       "diag/advantage_0/correlation": 0.1 * i, "diag/advantage_1/argmax_agreement": 0.5})
            for i in range(1, 4)]
    plotted = []
    real_subplots = plot_metrics.plt.subplots

    def spy_subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        plotted.append(axes)
        return fig, axes

    monkeypatch.setattr(plot_metrics.plt, "subplots", spy_subplots)
    path = plot_metrics.plot_learning_curve(rows, tmp_path, "average")
    assert path.exists()
    ax_s, ax_d = plotted[-1]
    lines_s = {line.get_label(): line for line in ax_s.get_lines() if not line.get_label().startswith("_")}
    assert list(lines_s) == ["random (average)", "random (average_greedy)", "random (current)"]
    # One color per opponent, one line style per read-off.
    assert len({line.get_color() for line in lines_s.values()}) == 1
    assert len({line.get_linestyle() for line in lines_s.values()}) == 3
    lines_d = {line.get_label(): line for line in ax_d.get_lines()}
    assert set(lines_d) == {"advantage_0/correlation", "advantage_1/argmax_agreement"}
    # x is training minutes: 3.5 s of phases per row in `_row`.
    x = lines_d["advantage_0/correlation"].get_xdata()
    np.testing.assert_allclose(x, [3.5 / 60, 7.0 / 60, 10.5 / 60])
    np.testing.assert_allclose(lines_d["advantage_0/correlation"].get_ydata(), [0.1, 0.2, 0.3])


def test_primary_policy_is_read_from_the_run_config(tmp_path):
    assert plot_metrics._primary_policy(tmp_path) == "policy"  # no config.yaml
    (tmp_path / "config.yaml").write_text("evaluation:\n  policy: current\n")
    assert plot_metrics._primary_policy(tmp_path) == "current"
