"""`SolverConfig`: everything that shapes a Deep CFR run, as nested settings sections.

Each section is declared, with its defaults and checks, in the module that uses it:

  network       `lcjax.cfr.networks.NetworkConfig`: the MLPs' architecture.
  precision     the networks' compute dtype, "float32" or "bfloat16".
  traversal     `TraversalConfig` (below): which scheme, how many traversals, in what
                chunks, and each scheme's own section (`external`, `probe`).
  optimization  `lcjax.cfr.training.OptimizationConfig`: the training phases.
  memory        `lcjax.cfr.memory.MemoryConfig`: the reservoirs.

The names are those of the run file's sections (`lcjax.config`), so a key path such as
"traversal.probe.max_probes" means the same in a YAML file, in `--set` and here.
"""

from __future__ import annotations

import dataclasses
import math

from lcjax.cfr.memory import MemoryConfig
from lcjax.cfr.networks import PRECISIONS, NetworkConfig
from lcjax.cfr.training import OptimizationConfig
from lcjax.cfr.traversal import ExternalConfig, ProbeConfig, ValueConfig
from lcjax.settings import Check, Choice, ConfigError, Float, Int, Settings, nested_paths, section, setting

SCHEMES = ("external", "probe", "value")


class _OptionalName(Check):
    """A non-empty name, or null."""

    def describe(self) -> str:
        return "a name or null"

    def __call__(self, value):
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(value)
        return value.strip()


@dataclasses.dataclass(frozen=True)
class TraversalConfig(Settings):
    """Traversal scheme and sizes (the `traversal` section).

    Attributes:
      scheme: "external" (exhaustive over the traverser's actions), "probe" (one
        trajectory; at sampled traverser nodes every legal action is evaluated by a rollout)
        or "value" (one trajectory; every sampled traverser node's regrets are read off a
        learned history value, ESCHER).
      traversals_per_player: traversals per player per iteration (rounded up to whole
        chunks of `traversal_batch`).
      traversal_batch: traversals advanced together in one jitted call.
      external: the external scheme's sizes (read only when scheme is "external").
      probe: the probe scheme's sizes (read only when scheme is "probe").
      value: the value scheme's settings (read only when scheme is "value").
      sampling_bot: probe and value: the traverser's fixed sampling policy on the main
        trajectory mixes uniform play with this named scripted policy of the game (e.g.
        "safe_heuristic"); null = uniform only. It only decides where samples are taken:
        it is never played or evaluated, and no network learns to imitate it.
      sampling_bot_weight: the bot's share of that mixture, in [0, 1) (the uniform part
        keeps every legal action's probability positive).
    """

    scheme: str = setting("external", Choice(SCHEMES))
    traversals_per_player: int = setting(1024, Int(1))
    traversal_batch: int = setting(1024, Int(1))
    external: ExternalConfig = section(ExternalConfig)
    probe: ProbeConfig = section(ProbeConfig)
    value: ValueConfig = section(ValueConfig)
    sampling_bot: str | None = setting(None, _OptionalName())
    sampling_bot_weight: float = setting(0.5, Float(0.0, 0.99))

    def __post_init__(self):
        super().__post_init__()
        if self.value.traversal_prefix and self.sampling_bot is not None:
            # The value games' prefix plays uniform, the sampling policy without a bot.
            raise ConfigError(
                f"traversal.value.traversal_prefix needs sampling_bot: null (got {self.sampling_bot!r})",
                "sampling_bot",
            )

    @property
    def num_chunks(self) -> int:
        """Jitted traversal calls per player and iteration."""
        return math.ceil(self.traversals_per_player / self.traversal_batch)


# The schemes' keys sat directly in `traversal` before they had sections of their own.
TraversalConfig.MOVED = nested_paths(TraversalConfig)


@dataclasses.dataclass(frozen=True)
class SolverConfig(Settings):
    """Everything that shapes a Deep CFR run (hashable: it is static under `jit`).

    Attributes:
      network: NetworkConfig, shared by the advantage and strategy networks.
      precision: compute dtype of the networks, "float32" or "bfloat16".
      traversal: TraversalConfig.
      optimization: OptimizationConfig.
      memory: MemoryConfig.

    A section may also be given as a mapping of its keys: SolverConfig(network={"hidden_size": 32}).
    """

    network: NetworkConfig = section(NetworkConfig)
    precision: str = setting("float32", Choice(PRECISIONS))
    traversal: TraversalConfig = section(TraversalConfig)
    optimization: OptimizationConfig = section(OptimizationConfig)
    memory: MemoryConfig = section(MemoryConfig)


# SolverConfig was flat; an old field name given to `from_dict` names its new path.
SolverConfig.MOVED = nested_paths(SolverConfig)

__all__ = ["SCHEMES", "SolverConfig", "TraversalConfig"]
