"""`lcjax play`: a person plays the agent in the terminal; bad input re-prompts."""

from __future__ import annotations

import itertools

import jax
import pytest

from lcjax import cli
from lcjax.cfr.solver import DeepCFR
from lcjax.checkpoint import Checkpointer
from lcjax.config import config_from_dict, make_game, save_config, solver_config

from untrained_run import TINY_LC, write_untrained_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with one checkpoint of an untrained agent (no training needed)."""
    return write_untrained_run(tmp_path_factory.mktemp("play") / "run")


def _scripted_input(monkeypatch, answers):
    prompts = []
    it = iter(answers)

    def fake_input(prompt=""):
        prompts.append(prompt)
        try:
            return next(it)
        except StopIteration:
            raise EOFError

    monkeypatch.setattr("builtins.input", fake_input)
    return prompts


def test_bad_input_reprompts_and_a_full_game_finishes(run_dir, monkeypatch, capsys):
    # Garbage first, then always the first legal move: the game must reach its end.
    answers = itertools.chain(["", "abc", "-1", "999", "1.5"], itertools.repeat("0"))
    prompts = _scripted_input(monkeypatch, answers)
    assert cli.main(["play", "--checkpoint", str(run_dir), "--seat", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("please type a number") == 5
    assert "final score: you" in out
    assert "agent:" in out  # the agent moved (it is seat 0 and starts)
    assert len(prompts) > 40  # a whole game of the human's decisions


def test_quit_and_end_of_input_exit_cleanly(run_dir, monkeypatch, capsys):
    _scripted_input(monkeypatch, ["q"])
    assert cli.main(["play", "--checkpoint", str(run_dir)]) == 0
    assert "bye" in capsys.readouterr().out
    _scripted_input(monkeypatch, [])  # EOF at the first prompt
    assert cli.main(["play", "--checkpoint", str(run_dir)]) == 0


def test_the_human_sees_only_their_own_hand(run_dir, monkeypatch, capsys):
    _scripted_input(monkeypatch, ["q"])
    assert cli.main(["play", "--checkpoint", str(run_dir), "--seat", "0", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    game = make_game(config_from_dict(TINY_LC))
    deal = jax.random.split(jax.random.key(5))[1]
    state = game.init(deal)
    mine = [game.card_name(int(c)) for c in game.hand(state, 0)]
    theirs = [game.card_name(int(c)) for c in game.hand(state, 1)]
    hand_line = next(line for line in out.splitlines() if "hand" in line.lower())
    for name in mine:
        assert name in hand_line
    assert not all(name in hand_line for name in theirs)


def test_play_rejects_a_poker_run(tmp_path, capsys):
    config = config_from_dict({"game": "kuhn", "run": {"name": "k"}, "network": {"hidden_size": 4, "num_layers": 1},
                               "memory": {"advantage_capacity": 8, "strategy_capacity": 8}})
    path = tmp_path / "k"
    path.mkdir()
    save_config(config, path / "config.yaml")
    solver = DeepCFR(make_game(config), solver_config(config))
    with Checkpointer.open(path / "checkpoints", keep=1, create=True) as ckpt:
        ckpt.save(0, solver.init(jax.random.key(0)), metadata={})
    assert cli.main(["play", "--checkpoint", str(path)]) == 2
    assert "Lost Cities" in capsys.readouterr().err
