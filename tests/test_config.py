"""Tests of the YAML run configuration (`lcjax.config`). No JAX compilation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from lcjax import config as C
from lcjax.cfr.solver import SolverConfig
from lcjax.env.bots import BOT_NAMES
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.env.lost_cities import LostCities, Rules

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "deep_cfr"
SHIPPED = ("default", "smoke", "kuhn", "leduc")
GAME_TYPES = {"lost_cities": LostCities, "kuhn": KuhnPoker, "leduc": LeducPoker}


def _write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(fn, *args, **kwargs) -> C.ConfigError:
    with pytest.raises(C.ConfigError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, ValueError)
    return info.value


# ---------------------------------------------------------------------------- shipped files
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_loads(name):
    cfg = C.load_config(CONFIG_DIR / f"{name}.yaml")
    assert cfg.run.name == name
    for backend in ("cpu", "gpu"):
        solver = C.solver_config(cfg, backend=backend)
        assert isinstance(solver, SolverConfig)
        assert solver.precision in ("float32", "bfloat16")
    game = C.make_game(cfg)
    assert isinstance(game, GAME_TYPES[cfg.game])
    assert (cfg.rules is None) == (cfg.game != "lost_cities")
    assert C.config_from_dict(C.config_to_dict(cfg)) == cfg


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_lists_every_key(name):
    raw = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())
    raw.pop(C.SCHEME_OVERRIDES, None)  # per-scheme values of keys the sections list
    expected = C.config_to_dict(C.load_config(CONFIG_DIR / f"{name}.yaml"))
    assert set(raw) == set(expected)

    def same_keys(raw, expected, path):
        assert list(raw) == list(expected), path
        for key, values in expected.items():
            if isinstance(values, dict):
                same_keys(raw[key], values, f"{path}.{key}")

    for section, values in expected.items():
        if isinstance(values, dict):
            same_keys(raw[section], values, section)


def test_shipped_configs_are_package_data():
    """configs/deep_cfr/ (the CLI's and README's paths) is the package's own folder."""
    for name in SHIPPED:
        assert C.shipped_config(name).is_file()
        assert (CONFIG_DIR / f"{name}.yaml").resolve() == C.shipped_config(name).resolve()
    assert C.shipped_config("kuhn").parent.parent == Path(C.__file__).resolve().parent
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]\nlcjax = ["configs/*.yaml"]' in pyproject


def test_default_yaml_values():
    cfg = C.load_config(CONFIG_DIR / "default.yaml")
    assert cfg.game == "lost_cities"
    assert (cfg.network.hidden_size, cfg.network.num_layers, cfg.network.activation) == (512, 3, "silu")
    t = cfg.traversal
    # The value scheme with cpu.yaml's measured learning settings (docs/strength.md); the
    # probe section stays sized for `--set traversal.scheme=probe`.
    assert t.scheme == "value"
    assert (t.sampling_bot, t.sampling_bot_weight) == ("safe_heuristic", 0.8)
    assert (cfg.optimization.advantage_weight_power, cfg.optimization.strategy_weight_power) == (2.0, 3.0)
    assert t.value.max_steps == 2 * cfg.rules.max_turns + 2
    assert cfg.optimization.warm_start is True and cfg.optimization.lr_schedule == "cosine"
    assert 0.1 <= t.probe.branch_probability <= 0.2
    expected_probes = 150 * t.probe.branch_probability
    assert 1.5 * expected_probes <= t.probe.max_probes <= 2.5 * expected_probes
    assert t.probe.max_steps == 2 * cfg.rules.max_turns + 2
    # The data of the 4x run measured on one H200 (docs/strength.md, "On a GPU").
    assert (t.traversals_per_player, t.traversal_batch) == (2048, 1024)
    v = t.value
    assert (v.value_games, v.value_batch, v.value_capacity, v.value_steps) == (4096, 4096, 524288, 1000)
    # Value games that begin like the traversals, with as many items as before the prefix.
    assert (v.sampling_prefix, v.record_probability) == (40.0, 0.35)
    o = cfg.optimization
    assert (o.advantage_steps, o.advantage_batch, o.strategy_steps, o.strategy_batch) == (512, 4096, 5120, 4096)
    # A fresh strategy network every 10 iterations, so every checkpoint and evaluation has one.
    assert o.strategy_warm_start is False and o.strategy_train_every == 10
    assert o.final_strategy_steps == 2 * o.strategy_steps
    assert cfg.checkpoint.save_every % o.strategy_train_every == 0
    assert (o.learning_rate, o.grad_clip) == (1e-3, 1.0)
    m = cfg.memory
    assert (m.advantage_capacity, m.strategy_capacity, m.observation_storage) == (2_000_000, 2_000_000, "bfloat16")
    assert (cfg.checkpoint.save_every, cfg.checkpoint.keep) == (50, 3)
    e = cfg.evaluation
    assert (e.eval_every, e.games) == (10, 1000)
    assert e.opponents == ("random", "passive_discard", "safe_heuristic")
    assert e.extended_opponents == ("safe_heuristic_loose", "safe_heuristic_strict", "noisy_safe")
    assert e.extended_every == 50
    assert e.readouts == ("average", "average_greedy", "current") and e.policy in e.readouts
    assert (e.diagnostic_states, e.diagnostic_redeals) == (64, 32)
    assert "passive_discard" in e.opponents  # behaviour against it is logged every evaluation
    assert cfg.run.precision == "auto" and cfg.run.max_iterations == 2000
    assert C.make_game(cfg).rules == Rules()


def test_smoke_yaml_is_small():
    cfg = C.load_config(CONFIG_DIR / "smoke.yaml")
    assert cfg.game == "lost_cities"
    assert cfg.network.hidden_size <= 64 and cfg.traversal.traversals_per_player <= 32
    assert cfg.run.max_iterations <= 3
    assert cfg.memory.advantage_capacity <= 50_000
    assert 0 < cfg.evaluation.eval_every <= cfg.run.max_iterations
    assert cfg.traversal.probe.max_steps >= 2 * cfg.rules.max_turns + 2
    assert "passive_discard" in cfg.evaluation.opponents
    assert "average_greedy" in cfg.evaluation.readouts and cfg.evaluation.diagnostic_states > 0


@pytest.mark.parametrize("name, every", [("kuhn", 1), ("leduc", 5)])
def test_poker_yaml(name, every):
    cfg = C.load_config(CONFIG_DIR / f"{name}.yaml")
    assert cfg.game == name and cfg.traversal.scheme == "external"
    assert cfg.evaluation.eval_every == every
    # The shipped file is the tuned settings, for both schemes.
    ours = C.solver_config(cfg, backend="cpu")
    assert C.small_game_config(name, "external") == ours
    assert C.small_game_config(f"{name}_poker", "external") == ours
    probe = C.small_game_config(name, "probe")
    assert probe == dataclasses.replace(ours, traversal=dataclasses.replace(ours.traversal, scheme="probe"))
    assert probe.traversal.probe == cfg.traversal.probe


def test_small_game_config_overrides_use_key_paths():
    base = C.small_game_config("kuhn", "probe")
    cfg = C.small_game_config("kuhn", "probe", **{"network.hidden_size": 8, "traversal.probe.max_probes": 1})
    assert cfg.network == dataclasses.replace(base.network, hidden_size=8)
    assert cfg.traversal.probe == dataclasses.replace(base.traversal.probe, max_probes=1)
    assert dataclasses.replace(cfg, network=base.network, traversal=base.traversal) == base
    err = _error(C.small_game_config, "kuhn", "external", hidden_size=8)
    assert err.key == "hidden_size" and "moved to network.hidden_size" in str(err)
    err = _error(C.small_game_config, "kuhn", "external", **{"network.hiden_size": 8})
    assert err.key == "network.hiden_size" and "did you mean 'hidden_size'" in str(err)
    err = _error(C.small_game_config, "leduc", "external", **{"traversal.external.max_depth": 0})
    assert err.key == "traversal.external.max_depth" and "positive integer" in str(err)
    assert _error(C.small_game_config, "go", "external").key == "game"
    assert "traversal.scheme" in str(_error(C.small_game_config, "kuhn", "outcome"))


# ---------------------------------------------------------------------------- mapping
def test_solver_config_is_made_of_the_config_sections():
    cfg = C.load_config(CONFIG_DIR / "default.yaml")
    solver = C.solver_config(cfg, backend="cpu")
    assert (solver.network, solver.traversal, solver.optimization) == (cfg.network, cfg.traversal, cfg.optimization)
    memory = {k: v for k, v in dataclasses.asdict(cfg.memory).items() if k != "save_in_checkpoint"}
    assert dataclasses.asdict(solver.memory) == memory
    assert {f.name for f in dataclasses.fields(SolverConfig)} - {"precision"} <= set(C.SECTIONS)


def test_section_defaults_match_solver_and_rules_defaults():
    cfg = C.Config()
    solver = C.solver_config(cfg, backend="cpu")
    assert solver == SolverConfig()
    assert cfg.rules.to_rules() == Rules()
    assert C.config_from_dict({}) == dataclasses.replace(C.Config(), run=C.RunConfig(name="run"))


def test_solver_config_maps_fields():
    cfg = C.load_config(
        CONFIG_DIR / "default.yaml",
        ["network.hidden_size=96", "traversal.probe.max_probes=7", "optimization.warm_start=true",
         "memory.observation_storage=float32", "run.precision=float32"],
    )
    solver = C.solver_config(cfg, backend="gpu")
    assert solver.network.hidden_size == 96 and solver.traversal.probe.max_probes == 7
    assert solver.optimization.warm_start is True
    assert solver.memory.observation_storage == "float32" and solver.precision == "float32"


@pytest.mark.parametrize(
    "precision, backend, expected",
    [
        ("auto", "cpu", "float32"),
        ("auto", "gpu", "bfloat16"),
        ("auto", "cuda", "bfloat16"),
        ("auto", "tpu", "bfloat16"),
        ("float32", "gpu", "float32"),
        ("bfloat16", "cpu", "bfloat16"),
    ],
)
def test_resolve_precision(precision, backend, expected):
    cfg = C.config_from_dict({"run": {"precision": precision}})
    assert C.resolve_precision(cfg, backend) == expected
    assert C.solver_config(cfg, backend=backend).precision == expected


def test_make_game_uses_rules():
    cfg = C.config_from_dict({"rules": {"n_colors": 3, "max_turns": 50}})
    game = C.make_game(cfg)
    assert isinstance(game, LostCities)
    assert game.rules == Rules(n_colors=3, max_turns=50)


# ---------------------------------------------------------------------------- round trips
def test_dict_round_trip():
    d = C.config_to_dict(C.load_config(CONFIG_DIR / "default.yaml", ["run.max_minutes=90", "run.seed=7"]))
    cfg = C.config_from_dict(d)
    assert C.config_to_dict(cfg) == d
    assert C.config_from_dict(C.config_to_dict(cfg)) == cfg
    assert yaml.safe_load(yaml.safe_dump(d)) == d  # plain YAML types only


def test_poker_dict_has_no_rules():
    d = C.config_to_dict(C.load_config(CONFIG_DIR / "kuhn.yaml"))
    assert "rules" not in d
    assert C.config_to_dict(C.config_from_dict(d)) == d


@pytest.mark.parametrize("name", SHIPPED)
def test_save_load_round_trip(tmp_path, name):
    cfg = C.load_config(CONFIG_DIR / f"{name}.yaml", ["optimization.learning_rate=3e-5"])
    path = tmp_path / "sub" / "saved.yaml"
    C.save_config(cfg, path)
    assert C.load_config(path) == cfg  # the name is stored, not taken from the new stem


def test_name_defaults_to_stem_and_can_be_set(tmp_path):
    path = _write(tmp_path, "game: kuhn\n", "my_run.yaml")
    assert C.load_config(path).run.name == "my_run"
    assert C.load_config(path, ["run.name=other"]).run.name == "other"
    path = _write(tmp_path, "game: kuhn\nrun:\n  name: fixed\n", "x.yaml")
    assert C.load_config(path).run.name == "fixed"


def test_missing_keys_take_defaults(tmp_path):
    path = _write(tmp_path, "game: leduc\nnetwork:\n  hidden_size: 16\n")
    cfg = C.load_config(path)
    assert cfg.network.hidden_size == 16
    assert cfg.network.num_layers == C.NetworkConfig().num_layers
    assert cfg.rules is None


def test_empty_rules_section_allowed_for_poker(tmp_path):
    assert C.load_config(_write(tmp_path, "game: kuhn\nrules:\n")).rules is None
    assert C.load_config(_write(tmp_path, "game: kuhn\nrules: {}\n")).rules is None


# ---------------------------------------------------------------------------- overrides
def test_overrides_of_each_type():
    cfg = C.load_config(
        CONFIG_DIR / "default.yaml",
        [
            "traversal.traversals_per_player=1024",  # int
            "optimization.learning_rate=3e-4",  # float, YAML-1.1-style exponent
            "optimization.grad_clip=2",  # int accepted for a float
            "network.layer_norm=true",  # bool
            "evaluation.opponents=[random, safe_heuristic]",  # list
            "evaluation.extended_opponents=noisy_safe,safe_heuristic_strict",  # comma list
            "run.max_minutes=null",  # null
            "run.max_minutes=45.5",  # later overrides win
            "rules.n_colors=4",  # nested rules
        ],
    )
    assert cfg.traversal.traversals_per_player == 1024
    assert cfg.optimization.learning_rate == pytest.approx(3e-4)
    assert cfg.optimization.grad_clip == 2.0 and isinstance(cfg.optimization.grad_clip, float)
    assert cfg.network.layer_norm is True
    assert cfg.evaluation.opponents == ("random", "safe_heuristic")
    assert cfg.evaluation.extended_opponents == ("noisy_safe", "safe_heuristic_strict")
    assert cfg.run.max_minutes == 45.5
    assert cfg.rules.n_colors == 4 and C.make_game(cfg).rules.n_colors == 4


def test_override_switches_game():
    cfg = C.load_config(CONFIG_DIR / "default.yaml", ["game=leduc", "rules=null", "traversal.scheme=external"])
    assert cfg.game == "leduc" and cfg.rules is None
    assert isinstance(C.make_game(cfg), LeducPoker)


def test_override_creates_missing_section(tmp_path):
    cfg = C.load_config(_write(tmp_path, "game: lost_cities\n"), ["checkpoint.keep=5"])
    assert cfg.checkpoint.keep == 5


def test_section_null_override_resets_defaults():
    cfg = C.load_config(CONFIG_DIR / "default.yaml", ["network=null"])
    assert cfg.network == C.NetworkConfig()


def test_apply_overrides_to_config():
    cfg = C.load_config(CONFIG_DIR / "smoke.yaml")
    new = C.apply_overrides(cfg, ["run.max_iterations=10"])
    assert new.run.max_iterations == 10 and new.run.name == "smoke"
    assert dataclasses.replace(new, run=cfg.run) == cfg


def test_exponent_floats_load_from_files(tmp_path):
    cfg = C.load_config(_write(tmp_path, "optimization:\n  learning_rate: 5e-4\n"))
    assert cfg.optimization.learning_rate == pytest.approx(5e-4)


# ---------------------------------------------------------------------------- errors
def test_missing_file(tmp_path):
    err = _error(C.load_config, tmp_path / "absent.yaml")
    assert "absent.yaml" in str(err) and "not found" in str(err)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = _write(tmp_path, "game: lost_cities\nnetwork:\n  hidden_size: [1, 2\n  num_layers: 2\n", "broken.yaml")
    err = _error(C.load_config, path)
    assert "broken.yaml:" in str(err) and "invalid YAML" in str(err)
    line = int(str(err).split("broken.yaml:")[1].split(":")[0])
    assert 3 <= line <= 5


def test_duplicate_key(tmp_path):
    path = _write(tmp_path, "network:\n  hidden_size: 8\n  hidden_size: 16\n", "dup.yaml")
    err = _error(C.load_config, path)
    assert "dup.yaml:3" in str(err) and "network.hidden_size" in str(err) and "duplicate" in str(err)


def test_top_level_must_be_mapping(tmp_path):
    err = _error(C.load_config, _write(tmp_path, "- a\n- b\n", "list.yaml"))
    assert "list.yaml" in str(err) and "mapping" in str(err)


def test_unknown_section_suggests(tmp_path):
    err = _error(C.load_config, _write(tmp_path, "game: kuhn\nnetwrok:\n  hidden_size: 8\n", "s.yaml"))
    assert err.key == "netwrok"
    assert "s.yaml:2" in str(err) and "netwrok" in str(err) and "'network'" in str(err)


def test_unknown_key_suggests(tmp_path):
    text = "game: kuhn\ntraversal:\n  travesals_per_player: 8\n"
    err = _error(C.load_config, _write(tmp_path, text, "k.yaml"))
    assert err.key == "traversal.travesals_per_player"
    assert "k.yaml:3" in str(err)
    assert "traversal.travesals_per_player" in str(err) and "did you mean 'traversals_per_player'" in str(err)


def test_section_must_be_mapping(tmp_path):
    err = _error(C.load_config, _write(tmp_path, "network: 5\n"))
    assert "network" in str(err) and "5" in str(err) and "mapping" in str(err)


@pytest.mark.parametrize(
    "override, key, shown, allowed",
    [
        ("traversal.traversals_per_player=abc", "traversal.traversals_per_player", "'abc'", "positive integer"),
        ("traversal.probe.max_probes=1.5", "traversal.probe.max_probes", "1.5", "positive integer"),
        ("traversal.external.max_depth=0", "traversal.external.max_depth", "0", "positive integer"),
        ("optimization.advantage_steps=2e3", "optimization.advantage_steps", "2000.0", "positive integer"),
        ("run.seed=true", "run.seed", "True", "integer"),
        ("network.layer_norm=1", "network.layer_norm", "1", "true or false"),
        ("network.skip_connections='yes'", "network.skip_connections", "'yes'", "true or false"),
        ("network.activation=tanh", "network.activation", "'tanh'", "relu, silu, leaky_relu"),
        ("traversal.value.value_activation=tanh", "traversal.value.value_activation", "'tanh'", "network, relu, silu"),
        ("optimization.learning_rate=fast", "optimization.learning_rate", "'fast'", "positive number"),
        ("optimization.learning_rate=0", "optimization.learning_rate", "0", "positive number"),
        ("optimization.grad_clip=-1", "optimization.grad_clip", "-1", ">= 0"),
        ("traversal.probe.branch_probability=1.5", "traversal.probe.branch_probability", "1.5", "(0, 1]"),
        ("traversal.probe.rollout_batch=-1", "traversal.probe.rollout_batch", "-1", ">= 0"),
        ("traversal.scheme=prob", "traversal.scheme", "'prob'", "did you mean 'probe'"),
        ("optimization.strategy_loss=l2", "optimization.strategy_loss", "'l2'", "cross_entropy, mse"),
        ("memory.observation_storage=float16", "memory.observation_storage", "'float16'", "bfloat16"),
        ("memory.save_in_checkpoint=0", "memory.save_in_checkpoint", "0", "true or false"),
        ("run.precision=half", "run.precision", "'half'", "float32, bfloat16, auto"),
        ("run.max_iterations=0", "run.max_iterations", "0", "positive integer"),
        ("run.max_minutes=-5", "run.max_minutes", "-5", "positive number or null"),
        ("run.max_minutes=.inf", "run.max_minutes", "inf", "positive number or null"),
        ("run.name=a/b", "run.name", "'a/b'", "without '/'"),
        ("checkpoint.save_every=0", "checkpoint.save_every", "0", "positive integer"),
        ("checkpoint.keep=0", "checkpoint.keep", "0", "positive integer"),
        ("evaluation.eval_every=-1", "evaluation.eval_every", "-1", ">= 0"),
        ("evaluation.games=0", "evaluation.games", "0", "positive integer"),
        ("evaluation.policy=best", "evaluation.policy", "'best'", "average, current"),
        ("evaluation.opponents=5", "evaluation.opponents", "5", "list of bot names"),
        ("evaluation.opponents=[]", "evaluation.opponents", "[]", "at least one bot"),
        ("evaluation.extended_opponents=[]", "evaluation.extended_opponents", "[]", "at least one bot"),
        ("evaluation.opponents=[random,random]", "evaluation.opponents", "'random'", "twice"),
        ("evaluation.readouts=[average,greedy]", "evaluation.readouts", "'greedy'", "average_greedy, current"),
        ("evaluation.readouts=[current,current]", "evaluation.readouts", "current", "twice"),
        ("evaluation.readouts=3", "evaluation.readouts", "3", "list of read-offs"),
        ("evaluation.diagnostic_states=-1", "evaluation.diagnostic_states", "-1", ">= 0"),
        ("evaluation.diagnostic_redeals=0", "evaluation.diagnostic_redeals", "0", "positive integer"),
        ("optimization.final_strategy_steps=-1", "optimization.final_strategy_steps", "-1", ">= 0"),
        ("rules.n_colors=7", "rules.n_colors", "7", "1..6"),
        ("rules.n_colors=2.0", "rules.n_colors", "2.0", "1..6"),
        ("rules.hand_size=30", "rules.hand_size", "30", "too large"),
        ("game=chess", "game", "'chess'", "lost_cities, kuhn, leduc"),
    ],
)
def test_invalid_values(override, key, shown, allowed):
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", [override])
    assert err.key == key
    message = str(err)
    assert key in message and shown in message and allowed in message
    assert f"override {override!r}" in message


def test_final_strategy_steps_needs_fresh_strategy_networks():
    # A fit that ends the run must start from a fresh network, or a resumed run would
    # continue from its extra steps.
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["optimization.strategy_warm_start=true"])
    assert err.key == "optimization.final_strategy_steps"
    assert "10240 needs strategy_warm_start: false" in str(err)
    cfg = C.load_config(
        CONFIG_DIR / "default.yaml", ["optimization.strategy_warm_start=true", "optimization.final_strategy_steps=0"]
    )
    assert cfg.optimization.last_strategy_steps == cfg.optimization.strategy_steps == 5120
    assert C.load_config(CONFIG_DIR / "default.yaml").optimization.last_strategy_steps == 10240


def test_invalid_value_from_file_names_file_and_line(tmp_path):
    text = "game: lost_cities\ntraversal:\n  scheme: probe\n  probe:\n    max_probes: lots\n"
    err = _error(C.load_config, _write(tmp_path, text, "bad.yaml"))
    assert str(err) == f"{tmp_path / 'bad.yaml'}:5: traversal.probe.max_probes: expected a positive integer, got 'lots'"
    assert err.key == "traversal.probe.max_probes"


@pytest.mark.parametrize(
    "old, new",
    [
        ("branch_probability: 0.1", "traversal.probe.branch_probability"),
        ("max_depth: 4", "traversal.external.max_depth"),
        ("max_strategy: 4", "traversal.external.max_strategy and traversal.probe.max_strategy and traversal.value.max_strategy"),
    ],
)
def test_flat_traversal_keys_name_their_new_place(tmp_path, old, new):
    text = f"game: kuhn\ntraversal:\n  scheme: probe\n  {old}\n"
    err = _error(C.load_config, _write(tmp_path, text, "old.yaml"))
    key = "traversal." + old.split(":")[0]
    assert err.key == key
    assert str(err) == f"{tmp_path / 'old.yaml'}:4: {key}: moved to {new}"
    err = _error(C.load_config, CONFIG_DIR / "kuhn.yaml", [f"{key}=1"])
    assert err.key == key and f"moved to {new}" in str(err) and f"override '{key}=1'" in str(err)


def test_nested_overrides():
    cfg = C.load_config(
        CONFIG_DIR / "default.yaml",
        ["traversal.probe.branch_probability=0.1", "traversal.external.node_budget=64", "traversal.external=null"],
    )
    assert cfg.traversal.probe.branch_probability == 0.1
    assert cfg.traversal.external == type(cfg.traversal.external)()  # the later null reset it
    cfg = C.load_config(CONFIG_DIR / "default.yaml", ["traversal.probe={max_probes: 3}"])
    assert cfg.traversal.probe == type(cfg.traversal.probe)(max_probes=3)
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["traversal.scheme.x=1"])
    assert err.key == "traversal.scheme" and "not a section" in str(err)
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["traversal.probe=5"])
    assert err.key == "traversal.probe" and "section" in str(err)
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["traversal.probe.max_probs=5"])
    assert err.key == "traversal.probe.max_probs" and "did you mean 'max_probes'" in str(err)


def test_unknown_bot_lists_allowed_names():
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["evaluation.opponents=[random,safe_heurstic]"])
    message = str(err)
    assert "evaluation.opponents" in message and "'safe_heurstic'" in message
    assert "did you mean 'safe_heuristic'" in message
    for name in BOT_NAMES:
        assert name in message


def test_unknown_bot_in_extended_list():
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["evaluation.extended_opponents=alphago"])
    assert err.key == "evaluation.extended_opponents" and "'alphago'" in str(err)


def test_poker_still_validates_bot_names_but_allows_empty_lists():
    cfg = C.load_config(CONFIG_DIR / "kuhn.yaml")
    assert cfg.evaluation.opponents == () and cfg.evaluation.eval_every == 1
    _error(C.load_config, CONFIG_DIR / "kuhn.yaml", ["evaluation.opponents=[nobody]"])


def test_rules_rejected_for_poker(tmp_path):
    path = _write(tmp_path, "game: kuhn\nrules:\n  n_colors: 4\n", "p.yaml")
    err = _error(C.load_config, path)
    assert err.key == "rules" and "p.yaml:2" in str(err) and "'kuhn'" in str(err) and "lost_cities" in str(err)
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["game=kuhn"])
    assert err.key == "rules" and "rules=null" in str(err)


@pytest.mark.parametrize(
    "override, shown",
    [
        ("traversal.max_probes", "'traversal.max_probes'"),
        ("=5", "'=5'"),
        ("traversal..max_probes=5", "'traversal..max_probes=5'"),
        ("a.b.c=5", "'a.b.c=5'"),
        ("traversal.max_probes=[1", "'[1'"),
    ],
)
def test_bad_override_syntax(override, shown):
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", [override])
    assert shown in str(err) and "override" in str(err)


@pytest.mark.parametrize(
    "override, key, expected",
    [
        ("netwrk.hidden_size=8", "netwrk", "did you mean 'network'"),
        ("network.hiden_size=8", "network.hiden_size", "did you mean 'hidden_size'"),
        ("network=8", "network", "section"),
        ("game.name=kuhn", "game", "not a section"),
    ],
)
def test_override_unknown_keys(override, key, expected):
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", [override])
    assert err.key == key and key in str(err) and expected in str(err)


def test_config_from_dict_errors_carry_key():
    err = _error(C.config_from_dict, {"traversal": {"probe": {"max_probes": "abc"}}})
    assert err.key == "traversal.probe.max_probes"
    assert str(err) == "traversal.probe.max_probes: expected a positive integer, got 'abc'"
    err = _error(C.config_from_dict, {"optimisation": {}})
    assert err.key == "optimisation" and "did you mean 'optimization'" in str(err)
    _error(C.config_from_dict, ["not", "a", "mapping"])


def test_solver_config_errors_carry_key_paths():
    err = _error(SolverConfig, traversal={"probe": {"max_probes": 0}})
    assert err.key == "traversal.probe.max_probes"
    assert str(err) == "traversal.probe.max_probes: expected a positive integer, got 0"
    err = _error(SolverConfig, precision="auto")  # "auto" is resolved before the solver sees it
    assert err.key == "precision" and "float32, bfloat16" in str(err)


def test_readouts_accept_a_comma_list_and_default_on_poker():
    cfg = C.load_config(CONFIG_DIR / "default.yaml", ["evaluation.readouts=current_greedy, average"])
    assert cfg.evaluation.readouts == ("current_greedy", "average")
    kuhn = C.load_config(CONFIG_DIR / "kuhn.yaml")
    assert kuhn.evaluation.diagnostic_states == 0 and "average_greedy" in kuhn.evaluation.readouts


def test_hidden_average_needs_a_game_with_hidden_alternatives():
    err = _error(C.load_config, CONFIG_DIR / "default.yaml", ["traversal.value.hidden_average=true"])
    assert err.key == "traversal.value.hidden_average"
    assert "'lost_cities'" in str(err) and "kuhn" in str(err) and "leduc" in str(err)
    cfg = C.load_config(CONFIG_DIR / "leduc.yaml", ["traversal.value.hidden_average=true"])
    assert cfg.traversal.value.hidden_average


# ---------------------------------------------------------------------------- scheme_overrides
_PER_SCHEME = """game: leduc
traversal:
  scheme: external
optimization:
  warm_start: true
  learning_rate: 3.0e-3
scheme_overrides:
  value:
    optimization.warm_start: false
    traversal.value.value_steps: 7
  probe: {}
"""


def test_scheme_overrides_apply_to_the_selected_scheme_only(tmp_path):
    path = _write(tmp_path, _PER_SCHEME)
    external = C.load_config(path)
    assert external.optimization.warm_start is True and external.traversal.value.value_steps != 7
    value = C.load_config(path, ["traversal.scheme=value"])
    assert value.optimization.warm_start is False and value.traversal.value.value_steps == 7
    assert value.optimization.learning_rate == 3e-3
    assert C.load_config(path, ["traversal.scheme=probe"]).optimization == external.optimization
    # An override wins over the file's per-scheme value, whether it sets the key or a parent.
    forced = C.load_config(path, ["traversal.scheme=value", "optimization.warm_start=true"])
    assert forced.optimization.warm_start is True and forced.traversal.value.value_steps == 7
    reset = C.load_config(path, ["traversal.scheme=value", "optimization=null"])
    assert reset.optimization == C.OptimizationConfig()
    # The result is a plain Config: saved and loaded again, it keeps the applied values.
    C.save_config(value, tmp_path / "saved.yaml")
    assert C.load_config(tmp_path / "saved.yaml") == value


@pytest.mark.parametrize(
    "entries, key, shown",
    [
        ("  outcome:\n    optimization.warm_start: false\n", "scheme_overrides.outcome", "valid: external, probe, value"),
        ("  value:\n    optimization.warm_strat: false\n", "scheme_overrides.value.optimization.warm_strat", "did you mean 'warm_start'"),
        ("  value:\n    traversal.scheme: probe\n", "scheme_overrides.value.traversal.scheme", "cannot set the scheme"),
        ("  value: [1]\n", "scheme_overrides.value", "expected a mapping"),
    ],
)
def test_scheme_overrides_errors_name_the_key(tmp_path, entries, key, shown):
    path = _write(tmp_path, "game: leduc\nscheme_overrides:\n" + entries)
    err = _error(C.load_config, path)
    assert err.key == key and shown in str(err)
    assert str(err).startswith(f"{path}:")


def test_scheme_override_bad_value_names_its_line(tmp_path):
    path = _write(tmp_path, "game: leduc\nscheme_overrides:\n  value:\n    optimization.learning_rate: fast\n")
    assert C.load_config(path).optimization.learning_rate > 0  # external: not applied
    err = _error(C.load_config, path, ["traversal.scheme=value"])
    assert err.key == "optimization.learning_rate" and str(err).startswith(f"{path}:4: ")


def test_kuhn_value_scheme_ships_flatter_weights():
    """kuhn.yaml's value scheme weights regrets t^1 and strategies uniformly
    (docs/strength.md, "Kuhn: flatter weights"); external and probe keep t^2 and t^1."""
    for scheme in ("external", "probe"):
        opt = C.small_game_config("kuhn", scheme).optimization
        assert (opt.advantage_weight_power, opt.strategy_weight_power) == (2.0, 1.0)
    opt = C.small_game_config("kuhn", "value").optimization
    assert (opt.advantage_weight_power, opt.strategy_weight_power) == (1.0, 0.0)
    # small_game_config's own overrides still win over the file's scheme_overrides.
    opt = C.small_game_config("kuhn", "value", **{"optimization.strategy_weight_power": 0.5}).optimization
    assert opt.strategy_weight_power == 0.5


def test_kuhn_value_scheme_ships_silu_networks():
    """kuhn.yaml's value scheme uses SiLU units (ReLU units of its history-value network
    died, docs/strength.md "Kuhn: dead ReLUs"); external and probe keep ReLU."""
    for scheme in ("external", "probe"):
        assert C.small_game_config("kuhn", scheme).network.activation == "relu"
    assert C.small_game_config("kuhn", "value").network.activation == "silu"
    assert C.small_game_config("kuhn", "value", **{"network.activation": "relu"}).network.activation == "relu"


def test_leduc_value_scheme_ships_fresh_advantage_networks():
    """leduc.yaml's optimization section is shared; the value scheme re-initializes the
    advantage networks every iteration (docs/strength.md), external and probe do not."""
    assert C.small_game_config("leduc", "external").optimization.warm_start is True
    assert C.small_game_config("leduc", "probe").optimization.warm_start is True
    value = C.small_game_config("leduc", "value")
    assert value.optimization.warm_start is False
    assert C.load_config(CONFIG_DIR / "leduc.yaml", ["traversal.scheme=value"]).optimization.warm_start is False


def test_leduc_value_scheme_ships_longer_fits():
    """The value scheme fits its fresh advantage networks for 400 steps and the strategy
    network for 1,000 at 1e-3 (docs/strength.md, "Leduc: longer fits"); external and probe
    keep the section's 200 steps at the shared learning rate, and --set still wins."""
    for scheme in ("external", "probe"):
        opt = C.small_game_config("leduc", scheme).optimization
        assert (opt.advantage_steps, opt.strategy_steps, opt.strategy_learning_rate) == (200, 200, 0.0)
    opt = C.small_game_config("leduc", "value").optimization
    assert (opt.advantage_steps, opt.strategy_steps, opt.strategy_learning_rate) == (400, 1000, 1e-3)
    assert opt.learning_rate == 3e-3
    override = C.small_game_config("leduc", "value", **{"optimization.advantage_steps": 200})
    assert override.optimization.advantage_steps == 200


def test_cpu_config_ships_measured_settings():
    """cpu.yaml continues the advantage networks from iteration to iteration, decays each
    training phase's learning rate and samples the traverser's trajectory from 0.8
    safe_heuristic (docs/strength.md, "Warm advantage networks on Lost Cities", "A cosine
    learning rate per phase", "A bot share of 0.8 in the traverser's sampling policy"), fits a
    fresh strategy network every 20 iterations ("A fresh strategy network", "The strategy
    network fitted only where it is read"), takes twice the data per iteration it first had
    ("Twice the data per iteration"), weighs regrets t^2 ("Regrets weighted t^2") and
    strategies t^2 ("Strategy samples weighted t^2"), and uses
    SiLU units ("SiLU units"); its value games begin with the traversals' sampling policy
    ("Value games that begin like the traversals"), played on 256 lanes ("Cheaper value
    games"); its advantage phases take 150 steps on minibatches drawn by weight ("Half the
    advantage steps, drawn by weight"); its value network is fitted 450 steps ("A narrower V,
    fitted longer"); its networks are 192 wide and V 128, which pays for 3,072 value games an
    iteration ("Narrower networks, and more value games with what they save"); its advantage
    reservoirs hold 800,000 items ("Advantage reservoirs of 800,000"); its last strategy fit
    takes 12,000 steps and the scheduled ones 2,000 ("A last strategy fit of 12,000 steps")."""
    cfg = C.load_config(CONFIG_DIR / "cpu.yaml")
    t = cfg.traversal
    assert (t.traversals_per_player, t.traversal_batch) == (256, 256)
    assert (t.value.value_games, t.value.value_capacity, t.value.value_batch) == (3072, 196608, 1024)
    # 256 lanes: the traversals' own width, and the value games' fastest on a 2-core CPU.
    assert t.value.lanes == 256
    assert (cfg.optimization.advantage_batch, cfg.optimization.strategy_batch) == (1024, 1024)
    # Half the advantage steps, minibatches drawn by weight ("Half the advantage steps").
    assert (cfg.optimization.advantage_steps, cfg.optimization.draw_by_weight) == (150, True)
    assert (cfg.evaluation.eval_every, cfg.evaluation.extended_every) == (20, 40)
    o = cfg.optimization
    assert (o.strategy_warm_start, o.strategy_train_every, o.strategy_steps) == (False, 20, 2000)
    # The fit that ends the run, the network evaluations read, six times as long ("A last
    # strategy fit of 12,000 steps").
    assert o.final_strategy_steps == 12000
    assert cfg.checkpoint.save_every == 20
    # Every checkpoint and evaluation holds a strategy network of its own iteration.
    assert cfg.checkpoint.save_every % o.strategy_train_every == 0
    assert cfg.evaluation.eval_every % o.strategy_train_every == 0
    assert cfg.optimization.warm_start is True
    assert cfg.optimization.lr_schedule == "cosine"
    assert (cfg.traversal.sampling_bot, cfg.traversal.sampling_bot_weight) == ("safe_heuristic", 0.8)
    assert cfg.traversal.scheme == "value"
    assert (cfg.optimization.advantage_weight_power, cfg.optimization.strategy_weight_power) == (2.0, 3.0)
    assert cfg.network.activation == "silu"
    assert (t.value.sampling_prefix, t.value.record_probability) == (40.0, 0.35)
    # Narrower networks whose savings buy value games ("Narrower networks, and more value
    # games with what they save"); V fitted 450 steps ("A narrower V, fitted longer").
    assert (t.value.value_hidden_size, t.value.value_steps, cfg.network.hidden_size) == (128, 450, 192)
    # Twice the recent regrets the t^2 weights read, at no cost per iteration.
    assert cfg.memory.advantage_capacity == 800_000
    # Four times the strategy samples the t^3 weights read ("Strategy reservoirs of 1,600,000").
    assert cfg.memory.strategy_capacity == 1_600_000
    assert C.load_config(CONFIG_DIR / "cpu.yaml", ["optimization.warm_start=false"]).optimization.warm_start is False
