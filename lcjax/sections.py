"""The run's own settings sections of a run file (`lcjax.config`): run, rules, the run's
memory section, checkpoint and evaluation. The solver's sections (network, traversal,
optimization, memory) are declared in the lcjax.cfr modules that use them.
"""

from __future__ import annotations

import dataclasses

from lcjax.cfr.memory import MemoryConfig
from lcjax.cfr.networks import PRECISIONS
from lcjax.env.lost_cities import Rules
from lcjax.settings import Bool, Check, Choice, ConfigError, Float, Int, Settings, did_you_mean, setting, to_dict

RUN_PRECISIONS = (*PRECISIONS, "auto")
EVAL_POLICIES = ("average", "current")
# The read-offs of `lcjax.evaluate.READOUTS` (kept here too: this module must not import the
# evaluation, which imports the solver).
EVAL_READOUTS = ("average", "average_greedy", "current", "current_greedy")


# ---------------------------------------------------------------------------- checks
class _Name(Check):
    def describe(self) -> str:
        return "a non-empty string without '/' or '\\'"

    def __call__(self, value):
        if not isinstance(value, str) or not value.strip() or "/" in value or "\\" in value or value in (".", ".."):
            raise self.fail(value)
        return value


class _NameList(Check):
    """A list of names from `options()` (or a comma-separated string), none listed twice.

    Args:
      kind: what a name is, for messages ("bot", "read-off").
      options: () -> the allowed names (called when checking, so that the bots' module is
        imported only then).
      allowed: how the message introduces them ("allowed bots", "allowed").
    """

    def __init__(self, kind: str, options, allowed: str):
        self.kind, self.options, self.allowed = kind, options, allowed

    def describe(self) -> str:
        return "a list of bot names" if self.kind == "bot" else f"a list of {self.kind}s from: {', '.join(self.options())}"

    def __call__(self, value):
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if value is None:
            value = []
        if not isinstance(value, (list, tuple)):
            raise self.fail(value)
        options = self.options()
        seen: list[str] = []
        for name in value:
            if not isinstance(name, str) or name not in options:
                hint = did_you_mean(name, options) if isinstance(name, str) else ""
                raise ConfigError(f"unknown {self.kind} {name!r}{hint}; {self.allowed}: {', '.join(options)}")
            if name in seen:
                raise ConfigError(f"{self.kind} {name!r} is listed twice in {list(value)!r}")
            seen.append(name)
        return tuple(seen)


def _bot_names() -> tuple[str, ...]:
    from lcjax.env.bots import BOT_NAMES

    return BOT_NAMES


_BOTS = _NameList("bot", _bot_names, "allowed bots")
_READOUTS = _NameList("read-off", lambda: EVAL_READOUTS, "allowed")


# ---------------------------------------------------------------------------- sections
@dataclasses.dataclass(frozen=True)
class RunConfig(Settings):
    """How long and under what name a run goes.

    Attributes:
      name: run name (e.g. of its output folder); defaults to the config file's stem.
      seed: seed of the run's PRNG key.
      max_iterations: stop after this many Deep CFR iterations.
      max_minutes: also stop after this many minutes of wall-clock time (None = no limit).
      precision: network compute dtype: "float32", "bfloat16", or "auto" (bfloat16 on
        GPU/TPU, float32 on CPU; see `resolve_precision`).
    """

    name: str = setting("run", _Name())
    seed: int = setting(0, Int(0))
    max_iterations: int = setting(100, Int(1))
    max_minutes: float | None = setting(None, Float(0.0, lo_open=True, nullable=True))
    precision: str = setting("auto", Choice(RUN_PRECISIONS))


_RULES = Rules()


@dataclasses.dataclass(frozen=True)
class RulesConfig(Settings):
    """The Lost Cities `Rules` (see `lcjax.env.lost_cities.Rules`); defaults: the classic game."""

    n_colors: int = setting(_RULES.n_colors, Int(1, 6))
    n_ranks: int = setting(_RULES.n_ranks, Int(1))
    min_rank: int = setting(_RULES.min_rank, Int(0))
    n_wagers: int = setting(_RULES.n_wagers, Int(0))
    hand_size: int = setting(_RULES.hand_size, Int(1))
    expedition_cost: int = setting(_RULES.expedition_cost, Int(0))
    bonus_threshold: int = setting(_RULES.bonus_threshold, Int(1))
    bonus: int = setting(_RULES.bonus, Int(0))
    max_turns: int = setting(_RULES.max_turns, Int(1))

    def __post_init__(self):
        super().__post_init__()
        try:
            self.to_rules()
        except ValueError as err:
            # Every field is in range here, so what Rules rejects is hand_size against the deck.
            raise ConfigError(str(err), "hand_size") from None

    def to_rules(self) -> Rules:
        """The `lcjax.env.lost_cities.Rules` of these settings."""
        return Rules(**to_dict(self))


@dataclasses.dataclass(frozen=True)
class RunMemoryConfig(MemoryConfig):
    """The solver's `MemoryConfig`, plus save_in_checkpoint: whether checkpoints include the
    reservoirs (needed for an exact resume; they dominate a checkpoint's size)."""

    save_in_checkpoint: bool = setting(True, Bool())


@dataclasses.dataclass(frozen=True)
class CheckpointConfig(Settings):
    """save_every: iterations between checkpoints; keep: how many recent ones to keep."""

    save_every: int = setting(10, Int(1))
    keep: int = setting(3, Int(1))


@dataclasses.dataclass(frozen=True)
class EvaluationConfig(Settings):
    """What to measure and how often.

    Lost Cities: every `eval_every` iterations (0 = never) `policy` plays `games` games
    against each bot of `opponents` (`eval/...` keys), and so does every read-off of
    `readouts` (`readout/<readout>/...`; the one equal to `policy` is not played twice);
    every `extended_every` iterations (0 = never) `policy` also plays `extended_games`
    against each of `extended_opponents`. With `diagnostic_states` > 0, each evaluation also
    logs the probe diagnostics of `lcjax.diagnostics` (`diag/...`) on that many fixed states
    with `diagnostic_redeals` re-deals each. Kuhn/Leduc: exact exploitability of `policy`
    and of each read-off every `eval_every` iterations; the other fields are ignored.
    """

    eval_every: int = setting(10, Int(0))
    games: int = setting(1000, Int(1))
    opponents: tuple[str, ...] = setting(("random",), _BOTS)
    policy: str = setting("average", Choice(EVAL_POLICIES))
    readouts: tuple[str, ...] = setting(("average", "average_greedy", "current"), _READOUTS)
    diagnostic_states: int = setting(64, Int(0))
    diagnostic_redeals: int = setting(32, Int(1))
    extended_opponents: tuple[str, ...] = setting((), _BOTS)
    extended_every: int = setting(0, Int(0))
    extended_games: int = setting(1000, Int(1))


class _Devices(Check):
    """"all", or a positive number of devices."""

    def describe(self) -> str:
        return "all or a positive integer"

    def __call__(self, value):
        if value == "all":
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(value)
        return int(value)


class _OptionalInt(Int):
    """An integer >= lo, or null."""

    def describe(self) -> str:
        return super().describe() + " or null"

    def __call__(self, value):
        return None if value is None else super().__call__(value)


class _Address(Check):
    """A coordinator address "host:port", or null."""

    def describe(self) -> str:
        return "host:port (e.g. 10.0.0.1:1234) or null"

    def __call__(self, value):
        if value is None:
            return None
        host, _, port = str(value).rpartition(":") if isinstance(value, str) else ("", "", "")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise self.fail(value)
        return value


@dataclasses.dataclass(frozen=True)
class DistributedConfig(Settings):
    """The devices and processes a run uses (see `lcjax.distributed`).

    Attributes:
      devices: "all" devices the run's processes see, or that many (a multi-process run
        takes devices / num_processes from each process). One device runs the plain
        single-device program; more run the data-parallel one of `lcjax.cfr.mesh`.
      coordinator_address: "host:port" of process 0, for a run of several processes; null
        = the environment's JAX_COORDINATOR_ADDRESS, or a single process.
      num_processes: processes of the run; null = JAX_NUM_PROCESSES, or 1.
      process_id: this process's index in 0..num_processes - 1; null = JAX_PROCESS_ID.
      initialization_timeout: seconds to wait for every process to reach the coordinator.
    """

    devices: int | str = setting("all", _Devices())
    coordinator_address: str | None = setting(None, _Address())
    num_processes: int | None = setting(None, _OptionalInt(1))
    process_id: int | None = setting(None, _OptionalInt(0))
    initialization_timeout: int = setting(300, Int(1))

    def __post_init__(self):
        super().__post_init__()
        if self.process_id is not None and self.num_processes is not None and self.process_id >= self.num_processes:
            raise ConfigError(
                f"expected an integer in 0..{self.num_processes - 1} (num_processes is {self.num_processes}), "
                f"got {self.process_id}",
                "process_id",
            )


__all__ = ["CheckpointConfig", "DistributedConfig", "EvaluationConfig", "RulesConfig", "RunConfig", "RunMemoryConfig"]
