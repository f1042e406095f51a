"""Checkpoints of a Deep CFR run: orbax's `CheckpointManager` plus lcjax's checks.

    with Checkpointer.open("runs/x/checkpoints", keep=3, create=True) as ckpt:
        ckpt.save(int(state.iteration), state, metadata={"config": config_dict})
        state, metadata = ckpt.restore(None, template=solver.init(jax.random.key(0)))

Layout: orbax's standard one, a directory per step named by the plain step number:

    <step>/                   a committed checkpoint
      commit_success.txt      orbax's commit marker
      _CHECKPOINT_METADATA    orbax's step metadata (timestamps)
      state/                  orbax pytree (OCDBT): iteration, key, networks, optimizers
      memory/                 orbax pytree: the reservoirs (absent if not saved)
      metadata/metadata.json  JSON: the caller's metadata plus a "checkpoint" entry:
                              {"format_version": 2, "step", "iteration", "memory_saved",
                               "key_dtypes": {"key": "key<fry>"}, "saved_at", "versions"}
    <step>.orbax-checkpoint-tmp/   a save in progress (or one cut short by a crash)

Arrays are stored as a nested dict named after the `SolverState` fields, tuple indices and
dict keys (e.g. `advantage_params/0/hidden_0/kernel`), each in its own dtype; a typed PRNG
key as its `jax.random.key_data`, rebuilt with `jax.random.wrap_key_data` in the
template's key dtype, which must be the saved one. A checkpoint of another
`FORMAT_VERSION` is listed and its metadata readable, but `restore` refuses it.

Atomicity is orbax's: a step is written into `<step>.orbax-checkpoint-tmp`, gets its
commit marker, and is renamed to `<step>` when every item is written, so a crash leaves no
`<step>` directory. orbax counts any `<step>` directory as committed; lcjax also asks for
the marker and `metadata.json`, so a directory orbax did not commit (copied by hand, half
deleted) is not listed, not deleted by `keep`, and not overwritten without `force`.

Saving the memories is optional (`include_memory=False`): restoring then returns the
template's reservoirs, which suits evaluation; resuming training from such a checkpoint
restarts the memories empty. With `async_save=True` the arrays are copied off the device
before `save` returns and written in a background thread: `wait_until_finished()` (or
`close()`) before relying on the step. Only one process may write to a directory.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

if TYPE_CHECKING:
    from lcjax.cfr.solver import SolverState

__all__ = ["FORMAT_VERSION", "CheckpointError", "Checkpointer"]

# 2: reservoirs carry their item dtypes as static data (format 1 stored zero-size leaves
# for them, and bfloat16 buffers as bfloat16 before they became uint16 bits).
FORMAT_VERSION = 2
# SolverState fields stored in the "memory" item; everything else goes to "state".
MEMORY_FIELDS = ("advantage_memory", "strategy_memory")

_STATE, _MEMORY, _METADATA = "state", "memory", "metadata"
_METADATA_FILE = "metadata.json"
_COMMIT_MARKER = "commit_success.txt"  # orbax writes it just before the final rename
_INFO = "checkpoint"  # reserved metadata key

LeafPath = tuple[str, ...]  # e.g. ("advantage_params", "0", "hidden_0", "kernel")


class CheckpointError(ValueError):
    """A checkpoint cannot be found, read, or does not fit; the message is one line."""


# --------------------------------------------------------------------------- pytrees
def _leaves(tree: Any, is_leaf=None) -> dict[LeafPath, Any]:
    """{path: leaf} of `tree` in flatten order; a path names fields, indices and dict keys."""
    name = lambda k: str(next((getattr(k, a) for a in ("name", "key", "idx") if hasattr(k, a)), k))  # noqa: E731
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]
    return {tuple(name(k) for k in keypath): x for keypath, x in flat}


def _show(path: LeafPath) -> str:
    return "/".join(path)


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _item_of(path: LeafPath) -> str:
    return _MEMORY if path[0] in MEMORY_FIELDS else _STATE


def _stored_spec(x: Any) -> jax.ShapeDtypeStruct:
    """Shape and dtype of leaf `x` (array or ShapeDtypeStruct) as stored: keys as key data."""
    if _is_key(x):
        return jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(x.shape, x.dtype))
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype)


def _nest(pairs: Iterable[tuple[LeafPath, Any]]) -> dict:
    """The nested dict orbax stores: {"advantage_params": {"0": {"hidden_0": ...}}}."""
    out: dict = {}
    for path, value in pairs:
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def _key_dtypes(tree: Any) -> dict[str, str]:
    """{path: key dtype name, e.g. "key<fry>"} of the typed PRNG keys in `tree`."""
    return {_show(path): str(x.dtype) for path, x in _leaves(tree).items() if _is_key(x)}


def _placement(x: Any) -> jax.sharding.Sharding | None:
    """Where a restored leaf goes: the template leaf's sharding if it is committed to it
    (or a ShapeDtypeStruct with a sharding), else None: uncommitted on the default device,
    as fresh arrays are, so a restored state hits the same jit cache entries."""
    if isinstance(x, jax.Array):
        return x.sharding if x.committed else None
    return getattr(x, "sharding", None)


def _to_device(value: np.ndarray, x: Any) -> Any:
    """A restored numpy leaf (key data for a key) as a jax.Array placed like template leaf `x`."""
    placement = _placement(x)
    if placement is None:
        if _is_key(x):
            return jax.random.wrap_key_data(jnp.asarray(value), dtype=x.dtype)
        return jnp.asarray(value, x.dtype)
    # Each device takes its part of the whole array; this also builds the arrays of a
    # sharding over several processes' devices (each process places its own parts).
    value = np.asarray(value) if _is_key(x) else np.asarray(value, x.dtype)
    placed = jax.make_array_from_callback(value.shape, placement, lambda index: value[index])
    return jax.random.wrap_key_data(placed, dtype=x.dtype) if _is_key(x) else placed


def _materialize(x: Any) -> Any:
    """`x` itself, or zeros for a ShapeDtypeStruct (parts not read from a checkpoint)."""
    if not isinstance(x, jax.ShapeDtypeStruct):
        return x
    spec = _stored_spec(x)
    return _to_device(np.zeros(spec.shape, spec.dtype), x)


def _mismatch(path: LeafPath, saved: tuple | None, wanted: tuple | None) -> str:
    """How leaf `path` differs; `saved` and `wanted` are (shape, dtype) or None if absent."""
    if saved is None:
        return f"leaf {_show(path)} {wanted[0]} is in the template but not in the checkpoint"
    if wanted is None:
        return f"leaf {_show(path)} {saved[0]} is in the checkpoint but not in the template"
    what, i = ("shape", 0) if saved[0] != wanted[0] else ("dtype", 1)
    return f"leaf {_show(path)} has {what} {saved[i]} in the checkpoint but {wanted[i]} in the template"


def _first_line(error: BaseException) -> str:
    """The error's type and the first line of its message (orbax's run over many lines)."""
    line = (str(error).strip().splitlines() or [""])[0][:300]
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


def _checked_metadata(metadata: Mapping[str, Any]) -> dict:
    """The caller's metadata as it will read back (through JSON); raises if it cannot be saved."""
    if not isinstance(metadata, Mapping):
        raise CheckpointError(f"metadata must be a dict, got {type(metadata).__name__}")
    if _INFO in metadata:
        raise CheckpointError(f"metadata key {_INFO!r} is reserved for the checkpointer")
    try:
        return json.loads(json.dumps(dict(metadata)))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"metadata is not JSON-serializable: {_first_line(e)}") from e


# --------------------------------------------------------------------------- steps
def _is_committed(step_dir: epath.Path) -> bool:
    """True for a step directory holding orbax's commit marker and lcjax's metadata."""
    try:
        return (step_dir / _COMMIT_MARKER).exists() and (step_dir / _METADATA / _METADATA_FILE).exists()
    except OSError:
        return False


class _CommittedSteps:
    """orbax's standard `<step>` naming, listing committed steps only (see `_is_committed`);
    as the manager's `step_name_format`, orbax's retention never counts anything else."""

    def __init__(self):
        self._standard = ocp.path.step.standard_name_format()

    def build_name(self, step: int) -> str:
        return self._standard.build_name(step)

    def find_all(self, base_path):
        return (m for m in self._standard.find_all(base_path) if _is_committed(epath.Path(m.path)))

    def find_step(self, base_path, step: int):
        metadata = self._standard.find_step(base_path, step)
        if not _is_committed(epath.Path(metadata.path)):
            raise ValueError(f"step {step} under {base_path} is not a complete checkpoint")
        return metadata


# --------------------------------------------------------------------------- manager
class Checkpointer:
    """Saves and restores `SolverState`s in one directory (see the module docstring); use it
    as a context manager or call `close()`."""

    def __init__(
        self, directory: str | os.PathLike, *, keep: int | None = None, create: bool = False, async_save: bool = False
    ):
        """Open the checkpoint directory `directory` (made absolute).

        `keep`: keep only the newest `keep` steps, deleting older ones after each save (None
        keeps all). `create`: create a missing directory (else CheckpointError, also for a
        file or an invalid `keep`). `async_save`: write in a background thread.
        """
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep <= 0):
            raise CheckpointError(f"keep must be a positive integer or None, got {keep!r}")
        path = os.path.abspath(os.path.expanduser(os.fspath(directory)))
        if os.path.exists(path) and not os.path.isdir(path):
            raise CheckpointError(f"checkpoint directory is not a directory: {path}")
        if not create and not os.path.isdir(path):
            raise CheckpointError(f"checkpoint directory does not exist: {path}")
        self._directory = path
        self._async = bool(async_save)
        self._name_format = _CommittedSteps()
        options = ocp.CheckpointManagerOptions(
            create=create,
            enable_async_checkpointing=self._async,
            preservation_policy=ocp.checkpoint_managers.LatestN(n=keep),
            step_name_format=self._name_format,
        )
        handlers = {
            _STATE: ocp.PyTreeCheckpointHandler(),
            _MEMORY: ocp.PyTreeCheckpointHandler(),
            _METADATA: ocp.JsonCheckpointHandler(filename=_METADATA_FILE),
        }
        self._manager = ocp.CheckpointManager(path, options=options, item_handlers=handlers)

    @classmethod
    def open(cls, directory: str | os.PathLike, **options) -> "Checkpointer":
        """`Checkpointer(directory, **options)`: see the constructor."""
        return cls(directory, **options)

    # ------------------------------------------------------------------ queries
    def all_steps(self) -> list[int]:
        """The committed steps, ascending: those found at `open` plus this object's saves
        (other processes' after `reload()`; with `async_save`, also a save in flight)."""
        return sorted(int(s) for s in self._manager.all_steps())

    def latest_step(self) -> int | None:
        """The newest committed step, or None if there is none (see `all_steps`)."""
        steps = self.all_steps()
        return steps[-1] if steps else None

    def reload(self) -> None:
        """Re-read the list of steps from disk (e.g. while another process trains)."""
        self.wait_until_finished()
        self._manager.reload()

    def _step_dir(self, step: int) -> epath.Path:
        return epath.Path(self._directory) / self._name_format.build_name(step)

    def _resolve(self, step: int | None) -> int:
        steps = self.all_steps()
        if step is None:
            if not steps:
                raise CheckpointError(f"no checkpoints in {self._directory}")
            return steps[-1]
        if step not in steps:
            available = ", ".join(map(str, steps)) if steps else "none"
            raise CheckpointError(f"no checkpoint for step {step} in {self._directory}; available steps: {available}")
        return step

    def read_metadata(self, step: int | None = None) -> dict:
        """The metadata saved with `step` (default: the latest), without reading arrays;
        CheckpointError if there is no such step or its metadata is unreadable."""
        step = self._resolve(step)
        path = self._step_dir(step) / _METADATA / _METADATA_FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise CheckpointError(f"cannot read checkpoint metadata {path}: {_first_line(e)}") from e
        if not isinstance(data, dict) or not isinstance(data.get(_INFO), dict):
            raise CheckpointError(f"checkpoint metadata {path} is not in lcjax's format")
        return data

    # ------------------------------------------------------------------ save
    def save(
        self, step: int, state: "SolverState", *, metadata: Mapping[str, Any], include_memory: bool = True, force=False
    ) -> None:
        """Save `state` as checkpoint `step`, then drop the steps beyond `keep`.

        Args:
          step: int >= 0, normally `int(state.iteration)`; newer than every step unless `force`.
          state: the SolverState (any pytree of arrays; its `MEMORY_FIELDS` go to "memory").
          metadata: JSON-able dict saved alongside (the key "checkpoint" is reserved).
          include_memory: also write the reservoirs (recorded as `memory_saved`).
          force: replace an existing step (deleted first, so a crash during the save loses
            it) or an uncommitted directory of that step; allow a step older than the latest.

        Raises:
          CheckpointError: bad step or metadata, the step exists (without `force`), or orbax
            failed to write (the message says why).
        """
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise CheckpointError(f"step must be an integer >= 0, got {step!r}")
        step = int(step)
        user = _checked_metadata(metadata)
        self.wait_until_finished()
        self._make_room(step, force)

        items: dict[str, list] = {_STATE: [], _MEMORY: []}
        for path, x in _leaves(state).items():
            if isinstance(x, jax.ShapeDtypeStruct):
                raise CheckpointError(f"cannot save an abstract state: leaf {_show(path)} is a ShapeDtypeStruct")
            items[_item_of(path)].append((path, jax.random.key_data(x) if _is_key(x) else x))
        memory_saved = bool(include_memory and items[_MEMORY])
        iteration = getattr(state, "iteration", None)
        info = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "iteration": None if iteration is None else int(iteration),
            "memory_saved": memory_saved,
            "key_dtypes": _key_dtypes(state),
            "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "versions": {"jax": jax.__version__, "orbax_checkpoint": ocp.__version__},
        }
        args = {_STATE: ocp.args.PyTreeSave(_nest(items[_STATE])), _METADATA: ocp.args.JsonSave({**user, _INFO: info})}
        if memory_saved:
            args[_MEMORY] = ocp.args.PyTreeSave(_nest(items[_MEMORY]))
        try:
            saved = self._manager.save(step, args=ocp.args.Composite(**args), force=True)
            if not self._async:
                self._manager.wait_until_finished()
        except Exception as e:  # orbax / tensorstore / filesystem errors
            where = self._step_dir(step)
            raise CheckpointError(f"saving checkpoint step {step} to {where} failed: {_first_line(e)}") from e
        if not saved:
            raise CheckpointError(f"orbax declined to save checkpoint step {step} in {self._directory}")

    def _make_room(self, step: int, force: bool) -> None:
        """Check that `step` may be saved; with `force`, delete what is in its way."""
        steps, step_dir = self.all_steps(), self._step_dir(step)
        if step in steps:
            problem = f"checkpoint step {step} already exists in {self._directory}; pass force=True to replace it"
        elif step_dir.exists():
            problem = f"{step_dir} exists but is not a complete checkpoint; remove it or pass force=True"
        elif steps and step < steps[-1]:
            problem = f"step {step} is older than the latest checkpoint {steps[-1]} in {self._directory}; pass force=True"
        else:
            return
        if not force:
            raise CheckpointError(problem)
        if step in steps:
            self._manager.delete(step)
        elif step_dir.exists():
            step_dir.rmtree()

    # ------------------------------------------------------------------ restore
    def restore(
        self, step: int | None = None, *, template: "SolverState", include_memory: bool = True
    ) -> tuple["SolverState", dict]:
        """Read checkpoint `step` (default: the latest committed one).

        Args:
          step: the step, or None for the latest.
          template: a state with the saved structure, shapes and dtypes, e.g.
            `solver.init(key)` or `jax.eval_shape(solver.init, key)`. Its values are used
            only for parts not read (the reservoirs when not saved or not `include_memory`;
            zeros for ShapeDtypeStructs). Arrays are placed like its leaves (`_placement`).
          include_memory: read the reservoirs if saved (False is faster for evaluation).

        Returns:
          (state, metadata): the saved values in their dtypes, and `read_metadata(step)`.

        Raises:
          CheckpointError: no such step (the message lists the steps), another format
            version, a checkpoint that does not fit the template (the message names the
            leaf and both shapes or dtypes), or unreadable files (the message names the path).
        """
        step = self._resolve(step)
        metadata = self.read_metadata(step)
        info = metadata[_INFO]
        where = f"checkpoint step {step} in {self._directory}"
        if info.get("format_version") != FORMAT_VERSION:
            raise CheckpointError(
                f"{where} has format version {info.get('format_version')}, but this lcjax reads "
                f"format version {FORMAT_VERSION}; it cannot be restored"
            )
        saved_keys, template_keys = info.get("key_dtypes", {}), _key_dtypes(template)
        for name in sorted(set(saved_keys) | set(template_keys)):
            if saved_keys.get(name) != template_keys.get(name):
                raise CheckpointError(
                    f"{where} does not fit the template: PRNG key {name} is {saved_keys.get(name)} "
                    f"in the checkpoint but {template_keys.get(name)} in the template"
                )
        leaves = _leaves(template)
        items = [_STATE] + ([_MEMORY] if include_memory and info.get("memory_saved") else [])
        specs = {path: _stored_spec(x) for path, x in leaves.items() if _item_of(path) in items}
        self._check_fit(step, where, items, specs)

        # Read as numpy, then place each leaf like its template leaf (see `_placement`).
        args = {}
        for item in items:
            mine = [(p, s) for p, s in specs.items() if _item_of(p) == item]
            as_numpy = [(p, ocp.RestoreArgs(restore_type=np.ndarray, dtype=s.dtype)) for p, s in mine]
            args[item] = ocp.args.PyTreeRestore(item=_nest(mine), restore_args=_nest(as_numpy))
        try:
            restored = self._manager.restore(step, args=ocp.args.Composite(**args))
        except Exception as e:  # orbax / tensorstore errors: corrupt or missing files
            raise CheckpointError(f"cannot read {where} ({self._step_dir(step)}): {_first_line(e)}") from e
        values = {path: x for item in items for path, x in _leaves(restored[item]).items()}
        state = [_to_device(values[path], x) if path in specs else _materialize(x) for path, x in leaves.items()]
        return jax.tree.unflatten(jax.tree.structure(template), state), metadata

    def _check_fit(self, step: int, where: str, items: list[str], specs: dict) -> None:
        """Raise naming the first leaf whose stored shape or dtype differs from `specs`."""
        is_leaf = lambda x: hasattr(x, "shape") and hasattr(x, "dtype")  # noqa: E731
        try:
            found = self._manager.item_metadata(step)
            trees = [getattr(found[item], "tree", found[item]) for item in items]
            saved = {p: (tuple(x.shape), np.dtype(x.dtype)) for t in trees for p, x in _leaves(t, is_leaf).items()}
        except Exception as e:
            raise CheckpointError(f"cannot read {where} ({self._step_dir(step)}): {_first_line(e)}") from e
        wanted = {path: (tuple(s.shape), np.dtype(s.dtype)) for path, s in specs.items()}
        paths = {**wanted, **saved}  # the template's order, then leaves only in the checkpoint
        problems = [_mismatch(p, saved.get(p), wanted.get(p)) for p in paths if saved.get(p) != wanted.get(p)]
        if problems:
            more = f" (and {len(problems) - 1} more mismatches)" if len(problems) > 1 else ""
            raise CheckpointError(f"{where} does not fit the template: {problems[0]}{more}")

    # ------------------------------------------------------------------ lifecycle
    def wait_until_finished(self) -> None:
        """Block until a background save (async_save) is committed; re-raises its error."""
        try:
            self._manager.wait_until_finished()
        except Exception as e:
            raise CheckpointError(f"background save in {self._directory} failed: {_first_line(e)}") from e

    def close(self) -> None:
        """Wait for pending saves and release orbax's resources."""
        try:
            self.wait_until_finished()
        finally:
            self._manager.close()

    def __enter__(self) -> "Checkpointer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
