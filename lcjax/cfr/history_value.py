"""The history-value network Q(h, a) of the `value` scheme: its data and its training phase.

Each iteration, before the traversals, `HistoryValue.fit` plays `value_games` on-policy
games with both players on their current strategies (`traversal.value_data`), puts their
recorded items into a fresh buffer (the data of one iteration's strategies only: Q must
track the current strategies, so older games would bias it) and fits Q on it for
`value_steps` Adam steps, continuing from the previous iteration's Q (`value_warm_start`)
or from a fresh network. The traversals then read regrets off the fitted Q.

Targets are returns divided by the return scale, so Q and the regret samples are O(1).
The fit is reported against its noise floor: `fve/value` = 1 - loss / variance of the
targets (the fraction of the targets' variance Q explains; single returns are noisy, so
even the true Q explains only part of it).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.cfr.memory import reservoir_add, reservoir_init
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.cfr.samples import ValueSample
from lcjax.cfr.training import make_optimizer, train_steps, value_loss
from lcjax.cfr.traversal import value_data

Array = jax.Array
Params = Any


class HistoryValue:
    """The jitted phases of Q for one (game, SolverConfig) with scheme "value".

    Attributes:
      spec: Q's NetworkSpec (input: `game.history_size`, output: one value per action).
      apply_fn: Q's `apply(params, history) -> float32[..., A]`.
    """

    def __init__(self, game, config, advantage_apply: Callable, jit: Callable):
        v = config.traversal.value
        self.config = v
        network = config.network
        self.spec = NetworkSpec(
            in_size=game.history_size, out_size=game.num_actions, hidden_size=network.hidden_size,
            num_layers=network.num_layers, skip_connections=network.skip_connections,
            layer_norm=network.layer_norm, dtype=config.precision,
        )
        self.apply_fn = make_apply(network_graphdef(self.spec))
        clip = config.optimization.grad_clip
        self.optimizer = make_optimizer(v.value_learning_rate, clip if clip > 0 else None)
        capacity = v.value_games * v.max_records
        example = ValueSample(
            jax.ShapeDtypeStruct((game.history_size,), jnp.float32), jax.ShapeDtypeStruct((game.num_actions,), jnp.bool_),
            jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32),
        )
        self.collect = jit(lambda params, t, key: value_data(game, advantage_apply, v, params, t, key, v.value_games))
        self.fill = jit(lambda key, items, valid: reservoir_add(key, reservoir_init(capacity, example), items, valid))
        self.train = jit(functools.partial(
            train_steps, apply_fn=self.apply_fn, optimizer=self.optimizer, loss_fn=value_loss,
            num_steps=v.value_steps, batch_size=v.value_batch,
        ))
        self.fresh = jax.jit(self._fresh)

    def _fresh(self, key: Array):
        params = init_params(self.spec, key)
        return params, self.optimizer.init(params)

    def lowered(self, key: Array, advantage_params, value_params, value_opt, t: Array) -> list:
        """The lowered phases, for `DeepCFR.precompile` to compile side by side."""
        data = jax.eval_shape(self.collect, advantage_params, t, key)
        memory = jax.eval_shape(self.fill, key, data.items, data.valid)
        return [
            self.collect.lower(advantage_params, t, key),
            self.fill.lower(key, data.items, data.valid),
            self.train.lower(key, value_params, value_opt, memory),
        ]

    def fit(self, key: Array, advantage_params, value_params, value_opt, t: Array):
        """Play the iteration's value games and fit Q on them.

        Returns (Q params, Q optimizer state, metrics): `loss/value`, `fve/value`,
        `value/items`, `value/nodes`, `value/truncated`, `time/value_data_seconds`,
        `time/value_train_seconds`.
        """
        k_data, k_fill, k_init, k_train = jax.random.split(key, 4)
        t0 = time.perf_counter()
        data = jax.block_until_ready(self.collect(advantage_params, t, k_data))
        memory = self.fill(k_fill, data.items, data.valid)
        t1 = time.perf_counter()
        if not self.config.value_warm_start:
            value_params, value_opt = self.fresh(k_init)
        value_params, value_opt, fitted = self.train(k_train, value_params, value_opt, memory)
        loss = float(fitted.loss)
        t2 = time.perf_counter()
        valid = np.asarray(data.valid)
        targets = np.asarray(data.items.target)[valid]
        variance = float(targets.var()) if targets.size else float("nan")
        metrics = {
            "loss/value": loss,
            "fve/value": 1.0 - loss / variance if variance > 0 else float("nan"),
            "nonfinite/value": int(fitted.nonfinite_steps),
            "value/items": int(valid.sum()),
            "value/nodes": int(data.nodes),
            "value/truncated": int(data.truncated),
            "time/value_data_seconds": t1 - t0,
            "time/value_train_seconds": t2 - t1,
        }
        return value_params, value_opt, metrics
