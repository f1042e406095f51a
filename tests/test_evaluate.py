"""Evaluation read-offs and diagnostics of a Lost Cities checkpoint (`lcjax.evaluate`, `lcjax evaluate`)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from lcjax import cli
from lcjax.config import config_from_dict
from lcjax.evaluate import agent_act, evaluate
from lcjax.run import run_solver
from lcjax.sections import EvaluationConfig

from untrained_run import TINY_LC, write_untrained_run

GAMES = 4
MATCH_METRICS = ("win_rate", "score_diff", "score_diff_ci95_low", "score_diff_ci95_high", "cap_hit_rate", "opened_colors", "negative_expedition_rate")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with one checkpoint of an untrained agent (no training needed)."""
    return write_untrained_run(tmp_path_factory.mktemp("evaluate") / "run")


def test_greedy_act_takes_the_most_likely_legal_action(run_dir):
    solver = run_solver(config_from_dict(TINY_LC))
    state = solver.init(jax.random.key(1))
    game = solver.game
    act, params_of = agent_act(solver, "average_greedy")
    assert agent_act(solver, "average_greedy")[0] is act  # one object: compiled matches are reused
    s = game.init(jax.random.key(2))
    probs = np.asarray(solver.policy_fn(state, "average")(game.observe(s, 0)[None], game.legal_action_mask(s)[None], np.zeros(1, np.int32)))[0]
    for k in range(3):  # the same action whatever the key
        assert int(act(params_of(state), jax.random.key(k), s)) == int(np.argmax(probs))


def test_cli_evaluates_several_readouts(run_dir, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = ["evaluate", "--checkpoint", str(run_dir), "--games", str(GAMES), "--opponents", "passive_discard,random"]
    argv += ["--policy", "average,average_greedy,current", "--json", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    for readout in ("average", "average_greedy", "current"):
        for opp in ("passive_discard", "random"):
            for metric in MATCH_METRICS:
                assert f"readout/{readout}/{opp}/{metric}" in data, (readout, opp, metric)
            assert f"{readout}" in printed
            assert data[f"readout/{readout}/{opp}/games"] == GAMES
            assert 0.0 <= data[f"readout/{readout}/{opp}/cap_hit_rate"] <= 1.0
    # The first read-off is the primary: its eval/ keys equal its readout/ keys.
    for metric in MATCH_METRICS:
        assert data[f"eval/random/{metric}"] == data[f"readout/average/random/{metric}"]
    # One table row per (read-off, opponent).
    assert sum(line.count("passive_discard") for line in printed.splitlines()) >= 3


def test_cli_rejects_unknown_readouts(run_dir, capsys):
    assert cli.main(["evaluate", "--checkpoint", str(run_dir), "--policy", "average,best"]) == 2
    assert "average_greedy" in capsys.readouterr().err


def test_run_evaluation_logs_readouts_behaviour_and_diagnostics(run_dir):
    solver = run_solver(config_from_dict(TINY_LC))
    state = solver.init(jax.random.key(0))
    ev = EvaluationConfig(
        games=GAMES, opponents=("passive_discard", "random"), readouts=("average", "average_greedy"), diagnostic_states=6, diagnostic_redeals=2
    )
    metrics = evaluate(solver, state, ev, jax.random.key(3), seed=11)
    for metric in ("opened_colors", "negative_expedition_rate", "cap_hit_rate"):
        assert f"eval/passive_discard/{metric}" in metrics
        assert f"readout/average_greedy/passive_discard/{metric}" in metrics
    for name in ("advantage_0", "advantage_1", "average"):
        corr = metrics[f"diag/{name}/correlation"]
        agree = metrics[f"diag/{name}/argmax_agreement"]
        assert np.isnan(corr) or -1.0 <= corr <= 1.0
        assert np.isnan(agree) or 0.0 <= agree <= 1.0
    assert any(np.isfinite(metrics[f"diag/advantage_{p}/correlation"]) for p in (0, 1))
    # Without a seed (e.g. `lcjax evaluate`) or with diagnostic_states 0: no diagnostics.
    off = evaluate(solver, state, ev, jax.random.key(3))
    assert not any(k.startswith("diag/") for k in off)
    assert off["eval/random/score_diff"] == metrics["eval/random/score_diff"]


def test_eval_table_has_one_row_per_readout_and_opponent(capsys):
    row = {"games": 10, "win_rate": 0.5, "score_diff": 1.0, "score_diff_ci95_low": -1.0, "score_diff_ci95_high": 3.0, "score": 2.0, "turns": 90.0, "cap_hit_rate": 0.25}
    metrics = {}
    for opp in ("random", "safe_heuristic"):  # safe_heuristic: an extended opponent, eval/ only
        metrics.update({f"eval/{opp}/{k}": v for k, v in row.items()})
    for readout in ("average", "average_greedy"):
        metrics.update({f"readout/{readout}/random/{k}": v for k, v in row.items()})
    metrics["diag/advantage_0/correlation"] = 0.25
    console = cli._console()
    cli._print_eval_table(console, metrics, "t", "average")
    lines = [line for line in capsys.readouterr().out.splitlines() if "25.0%" in line]  # the cap column
    assert len(lines) == 3  # average/random once, average/safe_heuristic, average_greedy/random
    assert sum("average_greedy" in line for line in lines) == 1
    assert sum("safe_heuristic" in line and "average" in line for line in lines) == 1


def test_config_readouts_are_the_evaluation_readouts():
    from lcjax import evaluate as E
    from lcjax import sections

    assert sections.EVAL_READOUTS == E.READOUTS
    assert set(sections.EVAL_POLICIES) == {E.base_policy(r) for r in E.READOUTS}
