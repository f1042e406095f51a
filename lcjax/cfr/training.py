"""On-device training of Deep CFR's advantage and strategy networks.

A training phase is ONE jitted `lax.scan` over minibatches that are sampled inside the scan
from a `Reservoir`, so no data crosses between host and device. The pieces are pure
functions; `make_train_fn` jits `train_steps` once for a fixed network, optimizer, loss and
minibatch shape, and the result is reused across CFR iterations without retracing (params,
optimizer state and reservoir are ordinary array arguments).

Loss functions share one signature, `loss_fn(apply_fn, params, batch) -> float32 scalar`,
where `apply_fn(params, x) -> float32[..., A]` (e.g. `lcjax.cfr.networks.make_apply`).
Both losses weight each sample by its CFR iteration t (Linear CFR) and normalize by the
total weight, so the scale of the loss does not grow with t.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from lcjax.cfr.memory import Reservoir, reservoir_cumulative_weights, reservoir_sample, reservoir_sample_weighted
from lcjax.cfr.networks import masked_logits_to_probs
from lcjax.cfr.samples import AdvantageSample, StrategySample, ValueSample
from lcjax.settings import Bool, Choice, ConfigError, Float, Int, Settings, setting

Array = jax.Array
Params = Any
ApplyFn = Callable[[Params, Array], Array]
LossFn = Callable[[ApplyFn, Params, Any], Array]

LR_SCHEDULES = ("constant", "cosine", "linear")
STRATEGY_LOSSES = ("cross_entropy", "mse")

__all__ = [
    "LR_SCHEDULES",
    "OptimizationConfig",
    "STRATEGY_LOSSES",
    "AdvantageSample",
    "StrategySample",
    "TrainMetrics",
    "explained_fraction",
    "make_optimizer",
    "phase_schedule",
    "fast_compile_options",
    "advantage_loss",
    "strategy_loss",
    "value_loss",
    "train_steps",
    "make_train_fn",
]


@dataclasses.dataclass(frozen=True)
class OptimizationConfig(Settings):
    """The advantage and strategy training phases (the `optimization` section).

    Attributes:
      advantage_steps, advantage_batch: Adam steps and minibatch size per advantage phase.
      strategy_steps, strategy_batch: the same for the strategy network.
      final_strategy_steps: Adam steps of the strategy fit that ends a run (`lcjax.run`: at
        `max_iterations`, `max_minutes` or a Ctrl-C), so that the run's last checkpoint holds
        a network fitted this long on its final reservoir (0 = strategy_steps, and the run
        refits only when it stops between two scheduled phases). Needs fresh strategy
        networks (`strategy_warm_start: false`): a fit that ends a run then changes nothing
        a resumed run computes. Only the last network is read by `lcjax evaluate`, so a
        longer fit there costs seconds once, where longer scheduled phases cost them every
        `strategy_train_every` iterations.
      learning_rate: Adam learning rate.
      grad_clip: global gradient-norm clip (0 = none).
      warm_start: continue the advantage networks from the last iteration instead of
        re-initializing them.
      strategy_loss: "cross_entropy" or "mse" (see `strategy_loss`).
      strategy_train_every: train the strategy network every this many iterations (the
        reservoir holds all data, so a phase can come late without losing any).
      strategy_warm_start: each strategy phase continues the strategy network from its
        previous parameters; false: it starts from a fresh network, fitted to the whole
        reservoir in one phase (as Deep CFR's paper trains it, once, at the end). On Lost
        Cities a fresh fit of 3,000 steps plays the average far better than a network
        continued over 190 phases of 300 (docs/strength.md, "A fresh strategy network").
      strategy_learning_rate: the strategy network's Adam learning rate (0 = learning_rate).
      lr_schedule: "constant", or "cosine"/"linear": within every training phase the rate
        decays from `learning_rate` to 0 over the phase's steps (restarting each phase, also
        for networks that continue from their previous parameters), so each phase ends on a
        low-noise fit.
      advantage_weight_power, strategy_weight_power: a sample of iteration t weighs
        t ** power in its network's loss: 1 is Linear CFR, 0 weighs every iteration alike
        (vanilla CFR regrets, uniform average strategy), 2 favours recent iterations more
        (as DCFR's gamma = 2 does for the average strategy). The reservoirs store the weight.
      strategy_weight_delay: strategy samples of iterations t <= this are not stored, later
        ones weigh (t - delay) ** strategy_weight_power (CFR+'s averaging delay): the
        average strategy leaves out the first iterations' strategies, furthest from an
        equilibrium (0 = every iteration).
      regret_exponent: the current strategy plays each legal action with probability
        proportional to its positive predicted regret to this power (1 = regret matching;
        `lcjax.cfr.regret`: every exponent >= 1 is a no-regret rule of Hart and
        Mas-Colell's class, so CFR still converges). Used wherever the current strategies
        are read: traversals, value games and the "current" policy.
      draw_by_weight: draw the advantage and strategy minibatches with probability
        proportional to each sample's weight t ** power, every drawn sample weighing 1 in
        the loss (the same objective as uniform draws weighted in the loss, with less
        gradient noise per step; see `train_steps`).
      fast_compile: compile the phases with cheaper XLA CPU settings (LLVM -O1, classic
        fusion emitters): about a third less compile time on CPU, at some cost in speed for
        large networks; worth it for short runs. Ignored where this XLA lacks the options.
    """

    advantage_steps: int = setting(200, Int(1))
    advantage_batch: int = setting(512, Int(1))
    strategy_steps: int = setting(200, Int(1))
    strategy_batch: int = setting(512, Int(1))
    final_strategy_steps: int = setting(0, Int(0))
    learning_rate: float = setting(1e-3, Float(0.0, lo_open=True))
    grad_clip: float = setting(1.0, Float(0.0))
    warm_start: bool = setting(False, Bool())
    strategy_loss: str = setting("cross_entropy", Choice(STRATEGY_LOSSES))
    strategy_train_every: int = setting(1, Int(1))
    strategy_warm_start: bool = setting(True, Bool())
    strategy_learning_rate: float = setting(0.0, Float(0.0))
    lr_schedule: str = setting("constant", Choice(LR_SCHEDULES))
    advantage_weight_power: float = setting(1.0, Float(0.0, 4.0))
    strategy_weight_power: float = setting(1.0, Float(0.0, 4.0))
    strategy_weight_delay: int = setting(0, Int(0))
    regret_exponent: float = setting(1.0, Float(1.0, 4.0))
    draw_by_weight: bool = setting(False, Bool())
    fast_compile: bool = setting(False, Bool())

    def __post_init__(self):
        super().__post_init__()
        if self.final_strategy_steps and self.strategy_warm_start:
            # A continued network would carry the extra steps into the phases of a resumed
            # run, which then computes what the uninterrupted run did not.
            raise ConfigError(
                f"{self.final_strategy_steps} needs strategy_warm_start: false (a fit that ends a run "
                "must start from a fresh network), or 0",
                "final_strategy_steps",
            )

    @property
    def last_strategy_steps(self) -> int:
        """Adam steps of the strategy fit that ends a run (`final_strategy_steps`, or
        `strategy_steps` where it is 0)."""
        return self.final_strategy_steps or self.strategy_steps


class TrainMetrics(NamedTuple):
    """Summary of one `train_steps` call.

    Attributes:
      loss: float32 scalar, mean loss over the steps that were applied (finite ones),
        each measured on its minibatch before its update; NaN if no step was applied.
      final_loss: float32 scalar, loss of the last applied step; NaN if none was.
      nonfinite_steps: int32 scalar, steps skipped because the loss or a gradient was
        not finite.
      baseline_loss: float32 scalar, mean loss of a network that outputs zeros, on the same
        minibatches: the targets' power, so 1 - loss / baseline_loss is the fraction of
        it the network explains.
    """

    loss: Array
    final_loss: Array
    nonfinite_steps: Array
    baseline_loss: Array


def explained_fraction(metrics: TrainMetrics) -> float:
    """1 - loss / baseline_loss of a finished phase (host float): the share of the targets'
    power the network explains; NaN when the baseline is 0 (no targets)."""
    baseline = float(metrics.baseline_loss)
    return 1.0 - float(metrics.loss) / baseline if baseline > 0 else float("nan")


def make_optimizer(
    learning_rate: float | optax.Schedule, grad_clip: float | None
) -> optax.GradientTransformation:
    """Adam after clipping the gradient's global norm.

    Args:
      learning_rate: float, or an optax schedule of the step count.
      grad_clip: maximum global gradient norm; None or <= 0 disables clipping.

    Returns:
      optax.GradientTransformation: `clip_by_global_norm(grad_clip)` then `adam`.
    """
    adam = optax.adam(learning_rate)
    if grad_clip is None or grad_clip <= 0:
        return adam
    return optax.chain(optax.clip_by_global_norm(grad_clip), adam)


def _weighted_mean(per_sample: Array, weight: Array) -> Array:
    """sum_i w_i x_i / sum_i w_i, and 0 when the weights sum to 0 (e.g. empty reservoir).

    Args:
      per_sample: float32[B].
      weight: float32[B], non-negative.
    """
    total = jnp.sum(weight)
    return jnp.sum(weight * per_sample) / jnp.where(total > 0.0, total, 1.0)


def advantage_loss(apply_fn: ApplyFn, params: Params, batch: AdvantageSample) -> Array:
    """Linear-CFR weighted squared error over the legal actions.

    loss = sum_i t_i sum_a m_ia (pred_ia - regret_ia)^2 / sum_i t_i.

    Args:
      apply_fn: `apply_fn(params, x: f32[B, D]) -> f32[B, A]`.
      params: the network's parameters.
      batch: AdvantageSample with observation f32[B, D], mask bool[B, A], regret
        f32[B, A], iteration f32[B].

    Returns:
      float32 scalar.
    """
    pred = apply_fn(params, batch.observation).astype(jnp.float32)
    mask = batch.mask.astype(bool)
    # Sanitize the target before differencing: a NaN on an illegal action would otherwise
    # poison the gradient through the untaken branch of the `where`.
    target = jnp.where(mask, batch.regret.astype(jnp.float32), 0.0)
    error = jnp.where(mask, pred - target, 0.0)
    per_sample = jnp.sum(error * error, axis=-1)
    return _weighted_mean(per_sample, batch.iteration.astype(jnp.float32))


def _masked_log_softmax(logits: Array, mask: Array) -> Array:
    """float32[..., A]: log-probabilities over legal actions; finite filler on illegal ones.

    Args:
      logits: float32[..., A].
      mask: bool[..., A].
    """
    safe = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    shifted = safe - jax.lax.stop_gradient(jnp.max(safe, axis=-1, keepdims=True))
    total = jnp.sum(jnp.where(mask, jnp.exp(shifted), 0.0), axis=-1, keepdims=True)
    return shifted - jnp.log(jnp.where(total > 0.0, total, 1.0))


def strategy_loss(
    apply_fn: ApplyFn, params: Params, batch: StrategySample, kind: str = "cross_entropy"
) -> Array:
    """Linear-CFR weighted loss of the average-strategy network.

    The network outputs logits; its policy is the softmax over the legal actions.

    * "cross_entropy": sum_i t_i (-sum_a m_ia s_ia log p_ia) / sum_i t_i.
    * "mse": sum_i t_i sum_a m_ia (p_ia - s_ia)^2 / sum_i t_i.

    For a fixed use, bind `kind` once (`functools.partial(strategy_loss, kind="mse")`) and
    reuse that object, since the loss is a static argument of the jitted trainer.

    Args:
      apply_fn: `apply_fn(params, x: f32[B, D]) -> f32[B, A]` logits.
      params: the network's parameters.
      batch: StrategySample with observation f32[B, D], mask bool[B, A], strategy
        f32[B, A], iteration f32[B].
      kind: static, "cross_entropy" or "mse".

    Returns:
      float32 scalar.
    """
    logits = apply_fn(params, batch.observation).astype(jnp.float32)
    mask = batch.mask.astype(bool)
    target = jnp.where(mask, batch.strategy.astype(jnp.float32), 0.0)
    if kind == "cross_entropy":
        log_probs = _masked_log_softmax(logits, mask)
        per_sample = -jnp.sum(jnp.where(mask, target * log_probs, 0.0), axis=-1)
    elif kind == "mse":
        error = jnp.where(mask, masked_logits_to_probs(logits, mask) - target, 0.0)
        per_sample = jnp.sum(error * error, axis=-1)
    else:
        raise ValueError(f"unknown strategy loss kind {kind!r}")
    return _weighted_mean(per_sample, batch.iteration.astype(jnp.float32))


def _all_finite(tree: Any) -> Array:
    """bool scalar: every element of every leaf of `tree` is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _select(pred: Array, on_true: Any, on_false: Any) -> Any:
    """Leafwise `where(pred, on_true, on_false)` for two pytrees of equal structure."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def train_steps(
    key: Array,
    params: Params,
    opt_state: optax.OptState,
    reservoir: Reservoir,
    *,
    apply_fn: ApplyFn,
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn,
    num_steps: int,
    batch_size: int,
    axis_name: str | None = None,
    draw_by_weight: bool = False,
) -> tuple[Params, optax.OptState, TrainMetrics]:
    """`num_steps` optimizer steps, each on a minibatch drawn from `reservoir`, in one scan.

    A step whose loss or any gradient is not finite is skipped: params and optimizer state
    stay as they were, and the step is counted in `nonfinite_steps`.

    Jit it once with everything after `*` static (or use `make_train_fn`); the static
    callables must be the same objects on every call to hit the jit cache.

    Args:
      key: PRNG key for the minibatch draws.
      params: pytree of the network's parameters.
      opt_state: `optimizer.init(params)` or a previous call's result.
      reservoir: samples in the format `loss_fn` expects (e.g. AdvantageSample).
      apply_fn: static, `apply_fn(params, x) -> f32[..., A]`.
      optimizer: static optax transformation (e.g. `make_optimizer`).
      loss_fn: static, `loss_fn(apply_fn, params, batch) -> f32 scalar`.
      num_steps: static int >= 1.
      batch_size: static int, minibatch size.
      axis_name: static; inside `shard_map` over this mesh axis (`lcjax.cfr.mesh`), the
        loss, gradients and baseline of each step are averaged over the axis before the
        update, so every device applies the same step to its replicated parameters.
      draw_by_weight: static; draw each minibatch item with probability proportional to its
        `iteration` weight and give every drawn item weight 1 in the loss, instead of
        drawing uniformly and weighting the loss. Both have the same expected loss (hence
        the same minimizer), but weighted draws spend no minibatch rows on items of little
        weight: with weights t ** 2 over t = 1..T a uniform minibatch of B rows is worth
        about 5B/9 rows, a weighted one B. Each item needs an `iteration` field.

    Returns:
      (params, opt_state, TrainMetrics).
    """

    def zeros_apply(p, x):  # a network that outputs zeros, for the baseline loss
        out = jax.eval_shape(apply_fn, p, x)
        return jnp.zeros(out.shape, jnp.float32)

    if draw_by_weight:
        # The weights do not change within a phase: one running sum serves every step.
        cumulative = reservoir_cumulative_weights(reservoir, reservoir.data.iteration)

    def draw(step_key):
        if not draw_by_weight:
            return reservoir_sample(step_key, reservoir, batch_size)
        batch = reservoir_sample_weighted(step_key, reservoir, cumulative, batch_size)
        # Drawn items weigh 1; zero-weight items are only drawn when all are (e.g. an empty
        # reservoir), and keep their weight 0 as they do under uniform draws.
        return batch._replace(iteration=jnp.where(batch.iteration > 0, 1.0, 0.0).astype(batch.iteration.dtype))

    def step(carry, step_key):
        params, opt_state = carry
        batch = draw(step_key)
        baseline = loss_fn(zeros_apply, params, batch)
        loss, grads = jax.value_and_grad(lambda p: loss_fn(apply_fn, p, batch))(params)
        if axis_name is not None:
            loss, grads, baseline = jax.lax.pmean((loss, grads, baseline), axis_name)
        finite = jnp.isfinite(loss) & _all_finite(grads)
        updates, new_opt_state = optimizer.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        # Select rather than branch: both sides are computed anyway and `where` keeps the
        # scan body a single straight-line program.
        params = _select(finite, new_params, params)
        opt_state = _select(finite, new_opt_state, opt_state)
        return (params, opt_state), (loss.astype(jnp.float32), finite, baseline.astype(jnp.float32))

    keys = jax.random.split(key, num_steps)
    (params, opt_state), (losses, finite, baselines) = jax.lax.scan(step, (params, opt_state), keys)
    num_finite = jnp.sum(finite.astype(jnp.int32))
    # 0/0 = NaN when no step was applied, which is what TrainMetrics documents.
    mean_loss = jnp.sum(jnp.where(finite, losses, 0.0)) / num_finite.astype(jnp.float32)
    last = num_steps - 1 - jnp.argmax(finite[::-1])
    final_loss = jnp.where(num_finite > 0, losses[last], jnp.nan)
    metrics = TrainMetrics(
        loss=mean_loss,
        final_loss=final_loss.astype(jnp.float32),
        nonfinite_steps=(num_steps - num_finite).astype(jnp.int32),
        baseline_loss=jnp.sum(jnp.where(finite, baselines, 0.0)) / num_finite.astype(jnp.float32),
    )
    return params, opt_state, metrics


def make_train_fn(
    *,
    apply_fn: ApplyFn,
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn,
    num_steps: int,
    batch_size: int,
    draw_by_weight: bool = False,
    donate: bool = False,
) -> Callable[..., tuple[Params, optax.OptState, TrainMetrics]]:
    """`train_steps` with its static arguments bound, jitted once.

    Args:
      apply_fn, optimizer, loss_fn, num_steps, batch_size, draw_by_weight: as in
        `train_steps`.
      donate: donate params and opt_state to the call (saves device memory; the passed
        arrays must not be used afterwards).

    Returns:
      jitted `train(key, params, opt_state, reservoir) -> (params, opt_state, metrics)`;
      it compiles once per input shape and never retraces for new values.
    """
    fn = functools.partial(
        train_steps,
        apply_fn=apply_fn,
        optimizer=optimizer,
        loss_fn=loss_fn,
        num_steps=num_steps,
        batch_size=batch_size,
        draw_by_weight=draw_by_weight,
    )
    return jax.jit(fn, donate_argnums=(1, 2) if donate else ())


def value_loss(apply_fn: ApplyFn, params: Params, batch: ValueSample) -> Array:
    """Mean squared error of the history value Q(h, a) of the action taken.

    loss = mean_i (sum_a action_ia Q_ia - target_i)^2: each item is one realized return,
    so Q regresses on the expected return of each (history, action).

    Args:
      apply_fn: `apply_fn(params, x: f32[B, H]) -> f32[B, A]`.
      params: Q's parameters.
      batch: ValueSample with history f32[B, H], action bool[B, A], target f32[B].

    Returns:
      float32 scalar.
    """
    q = apply_fn(params, batch.history).astype(jnp.float32)
    taken = jnp.sum(jnp.where(batch.action.astype(bool), q, 0.0), axis=-1)
    error = taken - batch.target.astype(jnp.float32)
    return jnp.mean(error * error)


def phase_schedule(learning_rate: float, kind: str, num_steps: int):
    """The learning rate as a function of the optimizer's update count (see `OptimizationConfig.lr_schedule`).

    A phase applies `num_steps` updates, so `count % num_steps` is the position within the
    current phase whether the optimizer state is fresh or continued.
    """
    if kind == "constant":
        return learning_rate

    def schedule(count):
        frac = (count % num_steps).astype(jnp.float32) / num_steps
        if kind == "cosine":
            return learning_rate * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))
        return learning_rate * (1.0 - frac)

    return schedule


_FAST_COMPILE = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}


@functools.lru_cache(maxsize=None)
def fast_compile_options() -> dict[str, Any] | None:
    """XLA options for shorter compiles on CPU (LLVM -O1, classic fusion emitters), where the
    default backend is a CPU that accepts them, else None (`optimization.fast_compile`)."""
    if jax.default_backend() != "cpu":
        return None
    try:
        jax.jit(lambda x: x + 1, compiler_options=_FAST_COMPILE).lower(jnp.float32(0)).compile()
    except Exception:  # an XLA without these options: compile as usual
        return None
    return dict(_FAST_COMPILE)
