"""`scripts/gpu_report.sh` (its --tiny CPU path, which also runs `scripts/bench_scaling.py`)
and the bad input of both."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import bench_scaling
import gpu_report_summary
import pytest

ROOT = Path(__file__).resolve().parent.parent
REPORT = str(ROOT / "scripts" / "gpu_report.sh")
STEPS = ("bench_env", "bench_traversal_probe", "bench_traversal_value", "bench_iteration", "bench_precision",
         "bench_scaling", "train")


def _run_report(*args, **env):
    full = dict(os.environ, PYTHON=sys.executable, JAX_PLATFORMS="cpu", **env)
    return subprocess.run(["bash", REPORT, *args], env=full, capture_output=True, text=True, timeout=1800)


def test_gpu_report_tiny(tmp_path):
    out = tmp_path / "report"
    done = _run_report("--tiny", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "jax " in done.stdout and "orbax-checkpoint " in done.stdout  # the versions it ran with
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    assert [s[0] for s in steps] == list(STEPS)
    assert all(s[1] == "ok" for s in steps), steps
    for name in STEPS[:-1]:
        assert json.loads((out / f"{name}.json").read_text()), name
        assert (out / f"{name}.log").exists()
    # bench_scaling's file holds exactly the rows, one per device count.
    scaling = json.loads((out / "bench_scaling.json").read_text())
    assert list(scaling) == ["rows"] and [r["devices"] for r in scaling["rows"]] == [1, 2]
    for row in scaling["rows"]:
        assert tuple(row) == bench_scaling.ROW_KEYS
        assert all(isinstance(row[k], float) and math.isfinite(row[k]) and row[k] > 0 for k in bench_scaling.ROW_KEYS[1:])
    versions = json.loads((out / "versions.json").read_text())
    assert versions["backend"] == "cpu" and versions["packages"]["jax"]
    summary = (out / "summary.md").read_text()
    for heading in ("# lcjax GPU report", "## Versions", "## Steps", "## Scaling", "## Training run"):
        assert heading in summary, heading
    assert "eval/exploitability" in summary  # the short run ends with its evaluation
    assert len(list(out.glob("train/*/checkpoints/2"))) == 1


def test_gpu_report_names_a_missing_dependency(tmp_path):
    fake = tmp_path / "fake" / "chex"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'chex'\")\n")
    done = _run_report(str(tmp_path / "out"), PYTHONPATH=str(tmp_path / "fake"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: missing dependency chex"), lines
    assert not (tmp_path / "out" / "summary.md").exists()


def test_gpu_report_usage(tmp_path):
    done = _run_report()
    assert done.returncode == 2 and "usage: scripts/gpu_report.sh [--tiny] OUTDIR" in done.stderr


def test_bench_scaling_rejects_bad_input(capsys):
    for bad in ("0,1", "1,x", "2,2", ""):
        with pytest.raises(SystemExit):
            bench_scaling.main(["--devices", bad])
        assert "--devices" in capsys.readouterr().err
    assert bench_scaling.main(["--set", "distributed.devices=none"]) == 2
    assert "distributed.devices" in capsys.readouterr().err
    assert bench_scaling.parse_counts("4,1,2") == [1, 2, 4]


def test_summary_headlines():
    assert gpu_report_summary.headline("bench_precision", {"recommended_precision": "bfloat16", "auto_precision": "bfloat16"}) \
        == "recommended precision bfloat16 (auto picks bfloat16)"
    rows = {"rows": [{"devices": 1, "iteration_seconds": 2.5}, {"devices": 2, "iteration_seconds": 1.25}]}
    assert gpu_report_summary.headline("bench_scaling", rows) == "1: 2.5 s, 2: 1.25 s"
    assert gpu_report_summary.headline("bench_env", None) == "-"
