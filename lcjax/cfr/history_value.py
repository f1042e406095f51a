"""The history-value network Q(h, a) of the `value` scheme: its data and its training phase.

Each iteration, before the traversals, `HistoryValue.fit` plays `value_games` games with
both players on their current strategies (`traversal.value_data`), adds their items to the
value memory, a sliding window of the `value_capacity` most recent items (`ring_add`: Q
must follow the current strategies, so old games should leave, but one iteration's games
alone are too few to fit on without overfitting; items of one iteration beyond the window
are never built, see `traversal.ValueData`), and fits Q on it for `value_steps` Adam
steps, continuing from the previous iteration's Q (`value_warm_start`) or from a fresh
network. The traversals then read regrets off the fitted Q.

Targets are returns divided by the return scale, so Q and the regret samples are O(1).
With a state head and `value_lambda` < 1 they are lambda-returns instead
(`traversal.value.lambda_returns`), relabelled once when the games are added, with V as it
stands before the fit: in Lost Cities one game's return carries ~100 more draws of chance
and of both strategies, which swamps the few points that separate two sibling actions,
and bootstrapping on V at the next recorded states cuts that variance for some of V's bias.
The fit is reported against its noise floor: `fve/value` = 1 - loss / the loss of
predicting zeros (the share of the targets' power Q explains; single returns are noisy, so
even the true Q explains only part of it).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.cfr.memory import Reservoir, reservoir_init, ring_add
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.cfr.samples import ValueSample
from lcjax.cfr.training import explained_fraction, make_optimizer, phase_schedule, train_steps, value_loss
from lcjax.cfr.traversal import SamplingPolicy, ValueConfig, history_values, relabelled_targets, sampling_policy, value_data

Array = jax.Array
Params = Any


def value_spec(game, cfg: ValueConfig, advantage_spec: NetworkSpec) -> NetworkSpec:
    """The history-value network's architecture: the advantage networks', on the history
    (`game.history_size` inputs), with one output per action (Q) or one (V, `value_head`),
    `cfg.value_activation` unless that is "network", and `cfg.value_hidden_size` wide
    unless that is 0."""
    outputs = game.num_actions if cfg.value_head == "actions" else 1
    activation = advantage_spec.activation if cfg.value_activation == "network" else cfg.value_activation
    width = cfg.value_hidden_size or advantage_spec.hidden_size
    return advantage_spec._replace(in_size=game.history_size, out_size=outputs, activation=activation, hidden_size=width)


class HistoryValue:
    """The jitted phases of Q for one (game, SolverConfig) with scheme "value".

    Attributes:
      spec: Q's NetworkSpec (input: `game.history_size`; output: one value per action, or
        one state value with `value_head: state`).
      apply_fn: Q's `apply(params, history) -> float32[..., A]`.
      relabels: whether `fit` first turns the items' targets into lambda-returns
        (`value_lambda` < 1).
      sampling: the policy of the value games' `sampling_prefix`: the traversals' own
        sampling policy (uniform when there is no prefix).
    """

    def __init__(self, game, config, spec: NetworkSpec, advantage_apply: Callable, jit: Callable):
        v = config.traversal.value
        self.config = v
        # The advantage networks' architecture, on the history instead of the observation.
        self.spec = value_spec(game, v, spec)
        self.apply_fn = make_apply(network_graphdef(self.spec))
        clip = config.optimization.grad_clip
        learning_rate = phase_schedule(v.value_learning_rate, v.value_lr_schedule, v.value_steps)
        self.optimizer = make_optimizer(learning_rate, clip if clip > 0 else None)
        example = ValueSample(
            jax.ShapeDtypeStruct((game.history_size,), jnp.float32), jax.ShapeDtypeStruct((self.spec.out_size,), jnp.bool_),
            jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32),
        )
        # `advantage_apply` is what the current strategies regret-match on (the solver's
        # `regret_apply`), so the value games play exactly the traversals' strategies.
        # A `sampling_prefix` plays the traversals' sampling policy (built only when read).
        self.sampling = sampling_policy(game, config.traversal) if v.sampling_prefix > 0 else SamplingPolicy()
        self.collect = jit(
            lambda params, t, key: value_data(game, advantage_apply, v, params, t, key, v.value_games, self.sampling)
        )
        self.init_memory = functools.partial(reservoir_init, v.value_capacity, example)
        self.relabel = jit(functools.partial(
            self._relabel, num_rows=v.value_games * v.max_records, records_per_game=v.max_records, lam=v.value_lambda
        ))
        # lambda = 1 keeps the game's returns as targets: no relabelling to compile or run.
        self.relabels = v.value_lambda < 1.0
        self.add = jit(ring_add, donate_argnums=(0,))
        self.train = jit(functools.partial(
            train_steps, apply_fn=self.apply_fn, optimizer=self.optimizer, loss_fn=value_loss,
            num_steps=v.value_steps, batch_size=v.value_batch,
        ))
        self.fresh = jax.jit(self._fresh)

    def _relabel(self, value_params, data, *, num_rows: int, records_per_game: int, lam: float) -> ValueSample:
        """`data`'s items with lambda-return targets, bootstrapped on V = `value_params`.

        V is evaluated on the kept items only (they are a prefix of `data`'s rows)."""
        count = jnp.sum(data.valid.astype(jnp.int32))
        values = history_values(self.apply_fn, value_params, data.items.history, count=count)[:, 0]
        target = relabelled_targets(values, data, num_rows, records_per_game, lam)
        return data.items._replace(target=target)

    def _fresh(self, key: Array):
        params = init_params(self.spec, key)
        return params, self.optimizer.init(params)

    def lowered(self, key: Array, advantage_params, value_params, value_opt, memory: Reservoir, t: Array) -> list:
        """The lowered phases, for `DeepCFR.precompile` to compile side by side."""
        data = jax.eval_shape(self.collect, advantage_params, t, key)
        relabel = [self.relabel.lower(value_params, data)] if self.relabels else []
        return relabel + [
            self.collect.lower(advantage_params, t, key),
            self.add.lower(memory, data.items, data.valid),
            self.train.lower(key, value_params, value_opt, memory),
        ]

    def fit(self, key: Array, advantage_params, value_params, value_opt, memory: Reservoir, t: Array):
        """Play the iteration's value games, add them to `memory` and fit Q on it.

        Returns (Q params, Q optimizer state, memory, metrics): `loss/value`, `fve/value`
        (1 - loss / the loss of predicting zeros), `nonfinite/value`, `value/items` (this
        iteration's kept items: whole games' items, at most `value_capacity`), `value/nodes`,
        `value/truncated`, `memory/value`, `time/value_data_seconds`,
        `time/value_train_seconds`.
        """
        k_data, k_init, k_train = jax.random.split(key, 3)
        t0 = time.perf_counter()
        data = jax.block_until_ready(self.collect(advantage_params, t, k_data))
        # lambda < 1: the targets bootstrap on V as it is before this iteration's fit.
        items = self.relabel(value_params, data) if self.relabels else data.items
        memory = self.add(memory, items, data.valid)
        t1 = time.perf_counter()
        if not self.config.value_warm_start:
            value_params, value_opt = self.fresh(k_init)
        value_params, value_opt, fitted = jax.block_until_ready(self.train(k_train, value_params, value_opt, memory))
        t2 = time.perf_counter()
        metrics = {
            "loss/value": float(fitted.loss),
            "fve/value": explained_fraction(fitted),
            "nonfinite/value": int(fitted.nonfinite_steps),
            "value/items": int(np.asarray(data.valid).sum()),
            "memory/value": int(memory.size),
            "value/nodes": int(data.nodes),
            "value/truncated": int(data.truncated),
            "time/value_data_seconds": t1 - t0,
            "time/value_train_seconds": t2 - t1,
        }
        return value_params, value_opt, memory, metrics
