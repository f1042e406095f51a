"""Settings of the two traversal schemes (`traversal.external` and `traversal.probe`).

Each scheme reads only its own section; `lcjax.cfr.solver_config.TraversalConfig` holds both
and chooses one with `scheme`.
"""

from __future__ import annotations

import dataclasses

from lcjax.settings import Float, Int, Settings, setting


@dataclasses.dataclass(frozen=True)
class ExternalConfig(Settings):
    """Sizes of the external-sampling traversal (`traversal.external`).

    Attributes:
      max_depth: stack frames per traversal: 1 + the most traverser decisions on a path.
      max_advantage: advantage samples kept per traversal (one per traverser node).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      node_budget: stop a traversal after this many visited states (0 = no budget).
    """

    max_depth: int = setting(16, Int(1))
    max_advantage: int = setting(64, Int(1))
    max_strategy: int = setting(64, Int(1))
    node_budget: int = setting(0, Int(0))


@dataclasses.dataclass(frozen=True)
class ProbeConfig(Settings):
    """Sizes of the probe traversal (`traversal.probe`).

    Attributes:
      branch_probability: chance that a traverser node on the main trajectory is probed.
      max_probes: probed nodes kept per traversal (further ones are dropped and counted).
      max_strategy: strategy samples kept per traversal (one per opponent node).
      max_steps: bound on the main trajectory's and each rollout's length (a game longer
        than this is cut short and counted as truncated).
      rollout_batch: lanes of the loops (the trajectories, and separately the rollouts,
        advanced together; a lane that finishes its trajectory or rollout takes the next
        one). 0 = 2048 (or fewer when there are fewer trajectories or rollouts).
    """

    branch_probability: float = setting(0.2, Float(0.0, 1.0, lo_open=True))
    max_probes: int = setting(8, Int(1))
    max_strategy: int = setting(64, Int(1))
    max_steps: int = setting(512, Int(1))
    rollout_batch: int = setting(0, Int(0))
