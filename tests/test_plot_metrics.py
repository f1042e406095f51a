"""scripts/plot_metrics.py writes its three figures for Lost Cities and small-game runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

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
    run = _write_run(tmp_path / "run", rows)
    assert plot_metrics.main([str(run)]) == 0
    for name in ("evaluation.png", "losses.png", "time_split.png"):
        png = run / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_small_game_run_and_bad_input(tmp_path, capsys):
    run = _write_run(tmp_path / "kuhn", [_row(i, **{"eval/exploitability": 0.3 / i}) for i in range(1, 4)])
    assert plot_metrics.main([str(run), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "evaluation.png").exists()
    assert plot_metrics.main([str(tmp_path / "missing")]) == 2
    assert "metrics.jsonl" in capsys.readouterr().err
