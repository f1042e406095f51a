"""What every traversal scheme returns: fixed-shape sample buffers and counters."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from lcjax.cfr.samples import AdvantageSample, StrategySample

Array = jax.Array


class TraversalCounters(NamedTuple):
    """Totals over one traversal call (int32 scalars).

    Attributes:
      nodes: game states visited (decision and terminal states, rollouts included).
      evaluations: states whose strategy was computed from the networks.
      advantage_samples: valid advantage samples produced.
      strategy_samples: valid strategy samples produced.
      dropped_samples: samples lost because a per-traversal buffer was full.
      truncated: traversals cut short by the node budget or the step limit.
    """

    nodes: Array
    evaluations: Array
    advantage_samples: Array
    strategy_samples: Array
    dropped_samples: Array
    truncated: Array


class TraversalResult(NamedTuple):
    """Fixed-shape output of a traversal call.

    Rows are grouped by traversal: each traversal owns a contiguous block of
    `S_a / B` rows of `advantage` and `S_s / B` rows of `strategy` (B traversals).

    Attributes:
      advantage: AdvantageSample with leading axis S_a (all traversals' buffers, flattened).
      advantage_valid: bool[S_a], which rows are real samples.
      strategy: StrategySample with leading axis S_s.
      strategy_valid: bool[S_s].
      counters: TraversalCounters.
    """

    advantage: AdvantageSample
    advantage_valid: Array
    strategy: StrategySample
    strategy_valid: Array
    counters: TraversalCounters


def sample_row_width(num_actions: int) -> int:
    """Floats per packed sample row (besides the observation): mask, vector, valid flag."""
    return 2 * num_actions + 1


def pack_sample_rows(mask: Array, vector: Array) -> Array:
    """float32[W, 2A + 1] rows (mask, vector, valid = 1) from lanes-last bool/float32[A, W]."""
    ones = jnp.ones((1, mask.shape[-1]), jnp.float32)
    return jnp.concatenate([mask.astype(jnp.float32), vector, ones]).T


def unpack_sample_rows(obs: Array, rows: Array, num_actions: int, iteration: Array, cls):
    """(sample of type `cls`, valid bool[N]) from obs float32[N, D] and packed rows [N, 2A + 1]."""
    t = jnp.asarray(iteration, jnp.float32)
    a = num_actions
    sample = cls(obs, rows[:, :a] > 0.5, rows[:, a : 2 * a], jnp.full((obs.shape[0],), t, jnp.float32))
    return sample, rows[:, 2 * a] > 0.5


def strategy_samples(obs: Array, rows: Array, num_actions: int, iteration: Array) -> tuple[StrategySample, Array]:
    """`unpack_sample_rows` for strategy buffers."""
    return unpack_sample_rows(obs, rows, num_actions, iteration, StrategySample)


def advantage_samples(obs: Array, rows: Array, num_actions: int, iteration: Array) -> tuple[AdvantageSample, Array]:
    """`unpack_sample_rows` for advantage buffers."""
    return unpack_sample_rows(obs, rows, num_actions, iteration, AdvantageSample)
