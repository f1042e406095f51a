#!/usr/bin/env bash
# A performance report of lcjax on this machine's accelerators, in one command:
#
#     scripts/gpu_report.sh OUTDIR            # ~9 minutes at most on a GPU machine
#     scripts/gpu_report.sh --tiny OUTDIR     # tiny settings: the script's own check, on CPU
#
# It runs from the checkout (the package goes on PYTHONPATH) on the Python packages already
# installed, and installs nothing: a machine without network access works as long as JAX,
# flax, optax, orbax-checkpoint, chex, numpy, pyyaml and rich are there (any JAX build, e.g.
# a CUDA one). It prints the versions it runs with and names a missing dependency.
#
# Steps, each with its own time limit inside a 540-second total (a step the budget cannot fit
# is skipped): versions, bench_env, bench_traversal (probe and value schemes),
# bench_iteration, bench_precision, bench_scaling over the local devices, and a short
# training run of the default config that ends with an evaluation. Each step writes
# OUTDIR/<step>.json (and the run, OUTDIR/train/) and its output to OUTDIR/<step>.log;
# OUTDIR/summary.md is the one-page result. PYTHON selects the interpreter (default python3).
set -u

usage() { echo "usage: scripts/gpu_report.sh [--tiny] OUTDIR" >&2; exit 2; }
TINY=0
if [ "${1:-}" = "--tiny" ]; then TINY=1; shift; fi
[ $# -eq 1 ] || usage
OUT=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT" || { echo "error: cannot create $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
BUDGET=540  # seconds; the tiny check has no time limit to speak of (it is not a measurement)
[ $TINY -eq 1 ] && BUDGET=3600
START=$(date +%s)
: > "$OUT/steps.tsv"

# --- dependencies and versions -------------------------------------------------------
if ! "$PYTHON" "$ROOT/scripts/gpu_report_summary.py" --versions "$OUT/versions.json"; then
    exit 2  # the line above named what is missing
fi

# step NAME LIMIT_SECONDS COMMAND...: run it with its output in OUT/NAME.log and its status
# in OUT/steps.tsv, within both its own limit and what is left of the budget.
step() {
    local name=$1 limit=$2 left rc t0
    shift 2
    left=$((BUDGET - ($(date +%s) - START)))
    if [ "$left" -lt 15 ]; then
        printf '%s\tskipped\t0\n' "$name" >> "$OUT/steps.tsv"
        echo "== $name: skipped (the report's budget is spent)"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (at most ${limit} s)"
    t0=$(date +%s)
    timeout --signal=TERM --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    local status=ok
    [ $rc -eq 124 ] && status=timeout
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && status="failed ($rc)"
    printf '%s\t%s\t%s\n' "$name" "$status" "$(($(date +%s) - t0))" >> "$OUT/steps.tsv"
    tail -n 3 "$OUT/$name.log"
}

S="$ROOT/scripts"
DEFAULT="$ROOT/configs/deep_cfr/default.yaml"
LEDUC="$ROOT/configs/deep_cfr/leduc.yaml"
if [ $TINY -eq 1 ]; then
    # A small Lost Cities variant (Leduc where any game will do) and tiny networks: the
    # report's plumbing, not the machine.
    SETS=(--set rules.n_colors=2 --set rules.n_ranks=3 --set rules.hand_size=3 --set rules.max_turns=30
          --set network.hidden_size=8 --set network.num_layers=1 --set run.precision=float32
          --set traversal.probe.branch_probability=0.3 --set traversal.probe.max_probes=4
          --set traversal.probe.max_steps=62 --set traversal.probe.max_strategy=32 --set traversal.probe.rollout_batch=64
          --set traversal.value.max_samples=8 --set traversal.value.max_strategy=32 --set traversal.value.max_steps=62
          --set memory.advantage_capacity=4096 --set memory.strategy_capacity=4096)
    SMALL=(--set network.hidden_size=8 --set network.num_layers=1
           --set traversal.traversals_per_player=8 --set traversal.traversal_batch=8
           --set optimization.advantage_steps=2 --set optimization.strategy_steps=2
           --set optimization.advantage_batch=16 --set optimization.strategy_batch=16
           --set memory.advantage_capacity=1024 --set memory.strategy_capacity=1024)
    step bench_env 600 "$PYTHON" "$S/bench_env.py" --batches 4 --steps 8 --repeats 1 --colors 2 --json "$OUT/bench_env.json"
    step bench_traversal_probe 600 "$PYTHON" "$S/bench_traversal.py" "${SETS[@]}" --batches 2 --repeats 1 --json "$OUT/bench_traversal_probe.json"
    step bench_traversal_value 600 "$PYTHON" "$S/bench_traversal.py" "${SETS[@]}" --scheme value --batches 2 --repeats 1 --json "$OUT/bench_traversal_value.json"
    step bench_iteration 600 "$PYTHON" "$S/bench_iteration.py" "${SETS[@]}" --target-nodes 2000 --calibration-batch 2 \
        --advantage-steps 2 --strategy-steps 2 --batch 16 --repeats 1 --json "$OUT/bench_iteration.json"
    step bench_precision 600 "$PYTHON" "$S/bench_precision.py" --networks 8x1 --forward-batch 8 --train-batch 8 \
        --train-steps 2 --capacity 32 --repeats 1 --min-time 0 --json "$OUT/bench_precision.json"
    step bench_scaling 600 "$PYTHON" "$S/bench_scaling.py" --config "$LEDUC" "${SMALL[@]}" --devices 1,2 --repeats 1 --json "$OUT/bench_scaling.json"
    step train 600 "$PYTHON" -m lcjax.cli train --config "$LEDUC" "${SMALL[@]}" --set run.max_iterations=2 \
        --set evaluation.eval_every=2 --set checkpoint.save_every=2 --runs-root "$OUT/train"
else
    DEVICES=$("$PYTHON" -c "import jax; n = len(jax.devices()); print(','.join(str(c) for c in sorted({1, 2, 4, 8, n}) if c <= n))")
    step bench_env 40 "$PYTHON" "$S/bench_env.py" --batches 256,4096,16384 --repeats 3 --json "$OUT/bench_env.json"
    step bench_traversal_probe 60 "$PYTHON" "$S/bench_traversal.py" --batches 16,64,256 --json "$OUT/bench_traversal_probe.json"
    step bench_traversal_value 60 "$PYTHON" "$S/bench_traversal.py" --scheme value --batches 16,64,256 --json "$OUT/bench_traversal_value.json"
    step bench_iteration 90 "$PYTHON" "$S/bench_iteration.py" --repeats 1 --json "$OUT/bench_iteration.json"
    step bench_precision 50 "$PYTHON" "$S/bench_precision.py" --repeats 3 --json "$OUT/bench_precision.json"
    step bench_scaling 120 "$PYTHON" "$S/bench_scaling.py" --config "$DEFAULT" --set traversal.traversals_per_player=256 --set traversal.traversal_batch=256 \
        --set optimization.advantage_steps=128 --set optimization.strategy_steps=128 \
        --devices "$DEVICES" --repeats 1 --json "$OUT/bench_scaling.json"
    step train 120 "$PYTHON" -m lcjax.cli train --config "$DEFAULT" --set run.max_iterations=3 --set evaluation.eval_every=3 \
        --set evaluation.games=500 --set evaluation.extended_every=0 --set checkpoint.save_every=3 \
        --set optimization.final_strategy_steps=0 --runs-root "$OUT/train"
fi

"$PYTHON" "$ROOT/scripts/gpu_report_summary.py" --summary "$OUT" --seconds $(($(date +%s) - START))
echo "wrote $OUT/summary.md"
