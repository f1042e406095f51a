"""`scripts/refit_strategy.py`: a refit at another strategy weight power is the network a
run trained with that power fits, and the script's rows and bad input."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import refit_strategy

from lcjax.config import config_from_dict
from lcjax.run import load_run, train
from tiny_kuhn import tiny_kuhn

# A tiny Kuhn run of 3 iterations whose strategy network is fitted afresh each iteration (a
# warm one would start each refit from the run's own network, which the weights shaped).
TINY = tiny_kuhn(
    run={"name": "refit", "seed": 5, "max_iterations": 3},
    optimization={"strategy_steps": 8, "strategy_warm_start": False},
    memory={"strategy_capacity": 64},
    checkpoint={"save_every": 3, "keep": 1},
    evaluation={"eval_every": 0},
)


def _with(power: float, steps: int = 8, final: int = 0) -> dict:
    opt = {"strategy_weight_power": power, "strategy_steps": steps, "final_strategy_steps": final}
    return {**TINY, "optimization": {**TINY["optimization"], **opt}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same 3-iteration run trained with strategy weights t and t ** 2 (8 strategy
    steps), with weights t and 16 strategy steps ("steps16"), and with weights t, 8 steps
    and a last fit of 16 (`final_strategy_steps`, "final16")."""
    root = tmp_path_factory.mktemp("refit")
    out = {p: train(config_from_dict(_with(p)), run_dir=root / f"power{p:g}").run_dir for p in (1.0, 2.0)}
    out["steps16"] = train(config_from_dict(_with(1.0, steps=16)), run_dir=root / "steps16").run_dir
    out["final16"] = train(config_from_dict(_with(1.0, final=16)), run_dir=root / "final16").run_dir
    return out


def _refit(runs, run, *args):
    return refit_strategy.main(["--checkpoint", str(runs[run]), "--strategy-weight-power", "1", *args])


def test_reweigh_recovers_the_iteration():
    t = jnp.arange(1.0, 8.0)
    np.testing.assert_array_equal(refit_strategy.reweigh(t, 1.0, 0, 2.0, 0), t**2)
    np.testing.assert_array_equal(refit_strategy.reweigh(t**2, 2.0, 0, 1.0, 0), t)
    # A delay d: iterations t <= d weigh 0, later ones (t - d) ** power.
    np.testing.assert_array_equal(refit_strategy.reweigh(t, 1.0, 0, 1.0, 3), [0, 0, 0, 1, 2, 3, 4])
    # Stored with delay 2 (iterations 3.. as 1..): the same iterations again.
    np.testing.assert_array_equal(refit_strategy.reweigh(t**3, 3.0, 2, 1.0, 4), [0, 0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="strategy_weight_power is 0"):
        refit_strategy.reweigh(jnp.ones(3), 0.0, 0, 1.0, 0)
    with pytest.raises(ValueError, match="below the run's strategy_weight_delay 2"):
        refit_strategy.reweigh(t, 1.0, 2, 1.0, 1)


def test_refit_is_the_network_the_other_power_fits(runs):
    solver1, state1, _ = load_run(runs[1.0], with_memory=True)
    solver2, state2, _ = load_run(runs[2.0], with_memory=True)
    # Training never reads the strategy network, so both runs kept the same samples, their
    # weights t and t ** 2.
    m1, m2 = state1.strategy_memory, state2.strategy_memory
    assert int(m1.size) == int(m2.size) > 0
    np.testing.assert_array_equal(np.asarray(m1.data.observation), np.asarray(m2.data.observation))
    np.testing.assert_array_equal(np.asarray(m1.data.iteration) ** 2, np.asarray(m2.data.iteration))
    refitted, metrics = refit_strategy.refit(solver1, state1, 2.0)
    own, _ = refit_strategy.refit(solver2, state2, 2.0)
    for a, b in zip(jax.tree.leaves(refitted.strategy_params), jax.tree.leaves(own.strategy_params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert metrics["loss/strategy"] > 0
    # The refit keeps the stored reservoir and key, and another power fits another network.
    np.testing.assert_array_equal(np.asarray(refitted.strategy_memory.data.iteration), np.asarray(m1.data.iteration))
    other, _ = refit_strategy.refit(solver1, state1, 1.0)
    first = lambda s: np.asarray(jax.tree.leaves(s.strategy_params)[0])  # noqa: E731
    assert not np.array_equal(first(other), first(refitted))


def _exploitabilities(result) -> list[float]:
    return [row[f"readout/{p}/exploitability"] for row in result["rows"] for p in ("average", "average_greedy")]


def test_strategy_steps_refit_is_the_network_of_a_run_with_those_steps(runs):
    # The 8-step run refitted with 16 steps plays exactly like the 16-step run refitted with
    # its own: the step count changed no sample and no other network.
    longer, own = _refit(runs, 1.0, "--strategy-steps", "16"), _refit(runs, "steps16")
    assert longer["strategy_steps"] == own["strategy_steps"] == 16
    assert _exploitabilities(longer)[2:] == _exploitabilities(own)[2:]
    # The first row is each checkpoint's own network: 8 and 16 steps fitted other networks.
    assert _exploitabilities(longer)[:2] != _exploitabilities(own)[:2]
    # The run's own count is no change at all.
    same, plain = _refit(runs, 1.0, "--strategy-steps", "8"), _refit(runs, 1.0)
    assert same["strategy_steps"] == 8 and _exploitabilities(same) == _exploitabilities(plain)


def test_a_run_with_final_strategy_steps_ends_on_the_longer_fit(runs):
    # final16 trained as the 8-step run did, then fitted its last network 16 steps: the
    # 8-step run's 16-step refit. Its own refit defaults to those 16 steps and reproduces it.
    longer, final = _refit(runs, 1.0, "--strategy-steps", "16"), _refit(runs, "final16")
    assert final["strategy_steps"] == 16
    assert _exploitabilities(final)[:2] == _exploitabilities(final)[2:] == _exploitabilities(longer)[2:]
    _, state, _ = load_run(runs["final16"], with_memory=True)
    _, state8, _ = load_run(runs[1.0], with_memory=True)
    weights = (np.asarray(s.strategy_memory.data.iteration) for s in (state, state8))
    np.testing.assert_array_equal(*weights)


def test_script_rows_and_json(runs, tmp_path, capsys):
    out = tmp_path / "refit.json"
    result = refit_strategy.main(
        ["--checkpoint", str(runs[1.0]), "--strategy-weight-power", "1", "2", "--json", str(out)]
    )
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["iteration"] == 3 and result["games"] == 0 and result["strategy_steps"] == 8
    rows = result["rows"]
    assert [r["weights"] for r in rows] == ["checkpoint", {"power": 1.0, "delay": 0}, {"power": 2.0, "delay": 0}]
    for row in rows:
        for policy in ("average", "average_greedy"):
            assert 0 <= row[f"readout/{policy}/exploitability"] <= 2  # a Kuhn game moves at most 2 chips
    printed = capsys.readouterr().out
    assert "(t - 0) ** 2" in printed and "average_greedy" in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--policy", "current"], "each read-off must be one of: average, average_greedy"),
        (["--opponents", "nobody"], "unknown bot 'nobody'"),
        (["--strategy-weight-power", "-1"], "each power must be >= 0"),
        (["--strategy-weight-delay", "-2"], "--strategy-weight-delay must be >= 0"),
        (["--strategy-steps", "0"], "--strategy-steps: expected a positive integer"),
    ],
)
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit):
        refit_strategy.parse_args(["--checkpoint", "x", *argv])
    assert message in capsys.readouterr().err


def test_delay_beyond_the_run_is_an_error(runs):
    with pytest.raises(SystemExit, match="leaves no stored sample with a weight"):
        refit_strategy.main(["--checkpoint", str(runs[1.0]), "--strategy-weight-delay", "3"])


def test_not_a_run_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="is not a run directory"):
        refit_strategy.main(["--checkpoint", str(tmp_path)])
