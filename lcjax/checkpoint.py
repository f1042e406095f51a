"""Checkpoints of a Deep CFR run: a thin wrapper over orbax's `CheckpointManager`.

    ckpt = Checkpointer.open("runs/x/checkpoints", keep=3, create=True)
    ckpt.save(int(state.iteration), state, metadata={"config": config_dict})
    ...
    template = solver.init(jax.random.key(0))       # structure, shapes and dtypes only
    state, metadata = ckpt.restore(None, template=template)  # latest step
    ckpt.close()

Layout under the directory (one subdirectory per step, named by the plain step number):

    <step>/                   a committed checkpoint
      commit_success.txt      orbax's commit marker
      _CHECKPOINT_METADATA    orbax's step metadata (timestamps)
      state/                  orbax pytree (OCDBT): iteration, key, networks, optimizers
      memory/                 orbax pytree: the reservoirs (absent if not saved)
      metadata/metadata.json  JSON: the caller's metadata plus a "checkpoint" entry
    <step>.orbax-checkpoint-tmp/   a save in progress (or one cut short by a crash)

Arrays are stored as a nested dict named after the `SolverState` fields, tuple indices and
dict keys (e.g. `advantage_params/0/hidden_0/kernel`), in their own dtypes (bfloat16
included). Two kinds of leaves are special:

* typed PRNG keys (`jax.random.key`) are stored as their `jax.random.key_data` (uint32)
  and rewrapped with the template's key dtype on restore; the key dtype (e.g.
  "key<fry>") is recorded in the metadata and must match the template's;
* zero-size leaves (a `Reservoir.template`'s dtype carriers) are not stored (orbax cannot
  store them); restore takes them from the template.

Restoring needs a `template`: a state with the structure, shapes and dtypes of the saved
one, e.g. `solver.init(key)` from a `DeepCFR` built with the run's config, or the cheaper
`jax.eval_shape(solver.init, key)` (leaves may be `jax.ShapeDtypeStruct`s; parts that are
not read from the checkpoint are then filled with zeros). A checkpoint that does not fit the
template raises `CheckpointError` naming the first mismatching leaf.

Atomicity: orbax (checked for orbax-checkpoint 0.12) writes a step into
`<step>.orbax-checkpoint-tmp`, writes `commit_success.txt` into it and renames it to
`<step>` only when every item is written. `all_steps()`, `latest_step()` and `restore()`
see only *complete* steps: a plain `<step>` directory holding `commit_success.txt` and a
readable `metadata/metadata.json` of this format, with the item directories that the
metadata lists. Temporary directories and incomplete step directories are ignored (not
deleted: another process may be writing them); orbax removes a leftover temporary
directory when the same step is saved again.

Metadata: `save(metadata=...)` takes a JSON-able dict (the run config, host RNG state,
driver info...). It is stored with a reserved "checkpoint" entry added:

    {"format_version": 1, "step": int, "iteration": int, "memory_saved": bool,
     "key_dtypes": {"key": "key<fry>"}, "saved_at": ISO-8601 UTC,
     "versions": {"jax": ..., "orbax_checkpoint": ...}}

`read_metadata` returns the whole dict without touching the arrays. The dict goes through
JSON, so tuples come back as lists and dict keys as strings.

Saving the memories is optional (`include_memory=False`): the reservoirs are then not
written, `metadata["checkpoint"]["memory_saved"]` is False, and restoring returns the
template's reservoirs (empty for a fresh `solver.init`). Such a checkpoint suits evaluation
and small snapshots; resuming training from it restarts the memories empty.

Saving is synchronous by default: when `save` returns the step is committed. With
`async_save=True` the arrays are copied off the device before `save` returns and written
in a background thread; call `wait_until_finished()` before relying on the step (`close()`
waits too). Only one process may write to a directory.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

if TYPE_CHECKING:
    from lcjax.cfr.solver import SolverState

__all__ = ["CheckpointError", "Checkpointer"]

FORMAT_VERSION = 1
# SolverState fields stored in the "memory" item; everything else goes to "state".
MEMORY_FIELDS = ("advantage_memory", "strategy_memory")

_STATE, _MEMORY, _METADATA = "state", "memory", "metadata"
_METADATA_FILE = "metadata.json"
_COMMIT_MARKER = "commit_success.txt"  # orbax writes it just before the final rename
_INFO = "checkpoint"  # reserved metadata key


class CheckpointError(ValueError):
    """A checkpoint cannot be found, read, or does not fit; the message is one line."""


# --------------------------------------------------------------------------- pytrees
def _key_name(entry: Any) -> str:
    for attr in ("name", "key", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _path(keypath) -> tuple[str, ...]:
    return tuple(_key_name(k) for k in keypath)


def _show(path: tuple[str, ...]) -> str:
    return "/".join(path)


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _leaves(tree: Any) -> list[tuple[tuple[str, ...], Any]]:
    """(path, leaf) pairs in flatten order; paths are unique tuples of strings."""
    pairs = [
        (_path(p), x if hasattr(x, "dtype") and hasattr(x, "shape") else np.asarray(x))
        for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]
    seen = set()
    for path, _ in pairs:
        if path in seen:
            raise CheckpointError(f"two leaves of the state share the path {_show(path)!r}")
        seen.add(path)
    return pairs


def _item_of(path: tuple[str, ...]) -> str:
    return _MEMORY if path[0] in MEMORY_FIELDS else _STATE


def _stored_spec(x: Any) -> jax.ShapeDtypeStruct:
    """Shape and dtype of leaf `x` (array or ShapeDtypeStruct) as stored on disk."""
    if _is_key(x):
        return jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(x.shape, x.dtype))
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype)


def _is_stored(x: Any) -> bool:
    return int(np.prod(_stored_spec(x).shape)) > 0


def _nest(pairs: Iterator[tuple[tuple[str, ...], Any]]) -> dict:
    out: dict = {}
    for path, value in pairs:
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def _pop(tree: Mapping, path: tuple[str, ...]) -> Any:
    for part in path[:-1]:
        tree = tree[part]
    return tree.pop(path[-1])


def _flatten_metadata(tree: Any) -> dict[tuple[str, ...], tuple[tuple[int, ...], np.dtype]]:
    is_leaf = lambda x: hasattr(x, "shape") and hasattr(x, "dtype")  # noqa: E731
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]
    return {_path(p): (tuple(x.shape), np.dtype(x.dtype)) for p, x in flat}


def _placement(x: Any) -> jax.sharding.Sharding | None:
    """Where a restored leaf goes: the template leaf's sharding if it is committed to it
    (or a ShapeDtypeStruct with a sharding), else None (uncommitted, default device)."""
    if isinstance(x, jax.Array):
        return x.sharding if x.committed else None
    return getattr(x, "sharding", None)


def _to_device(value: np.ndarray, x: Any) -> Any:
    """A restored numpy leaf as a jax.Array placed like template leaf `x`."""
    placement = _placement(x)
    if _is_key(x):
        key = jax.random.wrap_key_data(jnp.asarray(value), dtype=x.dtype)
        return key if placement is None else jax.device_put(key, placement)
    if placement is None:
        return jnp.asarray(value, dtype=x.dtype)
    return jax.device_put(np.asarray(value, dtype=x.dtype), placement)


def _materialize(x: Any) -> Any:
    """`x` itself, or zeros for a ShapeDtypeStruct (parts not read from a checkpoint)."""
    if not isinstance(x, jax.ShapeDtypeStruct):
        return x
    if _is_key(x):
        data = jnp.zeros(_stored_spec(x).shape, _stored_spec(x).dtype)
        return jax.random.wrap_key_data(data, dtype=x.dtype)
    zeros = jnp.zeros(x.shape, x.dtype)
    return zeros if x.sharding is None else jax.device_put(zeros, x.sharding)


def _is_legacy_bf16(saved_dtype: Any, template_dtype: Any) -> bool:
    """A bfloat16 reservoir leaf saved before such leaves were stored as uint16 bits."""
    return np.dtype(saved_dtype) == np.dtype(jnp.bfloat16) and np.dtype(template_dtype) == np.dtype(np.uint16)


def _first_line(error: BaseException, limit: int = 300) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    if len(line) > limit:
        line = line[:limit] + "..."
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


# --------------------------------------------------------------------------- steps
def _read_info(step_dir: epath.Path) -> dict | None:
    """The "checkpoint" entry of a step's metadata, or None if missing or unreadable."""
    try:
        data = json.loads((step_dir / _METADATA / _METADATA_FILE).read_text())
    except (OSError, ValueError):
        return None
    info = data.get(_INFO) if isinstance(data, dict) else None
    if not isinstance(info, dict) or info.get("format_version") != FORMAT_VERSION:
        return None
    return info


def _is_complete(step_dir: epath.Path) -> bool:
    """True for a committed step directory of this format (see the module docstring)."""
    try:
        if not (step_dir / _COMMIT_MARKER).exists():
            return False
        info = _read_info(step_dir)
        if info is None:
            return False
        items = [_STATE] + ([_MEMORY] if info.get("memory_saved") else [])
        return all((step_dir / item).is_dir() for item in items)
    except OSError:
        return False


class _CompleteSteps:
    """orbax NameFormat: orbax's standard `<step>` names, listing complete steps only.

    Passed as `step_name_format`, so orbax itself (retention, latest step) never counts an
    incomplete directory.
    """

    def __init__(self):
        self._standard = ocp.path.step.standard_name_format()

    def __str__(self):
        return f"CompleteSteps({self._standard})"

    def build_name(self, step: int) -> str:
        return self._standard.build_name(step)

    def find_all(self, base_path):
        return (m for m in self._standard.find_all(base_path) if _is_complete(epath.Path(m.path)))

    def find_step(self, base_path, step: int):
        metadata = self._standard.find_step(base_path, step)
        if not _is_complete(epath.Path(metadata.path)):
            raise ValueError(f"step {step} under {base_path} is not a complete checkpoint")
        return metadata


# --------------------------------------------------------------------------- manager
class Checkpointer:
    """Saves and restores `SolverState`s in one directory; see the module docstring.

    Create it with `Checkpointer.open(...)` (or the constructor, same arguments); use it as
    a context manager or call `close()`.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        keep: int | None = None,
        create: bool = False,
        async_save: bool = False,
    ):
        """Args: see `open`."""
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep <= 0):
            raise CheckpointError(f"keep must be a positive integer or None, got {keep!r}")
        path = os.path.abspath(os.path.expanduser(os.fspath(directory)))
        if os.path.exists(path) and not os.path.isdir(path):
            raise CheckpointError(f"checkpoint directory is not a directory: {path}")
        if not create and not os.path.isdir(path):
            raise CheckpointError(f"checkpoint directory does not exist: {path}")
        self._directory = path
        self._async = bool(async_save)
        self._name_format = _CompleteSteps()
        options = ocp.CheckpointManagerOptions(
            create=create,
            enable_async_checkpointing=self._async,
            preservation_policy=ocp.checkpoint_managers.LatestN(n=keep),
            step_name_format=self._name_format,
        )
        self._manager = ocp.CheckpointManager(
            path,
            options=options,
            item_handlers={
                _STATE: ocp.PyTreeCheckpointHandler(),
                _MEMORY: ocp.PyTreeCheckpointHandler(),
                _METADATA: ocp.JsonCheckpointHandler(filename=_METADATA_FILE),
            },
        )

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        *,
        keep: int | None = None,
        create: bool = False,
        async_save: bool = False,
    ) -> "Checkpointer":
        """Open the checkpoint directory `directory`.

        Args:
          directory: the run's checkpoint directory (made absolute).
          keep: keep only the newest `keep` steps; older ones are deleted after each save.
            None keeps all (and a reader never deletes anything: deletion happens only
            in `save`).
          create: create the directory if it does not exist; otherwise a missing
            directory raises CheckpointError.
          async_save: write checkpoints in a background thread (see the module docstring).

        Raises:
          CheckpointError: the directory does not exist (and `create` is False) or is a
            file, or `keep` is invalid.
        """
        return cls(directory, keep=keep, create=create, async_save=async_save)

    # ------------------------------------------------------------------ queries
    @property
    def directory(self) -> str:
        """The absolute checkpoint directory."""
        return self._directory

    def all_steps(self) -> list[int]:
        """The complete steps, ascending: those found at `open` plus this object's saves.

        Other processes' saves show up after `reload()`. With `async_save`, a save still
        in flight is already listed; `wait_until_finished()` first to see committed steps
        only.
        """
        return sorted(int(s) for s in self._manager.all_steps())

    def latest_step(self) -> int | None:
        """The newest complete step, or None if there is none (see `all_steps`)."""
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
        """The metadata saved with `step` (default: the latest), without reading arrays.

        Raises:
          CheckpointError: no such step, or its metadata is unreadable.
        """
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
        self,
        step: int,
        state: "SolverState",
        *,
        metadata: Mapping[str, Any],
        include_memory: bool = True,
        force: bool = False,
    ) -> None:
        """Save `state` as checkpoint `step`, then drop the steps beyond `keep`.

        Args:
          step: int >= 0, normally `int(state.iteration)`. It must be newer than every
            existing step unless `force`.
          state: the SolverState (any pytree of arrays works; its `MEMORY_FIELDS` fields
            go to the "memory" item).
          metadata: JSON-able dict saved alongside (the key "checkpoint" is reserved).
          include_memory: also write the reservoirs; if False they are skipped and the
            metadata records `memory_saved: false`.
          force: replace an existing checkpoint `step` (deleted first, so a crash during
            the save loses it) or an incomplete leftover directory of that step, and allow
            a step older than the latest (it then counts as the newest for `keep`).

        Raises:
          CheckpointError: bad step, metadata not JSON-able or using "checkpoint", the step
            exists (without `force`), or orbax failed to write (the message says why).
        """
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise CheckpointError(f"step must be an integer >= 0, got {step!r}")
        step = int(step)
        if not isinstance(metadata, Mapping):
            raise CheckpointError(f"metadata must be a dict, got {type(metadata).__name__}")
        if _INFO in metadata:
            raise CheckpointError(f"metadata key {_INFO!r} is reserved for the checkpointer")
        try:
            user = json.loads(json.dumps(dict(metadata)))
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"metadata is not JSON-serializable: {_first_line(e)}") from e

        self.wait_until_finished()
        steps = self.all_steps()
        step_dir = self._step_dir(step)
        if step in steps:
            if not force:
                raise CheckpointError(
                    f"checkpoint step {step} already exists in {self._directory}; pass force=True to replace it"
                )
            self._manager.delete(step)
        elif step_dir.exists():
            if not force:
                raise CheckpointError(
                    f"{step_dir} exists but is not a complete checkpoint; remove it or pass force=True"
                )
            step_dir.rmtree()
        elif steps and step < steps[-1] and not force:
            raise CheckpointError(
                f"step {step} is older than the latest checkpoint {steps[-1]} in {self._directory}; "
                "pass force=True to save it anyway"
            )

        pairs = _leaves(state)
        key_dtypes = {_show(p): str(x.dtype) for p, x in pairs if _is_key(x)}
        items: dict[str, list] = {_STATE: [], _MEMORY: []}
        for path, x in pairs:
            if not _is_stored(x):
                continue
            if isinstance(x, jax.ShapeDtypeStruct):
                raise CheckpointError(f"cannot save an abstract state: leaf {_show(path)} is a ShapeDtypeStruct")
            if _is_key(x):
                x = jax.random.key_data(x)
            items[_item_of(path)].append((path, x))
        memory_saved = bool(include_memory and items[_MEMORY])
        iteration = getattr(state, "iteration", None)
        info = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "iteration": None if iteration is None else int(iteration),
            "memory_saved": memory_saved,
            "key_dtypes": key_dtypes,
            "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "versions": {"jax": jax.__version__, "orbax_checkpoint": ocp.__version__},
        }
        args = {
            _STATE: ocp.args.PyTreeSave(_nest(items[_STATE])),
            _METADATA: ocp.args.JsonSave({**user, _INFO: info}),
        }
        if memory_saved:
            args[_MEMORY] = ocp.args.PyTreeSave(_nest(items[_MEMORY]))
        try:
            saved = self._manager.save(step, args=ocp.args.Composite(**args), force=True)
            if not self._async:
                self._manager.wait_until_finished()
        except Exception as e:  # orbax / tensorstore / filesystem errors
            raise CheckpointError(f"saving checkpoint step {step} to {step_dir} failed: {_first_line(e)}") from e
        if not saved:
            raise CheckpointError(f"orbax declined to save checkpoint step {step} in {self._directory}")

    # ------------------------------------------------------------------ restore
    def restore(
        self,
        step: int | None = None,
        *,
        template: "SolverState",
        include_memory: bool = True,
    ) -> tuple["SolverState", dict]:
        """Read checkpoint `step` (default: the latest complete one).

        Args:
          step: the step, or None for the latest.
          template: a state with the saved structure, shapes and dtypes, e.g.
            `solver.init(jax.random.key(0))` or `jax.eval_shape(solver.init, key)`; its
            values are not used, except for parts not in the checkpoint (the reservoirs
            when memory was not saved or `include_memory` is False, and zero-size leaves),
            which are returned as they are (zeros for ShapeDtypeStructs). Restored arrays
            are placed like the template's leaves: on their sharding if they are
            committed to one (or are ShapeDtypeStructs with a sharding), otherwise
            uncommitted on the default device, as fresh arrays are.
          include_memory: read the reservoirs if saved; False skips them (faster for
            evaluation) and returns the template's.

        Returns:
          (state, metadata): the state with exactly the saved values and dtypes, and the
          step's metadata dict (see `read_metadata`).

        Raises:
          CheckpointError: no checkpoints / no such step (the message lists the steps), a
            checkpoint that does not fit the template (the message names the leaf and both
            shapes or dtypes), or unreadable/corrupt files (the message names the path).
        """
        step = self._resolve(step)
        metadata = self.read_metadata(step)
        info = metadata[_INFO]
        step_dir = self._step_dir(step)
        where = f"checkpoint step {step} in {self._directory}"

        pairs = _leaves(template)
        wanted = [_STATE] + ([_MEMORY] if include_memory and info.get("memory_saved") else [])
        expected = {
            path: x for path, x in pairs if _item_of(path) in wanted and _is_stored(x)
        }

        saved_keys = info.get("key_dtypes", {})
        template_keys = {_show(p): str(x.dtype) for p, x in pairs if _is_key(x)}
        for name in sorted(set(saved_keys) | set(template_keys)):
            if saved_keys.get(name) != template_keys.get(name):
                raise CheckpointError(
                    f"{where} does not fit the template: PRNG key {name} is {saved_keys.get(name)} "
                    f"in the checkpoint but {template_keys.get(name)} in the template"
                )

        try:
            item_metadata = self._manager.item_metadata(step)
            stored: dict = {}
            for item in wanted:
                tree = item_metadata[item]
                stored.update(_flatten_metadata(getattr(tree, "tree", tree)))
        except CheckpointError:
            raise
        except Exception as e:
            raise CheckpointError(f"cannot read {where} ({step_dir}): {_first_line(e)}") from e
        self._check_fit(where, expected, stored)
        # Reservoirs saved before bfloat16 storage became uint16 bits (see
        # lcjax.cfr.memory) are read as bfloat16 and reinterpreted.
        legacy = {path for path, x in expected.items() if _is_legacy_bf16(stored[path][1], _stored_spec(x).dtype)}

        # Read as numpy, then place each leaf like its template leaf: an uncommitted
        # template (e.g. a fresh `solver.init`) gives uncommitted arrays, so the restored
        # state hits the same jit cache entries as a fresh one.
        args = {}
        for item in wanted:
            specs = [
                (path, jax.ShapeDtypeStruct(_stored_spec(x).shape, jnp.bfloat16) if path in legacy else _stored_spec(x))
                for path, x in expected.items()
                if _item_of(path) == item
            ]
            args[item] = ocp.args.PyTreeRestore(
                item=_nest((path, spec) for path, spec in specs),
                restore_args=_nest(
                    (path, ocp.RestoreArgs(restore_type=np.ndarray, dtype=spec.dtype)) for path, spec in specs
                ),
            )
        try:
            restored = self._manager.restore(step, args=ocp.args.Composite(**args))
        except Exception as e:  # orbax / tensorstore errors: corrupt or missing files
            raise CheckpointError(f"cannot read {where} ({step_dir}): {_first_line(e)}") from e

        leaves = []
        for path, x in pairs:
            if path in expected:
                value = _pop(restored[_item_of(path)], path)
                if path in legacy:
                    value = np.asarray(value).view(np.uint16)
                leaves.append(_to_device(value, x))
            else:
                leaves.append(_materialize(x))
        state = jax.tree.unflatten(jax.tree.structure(template), leaves)
        return state, metadata

    @staticmethod
    def _check_fit(where: str, expected: dict, stored: dict) -> None:
        problems = []
        for path, x in expected.items():
            spec = _stored_spec(x)
            if path not in stored:
                problems.append(f"leaf {_show(path)} {tuple(spec.shape)} is in the template but not in the checkpoint")
                continue
            shape, dtype = stored[path]
            if shape != tuple(spec.shape):
                problems.append(
                    f"leaf {_show(path)} has shape {shape} in the checkpoint but {tuple(spec.shape)} in the template"
                )
            elif dtype != np.dtype(spec.dtype) and not _is_legacy_bf16(dtype, spec.dtype):
                problems.append(
                    f"leaf {_show(path)} has dtype {dtype} in the checkpoint but {np.dtype(spec.dtype)} in the template"
                )
        for path in stored:
            if path not in expected:
                problems.append(f"leaf {_show(path)} {stored[path][0]} is in the checkpoint but not in the template")
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

    def __repr__(self) -> str:
        return f"Checkpointer({self._directory!r}, steps={self.all_steps()})"
