"""Tests of lcjax.checkpoint on a tiny Kuhn poker Deep CFR state."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from lcjax.cfr.solver import DeepCFR, SolverConfig
from lcjax.checkpoint import FORMAT_VERSION, CheckpointError, Checkpointer
from lcjax.env.kuhn import KuhnPoker

CONFIG = SolverConfig(
    network={"hidden_size": 8, "num_layers": 1},
    memory={"advantage_capacity": 64, "strategy_capacity": 64, "observation_storage": "bfloat16"},
    traversal={
        "traversals_per_player": 16,
        "traversal_batch": 16,
        "external": {"max_depth": 4, "max_advantage": 4, "max_strategy": 4},
    },
    optimization={"advantage_steps": 2, "strategy_steps": 2, "advantage_batch": 8, "strategy_batch": 8},
)
TMP_SUFFIX = ".orbax-checkpoint-tmp"  # how orbax names a step directory before its commit


@pytest.fixture(scope="module")
def solver():
    return DeepCFR(KuhnPoker(), CONFIG)


@pytest.fixture(scope="module")
def state1(solver):
    """The state after one iteration. Never pass it to `solver.iteration` (it donates the
    memories): copy it first."""
    state, _ = solver.iteration(solver.init(jax.random.key(0)))
    return state


def template(solver):
    return solver.init(jax.random.key(123))


def copy(state):
    return jax.tree.map(jnp.copy, state)


def assert_bitwise_equal(a, b):
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert jax.typeof(x) == jax.typeof(y)  # shape, dtype (typed keys included), weak type
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()


def step_dirs(directory):
    return sorted(os.listdir(directory))


def test_round_trip_is_bitwise_and_keeps_dtypes(tmp_path, solver, state1):
    meta = {"config": dataclasses.asdict(CONFIG), "host_rng": [1, 2, 3], "note": "x"}
    with Checkpointer.open(tmp_path / "ck", keep=3, create=True) as ckpt:
        assert ckpt.latest_step() is None and ckpt.all_steps() == []
        ckpt.save(1, state1, metadata=meta)
        assert ckpt.latest_step() == 1
    with Checkpointer.open(tmp_path / "ck") as ckpt:
        assert ckpt.all_steps() == [1]
        restored, metadata = ckpt.restore(None, template=template(solver))
        assert ckpt.read_metadata() == metadata == ckpt.read_metadata(1)
    assert_bitwise_equal(restored, state1)
    assert restored.key.dtype == state1.key.dtype and jnp.issubdtype(restored.key.dtype, jax.dtypes.prng_key)
    assert restored.strategy_memory.data.observation.dtype == jnp.uint16  # bfloat16 bits
    assert restored.advantage_memory[0].item_dtypes == (jnp.float32, jnp.bool_, jnp.float32, jnp.float32)
    assert int(restored.strategy_memory.size) > 0
    info = metadata.pop("checkpoint")
    assert metadata == json.loads(json.dumps(meta))
    assert info["step"] == 1 and info["iteration"] == 1 and info["memory_saved"] is True
    assert info["key_dtypes"] == {"key": str(state1.key.dtype)}


def test_restored_state_continues_exactly(tmp_path, solver, state1):
    with Checkpointer.open(tmp_path, keep=1, create=True) as ckpt:
        ckpt.save(1, state1, metadata={})
        restored, _ = ckpt.restore(1, template=template(solver))
    original_next, original_metrics = solver.iteration(copy(state1))
    restored_next, restored_metrics = solver.iteration(restored)
    assert_bitwise_equal(restored_next, original_next)
    timing = ("time/", "traversal/nodes_per_second")
    drop_times = lambda m: {k: v for k, v in m.items() if not k.startswith(timing)}  # noqa: E731
    assert drop_times(restored_metrics) == drop_times(original_metrics)


def test_abstract_template_and_async_save(tmp_path, solver, state1):
    with Checkpointer.open(tmp_path, create=True, async_save=True) as ckpt:
        ckpt.save(4, state1, metadata={"a": 1})
        ckpt.wait_until_finished()
        restored, metadata = ckpt.restore(template=jax.eval_shape(solver.init, jax.random.key(0)))
    assert_bitwise_equal(restored, state1)
    assert metadata["a"] == 1


def test_keep_retains_newest(tmp_path, solver, state1):
    with pytest.raises(CheckpointError, match="keep"):
        Checkpointer.open(tmp_path, keep=0, create=True)
    with Checkpointer.open(tmp_path, keep=2, create=True) as ckpt, Checkpointer.open(tmp_path) as reader:
        for step in (1, 2, 3):
            ckpt.save(step, state1, metadata={"step": step})
        assert ckpt.all_steps() == [2, 3]
        assert reader.all_steps() == []
        reader.reload()
        assert reader.all_steps() == [2, 3]
    assert step_dirs(tmp_path) == ["2", "3"]
    with Checkpointer.open(tmp_path, keep=2) as ckpt:
        assert ckpt.all_steps() == [2, 3] and ckpt.read_metadata(2)["step"] == 2


def test_without_memory_restores_template_memories(tmp_path, solver, state1):
    fresh = template(solver)
    with Checkpointer.open(tmp_path, create=True) as ckpt:
        ckpt.save(1, state1, metadata={}, include_memory=False)
        assert not (tmp_path / "1" / "memory").exists()
        assert ckpt.read_metadata(1)["checkpoint"]["memory_saved"] is False
        restored, metadata = ckpt.restore(1, template=fresh)
        ckpt.save(2, state1, metadata={})
        skipped, _ = ckpt.restore(2, template=fresh, include_memory=False)
    assert metadata["checkpoint"]["memory_saved"] is False
    no_memory = lambda s: s._replace(advantage_memory=None, strategy_memory=None)  # noqa: E731
    memory = lambda s: (s.advantage_memory, s.strategy_memory)  # noqa: E731
    for state in (restored, skipped):
        assert_bitwise_equal(no_memory(state), no_memory(state1))
        assert_bitwise_equal(memory(state), memory(fresh))
        assert int(state.strategy_memory.size) == 0


def test_incompatible_template_names_leaf_and_shapes(tmp_path, solver, state1):
    with Checkpointer.open(tmp_path, create=True) as ckpt:
        ckpt.save(1, state1, metadata={})
        wider = DeepCFR(KuhnPoker(), dataclasses.replace(CONFIG, network={"hidden_size": 16, "num_layers": 1}))
        with pytest.raises(CheckpointError) as error:
            ckpt.restore(1, template=jax.eval_shape(wider.init, jax.random.key(0)))
        message = str(error.value)
        assert "\n" not in message
        assert "advantage_params/0/hidden_0/bias" in message and "(8,)" in message and "(16,)" in message
        f32_memory = dataclasses.replace(CONFIG.memory, observation_storage="float32")
        f32 = DeepCFR(KuhnPoker(), dataclasses.replace(CONFIG, memory=f32_memory))
        with pytest.raises(CheckpointError, match=r"advantage_memory/0/data/observation has dtype uint16 .* float32"):
            ckpt.restore(1, template=jax.eval_shape(f32.init, jax.random.key(0)))
        rbg = template(solver)._replace(key=jax.random.key(0, impl="rbg"))
        with pytest.raises(CheckpointError, match="PRNG key"):
            ckpt.restore(1, template=rbg)


def test_missing_directory_step_and_checkpoints(tmp_path, solver, state1):
    with pytest.raises(CheckpointError, match="does not exist"):
        Checkpointer.open(tmp_path / "nope")
    with Checkpointer.open(tmp_path / "empty", create=True) as ckpt:
        with pytest.raises(CheckpointError, match="no checkpoints"):
            ckpt.restore(template=template(solver))
        with pytest.raises(CheckpointError, match="no checkpoints"):
            ckpt.read_metadata()
    with Checkpointer.open(tmp_path / "ck", create=True) as ckpt:
        ckpt.save(3, state1, metadata={})
        ckpt.save(5, state1, metadata={})
        with pytest.raises(CheckpointError, match=r"step 4 .*available steps: 3, 5$"):
            ckpt.restore(4, template=template(solver))
        with pytest.raises(CheckpointError, match="available steps: 3, 5"):
            ckpt.read_metadata(4)


def test_save_checks(tmp_path, state1):
    with Checkpointer.open(tmp_path, create=True) as ckpt:
        with pytest.raises(CheckpointError, match="JSON"):
            ckpt.save(1, state1, metadata={"bad": object()})
        with pytest.raises(CheckpointError, match="reserved"):
            ckpt.save(1, state1, metadata={"checkpoint": 1})
        ckpt.save(2, state1, metadata={"v": 1})
        with pytest.raises(CheckpointError, match="already exists"):
            ckpt.save(2, state1, metadata={"v": 2})
        with pytest.raises(CheckpointError, match="older than the latest"):
            ckpt.save(1, state1, metadata={})
        ckpt.save(2, state1, metadata={"v": 2}, force=True)
        assert ckpt.all_steps() == [2] and ckpt.read_metadata(2)["v"] == 2
    assert step_dirs(tmp_path) == ["2"]


def test_crash_leftovers_are_ignored(tmp_path, solver, state1, monkeypatch):
    with Checkpointer.open(tmp_path, keep=3, create=True) as ckpt:
        ckpt.save(1, state1._replace(iteration=jnp.int32(7)), metadata={"good": 1})
        ckpt.save(2, state1, metadata={"good": 2})
    good = tmp_path / "2"
    # An uncommitted save, named the way orbax names it before the final rename.
    shutil.copytree(good, tmp_path / f"3{TMP_SUFFIX}")
    # A step directory without orbax's commit marker.
    shutil.copytree(good, tmp_path / "4")
    os.remove(tmp_path / "4" / "commit_success.txt")
    # A step directory with a commit marker but no metadata and junk arrays.
    (tmp_path / "5" / "state").mkdir(parents=True)
    (tmp_path / "5" / "state" / "manifest.ocdbt").write_bytes(b"junk")
    (tmp_path / "5" / "commit_success.txt").write_text("junk")

    # A real crash of the installed orbax during the commit of step 6: the step stays in
    # its temporary directory.
    monkeypatch.setattr(ocp.path.atomicity.AtomicRenameTemporaryPath, "finalize", _crash)
    with Checkpointer.open(tmp_path, keep=3) as ckpt:
        with pytest.raises(CheckpointError, match="simulated crash"):
            ckpt.save(6, state1, metadata={})
    monkeypatch.undo()
    assert (tmp_path / f"6{TMP_SUFFIX}").is_dir() and not (tmp_path / "6").exists()

    with Checkpointer.open(tmp_path, keep=3) as ckpt:
        assert ckpt.all_steps() == [1, 2] and ckpt.latest_step() == 2
        restored, metadata = ckpt.restore(template=template(solver))
        assert metadata["good"] == 2
        assert_bitwise_equal(restored, state1)
        # Saving over a leftover temporary directory replaces it.
        ckpt.save(3, state1, metadata={"good": 3})
        assert not (tmp_path / f"3{TMP_SUFFIX}").exists()
        # An incomplete plain step directory is never overwritten silently.
        with pytest.raises(CheckpointError, match="not a complete checkpoint"):
            ckpt.save(4, state1, metadata={})
        ckpt.save(6, state1, metadata={"good": 6})
        assert ckpt.all_steps() == [2, 3, 6]
        assert ckpt.restore(template=template(solver))[1]["good"] == 6
    assert {"4", "5"} <= set(step_dirs(tmp_path)) and "1" not in step_dirs(tmp_path)


async def _crash(self):
    raise RuntimeError("simulated crash")


def test_corrupt_files_raise_with_path(tmp_path, solver, state1):
    with Checkpointer.open(tmp_path, create=True) as ckpt:
        ckpt.save(1, state1, metadata={})
    state_dir = tmp_path / "1" / "state"
    for root, _, files in os.walk(state_dir):
        for name in files:
            if name == "manifest.ocdbt" or os.path.basename(root) == "d":
                with open(os.path.join(root, name), "wb") as f:
                    f.write(b"garbage" * 8)
    with Checkpointer.open(tmp_path) as ckpt:
        with pytest.raises(CheckpointError) as error:
            ckpt.restore(1, template=template(solver))
    message = str(error.value)
    assert str(tmp_path / "1") in message and "\n" not in message
    (state_dir / "_METADATA").write_text("{not json")
    with Checkpointer.open(tmp_path) as ckpt:
        with pytest.raises(CheckpointError, match="cannot read"):
            ckpt.restore(1, template=template(solver))


def test_older_format_is_refused_with_both_versions(tmp_path, solver, state1):
    """Checkpoints of an older format (1: reservoirs with zero-size dtype leaves, bfloat16
    buffers) are listed but not restored: one line names the version found and the one read."""
    with Checkpointer.open(tmp_path, create=True) as ckpt:
        ckpt.save(1, state1, metadata={"note": "old"})
    metadata_file = tmp_path / "1" / "metadata" / "metadata.json"
    metadata = json.loads(metadata_file.read_text())
    metadata["checkpoint"]["format_version"] = 1
    metadata_file.write_text(json.dumps(metadata))
    with Checkpointer.open(tmp_path) as ckpt:
        assert ckpt.all_steps() == [1] and ckpt.read_metadata(1)["note"] == "old"
        with pytest.raises(CheckpointError) as error:
            ckpt.restore(1, template=template(solver))
    message = str(error.value)
    assert "\n" not in message
    assert "format version 1" in message and f"format version {FORMAT_VERSION}" in message and FORMAT_VERSION == 2
