"""The training-run driver behind `lcjax train`.

A run lives in `runs/<timestamp>_<name>/`:

    config.yaml      the full configuration (defaults filled in)
    metrics.jsonl    one JSON object per iteration (see `lcjax.cfr.solver` and
                     `lcjax.evaluate` for the keys)
    checkpoints/     orbax checkpoints of the solver state

The driver owns everything that is not Deep CFR itself: the schedule (evaluation,
checkpoints, stopping at `run.max_iterations` or `run.max_minutes`), logging, the progress
display, Ctrl-C handling and resuming. A resumed run continues exactly: the solver state
(PRNG key included) comes from the checkpoint, evaluation keys derive from the seed and
the iteration, and metrics rows past the checkpoint are dropped before training resumes, so
the metrics file reads as if the run had never stopped (timings aside).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import re
import signal
import time
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from lcjax.checkpoint import Checkpointer, CheckpointError
from lcjax.cfr.solver import DeepCFR
from lcjax.config import Config, ConfigError, config_to_dict, load_config, make_game, save_config, solver_config
from lcjax.evaluate import evaluate

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"

# Config sections that may differ when resuming: they steer the schedule, not the state.
RESUMABLE_SECTIONS = ("run", "checkpoint", "evaluation")


_SOLVERS: dict[tuple, DeepCFR] = {}


def make_solver(config: Config) -> DeepCFR:
    """The DeepCFR for `config`, one per (game, rules, solver config) in this process.

    The solver holds only compiled functions (all run data is in SolverState), so sharing
    it lets a resumed run, an evaluation or a notebook reuse what an earlier run compiled.
    """
    key = (config.game, config.rules, solver_config(config))
    if key not in _SOLVERS:
        _SOLVERS[key] = DeepCFR(make_game(config), key[2])
    return _SOLVERS[key]


class RunError(ValueError):
    """A run cannot start or resume; the message is one line naming the problem."""


@dataclasses.dataclass
class RunResult:
    """What `train` returns.

    Attributes:
      run_dir: the run directory.
      iteration: the last completed iteration.
      stopped_by: "max_iterations", "max_minutes" or "interrupt".
      last_eval: the most recent evaluation metrics ({} if none ran).
      last_eval_iteration: the iteration `last_eval` was measured at (0 if none ran).
      solver: the DeepCFR used.
      state: the final SolverState.
    """

    run_dir: Path
    iteration: int
    stopped_by: str
    last_eval: dict
    last_eval_iteration: int
    solver: Any
    state: Any


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def new_run_dir(runs_root: str | os.PathLike, name: str) -> Path:
    """`runs_root/<UTC timestamp>_<name>`; never an existing directory."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = Path(runs_root) / f"{stamp}_{_slug(name)}"
    if path.exists():
        raise RunError(f"run directory {path} already exists; pick another --name or wait a second")
    return path


def eval_key(seed: int, iteration: int) -> jax.Array:
    """The evaluation PRNG key of `iteration`: independent of when the run was resumed."""
    return jax.random.fold_in(jax.random.key(seed ^ 0x5EED), iteration)


def read_metrics(run_dir: str | os.PathLike) -> list[dict]:
    """All rows of a run's metrics.jsonl (an incomplete last line is ignored)."""
    path = Path(run_dir) / METRICS_FILE
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by a crash: everything after it is untrustworthy
    return rows


def _write_metrics(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _append_metrics(path: Path, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _jsonable(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, (np.floating, np.integer)):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None  # JSON has no NaN; a missing loss (no step applied) reads as null
        out[k] = v
    return out


def _check_resume_compatible(saved: Config, given: Config) -> None:
    a, b = config_to_dict(saved), config_to_dict(given)
    for section in a:
        if section in RESUMABLE_SECTIONS or a[section] == b.get(section):
            continue
        if isinstance(a[section], dict):
            for key in a[section]:
                if a[section][key] != b[section].get(key):
                    raise RunError(
                        f"cannot resume: {section}.{key} is {b[section].get(key)!r} but the run was "
                        f"started with {a[section][key]!r} (only run, checkpoint and evaluation may change)"
                    )
        raise RunError(f"cannot resume: {section} is {b.get(section)!r} but the run has {a[section]!r}")


class _Interrupt:
    """Turns the first Ctrl-C into a flag checked between phases; a second one aborts."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        def handler(signum, frame):
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True

        try:
            self._previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread (e.g. a notebook worker): keep defaults
            self._previous = None
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def train(
    config: Config | None = None,
    *,
    resume: str | os.PathLike | None = None,
    runs_root: str | os.PathLike = "runs",
    run_dir: str | os.PathLike | None = None,
    name: str | None = None,
    progress: Callable[[dict], None] | None = None,
    max_iterations: int | None = None,
) -> RunResult:
    """Run (or resume) Deep CFR training, writing the run directory.

    Args:
      config: the configuration; for `resume`, None means the run's own config.yaml.
      resume: a run directory to continue from its latest checkpoint.
      runs_root: where new run directories are created.
      run_dir: an explicit new run directory (must not exist) instead of a timestamped one.
      name: run name (default: `config.run.name`).
      progress: called with a dict after each phase-level event (see `lcjax.cli`).
      max_iterations: override `run.max_iterations` for this call only (tests use it to stop
        a run early and resume it).

    Returns:
      RunResult.
    """
    notify = progress or (lambda event: None)
    if resume is not None:
        run_path = Path(resume)
        if not (run_path / CONFIG_FILE).exists():
            raise RunError(f"cannot resume: {run_path} is not a run directory (no {CONFIG_FILE})")
        saved = load_config(run_path / CONFIG_FILE)
        if config is None:
            config = saved
        else:
            _check_resume_compatible(saved, config)
    else:
        if config is None:
            raise RunError("a config is needed to start a new run")
        run_path = Path(run_dir) if run_dir is not None else new_run_dir(runs_root, name or config.run.name)
        if run_path.exists():
            raise RunError(f"run directory {run_path} already exists; refusing to overwrite it")

    solver = make_solver(config)
    metrics_path = run_path / METRICS_FILE

    if resume is not None:
        try:
            ckpt = Checkpointer.open(run_path / CHECKPOINT_DIR, keep=config.checkpoint.keep, create=False)
            # Memories not in the checkpoint come from this template, so it must be real.
            memory_saved = ckpt.read_metadata().get("memory_saved", True)
            template = _template(solver, config, abstract=memory_saved)
            state, meta = ckpt.restore(None, template=template)
        except CheckpointError as err:
            raise RunError(f"cannot resume {run_path}: {err}") from err
        iteration = int(state.iteration)
        rows = [r for r in read_metrics(run_path) if r.get("iteration", 0) <= iteration]
        if (not rows or rows[-1].get("iteration") != iteration) and meta.get("metrics_row"):
            rows.append(meta["metrics_row"])  # the row was lost after the checkpoint was saved
        _write_metrics(metrics_path, rows)
        last_eval = meta.get("last_eval", {})
        last_eval_iteration = meta.get("last_eval_iteration", 0)
        if not meta.get("memory_saved", True):
            notify({"event": "warning", "message": "checkpoint has no memories: resume is not exact"})
    else:
        run_path.mkdir(parents=True)
        save_config(config, run_path / CONFIG_FILE)
        metrics_path.touch()
        ckpt = Checkpointer.open(run_path / CHECKPOINT_DIR, keep=config.checkpoint.keep, create=True)
        state = _template(solver, config, abstract=False)
        iteration = 0
        last_eval = {}
        last_eval_iteration = 0

    limit = config.run.max_iterations if max_iterations is None else max_iterations
    deadline = None if config.run.max_minutes is None else time.monotonic() + 60.0 * config.run.max_minutes
    stopped_by = "max_iterations"
    ev = config.evaluation
    notify({"event": "start", "run_dir": str(run_path), "iteration": iteration, "max_iterations": limit})

    def save(row: dict | None) -> float:
        t0 = time.perf_counter()
        meta = {
            "config": config_to_dict(config),
            "metrics_row": row,
            "last_eval": last_eval,
            "last_eval_iteration": last_eval_iteration,
            "memory_saved": config.memory.save_in_checkpoint,
        }
        ckpt.save(int(state.iteration), state, metadata=meta, include_memory=config.memory.save_in_checkpoint)
        return time.perf_counter() - t0

    with _Interrupt() as interrupt:
        try:
            while iteration < limit:
                if deadline is not None and time.monotonic() >= deadline:
                    stopped_by = "max_minutes"
                    break
                if interrupt.requested:
                    stopped_by = "interrupt"
                    break
                notify({"event": "phase", "phase": "iteration", "iteration": iteration + 1})
                state, row = solver.iteration(state)
                iteration = int(state.iteration)
                row["time/evaluation_seconds"] = 0.0
                row["time/checkpoint_seconds"] = 0.0
                final = iteration >= limit
                if ev.eval_every and (iteration % ev.eval_every == 0 or final):
                    notify({"event": "phase", "phase": "evaluation", "iteration": iteration})
                    t0 = time.perf_counter()
                    extended = bool(ev.extended_every) and (iteration % ev.extended_every == 0 or final)
                    last_eval = evaluate(solver, state, ev, eval_key(config.run.seed, iteration), extended=extended)
                    last_eval_iteration = iteration
                    row.update(last_eval)
                    row["time/evaluation_seconds"] = time.perf_counter() - t0
                row = _jsonable(row)
                if iteration % config.checkpoint.save_every == 0 or final:
                    notify({"event": "phase", "phase": "checkpoint", "iteration": iteration})
                    row["time/checkpoint_seconds"] = save(row)
                _append_metrics(metrics_path, row)
                notify({"event": "iteration", "row": row, "last_eval": last_eval})
            if ckpt.latest_step() != int(state.iteration) and int(state.iteration) > 0:
                rows = read_metrics(run_path)
                save(rows[-1] if rows and rows[-1].get("iteration") == int(state.iteration) else None)
        except KeyboardInterrupt:
            # A second Ctrl-C: the iteration in flight may have consumed (donated) the
            # state's memories, so nothing is saved; the last checkpoint stays valid.
            stopped_by = "interrupt"
        ckpt.wait_until_finished()
    notify({"event": "end", "iteration": iteration, "stopped_by": stopped_by, "last_eval": last_eval})
    return RunResult(run_path, iteration, stopped_by, last_eval, last_eval_iteration, solver, state)


def _template(solver, config: Config, *, abstract: bool):
    """A solver state with the run's structure: real, or shapes only (no allocation)."""
    key = jax.random.key(config.run.seed)
    return jax.eval_shape(solver.init, key) if abstract else solver.init(key)


def load_run(run_dir: str | os.PathLike, step: int | None = None, *, with_memory: bool = False):
    """(solver, state, config) of a run's checkpoint (`step` None = the latest).

    Without `with_memory` the reservoirs are not read and the state's memories are shape
    placeholders: enough for evaluating or playing, not for training on.

    Raises:
      RunError: not a run directory, no checkpoint, or an unreadable one.
    """
    run_path = Path(run_dir)
    if not (run_path / CONFIG_FILE).exists():
        raise RunError(f"{run_path} is not a run directory (no {CONFIG_FILE})")
    try:
        config = load_config(run_path / CONFIG_FILE)
    except ConfigError as err:
        raise RunError(f"{run_path / CONFIG_FILE}: {err}") from err
    solver = make_solver(config)
    try:
        ckpt = Checkpointer.open(run_path / CHECKPOINT_DIR, create=False)
        template = _template(solver, config, abstract=True)
        state, _ = ckpt.restore(step, template=template, include_memory=with_memory)
    except CheckpointError as err:
        raise RunError(f"{run_path}: {err}") from err
    return solver, state, config
