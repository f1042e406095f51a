"""Tests of the advantage/strategy losses and the scanned, on-device training loop.

Compilation dominates on CPU, so the training tests share two jitted trainers (one per
loss) with identical shapes, build reservoirs by filling `Reservoir.data` directly, and
initialize parameters on the host.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lcjax.cfr.memory import Reservoir, reservoir_init
from lcjax.cfr.networks import (
    NetworkSpec,
    init_params,
    make_apply,
    masked_logits_to_probs,
    network_graphdef,
)
from lcjax.cfr.training import (
    AdvantageSample,
    StrategySample,
    TrainMetrics,
    advantage_loss,
    make_optimizer,
    make_train_fn,
    strategy_loss,
)

D = A = 4
N = 256  # reservoir capacity, filled completely
NUM_STEPS = 300
BATCH = 64
SPEC = NetworkSpec(in_size=D, out_size=A, hidden_size=32, num_layers=2)
APPLY = make_apply(network_graphdef(SPEC))
OPTIMIZER = make_optimizer(1e-2, 1.0)

# Every trace of the advantage trainer calls the loss once per traced step body; the
# retrace test checks that this list stops growing.
LOSS_TRACES = []


def _counting_advantage_loss(apply_fn, params, batch):
    LOSS_TRACES.append(1)
    return advantage_loss(apply_fn, params, batch)


ADVANTAGE_TRAIN = make_train_fn(
    apply_fn=APPLY, optimizer=OPTIMIZER, loss_fn=_counting_advantage_loss,
    num_steps=NUM_STEPS, batch_size=BATCH,
)
STRATEGY_TRAIN = make_train_fn(
    apply_fn=APPLY, optimizer=OPTIMIZER, loss_fn=strategy_loss,
    num_steps=NUM_STEPS, batch_size=BATCH,
)
STRATEGY_TRAIN_BY_WEIGHT = make_train_fn(
    apply_fn=APPLY, optimizer=OPTIMIZER, loss_fn=strategy_loss,
    num_steps=NUM_STEPS, batch_size=BATCH, draw_by_weight=True,
)


def _host_params(seed):
    """Parameters of SPEC's structure, initialized with numpy (no compilation needed)."""
    rng = np.random.default_rng(seed)
    abstract = jax.eval_shape(init_params, SPEC, jax.random.key(0))

    def init(leaf):
        if len(leaf.shape) == 2:  # kernel: LeCun normal
            kernel = rng.normal(size=leaf.shape) / np.sqrt(leaf.shape[0])
            return jnp.asarray(kernel.astype(np.float32))
        return jnp.zeros(leaf.shape, leaf.dtype)

    return jax.tree.map(init, abstract)


def _full_reservoir(samples) -> Reservoir:
    """A reservoir holding exactly `samples` (leading axis N)."""
    example = jax.tree.map(lambda x: x[0], samples)
    return reservoir_init(N, example).replace(data=samples, size=jnp.int32(N), seen=jnp.int32(N))


@functools.cache
def _advantage_data():
    """Regrets that are a fixed smooth function of the observation, random legal masks."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(N, D)).astype(np.float32)
    weights = rng.normal(size=(D, A)).astype(np.float32)
    mask = rng.random((N, A)) < 0.7
    mask[:, 0] = True
    return AdvantageSample(
        observation=jnp.asarray(obs),
        mask=jnp.asarray(mask),
        regret=jnp.asarray(2.0 * np.tanh(obs @ weights)),
        iteration=jnp.asarray(rng.integers(1, 10, N).astype(np.float32)),
    )


_full_advantage_loss = jax.jit(functools.partial(advantage_loss, APPLY))


def _elementwise_apply(params, x):
    """A 'network' whose prediction is x * w, so losses can be computed by hand."""
    return x * params["w"]


# --- losses -------------------------------------------------------------------------


def test_advantage_loss_hand_computed_weighting_and_mask():
    params = {"w": jnp.float32(1.0)}
    batch = AdvantageSample(
        observation=jnp.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]]),
        mask=jnp.array([[True, True, False], [True, False, True]]),
        regret=jnp.array([[0.0, 2.0, 7.0], [2.0, 5.0, 0.0]]),
        iteration=jnp.array([1.0, 3.0]),
    )
    loss = jax.jit(functools.partial(advantage_loss, _elementwise_apply))
    # Sample 0: (1-0)^2 + (2-2)^2 = 1; sample 1: (0-2)^2 + (-1-0)^2 = 5.
    # Linear-CFR weights 1 and 3: (1*1 + 3*5) / 4 = 4.
    assert float(loss(params, batch)) == pytest.approx(4.0, rel=1e-6)
    # Weights only matter relatively.
    scaled = batch._replace(iteration=jnp.array([10.0, 30.0]))
    assert float(loss(params, scaled)) == pytest.approx(4.0, rel=1e-6)
    only_second = batch._replace(iteration=jnp.array([0.0, 3.0]))
    assert float(loss(params, only_second)) == pytest.approx(5.0, rel=1e-6)
    # All weights zero (e.g. an empty reservoir): 0, not NaN.
    assert float(loss(params, batch._replace(iteration=jnp.zeros(2)))) == 0.0

    # Targets on illegal actions do not affect the loss or its gradient, even NaN/huge.
    poisoned = batch._replace(regret=jnp.array([[0.0, 2.0, jnp.nan], [2.0, 1e30, 0.0]]))
    grad = jax.jit(jax.grad(functools.partial(advantage_loss, _elementwise_apply)))
    assert float(loss(params, poisoned)) == float(loss(params, batch))
    np.testing.assert_array_equal(grad(params, poisoned)["w"], grad(params, batch)["w"])
    assert np.isfinite(grad(params, poisoned)["w"])


def _reference_strategy_loss(logits, mask, target, weight, kind):
    logits = np.where(mask, logits, -np.inf)
    top = logits.max(-1, keepdims=True)
    logp = logits - top - np.log(np.sum(np.exp(logits - top), -1, keepdims=True))
    probs = np.where(mask, np.exp(logp), 0.0)
    if kind == "cross_entropy":
        per = -np.sum(np.where(mask, target * np.where(mask, logp, 0.0), 0.0), -1)
    else:
        per = np.sum(np.where(mask, (probs - target) ** 2, 0.0), -1)
    return np.sum(weight * per) / np.sum(weight)


@pytest.mark.parametrize("kind", ["cross_entropy", "mse"])
def test_strategy_loss_matches_reference(kind):
    params = {"w": jnp.float32(1.0)}
    logits = np.array([[0.5, -1.0, 2.0], [1.0, 1.0, 0.0], [3.0, 0.0, -2.0]], np.float32)
    mask = np.array([[True, True, False], [True, True, True], [False, True, True]])
    target = np.array([[0.3, 0.7, 0.0], [0.2, 0.2, 0.6], [0.0, 1.0, 0.0]], np.float32)
    weight = np.array([1.0, 2.0, 5.0], np.float32)
    batch = StrategySample(*(jnp.asarray(x) for x in (logits, mask, target, weight)))
    loss = jax.jit(functools.partial(strategy_loss, _elementwise_apply, kind=kind))
    expected = _reference_strategy_loss(logits.astype(np.float64), mask, target, weight, kind)
    assert float(loss(params, batch)) == pytest.approx(expected, rel=1e-5)
    # Illegal target entries are never read.
    poisoned = batch._replace(strategy=jnp.asarray(np.where(mask, target, np.nan)))
    assert float(loss(params, poisoned)) == pytest.approx(expected, rel=1e-5)


def test_strategy_loss_unknown_kind():
    batch = StrategySample(jnp.ones((1, 2)), jnp.ones((1, 2), bool), jnp.ones((1, 2)), jnp.ones(1))
    with pytest.raises(ValueError):
        strategy_loss(_elementwise_apply, {"w": jnp.float32(1.0)}, batch, kind="kl")


def test_make_optimizer_clips_then_adam():
    params = {"w": jnp.zeros(2)}
    grads = [{"w": jnp.array([300.0, 400.0])}, {"w": jnp.array([0.0, 1.0])}]

    def run(optimizer):
        @jax.jit
        def two_steps():
            state = optimizer.init(params)
            updates = []
            for g in grads:
                update, state = optimizer.update(g, state, params)
                updates.append(update["w"])
            return updates

        return [np.asarray(u) for u in two_steps()]

    reference = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1))
    for got, want in zip(run(make_optimizer(0.1, 1.0)), run(reference)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # Clipping matters on the second step (Adam alone would weigh the 500-norm step).
    assert not np.allclose(run(make_optimizer(0.1, 1.0))[1], run(optax.adam(0.1))[1])
    # grad_clip None disables clipping: plain Adam.
    for got, want in zip(run(make_optimizer(0.1, None)), run(optax.adam(0.1))):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# --- training -----------------------------------------------------------------------


def test_advantage_training_fits_fixed_targets():
    samples = _advantage_data()
    params = _host_params(1)
    before = float(_full_advantage_loss(params, samples))
    reservoir = _full_reservoir(samples)
    opt_state = OPTIMIZER.init(params)
    params, _, metrics = ADVANTAGE_TRAIN(jax.random.key(0), params, opt_state, reservoir)
    after = float(_full_advantage_loss(params, samples))
    assert isinstance(metrics, TrainMetrics)
    assert int(metrics.nonfinite_steps) == 0
    assert metrics.loss.dtype == jnp.float32 and np.isfinite(float(metrics.loss))
    # Targets are O(1): the initial loss is several units (about 8 here), the fit gets it
    # near zero (about 0.02 here).
    assert before > 2.0
    assert after < 0.05 and after < 0.01 * before
    assert float(metrics.final_loss) < float(metrics.loss)


def test_nonfinite_steps_are_skipped_and_counted():
    samples = _advantage_data()
    params = _host_params(2)
    opt_state = OPTIMIZER.init(params)
    # One poisoned item (NaN regret on a legal action): only the minibatches that draw it
    # are skipped, about 1 - (255/256)^64 = 22% of the steps.
    one_nan = samples._replace(regret=samples.regret.at[0, 0].set(jnp.nan))
    reservoir = _full_reservoir(one_nan)
    trained, _, metrics = ADVANTAGE_TRAIN(jax.random.key(1), params, opt_state, reservoir)
    assert 0 < int(metrics.nonfinite_steps) < NUM_STEPS
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(trained))
    assert np.isfinite(float(metrics.loss)) and np.isfinite(float(metrics.final_loss))

    # Every item poisoned: every step is skipped, nothing moves.
    all_nan = samples._replace(regret=jnp.full_like(samples.regret, jnp.nan))
    reservoir = _full_reservoir(all_nan)
    same, same_state, metrics = ADVANTAGE_TRAIN(jax.random.key(2), params, opt_state, reservoir)
    assert int(metrics.nonfinite_steps) == NUM_STEPS
    assert np.isnan(float(metrics.loss)) and np.isnan(float(metrics.final_loss))
    for a, b in zip(jax.tree.leaves((params, opt_state)), jax.tree.leaves((same, same_state))):
        np.testing.assert_array_equal(a, b)


def test_no_retrace_on_second_call():
    samples = _advantage_data()
    params = _host_params(3)
    ADVANTAGE_TRAIN(jax.random.key(3), params, OPTIMIZER.init(params), _full_reservoir(samples))
    traces = len(LOSS_TRACES)
    assert traces > 0
    # New parameter values, optimizer state, reservoir contents and key: no new trace.
    other = _host_params(4)
    shifted = samples._replace(regret=samples.regret + 1.0, iteration=samples.iteration * 2.0)
    ADVANTAGE_TRAIN(jax.random.key(4), other, OPTIMIZER.init(other), _full_reservoir(shifted))
    assert len(LOSS_TRACES) == traces



@pytest.mark.parametrize("draw_by_weight", [False, True])
def test_strategy_training_moves_towards_weighted_target(draw_by_weight):
    # One information state; half the samples played A at iteration 1, half played B at
    # iteration 3. The Linear-CFR average strategy is (1*A + 3*B) / 4, whether the
    # minibatches are uniform and weighted in the loss or drawn by weight.
    mask = np.array([True, True, False, True])
    target_a = np.array([0.6, 0.1, 0.0, 0.3], np.float32)
    target_b = np.array([0.2, 0.5, 0.0, 0.3], np.float32)
    even = (np.arange(N) % 2 == 0)[:, None]
    samples = StrategySample(
        observation=jnp.ones((N, D)),
        mask=jnp.asarray(np.tile(mask, (N, 1))),
        strategy=jnp.asarray(np.where(even, target_a, target_b)),
        iteration=jnp.asarray(np.where(even[:, 0], 1.0, 3.0).astype(np.float32)),
    )
    expected = (target_a + 3 * target_b) / 4
    params = _host_params(5)

    @jax.jit
    def policy(p):
        return masked_logits_to_probs(APPLY(p, jnp.ones((D,))), jnp.asarray(mask))

    before = np.asarray(policy(params))
    reservoir = _full_reservoir(samples)
    opt_state = OPTIMIZER.init(params)
    train = STRATEGY_TRAIN_BY_WEIGHT if draw_by_weight else STRATEGY_TRAIN
    params, _, metrics = train(jax.random.key(7), params, opt_state, reservoir)
    after = np.asarray(policy(params))
    assert int(metrics.nonfinite_steps) == 0
    assert after[2] == 0.0  # illegal action
    assert np.max(np.abs(after - expected)) < 0.03
    assert np.max(np.abs(after - expected)) < 0.5 * np.max(np.abs(before - expected))
