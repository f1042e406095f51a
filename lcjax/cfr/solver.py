"""Deep CFR: one iteration = traverse, store, train, for each player in turn.

`DeepCFR(game, config)` binds a game of `lcjax.env.protocol` and a `SolverConfig`, and
compiles each phase once:

* history value (scheme `value` only, `lcjax.cfr.history_value`): on-policy games and the
  fit of Q(h, a) that the traversals read regrets from;
* traversal (`external`, `probe` or `value`, see `lcjax.cfr.traversal`), in chunks of
  `traversal_batch` traversals so memory stays bounded;
* memory add: on-device reservoir insertion of the chunk's valid samples, each weighted
  t ** `*_weight_power` (Linear CFR by default);
* advantage training: the traverser's advantage network, from scratch by default (or
  continued, `warm_start`), for `advantage_steps` Adam steps on minibatches drawn from its
  reservoir, in one `lax.scan`;
* strategy training: the average-strategy network on the strategy reservoir, every
  `strategy_train_every` iterations, continued (`strategy_warm_start`, the default) or
  fitted afresh to the whole reservoir.

Given a mesh of several devices (`DeepCFR(game, config, mesh)`), every phase is its
data-parallel program instead (`lcjax.cfr.mesh`); one device runs the programs above.

The first `iteration` compiles all phases side by side in threads (`precompile`).
`make_solver(game, config)` is the cached constructor: it returns one solver per equal
(game, config) pair, so a resumed run, an evaluation, a script or a notebook reuses what an
earlier one compiled. `SolverConfig` (lcjax.cfr.solver_config) composes the settings
sections; tuned settings for Kuhn and Leduc poker are `lcjax.config.small_game_config`.

All solver data lives in `SolverState`, a pytree (networks, optimizer states, memories, PRNG
key, iteration counter), so a run is checkpointed and resumed by saving that pytree.
`DeepCFR.iteration(state) -> (state, metrics)` runs the phases from the host, timing each
(the timings are what a run logs); nothing inside a phase returns to Python.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from lcjax.cfr import traversal as tr
from lcjax.cfr.history_value import HistoryValue
from lcjax.cfr.memory import Reservoir, reservoir_add, reservoir_init
from lcjax.cfr.mesh import data_parallel, sharded_init
from lcjax.cfr.networks import init_params, make_apply, network_graphdef, network_spec
from lcjax.cfr.policy import average_policy, bind, current_policy, make_act
from lcjax.cfr.regret import powered_apply
from lcjax.cfr.samples import AdvantageSample, StrategySample
from lcjax.cfr.solver_config import SolverConfig
from lcjax.cfr.training import (
    advantage_loss,
    explained_fraction,
    fast_compile_options,
    make_optimizer,
    phase_schedule,
    strategy_loss,
    train_steps,
)

Array = jax.Array
Params = Any

def _add_weighted(power: float, key, reservoir, items, valid, delay: int = 0):
    """`reservoir_add` with each sample's weight t replaced by (t - delay) ** power.

    power 1 is Linear CFR. Samples of iterations t <= delay are not offered at all (CFR+'s
    averaging delay), so the reservoir holds only later iterations' samples.
    """
    t = items.iteration.astype(jnp.float32)
    if delay:
        valid = valid & (t > delay)
        t = jnp.maximum(t - delay, 1.0)
    if power != 1.0 or delay:
        items = items._replace(iteration=t**power)
    return reservoir_add(key, reservoir, items, valid)


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
      value_params: the history-value network's parameters (scheme "value"; else ()).
      value_opt: its optax state (else ()).
      value_memory: Reservoir of ValueSample, a sliding window (else ()).
    """

    iteration: Array
    key: Array
    advantage_params: tuple[Params, Params]
    advantage_opt: tuple[Any, Any]
    strategy_params: Params
    strategy_opt: Any
    advantage_memory: tuple[Reservoir, Reservoir]
    strategy_memory: Reservoir
    value_params: Params = ()
    value_opt: Any = ()
    value_memory: Any = ()


class _Phases:
    """The jitted phases of one (game, config), and its policies.

    JAX caches compilations per function object, so these objects compile once each; a
    DeepCFR owns one `_Phases`, and `make_solver` shares solvers (hence phases) per
    (game, config).
    """

    def __init__(self, game, config: SolverConfig, mesh=None):
        c = config.optimization
        self.config = config
        self.spec = network_spec(config.network, game.observation_size, game.num_actions, config.precision)
        self.apply_fn = make_apply(network_graphdef(self.spec))
        clip = c.grad_clip if c.grad_clip > 0 else None
        # Both optimizers have the same state structure (the schedule is not part of it), so
        # `self.optimizer.init` serves both networks.
        self.optimizer = make_optimizer(phase_schedule(c.learning_rate, c.lr_schedule, c.advantage_steps), clip)
        strategy_lr = c.strategy_learning_rate or c.learning_rate
        strategy_optimizer = make_optimizer(phase_schedule(strategy_lr, c.lr_schedule, c.strategy_steps), clip)
        self.jit = jit = functools.partial(jax.jit, compiler_options=fast_compile_options() if c.fast_compile else None)
        # The phases' plain functions (`lcjax.cfr.mesh` shards these), then their programs.
        train = functools.partial(train_steps, apply_fn=self.apply_fn, draw_by_weight=c.draw_by_weight)
        self.train_advantage_fn = functools.partial(
            train, optimizer=self.optimizer, loss_fn=advantage_loss, num_steps=c.advantage_steps, batch_size=c.advantage_batch
        )
        strategy = functools.partial(strategy_loss, kind=c.strategy_loss)
        self.train_strategy_fn = functools.partial(
            train, optimizer=strategy_optimizer, loss_fn=strategy, num_steps=c.strategy_steps, batch_size=c.strategy_batch
        )
        self.add_advantage_fn = functools.partial(_add_weighted, c.advantage_weight_power)
        self.add_strategy_fn = functools.partial(_add_weighted, c.strategy_weight_power, delay=c.strategy_weight_delay)
        self.fresh_network_fn, self.iteration_keys_fn = self._fresh_network, self._iteration_keys
        # `make_train_fn`'s program, jitted here so that it takes the compiler options.
        self.train_advantage = jit(self.train_advantage_fn)
        self.train_strategy = jit(self.train_strategy_fn)
        t = config.traversal
        # Everything that plays the current strategies regret-matches on these outputs.
        self.regret_apply = powered_apply(self.apply_fn, c.regret_exponent)
        self.history_value = HistoryValue(game, config, self.spec, self.regret_apply, jit) if t.scheme == "value" else None
        self.value_apply = self.history_value.apply_fn if self.history_value else None
        self.traverse = jit(tr.traversal_fn(game, self.regret_apply, t, self.value_apply))
        self.add_advantage = jit(self.add_advantage_fn, donate_argnums=(1,))
        self.add_strategy = jit(self.add_strategy_fn, donate_argnums=(1,))
        self.fresh_network = jax.jit(self._fresh_network)
        self.iteration_keys = jax.jit(self._iteration_keys)
        # On a mesh of several devices every phase becomes its data-parallel program.
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        if self.mesh is not None:
            data_parallel(self, game, self.mesh)
        # One object per policy: reading a policy off new parameters (`policy.bind`) and
        # the arena's matches (compiled per act object) never recompile.
        self.policies = {"average": average_policy(self.apply_fn), "current": current_policy(self.regret_apply)}
        self.acts = {name: make_act(game, policy) for name, policy in self.policies.items()}

    def _fresh_network(self, key):
        params = init_params(self.spec, key)
        return params, self.optimizer.init(params)

    def _iteration_keys(self, key):
        """(next state key, [2, chunks, 3] chunk keys (traverse, add advantage, add strategy),
        [6] keys: player 0's (init, train), player 1's (init, train), strategy train, value)."""
        n = self.config.traversal.num_chunks
        key, k_chunks, k_rest = jax.random.split(key, 3)
        # The value key is folded in, so the other five keys are those of runs before it.
        rest = jnp.concatenate([jax.random.split(k_rest, 5), jax.random.fold_in(k_rest, 5)[None]])
        return key, jax.random.split(k_chunks, 2 * n * 3).reshape(2, n, 3), rest


class DeepCFR:
    """A Deep CFR solver for `game` with `config`; see the module docstring.

    Each instance compiles its own phases; build solvers with `make_solver` to share them.

    Attributes:
      game: the game.
      config: the SolverConfig.
      spec: the NetworkSpec shared by the three networks.
      apply_fn: the networks' forward `apply(params, x)`.
      regret_apply: the advantage networks' forward that every reader of the current
        strategies regret-matches on (`apply_fn` through `optimization.regret_exponent`).
    """

    def __init__(self, game, config: SolverConfig = SolverConfig(), mesh=None):
        self.game = game
        self.config = config
        phases = _Phases(game, config, mesh)
        self._phases = phases
        self.spec = phases.spec
        self.apply_fn = phases.apply_fn
        self.regret_apply = phases.regret_apply
        self.optimizer = phases.optimizer
        self._train_advantage = phases.train_advantage
        self._train_strategy = phases.train_strategy
        self._traverse = phases.traverse
        self._add_advantage = phases.add_advantage
        self._add_strategy = phases.add_strategy
        self._fresh_network = phases.fresh_network
        self._iteration_keys = phases.iteration_keys
        self._players = (jnp.int32(0), jnp.int32(1))
        self._compiled = False  # set by `precompile`
        self.mesh = phases.mesh  # None on one device
        self._sharded_init = sharded_init(self._init_one_device, self.mesh) if self.mesh is not None else None

    # ----------------------------------------------------------------- state
    def _example_samples(self):
        d, a = self.game.observation_size, self.game.num_actions
        obs = jax.ShapeDtypeStruct((d,), jnp.float32)
        mask = jax.ShapeDtypeStruct((a,), jnp.bool_)
        vec = jax.ShapeDtypeStruct((a,), jnp.float32)
        t = jax.ShapeDtypeStruct((), jnp.float32)
        storage = self.config.memory.observation_storage
        store = None if storage == "float32" else jnp.dtype(storage)
        adv = (AdvantageSample(obs, mask, vec, t), AdvantageSample(store, None, None, None))
        strat = (StrategySample(obs, mask, vec, t), StrategySample(store, None, None, None))
        return adv, strat

    def init(self, key: Array) -> SolverState:
        """A fresh solver state: random networks, empty memories, iteration 0.

        On a mesh of several devices the state is placed on it, the reservoirs sharded
        (`lcjax.cfr.mesh`), everything else replicated.
        """
        if self._sharded_init is not None:
            return self._sharded_init(key)
        return self._init_one_device(key)

    def _init_one_device(self, key: Array) -> SolverState:
        c = self.config.memory
        key, k0, k1, ks = jax.random.split(key, 4)
        adv0, adv1 = self._fresh_network(k0), self._fresh_network(k1)
        strat_params, strat_opt = self._fresh_network(ks)
        (adv_example, adv_store), (strat_example, strat_store) = self._example_samples()
        memory = tuple(reservoir_init(c.advantage_capacity, adv_example, adv_store) for _ in range(2))
        value_params, value_opt, value_memory = (), (), ()
        if self._phases.history_value is not None:
            value_params, value_opt = self._phases.history_value.fresh(jax.random.fold_in(key, 1))
            value_memory = self._phases.history_value.init_memory()
        return SolverState(
            iteration=jnp.int32(0),
            key=key,
            advantage_params=(adv0[0], adv1[0]),
            advantage_opt=(adv0[1], adv1[1]),
            strategy_params=strat_params,
            strategy_opt=strat_opt,
            advantage_memory=memory,
            strategy_memory=reservoir_init(c.strategy_capacity, strat_example, strat_store),
            value_params=value_params,
            value_opt=value_opt,
            value_memory=value_memory,
        )

    # ----------------------------------------------------------------- compilation
    def precompile(self, state: SolverState) -> float:
        """Compile every phase for `state`'s shapes, in parallel threads; once per solver.

        `iteration` calls it on its first run. XLA's compilations run outside the GIL, so on
        a multi-core host compiling the phases side by side shortens the first iteration.
        Returns the seconds it took (0 once compiled).
        """
        if self._compiled:
            return 0.0
        t0 = time.perf_counter()
        key, chunk_keys, keys = self._iteration_keys(state.key)
        t_next = (state.iteration + 1).astype(jnp.float32)
        k = chunk_keys[0, 0, 0]
        trav_args = (state.advantage_params, state.value_params, self._players[0], t_next, k)
        result = jax.eval_shape(self._traverse, *trav_args)
        lowered = [
            self._traverse.lower(*trav_args),
            self._add_advantage.lower(k, state.advantage_memory[0], result.advantage, result.advantage_valid),
            self._add_strategy.lower(k, state.strategy_memory, result.strategy, result.strategy_valid),
            self._train_advantage.lower(k, state.advantage_params[0], state.advantage_opt[0], state.advantage_memory[0]),
            self._train_strategy.lower(k, state.strategy_params, state.strategy_opt, state.strategy_memory),
        ]
        if self._phases.history_value is not None:
            lowered += self._phases.history_value.lowered(
                k, state.advantage_params, state.value_params, state.value_opt, state.value_memory, t_next
            )
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(lowered), os.cpu_count() or 1)) as pool:
            # Compiling populates each jitted function's cache, so later calls reuse it.
            list(pool.map(lambda lowered: lowered.compile(), lowered))
        self._compiled = True
        return time.perf_counter() - t0

    # ----------------------------------------------------------------- phases
    def iteration(self, state: SolverState, fit_strategy: bool = True) -> tuple[SolverState, dict[str, float]]:
        """One Deep CFR iteration; returns the new state and its metrics (host floats).

        `fit_strategy=False` skips the iteration's scheduled strategy phase, if it has one:
        the strategy network and its optimizer state stay as they were and nothing else
        changes (the phase draws no key of the state's stream). For a caller that replaces the
        network right after, as a run's last strategy fit does.

        Metrics: `iteration`; `time/*_seconds` per phase (traversal, memory_add,
        advantage_train, strategy_train, compile: the first call's `precompile`, and the
        whole iteration); `traversal/*` counters; `memory/*` sizes; `loss/*` and
        `nonfinite/*` of the training phases (`*/strategy` only on iterations that train the
        strategy network); `fve/advantage_<p>`, the share of the regret targets' power the
        fit explains (1 - loss / the loss of predicting zeros). Scheme "value" adds
        `loss/value`, `fve/value`, `nonfinite/value`, `value/*` and `time/value_*_seconds`
        (see `lcjax.cfr.history_value`); with `fit_each_player` the times, `value/nodes` and
        `value/truncated` add up both fits, the others are the second fit's.
        """
        t_start = time.perf_counter()
        compile_seconds = self.precompile(state)
        key, chunk_keys, keys = self._iteration_keys(state.key)
        t_next = (state.iteration + 1).astype(jnp.float32)
        timing = {"traversal": 0.0, "memory_add": 0.0, "advantage_train": 0.0, "strategy_train": 0.0}
        totals = {f: 0 for f in tr.TraversalCounters._fields}
        adv_params = list(state.advantage_params)
        adv_opt = list(state.advantage_opt)
        adv_memory = list(state.advantage_memory)
        strat_memory = state.strategy_memory
        metrics: dict[str, float] = {}
        value_params, value_opt, value_memory = state.value_params, state.value_opt, state.value_memory
        history_value = self._phases.history_value
        for player in (0, 1):
            # Q of the current strategies, before traversing; with `fit_each_player` again
            # before player 1's traversal, whose opponent has just changed its strategy.
            if history_value is not None and (player == 0 or self.config.traversal.value.fit_each_player):
                k_value = keys[5] if player == 0 else jax.random.fold_in(keys[5], 1)
                value_params, value_opt, value_memory, value_metrics = history_value.fit(
                    k_value, tuple(adv_params), value_params, value_opt, value_memory, t_next
                )
                for name in ("time/value_data_seconds", "time/value_train_seconds", "value/nodes", "value/truncated"):
                    value_metrics[name] += metrics.get(name, 0)
                metrics.update(value_metrics)
            adv_memory[player], strat_memory = self._collect_samples(
                tuple(adv_params), value_params, player, t_next, chunk_keys[player], adv_memory[player], strat_memory,
                timing, totals,
            )
            t0 = time.perf_counter()
            adv_params[player], adv_opt[player], fit = self._fit_advantage(
                keys[2 * player], keys[2 * player + 1], adv_params[player], adv_opt[player], adv_memory[player]
            )
            metrics[f"loss/advantage_{player}"] = float(fit.loss)
            metrics[f"fve/advantage_{player}"] = explained_fraction(fit)
            metrics[f"nonfinite/advantage_{player}"] = int(fit.nonfinite_steps)
            timing["advantage_train"] += time.perf_counter() - t0
        strat_params, strat_opt = state.strategy_params, state.strategy_opt
        iteration = int(state.iteration) + 1
        if fit_strategy and iteration % self.config.optimization.strategy_train_every == 0:
            t0 = time.perf_counter()
            strat_params, strat_opt, fit = self._fit_strategy(keys[4], strat_params, strat_opt, strat_memory)
            metrics.update(_strategy_fit_metrics(fit))
            timing["strategy_train"] = time.perf_counter() - t0
        new_state = SolverState(
            # On a mesh the counter stays a replicated array of it (a host value is local to
            # one process, and a multi-process checkpoint cannot hold it).
            iteration=jnp.int32(iteration) if self.mesh is None else state.iteration + 1,
            key=key,
            advantage_params=tuple(adv_params),
            advantage_opt=tuple(adv_opt),
            strategy_params=strat_params,
            strategy_opt=strat_opt,
            advantage_memory=tuple(adv_memory),
            strategy_memory=strat_memory,
            value_params=value_params,
            value_opt=value_opt,
            value_memory=value_memory,
        )
        metrics.update(_phase_metrics(timing, totals, compile_seconds, time.perf_counter() - t_start, new_state))
        return new_state, {"iteration": iteration, **metrics}

    def _collect_samples(self, adv_params, value_params, player, t_next, chunk_keys, adv_memory, strat_memory, timing, totals):
        """Traverse `num_chunks` chunks for `player` and add their samples to the memories.

        Adds the seconds spent to `timing` ("traversal", "memory_add") and the traversal
        counters to `totals`, in place. Returns (player's advantage memory, strategy memory).
        """
        for k_trav, k_adv, k_strat in chunk_keys:
            t0 = time.perf_counter()
            result = jax.block_until_ready(self._traverse(adv_params, value_params, self._players[player], t_next, k_trav))
            t1 = time.perf_counter()
            adv_memory = self._add_advantage(k_adv, adv_memory, result.advantage, result.advantage_valid)
            strat_memory = self._add_strategy(k_strat, strat_memory, result.strategy, result.strategy_valid)
            jax.block_until_ready((adv_memory.size, strat_memory.size))
            timing["traversal"] += t1 - t0
            timing["memory_add"] += time.perf_counter() - t1
            counters = jax.device_get(result.counters)  # one transfer for all counters
            for f in totals:
                totals[f] += int(getattr(counters, f))
        return adv_memory, strat_memory

    def _fit_advantage(self, k_init, k_train, params, opt, memory):
        """The advantage phase of one player: (params, optimizer state, TrainMetrics).

        Continues from `params`/`opt` with `warm_start`, else from a network drawn with `k_init`.
        """
        if not self.config.optimization.warm_start:
            params, opt = self._fresh_network(k_init)
        return self._train_advantage(k_train, params, opt, memory)

    def _fit_strategy(self, key, params, opt, memory):
        """One strategy phase on `memory`: from `params`/`opt` with `strategy_warm_start`,
        else from a fresh network (its init key folded out of `key`, so the train key is the
        same either way)."""
        if not self.config.optimization.strategy_warm_start:
            params, opt = self._fresh_network(jax.random.fold_in(key, 1))
        return self._train_strategy(key, params, opt, memory)

    def train_strategy(self, state: SolverState, *, keep_key: bool = False) -> tuple[SolverState, dict[str, float]]:
        """One extra strategy phase (`strategy_steps` steps) outside the iteration cadence.

        For runs with `strategy_train_every > 1` that end (or are measured) between two
        scheduled phases. The iteration counter does not advance; the PRNG key does, unless
        `keep_key` (the phase then draws from a key folded out of the state's, so the next
        iterations are those the state would have run without it).

        Returns the new state and `loss/strategy`, `nonfinite/strategy` and
        `time/strategy_train_seconds`.
        """
        t0 = time.perf_counter()
        if keep_key:
            key, k_train = state.key, jax.random.fold_in(state.key, 2)
        else:
            key, k_train = jax.random.split(state.key)
        params, opt, fit = self._fit_strategy(k_train, state.strategy_params, state.strategy_opt, state.strategy_memory)
        metrics = _strategy_fit_metrics(fit)
        metrics["time/strategy_train_seconds"] = time.perf_counter() - t0
        return state._replace(key=key, strategy_params=params, strategy_opt=opt), metrics

    # ----------------------------------------------------------------- policies
    def policy_params(self, state: SolverState, policy: str = "average") -> Params:
        """The parameters `policy` reads: the strategy network's ("average") or the pair of
        advantage networks' ("current")."""
        return state.strategy_params if policy == "average" else state.advantage_params

    def policy(self, policy: str = "average"):
        """The unbound `policy` ("average" or "current"; `lcjax.cfr.policy`'s signature, the
        same object on every call): the current policy regret-matches with
        `optimization.regret_exponent`."""
        return self._phases.policies[policy]

    def policy_fn(self, state: SolverState, policy: str = "average"):
        """`policy` ("average" or "current", see `lcjax.cfr.policy`) of `state` as
        `(observations f32[N, D], masks bool[N, A], players int32[N]) -> f32[N, A]`."""
        return bind(self._phases.policies[policy], self.policy_params(state, policy))

    def average_policy_fn(self, state: SolverState):
        """The average policy as `(observations f32[N, D], masks bool[N, A]) -> f32[N, A]`
        (the form `lcjax.cfr.exploitability` takes; the acting player does not matter)."""
        return self.policy_fn(state, "average")

    def policy_act(self, policy: str = "average"):
        """`act(params, key, state) -> int32 action` playing `policy` in one state (see
        `lcjax.cfr.policy.make_act`; params from `policy_params`).

        The same object on every call: the arena compiles one match per act object.
        """
        return self._phases.acts[policy]


def _strategy_fit_metrics(fit) -> dict[str, float]:
    return {"loss/strategy": float(fit.loss), "nonfinite/strategy": int(fit.nonfinite_steps)}


def _phase_metrics(timing: dict, totals: dict, compile_seconds: float, seconds: float, state: SolverState) -> dict:
    """An iteration's `time/*`, `traversal/*` and `memory/*` metrics (see `DeepCFR.iteration`)."""
    metrics = {f"time/{name}_seconds": value for name, value in timing.items()}
    metrics["time/compile_seconds"] = compile_seconds
    metrics["time/iteration_seconds"] = seconds
    counts = dict(totals, samples=totals["advantage_samples"] + totals["strategy_samples"])
    for name in ("nodes", "evaluations", "samples", "advantage_samples", "strategy_samples", "dropped_samples", "truncated"):
        metrics[f"traversal/{name}"] = counts[name]
    metrics["traversal/nodes_per_second"] = totals["nodes"] / max(timing["traversal"], 1e-9)
    memories = {"advantage_0": state.advantage_memory[0], "advantage_1": state.advantage_memory[1], "strategy": state.strategy_memory}
    # A sharded reservoir has one size per shard (`lcjax.cfr.mesh`): the memory holds their sum.
    metrics.update({f"memory/{name}": int(jnp.sum(memory.size)) for name, memory in memories.items()})
    return metrics


@functools.lru_cache(maxsize=16)
def make_solver(game, config: SolverConfig = SolverConfig(), mesh=None) -> DeepCFR:
    """The DeepCFR for (game, config, mesh): one per equal triple in this process.

    `mesh`: a one-axis ("data") `jax.sharding.Mesh` to run data-parallel on
    (`lcjax.cfr.mesh`); None or a single device: the single-device programs.

    The one cache of solvers. A solver holds only compiled functions (all run data is in
    SolverState), so sharing it lets a resumed run, an evaluation, a script or a notebook
    reuse what an earlier one compiled, and keeps its policies' act objects (which the
    arena's compiled matches are keyed on) stable. Games are equal when their rules are.
    Both arguments must be hashable; build `DeepCFR(game, config)` for a private solver.
    """
    return DeepCFR(game, config, mesh)
