"""Data parallelism over a one-axis device mesh (axis "data"): the solver's phases, sharded.

`data_parallel(phases, game, mesh)` replaces the jitted phases of a solver's `_Phases`
(`lcjax.cfr.solver`) by programs that run on every device of `mesh` at once, each still one
compiled program (`jax.jit` of a `jax.shard_map`, no per-device Python loop). With n devices:

* traversal: each device runs ceil(traversal_batch / n) traversals of the chunk with the
  same (replicated) networks and its own key, the chunk key folded with its device index,
  so no two devices sample the same stream; automatic lane pools are split the same way
  (`local_traversal_config`). The samples stay on the device that made them
  (sharded along their leading axis); the counters are summed over the mesh.
* memories: every reservoir is sharded along its item axis into n shards of
  ceil(capacity / n) items; `size` and `seen` become int32[n], one per shard. Each shard
  inserts its own device's samples with algorithm R (`lcjax.cfr.memory.reservoir_add`,
  the key folded with the device index), so shard d is a uniform sample of all items
  device d was offered. Every device runs the same number of independent traversals, so
  the shards' items are alike in distribution, and a minibatch made of equal uniform draws
  from every shard is a uniform sample of everything offered (exactly so when the shards
  saw equal counts, which they do in expectation).
* training: each device draws ceil(batch / n) items from its own shard, and the loss,
  the gradients and the baseline loss are averaged over the mesh (`lax.pmean`) before the
  optimizer step, so parameters and optimizer states stay replicated and identical.
* everything else (network init, iteration keys, the history value of scheme "value")
  runs replicated: the same program on every device, on replicated inputs.

A single-device mesh never comes here: the solver then runs its plain programs, so a run
on one device is exactly what it was before meshes existed.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from lcjax.cfr import traversal as tr
from lcjax.cfr.memory import Reservoir
from lcjax.cfr.traversal import trajectory as tj

AXIS = "data"

__all__ = ["AXIS", "data_parallel", "local_traversal_config", "replicated", "shard_reservoir", "sharded", "state_shardings"]


def replicated(mesh) -> NamedSharding:
    """Every device holds the whole array."""
    return NamedSharding(mesh, P())


def sharded(mesh) -> NamedSharding:
    """The leading axis split over the mesh's devices."""
    return NamedSharding(mesh, P(AXIS))


def _per_device(total: int, n: int) -> int:
    return math.ceil(total / n)


def _device_key(key):
    """A device's own key: `key` folded with its index on the mesh (inside shard_map)."""
    return jax.random.fold_in(key, lax.axis_index(AXIS))


def _local(reservoir: Reservoir) -> Reservoir:
    """A shard's reservoir as the single-device code sees it (scalar size and seen)."""
    return reservoir.replace(size=reservoir.size[0], seen=reservoir.seen[0])


def _global(reservoir: Reservoir) -> Reservoir:
    return reservoir.replace(size=reservoir.size[None], seen=reservoir.seen[None])


def shard_reservoir(reservoir: Reservoir, n: int) -> Reservoir:
    """An empty reservoir laid out for n shards: n * ceil(capacity / n) zero items, and
    int32[n] size and seen (to be placed with `sharded`)."""
    capacity = jax.tree.leaves(reservoir.data)[0].shape[0]
    total = n * _per_device(capacity, n)
    data = jax.tree.map(lambda x: jnp.zeros((total, *x.shape[1:]), x.dtype), reservoir.data)
    zeros = jnp.zeros((n,), jnp.int32)
    return reservoir.replace(data=data, size=zeros, seen=zeros)


def state_shardings(state, mesh, memory_fields=("advantage_memory", "strategy_memory")):
    """The shardings of a SolverState's leaves: its reservoirs' `sharded`, the rest `replicated`."""
    shard, rep = sharded(mesh), replicated(mesh)
    return type(state)(**{f: jax.tree.map(lambda _: shard if f in memory_fields else rep, getattr(state, f))
                          for f in state._fields})


def local_traversal_config(t, n: int):
    """The `traversal` settings one of n devices runs: its share of `traversal_batch`, and
    of the automatic lane pools (probe's `rollout_batch` and value's `lanes` when 0), so
    that the devices together advance as many lanes as one device would (a pool wider than
    its work costs time on every loop step). Lane counts set explicitly are per device.
    (external's automatic lanes follow `traversal_batch` already.)"""
    lanes = _per_device(tj.DEFAULT_LANES, n)
    probe = t.probe if t.probe.rollout_batch else dataclasses.replace(t.probe, rollout_batch=lanes)
    value = t.value if t.value.lanes else dataclasses.replace(t.value, lanes=lanes)
    return dataclasses.replace(t, traversal_batch=_per_device(t.traversal_batch, n), probe=probe, value=value)


def _shard_traverse(game, phases, mesh):
    """`traverse(params, value_params, player, iteration, key)` over the mesh."""
    local_t = local_traversal_config(phases.config.traversal, mesh.size)
    local = tr.traversal_fn(game, phases.regret_apply, local_t, phases.value_apply)

    def per_device(params, value_params, player, iteration, key):
        result = local(params, value_params, player, iteration, _device_key(key))
        return result._replace(counters=jax.tree.map(lambda c: lax.psum(c, AXIS), result.counters))

    shard = P(AXIS)
    out = tr.TraversalResult(shard, shard, shard, shard, P())
    fn = jax.shard_map(per_device, mesh=mesh, in_specs=P(), out_specs=out, check_vma=False)
    rep, sh = replicated(mesh), sharded(mesh)
    out_shardings = tr.TraversalResult(sh, sh, sh, sh, rep)
    return phases.jit(fn, in_shardings=rep, out_shardings=out_shardings)


def _shard_add(add, phases, mesh):
    """`add(key, reservoir, items, valid)`: each shard inserts its own device's items."""

    def per_device(key, reservoir, items, valid):
        return _global(add(_device_key(key), _local(reservoir), items, valid))

    fn = jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(AXIS), P(AXIS), P(AXIS)), out_specs=P(AXIS), check_vma=False)
    rep, sh = replicated(mesh), sharded(mesh)
    return phases.jit(fn, in_shardings=(rep, sh, sh, sh), out_shardings=sh, donate_argnums=(1,))


def _shard_train(train, phases, mesh):
    """`train(key, params, opt, reservoir)`: per-shard minibatches, gradients averaged."""
    batch = _per_device(train.keywords["batch_size"], mesh.size)
    local = functools.partial(train, batch_size=batch, axis_name=AXIS)

    def per_device(key, params, opt_state, reservoir):
        return local(_device_key(key), params, opt_state, _local(reservoir))

    fn = jax.shard_map(per_device, mesh=mesh, in_specs=(P(), P(), P(), P(AXIS)), out_specs=P(), check_vma=False)
    rep, sh = replicated(mesh), sharded(mesh)
    return phases.jit(fn, in_shardings=(rep, rep, rep, sh), out_shardings=rep)


def data_parallel(phases, game, mesh) -> None:
    """Replace `phases`' programs (a solver's `_Phases`) by their data-parallel versions
    on `mesh` (more than one device), in place; see the module docstring."""
    rep = replicated(mesh)
    phases.traverse = _shard_traverse(game, phases, mesh)
    phases.add_advantage = _shard_add(phases.add_advantage_fn, phases, mesh)
    phases.add_strategy = _shard_add(phases.add_strategy_fn, phases, mesh)
    phases.train_advantage = _shard_train(phases.train_advantage_fn, phases, mesh)
    phases.train_strategy = _shard_train(phases.train_strategy_fn, phases, mesh)
    phases.fresh_network = jax.jit(phases.fresh_network_fn, out_shardings=rep)
    phases.iteration_keys = jax.jit(phases.iteration_keys_fn, out_shardings=rep)


def sharded_init(init_fn, mesh):
    """A jitted `init(key) -> SolverState` on `mesh`: `init_fn`'s state with its reservoirs
    laid out for the mesh's shards, placed by `state_shardings`."""
    n = mesh.size

    def body(key):
        state = init_fn(key)
        return state._replace(
            advantage_memory=tuple(shard_reservoir(r, n) for r in state.advantage_memory),
            strategy_memory=shard_reservoir(state.strategy_memory, n),
        )

    shapes = jax.eval_shape(body, jax.random.key(0))
    return jax.jit(body, out_shardings=state_shardings(shapes, mesh))
