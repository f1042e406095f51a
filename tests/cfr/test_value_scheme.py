"""The `value` scheme: its training data for Q, a short Kuhn solve, and an exact resume."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.cfr import traversal as tr
from lcjax.cfr.history_value import value_spec
from lcjax.cfr.networks import NetworkSpec, init_params, make_apply, network_graphdef
from lcjax.cfr.solver import make_solver
from lcjax.config import config_from_dict, small_game_config
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.lost_cities import LostCities
from lcjax.evaluate import evaluate_exploitability
from lcjax.run import read_metrics, train

GAME = KuhnPoker()
SPEC = NetworkSpec(GAME.observation_size, GAME.num_actions, hidden_size=8, num_layers=1)
APPLY = make_apply(network_graphdef(SPEC))
PARAMS = (init_params(SPEC, jax.random.key(0)), init_params(SPEC, jax.random.key(1)))


def _by_record(data, num_rows: int) -> dict:
    """`data`'s kept items spread back to their record rows (game g's record r at row
    g * max_records + r), as numpy arrays: valid, history, action, target, players."""
    rows = np.asarray(data.rows)
    valid = np.asarray(data.valid)
    assert np.all(valid[: valid.sum()]) and np.all(rows[valid] < num_rows) and np.all(rows[~valid] == num_rows)
    out = {}
    for name, x in (("history", data.items.history), ("action", data.items.action), ("target", data.items.target),
                    ("players", data.players), ("valid", data.valid)):
        x = np.asarray(x)
        full = np.zeros((num_rows + 1,) + x.shape[1:], x.dtype)
        full[rows] = x
        out[name] = full[:num_rows]
    return out


@pytest.mark.parametrize("exploring", [True, False])
def test_value_data_items_are_scaled_returns_of_recorded_nodes(exploring):
    cfg = tr.ValueConfig(record_probability=1.0, max_records=2, max_steps=8, exploring_records=exploring)
    data = jax.jit(lambda k: tr.value_data(GAME, APPLY, cfg, PARAMS, 3.0, k, 256))(jax.random.key(5))
    valid = np.asarray(data.valid)
    assert valid.sum() > 256  # every game records its first two decisions (Kuhn has 2 or 3)
    items = jax.tree.map(lambda x: np.asarray(x)[valid], data.items)
    # Kuhn returns are +-1 or +-2 chips, divided by the game's return scale of 2.
    assert set(np.round(np.abs(items.target), 6).tolist()) <= {0.5, 1.0}
    assert np.all(items.action.sum(-1) == 1) and np.all(items.iteration == 3.0)
    assert items.history.shape[1] == GAME.history_size
    # The history holds the acting player's observation: its first entries equal observe's.
    assert np.all(np.isin(items.history[:, : GAME.observation_size], [0.0, 1.0]))
    assert int(data.truncated) == 0 and int(data.nodes) > 2 * 256
    # Both players' first decisions: betting first (P0) is legal and so is checking.
    taken = items.action.argmax(-1)
    assert set(taken.tolist()) == {0, 1}


def test_state_head_exploring_records_are_children_of_uniform_moves():
    """A state value's exploring record is the child of the uniform move: with a strategy
    that always bets, the recorded histories still split about evenly between the child
    of a pass and the child of a bet, and none is a root."""
    sure = jax.tree.map(jnp.zeros_like, PARAMS[0])
    sure["output"]["bias"] = jnp.array([-5.0, 5.0])
    cfg = tr.ValueConfig(record_probability=1.0, max_records=1, max_steps=8, exploring_records=True, value_head="state")
    data = jax.jit(lambda k: tr.value_data(GAME, APPLY, cfg, (sure, sure), 1.0, k, 2048))(jax.random.key(4))
    histories = np.asarray(data.items.history)[np.asarray(data.valid)]
    kinds = {}
    for deck in GAME.all_decks():
        root = GAME.init_from_deck(jnp.asarray(deck))
        kinds[np.asarray(GAME.observe_history(root)).tobytes()] = "root"
        for a in (0, 1):
            kinds[np.asarray(GAME.observe_history(GAME.step(root, a))).tobytes()] = a
    found = [kinds.get(h.tobytes()) for h in histories]
    assert len(found) > 2000 and "root" not in found and None not in found
    assert abs(np.mean(np.asarray(found) == 1) - 0.5) < 0.05


def _always_pass():
    """Kuhn advantage parameters whose strategy always passes (checks or folds)."""
    never = jax.tree.map(jnp.zeros_like, PARAMS[0])
    never["output"]["bias"] = jnp.array([5.0, -5.0])
    return never


def _kuhn_history_names() -> dict:
    """{observe_history bytes: "root" / "p" / "b" / "pb"} over every Kuhn deal."""
    kinds = {}
    for deck in GAME.all_decks():
        root = GAME.init_from_deck(jnp.asarray(deck))
        for name, actions in {"root": (), "p": (0,), "b": (1,), "pb": (0, 1)}.items():
            state = root
            for a in actions:
                state = GAME.step(state, a)
            kinds[np.asarray(GAME.observe_history(state)).tobytes()] = name
    return kinds


def test_traversal_prefix_records_each_games_traverser_only():
    """With `traversal_prefix`, game g records only player g % 2's nodes, each the child of a
    uniform move. Both players always pass: even games record the root's children ("p" and
    "b", about evenly); odd games record player 1's move after player 0's pass, whose pass
    child is terminal (no item) and whose bet child "pb" is kept."""
    never = _always_pass()
    cfg = tr.ValueConfig(
        record_probability=1.0, max_records=1, max_steps=8, exploring_records=True, value_head="state",
        traversal_prefix=True,
    )
    data = jax.jit(lambda k: tr.value_data(GAME, APPLY, cfg, (never, never), 1.0, k, 2048))(jax.random.key(4))
    kinds = _kuhn_history_names()
    full = _by_record(data, 2048)
    valid, histories = full["valid"], full["history"]
    found = [[kinds.get(histories[g].tobytes()) for g in range(parity, 2048, 2) if valid[g]] for parity in (0, 1)]
    assert len(found[0]) == 1024 and set(found[0]) == {"p", "b"}
    assert abs(np.mean(np.asarray(found[0]) == "b") - 0.5) < 0.06
    assert 400 < len(found[1]) < 624 and set(found[1]) == {"pb"}
    # The recorded state's player to act: player 1 after the root's move, player 0 after "pb".
    players = full["players"]
    assert np.all(players[0::2][valid[0::2]] == 1) and np.all(players[1::2][valid[1::2]] == 0)


def test_sampling_prefix_plays_the_sampling_policy_and_records_after_it():
    """With `sampling_prefix`, player g % 2 of game g plays the sampling policy (here: bet,
    with weight 0.99) until the switch (probability 1/2 per move), and only nodes from the
    switch on are recorded, on the strategies' own actions (always pass). So "b" (a bet at
    the root) is recorded only in even games, "pb" only in odd ones, and no recorded action
    is a bet."""
    never = _always_pass()
    bet = tr.SamplingPolicy(lambda key, state: jnp.int32(1), 0.99)
    cfg = tr.ValueConfig(
        record_probability=1.0, max_records=2, max_steps=8, exploring_records=False, sampling_prefix=2.0
    )
    n = 4096
    data = jax.jit(lambda k: tr.value_data(GAME, APPLY, cfg, (never, never), 1.0, k, n, bet))(jax.random.key(6))
    kinds = _kuhn_history_names()
    full = _by_record(data, 2 * n)
    valid = full["valid"].reshape(n, 2)
    histories = full["history"].reshape(n, 2, -1)
    taken = full["action"].reshape(n, 2, -1).argmax(-1)
    assert np.all(taken[valid] == 0)
    share = {}
    for parity in (0, 1):
        games = range(parity, n, 2)
        found = [{kinds.get(histories[g, r].tobytes()) for r in range(2) if valid[g, r]} for g in games]
        for name in ("root", "b", "pb"):
            share[parity, name] = np.mean([name in f for f in found])
        assert all(None not in f for f in found)
    # Root recorded when the switch falls on move 0; "b" when player 0 bet in its prefix and
    # the switch falls on move 1; "pb" when player 1 bet in its prefix (moves 0 and 1 not
    # switched) and the switch falls on move 2.
    assert abs(share[0, "root"] - 0.5) < 0.04 and abs(share[1, "root"] - 0.5) < 0.04
    assert abs(share[0, "b"] - 0.25 * 0.995) < 0.03 and share[1, "b"] == 0.0
    assert abs(share[1, "pb"] - 0.125 * 0.995) < 0.025 and share[0, "pb"] == 0.0


def test_sampling_prefix_of_one_move_is_the_strategies_own_games():
    """A prefix with mean 1 switches on every game's first move: the same items as none."""
    base = tr.ValueConfig(
        record_probability=0.5, max_records=2, max_steps=8, value_head="state", exploring_records=False
    )
    out = [
        jax.jit(lambda k, c=c: tr.value_data(GAME, APPLY, c, PARAMS, 1.0, k, 512))(jax.random.key(2))
        for c in (base, dataclasses.replace(base, sampling_prefix=1.0))
    ]
    np.testing.assert_array_equal(np.asarray(out[0].valid), np.asarray(out[1].valid))
    np.testing.assert_array_equal(np.asarray(out[0].items.history), np.asarray(out[1].items.history))
    np.testing.assert_array_equal(np.asarray(out[0].items.target), np.asarray(out[1].items.target))


def test_sampling_prefix_is_a_mean_of_at_least_one_move():
    from lcjax.settings import ConfigError

    with pytest.raises(ConfigError, match="sampling_prefix"):
        tr.ValueConfig(sampling_prefix=0.5)
    with pytest.raises(ConfigError, match="set one of them"):
        tr.ValueConfig(sampling_prefix=10.0, traversal_prefix=True, max_records=1)


def test_value_games_prefix_plays_the_traversals_sampling_policy():
    """The solver's value games play the traversals' sampling policy (here half
    safe_heuristic) in their prefix, and no policy at all without one."""
    from lcjax.cfr.history_value import HistoryValue

    game = LostCities()
    spec = NetworkSpec(game.observation_size, game.num_actions, hidden_size=8, num_layers=1)
    for prefix in (40.0, 0.0):
        cfg = config_from_dict({
            "game": "lost_cities", "traversal": {
                "scheme": "value", "sampling_bot": "safe_heuristic", "sampling_bot_weight": 0.5,
                "value": {"sampling_prefix": prefix, "value_head": "state"},
            },
        })
        hv = HistoryValue(game, cfg, spec, make_apply(network_graphdef(spec)), jax.jit)
        expected = tr.sampling_policy(game, cfg.traversal) if prefix else tr.SamplingPolicy()
        assert hv.sampling.weight == expected.weight == (0.5 if prefix else 0.0)
        assert (hv.sampling.act is None) == (prefix == 0.0)


def test_traversal_prefix_needs_one_exploring_record():
    from lcjax.settings import ConfigError

    with pytest.raises(ConfigError, match="traversal_prefix needs max_records: 1"):
        tr.ValueConfig(traversal_prefix=True, max_records=4)
    with pytest.raises(ConfigError, match="traversal_prefix"):
        tr.ValueConfig(traversal_prefix=True, max_records=1, exploring_records=False)
    with pytest.raises(ConfigError, match="traversal.sampling_bot"):
        config_from_dict({
            "game": "lost_cities", "traversal": {
                "scheme": "value", "sampling_bot": "safe_heuristic",
                "value": {"traversal_prefix": True, "max_records": 1},
            },
        })


def test_state_head_items_are_the_change_from_the_return_as_it_stands():
    """Same games under both heads: the state head's target is the actions head's minus the
    acting player's return as the recorded state stands, and its action field is one True."""
    game = LostCities()
    spec = NetworkSpec(game.observation_size, game.num_actions, hidden_size=8, num_layers=1)
    apply = make_apply(network_graphdef(spec))
    params = (init_params(spec, jax.random.key(0)), init_params(spec, jax.random.key(1)))
    data = {}
    for head in tr.VALUE_HEADS:
        cfg = tr.ValueConfig(record_probability=0.2, max_records=16, max_steps=402, exploring_records=False, value_head=head)
        data[head] = jax.jit(lambda k, c=cfg: tr.value_data(game, apply, c, params, 1.0, k, 4))(jax.random.key(3))
    valid = np.asarray(data["state"].valid)
    np.testing.assert_array_equal(valid, np.asarray(data["actions"].valid))
    assert valid.sum() > 20
    history = np.asarray(data["state"].items.history)[valid]
    np.testing.assert_array_equal(history, np.asarray(data["actions"].items.history)[valid])
    assert np.asarray(data["state"].items.action).shape[1] == 1 and np.asarray(data["state"].items.action).all()
    # The observation's expedition scores (own colors, then the opponent's, / 100) give the
    # acting player's return as the state stands.
    c, r = game.rules.n_colors, game.rules
    start = 7 * r.deck_size + r.hand_size * (c + 3)
    scores = history[:, start: start + 2 * c] * 100.0
    now = scores[:, :c].sum(1) - scores[:, c:].sum(1)
    change = np.asarray(data["actions"].items.target)[valid] - np.asarray(data["state"].items.target)[valid]
    np.testing.assert_allclose(change * game.return_scale, now, atol=1e-3)
    assert np.any(now != 0)


def test_value_data_exploring_records_cover_actions_uniformly():
    """With exploring records and a near-deterministic strategy, the recorded actions are
    still about uniform; without them they follow the strategy."""
    # A strategy network whose output strongly prefers action 1 everywhere.
    sure = jax.tree.map(jnp.zeros_like, PARAMS[0])
    sure["output"]["bias"] = jnp.array([-5.0, 5.0])
    params = (sure, sure)
    shares = {}
    for exploring in (True, False):
        cfg = tr.ValueConfig(record_probability=1.0, max_records=1, max_steps=8, exploring_records=exploring)
        data = jax.jit(lambda k, c=cfg: tr.value_data(GAME, APPLY, c, params, 1.0, k, 2048))(jax.random.key(9))
        actions = np.asarray(data.items.action)[np.asarray(data.valid)].argmax(-1)
        shares[exploring] = float(np.mean(actions == 1))
    assert abs(shares[True] - 0.5) < 0.05
    assert shares[False] > 0.98


def test_kuhn_value_scheme_learns():
    config = small_game_config("kuhn", "value", **{"traversal.traversals_per_player": 128, "traversal.traversal_batch": 128})
    solver = make_solver(GAME, config)
    state = solver.init(jax.random.key(0))
    uniform = evaluate_exploitability(solver, state)["eval/exploitability"]
    for _ in range(20):
        state, metrics = solver.iteration(state)
    assert metrics["value/items"] > 0 and metrics["memory/value"] > metrics["value/items"]
    assert metrics["fve/value"] <= 1.0 and metrics["nonfinite/value"] == 0
    assert metrics["traversal/advantage_samples"] > 0
    after = evaluate_exploitability(solver, state)["eval/exploitability"]
    assert after < 0.5 * uniform, (uniform, after)


def test_value_run_resumes_exactly(tmp_path):
    """The value network, its optimizer and its memory are checkpointed: a resumed run
    continues exactly as one that never stopped. With `fit_each_player`, Q is fitted on new
    games before each player's traversals."""
    tiny = {
        "game": "kuhn",
        "run": {"name": "value", "seed": 1, "max_iterations": 4},
        "network": {"hidden_size": 8, "num_layers": 1},
        "traversal": {
            "scheme": "value", "traversals_per_player": 16, "traversal_batch": 16,
            "value": {"max_samples": 2, "max_strategy": 2, "max_steps": 4, "value_games": 16,
                      "record_probability": 0.5, "max_records": 1, "value_capacity": 64,
                      "value_steps": 4, "value_batch": 8, "fit_each_player": True},
        },
        "optimization": {"advantage_steps": 4, "advantage_batch": 16, "strategy_steps": 4, "strategy_batch": 16},
        "memory": {"advantage_capacity": 128, "strategy_capacity": 128},
        "checkpoint": {"save_every": 2, "keep": 2},
        "evaluation": {"eval_every": 2},
    }
    straight = train(config_from_dict(tiny), run_dir=tmp_path / "straight")
    train(config_from_dict(tiny), run_dir=tmp_path / "resumed", max_iterations=2)
    resumed = train(None, resume=tmp_path / "resumed")
    assert resumed.iteration == straight.iteration == 4
    assert int(straight.state.value_memory.size) > 0
    for x, y in zip(jax.tree.leaves(straight.state), jax.tree.leaves(resumed.state)):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/") and "per_second" not in k} for r in rows]  # noqa: E731
    rows = read_metrics(straight.run_dir)
    assert strip(rows) == strip(read_metrics(tmp_path / "resumed"))
    # Two fits in iteration 1: the memory holds both fits' items, `value/items` counts the
    # last fit's only (a single fit would leave them equal).
    first = next(r for r in rows if r.get("iteration") == 1 and "memory/value" in r)
    assert 0 < first["value/items"] < first["memory/value"] <= 2 * 16


def _lambda_returns_by_hand(u, w, lam):
    """Player-0 lambda-returns of one game's items, backwards from the last, in numpy."""
    g = np.zeros(len(u))
    g[-1] = u[-1]
    for i in range(len(u) - 2, -1, -1):
        g[i] = (u[i] - u[i + 1]) + (1 - lam) * w[i + 1] + lam * g[i + 1]
    return g


@pytest.mark.parametrize("lam", [0.0, 0.6, 1.0])
def test_lambda_returns_match_the_recursion_in_each_players_units(lam):
    rng = np.random.default_rng(1)
    records, games = 5, 3
    targets = rng.normal(size=games * records).astype(np.float32)
    values = rng.normal(size=games * records).astype(np.float32)
    players = rng.integers(0, 2, size=games * records).astype(np.int32)
    counts = [5, 2, 0]  # valid rows are a prefix of each game's rows
    valid = np.concatenate([np.arange(records) < n for n in counts])
    out = np.asarray(tr.lambda_returns(jnp.asarray(targets), jnp.asarray(values), jnp.asarray(valid), jnp.asarray(players), records, lam))
    sign = np.where(players == 0, 1.0, -1.0)
    for g, n in enumerate(counts):
        rows = slice(g * records, g * records + n)
        if n:
            want = sign[rows] * _lambda_returns_by_hand(sign[rows] * targets[rows], sign[rows] * values[rows], lam)
            np.testing.assert_allclose(out[rows], want, rtol=1e-5, atol=1e-5)
        assert np.all(out[g * records + n: (g + 1) * records] == 0.0)
    if lam == 1.0:  # the Monte Carlo targets come back unchanged
        np.testing.assert_allclose(out, np.where(valid, targets, 0.0), atol=1e-5)


def test_kept_rows_are_whole_games_in_order_up_to_the_window():
    # Three games of four records: 3, 0 and 2 valid items (valid rows are each game's first).
    valid = jnp.asarray([1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0], bool)
    np.testing.assert_array_equal(np.asarray(tr.kept_rows(valid, 4, 6)), [0, 1, 2, 8, 9, 12])
    # Room for four items: the third game's two do not both fit, so neither is kept.
    np.testing.assert_array_equal(np.asarray(tr.kept_rows(valid, 4, 4)), [0, 1, 2, 12])
    # Not even the first game fits: nothing is kept (no game is ever cut in two).
    np.testing.assert_array_equal(np.asarray(tr.kept_rows(valid, 4, 2)), [12, 12])


def test_value_data_keeps_whole_games_up_to_the_value_window():
    """The same games with a window too small for all of their items: the kept items are
    the first games' items, whole, identical to those kept with room for all."""
    cfg = tr.ValueConfig(record_probability=1.0, max_records=2, max_steps=8, exploring_records=False, value_capacity=4096)
    small = dataclasses.replace(cfg, value_capacity=301)
    wide, narrow = (jax.jit(lambda k, c=c: tr.value_data(GAME, APPLY, c, PARAMS, 1.0, k, 256))(jax.random.key(5)) for c in (cfg, small))
    assert np.asarray(wide.valid).shape == (512,) and np.asarray(narrow.valid).shape == (301,)
    n_wide, n_narrow = int(np.asarray(wide.valid).sum()), int(np.asarray(narrow.valid).sum())
    assert n_wide > 301 and 299 <= n_narrow <= 301  # Kuhn records 2 items per game
    np.testing.assert_array_equal(np.asarray(narrow.rows)[:n_narrow], np.asarray(wide.rows)[:n_narrow])
    for a, b in zip(jax.tree.leaves(narrow.items), jax.tree.leaves(wide.items)):
        np.testing.assert_array_equal(np.asarray(a)[:n_narrow], np.asarray(b)[:n_narrow])
    games = np.asarray(narrow.rows)[:n_narrow] // 2
    assert np.all(np.bincount(games) == 2)  # each kept game with both of its items


def test_relabelled_targets_are_the_lambda_returns_of_the_record_rows():
    cfg = tr.ValueConfig(record_probability=0.7, max_records=3, max_steps=8, exploring_records=False, value_head="state")
    data = jax.jit(lambda k: tr.value_data(GAME, APPLY, cfg, PARAMS, 1.0, k, 64))(jax.random.key(8))
    values = jnp.asarray(np.random.default_rng(0).normal(size=data.valid.shape[0]).astype(np.float32))
    got = np.asarray(tr.relabelled_targets(values, data, 64 * 3, 3, 0.5))
    full = _by_record(data, 64 * 3)
    spread = np.zeros(64 * 3 + 1, np.float32)
    spread[np.asarray(data.rows)] = np.asarray(values)
    want = np.asarray(tr.lambda_returns(
        jnp.asarray(full["target"]), jnp.asarray(spread[:-1]), jnp.asarray(full["valid"]), jnp.asarray(full["players"]), 3, 0.5
    ))
    valid = np.asarray(data.valid)
    assert valid.sum() > 64
    np.testing.assert_allclose(got[valid], want[np.asarray(data.rows)[valid]], rtol=1e-6)
    assert np.all(got[~valid] == 0.0)


def test_history_values_skip_rows_past_count():
    rows = jnp.asarray(np.random.default_rng(2).normal(size=(700, 5)).astype(np.float32))
    apply = lambda p, x: x[:, :2] * p  # noqa: E731
    full = np.asarray(tr.history_values(apply, 2.0, rows, chunk=256))
    part = np.asarray(tr.history_values(apply, 2.0, rows, chunk=256, count=jnp.int32(300)))
    np.testing.assert_allclose(full, 2.0 * np.asarray(rows)[:, :2])
    # Chunks starting before 300 (rows 0-511) are evaluated, the last one is skipped.
    np.testing.assert_allclose(part[:512], full[:512])
    assert np.all(part[512:] == 0.0)


def test_value_lambda_below_one_needs_the_state_head():
    from lcjax.settings import ConfigError

    assert tr.ValueConfig(value_lambda=0.5, value_head="state").value_lambda == 0.5
    with pytest.raises(ConfigError, match="value_lambda.*value_head: state"):
        tr.ValueConfig(value_lambda=0.5, value_head="actions")
    with pytest.raises(ConfigError, match="traversal.value.value_lambda"):
        config_from_dict({"game": "kuhn", "traversal": {"scheme": "value", "value": {"value_lambda": 0.5}}})


def test_chance_samples_needs_a_state_head_and_a_game_that_redraws():
    from lcjax.settings import ConfigError

    assert tr.ValueConfig(chance_samples=4, value_head="state").chance_samples == 4
    with pytest.raises(ConfigError, match="chance_samples.*value_head: state"):
        tr.ValueConfig(chance_samples=4, value_head="actions")
    with pytest.raises(ConfigError, match="chance_samples.*hidden_average"):
        tr.ValueConfig(chance_samples=4, value_head="state", hidden_average=True)
    with pytest.raises(ConfigError, match=r"traversal.value.chance_samples.*resample_chance \(lost_cities\)"):
        config_from_dict({"game": "kuhn", "traversal": {"scheme": "value", "value": {"value_head": "state", "chance_samples": 2}}})
    t = small_game_config("kuhn", "value").traversal
    value = dataclasses.replace(t.value, value_head="state", value_lambda=1.0, hidden_average=False, chance_samples=2)
    with pytest.raises(ConfigError, match="resample_chance"):
        tr.traversal_fn(KuhnPoker(), APPLY, dataclasses.replace(t, value=value), None)


def test_chance_averaged_values_are_the_mean_over_redrawn_deck_cards():
    """With chance_samples K, a deck draw's value is (dealt child + K - 1 redrawn children) / K:
    its mean is the exact average over every undealt card on top (within 5 standard errors),
    and every other action's value is the dealt child's, exactly as with K = 1."""
    from lcjax.cfr.traversal import lanes
    from lcjax.cfr.traversal.value import chance_averaged_values, child_values
    from lcjax.env.lost_cities import draw_deck_action

    game = LostCities()
    spec = NetworkSpec(game.history_size, 1, hidden_size=16, num_layers=1)
    apply = make_apply(network_graphdef(spec))
    params = jax.tree.map(lambda x: 4.0 * x, init_params(spec, jax.random.key(5)))  # values far apart
    n = 24
    packer, roots, _ = lanes.deal_roots(game, jax.random.key(6), n)
    deck = draw_deck_action(game.rules)
    states = packer.unpack(roots.T)
    # Two turns of "discard slot 0, draw from the deck", then a discard: the draw phase, with
    # the earlier discards' piles to draw from too.
    for action in (game.rules.hand_size, deck) * 2 + (game.rules.hand_size,):
        states = jax.vmap(game.step, in_axes=(-1, None), out_axes=-1)(states, jnp.int32(action))
    packed = packer.pack(states).T
    legal = np.asarray(jax.vmap(game.legal_action_mask, in_axes=-1)(states))
    assert legal[:, deck].all() and (legal.sum(1) > 1).sum() > n // 2
    k = 64
    cfg = tr.ValueConfig(value_head="state", chance_samples=k)
    averaged = np.asarray(jax.jit(lambda p: chance_averaged_values(
        game, cfg, packer, p, jnp.asarray(legal), apply, params, jax.random.key(7)))(packed))
    values = jax.jit(lambda p, need: child_values(game, packer, p, need, apply, params, 50.0))
    dealt = np.asarray(values(packed, jnp.asarray(legal)))
    others = legal.copy()
    others[:, deck] = False
    np.testing.assert_array_equal(averaged[others], dealt[others])
    assert np.all(averaged[~legal] == 0.0)
    # Exact: each undealt card swapped to the top of the deck, its deck-draw child valued.
    pos = int(np.asarray(states.deck_pos)[0])
    only_deck = np.zeros_like(legal)
    only_deck[:, deck] = True
    for i in range(n):
        swapped = []
        for j in range(pos, game.deck_size):
            s = jax.tree.map(lambda x: x[..., i], states)
            d = np.asarray(s.deck).copy()
            d[[pos, j]] = d[[j, pos]]
            swapped.append(np.asarray(packer.pack(jax.tree.map(lambda x: x[..., None], s._replace(deck=jnp.asarray(d))))).T[0])
        rows = jnp.asarray(np.stack(swapped))
        every = np.asarray(values(rows, jnp.asarray(only_deck[: len(swapped)])))[:, deck]
        expected = (dealt[i, deck] + (k - 1) * every.mean()) / k
        spread = every.std() * np.sqrt(k - 1) / k
        assert every.std() > 0  # the card drawn matters to V
        assert abs(averaged[i, deck] - expected) < 5 * spread + 1e-6, (i, averaged[i, deck], expected, spread)


def test_value_activation_sets_the_value_network_only():
    """`value_activation: network` gives V the other networks' activation; a named one
    gives it to V alone, and V's forward then differs from the inherited one."""
    base = SPEC._replace(activation="relu")
    inherited = value_spec(GAME, tr.ValueConfig(value_head="state"), base)
    assert inherited.activation == "relu" and inherited.in_size == GAME.history_size and inherited.out_size == 1
    silu = value_spec(GAME, tr.ValueConfig(value_head="state", value_activation="silu"), base)
    assert silu == inherited._replace(activation="silu")
    assert value_spec(GAME, tr.ValueConfig(value_activation="network"), base._replace(activation="silu")).activation == "silu"
    # The solver builds V from it while the advantage networks keep network.activation.
    solver = make_solver(GAME, small_game_config("kuhn", "value", **{
        "network.activation": "relu", "traversal.value.value_activation": "silu",
    }))
    assert solver._phases.spec.activation == "relu"
    assert solver._phases.history_value.spec.activation == "silu"
    params = init_params(silu, jax.random.key(2))
    x = jax.random.normal(jax.random.key(3), (16, GAME.history_size))
    out_silu = make_apply(network_graphdef(silu))(params, x)
    out_relu = make_apply(network_graphdef(inherited))(params, x)
    assert not np.allclose(out_silu, out_relu)


def test_value_hidden_size_sets_the_value_network_width_only():
    """`value_hidden_size: 0` gives V the other networks' width; a positive one gives it to
    V alone: the solver's V has hidden layers that wide, the advantage networks do not."""
    from lcjax.settings import ConfigError

    base = SPEC._replace(hidden_size=24)
    assert value_spec(GAME, tr.ValueConfig(value_head="state"), base).hidden_size == 24
    narrow = value_spec(GAME, tr.ValueConfig(value_head="state", value_hidden_size=8), base)
    assert narrow == value_spec(GAME, tr.ValueConfig(value_head="state"), base)._replace(hidden_size=8)
    solver = make_solver(GAME, small_game_config("kuhn", "value", **{
        "network.hidden_size": 16, "traversal.value.value_hidden_size": 8,
    }))
    assert solver._phases.spec.hidden_size == 16
    assert solver._phases.history_value.spec.hidden_size == 8
    widths = {x.shape[-1] for x in jax.tree.leaves(init_params(solver._phases.history_value.spec, jax.random.key(0)))
              if x.ndim == 2}
    assert 8 in widths and 16 not in widths
    with pytest.raises(ConfigError, match="traversal.value.value_hidden_size"):
        config_from_dict({"game": "kuhn", "traversal": {"scheme": "value", "value": {"value_hidden_size": -1}}})


@pytest.mark.parametrize("schedule", ["constant", "cosine", "linear"])
def test_value_lr_schedule_decays_within_each_fit_and_restarts(schedule):
    """Q's optimizer follows `value_lr_schedule` over each fit of `value_steps` updates:
    Adam's first update moves every weight by the full rate, a decayed fit's last update by
    almost nothing, and the next fit (a warm Q, the optimizer state continued) starts again
    at the full rate."""
    from lcjax.cfr.history_value import HistoryValue
    from lcjax.settings import ConfigError

    steps, lr = 8, 1e-2
    cfg = small_game_config("kuhn", "value", **{
        "traversal.value.value_steps": steps, "traversal.value.value_learning_rate": lr,
        "traversal.value.value_lr_schedule": schedule, "optimization.grad_clip": 0.0,
    })
    assert cfg.traversal.value.value_lr_schedule == schedule
    hv = HistoryValue(GAME, cfg, SPEC, make_apply(network_graphdef(SPEC)), jax.jit)
    params = init_params(hv.spec, jax.random.key(0))
    state = hv.optimizer.init(params)
    # A constant gradient: Adam's normalized step is exactly 1 per weight, so each update's
    # largest entry is the learning rate of that step.
    grads = jax.tree.map(jnp.ones_like, params)
    sizes = []
    for _ in range(steps + 1):
        updates, state = hv.optimizer.update(grads, state, params)
        sizes.append(max(float(jnp.max(jnp.abs(u))) for u in jax.tree.leaves(updates)))
    np.testing.assert_allclose(sizes[0], lr, rtol=1e-3)
    np.testing.assert_allclose(sizes[steps], lr, rtol=1e-3)  # the next fit restarts
    last = {"constant": lr, "cosine": lr * 0.5 * (1 + np.cos(np.pi * (steps - 1) / steps)),
            "linear": lr / steps}[schedule]
    np.testing.assert_allclose(sizes[steps - 1], last, rtol=1e-3)
    with pytest.raises(ConfigError, match="traversal.value.value_lr_schedule"):
        config_from_dict({"game": "kuhn", "traversal": {"scheme": "value", "value": {"value_lr_schedule": "step"}}})
