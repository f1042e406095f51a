"""`scripts/sweep_model_size.py`: a tiny sweep end to end (outputs, sizes, resume), the pure
recommendation and boundary-seed rules on hand-made results, and bad flags.

The end-to-end sweep trains two tiny networks on a 2-color Lost Cities for 2 iterations
each; compiling the solver and the arena per network is most of its time, so everything
that needs a real sweep shares one test (a module fixture would run once per xdist worker).
"""

from __future__ import annotations

import json
import shutil

import jax
import pytest
import sweep_model_size as sweep

from lcjax.cfr.networks import NetworkSpec, init_params
from lcjax.config import load_config, make_game

# A small game, external sampling with a node budget, and fast compilation: seconds per
# network instead of a minute. The base network, 16x1, is the reference.
TINY_SETS = [
    "rules.n_colors=2", "rules.n_ranks=3", "rules.hand_size=3", "rules.max_turns=40",
    "traversal.scheme=external", "traversal.external.max_depth=8", "traversal.external.node_budget=64",
    "traversal.external.max_advantage=8", "traversal.external.max_strategy=16",
    "traversal.traversals_per_player=8", "traversal.traversal_batch=8",
    "optimization.advantage_steps=4", "optimization.advantage_batch=32",
    "optimization.strategy_steps=4", "optimization.strategy_batch=32",
    "optimization.fast_compile=true",
    "memory.advantage_capacity=1000", "memory.strategy_capacity=1000",
    "evaluation.opponents=[random]",
    "network.hidden_size=16", "network.num_layers=1",
]
NETWORKS = ("16x1", "32x1")


def _argv(out, *extra):
    argv = ["--scale", "reduced", "--configs", ",".join(NETWORKS), "--iterations", "2", "--eval-every", "1",
            "--games", "20", "--out", str(out), "--quiet", *extra]
    for item in TINY_SETS:
        argv += ["--set", item]
    return argv


def _actual_params(in_size, out_size, hidden, layers, layer_norm=False) -> int:
    """Parameters of the real network, counted from its parameter leaves (shapes only)."""
    spec = NetworkSpec(in_size, out_size, hidden, layers, layer_norm=layer_norm)
    shapes = jax.eval_shape(lambda k: init_params(spec, k), jax.random.key(0))
    return sum(x.size for x in jax.tree.leaves(shapes))


def test_sweep_end_to_end_and_resume(tmp_path, capsys, monkeypatch):
    out = tmp_path / "sweep"
    copy = tmp_path / "copy.json"
    assert sweep.main(_argv(out, "--json", str(copy))) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "sweep.json").read_text())
    assert json.loads(copy.read_text()) == data
    png = (out / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000

    s = data["settings"]
    assert (s["scale"], s["iterations"], s["eval_every"], s["games"]) == ("reduced", 2, 1, 20)
    assert s["opponents"] == ["random"] and s["headline"] == "random"
    assert data["reference"] == "16x1" and data["complete"] is True
    g = make_game(load_config(s["config_file"], s["set"]))
    d_in, d_out = g.observation_size, g.num_actions

    runs = data["runs"]
    first = [r for r in runs if r["seed"] == 0]
    assert [r["network"] for r in first] == list(NETWORKS)  # the reference first, in order
    for r in runs:
        h, l = r["hidden_size"], r["num_layers"]
        assert r["network"] == f"{h}x{l}"
        # Parameter count: the formula, which must match the real network's leaves.
        expected = (d_in * h + h) + (l - 1) * (h * h + h) + (h * d_out + d_out)
        assert r["params"] == expected == _actual_params(d_in, d_out, h, l)
        assert r["forward_flops"] == 2 * (d_in * h + (l - 1) * h * h + h * d_out)
        assert len(r["iteration_seconds"]) == 2 and all(t > 0 for t in r["iteration_seconds"])
        assert r["seconds_per_iteration"] > 0 and r["compile_seconds"] >= 0
        assert r["first_iteration_seconds"] >= r["compile_seconds"]
        curve = r["curve"]
        assert [row["iteration"] for row in curve] == [1, 2]
        assert 0 < curve[0]["train_seconds"] < curve[1]["train_seconds"]
        assert curve[-1]["train_seconds"] == pytest.approx(sum(r["iteration_seconds"]))
        assert 0 < curve[0]["compute_flops"] < curve[1]["compute_flops"]
        for row in curve:
            lo, mid, hi = (row[f"eval/random/score_diff{k}"] for k in ("_ci95_low", "", "_ci95_high"))
            assert lo <= mid <= hi and row["eval/random/games"] == 20
            assert 0 <= row["eval/random/win_rate"] <= 1
        assert r["headline"]["score"] == curve[-1]["eval/random/score_diff"]
    # The second seed ran for exactly the boundary networks.
    assert sorted(r["network"] for r in runs if r["seed"] == 1) == sorted(data["boundary"])
    assert set(data["summary"]) == set(NETWORKS)
    for name, summ in data["summary"].items():
        assert summ["seeds"] == ([0, 1] if name in data["boundary"] else [0])

    rec = data["recommendation"]
    assert rec["verdict"] in sweep.VERDICTS and rec["network"] in NETWORKS and rec["reason"]
    assert rec == sweep.recommend(data["summary"], "16x1", 2.0)
    assert "recommendation:" in printed and "32x1" in printed

    # Resume: every run is there, so nothing trains and the runs stay as they were.
    def no_training(*args, **kwargs):
        raise AssertionError("resume trained a network that was already done")

    monkeypatch.setattr(sweep, "train_network", no_training)
    assert sweep.main(["--resume", str(out), "--quiet"]) == 0
    again = json.loads((out / "sweep.json").read_text())
    assert again["runs"] == runs and again["recommendation"] == rec

    # A sweep that stopped after its first run: only the missing runs train.
    partial = tmp_path / "partial"
    shutil.copytree(out, partial)
    cut = dict(data, runs=runs[:1], complete=False)
    (partial / "sweep.json").write_text(json.dumps(cut))
    calls = []

    def replay(config, seed, **kwargs):
        name = f"{config.network.hidden_size}x{config.network.num_layers}"
        calls.append((name, seed))
        return next(r for r in runs if (r["network"], r["seed"]) == (name, seed))

    monkeypatch.setattr(sweep, "train_network", replay)
    assert sweep.main(["--resume", str(partial), "--quiet"]) == 0
    assert calls == [(r["network"], r["seed"]) for r in runs[1:]]
    resumed = json.loads((partial / "sweep.json").read_text())
    assert resumed["runs"] == runs and resumed["complete"] is True

    # --resume takes its settings from the file; giving them again is an error.
    capsys.readouterr()
    assert sweep.main(["--resume", str(out), "--iterations", "3"]) == 2
    assert "--iterations" in capsys.readouterr().err
    # A new sweep never overwrites an existing one.
    assert sweep.main(_argv(out)) == 2
    assert "--resume" in capsys.readouterr().err


# ----------------------------------------------------------------------------- pure rules
def _res(score, half, seconds):
    return {"score": score, "score_ci95_low": score - half, "score_ci95_high": score + half, "seconds_per_iteration": seconds}


def test_recommend_new_default_when_clearly_better_and_affordable():
    results = {"512x3": _res(-20, 3, 10.0), "768x3": _res(-5, 3, 15.0), "1024x3": _res(-2, 3, 19.0),
               "1024x6": _res(10, 3, 40.0)}
    rec = sweep.recommend(results, "512x3", max_slowdown=2.0)
    # 1024x6 is best but 4x slower; 1024x3 is the best affordable clearly-better network.
    assert rec["verdict"] == "new_default" and rec["network"] == "1024x3"
    assert set(rec["clearly_better"]) == {"768x3", "1024x3", "1024x6"} and rec["too_slow"] == ["1024x6"]
    assert rec["slowdown"]["1024x6"] == pytest.approx(4.0)
    assert "1024x3" in rec["reason"] and "512x3" in rec["reason"]


def test_recommend_defer_when_only_too_slow_networks_win():
    results = {"512x3": _res(-20, 3, 10.0), "768x3": _res(-19, 3, 12.0), "1536x8": _res(0, 3, 25.0)}
    rec = sweep.recommend(results, "512x3", max_slowdown=2.0)
    assert rec["verdict"] == "defer" and rec["network"] == "1536x8"
    assert "2.50x" in rec["reason"]
    # A looser limit makes the same network the new default.
    assert sweep.recommend(results, "512x3", max_slowdown=3.0)["verdict"] == "new_default"


def test_recommend_keep_when_intervals_overlap():
    # 768x3's mean is higher, but its CI reaches below the reference's upper bound.
    results = {"512x3": _res(-20, 5, 10.0), "768x3": _res(-12, 4, 12.0), "1024x4": _res(-30, 5, 14.0)}
    rec = sweep.recommend(results, "512x3", max_slowdown=2.0)
    assert rec["verdict"] == "keep" and rec["network"] == "512x3" and rec["clearly_better"] == []
    assert "768x3" in rec["reason"]
    assert sweep.recommend({"512x3": _res(0, 1, 1.0)}, "512x3")["verdict"] == "keep"
    with pytest.raises(ValueError, match="reference"):
        sweep.recommend(results, "1536x8")


def test_boundary_networks():
    results = {"512x3": _res(-20, 3, 1), "768x3": _res(-18, 3, 1), "1024x3": _res(0, 3, 1), "1024x6": _res(2, 3, 1),
               "1536x8": _res(-40, 3, 1)}
    # 768x3 overlaps the reference, 1024x3 the best (1024x6); 1536x8 overlaps neither.
    assert sweep.boundary_networks(results, "512x3") == ["512x3", "768x3", "1024x3", "1024x6"]
    apart = {"512x3": _res(-20, 1, 1), "768x3": _res(0, 1, 1)}
    assert sweep.boundary_networks(apart, "512x3") == []
    assert sweep.boundary_networks(apart, "1024x3") == []


def test_combine_seeds():
    assert sweep.combine([(1.0, 0.0, 2.0)]) == (1.0, 0.0, 2.0)
    # Agreeing seeds: the sampling error of the mean, sqrt(1 + 1) / 2.
    m, lo, hi = sweep.combine([(0.0, -1.0, 1.0), (0.0, -1.0, 1.0)])
    assert m == 0 and hi == pytest.approx(2 ** 0.5 / 2) and lo == pytest.approx(-(2 ** 0.5) / 2)
    # Disagreeing seeds: half their spread.
    assert sweep.combine([(0.0, -1.0, 1.0), (10.0, 9.0, 11.0)]) == pytest.approx((5.0, 0.0, 10.0))


def test_sizes_match_the_real_network():
    for hidden, layers, norm in ((8, 0, False), (8, 1, True), (12, 3, True), (16, 2, False)):
        assert sweep.mlp_param_count(503, 22, hidden, layers, norm) == _actual_params(503, 22, hidden, layers, norm)
    assert sweep.forward_flops(503, 22, 512, 3) == 2 * (503 * 512 + 2 * 512 * 512 + 512 * 22)


def test_grid_selection():
    assert len(sweep.grid_networks(None, None)) == 16
    assert sweep.grid_networks([512, 1024], [3, 6]) == [(512, 3), (512, 6), (1024, 3), (1024, 6)]
    assert sweep.grid_networks(None, None, [(512, 3), (16, 1), (512, 3)]) == [(512, 3), (16, 1)]
    assert sweep.off_grid([(512, 3), (16, 1), (512, 5)]) == ["16x1", "512x5"]
    assert sweep.resolve_scale("auto", "cpu") == "reduced" and sweep.resolve_scale("auto", "gpu") == "full"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--hidden", "512,abc"], "--hidden"),
        (["--layers", "3,0"], "--layers"),
        (["--configs", "512by3"], "--configs"),
        (["--configs", "512x"], "--configs"),
        (["--configs", "512x3", "--hidden", "512"], "--configs"),
        (["--iterations", "-1"], "--iterations"),
        (["--games", "many"], "--games"),
        (["--max-slowdown", "0"], "--max-slowdown"),
        (["--scale", "huge"], "--scale"),
    ],
)
def test_bad_flags_name_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        sweep.main(argv)
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err


def test_bad_config_values_are_one_error_line(tmp_path, capsys):
    assert sweep.main(["--set", "network.hidden=3", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "network.hidden" in err
    assert sweep.main(["--set", "evaluation.opponents=[random]", "--headline", "safe_heuristic",
                       "--out", str(tmp_path / "y")]) == 2
    assert "--headline" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
