"""Tests of the MLP and its functional interface.

Initializing a network compiles its random initializers, which is slow on CPU, so the
tests share one initialized SPEC network and get other architectures' parameter
structures from `jax.eval_shape` (no compilation).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lcjax.cfr.networks import (
    ACTIVATIONS,
    MLP,
    NetworkSpec,
    apply_network,
    init_params,
    make_apply,
    make_network,
    masked_logits_to_probs,
    network_graphdef,
)

SPEC = NetworkSpec(in_size=6, out_size=4, hidden_size=32, num_layers=3)
KEY = jax.random.key(0)


@functools.cache
def _network():
    return make_network(SPEC, KEY)


def _inputs(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


_NUMPY_ACTIVATIONS = {
    "relu": lambda z: np.maximum(z, 0.0),
    "silu": lambda z: z / (1.0 + np.exp(-z)),
    "leaky_relu": lambda z: np.where(z > 0, z, 0.01 * z),
}


def _reference_forward(params, x, spec):
    """The documented architecture in float64 numpy."""
    h = np.asarray(x, np.float64)
    for i in range(spec.num_layers):
        layer = params[f"hidden_{i}"]
        z = _NUMPY_ACTIVATIONS[spec.activation](h @ np.asarray(layer["kernel"]) + np.asarray(layer["bias"]))
        h = h + z if (spec.skip_connections and i > 0) else z
    if spec.layer_norm:
        mean = h.mean(-1, keepdims=True)
        var = h.var(-1, keepdims=True)
        h = (h - mean) / np.sqrt(var + 1e-6)
        h = h * np.asarray(params["norm"]["scale"]) + np.asarray(params["norm"]["bias"])
    return h @ np.asarray(params["output"]["kernel"]) + np.asarray(params["output"]["bias"])


def test_shapes_and_float32_params():
    graphdef, params = _network()
    apply = jax.jit(make_apply(graphdef))
    assert apply(params, _inputs((5, 6))).shape == (5, 4)
    out = apply(params, _inputs((2, 3, 6)))
    assert out.shape == (2, 3, 4) and out.dtype == jnp.float32
    # 3 hidden layers + output layer, kernel and bias each, in a plain string-keyed dict.
    assert sorted(params) == ["hidden_0", "hidden_1", "hidden_2", "output"]
    assert params["hidden_0"]["kernel"].shape == (6, 32)
    assert params["output"]["kernel"].shape == (32, 4)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(params))
    assert isinstance(nnx.merge(graphdef, params), MLP)
    reference = _reference_forward(params, _inputs((2, 3, 6)), SPEC)
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


def test_init_params_inside_jit_matches_make_network():
    _, params = _network()
    # Inside a surrounding jit, as the Deep CFR loop re-initializes its network.
    fresh = jax.jit(lambda k: init_params(SPEC, k))(KEY)
    assert jax.tree.structure(fresh) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(fresh)):
        np.testing.assert_array_equal(a, b)
    other = init_params(SPEC, jax.random.key(4))
    assert not np.array_equal(other["hidden_0"]["kernel"], params["hidden_0"]["kernel"])
    # The NNX module built directly has the same static graph.
    module = nnx.eval_shape(
        lambda: MLP(6, 4, hidden_size=32, num_layers=3, rngs=nnx.Rngs(params=KEY))
    )
    assert nnx.split(module)[0] == network_graphdef(SPEC)


def test_bfloat16_compute_keeps_float32_params_and_output():
    spec16 = SPEC._replace(dtype="bfloat16")
    # Parameters stay float32 whatever the compute dtype.
    abstract = jax.eval_shape(init_params, spec16, KEY)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(abstract))
    graphdef32, params = _network()
    graphdef16 = network_graphdef(spec16)
    assert jax.tree.structure(abstract) == jax.tree.structure(params)
    x = _inputs((64, 6))
    out32 = jax.jit(make_apply(graphdef32))(params, x)
    out16 = jax.jit(make_apply(graphdef16))(params, x)
    assert out16.dtype == jnp.float32
    assert not np.array_equal(out16, out32)  # bf16 really was used
    # bf16 keeps 8 mantissa bits (relative error ~4e-3 per rounding); three layers of
    # accumulated rounding stay well within 5% of the output scale.
    scale = float(jnp.max(jnp.abs(out32)))
    np.testing.assert_allclose(out16, out32, atol=0.05 * scale, rtol=0)


def test_jit_does_not_retrace_for_new_param_values():
    graphdef, params = _network()
    assert make_apply(graphdef) is make_apply(graphdef)  # cached: stable static argument
    traces = []

    @jax.jit
    def run(params, x):
        traces.append(1)
        return make_apply(graphdef)(params, x)

    x = _inputs((3, 6))
    first = run(params, x)
    second = run(jax.tree.map(lambda p: 2.0 * p, params), x)
    third = run(jax.tree.map(lambda p: p + 0.1, params), x)
    assert len(traces) == 1
    assert not np.allclose(first, second) and not np.allclose(first, third)


def test_skip_connections_and_layer_norm_variants():
    _, params = _network()
    rng = np.random.default_rng(1)
    # Non-trivial LayerNorm parameters, so that the test sees them used.
    norm = {
        "scale": jnp.asarray(rng.uniform(0.5, 1.5, 32).astype(np.float32)),
        "bias": jnp.asarray(rng.normal(size=32).astype(np.float32)),
    }
    x = _inputs((7, 6), seed=2)
    outputs = {}
    for skip in (False, True):
        for layer_norm in (False, True):
            spec = SPEC._replace(skip_connections=skip, layer_norm=layer_norm)
            variant = dict(params, norm=norm) if layer_norm else params
            abstract = jax.eval_shape(init_params, spec, KEY)
            assert jax.tree.structure(abstract) == jax.tree.structure(variant)
            out = jax.jit(make_apply(network_graphdef(spec)))(variant, x)
            assert out.shape == (7, 4) and out.dtype == jnp.float32
            reference = _reference_forward(variant, x, spec)
            np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-5)
            outputs[skip, layer_norm] = np.asarray(out)
    # Same parameters, different wiring: outputs differ.
    assert not np.allclose(outputs[False, False], outputs[True, False])
    assert not np.allclose(outputs[False, False], outputs[False, True])


def test_activations_match_reference_and_differ():
    _, params = _network()
    x = _inputs((7, 6), seed=3)
    assert set(ACTIVATIONS) == set(_NUMPY_ACTIVATIONS)
    outputs = {}
    for name in ACTIVATIONS:
        spec = SPEC._replace(activation=name)
        out = jax.jit(make_apply(network_graphdef(spec)))(params, x)
        np.testing.assert_allclose(out, _reference_forward(params, x, spec), rtol=1e-4, atol=1e-5)
        outputs[name] = np.asarray(out)
    assert not np.allclose(outputs["relu"], outputs["silu"])
    assert not np.allclose(outputs["relu"], outputs["leaky_relu"])


def test_dead_relu_units_pass_no_gradient_unlike_silu_and_leaky_relu():
    """Every first-layer unit negative on the inputs: a ReLU network's hidden weights get no
    gradient (the units can never recover), SiLU and leaky ReLU ones do."""
    _, params = _network()
    dead = dict(params, hidden_0=dict(params["hidden_0"], bias=jnp.full((32,), -10.0)))
    x = _inputs((8, 6), seed=4)
    for name in ACTIVATIONS:
        apply = make_apply(network_graphdef(SPEC._replace(activation=name)))
        grads = jax.grad(lambda p: jnp.sum(apply(p, x) ** 2))(dead)
        hidden_norm = float(sum(jnp.abs(g).sum() for g in jax.tree.leaves(grads["hidden_0"])))
        assert (hidden_norm == 0.0) == (name == "relu"), (name, hidden_norm)


def test_unknown_activation_is_rejected():
    try:
        MLP(3, 2, activation="tanh", rngs=nnx.Rngs(params=KEY))
    except ValueError as err:
        assert "tanh" in str(err) and "silu" in str(err)
    else:
        raise AssertionError("MLP accepted activation='tanh'")


def test_zero_hidden_layers_is_linear():
    spec = NetworkSpec(in_size=3, out_size=2, num_layers=0)
    rng = np.random.default_rng(0)
    params = {
        "output": {
            "kernel": jnp.asarray(rng.normal(size=(3, 2)).astype(np.float32)),
            "bias": jnp.asarray(rng.normal(size=2).astype(np.float32)),
        }
    }
    assert jax.tree.structure(jax.eval_shape(init_params, spec, KEY)) == jax.tree.structure(params)
    x = _inputs((4, 3))
    out = jax.jit(functools.partial(apply_network, network_graphdef(spec)))(params, x)
    expected = x @ params["output"]["kernel"] + params["output"]["bias"]
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_masked_logits_to_probs():
    logits = jnp.array(
        [[0.0, np.log(3.0), 5.0], [1.0, 2.0, 3.0], [1e30, -1e30, 0.0], [1.0, 2.0, 3.0]], jnp.float32
    )
    mask = jnp.array([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0]], bool)
    probs = jax.jit(masked_logits_to_probs)(logits, mask)
    expected = [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    np.testing.assert_allclose(probs, expected, rtol=1e-6, atol=1e-7)
    assert probs.dtype == jnp.float32
    # Gradients stay finite, also for a row with no legal action.
    loss = lambda z: jnp.sum(masked_logits_to_probs(z, mask) ** 2)  # noqa: E731
    grads = jax.jit(jax.grad(loss))(logits)
    assert np.all(np.isfinite(grads))
    np.testing.assert_array_equal(grads[1], 0.0)
