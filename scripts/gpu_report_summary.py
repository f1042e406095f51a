"""The two Python ends of `scripts/gpu_report.sh`.

    python scripts/gpu_report_summary.py --versions OUTDIR/versions.json
    python scripts/gpu_report_summary.py --summary OUTDIR --seconds 512

`--versions` imports every dependency lcjax runs on, prints their versions and the devices
JAX sees, and writes them to the file; a missing one ends it with one "error: missing
dependency" line (exit status 2). `--summary` reads what the report's steps wrote into
OUTDIR (steps.tsv, versions.json, the JSON files, the training run's metrics.jsonl) and
writes OUTDIR/summary.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from pathlib import Path

# (distribution name, module to import) of every package lcjax needs to train and measure.
DEPENDENCIES = (
    ("jax", "jax"),
    ("jaxlib", "jaxlib"),
    ("flax", "flax"),
    ("optax", "optax"),
    ("orbax-checkpoint", "orbax.checkpoint"),
    ("chex", "chex"),
    ("numpy", "numpy"),
    ("pyyaml", "yaml"),
    ("rich", "rich"),
)


def versions() -> dict:
    """{"python", "packages": {name: version}, "backend", "devices"}; SystemExit(2) after one
    line naming the first missing dependency."""
    packages = {}
    for name, module in DEPENDENCIES:
        try:
            imported = importlib.import_module(module)
        except Exception as err:  # ImportError, or a broken build failing on import
            print(f"error: missing dependency {name} (import {module} failed: {str(err).splitlines()[0] if str(err) else type(err).__name__})", file=sys.stderr)
            raise SystemExit(2) from None
        packages[name] = getattr(imported, "__version__", None) or _distribution_version(name)
    import jax

    devices = jax.devices()
    return {
        "python": platform.python_version(),
        "packages": packages,
        "backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.id} {d.device_kind}" for d in devices],
        "process_count": jax.process_count(),
    }


def _distribution_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _number(value, digits: int = 3) -> str:
    if isinstance(value, (int, float)):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}g}"
    return "-" if value is None else str(value)


def headline(name: str, data: dict | None) -> str:
    """The one figure a step's JSON is about, as text."""
    if not data:
        return "-"
    if name == "bench_env":
        return f"{_number(data.get('best_steps_per_second'))} env steps/s (batch {data.get('best_batch')})"
    if name.startswith("bench_traversal"):
        return (f"{_number(data.get('nodes_per_second'))} states/s, {_number(data.get('advantage_samples_per_second'))} "
                f"advantage samples/s, {100 * (data.get('roofline_fraction') or 0):.1f}% of the forward roofline")
    if name == "bench_iteration":
        speedup = (data.get("speedup_vs_earlier") or {}).get("iteration_seconds")
        return f"{_number(data.get('iteration_seconds'))} s per iteration ({_number(speedup)}x the earlier system)"
    if name == "bench_precision":
        return f"recommended precision {data.get('recommended_precision')} (auto picks {data.get('auto_precision')})"
    if name == "bench_scaling":
        return ", ".join(f"{r['devices']}: {_number(r['iteration_seconds'])} s" for r in data.get("rows", []))
    return "-"


def _train_rows(out: Path) -> list[dict]:
    rows = []
    for metrics in sorted(out.glob("train/*/metrics.jsonl")):
        rows += [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return rows


def summary(out: Path, seconds: int) -> str:
    """OUTDIR/summary.md's text."""
    info = _load(out / "versions.json") or {}
    lines = ["# lcjax GPU report", "", f"Total time: {seconds} s. Backend: {info.get('backend')}; devices: "
             f"{', '.join(info.get('devices', [])) or '-'}.", "", "## Versions", "", "| package | version |", "|---|---|",
             f"| python | {info.get('python')} |"]
    lines += [f"| {k} | {v} |" for k, v in info.get("packages", {}).items()]
    lines += ["", "## Steps", "", "| step | status | seconds | result |", "|---|---|---:|---|"]
    steps = (out / "steps.tsv").read_text().splitlines() if (out / "steps.tsv").exists() else []
    for row in steps:
        name, status, took = (row.split("\t") + ["", ""])[:3]
        lines.append(f"| {name} | {status} | {took} | {headline(name, _load(out / f'{name}.json'))} |")
    scaling = _load(out / "bench_scaling.json")
    if scaling and scaling.get("rows"):
        lines += ["", "## Scaling", "", "| devices | states/s | train steps/s | s per iteration |", "|---:|---:|---:|---:|"]
        lines += [f"| {r['devices']} | {_number(r['nodes_per_second'])} | {_number(r['train_steps_per_second'])} | "
                  f"{_number(r['iteration_seconds'])} |" for r in scaling["rows"]]
    rows = _train_rows(out)
    if rows:
        last = rows[-1]
        lines += ["", "## Training run", "", f"Iterations: {len(rows)}; the last took "
                  f"{_number(last.get('time/iteration_seconds'))} s at {_number(last.get('traversal/nodes_per_second'))} states/s.", ""]
        evals = {k: v for k, v in last.items() if k.startswith("eval/") and k.endswith(("/win_rate", "/score_diff", "exploitability"))}
        lines += [f"- {k}: {_number(v)}" for k, v in sorted(evals.items())] or ["- no evaluation in the last row"]
    lines += ["", "Logs and JSON files of every step are beside this file."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", metavar="FILE", help="check the dependencies, write their versions here")
    parser.add_argument("--summary", metavar="OUTDIR", help="write OUTDIR/summary.md from the steps' files")
    parser.add_argument("--seconds", type=int, default=0, help="the report's total time")
    args = parser.parse_args(argv)
    if args.versions:
        info = versions()
        print(f"python {info['python']}; " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()))
        print(f"backend {info['backend']}: {', '.join(info['devices'])}")
        Path(args.versions).write_text(json.dumps(info, indent=2))
    if args.summary:
        out = Path(args.summary)
        (out / "summary.md").write_text(summary(out, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
