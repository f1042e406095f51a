"""The multilayer perceptron used for Deep CFR's advantage and strategy networks.

Two interfaces:

* `MLP`, a Flax NNX module, for building and inspecting a network.
* A functional one for jitted code, where parameters travel as a plain pytree and the
  architecture is static: `make_network(spec, key) -> (graphdef, params)` builds a network,
  `make_apply(graphdef)` returns the pure `apply(params, x)` that callers pass around (e.g.
  as `apply_fn` to `lcjax.cfr.training`), and `init_params(spec, key)` re-initializes the
  parameters from scratch, also inside `jit` (Deep CFR retrains the advantage network from
  scratch every iteration).

`params` is a plain nested dict of float32 arrays (`nnx.to_pure_dict`), so it works with
optax, `jax.tree` utilities and checkpointing without any NNX types.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from lcjax.settings import Bool, Choice, Int, Settings, setting

Array = jax.Array
Params = Any

# Compute dtypes of the networks (their parameters stay float32).
PRECISIONS = ("float32", "bfloat16")

# The hidden layers' nonlinearity, by name. ReLU units can die: once a unit's input is
# negative on every state it sees, no gradient reaches it again, and a small warm-started
# network can lose every unit on some inputs, whose output is then frozen at the output
# bias (seen on Kuhn's history-value network, docs/strength.md "Kuhn: dead ReLUs"). SiLU
# and leaky ReLU pass a gradient everywhere.
ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "leaky_relu": functools.partial(jax.nn.leaky_relu, negative_slope=0.01),
}


@dataclasses.dataclass(frozen=True)
class NetworkConfig(Settings):
    """Architecture shared by the advantage and strategy networks (the `network` section).

    Attributes:
      hidden_size: width of every hidden layer.
      num_layers: number of hidden layers (0 gives a linear model).
      skip_connections: residual connections between hidden layers of equal width.
      layer_norm: LayerNorm on the last hidden features before the output layer.
      activation: the hidden layers' nonlinearity, one of `ACTIVATIONS` ("relu", "silu",
        "leaky_relu").
    """

    hidden_size: int = setting(64, Int(1))
    num_layers: int = setting(2, Int(0))
    skip_connections: bool = setting(False, Bool())
    layer_norm: bool = setting(False, Bool())
    activation: str = setting("relu", Choice(tuple(ACTIVATIONS)))


class MLP(nnx.Module):
    """`num_layers` hidden Dense layers with `activation` (ReLU by default), then a linear
    output layer.

    Parameters are always float32; the hidden layers compute in `dtype`. The optional
    LayerNorm (on the last hidden features, as the Deep CFR paper normalizes the input of
    its last layer) and the output layer compute in float32: both are small, and float32
    there keeps the regression targets' precision when `dtype` is bfloat16.
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        *,
        hidden_size: int = 512,
        num_layers: int = 3,
        skip_connections: bool = False,
        layer_norm: bool = False,
        activation: str = "relu",
        dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ):
        """Args:
        in_size: input features D.
        out_size: outputs A.
        hidden_size: width of every hidden layer.
        num_layers: number of hidden layers (>= 0; 0 gives a linear model).
        skip_connections: add each hidden layer's input to its output (residual), for
          every hidden layer after the first (they all have width hidden_size).
        layer_norm: LayerNorm on the last hidden features before the output layer.
        activation: the hidden layers' nonlinearity, a key of `ACTIVATIONS`.
        dtype: computation dtype of the hidden layers (float32 or bfloat16).
        rngs: NNX random streams for initialization.
        """
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        self.num_layers = num_layers
        self.skip_connections = skip_connections
        self.activation = activation
        self.dtype = jnp.dtype(dtype)
        width = in_size
        # Named attributes rather than an nnx.List so that parameter paths are all strings
        # ("hidden_0", ...), which checkpoint libraries round-trip reliably.
        for i in range(num_layers):
            layer = nnx.Linear(
                width, hidden_size, dtype=self.dtype, param_dtype=jnp.float32, rngs=rngs
            )
            setattr(self, f"hidden_{i}", layer)
            width = hidden_size
        self.norm = (
            nnx.LayerNorm(width, dtype=jnp.float32, param_dtype=jnp.float32, rngs=rngs)
            if layer_norm
            else None
        )
        self.output = nnx.Linear(
            width, out_size, dtype=jnp.float32, param_dtype=jnp.float32, rngs=rngs
        )

    def __call__(self, x: Array) -> Array:
        """Args:
          x: float[..., in_size], any float dtype.

        Returns:
          float32[..., out_size].
        """
        h = jnp.asarray(x).astype(self.dtype)
        for i in range(self.num_layers):
            z = ACTIVATIONS[self.activation](getattr(self, f"hidden_{i}")(h))
            # The first layer changes width, so residuals start at the second.
            h = h + z if (self.skip_connections and i > 0) else z
        h = h.astype(jnp.float32)
        if self.norm is not None:
            h = self.norm(h)
        return self.output(h).astype(jnp.float32)


class NetworkSpec(NamedTuple):
    """The static architecture of an MLP; hashable, so usable as a jit static argument.

    Attributes:
      in_size: input features D.
      out_size: outputs A.
      hidden_size: width of the hidden layers.
      num_layers: number of hidden layers.
      skip_connections: residual connections between hidden layers.
      layer_norm: LayerNorm before the output layer.
      dtype: computation dtype name, "float32" or "bfloat16" (a dtype object also works).
      activation: the hidden layers' nonlinearity, a key of `ACTIVATIONS`.
    """

    in_size: int
    out_size: int
    hidden_size: int = 512
    num_layers: int = 3
    skip_connections: bool = False
    layer_norm: bool = False
    dtype: Any = "float32"
    activation: str = "relu"


def network_spec(network: NetworkConfig, in_size: int, out_size: int, dtype: Any = "float32") -> NetworkSpec:
    """The NetworkSpec of a `network` config section for `in_size` inputs and `out_size`
    outputs, computing in `dtype`: the one place a section becomes an architecture."""
    return NetworkSpec(
        in_size=in_size,
        out_size=out_size,
        hidden_size=network.hidden_size,
        num_layers=network.num_layers,
        skip_connections=network.skip_connections,
        layer_norm=network.layer_norm,
        dtype=dtype,
        activation=network.activation,
    )


def build_mlp(spec: NetworkSpec, key: Array) -> MLP:
    """A freshly initialized `MLP` for `spec` with randomness from `key` (jittable)."""
    return MLP(
        spec.in_size,
        spec.out_size,
        hidden_size=spec.hidden_size,
        num_layers=spec.num_layers,
        skip_connections=spec.skip_connections,
        layer_norm=spec.layer_norm,
        activation=spec.activation,
        dtype=jnp.dtype(spec.dtype),
        rngs=nnx.Rngs(params=key),
    )


@functools.partial(jax.jit, static_argnums=0)
def init_params(spec: NetworkSpec, key: Array) -> Params:
    """Fresh parameters for `spec`: a nested dict of float32 arrays.

    Pure and jitted with `spec` static, so it runs as one compiled program eagerly and
    inlines into a surrounding `jit`: Deep CFR re-initializes the advantage network from
    scratch inside its jitted loop with `params = init_params(spec, key)`.

    Args:
      spec: the architecture (static, hashable).
      key: PRNG key.

    Returns:
      Nested dict (string keys) of float32 arrays; the structure `apply` expects.
    """
    _, state = nnx.split(build_mlp(spec, key))
    return nnx.to_pure_dict(state)


@functools.lru_cache(maxsize=None)
def network_graphdef(spec: NetworkSpec) -> nnx.GraphDef:
    """The static graph of `spec`'s network, built abstractly (no parameters allocated)."""
    abstract = nnx.eval_shape(lambda: build_mlp(spec, jax.random.key(0)))
    graphdef, _ = nnx.split(abstract)
    return graphdef


def make_network(spec: NetworkSpec, key: Array) -> tuple[nnx.GraphDef, Params]:
    """Build a network and split it into its static graph and its parameters.

    Args:
      spec: the architecture.
      key: PRNG key for initialization.

    Returns:
      (graphdef, params): graphdef is hashable and static (give it to `make_apply`);
      params is `init_params(spec, key)`, a nested dict of float32 arrays.
    """
    return network_graphdef(spec), init_params(spec, key)


def apply_network(graphdef: nnx.GraphDef, params: Params, x: Array) -> Array:
    """Run the network: merge the static graph with `params` and call it.

    Meant to run inside `jit` (the merge is then trace-time only); outside `jit` each call
    pays NNX's Python graph reconstruction.

    Args:
      graphdef: from `make_network`.
      params: nested dict of float32 arrays, the structure `make_network` returned.
      x: float[..., in_size].

    Returns:
      float32[..., out_size].
    """
    return nnx.merge(graphdef, params)(x)


# Stays (besides `make_solver`): scripts and tests jit `apply` as a static argument, which
# only hits the jit cache if equal architectures give the same function object.
@functools.lru_cache(maxsize=None)
def make_apply(graphdef: nnx.GraphDef) -> Callable[[Params, Array], Array]:
    """The pure function `apply(params, x) -> float32[..., out_size]` for `graphdef`.

    This is what callers pass around as `apply_fn`. It is cached per graphdef (graphdefs
    are hashable and equal for equal architectures), so calling `make_apply` twice returns
    the same function object and a jit that takes it as a static argument does not
    retrace.
    """
    return functools.partial(apply_network, graphdef)


def masked_logits_to_probs(logits: Array, mask: Array) -> Array:
    """Softmax over the legal actions only.

    Args:
      logits: float[..., A], any float dtype.
      mask: bool[..., A], True for legal actions; broadcastable against `logits`.

    Returns:
      float32[..., A]: probabilities summing to 1 over the legal actions, exactly 0 on
      illegal ones; a row with no legal action is all zeros (no NaN).
    """
    logits = jnp.asarray(logits, jnp.float32)
    mask = jnp.asarray(mask, bool)
    logits, mask = jnp.broadcast_arrays(logits, mask)
    # A finite stand-in for illegal logits keeps exp() and its gradient NaN-free, even on
    # rows with no legal action.
    safe = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    shifted = safe - jax.lax.stop_gradient(jnp.max(safe, axis=-1, keepdims=True))
    weights = jnp.where(mask, jnp.exp(shifted), 0.0)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    return weights / jnp.where(total > 0.0, total, 1.0)
