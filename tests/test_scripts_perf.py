"""Smoke tests of the performance scripts `scripts/profile_forward.py` and
`scripts/bench_precision.py`: each `main()` runs in-process with tiny networks, batches and
repeats, and its JSON must hold the documented keys with positive numbers.
"""

from __future__ import annotations

import json
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from scripts import bench_precision, profile_forward  # noqa: E402

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

    assert data["input_size"] == 503 and data["output_size"] == 22
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
