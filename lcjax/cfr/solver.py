"""Deep CFR: one iteration = traverse, store, train, for each player in turn.

`DeepCFR(game, config)` binds a game of `lcjax.env.protocol` and a `SolverConfig`, and
compiles each phase once:

* traversal (`external` or `probe`, see `lcjax.cfr.traversal`), in chunks of
  `traversal_batch` traversals so memory stays bounded;
* memory add: on-device reservoir insertion of the chunk's valid samples;
* advantage training: the traverser's advantage network, from scratch by default, for
  `advantage_steps` Adam steps on minibatches drawn from its reservoir, in one `lax.scan`;
* strategy training: the average-strategy network on the strategy reservoir.

All solver data lives in `SolverState`, a pytree (networks, optimizer states, memories, PRNG
key, iteration counter), so a run is checkpointed and resumed by saving that pytree.
`DeepCFR.iteration(state) -> (state, metrics)` runs the phases from the host, timing each
(the timings are what a run logs); nothing inside a phase returns to Python.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lcjax.cfr import traversal as tr
from lcjax.cfr.memory import Reservoir, reservoir_add, reservoir_init
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.cfr.policy import average_policy, bind, current_policy
from lcjax.cfr.samples import AdvantageSample, StrategySample
from lcjax.cfr.training import advantage_loss, make_optimizer, make_train_fn, strategy_loss

Array = jax.Array
Params = Any

SCHEMES = ("external", "probe")
PRECISIONS = ("float32", "bfloat16")
STRATEGY_LOSSES = ("cross_entropy", "mse")


@dataclasses.dataclass(frozen=True)
class SolverConfig:
    """Everything that shapes a Deep CFR run (hashable: it is static under `jit`).

    Attributes:
      scheme: traversal scheme, "external" or "probe".
      traversals_per_player: traversals per player per iteration (rounded up to whole
        chunks of `traversal_batch`).
      traversal_batch: traversals advanced together in one jitted call.
      branch_probability: probe only: chance that a traverser node is probed.
      max_probes: probe only: probed nodes kept per traversal.
      max_steps: probe only: bound on a trajectory's or rollout's length.
      rollout_batch: probe only: rollouts advanced together (0 = all of a chunk at once).
      max_depth: external only: stack frames per traversal.
      max_advantage: external only: advantage samples kept per traversal.
      node_budget: external only: stop a traversal after this many states (0 = none).
      max_strategy: strategy samples kept per traversal.
      hidden_size, num_layers, skip_connections, layer_norm: network architecture (all
        three networks share it).
      precision: compute dtype of the networks, "float32" or "bfloat16".
      advantage_steps, advantage_batch: Adam steps and minibatch size per advantage phase.
      strategy_steps, strategy_batch: the same for the strategy network.
      learning_rate: Adam learning rate.
      grad_clip: global gradient-norm clip (0 = none).
      warm_start: continue the advantage networks from the last iteration instead of
        re-initializing them.
      strategy_loss: "cross_entropy" or "mse".
      strategy_train_every: train the strategy network every this many iterations (it
        always continues from its previous parameters; the reservoir holds all data).
      advantage_capacity, strategy_capacity: reservoir sizes (items).
      observation_storage: dtype observations are stored in, "float32" or "bfloat16".
    """

    scheme: str = "external"
    traversals_per_player: int = 1024
    traversal_batch: int = 1024
    branch_probability: float = 0.2
    max_probes: int = 8
    max_steps: int = 512
    rollout_batch: int = 0
    max_depth: int = 16
    max_advantage: int = 64
    node_budget: int = 0
    max_strategy: int = 64
    hidden_size: int = 64
    num_layers: int = 2
    skip_connections: bool = False
    layer_norm: bool = False
    precision: str = "float32"
    advantage_steps: int = 200
    advantage_batch: int = 512
    strategy_steps: int = 200
    strategy_batch: int = 512
    learning_rate: float = 1e-3
    grad_clip: float = 1.0
    warm_start: bool = False
    strategy_loss: str = "cross_entropy"
    strategy_train_every: int = 1
    advantage_capacity: int = 1_000_000
    strategy_capacity: int = 1_000_000
    observation_storage: str = "float32"

    def __post_init__(self):
        def need(ok, field, allowed):
            if not ok:
                raise ValueError(f"SolverConfig.{field}={getattr(self, field)!r} is invalid: {allowed}")

        need(self.scheme in SCHEMES, "scheme", f"allowed: {', '.join(SCHEMES)}")
        need(self.precision in PRECISIONS, "precision", f"allowed: {', '.join(PRECISIONS)}")
        need(self.observation_storage in PRECISIONS, "observation_storage", f"allowed: {', '.join(PRECISIONS)}")
        need(self.strategy_loss in STRATEGY_LOSSES, "strategy_loss", f"allowed: {', '.join(STRATEGY_LOSSES)}")
        need(0.0 < self.branch_probability <= 1.0, "branch_probability", "must be in (0, 1]")
        for name in (
            "traversals_per_player", "traversal_batch", "max_probes", "max_steps", "max_depth", "max_advantage",
            "max_strategy", "hidden_size", "advantage_steps", "advantage_batch", "strategy_steps",
            "strategy_batch", "strategy_train_every", "advantage_capacity", "strategy_capacity",
        ):
            need(isinstance(getattr(self, name), int) and getattr(self, name) > 0, name, "must be a positive integer")
        for name in ("num_layers", "node_budget", "rollout_batch"):
            need(isinstance(getattr(self, name), int) and getattr(self, name) >= 0, name, "must be an integer >= 0")
        need(self.learning_rate > 0, "learning_rate", "must be positive")
        need(self.grad_clip >= 0, "grad_clip", "must be >= 0")

    @property
    def num_chunks(self) -> int:
        return math.ceil(self.traversals_per_player / self.traversal_batch)


class SolverState(NamedTuple):
    """All of a Deep CFR run's data; a pytree.

    Attributes:
      iteration: int32 scalar, completed iterations (the next one is iteration + 1).
      key: PRNG key of the run.
      advantage_params: (player 0's, player 1's) advantage network parameters.
      advantage_opt: their optax states.
      strategy_params: the average-strategy network's parameters.
      strategy_opt: its optax state.
      advantage_memory: (player 0's, player 1's) Reservoir of AdvantageSample.
      strategy_memory: Reservoir of StrategySample.
    """

    iteration: Array
    key: Array
    advantage_params: tuple[Params, Params]
    advantage_opt: tuple[Any, Any]
    strategy_params: Params
    strategy_opt: Any
    advantage_memory: tuple[Reservoir, Reservoir]
    strategy_memory: Reservoir


class DeepCFR:
    """A Deep CFR solver for `game` with `config`; see the module docstring.

    Attributes:
      game: the game.
      config: the SolverConfig.
      spec: the NetworkSpec shared by the three networks.
      apply_fn: the networks' forward `apply(params, x)`.
    """

    def __init__(self, game, config: SolverConfig = SolverConfig()):
        self.game = game
        self.config = config
        c = config
        self.spec = NetworkSpec(
            in_size=game.observation_size,
            out_size=game.num_actions,
            hidden_size=c.hidden_size,
            num_layers=c.num_layers,
            skip_connections=c.skip_connections,
            layer_norm=c.layer_norm,
            dtype=c.precision,
        )
        self.apply_fn = make_apply(network_graphdef(self.spec))
        self.optimizer = make_optimizer(c.learning_rate, c.grad_clip if c.grad_clip > 0 else None)
        self._train_advantage = make_train_fn(
            apply_fn=self.apply_fn,
            optimizer=self.optimizer,
            loss_fn=advantage_loss,
            num_steps=c.advantage_steps,
            batch_size=c.advantage_batch,
        )
        self._strategy_loss = functools.partial(strategy_loss, kind=c.strategy_loss)
        self._train_strategy = make_train_fn(
            apply_fn=self.apply_fn,
            optimizer=self.optimizer,
            loss_fn=self._strategy_loss,
            num_steps=c.strategy_steps,
            batch_size=c.strategy_batch,
        )
        if c.scheme == "external":
            cfg = tr.ExternalConfig(
                max_depth=c.max_depth, max_advantage=c.max_advantage, max_strategy=c.max_strategy, node_budget=c.node_budget
            )
            traverse = functools.partial(tr.external_sampling, game, self.apply_fn, cfg)
        else:
            cfg = tr.ProbeConfig(
                branch_probability=c.branch_probability,
                max_probes=c.max_probes,
                max_strategy=c.max_strategy,
                max_steps=c.max_steps,
                rollout_batch=c.rollout_batch,
            )
            traverse = functools.partial(tr.probe_sampling, game, self.apply_fn, cfg)
        self._traverse = jax.jit(lambda params, player, t, key: traverse(params, player, t, key, c.traversal_batch))
        self._add = jax.jit(reservoir_add, donate_argnums=(1,))
        self._fresh_network = jax.jit(self._fresh_network_impl)

    # ----------------------------------------------------------------- state
    def _fresh_network_impl(self, key):
        params = init_params(self.spec, key)
        return params, self.optimizer.init(params)

    def _example_samples(self):
        d, a = self.game.observation_size, self.game.num_actions
        obs = jax.ShapeDtypeStruct((d,), jnp.float32)
        mask = jax.ShapeDtypeStruct((a,), jnp.bool_)
        vec = jax.ShapeDtypeStruct((a,), jnp.float32)
        t = jax.ShapeDtypeStruct((), jnp.float32)
        store = None if self.config.observation_storage == "float32" else jnp.dtype(self.config.observation_storage)
        adv = (AdvantageSample(obs, mask, vec, t), AdvantageSample(store, None, None, None))
        strat = (StrategySample(obs, mask, vec, t), StrategySample(store, None, None, None))
        return adv, strat

    def init(self, key: Array) -> SolverState:
        """A fresh solver state: random networks, empty memories, iteration 0."""
        c = self.config
        key, k0, k1, ks = jax.random.split(key, 4)
        adv0, adv1 = self._fresh_network(k0), self._fresh_network(k1)
        strat_params, strat_opt = self._fresh_network(ks)
        (adv_example, adv_store), (strat_example, strat_store) = self._example_samples()
        memory = tuple(reservoir_init(c.advantage_capacity, adv_example, adv_store) for _ in range(2))
        return SolverState(
            iteration=jnp.int32(0),
            key=key,
            advantage_params=(adv0[0], adv1[0]),
            advantage_opt=(adv0[1], adv1[1]),
            strategy_params=strat_params,
            strategy_opt=strat_opt,
            advantage_memory=memory,
            strategy_memory=reservoir_init(c.strategy_capacity, strat_example, strat_store),
        )

    # ----------------------------------------------------------------- phases
    def traverse(self, state: SolverState, player: int, key: Array) -> tr.TraversalResult:
        """One chunk of `traversal_batch` traversals for `player` at iteration t + 1."""
        t = (state.iteration + 1).astype(jnp.float32)
        return self._traverse(state.advantage_params, jnp.int32(player), t, key)

    def iteration(self, state: SolverState) -> tuple[SolverState, dict[str, float]]:
        """One Deep CFR iteration; returns the new state and its metrics (host floats).

        Metrics: `time/*_seconds` per phase, `traversal/*` counters, `memory/*` sizes,
        `loss/*` and `nonfinite/*` of the training phases.
        """
        c = self.config
        t_start = time.perf_counter()
        key, k_iter = jax.random.split(state.key)
        keys = jax.random.split(k_iter, 8)
        timing = {"traversal": 0.0, "memory_add": 0.0, "advantage_train": 0.0, "strategy_train": 0.0}
        totals = {f: 0 for f in tr.TraversalCounters._fields}
        adv_params = list(state.advantage_params)
        adv_opt = list(state.advantage_opt)
        adv_memory = list(state.advantage_memory)
        strat_memory = state.strategy_memory
        metrics: dict[str, float] = {}
        for player in (0, 1):
            chunk_keys = jax.random.split(keys[player], c.num_chunks)
            for chunk in range(c.num_chunks):
                k_trav, k_adv, k_strat = jax.random.split(chunk_keys[chunk], 3)
                t0 = time.perf_counter()
                result = jax.block_until_ready(
                    self._traverse(tuple(adv_params), jnp.int32(player), (state.iteration + 1).astype(jnp.float32), k_trav)
                )
                t1 = time.perf_counter()
                adv_memory[player] = self._add(k_adv, adv_memory[player], result.advantage, result.advantage_valid)
                strat_memory = self._add(k_strat, strat_memory, result.strategy, result.strategy_valid)
                jax.block_until_ready((adv_memory[player].size, strat_memory.size))
                t2 = time.perf_counter()
                timing["traversal"] += t1 - t0
                timing["memory_add"] += t2 - t1
                for f in totals:
                    totals[f] += int(getattr(result.counters, f))
            t0 = time.perf_counter()
            k_init, k_train = jax.random.split(keys[2 + player])
            if c.warm_start:
                params, opt = adv_params[player], adv_opt[player]
            else:
                params, opt = self._fresh_network(k_init)
            params, opt, m = self._train_advantage(k_train, params, opt, adv_memory[player])
            adv_params[player], adv_opt[player] = params, opt
            metrics[f"loss/advantage_{player}"] = float(m.loss)
            metrics[f"nonfinite/advantage_{player}"] = int(m.nonfinite_steps)
            timing["advantage_train"] += time.perf_counter() - t0
        strat_params, strat_opt = state.strategy_params, state.strategy_opt
        iteration = int(state.iteration) + 1
        if iteration % c.strategy_train_every == 0:
            t0 = time.perf_counter()
            strat_params, strat_opt, m = self._train_strategy(keys[4], strat_params, strat_opt, strat_memory)
            metrics["loss/strategy"] = float(m.loss)
            metrics["nonfinite/strategy"] = int(m.nonfinite_steps)
            timing["strategy_train"] = time.perf_counter() - t0
        new_state = SolverState(
            iteration=jnp.int32(iteration),
            key=key,
            advantage_params=tuple(adv_params),
            advantage_opt=tuple(adv_opt),
            strategy_params=strat_params,
            strategy_opt=strat_opt,
            advantage_memory=tuple(adv_memory),
            strategy_memory=strat_memory,
        )
        for name, seconds in timing.items():
            metrics[f"time/{name}_seconds"] = seconds
        metrics["time/iteration_seconds"] = time.perf_counter() - t_start
        metrics["traversal/nodes"] = totals["nodes"]
        metrics["traversal/evaluations"] = totals["evaluations"]
        metrics["traversal/samples"] = totals["advantage_samples"] + totals["strategy_samples"]
        metrics["traversal/advantage_samples"] = totals["advantage_samples"]
        metrics["traversal/strategy_samples"] = totals["strategy_samples"]
        metrics["traversal/dropped_samples"] = totals["dropped_samples"]
        metrics["traversal/truncated"] = totals["truncated"]
        metrics["traversal/nodes_per_second"] = totals["nodes"] / max(timing["traversal"], 1e-9)
        metrics["memory/advantage_0"] = int(new_state.advantage_memory[0].size)
        metrics["memory/advantage_1"] = int(new_state.advantage_memory[1].size)
        metrics["memory/strategy"] = int(new_state.strategy_memory.size)
        return new_state, {"iteration": iteration, **metrics}

    # ----------------------------------------------------------------- policies
    def average_policy_fn(self, state: SolverState):
        """The average policy as `(observations f32[N, D], masks bool[N, A]) -> f32[N, A]`."""
        return bind(average_policy(self.apply_fn), state.strategy_params)

    def current_policy_fn(self, state: SolverState, player: int):
        """Regret matching on `player`'s advantage network, as `(observations, masks) -> probs`."""
        return bind(current_policy(self.apply_fn), state.advantage_params[player])
