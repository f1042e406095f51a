"""Selecting a traversal scheme and the traverser's sampling policy from the settings."""

from __future__ import annotations

from lcjax.cfr.traversal.external import external_sampling
from lcjax.cfr.traversal.probe import probe_sampling
from lcjax.cfr.traversal.trajectory import SamplingPolicy
from lcjax.cfr.traversal.value import value_sampling
from lcjax.env.registry import info_of
from lcjax.settings import ConfigError


def sampling_policy(game, t) -> SamplingPolicy:
    """The traverser's fixed sampling policy: uniform, or mixed with `t.sampling_bot`."""
    if t.sampling_bot is None:
        return SamplingPolicy()
    try:
        act = info_of(game).make_bot(t.sampling_bot, game)
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err), "traversal.sampling_bot") from None
    return SamplingPolicy(act, t.sampling_bot_weight)


def traversal_fn(game, apply_fn, t, value_apply=None):
    """`traverse(params, value_params, player, iteration, key) -> TraversalResult` of
    `t.traversal_batch` traversals with the scheme `t.scheme`.

    Args:
      game: the game (static).
      apply_fn: the advantage networks' apply (static).
      t: the `traversal` settings (lcjax.cfr.solver_config.TraversalConfig).
      value_apply: the history-value network's apply; needed by "value" only, which also
        reads `value_params` (the other schemes ignore it).
    """
    b = t.traversal_batch
    if t.scheme == "external":
        return lambda params, value_params, player, it, key: external_sampling(game, apply_fn, t.external, params, player, it, key, b)
    sampling = sampling_policy(game, t)
    for setting, method in t.value.game_methods_needed() if t.scheme == "value" else ():
        if not hasattr(game, method):
            raise ConfigError(f"needs a game with {method}, got {type(game).__name__}", f"traversal.value.{setting}")
    if t.scheme == "probe":
        return lambda params, value_params, player, it, key: probe_sampling(
            game, apply_fn, t.probe, params, player, it, key, b, sampling=sampling
        )
    return lambda params, value_params, player, it, key: value_sampling(
        game, apply_fn, t.value, params, player, it, key, b,
        value_apply=value_apply, value_params=value_params, sampling=sampling,
    )
