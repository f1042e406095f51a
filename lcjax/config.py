"""Typed run configuration of a Deep CFR run, loaded from YAML with `--set` overrides.

    cfg = load_config("configs/deep_cfr/default.yaml", ["traversal.traversals_per_player=1024",
                                                       "evaluation.opponents=[random,safe_heuristic]"])
    solver = DeepCFR(make_game(cfg), solver_config(cfg))

A configuration file is a YAML mapping with the top-level key `game` and one mapping per
section; every section is a frozen dataclass, composed into `Config`:

  game          "lost_cities", "kuhn" or "leduc".
  run           RunConfig: name, seed, max_iterations, max_minutes, precision.
  rules         RulesConfig: the Lost Cities `Rules`. Only allowed when game is lost_cities:
                for kuhn/leduc the section must be absent, null or empty (`Config.rules` is
                None), so a poker run never carries rules that do nothing.
  network       NetworkConfig: hidden_size, num_layers, skip_connections, layer_norm.
  traversal     TraversalConfig: the traversal scheme and its buffer sizes.
  optimization  OptimizationConfig: the training phases.
  memory        MemoryConfig: reservoir sizes and storage.
  checkpoint    CheckpointConfig: save_every, keep.
  evaluation    EvaluationConfig: what to measure and how often. For kuhn/leduc evaluation
                is the exact exploitability of `policy` every `eval_every` iterations;
                `games`, `opponents`, `extended_opponents`, `extended_every` and
                `extended_games` are then ignored (bot names are still validated).

Missing keys and sections take the dataclass defaults (the solver's own defaults for
solver settings, the classic game for rules); `run.name` missing or null takes the file's
stem. The shipped files under configs/deep_cfr/ list every key.

Overrides are "section.key=value" (or "game=value"), the value parsed as YAML: numbers,
true/false, null and lists such as [random,safe_heuristic] work; a list field also takes a
comma-separated string ("random,safe_heuristic"). "section=null" resets a whole section to
its defaults (e.g. "game=kuhn" with "rules=null" on a Lost Cities file); "section={...}"
replaces it.

Cross-field rules: the Rules' own checks (e.g. hand_size against the deck); for Lost Cities,
eval_every > 0 needs at least one opponent and extended_every > 0 one extended opponent;
bot lists must not repeat a name; finally the SolverConfig is built once to apply its checks.

Floats may be written 1e-3 (YAML 1.1 would read that as a string; this loader does not).
Integers must be written as integers (1.5 and 2e6 are rejected), booleans as true/false.

Every problem raises `ConfigError` (a ValueError) with a one-line message that names the
key path, the offending value and what is allowed, prefixed with "<file>:<line>: " when the
key comes from a file, or "override '<text>': " when it comes from an override.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import yaml

GAMES = ("lost_cities", "kuhn", "leduc")
PRECISIONS = ("float32", "bfloat16", "auto")
STORAGE_DTYPES = ("float32", "bfloat16")
SCHEMES = ("external", "probe")
STRATEGY_LOSSES = ("cross_entropy", "mse")
LR_SCHEDULES = ("constant", "cosine", "linear")
EVAL_POLICIES = ("average", "current")
# Backends on which precision "auto" means bfloat16 (anything else: float32).
_ACCELERATOR_BACKENDS = ("gpu", "cuda", "rocm", "tpu")


class ConfigError(ValueError):
    """An invalid configuration; the message is one line naming the key path and the value.

    Attributes:
      key: the dotted key path at fault ("traversal.max_probes", "game"), or None when the
        problem is not tied to one key (missing file, YAML syntax, bad override syntax).
    """

    def __init__(self, message: str, key: str | None = None):
        super().__init__(" ".join(str(message).split()))
        self.key = key


# ---------------------------------------------------------------------------- value checks
class _Check:
    """Validates and normalizes one value; `describe()` says what is allowed."""

    def describe(self) -> str:
        raise NotImplementedError

    def __call__(self, path: str, value: Any) -> Any:
        raise NotImplementedError

    def fail(self, path: str, value: Any) -> ConfigError:
        return ConfigError(f"{path}: expected {self.describe()}, got {value!r}", path)


class _Int(_Check):
    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.lo, self.hi = lo, hi

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"an integer in {self.lo}..{self.hi}"
        if self.lo == 1:
            return "a positive integer"
        if self.lo == 0:
            return "an integer >= 0"
        if self.lo is not None:
            return f"an integer >= {self.lo}"
        return "an integer"

    def __call__(self, path, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise self.fail(path, value)
        return int(value)


class _Float(_Check):
    def __init__(self, lo: float | None = None, lo_open: bool = False, hi: float | None = None, nullable: bool = False):
        self.lo, self.lo_open, self.hi, self.nullable = lo, lo_open, hi, nullable

    def describe(self) -> str:
        if self.lo is not None and self.hi is not None:
            text = f"a number in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
        elif self.lo == 0 and self.lo_open:
            text = "a positive number"
        elif self.lo is not None:
            text = f"a number {'>' if self.lo_open else '>='} {self.lo:g}"
        else:
            text = "a finite number"
        return text + (" or null" if self.nullable else "")

    def __call__(self, path, value):
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, value)
        number = float(value)
        if not math.isfinite(number):
            raise self.fail(path, value)
        if self.lo is not None and (number <= self.lo if self.lo_open else number < self.lo):
            raise self.fail(path, value)
        if self.hi is not None and number > self.hi:
            raise self.fail(path, value)
        return number


class _Bool(_Check):
    def describe(self) -> str:
        return "true or false"

    def __call__(self, path, value):
        if not isinstance(value, bool):
            raise self.fail(path, value)
        return value


class _Choice(_Check):
    def __init__(self, options: Sequence[str]):
        self.options = tuple(options)

    def describe(self) -> str:
        return "one of " + ", ".join(self.options)

    def __call__(self, path, value):
        if not isinstance(value, str) or value not in self.options:
            hint = _did_you_mean(value, self.options) if isinstance(value, str) else ""
            raise ConfigError(f"{path}: expected {self.describe()}, got {value!r}{hint}", path)
        return value


class _Name(_Check):
    def describe(self) -> str:
        return "a non-empty string without '/' or '\\'"

    def __call__(self, path, value):
        if not isinstance(value, str) or not value.strip() or "/" in value or "\\" in value or value in (".", ".."):
            raise self.fail(path, value)
        return value


class _Bots(_Check):
    """A list of bot names from `lcjax.env.bots.BOT_NAMES` (or a comma-separated string)."""

    def describe(self) -> str:
        return "a list of bot names"

    def __call__(self, path, value):
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if value is None:
            value = []
        if not isinstance(value, (list, tuple)):
            raise self.fail(path, value)
        allowed = _bot_names()
        seen: list[str] = []
        for name in value:
            if not isinstance(name, str) or name not in allowed:
                hint = _did_you_mean(name, allowed) if isinstance(name, str) else ""
                raise ConfigError(
                    f"{path}: unknown bot {name!r}{hint}; allowed bots: {', '.join(allowed)}", path
                )
            if name in seen:
                raise ConfigError(f"{path}: bot {name!r} is listed twice in {list(value)!r}", path)
            seen.append(name)
        return tuple(seen)


def _bot_names() -> tuple[str, ...]:
    from lcjax.env.bots import BOT_NAMES

    return tuple(BOT_NAMES)


def _did_you_mean(word: Any, options: Iterable[str]) -> str:
    match = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _field(default: Any, check: _Check) -> Any:
    if isinstance(default, (list, tuple)):
        return dataclasses.field(default=tuple(default), metadata={"check": check})
    return dataclasses.field(default=default, metadata={"check": check})


_POSITIVE = _Int(1)
_NON_NEGATIVE = _Int(0)


# ---------------------------------------------------------------------------- sections
@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How long and under what name a run goes.

    Attributes:
      name: run name (e.g. of its output folder); defaults to the config file's stem.
      seed: seed of the run's PRNG key.
      max_iterations: stop after this many Deep CFR iterations.
      max_minutes: also stop after this many minutes of wall-clock time (None = no limit).
      precision: network compute dtype: "float32", "bfloat16", or "auto" (bfloat16 on
        GPU/TPU, float32 on CPU; see `resolve_precision`).
    """

    name: str = _field("run", _Name())
    seed: int = _field(0, _NON_NEGATIVE)
    max_iterations: int = _field(100, _POSITIVE)
    max_minutes: float | None = _field(None, _Float(0.0, lo_open=True, nullable=True))
    precision: str = _field("auto", _Choice(PRECISIONS))


@dataclasses.dataclass(frozen=True)
class RulesConfig:
    """The Lost Cities `Rules` (see `lcjax.env.lost_cities.Rules`); defaults: the classic game."""

    n_colors: int = _field(5, _Int(1, 6))
    n_ranks: int = _field(9, _POSITIVE)
    min_rank: int = _field(2, _NON_NEGATIVE)
    n_wagers: int = _field(3, _NON_NEGATIVE)
    hand_size: int = _field(8, _POSITIVE)
    expedition_cost: int = _field(20, _NON_NEGATIVE)
    bonus_threshold: int = _field(8, _POSITIVE)
    bonus: int = _field(20, _NON_NEGATIVE)
    max_turns: int = _field(200, _POSITIVE)

    def to_rules(self):
        """The `lcjax.env.lost_cities.Rules` of these settings."""
        from lcjax.env.lost_cities import Rules

        return Rules(**dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Architecture shared by the advantage and strategy networks."""

    hidden_size: int = _field(64, _POSITIVE)
    num_layers: int = _field(2, _NON_NEGATIVE)
    skip_connections: bool = _field(False, _Bool())
    layer_norm: bool = _field(False, _Bool())


@dataclasses.dataclass(frozen=True)
class TraversalConfig:
    """Traversal scheme and sizes (see `lcjax.cfr.solver.SolverConfig`).

    Probe-only: branch_probability, max_probes, max_steps, rollout_batch. External-only:
    max_depth, max_advantage, node_budget. Both: max_strategy.
    """

    scheme: str = _field("external", _Choice(SCHEMES))
    traversals_per_player: int = _field(1024, _POSITIVE)
    traversal_batch: int = _field(1024, _POSITIVE)
    branch_probability: float = _field(0.2, _Float(0.0, lo_open=True, hi=1.0))
    max_probes: int = _field(8, _POSITIVE)
    max_steps: int = _field(512, _POSITIVE)
    rollout_batch: int = _field(0, _NON_NEGATIVE)
    max_depth: int = _field(16, _POSITIVE)
    max_advantage: int = _field(64, _POSITIVE)
    max_strategy: int = _field(64, _POSITIVE)
    node_budget: int = _field(0, _NON_NEGATIVE)


@dataclasses.dataclass(frozen=True)
class OptimizationConfig:
    """The advantage and strategy training phases."""

    advantage_steps: int = _field(200, _POSITIVE)
    advantage_batch: int = _field(512, _POSITIVE)
    strategy_steps: int = _field(200, _POSITIVE)
    strategy_batch: int = _field(512, _POSITIVE)
    learning_rate: float = _field(1e-3, _Float(0.0, lo_open=True))
    grad_clip: float = _field(1.0, _Float(0.0))
    warm_start: bool = _field(False, _Bool())
    strategy_loss: str = _field("cross_entropy", _Choice(STRATEGY_LOSSES))
    strategy_train_every: int = _field(1, _POSITIVE)
    strategy_learning_rate: float = _field(0.0, _Float(0.0))
    lr_schedule: str = _field("constant", _Choice(LR_SCHEDULES))
    advantage_weight_power: float = _field(1.0, _Float(0.0, hi=4.0))
    strategy_weight_power: float = _field(1.0, _Float(0.0, hi=4.0))
    fast_compile: bool = _field(False, _Bool())


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    """Reservoirs.

    Attributes:
      advantage_capacity: items per player's advantage reservoir.
      strategy_capacity: items in the strategy reservoir.
      observation_storage: dtype observations are stored in, "float32" or "bfloat16".
      save_in_checkpoint: whether checkpoints include the reservoirs (needed for an exact
        resume; they dominate a checkpoint's size).
    """

    advantage_capacity: int = _field(1_000_000, _POSITIVE)
    strategy_capacity: int = _field(1_000_000, _POSITIVE)
    observation_storage: str = _field("float32", _Choice(STORAGE_DTYPES))
    save_in_checkpoint: bool = _field(True, _Bool())


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """save_every: iterations between checkpoints; keep: how many recent ones to keep."""

    save_every: int = _field(10, _POSITIVE)
    keep: int = _field(3, _POSITIVE)


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """What to measure and how often.

    Lost Cities: every `eval_every` iterations (0 = never) `policy` plays `games` games
    against each bot of `opponents`; every `extended_every` iterations (0 = never) also
    `extended_games` against each of `extended_opponents`. Kuhn/Leduc: exact exploitability
    of `policy` every `eval_every` iterations; the other fields are ignored.
    """

    eval_every: int = _field(10, _NON_NEGATIVE)
    games: int = _field(1000, _POSITIVE)
    opponents: tuple[str, ...] = _field(("random",), _Bots())
    policy: str = _field("average", _Choice(EVAL_POLICIES))
    extended_opponents: tuple[str, ...] = _field((), _Bots())
    extended_every: int = _field(0, _NON_NEGATIVE)
    extended_games: int = _field(1000, _POSITIVE)


@dataclasses.dataclass(frozen=True)
class Config:
    """A whole run configuration. `rules` is None unless game is "lost_cities".

    Build it with `load_config` / `config_from_dict`, which validate; the constructor does not.
    """

    game: str = "lost_cities"
    run: RunConfig = RunConfig()
    rules: RulesConfig | None = RulesConfig()
    network: NetworkConfig = NetworkConfig()
    traversal: TraversalConfig = TraversalConfig()
    optimization: OptimizationConfig = OptimizationConfig()
    memory: MemoryConfig = MemoryConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    evaluation: EvaluationConfig = EvaluationConfig()


SECTIONS: dict[str, type] = {
    "run": RunConfig,
    "rules": RulesConfig,
    "network": NetworkConfig,
    "traversal": TraversalConfig,
    "optimization": OptimizationConfig,
    "memory": MemoryConfig,
    "checkpoint": CheckpointConfig,
    "evaluation": EvaluationConfig,
}
_TOP_KEYS = ("game", *SECTIONS)

# SolverConfig field -> (section, key) it comes from.
SOLVER_FIELDS: dict[str, tuple[str, str]] = {
    **{k: ("network", k) for k in ("hidden_size", "num_layers", "skip_connections", "layer_norm")},
    **{f.name: ("traversal", f.name) for f in dataclasses.fields(TraversalConfig)},
    **{f.name: ("optimization", f.name) for f in dataclasses.fields(OptimizationConfig)},
    "advantage_capacity": ("memory", "advantage_capacity"),
    "strategy_capacity": ("memory", "strategy_capacity"),
    "observation_storage": ("memory", "observation_storage"),
    "precision": ("run", "precision"),
}


# ---------------------------------------------------------------------------- dict <-> Config
def _unknown_key(path: str, key: Any, valid: Sequence[str]) -> ConfigError:
    full = f"{path}.{key}" if path else str(key)
    hint = _did_you_mean(key, valid)
    return ConfigError(f"{full}: unknown {'key' if path else 'section'}{hint}; valid: {', '.join(valid)}", full)


def _build_section(cls: type, raw: Any, path: str, extra: dict[str, Any] | None = None):
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of keys, got {raw!r}", path)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields:
            raise _unknown_key(path, key, list(fields))
    kwargs = {**(extra or {})}
    for name, f in fields.items():
        if name in raw:
            kwargs[name] = f.metadata["check"](f"{path}.{name}", raw[name])
    return cls(**kwargs)


def config_from_dict(d: Any, *, default_name: str = "run") -> Config:
    """The `Config` of a plain dict (as loaded from YAML), validated.

    Args:
      d: {"game": ..., section: {key: value}}; missing keys take their defaults.
      default_name: `run.name` when the dict has none (or null).

    Raises:
      ConfigError: anything invalid; `.key` is the key path at fault.
    """
    if d is None:
        d = {}
    if not isinstance(d, dict):
        raise ConfigError(f"top level: expected a mapping of sections, got {d!r}")
    for key in d:
        if key not in _TOP_KEYS:
            raise _unknown_key("", key, _TOP_KEYS)
    game = _Choice(GAMES)("game", d.get("game", "lost_cities"))

    run_raw = d.get("run")
    extra = {}
    if run_raw is None or (isinstance(run_raw, dict) and run_raw.get("name") is None):
        run_raw = {k: v for k, v in (run_raw or {}).items() if k != "name"}
        extra["name"] = _Name()("run.name", default_name)
    run = _build_section(RunConfig, run_raw, "run", extra=extra)

    rules_raw = d.get("rules")
    if game == "lost_cities":
        rules = _build_section(RulesConfig, rules_raw, "rules")
        try:
            rules.to_rules()
        except ValueError as err:
            raise _reraise(err, "Rules", lambda f: f"rules.{f}", "rules") from None
    else:
        if rules_raw not in (None, {}):
            raise ConfigError(
                f"rules: only allowed when game is lost_cities, got game {game!r} "
                "(remove the rules section, or override rules=null)",
                "rules",
            )
        rules = None

    sections = {
        name: _build_section(cls, d.get(name), name) for name, cls in SECTIONS.items() if name not in ("run", "rules")
    }
    cfg = Config(game=game, run=run, rules=rules, **sections)

    ev = cfg.evaluation
    if game == "lost_cities":
        if ev.eval_every > 0 and not ev.opponents:
            raise ConfigError(
                "evaluation.opponents: expected at least one bot when evaluation.eval_every > 0, got []",
                "evaluation.opponents",
            )
        if ev.extended_every > 0 and not ev.extended_opponents:
            raise ConfigError(
                "evaluation.extended_opponents: expected at least one bot when evaluation.extended_every > 0, got []",
                "evaluation.extended_opponents",
            )
    # The solver's own validation, for anything it checks beyond the types and ranges above.
    _solver_config(cfg, "float32" if cfg.run.precision == "auto" else cfg.run.precision)
    return cfg


def _reraise(err: ValueError, prefix: str, to_path: Callable[[str], str], fallback: str) -> ConfigError:
    """A ConfigError from a `<prefix>.<field>` ValueError of Rules/SolverConfig."""
    text = str(err)
    m = re.search(rf"\b{prefix}\.(\w+)", text)
    path = to_path(m.group(1)) if m else fallback
    text = re.sub(rf"\b{prefix}\.(\w+)\s*", "", text, count=1).lstrip("=:, ")
    return ConfigError(f"{path}: {text}", path)


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """A plain, YAML-dumpable dict of `cfg`; `config_from_dict` of it gives `cfg` back.

    The `rules` section is omitted for kuhn/leduc; bot lists become lists.
    """
    out: dict[str, Any] = {"game": cfg.game}
    for name in SECTIONS:
        section = getattr(cfg, name)
        if section is None:
            continue
        values = {f.name: getattr(section, f.name) for f in dataclasses.fields(section)}
        out[name] = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
    return out


# ---------------------------------------------------------------------------- YAML
class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 1e-3 / 1E5 (no dot) as floats, as YAML 1.2 does."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """(data, {key path: 1-based line}) of a YAML document; duplicate keys are errors."""
    try:
        node = yaml.compose(text, Loader=_Loader)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    lines: dict[str, int] = {}

    def walk(n, prefix: str, depth: int):
        if not isinstance(n, yaml.MappingNode):
            return
        seen = set()
        for k, v in n.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
            path = f"{prefix}.{key}" if prefix else key
            if key in seen:
                raise ConfigError(f"{source}:{k.start_mark.line + 1}: {path}: duplicate key", path)
            seen.add(key)
            lines[path] = k.start_mark.line + 1
            if depth < 1:
                walk(v, path, depth + 1)

    walk(node, "", 0)
    return data, lines


def _parse_override(item: Any) -> tuple[list[str], Any]:
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"override {item!r}: expected section.key=value (e.g. traversal.max_probes=32)")
    key, text = item.split("=", 1)
    parts = [p.strip() for p in key.strip().split(".")]
    if not all(parts) or len(parts) > 2:
        raise ConfigError(
            f"override {item!r}: expected section.key=value (e.g. traversal.max_probes=32), got key {key.strip()!r}"
        )
    try:
        value = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"override {item!r}: value {text!r} is not valid YAML: {problem}") from None
    return parts, value


def apply_overrides_to_dict(d: dict[str, Any], overrides: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """A copy of the raw config dict `d` with `overrides` applied.

    Returns:
      (new dict, {key path: override text} of the keys each override set).

    Raises:
      ConfigError: bad syntax, unknown section or key, a value for a whole section that is
        not a mapping or null.
    """
    if isinstance(overrides, str):
        overrides = [overrides]
    d = copy.deepcopy(d) if d is not None else {}
    if not isinstance(d, dict):
        raise ConfigError(f"top level: expected a mapping of sections, got {d!r}")
    sources: dict[str, str] = {}
    for item in overrides:
        parts, value = _parse_override(item)
        top = parts[0]
        if top not in _TOP_KEYS:
            err = _unknown_key("", top, _TOP_KEYS)
            raise ConfigError(f"override {item!r}: {err}", err.key)
        if len(parts) == 1:
            if top != "game" and value is not None and not isinstance(value, dict):
                raise ConfigError(
                    f"override {item!r}: {top} is a section; set {top}.<key>=value, or {top}=null for its defaults", top
                )
            d[top] = value
            sources[top] = item
            continue
        if top == "game":
            raise ConfigError(f"override {item!r}: game is a value, not a section; use game=<name>", "game")
        section, key = parts
        fields = [f.name for f in dataclasses.fields(SECTIONS[section])]
        if key not in fields:
            err = _unknown_key(section, key, fields)
            raise ConfigError(f"override {item!r}: {err}", err.key)
        if not isinstance(d.get(section), dict):
            d[section] = {}
        d[section][key] = value
        sources[f"{section}.{key}"] = item
    return d, sources


def _locate(err: ConfigError, source: str, lines: dict[str, int], overridden: dict[str, str]) -> ConfigError:
    key = err.key
    if key is not None:
        for path in (key, key.split(".")[0]):
            if path in overridden:
                return ConfigError(f"override {overridden[path]!r}: {err}", key)
        for path in (key, key.split(".")[0]):
            if path in lines:
                return ConfigError(f"{source}:{lines[path]}: {err}", key)
    return ConfigError(f"{source}: {err}", key)


def load_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> Config:
    """The validated `Config` of the YAML file `path` with `overrides` applied.

    Args:
      path: a YAML file; its stem is `run.name` unless the file sets one.
      overrides: "section.key=value" strings, applied in order (see the module docstring).

    Raises:
      ConfigError: missing file, invalid YAML, or any invalid or unknown key or value.
    """
    p = Path(path)
    source = str(path)
    if not p.is_file():
        raise ConfigError(f"{source}: config file not found" if not p.exists() else f"{source}: not a file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{source}: cannot read config file: {err}") from None
    data, lines = _parse_yaml(text, source)
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{source}: top level: expected a mapping of sections, got {data!r}")
    data, overridden = apply_overrides_to_dict(data or {}, overrides)
    try:
        return config_from_dict(data, default_name=p.stem)
    except ConfigError as err:
        raise _locate(err, source, lines, overridden) from None


def apply_overrides(cfg: Config, overrides: Sequence[str]) -> Config:
    """`cfg` with "section.key=value" overrides applied (validated like `load_config`)."""
    data, overridden = apply_overrides_to_dict(config_to_dict(cfg), overrides)
    try:
        return config_from_dict(data, default_name=cfg.run.name)
    except ConfigError as err:
        raise _locate(err, "config", {}, overridden) from None


class _Dumper(yaml.SafeDumper):
    """Block-style sections, flow-style lists ([random, safe_heuristic])."""


_Dumper.add_representer(
    list, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)
)


def save_config(cfg: Config, path: str | os.PathLike) -> None:
    """Write `cfg` as YAML to `path` (atomically; parent folders are created).

    `load_config(path)` returns `cfg` again (the name is written out, so it survives a
    rename of the file).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.dump(config_to_dict(cfg), Dumper=_Dumper, sort_keys=False, default_flow_style=False)
    text = "# lcjax Deep CFR run configuration (written by lcjax.config.save_config)\n" + body
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------------- conversions
def resolve_precision(cfg: Config, backend: str | None = None) -> str:
    """The network dtype of `cfg` on `backend` ("cpu", "gpu", "tpu"; None = JAX's default).

    "auto" is "bfloat16" on GPU/TPU backends and "float32" elsewhere; an explicit
    "float32"/"bfloat16" is returned as is.
    """
    precision = cfg.run.precision
    if precision != "auto":
        return precision
    if backend is None:
        import jax

        backend = jax.default_backend()
    return "bfloat16" if str(backend).lower() in _ACCELERATOR_BACKENDS else "float32"


def _solver_config(cfg: Config, precision: str):
    from lcjax.cfr.solver import SolverConfig

    kwargs = {field: getattr(getattr(cfg, section), key) for field, (section, key) in SOLVER_FIELDS.items()}
    kwargs["precision"] = precision
    paths = {field: f"{section}.{key}" for field, (section, key) in SOLVER_FIELDS.items()}
    try:
        return SolverConfig(**kwargs)
    except ValueError as err:
        raise _reraise(err, "SolverConfig", lambda f: paths.get(f, f), "config") from None


def solver_config(cfg: Config, backend: str | None = None):
    """The `lcjax.cfr.solver.SolverConfig` of `cfg`, precision resolved for `backend`
    (None = JAX's default backend; see `resolve_precision`)."""
    return _solver_config(cfg, resolve_precision(cfg, backend))


def make_game(cfg: Config):
    """The game of `cfg`, built by the game registry (`lcjax.env.registry.make_game`)."""
    from lcjax.env import registry

    rules = dataclasses.asdict(cfg.rules) if cfg.rules is not None else {}
    try:
        return registry.make_game(cfg.game, **rules)
    except ValueError as err:
        raise ConfigError(f"game: {err}", "game") from None


__all__ = [
    "CheckpointConfig",
    "Config",
    "ConfigError",
    "EvaluationConfig",
    "GAMES",
    "MemoryConfig",
    "NetworkConfig",
    "OptimizationConfig",
    "RulesConfig",
    "RunConfig",
    "SECTIONS",
    "SOLVER_FIELDS",
    "TraversalConfig",
    "apply_overrides",
    "apply_overrides_to_dict",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "make_game",
    "resolve_precision",
    "save_config",
    "solver_config",
]
