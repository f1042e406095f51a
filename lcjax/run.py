"""The training-run driver behind `lcjax train`.

A run lives in `runs/<timestamp>_<name>/`:

    config.yaml      the full configuration (defaults filled in); a resume given a
                     config rewrites it with that one's values
    metrics.jsonl    one JSON object per iteration (see `lcjax.cfr.solver`,
                     `lcjax.evaluate` and `lcjax.diagnostics` for the keys)
    checkpoints/     orbax checkpoints of the solver state

The driver owns everything that is not Deep CFR itself: the schedule (evaluation,
checkpoints, stopping at `run.max_iterations` or `run.max_minutes`), logging, the progress
display, Ctrl-C handling and resuming. A resumed run continues exactly: the solver state
(PRNG key included) comes from the checkpoint, evaluation keys derive from the seed and
the iteration, and metrics rows past the checkpoint are dropped before training resumes, so
the metrics file reads as if the run had never stopped (timings aside).

The `distributed` section picks the devices (`lcjax.distributed.make_mesh`; more than one
runs the data-parallel programs of `lcjax.cfr.mesh`) and, for several processes, joins
them first (`lcjax.distributed.initialize`). Every process then runs the same programs and
writes its own shards of each checkpoint; process 0 alone writes config.yaml and
metrics.jsonl and reports progress. A checkpoint records its device count, and a resume on
another count is refused.
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

from lcjax import distributed
from lcjax.checkpoint import Checkpointer, CheckpointError
from lcjax.cfr.mesh import state_shardings
from lcjax.cfr.solver import DeepCFR, make_solver
from lcjax.config import Config, ConfigError, config_to_dict, load_config, make_game, save_config, solver_config
from lcjax.evaluate import evaluate

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"

# Config sections that may differ when resuming: they steer the schedule, not the state.
# (`distributed` may too, as long as the device count stays: see `_check_devices`.)
RESUMABLE_SECTIONS = ("run", "checkpoint", "evaluation", "distributed")
# Keys of other sections a resume may change: the fit that ends a run (from a fresh network,
# with a key the run's state keeps) changes nothing the resumed run computes before it.
RESUMABLE_KEYS = ("optimization.final_strategy_steps",)


def run_solver(config: Config, mesh=None) -> DeepCFR:
    """The DeepCFR of a run's config: `make_solver` on its game and solver settings (and
    `mesh`, see `lcjax.cfr.mesh`), so runs, evaluations and notebooks in one process share
    one solver (and its compilations) per equal config."""
    return make_solver(make_game(config), solver_config(config), mesh)


def strategy_fit_solver(solver: DeepCFR, config: Config, steps: int) -> DeepCFR:
    """The run's solver (`solver`, built from `config`) with strategy phases of `steps` Adam
    steps: `solver` itself where its phases take them, else one with the same networks,
    state layout and mesh, so it fits a strategy network on the run's own state, and only
    its strategy phase compiles again. The fit that ends a run (`optimization.
    final_strategy_steps`) and refits of a finished run's network (scripts/refit_strategy.py)
    take it."""
    if steps == config.optimization.strategy_steps:
        return solver
    opt = dataclasses.replace(config.optimization, strategy_steps=steps)
    return run_solver(dataclasses.replace(config, optimization=opt), solver.mesh)


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
    for path in RESUMABLE_KEYS:
        section, key = path.split(".")
        for d in (a, b):
            d.get(section, {}).pop(key, None)
    for section in a:
        if section in RESUMABLE_SECTIONS:
            continue
        found = _first_difference(a[section], b.get(section), section)
        if found is not None:
            path, was, now = found
            raise RunError(
                f"cannot resume: {path} is {now!r} but the run was started with {was!r} "
                f"(only run, checkpoint, evaluation and {', '.join(RESUMABLE_KEYS)} may change)"
            )


def _first_difference(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    """(key path, a's value, b's value) of the first leaf where the nested dicts differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            found = _first_difference(a[key], b.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    return None if a == b else (path, a, b)


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


@dataclasses.dataclass
class _RunState:
    """What the driver carries from one iteration to the next (all of it is checkpointed)."""

    state: Any
    iteration: int
    last_eval: dict
    last_eval_iteration: int


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
      progress: called with a dict after each phase-level event (see `lcjax.cli`); the
        first is "start", sent once the run directory and checkpoint are open, so every
        RunError comes before it.
      max_iterations: override `run.max_iterations` for this call only (tests use it to stop
        a run early and resume it).

    Returns:
      RunResult.
    """
    resumed_with_config = resume is not None and config is not None
    config, run_path = resolve_run(config, resume=resume, runs_root=runs_root, run_dir=run_dir, name=name)
    try:
        distributed.initialize(config.distributed)
    except distributed.DistributedError as err:
        raise RunError(str(err)) from None
    mesh = distributed.make_mesh(config.distributed)
    # Every process runs the same programs; process 0 alone writes the run's files, in the
    # directory it named (a timestamped name may differ between processes).
    run_path = Path(distributed.broadcast_text(str(run_path)))
    distributed.sync("lcjax-run-resolved")
    notify = (progress or (lambda event: None)) if distributed.is_main_process() else (lambda event: None)
    solver = run_solver(config, mesh)
    if resume is not None:
        ckpt, run = _reopen(solver, config, run_path, notify)
        if resumed_with_config:
            _record_resume_config(config, run_path)
    else:
        ckpt, run = _create(solver, config, run_path)
    limit = config.run.max_iterations if max_iterations is None else max_iterations
    notify({"event": "start", "run_dir": str(run_path), "iteration": run.iteration, "max_iterations": limit})
    with _Interrupt() as interrupt:
        try:
            stopped_by = _iterate(solver, config, run_path, ckpt, run, limit, interrupt, notify)
            if ckpt.latest_step() != int(run.state.iteration) and int(run.state.iteration) > 0:
                rows = read_metrics(run_path)
                last = rows[-1] if rows and rows[-1].get("iteration") == int(run.state.iteration) else None
                _save(ckpt, config, run, last, solver)
        except KeyboardInterrupt:
            # A second Ctrl-C: the iteration in flight may have consumed (donated) the
            # state's memories, so nothing is saved; the last checkpoint stays valid.
            stopped_by = "interrupt"
        ckpt.wait_until_finished()
    notify({"event": "end", "iteration": run.iteration, "stopped_by": stopped_by, "last_eval": run.last_eval})
    return RunResult(run_path, run.iteration, stopped_by, run.last_eval, run.last_eval_iteration, solver, run.state)


def resolve_run(
    config: Config | None,
    *,
    resume: str | os.PathLike | None = None,
    runs_root: str | os.PathLike = "runs",
    run_dir: str | os.PathLike | None = None,
    name: str | None = None,
) -> tuple[Config, Path]:
    """(config, run directory) of a run `train` would start or resume; writes nothing.

    Raises:
      RunError: resuming something that is not a run directory or with an incompatible
        config, no config for a new run, or a new run directory that already exists.
    """
    if resume is not None:
        run_path = Path(resume)
        if not (run_path / CONFIG_FILE).exists():
            raise RunError(f"cannot resume: {run_path} is not a run directory (no {CONFIG_FILE})")
        saved = load_config(run_path / CONFIG_FILE)
        if config is not None:
            _check_resume_compatible(saved, config)
        return (saved if config is None else config), run_path
    if config is None:
        raise RunError("a config is needed to start a new run")
    run_path = Path(run_dir) if run_dir is not None else new_run_dir(runs_root, name or config.run.name)
    if run_path.exists():
        raise RunError(f"run directory {run_path} already exists; refusing to overwrite it")
    return config, run_path


def _record_resume_config(config: Config, run_path: Path) -> None:
    """Write the config a resume was given (`resolve_run` checked it against the saved one:
    only keys that may change differ, e.g. `run.max_iterations`, `evaluation.*`,
    `optimization.final_strategy_steps`) to config.yaml, once the checkpoint has opened.

    The file then describes what the run now runs: a later `--resume` without `--config`
    continues with these settings, and readers of the run (`load_run`, refit_strategy's
    default step count) see the last fit's length the run ends on.
    """
    if distributed.is_main_process():
        save_config(config, run_path / CONFIG_FILE)


def _create(solver, config: Config, run_path: Path) -> tuple[Checkpointer, _RunState]:
    """A new run directory (config, empty metrics, checkpoints) and the initial state."""
    if distributed.is_main_process():
        run_path.mkdir(parents=True)
        save_config(config, run_path / CONFIG_FILE)
        (run_path / METRICS_FILE).touch()
    distributed.sync("lcjax-run-created")
    ckpt = Checkpointer.open(run_path / CHECKPOINT_DIR, keep=config.checkpoint.keep, create=True)
    return ckpt, _RunState(_template(solver, config, abstract=False), 0, {}, 0)


def _reopen(solver, config: Config, run_path: Path, notify) -> tuple[Checkpointer, _RunState]:
    """The latest checkpoint of a run, with its metrics file cut back to match it."""
    try:
        ckpt = Checkpointer.open(run_path / CHECKPOINT_DIR, keep=config.checkpoint.keep, create=False)
        saved = ckpt.read_metadata()
        _check_devices(saved, solver)
        # Memories not in the checkpoint come from this template, so it must be real.
        memory_saved = saved.get("memory_saved", True)
        template = _template(solver, config, abstract=memory_saved)
        state, meta = ckpt.restore(None, template=template)
    except CheckpointError as err:
        raise RunError(f"cannot resume {run_path}: {err}") from err
    iteration = int(state.iteration)
    rows = [r for r in read_metrics(run_path) if r.get("iteration", 0) <= iteration]
    if (not rows or rows[-1].get("iteration") != iteration) and meta.get("metrics_row"):
        rows.append(meta["metrics_row"])  # the row was lost after the checkpoint was saved
    if distributed.is_main_process():
        _write_metrics(run_path / METRICS_FILE, rows)
    if not meta.get("memory_saved", True):
        notify({"event": "warning", "message": "checkpoint has no memories: resume is not exact"})
    return ckpt, _RunState(state, iteration, meta.get("last_eval", {}), meta.get("last_eval_iteration", 0))


def _devices(solver) -> int:
    """Devices the solver's programs run on (1 without a mesh)."""
    return 1 if solver.mesh is None else int(solver.mesh.size)


def _check_devices(metadata: dict, solver) -> None:
    """Refuse to resume on another device count: the reservoirs are sharded per device."""
    saved, now = int(metadata.get("devices", 1)), _devices(solver)
    if saved != now:
        raise RunError(
            f"cannot resume: the checkpoint was written on {saved} device(s) but this run has {now}; "
            f"set distributed.devices={saved} (resuming on another device count is not supported)"
        )


def _save(ckpt: Checkpointer, config: Config, run: _RunState, row: dict | None, solver) -> float:
    """Checkpoint `run.state` with the metadata a resume needs; returns the seconds taken."""
    t0 = time.perf_counter()
    meta = {
        "config": config_to_dict(config),
        "metrics_row": row,
        "last_eval": run.last_eval,
        "last_eval_iteration": run.last_eval_iteration,
        "memory_saved": config.memory.save_in_checkpoint,
        "devices": _devices(solver),
    }
    ckpt.save(int(run.state.iteration), run.state, metadata=meta, include_memory=config.memory.save_in_checkpoint)
    return time.perf_counter() - t0


def _iterate(solver, config: Config, run_path: Path, ckpt, run: _RunState, limit: int, interrupt, notify) -> str:
    """Iterations until `limit`, the deadline or a Ctrl-C; returns what stopped them."""
    deadline = None if config.run.max_minutes is None else time.monotonic() + 60.0 * config.run.max_minutes
    while run.iteration < limit:
        if interrupt.requested:
            return "interrupt"
        notify({"event": "phase", "phase": "iteration", "iteration": run.iteration + 1})
        # The iteration that reaches `limit` is known to be the last: where the stop fits the
        # strategy network anew, the scheduled phase it would replace is skipped. (A stop by
        # the clock or a Ctrl-C cannot be known before the iteration, and keeps that phase.)
        replaced = run.iteration + 1 >= limit and _strategy_fit_due_at_stop(config, run.iteration + 1)
        run.state, row = solver.iteration(run.state, fit_strategy=not replaced)
        run.iteration = int(run.state.iteration)
        # The last iteration of a run is evaluated and checkpointed whatever the schedule,
        # whether `run.max_iterations` or `run.max_minutes` ends it, so the learning curve
        # and the end-of-run table describe the final checkpoint. A Ctrl-C skips the
        # evaluation (the user asked to stop) but still saves.
        out_of_time = deadline is not None and time.monotonic() >= deadline
        final = run.iteration >= limit or out_of_time
        stopping = final or interrupt.requested
        if stopping and _strategy_fit_due_at_stop(config, run.iteration):
            notify({"event": "phase", "phase": "last strategy fit", "iteration": run.iteration,
                    "steps": config.optimization.last_strategy_steps})
            scheduled = row.get("time/strategy_train_seconds", 0.0)
            last = strategy_fit_solver(solver, config, config.optimization.last_strategy_steps)
            run.state, fit = last.train_strategy(run.state, keep_key=True)
            row.update(fit)
            row["time/strategy_train_seconds"] += scheduled  # a scheduled phase of this iteration, if one ran
        row.update({"time/evaluation_seconds": 0.0, "time/checkpoint_seconds": 0.0})
        row["time/evaluation_seconds"] = _evaluate_if_due(solver, config, run, row, final, notify)
        row = _jsonable(row)
        if run.iteration % config.checkpoint.save_every == 0 or final:
            notify({"event": "phase", "phase": "checkpoint", "iteration": run.iteration})
            row["time/checkpoint_seconds"] = _save(ckpt, config, run, row, solver)
        if distributed.is_main_process():
            _append_metrics(run_path / METRICS_FILE, row)
        notify({"event": "iteration", "row": row, "last_eval": run.last_eval})
        if out_of_time and run.iteration < limit:
            return "max_minutes"
    return "max_iterations"


def _strategy_fit_due_at_stop(config: Config, iteration: int) -> bool:
    """Whether a run stopping after `iteration` fits the strategy network first: with fresh
    strategy networks (`strategy_warm_start: false`) and the last scheduled phase behind it,
    or with `final_strategy_steps` other than the scheduled phases' steps, the final
    checkpoint then holds a network of the final reservoir fitted `last_strategy_steps`
    steps. A resume is unchanged by it (the next scheduled phase starts from a fresh network
    again, and the PRNG key is kept), so the run still continues exactly."""
    opt = config.optimization
    if opt.strategy_warm_start:
        return False
    return iteration % opt.strategy_train_every != 0 or opt.last_strategy_steps != opt.strategy_steps


def _evaluate_if_due(solver, config: Config, run: _RunState, row: dict, final: bool, notify) -> float:
    """The scheduled evaluation of `run.iteration`, if one is due: its metrics go into `row`
    and `run.last_eval`. Returns the seconds it took (0 if none was due)."""
    ev = config.evaluation
    if not ev.eval_every or (run.iteration % ev.eval_every != 0 and not final):
        return 0.0
    notify({"event": "phase", "phase": "evaluation", "iteration": run.iteration})
    t0 = time.perf_counter()
    extended = bool(ev.extended_every) and (run.iteration % ev.extended_every == 0 or final)
    # The probe states of the diagnostics are built from the run seed at the first
    # evaluation and cached for the rest of the run (`lcjax.diagnostics.run_probe_set`).
    key = eval_key(config.run.seed, run.iteration)
    run.last_eval = evaluate(solver, run.state, ev, key, extended=extended, seed=config.run.seed)
    run.last_eval_iteration = run.iteration
    row.update(run.last_eval)
    return time.perf_counter() - t0


def _template(solver, config: Config, *, abstract: bool):
    """A solver state with the run's structure: real, or shapes only (no allocation)."""
    key = jax.random.key(config.run.seed)
    if not abstract:
        return solver.init(key)
    shapes = jax.eval_shape(solver.init, key)
    if solver.mesh is None:
        return shapes
    # On a mesh every leaf says where it goes, so a restored state is placed as a fresh one.
    return jax.tree.map(lambda s, where: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=where),
                        shapes, state_shardings(shapes, solver.mesh))


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
    solver = run_solver(config)
    try:
        ckpt = Checkpointer.open(run_path / CHECKPOINT_DIR, create=False)
        template = _template(solver, config, abstract=True)
        state, _ = ckpt.restore(step, template=template, include_memory=with_memory)
    except CheckpointError as err:
        raise RunError(f"{run_path}: {err}") from err
    return solver, state, config
