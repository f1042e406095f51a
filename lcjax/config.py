"""Typed run configuration of a Deep CFR run, loaded from YAML with `--set` overrides.

    cfg = load_config("configs/deep_cfr/default.yaml", ["traversal.traversals_per_player=1024",
                                                       "traversal.probe.max_probes=32"])
    solver = DeepCFR(make_game(cfg), solver_config(cfg))

A configuration file is a YAML mapping with the top-level key `game` ("lost_cities", "kuhn"
or "leduc") and one mapping per section; every section is a frozen settings dataclass
(`lcjax.settings`) that validates itself, composed into `Config`. The solver's sections are
those of `SolverConfig`, each declared once in the module that uses it:

  run           RunConfig (lcjax.sections): name, seed, max_iterations, max_minutes, precision.
  rules         RulesConfig: the Lost Cities `Rules`; only for lost_cities (for kuhn/leduc
                absent, null or empty, and `Config.rules` is None).
  network       lcjax.cfr.networks.NetworkConfig.
  traversal     lcjax.cfr.solver_config.TraversalConfig, with subsections external, probe.
  optimization  lcjax.cfr.training.OptimizationConfig.
  memory        RunMemoryConfig: lcjax.cfr.memory.MemoryConfig plus save_in_checkpoint.
  checkpoint    CheckpointConfig: save_every, keep.
  evaluation    EvaluationConfig: bot matches (Lost Cities) or exact exploitability
                (kuhn/leduc, which ignore the bot lists but still validate them).
  distributed   DistributedConfig: devices, coordinator_address, num_processes,
                process_id, initialization_timeout (see lcjax.distributed).

A file may also hold `scheme_overrides`: per scheme, "section.key: value" pairs applied when
the file runs that scheme, over the shared sections and under `--set` overrides (see
`load_config`). Missing keys take the dataclass defaults; `run.name` missing or null takes
the file's stem.
The shipped files (`shipped_config`) list every key; kuhn.yaml and leduc.yaml are the tuned
small-game settings (`small_game_config`).

Overrides are "section.key=value", with nested keys as "traversal.probe.max_probes=32" (or
"game=value"), the value parsed as YAML: numbers, true/false, null and lists such as
[random,safe_heuristic] work; a list field also takes a comma-separated string. "section=null"
resets a section to its defaults (e.g. "game=kuhn" with "rules=null" on a Lost Cities file);
"section={...}" replaces it.

Cross-field rules: hand_size against the deck (Rules); for Lost Cities, eval_every > 0 needs
an opponent and extended_every > 0 an extended opponent. Floats may be written 1e-3 (this
loader reads them as YAML 1.2 does); integers must be integers (1.5 and 2e6 are rejected).

Every problem raises `ConfigError` (a ValueError) with a one-line message that names the
key path, the offending value and what is allowed, prefixed with "<file>:<line>: " when the
key comes from a file, or "override '<text>': " when it comes from an override. A key of an
older layout names its new place ("traversal.max_probes: moved to traversal.probe.max_probes").
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

import yaml

from lcjax.cfr.memory import MemoryConfig
from lcjax.cfr.networks import NetworkConfig
from lcjax.cfr.solver_config import SCHEMES, SolverConfig, TraversalConfig
from lcjax.cfr.training import OptimizationConfig
from lcjax.env import registry
from lcjax.sections import CheckpointConfig, DistributedConfig, EvaluationConfig, RulesConfig, RunConfig, RunMemoryConfig
from lcjax.settings import Choice, ConfigError, Settings, field_section, from_dict, keys, merge, to_dict, unknown_key

GAMES = registry.GAME_NAMES
SMALL_GAMES = ("kuhn", "leduc")
# Backends on which precision "auto" means bfloat16 (anything else: float32).
_ACCELERATOR_BACKENDS = ("gpu", "cuda", "rocm", "tpu")
SHIPPED_DIR = Path(__file__).resolve().with_name("configs")


@dataclasses.dataclass(frozen=True)
class Config:
    """A whole run configuration. `rules` is None unless game is "lost_cities".

    Build it with `load_config` / `config_from_dict`, which check the cross-field rules.
    """

    game: str = "lost_cities"
    run: RunConfig = RunConfig()
    rules: RulesConfig | None = RulesConfig()
    network: NetworkConfig = NetworkConfig()
    traversal: TraversalConfig = TraversalConfig()
    optimization: OptimizationConfig = OptimizationConfig()
    memory: RunMemoryConfig = RunMemoryConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    distributed: DistributedConfig = DistributedConfig()


SECTIONS: dict[str, type[Settings]] = {
    "run": RunConfig,
    "rules": RulesConfig,
    "network": NetworkConfig,
    "traversal": TraversalConfig,
    "optimization": OptimizationConfig,
    "memory": RunMemoryConfig,
    "checkpoint": CheckpointConfig,
    "evaluation": EvaluationConfig,
    "distributed": DistributedConfig,
}
_TOP_KEYS = ("game", *SECTIONS)
# A file's per-scheme settings (`load_config`); not a section of Config.
SCHEME_OVERRIDES = "scheme_overrides"


# ---------------------------------------------------------------------------- dict <-> Config
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
            raise unknown_key(key, _TOP_KEYS)
    try:
        game = Choice(GAMES)(d.get("game", "lost_cities"))
    except ConfigError as err:
        raise err.under("game") from None
    run_raw = d.get("run")
    if run_raw is None or (isinstance(run_raw, dict) and run_raw.get("name") is None):
        run_raw = {**(run_raw or {}), "name": default_name}
    sections = {"run": from_dict(RunConfig, run_raw, "run")}
    if game == "lost_cities":
        sections["rules"] = from_dict(RulesConfig, d.get("rules"), "rules")
    elif d.get("rules") not in (None, {}):
        raise ConfigError(
            f"only allowed when game is lost_cities, got game {game!r} "
            "(remove the rules section, or override rules=null)",
            "rules",
        )
    for name, cls in SECTIONS.items():
        if name not in ("run", "rules"):
            sections[name] = from_dict(cls, d.get(name), name)
    cfg = Config(game=game, rules=sections.pop("rules", None), **sections)
    for setting, method in cfg.traversal.value.game_methods_needed():
        if not hasattr(registry.game_info(game).game_type, method):
            with_it = [name for name in GAMES if hasattr(registry.game_info(name).game_type, method)]
            raise ConfigError(
                f"needs a game with {method} ({', '.join(with_it)}), got game {game!r}", f"traversal.value.{setting}"
            )
    if not registry.game_info(game).exact_evaluation:
        _check_bot_lists(cfg.evaluation)
    return cfg


def _check_bot_lists(ev: EvaluationConfig) -> None:
    """A game evaluated by bot matches needs a bot to play whenever a match is scheduled."""
    if ev.eval_every > 0 and not ev.opponents:
        raise ConfigError("expected at least one bot when evaluation.eval_every > 0, got []", "evaluation.opponents")
    if ev.extended_every > 0 and not ev.extended_opponents:
        raise ConfigError(
            "expected at least one bot when evaluation.extended_every > 0, got []", "evaluation.extended_opponents"
        )


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """A plain, YAML-dumpable dict of `cfg`; `config_from_dict` of it gives `cfg` back.

    The `rules` section is omitted for kuhn/leduc; bot lists become lists.
    """
    out: dict[str, Any] = {"game": cfg.game}
    for name in SECTIONS:
        if getattr(cfg, name) is not None:
            out[name] = to_dict(getattr(cfg, name))
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
        raise ConfigError(f"invalid YAML: {problem}", where=where) from None
    lines: dict[str, int] = {}

    def walk(n, prefix: str):
        if not isinstance(n, yaml.MappingNode):
            return
        seen = set()
        for k, v in n.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
            path = f"{prefix}.{key}" if prefix else key
            if key in seen:
                raise ConfigError("duplicate key", path, where=f"{source}:{k.start_mark.line + 1}")
            seen.add(key)
            lines[path] = k.start_mark.line + 1
            walk(v, path)

    walk(node, "")
    return data, lines


def parse_override(item: Any) -> tuple[str, Any]:
    """(key path, value) of a "section.key=value" string; the value is parsed as YAML (1e-3
    is a float). The key is not checked here (`apply_overrides_to_dict` checks it)."""
    example = "(e.g. traversal.probe.max_probes=32)"
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"override {item!r}: expected section.key=value {example}")
    key, text = item.split("=", 1)
    parts = [p.strip() for p in key.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"override {item!r}: expected section.key=value {example}, got key {key.strip()!r}")
    try:
        value = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"override {item!r}: value {text!r} is not valid YAML: {problem}") from None
    return ".".join(parts), value


def _check_override_key(parts: list[str], value: Any) -> None:
    """Raise (without the override text) unless `parts` names a key or section of Config."""
    if parts[0] not in _TOP_KEYS:
        raise unknown_key(parts[0], _TOP_KEYS)
    if parts[0] == "game":
        if len(parts) > 1:
            raise ConfigError("game is a value, not a section; use game=<name>", "game")
        return
    cls: type[Settings] | None = SECTIONS[parts[0]]
    for depth, part in enumerate(parts[1:], start=1):
        path = ".".join(parts[:depth])
        if cls is None:
            raise ConfigError("is a value, not a section", path)
        cls = field_section(cls, part, path)
    if cls is not None and value is not None and not isinstance(value, dict):
        path = ".".join(parts)
        raise ConfigError(f"is a section; set {path}.<key>=value, or {path}=null for its defaults", path)


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
    if d is not None and not isinstance(d, dict):
        raise ConfigError(f"top level: expected a mapping of sections, got {d!r}")
    d = dict(d or {})
    sources: dict[str, str] = {}
    for item in overrides:
        path, value = parse_override(item)
        try:
            _check_override_key(path.split("."), value)
        except ConfigError as err:
            raise err.at(f"override {item!r}") from None
        d = merge(d, {path: value})
        sources[path] = item
    return d, sources


def _locate(err: ConfigError, source: str, lines: dict[str, int], overridden: dict[str, str]) -> ConfigError:
    """`err` prefixed with the override or the file line its key (or a parent of it) came from."""
    if err.key is not None:
        parts = err.key.split(".")
        parents = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
        for path in parents:
            if path in overridden:
                return err.at(f"override {overridden[path]!r}")
        for path in parents:
            if path in lines:
                return err.at(f"{source}:{lines[path]}")
    return err.at(source)


def _apply_scheme_overrides(
    data: dict[str, Any], per_scheme: Any, overridden: dict[str, str], lines: dict[str, int]
) -> dict[str, Any]:
    """`data` with the file's `scheme_overrides` entry for the scheme it selects applied.

    A key that an override (or a parent section of it) set keeps the override's value. The
    applied keys' file lines are recorded in `lines` under their own paths, so that a bad
    value is reported at the line that wrote it.
    """
    if per_scheme is None:
        return data
    if not isinstance(per_scheme, dict):
        raise ConfigError(f"expected a mapping of scheme: {{key path: value}}, got {per_scheme!r}", SCHEME_OVERRIDES)
    for scheme, entries in per_scheme.items():
        where = f"{SCHEME_OVERRIDES}.{scheme}"
        if scheme not in SCHEMES:
            raise unknown_key(scheme, SCHEMES, SCHEME_OVERRIDES)
        if entries is not None and not isinstance(entries, dict):
            raise ConfigError(f"expected a mapping of key path: value, got {entries!r}", where)
        for path, value in (entries or {}).items():
            parts = str(path).split(".")
            try:
                _check_override_key(parts, value)
            except ConfigError as err:
                raise err.under(where) from None
            if parts[0] == "traversal" and parts[1:2] in ([], ["scheme"]):
                raise ConfigError("cannot set the scheme (or the whole traversal section)", f"{where}.{path}")
    traversal = data.get("traversal")
    scheme = traversal.get("scheme") if isinstance(traversal, dict) else None
    scheme = TraversalConfig().scheme if scheme is None else scheme
    for path, value in (per_scheme.get(scheme) or {}).items():
        parts = path.split(".")
        if any(".".join(parts[:n]) in overridden for n in range(1, len(parts) + 1)):
            continue
        data = merge(data, {path: value})
        line = lines.get(f"{SCHEME_OVERRIDES}.{scheme}.{path}")
        if line is not None:
            lines[path] = line
    return data


def load_config(path: str | os.PathLike, overrides: Sequence[str] = ()) -> Config:
    """The validated `Config` of the YAML file `path` with `overrides` applied.

    A file may hold, besides its sections, a top-level `scheme_overrides` mapping: for a
    scheme, "section.key" paths and the values they take when the file runs that scheme
    (the scheme the file and `overrides` select), over the file's own values and under
    `overrides`. It lets one file hold settings tuned per scheme where the sections are
    shared (e.g. leduc.yaml's `optimization.warm_start` for the value scheme). The returned
    `Config` holds the result; it has no `scheme_overrides` of its own.

    Args:
      path: a YAML file; its stem is `run.name` unless the file sets one.
      overrides: "section.key=value" strings, applied in order (see the module docstring).

    Raises:
      ConfigError: missing file, invalid YAML, or any invalid or unknown key or value.
    """
    p = Path(path)
    source = str(path)
    if not p.is_file():
        raise ConfigError("config file not found" if not p.exists() else "not a file", where=source)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config file: {err}", where=source) from None
    data, lines = _parse_yaml(text, source)
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"top level: expected a mapping of sections, got {data!r}", where=source)
    data = dict(data or {})
    per_scheme = data.pop(SCHEME_OVERRIDES, None)
    data, overridden = apply_overrides_to_dict(data, overrides)
    try:
        data = _apply_scheme_overrides(data, per_scheme, overridden, lines)
    except ConfigError as err:
        raise _locate(err, source, lines, {}) from None
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


def solver_config(cfg: Config, backend: str | None = None) -> SolverConfig:
    """The `SolverConfig` of `cfg`: its network, traversal, optimization and memory sections,
    precision resolved for `backend` (None = JAX's default backend; see `resolve_precision`)."""
    memory = MemoryConfig(**{key: getattr(cfg.memory, key) for key in keys(MemoryConfig)})
    return SolverConfig(
        network=cfg.network,
        precision=resolve_precision(cfg, backend),
        traversal=cfg.traversal,
        optimization=cfg.optimization,
        memory=memory,
    )


def shipped_config(name: str) -> Path:
    """The shipped run file `name` ("default", "smoke", "kuhn", "leduc"): package data
    (lcjax/configs/, so installed packages have it), linked from configs/deep_cfr/."""
    return SHIPPED_DIR / f"{name}.yaml"


def small_game_config(game: str, scheme: str = "external", **overrides: Any) -> SolverConfig:
    """The tuned SolverConfig for Kuhn or Leduc poker with `scheme`, from the shipped
    kuhn.yaml / leduc.yaml (their only copy), with `overrides` applied.

    Args:
      game: "kuhn" or "leduc" (OpenSpiel's "kuhn_poker"/"leduc_poker" also work).
      scheme: "external", "probe" or "value"; the files hold every scheme's section.
      **overrides: SolverConfig key paths and their values, e.g.
        `**{"network.hidden_size": 16, "traversal.probe.max_probes": 4, "precision": "bfloat16"}`.

    Raises:
      ConfigError: unknown game or scheme, or an override that is not a SolverConfig key
        (or an invalid value); `.key` is the key path.
    """
    name = game.removesuffix("_poker")
    if name not in SMALL_GAMES:
        raise ConfigError(f"no small-game config for {game!r}; games: {', '.join(SMALL_GAMES)}", "game")
    cfg = load_config(shipped_config(name), [f"traversal.scheme={scheme}"])
    return from_dict(SolverConfig, merge(to_dict(solver_config(cfg, backend="cpu")), overrides))


def make_game(cfg: Config):
    """The game of `cfg`, built by the game registry (`lcjax.env.registry.make_game`)."""
    rules = dataclasses.asdict(cfg.rules) if cfg.rules is not None else {}
    try:
        return registry.make_game(cfg.game, **rules)
    except ValueError as err:
        raise ConfigError(str(err), "game") from None


__all__ = [
    "CheckpointConfig",
    "Config",
    "ConfigError",
    "DistributedConfig",
    "EvaluationConfig",
    "GAMES",
    "NetworkConfig",
    "OptimizationConfig",
    "RulesConfig",
    "RunConfig",
    "RunMemoryConfig",
    "SECTIONS",
    "SolverConfig",
    "TraversalConfig",
    "apply_overrides",
    "apply_overrides_to_dict",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "make_game",
    "parse_override",
    "resolve_precision",
    "save_config",
    "shipped_config",
    "small_game_config",
    "solver_config",
]
