"""Rules, conventions and invariants of the Lost Cities environment."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.env.lost_cities import (
    NO_PILE,
    PHASE_DRAW,
    PHASE_PLAY,
    LostCities,
    Rules,
    discard_action,
    draw_deck_action,
    draw_pile_action,
    play_action,
)

GAME = LostCities()
R = GAME.rules
K = R.cards_per_color  # 12
N = R.deck_size  # 60
H = R.hand_size  # 8

step = jax.jit(GAME.step)
mask_fn = jax.jit(GAME.legal_action_mask)
observe = jax.jit(GAME.observe)
scores = jax.jit(GAME.scores)


def card(color: int, face: int | None = None, wager: int = 0) -> int:
    """Card id of a number card (`face` 2..10) or of wager number `wager` of `color`."""
    if face is None:
        return color * K + wager
    return color * K + R.n_wagers + face - R.min_rank


def deck_with(p0_hand, p1_hand, rest=None):
    """A full deck dealing `p0_hand` and `p1_hand` (8 cards each), then `rest` on top."""
    dealt = np.empty(2 * H, np.int32)
    dealt[0::2], dealt[1::2] = p0_hand, p1_hand
    used = set(dealt.tolist()) | set(rest or [])
    tail = list(rest or []) + [c for c in range(N) if c not in used]
    deck = np.concatenate([dealt, tail])
    assert sorted(deck.tolist()) == list(range(N))
    return jnp.asarray(deck, jnp.int32)


def with_expedition(state, player, cards):
    exp = np.asarray(state.expeditions).copy()
    exp[player, list(cards)] = True
    return state._replace(expeditions=jnp.asarray(exp))


def legal(state):
    return set(np.flatnonzero(np.asarray(mask_fn(state))).tolist())


# ---------------------------------------------------------------- rules config
@pytest.mark.parametrize(
    "field, value",
    [("n_colors", 0), ("n_colors", 7), ("n_ranks", 0), ("hand_size", -1), ("max_turns", 0), ("n_wagers", -1)],
)
def test_bad_rules_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        Rules(**{field: value})


def test_deck_too_small_is_rejected():
    with pytest.raises(ValueError, match="hand_size"):
        Rules(n_colors=1, hand_size=6)  # 12 cards cannot deal 2 x 6 and leave one


def test_sizes():
    assert GAME.num_actions == 22 == 2 * H + 1 + 5
    assert LostCities(Rules(n_colors=6)).num_actions == 23
    s = GAME.init(jax.random.key(0))
    assert observe(s, 0).shape == (GAME.observation_size,)


# ---------------------------------------------------------------- deal and actions
def test_deal_alternates_and_sorts_hands():
    deck = jax.random.permutation(jax.random.key(5), N)
    s = GAME.init_from_deck(deck)
    d = np.asarray(deck)
    np.testing.assert_array_equal(GAME.hand(s, 0), np.sort(d[0 : 2 * H : 2]))
    np.testing.assert_array_equal(GAME.hand(s, 1), np.sort(d[1 : 2 * H : 2]))
    assert int(GAME.cards_left(s)) == N - 2 * H
    assert int(s.current_player) == 0 and int(s.phase) == PHASE_PLAY


def test_init_matches_init_from_deck():
    key = jax.random.key(11)
    a = GAME.init(key)
    b = GAME.init_from_deck(jax.random.permutation(key, N))
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)


def test_action_ids():
    assert play_action(R, 3) == 3
    assert discard_action(R, 3) == H + 3
    assert draw_deck_action(R) == 2 * H
    assert draw_pile_action(R, 2) == 2 * H + 3


def test_a_turn_plays_then_draws_from_the_top_of_the_deck():
    p0 = [card(0, f) for f in range(2, 10)]
    p1 = [card(1, f) for f in range(2, 10)]
    top = card(2, 5)
    s = GAME.init_from_deck(deck_with(p0, p1, [top]))
    s = step(s, play_action(R, 0))  # red 2
    assert int(s.phase) == PHASE_DRAW and int(s.current_player) == 0
    assert bool(s.expeditions[0, card(0, 2)])
    assert int(GAME.hand(s, 0)[-1]) == N  # the emptied slot is last
    s = step(s, draw_deck_action(R))
    assert int(s.current_player) == 1 and int(s.phase) == PHASE_PLAY and int(s.turn) == 1
    assert top in np.asarray(GAME.hand(s, 0)).tolist()
    assert list(np.asarray(GAME.hand(s, 0))) == sorted(np.asarray(GAME.hand(s, 0)))


# ---------------------------------------------------------------- scoring pins
@pytest.mark.parametrize(
    "cards, expected",
    [
        ([], 0),
        ([card(0, wager=w) for w in range(3)], -80),
        ([card(0, f) for f in range(2, 11)], 54),
        ([card(0, wager=w) for w in range(3)] + [card(0, f) for f in range(2, 11)], 156),
        ([card(0, wager=w) for w in range(3)] + [card(0, f) for f in range(2, 7)], 20),
        ([card(0, 10)], -10),
        ([card(0, wager=0), card(0, 10)], -20),
        # 8 cards reach the bonus: (2+..+7 = 27 - 20) * 3 + 20
        ([card(0, wager=0), card(0, wager=1)] + [card(0, f) for f in range(2, 8)], 41),
    ],
)
def test_expedition_score(cards, expected):
    s = with_expedition(GAME.init(jax.random.key(0)), 0, cards)
    assert int(scores(s)[0]) == expected
    assert int(scores(s)[1]) == 0


def test_total_and_returns_are_zero_sum_differences():
    s = GAME.init(jax.random.key(0))
    s = with_expedition(s, 0, [card(0, f) for f in range(2, 11)])  # 54
    s = with_expedition(s, 1, [card(1, 10), card(2, wager=0)])  # -10 + -40
    np.testing.assert_array_equal(scores(s), [54, -50])
    np.testing.assert_allclose(GAME.returns(s), [104.0, -104.0])


# ---------------------------------------------------------------- legality
def test_wagers_only_before_numbers_and_numbers_strictly_increasing():
    hand0 = [card(0, wager=0), card(0, wager=1), card(0, 4), card(0, 6), card(1, 3), card(1, 5), card(2, 2), card(2, 9)]
    hand1 = [card(3, f) for f in range(2, 10)]
    s = GAME.init_from_deck(deck_with(hand0, hand1))
    # Slots: 0 Rw0, 1 Rw1 (duplicate of slot 0), 2 R4, 3 R6, 4 G3, 5 G5, 6 W2, 7 W9.
    assert legal(s) == {0, 2, 3, 4, 5, 6, 7} | {H + i for i in (0, 2, 3, 4, 5, 6, 7)}
    s = with_expedition(s, 0, [card(0, 5)])
    plays = {a for a in legal(s) if a < H}
    assert plays == {3, 4, 5, 6, 7}  # no red wager, no red 4 below the 5, red 6 ok
    s2 = with_expedition(GAME.init_from_deck(deck_with(hand0, hand1)), 0, [card(0, wager=2)])
    assert {a for a in legal(s2) if a < H} == {0, 2, 3, 4, 5, 6, 7}  # more wagers allowed


def test_legality_looks_at_own_expedition_only():
    hand0 = [card(0, 3)] + [card(1, f) for f in range(2, 9)]
    hand1 = [card(2, f) for f in range(2, 10)]
    s = GAME.init_from_deck(deck_with(hand0, hand1))
    s = with_expedition(s, 1, [card(0, 9)])  # the opponent's red 9 does not block my red 3
    assert play_action(R, 0) in legal(s)
    s = with_expedition(s, 0, [card(0, 9)])
    assert play_action(R, 0) not in legal(s)


def test_identical_wagers_are_one_move():
    hand0 = [card(0, wager=0), card(0, wager=1), card(0, wager=2), card(1, wager=0), card(1, wager=1)] + [
        card(2, f) for f in range(2, 5)
    ]
    hand1 = [card(3, f) for f in range(2, 10)]
    s = GAME.init_from_deck(deck_with(hand0, hand1))
    m = legal(s)
    for dup in (1, 2, 4):
        assert play_action(R, dup) not in m and discard_action(R, dup) not in m
    for first in (0, 3):
        assert play_action(R, first) in m and discard_action(R, first) in m


def test_draw_restriction_only_for_the_pile_just_discarded_to_and_only_that_turn():
    hand0 = [card(0, f) for f in range(2, 10)]
    hand1 = [card(1, f) for f in range(2, 10)]
    s = GAME.init_from_deck(deck_with(hand0, hand1))
    s = step(s, discard_action(R, 0))  # red 2 onto the red pile
    assert int(s.blocked_pile) == 0
    draws = {a for a in legal(s) if a >= 2 * H}
    assert draws == {draw_deck_action(R)}  # red pile blocked, others empty
    s = step(s, draw_deck_action(R))
    assert int(s.blocked_pile) == NO_PILE
    # Player 1 may take the red 2; they discard green 2 first, which blocks only green.
    s = step(s, discard_action(R, 0))
    draws = {a for a in legal(s) if a >= 2 * H}
    assert draws == {draw_deck_action(R), draw_pile_action(R, 0)}
    s = step(s, draw_pile_action(R, 0))
    assert card(0, 2) in np.asarray(GAME.hand(s, 1)).tolist()
    assert bool(s.known[1, card(0, 2)])
    # Next turn player 0 discards red 3 and may then take player 1's green 2.
    s = step(s, discard_action(R, 0))
    assert {a for a in legal(s) if a >= 2 * H} == {draw_deck_action(R), draw_pile_action(R, 1)}


def test_discard_piles_keep_order_and_draw_takes_the_top():
    hand0 = [card(0, 2), card(0, 4), card(0, 6), card(0, 8)] + [card(1, f) for f in range(2, 6)]
    hand1 = [card(0, 3), card(0, 5), card(0, 7), card(0, 9)] + [card(2, f) for f in range(2, 6)]
    # Blue cards on top of the deck sort after the red ones, so slot 0 stays red.
    s = GAME.init_from_deck(deck_with(hand0, hand1, [card(3, f) for f in range(2, 11)]))
    for _ in range(3):  # both players discard their lowest red card, drawing from the deck
        s = step(s, discard_action(R, 0))
        s = step(s, draw_deck_action(R))
        s = step(s, discard_action(R, 0))
        s = step(s, draw_deck_action(R))
    pile = [c for c in np.asarray(GAME.pile_cards(s))[0].tolist() if c != N]
    assert pile == [card(0, f) for f in (2, 3, 4, 5, 6, 7)]
    assert int(GAME.pile_tops(s)[0]) == card(0, 7)
    s = step(s, play_action(R, 7))  # player 0 plays something else (highest slot)
    s = step(s, draw_pile_action(R, 0))
    assert card(0, 7) in np.asarray(GAME.hand(s, 0)).tolist()
    assert int(GAME.pile_tops(s)[0]) == card(0, 6)


# ---------------------------------------------------------------- illegal, terminal, cap
def test_illegal_action_is_a_noop_and_check_action_lists_legal_moves():
    s = GAME.init(jax.random.key(1))
    for bad in (draw_deck_action(R), -1, GAME.num_actions, 999):
        t = step(s, bad)
        for x, y in zip(jax.tree_util.tree_leaves(s), jax.tree_util.tree_leaves(t)):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="legal actions: 0"):
        GAME.check_action(s, draw_deck_action(R))
    GAME.check_action(s, discard_action(R, 0))  # legal: no error


def _play_random(key, max_steps=2000):
    state = GAME.init(key)
    rng = np.random.default_rng(0)
    history = [state]
    while not bool(state.terminated):
        m = np.flatnonzero(np.asarray(mask_fn(state)))
        state = step(state, int(rng.choice(m)))
        history.append(state)
        assert len(history) < max_steps
    return history


def test_game_ends_after_the_draw_that_empties_the_deck():
    # Everyone discards and draws from the deck: 44 turns empty the deck exactly.
    s = GAME.init(jax.random.key(2))
    for turn in range(N - 2 * H):
        assert not bool(s.terminated)
        s = step(s, discard_action(R, 0))
        s = step(s, draw_deck_action(R))
    assert bool(s.terminated) and int(GAME.cards_left(s)) == 0 and int(s.turn) == N - 2 * H
    assert not legal(s)
    t = step(s, discard_action(R, 0))
    for x, y in zip(jax.tree_util.tree_leaves(s), jax.tree_util.tree_leaves(t)):
        np.testing.assert_array_equal(x, y)


def test_turn_cap_ends_the_game_and_scores_it_as_it_stands():
    game = LostCities(Rules(max_turns=5))
    game_step, game_mask = jax.jit(game.step), jax.jit(game.legal_action_mask)
    s = game.init(jax.random.key(3))
    played = []
    for turn in range(5):
        assert not bool(s.terminated)
        m = np.flatnonzero(np.asarray(game_mask(s)))
        a = int(m[0])  # first legal move: plays when it can
        if a < game.rules.hand_size:
            played.append(int(game.hand(s, s.current_player)[a]))
        s = game_step(s, a)
        s = game_step(s, draw_deck_action(game.rules))
    assert bool(s.terminated) and int(s.turn) == 5
    assert int(game.cards_left(s)) > 0
    assert np.asarray(s.expeditions).sum() == len(played)


# ---------------------------------------------------------------- invariants at scale
def _locations(game, states):
    """int[B, N]: how many places hold each card (deck below the top, hands, expeditions, piles)."""
    n = game.rules.deck_size
    b = states.turn.shape[0]
    count = np.zeros((b, n), np.int64)
    deck = np.asarray(states.deck).astype(np.int64)
    undrawn = np.arange(n)[None, :] >= np.asarray(states.deck_pos)[:, None]
    rows = np.broadcast_to(np.arange(b)[:, None], deck.shape)
    np.add.at(count, (rows[undrawn], deck[undrawn]), 1)
    hands = np.asarray(states.hands).reshape(b, -1).astype(np.int64)
    held = hands < n
    rows = np.broadcast_to(np.arange(b)[:, None], hands.shape)
    np.add.at(count, (rows[held], hands[held]), 1)
    count += np.asarray(states.expeditions).sum(1)
    count += (np.asarray(states.pile_pos) > 0).astype(np.int64)
    return count


@pytest.mark.parametrize("n_colors", [5, 6])
def test_cards_are_conserved_in_1000_vmapped_random_games(n_colors):
    game = LostCities(Rules(n_colors=n_colors))
    b = 1000

    @jax.jit
    def advance(states, key):
        def body(s, k):
            m = jax.vmap(game.legal_action_mask)(s)
            a = jax.random.categorical(k, jnp.where(m, 0.0, -jnp.inf), axis=-1)
            a = jnp.where(m.any(-1), a, 0)
            return jax.vmap(game.step)(s, a), None

        return jax.lax.scan(body, states, jax.random.split(key, 25))[0]

    states = jax.vmap(game.init)(jax.random.split(jax.random.key(n_colors), b))
    hand_sizes = []
    for chunk in range(40):  # 1000 steps: every game reaches its end
        states = advance(states, jax.random.key(100 + chunk))
        counts = _locations(game, states)
        assert (counts == 1).all(), "a card is missing or duplicated"
        hands = np.asarray(states.hands) < game.rules.deck_size
        hand_sizes.append(hands.sum(-1))
        # pile heights are 1..height without gaps, per color
        heights = np.asarray(states.pile_pos).reshape(b, game.rules.n_colors, -1)
        for h in (heights[:3]):
            for row in h:
                assert sorted(row[row > 0].tolist()) == list(range(1, row.max() + 1))
    assert bool(np.asarray(states.terminated).all())
    sizes = np.concatenate(hand_sizes, axis=0)
    assert set(np.unique(sizes)) <= {game.rules.hand_size - 1, game.rules.hand_size}
    assert np.asarray(states.turn).max() <= game.rules.max_turns


# ---------------------------------------------------------------- information
def test_observation_hides_exactly_the_hidden_information():
    rng = np.random.default_rng(0)
    states = _play_random(jax.random.key(7))
    checked = 0
    for s in states[::7]:
        if bool(s.terminated):
            continue
        viewer = int(rng.integers(2))
        opp = 1 - viewer
        hand = np.asarray(GAME.hand(s, opp))
        known = np.asarray(s.known[opp])
        deck = np.asarray(s.deck).astype(np.int32)
        pos = int(s.deck_pos)
        secret_slots = [i for i, c in enumerate(hand) if c < N and not known[c]]
        hidden = [int(hand[i]) for i in secret_slots] + deck[pos:].tolist()
        perm = rng.permutation(hidden)
        new_opp = hand.copy()
        new_opp[secret_slots] = perm[: len(secret_slots)]
        new_deck = deck.copy()
        new_deck[pos:] = perm[len(secret_slots) :]
        hands = np.asarray(s.hands).copy()
        hands[opp] = np.sort(new_opp)
        t = s._replace(hands=jnp.asarray(hands), deck=jnp.asarray(new_deck, jnp.int8))
        np.testing.assert_array_equal(observe(s, viewer), observe(t, viewer))
        if len(secret_slots) and not np.array_equal(np.sort(new_opp), np.sort(hand)):
            assert not np.array_equal(observe(s, opp), observe(t, opp))
        checked += 1
    assert checked > 10


def test_observation_contents():
    hand0 = [card(0, f) for f in range(2, 10)]
    hand1 = [card(1, f) for f in range(2, 10)]
    s = GAME.init_from_deck(deck_with(hand0, hand1))
    s = step(s, play_action(R, 0))
    s = step(s, draw_deck_action(R))
    s = step(s, discard_action(R, 0))  # player 1 discards green 2
    o0, o1 = np.asarray(observe(s, 0)), np.asarray(observe(s, 1))
    assert o0[N + card(0, 2)] == 1 and o1[2 * N + card(0, 2)] == 1  # own / opponent expedition
    assert o0[3 * N + card(1, 2)] == pytest.approx(1 / K)  # height 1 on the green pile
    assert o0[4 * N + card(1, 2)] == 1  # and it is the top
    assert o1[: N].sum() == H - 1  # the discarding player holds 7 cards until the draw
    assert not np.array_equal(o0, o1)
