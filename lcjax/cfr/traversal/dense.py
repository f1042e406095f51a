"""One-hot rewrite of small dynamic indexing in a traced function (an XLA:CPU speed-up).

Under `jax.vmap`, gathers and scatters with batched indices (`x[i]`, `x.at[i].set(v)` with
a traced scalar `i`) run as per-element loops on XLA:CPU, while one-hot selects stay
elementwise. `dense(fn)` traces `fn` to a jaxpr and re-evaluates it with such indexing of
small operands replaced by selects; anything else runs as traced.

The rewrite reads jaxprs, so it depends on JAX's internal jaxpr format. When it cannot
trace a function it falls back to the function itself, and says so: a `RuntimeWarning` and
a count in `fallback_count()`.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core

Array = jax.Array

_FALLBACKS: list[str] = []


def fallback_count() -> int:
    """How many traced functions fell back to their unrewritten form in this process."""
    return len(_FALLBACKS)


def _note_fallback(fn, err: Exception) -> None:
    name = getattr(fn, "__qualname__", repr(fn))
    _FALLBACKS.append(name)
    warnings.warn(f"one-hot indexing rewrite of {name} failed ({type(err).__name__}: {err}); using it unrewritten, "
                  "which runs slower on CPU", RuntimeWarning, stacklevel=3)


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


_DENSE_MAX = 4096  # operands up to this many elements get one-hot indexing
_CALL_PRIMITIVES = ("pjit", "jit", "closed_call", "core_call")


def _onehot_dim(shape, dim: int, index: Array) -> Array:
    """bool broadcastable to `shape`: True at position `index` along `dim`."""
    bshape = [1] * len(shape)
    bshape[dim] = shape[dim]
    return lax.broadcasted_iota(jnp.int32, tuple(bshape), dim) == index.astype(jnp.int32)


def _dense_dynamic_slice(operand, *starts, slice_sizes):
    x = operand
    for d, (size, start) in enumerate(zip(slice_sizes, starts)):
        dim = operand.shape[d]
        if size == dim:
            continue
        if size != 1:
            return None
        hit = _onehot_dim(x.shape, d, jnp.clip(start, 0, dim - 1))
        if x.dtype == jnp.bool_:
            x = jnp.any(hit & x, axis=d, keepdims=True)
        else:
            x = jnp.sum(jnp.where(hit, x, jnp.zeros((), x.dtype)), axis=d, keepdims=True).astype(x.dtype)
    return x


def _dense_dynamic_update_slice(operand, update, *starts):
    hit = None
    for d, start in enumerate(starts):
        dim, size = operand.shape[d], update.shape[d]
        if size == dim:
            continue
        if size != 1:
            return None
        h = _onehot_dim(operand.shape, d, jnp.clip(start, 0, dim - 1))
        hit = h if hit is None else hit & h
    if hit is None:
        return update
    return jnp.where(hit, jnp.broadcast_to(update, operand.shape), operand)


def _dense_scatter(name, operand, indices, updates, *, dimension_numbers, mode, **_):
    """A scatter of one scalar at one point (`x.at[i, j].set(v)` / `.add(v)`), else None."""
    dn = dimension_numbers
    if (
        dn.update_window_dims != ()
        or tuple(getattr(dn, "operand_batching_dims", ())) != ()
        or indices.ndim != 1
        or updates.ndim != 0
        or tuple(sorted(dn.inserted_window_dims)) != tuple(range(operand.ndim))
        or len(dn.scatter_dims_to_operand_dims) != operand.ndim
        or mode not in (lax.GatherScatterMode.FILL_OR_DROP, lax.GatherScatterMode.PROMISE_IN_BOUNDS)
    ):
        return None
    hit = None
    for k, d in enumerate(dn.scatter_dims_to_operand_dims):
        h = _onehot_dim(operand.shape, d, indices[k])  # out of range: no hit, i.e. dropped
        hit = h if hit is None else hit & h
    hit = jnp.broadcast_to(hit, operand.shape)
    upd = updates.astype(operand.dtype)
    if name == "scatter":
        return jnp.where(hit, upd, operand)
    return operand + jnp.where(hit, upd, jnp.zeros((), operand.dtype))


def _eval_dense(jaxpr, consts, args):
    env = {}

    def read(v):
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        out = None
        small = bool(eqn.invars) and _numel(getattr(eqn.invars[0].aval, "shape", (_DENSE_MAX + 1,))) <= _DENSE_MAX
        if name == "dynamic_slice" and small:
            out = _dense_dynamic_slice(ins[0], *ins[1:], slice_sizes=eqn.params["slice_sizes"])
        elif name == "dynamic_update_slice" and small:
            out = _dense_dynamic_update_slice(*ins)
        elif name in ("scatter", "scatter-add") and small:
            out = _dense_scatter(name, *ins, **eqn.params)
        elif name in _CALL_PRIMITIVES and "jaxpr" in eqn.params:
            closed = eqn.params["jaxpr"]
            out = _eval_dense(closed.jaxpr, closed.consts, ins)
        if out is None:
            out = eqn.primitive.bind(*ins, **eqn.params)
        if not isinstance(out, (list, tuple)):
            out = [out]
        for v, x in zip(eqn.outvars, out):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def dense(fn):
    """`fn` with dynamic indexing of small arrays rewritten as one-hot selects.

    Same results; under `vmap` the selects stay elementwise while gathers and scatters with
    batched indices become per-element loops on XLA:CPU. Falls back to `fn` if the rewrite
    cannot trace.
    """

    @functools.wraps(fn)
    def wrapped(*args):
        try:
            closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
            outs = _eval_dense(closed.jaxpr, closed.consts, jax.tree_util.tree_leaves(args))
        except Exception as err:  # an unusual primitive: use the game's own function, loudly
            _note_fallback(fn, err)
            return fn(*args)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), outs)

    return wrapped
