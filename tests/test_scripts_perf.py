"""Smoke tests of the performance scripts `scripts/profile_forward.py`,
`scripts/bench_precision.py`, `scripts/bench_traversal.py`, `scripts/bench_iteration.py`
and `scripts/bench_value_phase.py`: each `main()` runs in-process with tiny networks (and a
tiny Lost Cities variant, or a tiny Kuhn run), batches and repeats, and its JSON must hold
the documented keys with numbers that agree.
"""

from __future__ import annotations

import json
import math

import bench_iteration
import bench_precision
import bench_traversal
import bench_value_phase
import profile_forward
import pytest

from lcjax.env.lost_cities import LostCities

PRECISIONS = ("float32", "bfloat16")


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_profile_forward_json(tmp_path, capsys):
    path = tmp_path / "forward.json"
    argv = ["--networks", "8x1", "--precisions", "float32,bfloat16", "--max-batch", "4",
            "--repeats", "1", "--min-time", "0", "--json", str(path)]
    assert profile_forward.main(argv) == 0
    assert "roofline" in capsys.readouterr().out
    data = json.loads(path.read_text())

    assert data["input_size"] == LostCities().observation_size == 523 and data["output_size"] == 22
    assert data["settings"]["batches"] == [1, 2, 4]
    rows = data["rows"]
    configs = {("8x1", p) for p in PRECISIONS}
    assert {(r["network"], r["precision"]) for r in rows} == configs
    assert len(rows) == len(configs) * 3
    for r in rows:
        for key in ("us_per_call", "us_per_call_median", "us_per_state", "us_per_state_median",
                    "states_per_second", "gflops"):
            assert _positive(r[key]), (key, r)
        assert r["us_per_state"] == pytest.approx(r["us_per_call"] / r["batch"])
        assert r["states_per_second"] == pytest.approx(1e6 / r["us_per_state"])

    roof = data["roofline"]
    assert {(r["network"], r["precision"]) for r in roof} == configs
    for r in roof:
        assert set(r) == {"network", "precision", "us_per_state", "states_per_second", "batch"}
        assert _positive(r["us_per_state"]) and _positive(r["states_per_second"])
        assert r["batch"] in (1, 2, 4)
        same = [x["us_per_state"] for x in rows if (x["network"], x["precision"]) == (r["network"], r["precision"])]
        assert r["us_per_state"] == min(same)


def test_profile_forward_rejects_bad_flags():
    with pytest.raises(SystemExit):
        profile_forward.main(["--precisions", "float16"])
    with pytest.raises(SystemExit):
        profile_forward.main(["--networks", "512by3"])
    assert profile_forward.batch_sizes(4096) == [2**i for i in range(13)]
    assert profile_forward.batch_sizes(10, 3) == [4, 8]


def test_bench_precision_json(tmp_path, capsys):
    path = tmp_path / "precision.json"
    argv = ["--networks", "8x1", "--forward-batch", "8", "--train-batch", "8", "--train-steps", "2",
            "--capacity", "32", "--repeats", "1", "--min-time", "0", "--json", str(path)]
    assert bench_precision.main(argv) == 0
    assert "recommended precision" in capsys.readouterr().out
    data = json.loads(path.read_text())

    assert data["recommended_precision"] in PRECISIONS
    assert data["auto_precision"] in PRECISIONS
    assert data["auto_agrees"] == (data["auto_precision"] == data["recommended_precision"])
    assert data["backend"]
    (result,) = data["results"]
    assert result["network"] == "8x1"
    for workload in ("forward", "train_step"):
        entry = result[workload]
        for key in ("float32_seconds", "bfloat16_seconds", "ratio_bf16_over_fp32", "speedup_fp32_over_bf16"):
            assert _positive(entry[key]), (workload, key, entry)
        assert entry["ratio_bf16_over_fp32"] * entry["speedup_fp32_over_bf16"] == pytest.approx(1.0)
    forward, train = result["forward"], result["train_step"]
    assert forward["batch"] == 8 and train["batch"] == 8 and train["steps_per_call"] == 2
    # bfloat16 compute differs from float32, but only by rounding.
    assert 0.0 <= forward["max_abs_diff"] <= 0.1 * max(1.0, forward["max_abs_output"])
    assert math.isfinite(train["max_abs_diff_after_training"])
    for p in PRECISIONS:
        assert train["losses"][p]["nonfinite_steps"] == 0
        assert math.isfinite(train["losses"][p]["final_loss"])
    speedups = [forward["speedup_fp32_over_bf16"], train["speedup_fp32_over_bf16"]]
    expected = "bfloat16" if min(speedups) > data["speedup_threshold"] else "float32"
    assert data["recommended_precision"] == expected


def test_recommend_threshold():
    def result(fwd, train):
        return {"forward": {"speedup_fp32_over_bf16": fwd}, "train_step": {"speedup_fp32_over_bf16": train}}

    assert bench_precision.recommend([result(2.0, 1.5)]) == "bfloat16"
    assert bench_precision.recommend([result(2.0, 1.05)]) == "float32"  # not > 10% on training
    assert bench_precision.recommend([result(1.5, 1.5), result(0.9, 1.5)]) == "float32"
    assert bench_precision.auto_precision("cpu") == "float32"
    assert bench_precision.auto_precision("gpu") == "bfloat16"


# A small Lost Cities variant and tiny networks: the scripts' logic, not their speed.
TINY = [
    "rules.n_colors=2", "rules.n_ranks=3", "rules.hand_size=3", "rules.max_turns=30",
    "network.hidden_size=8", "network.num_layers=1", "run.precision=float32",
    "traversal.probe.branch_probability=0.3", "traversal.probe.max_probes=4", "traversal.probe.max_steps=62",
    "traversal.probe.max_strategy=32", "traversal.probe.rollout_batch=64",
    "memory.advantage_capacity=4096", "memory.strategy_capacity=4096",
]


def _sets(items):
    return [arg for item in items for arg in ("--set", item)]


def test_bench_traversal_json(tmp_path, capsys):
    path = tmp_path / "traversal.json"
    assert bench_traversal.main(_sets(TINY) + ["--batches", "2,8", "--repeats", "1", "--json", str(path)]) == 0
    assert "of the roofline" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert [r["batch"] for r in data["rows"]] == [2, 8]
    head = data["rows"][1]  # the largest batch is the headline
    assert data["batch"] == 8 and data["nodes_per_second"] == head["nodes_per_second"]
    assert data["network"] == {"hidden": 8, "layers": 1, "precision": "float32"}
    assert data["scheme"] == "probe"
    assert data["probe"]["max_probes"] == 4 and data["probe"]["branch_probability"] == 0.3
    assert _positive(data["roofline_states_per_second"])
    assert data["roofline_fraction"] == pytest.approx(data["nodes_per_second"] / data["roofline_states_per_second"])
    for r in data["rows"]:
        assert r["nodes"] >= r["evaluations"] > 0
        assert r["nodes_per_second"] == pytest.approx(r["nodes"] / r["seconds"])


def test_bench_traversal_value_scheme(tmp_path, capsys):
    path = tmp_path / "value.json"
    tiny = TINY + ["traversal.value.max_samples=8", "traversal.value.max_strategy=32", "traversal.value.max_steps=62",
                   "traversal.value.value_head=state"]
    assert bench_traversal.main(_sets(tiny) + ["--scheme", "value", "--batches", "4", "--repeats", "1", "--json", str(path)]) == 0
    assert "value traversal" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert data["scheme"] == "value" and data["value"]["max_samples"] == 8 and data["value"]["value_head"] == "state"
    row = data["rows"][0]
    # Every traverser node of the trajectories is sampled (sample_probability 1), up to 8 each.
    assert 0 < row["advantage_samples"] <= 4 * 8
    assert data["advantage_samples_per_second"] == pytest.approx(row["advantage_samples"] / row["seconds"])


def test_bench_traversal_rejects_bad_input(capsys):
    with pytest.raises(SystemExit):
        bench_traversal.main(["--batches", "4,x"])
    assert "--batches" in capsys.readouterr().err
    assert bench_traversal.main(["--set", "traversal.scheme=probabilistic"]) == 2
    assert "traversal.scheme" in capsys.readouterr().err


def test_bench_iteration_json(tmp_path, capsys):
    path = tmp_path / "iteration.json"
    argv = _sets(TINY + ["evaluation.games=4", "evaluation.opponents=[random]"]) + [
        "--target-nodes", "3000", "--calibration-batch", "2", "--advantage-steps", "3", "--strategy-steps", "2",
        "--batch", "16", "--repeats", "2", "--with-eval-checkpoint", "--json", str(path),
    ]
    assert bench_iteration.main(argv) == 0
    out = capsys.readouterr().out
    assert "speedup against the earlier system" in out
    data = json.loads(path.read_text())
    for key in ("iteration_seconds", "traversal_seconds", "memory_add_seconds", "advantage_train_seconds",
                "strategy_train_seconds", "evaluation_seconds", "checkpoint_seconds", "compile_seconds"):
        assert _positive(data[key]), key
    assert len(data["iterations"]) == 2
    settings = data["settings"]
    solver = settings["solver"]
    assert solver["optimization"]["advantage_steps"] == 3 and solver["optimization"]["strategy_batch"] == 16
    # The earlier system's workload: probe traversals by a uniform traverser, whatever the config's scheme.
    assert (solver["traversal"]["scheme"], solver["traversal"]["sampling_bot"]) == ("probe", None)
    # One traversal chunk per player, sized from the calibration to about the target.
    assert solver["traversal"]["traversal_batch"] == solver["traversal"]["traversals_per_player"]
    per_call = settings["calibrated_nodes_per_traversal"]
    assert settings["traversals_per_player"] == max(1, round(3000 / (2 * per_call)))
    phases = sum(data[f"{p}_seconds"] for p in bench_iteration.PHASES)
    assert phases <= data["iteration_seconds"] * 1.01
    scaled = data["traversal_seconds"] * 3000 / data["traversal_nodes"]
    assert data["traversal_seconds_at_target"] == pytest.approx(scaled)
    assert data["speedup_vs_earlier"]["iteration_seconds"] == pytest.approx(48.0 / data["iteration_seconds_at_target"])
    assert data["training_flops"] == 3 * bench_iteration.forward_flops([data["observation_size"], 8, data["num_actions"]]) * 16 * (2 * 3 + 2)


def test_bench_iteration_rejects_bad_input(capsys):
    assert bench_iteration.main(["--set", "game=kuhn"]) == 2
    assert "lost_cities" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_iteration.main(["--target-nodes", "0"])


def _tiny_kuhn_value_run(path):
    from lcjax.config import config_from_dict
    from lcjax.run import train

    tiny = {
        "game": "kuhn",
        "run": {"name": "value", "seed": 0, "max_iterations": 1},
        "network": {"hidden_size": 8, "num_layers": 1},
        "traversal": {
            "scheme": "value", "traversals_per_player": 16, "traversal_batch": 16,
            "value": {"max_samples": 2, "max_strategy": 2, "max_steps": 4, "value_games": 32, "record_probability": 1.0,
                      "max_records": 2, "value_capacity": 48, "value_steps": 4, "value_batch": 8,
                      "value_head": "state", "value_lambda": 0.5},
        },
        "optimization": {"advantage_steps": 4, "advantage_batch": 16, "strategy_steps": 4, "strategy_batch": 16},
        "memory": {"advantage_capacity": 128, "strategy_capacity": 128},
        "evaluation": {"eval_every": 0},
    }
    return train(config_from_dict(tiny), run_dir=path).run_dir


def test_bench_value_phase_json(tmp_path, capsys):
    run = _tiny_kuhn_value_run(tmp_path / "run")
    path = tmp_path / "value_phase.json"
    argv = ["--checkpoint", str(run), "--repeats", "1", "--set", "traversal.value.lanes=8", "--json", str(path)]
    assert bench_value_phase.main(argv) == 0
    assert "relabel" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert data["iteration"] == 1 and data["settings"]["lanes"] == 8 and data["settings"]["value_games"] == 32
    for part in ("value_games", "relabel", "add", "fit"):
        assert _positive(data[part + "_seconds"]), part
    total = sum(data[p + "_seconds"] for p in ("value_games", "relabel", "add", "fit"))
    assert data["total_seconds"] == pytest.approx(total)
    # 32 games of at most 2 records, in a window of 48: the items are built in 48 rows.
    assert data["item_rows"] == 48 and 0 < data["items"] <= 48 and data["states"] >= 2 * 32
    # Only value settings may change (V's network must stay the checkpoint's).
    with pytest.raises(SystemExit):
        bench_value_phase.main(["--checkpoint", str(run), "--set", "network.hidden_size=16"])
    assert "traversal.value" in capsys.readouterr().err
    assert bench_value_phase.main(["--checkpoint", str(tmp_path / "nowhere")]) == 2
    assert "not a run directory" in capsys.readouterr().err
