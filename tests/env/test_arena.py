"""Batched matches between Lost Cities policies (lcjax.env.arena).

Compilation dominates the cost, so each match configuration is compiled once per module:
two 2000-game matches of scripted bots, one small match of parameterised policies, and one
tiny cut-short match.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.env import arena, bots
from lcjax.env.lost_cities import LostCities

N_GAMES = 2000
N_PARAM_GAMES = 64
STAT_FIELDS = ("opened_a", "negative_a", "bonus_a", "wagers_a")
AGENT_KEYS = ("opened_colors", "negative_expedition_rate", "bonus_rate", "wagers_played")


@pytest.fixture(scope="module")
def game() -> LostCities:
    return LostCities()


@pytest.fixture(scope="module")
def safe_vs_random(game):
    return arena.play_games(
        game, bots.make_bot("safe_heuristic", game), bots.make_bot("random", game), jax.random.key(0), N_GAMES
    )


@pytest.fixture(scope="module")
def safe_vs_passive(game):
    return arena.play_games(
        game,
        bots.make_bot("safe_heuristic", game),
        bots.make_bot("passive_discard", game),
        jax.random.key(1),
        N_GAMES,
    )


@pytest.fixture(scope="module")
def switch(game):
    """(act, traces): act(params, key, state) plays like the random bot when
    params["random"] is True and like passive_discard otherwise; traces[0] counts how often
    act was traced."""
    random, passive = bots.make_bot("random", game), bots.make_bot("passive_discard", game)
    traces = [0]

    def act(params, key, state):
        traces[0] += 1  # runs only while tracing
        return jnp.where(params["random"], random(key, state), passive(key, state))

    return act, traces


@pytest.fixture(scope="module")
def switch_matches(game, switch):
    """The same compiled match twice with swapped params: (result random-A vs passive-B,
    result passive-A vs random-B, traces after the first call, traces after the second)."""
    act, traces = switch
    on, off = {"random": jnp.array(True)}, {"random": jnp.array(False)}
    key = jax.random.key(5)
    first = arena.play_games(game, act, act, key, N_PARAM_GAMES, params_a=on, params_b=off)
    after_first = traces[0]
    second = arena.play_games(game, act, act, key, N_PARAM_GAMES, params_a=off, params_b=on)
    return first, second, after_first, traces[0]


# ---------------------------------------------------------------------------- outcomes
def test_safe_heuristic_beats_random(safe_vs_random):
    summary = arena.summarize(safe_vs_random)
    assert summary["n_games"] == N_GAMES
    assert summary["win_rate_a"] >= 0.9, summary


def test_safe_heuristic_beats_passive_discard(safe_vs_passive):
    summary = arena.summarize(safe_vs_passive)
    assert summary["mean_diff"] > 0 and summary["mean_diff_ci95"][0] > 0, summary


def test_passive_discard_scores_zero(safe_vs_passive):
    # Holds in either seat, which also checks that arena maps seats to policies correctly.
    np.testing.assert_array_equal(safe_vs_passive.score_b, 0)
    assert safe_vs_passive.score_a.max() > 0


def test_arena_alternates_seats_and_finishes(game, safe_vs_random, safe_vs_passive):
    for result in (safe_vs_random, safe_vs_passive):
        assert all(len(x) == N_GAMES for x in result)
        np.testing.assert_array_equal(result.a_seat, np.arange(N_GAMES) % 2)
        assert result.finished.all()
        np.testing.assert_array_equal(result.illegal_moves, 0)
        assert (result.turns > 0).all() and (result.turns <= game.rules.max_turns).all()
        # A game that ended before max_turns ended by emptying the deck.
        assert not result.cap_hit[result.turns < game.rules.max_turns].any()
        assert result.score_a.dtype.kind == "i" and result.cap_hit.dtype == bool


# ---------------------------------------------------------------------------- summaries
def test_summary_is_consistent(safe_vs_random, safe_vs_passive):
    for result in (safe_vs_random, safe_vs_passive):
        s = arena.summarize(result)
        assert s["win_rate_a"] + s["draw_rate"] + s["loss_rate_a"] == pytest.approx(1.0)
        assert min(s["win_rate_a"], s["draw_rate"], s["loss_rate_a"]) >= 0.0
        lo, hi = s["mean_diff_ci95"]
        assert lo <= s["mean_diff"] <= hi
        lo, hi = s["win_rate_a_ci95"]
        assert lo <= s["win_rate_a"] <= hi
        assert s["mean_diff"] == pytest.approx(s["mean_score_a"] - s["mean_score_b"])
        assert s["mean_turns"] == pytest.approx(result.turns.mean())
        assert s["cap_hit_rate"] == pytest.approx(result.cap_hit.mean())
        assert s["illegal_moves"] == 0
        assert s["opened_colors"] == pytest.approx(result.opened_a.mean())
        assert s["wagers_played"] == pytest.approx(result.wagers_a.mean())
        assert s["negative_expedition_rate"] == pytest.approx(result.negative_a.sum() / result.opened_a.sum())
        assert s["bonus_rate"] == pytest.approx(result.bonus_a.sum() / result.opened_a.sum())


def _hand_result(**stats) -> arena.MatchResult:
    return arena.MatchResult(
        score_a=np.array([10, 0, -5, 20]),
        score_b=np.array([0, 0, 5, 10]),
        a_seat=np.array([0, 1, 0, 1]),
        turns=np.array([40, 41, 42, 43]),
        cap_hit=np.array([False, False, True, False]),
        finished=np.ones(4, bool),
        illegal_moves=np.zeros(4, int),
        **stats,
    )


def test_summary_numbers_by_hand():
    s = arena.summarize(_hand_result())
    assert (s["win_rate_a"], s["draw_rate"], s["loss_rate_a"]) == (0.5, 0.25, 0.25)
    diff = np.array([10, 0, -10, 10])
    half = 1.96 * diff.std(ddof=1) / 2
    assert s["mean_diff"] == 2.5
    assert s["mean_diff_ci95"] == pytest.approx((2.5 - half, 2.5 + half))
    assert s["win_rate_a_ci95"] == pytest.approx((0.5 - 1.96 * 0.25, 0.5 + 1.96 * 0.25))
    assert s["cap_hit_rate"] == 0.25 and s["mean_turns"] == 41.5
    # Built without A's expedition statistics: the derived keys are left out.
    assert not set(AGENT_KEYS) & set(s)


def test_summary_agent_stats_by_hand():
    s = arena.summarize(
        _hand_result(
            opened_a=np.array([2, 0, 3, 1]),
            negative_a=np.array([1, 0, 0, 1]),
            bonus_a=np.array([0, 0, 1, 0]),
            wagers_a=np.array([1, 0, 2, 0]),
        )
    )
    assert s["opened_colors"] == 1.5
    assert s["negative_expedition_rate"] == pytest.approx(2 / 6)
    assert s["bonus_rate"] == pytest.approx(1 / 6)
    assert s["wagers_played"] == 0.75
    zeros = {name: np.zeros(4, int) for name in STAT_FIELDS}
    s = arena.summarize(_hand_result(**zeros))
    assert [s[k] for k in AGENT_KEYS] == [0, 0, 0, 0]


# ---------------------------------------------------------------------------- A's statistics
def _stats_by_hand(game, in_expedition, seat):
    """(opened, negative, bonus, wagers) of `seat` from one final state's expedition cards
    (`expedition_cards`, bool[2, N]) and the card queries alone."""
    r = game.rules
    cards = np.arange(r.deck_size)
    colors = np.asarray(game.card_color(cards))
    wager = np.asarray(game.card_is_wager(cards))
    face = np.asarray(game.card_face(cards))
    opened = negative = bonus = 0
    for c in range(r.n_colors):
        here = in_expedition[seat] & (colors == c)
        n = int(here.sum())
        if n == 0:
            continue
        score = (int(face[here].sum()) - r.expedition_cost) * (1 + int(wager[here].sum()))
        score += r.bonus if n >= r.bonus_threshold else 0
        opened += 1
        negative += score < 0
        bonus += n >= r.bonus_threshold
    return opened, negative, bonus, int((in_expedition[seat] & wager).sum())


def test_agent_stats_match_final_states(game, safe_vs_random):
    act_a, act_b = bots.make_bot("safe_heuristic", game), bots.make_bot("random", game)
    fn = arena._MATCH_CACHE[(game, act_a, act_b, N_GAMES, arena.default_max_steps(game), False, False)]
    outputs, states = fn(jax.random.key(0), None, None)  # the fixture's match, with its final states
    for name, value in zip(arena.MatchResult._fields, outputs):
        np.testing.assert_array_equal(np.asarray(value), getattr(safe_vs_random, name))
    in_expedition = np.asarray(jax.vmap(game.expedition_cards)(states))
    for g in range(8):  # both seats
        expected = _stats_by_hand(game, in_expedition[g], int(safe_vs_random.a_seat[g]))
        assert expected == tuple(int(getattr(safe_vs_random, f)[g]) for f in STAT_FIELDS), g


def test_agent_stats_ranges(game, safe_vs_random, safe_vs_passive):
    for result in (safe_vs_random, safe_vs_passive):
        for name in STAT_FIELDS:
            assert getattr(result, name).dtype.kind == "i"
        assert result.opened_a.sum() > 0
        assert (result.opened_a <= game.rules.n_colors).all()
        assert (result.negative_a <= result.opened_a).all() and (result.bonus_a <= result.opened_a).all()
        assert (result.wagers_a <= game.rules.n_wagers * result.opened_a).all()
        # Only negative expeditions lose points, each at most cost * (1 + n_wagers).
        worst = game.rules.expedition_cost * (1 + game.rules.n_wagers)
        assert (result.score_a >= -worst * result.negative_a).all()


# ---------------------------------------------------------------------------- run-time params
def test_params_select_behaviour(switch_matches):
    random_a, passive_a, _, _ = switch_matches
    # A random, B passive: B never opens; A opens colors, often at a loss.
    np.testing.assert_array_equal(random_a.score_b, 0)
    assert (random_a.opened_a > 0).all() and random_a.negative_a.sum() > 0
    # A passive, B random: every statistic of A is zero.
    np.testing.assert_array_equal(passive_a.score_a, 0)
    assert (passive_a.score_b != 0).any()
    for name in STAT_FIELDS:
        np.testing.assert_array_equal(getattr(passive_a, name), 0)
    s = arena.summarize(passive_a)
    assert [s[k] for k in AGENT_KEYS] == [0, 0, 0, 0]
    for result in (random_a, passive_a):
        assert result.finished.all()
        np.testing.assert_array_equal(result.illegal_moves, 0)


def test_params_do_not_recompile(game, switch, switch_matches):
    act, _ = switch
    _, _, after_first, after_second = switch_matches
    assert after_first > 0 and after_second == after_first
    fn = arena._MATCH_CACHE[(game, act, act, N_PARAM_GAMES, arena.default_max_steps(game), True, True)]
    assert fn._cache_size() == 1


def test_equal_game_reuses_the_compiled_match(switch, switch_matches):
    # Games are equal by their rules: a new LostCities() with new params hits the same match.
    act, traces = switch
    after_second = switch_matches[3]
    on, off = {"random": jnp.array(True)}, {"random": jnp.array(False)}
    arena.play_games(LostCities(), act, act, jax.random.key(6), N_PARAM_GAMES, params_a=off, params_b=on)
    assert traces[0] == after_second


# ---------------------------------------------------------------------------- play_games
def test_play_games_reuses_compilation(game, safe_vs_random):
    act_a, act_b = bots.make_bot("safe_heuristic", game), bots.make_bot("random", game)
    cached = len(arena._MATCH_CACHE)
    again = arena.play_games(game, act_a, act_b, jax.random.key(0), N_GAMES)
    assert len(arena._MATCH_CACHE) == cached
    fn = arena._MATCH_CACHE[(game, act_a, act_b, N_GAMES, arena.default_max_steps(game), False, False)]
    assert fn._cache_size() == 1
    # Same key, same games: the match is deterministic.
    for x, y in zip(again, safe_vs_random):
        np.testing.assert_array_equal(x, y)


def test_max_steps_cuts_games(game):
    passive = bots.make_bot("passive_discard", game)
    result = arena.play_games(game, passive, passive, jax.random.key(4), 4, max_steps=10)
    assert not result.finished.any() and result.cap_hit.all()
    np.testing.assert_array_equal(result.turns, 5)
    np.testing.assert_array_equal(result.opened_a, 0)


def test_play_games_rejects_bad_sizes(game):
    act = bots.make_bot("random", game)
    with pytest.raises(ValueError, match="num_games"):
        arena.play_games(game, act, act, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="max_steps"):
        arena.play_games(game, act, act, jax.random.key(0), 2, max_steps=0)
