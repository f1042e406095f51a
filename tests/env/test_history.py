"""`observe_history`: the history seen by an observer of both hands, from the acting seat.

For every game: the undealt deck order does not show, the opponent's private cards do, and
the history holds exactly the acting player's observation plus the opponent's cards (equal
observations and equal opponent cards <=> equal histories, on states from random play).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.env.kuhn import BET, PASS, KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.env.lost_cities import LostCities
from lcjax.env.protocol import return_scale

GAMES = {"kuhn": (KuhnPoker(), 4), "leduc": (LeducPoker(), 12), "lost_cities": (LostCities(), 160)}


def _random_legal(key, mask):
    counts = jnp.cumsum(mask)
    pick = jnp.floor(jax.random.uniform(key) * counts[-1]).astype(jnp.int32)
    return jnp.argmax(counts > pick).astype(jnp.int32)


def _opponent_cards(game, states) -> np.ndarray:
    """int[B, ...]: the private cards of the player not to act, for a batch of states."""
    opp = 1 - np.asarray(states.current_player)
    if isinstance(game, KuhnPoker):
        rows = states.cards
    elif isinstance(game, LeducPoker):
        rows = states.private_cards
    else:
        rows = states.hands
    return np.asarray(rows)[np.arange(len(opp)), opp]


@pytest.fixture(scope="module", params=sorted(GAMES))
def sampled(request):
    """(game, states): every state of 64 random games (terminated ones included), flat."""
    game, steps = GAMES[request.param]
    batch = 64

    @jax.jit
    def run(key):
        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, batch))

        def body(states, k):
            mask = jax.vmap(game.legal_action_mask)(states)
            actions = jax.vmap(_random_legal)(jax.random.split(k, batch), mask)
            return jax.vmap(game.step)(states, actions), states

        final, trail = jax.lax.scan(body, states, jax.random.split(play_key, steps))
        trail = jax.tree.map(lambda t, f: jnp.concatenate([t, f[None]]), trail, final)
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), trail)

    return game, jax.device_get(run(jax.random.key(5)))


def _views(game, states):
    """(histories, acting player's observations), numpy float32 [B, E] and [B, D]."""
    fn = jax.jit(jax.vmap(lambda s: (game.observe_history(s), game.observe(s, s.current_player))))
    hist, obs = jax.device_get(fn(states))
    return hist, obs


def test_sizes_and_scale():
    assert KuhnPoker().history_size == 14 and LeducPoker().history_size == 36
    lc = LostCities()
    assert lc.history_size == lc.observation_size + 60 + 8 * (5 + 3) + 4 * 5 == 667
    assert [return_scale(g) for g in (KuhnPoker(), LeducPoker(), lc)] == [2.0, 13.0, 50.0]
    assert return_scale(object()) == 1.0


def test_history_holds_the_observation_and_the_opponent_cards(sampled):
    """Equal (observation, opponent's cards) <=> equal history, over all sampled states."""
    game, states = sampled
    hist, obs = _views(game, states)
    assert hist.dtype == np.float32 and hist.shape[1] == game.history_size
    assert np.all(np.isfinite(hist))
    opp = _opponent_cards(game, states).reshape(len(hist), -1)
    pairs = [o.tobytes() + c.tobytes() for o, c in zip(obs, opp)]
    histories = [h.tobytes() for h in hist]
    pair_to_hist, hist_to_pair = {}, {}
    for pair, h in zip(pairs, histories):
        assert pair_to_hist.setdefault(pair, h) == h, "equal observation and opponent cards, different history"
        assert hist_to_pair.setdefault(h, pair) == pair, "equal history, different observation or opponent cards"
    assert len(hist_to_pair) > len(hist) // 20  # the sample is not degenerate


def _replace_rows(states, index, **fields):
    """The states at `index` with some fields replaced (numpy arrays, batch-first)."""
    picked = jax.tree.map(lambda x: np.asarray(x)[index], states)
    return picked._replace(**fields)


def _swap_opponent_card(game, states, rng):
    """States whose opponent holds one different card, drawn from the cards the acting player
    cannot see (for Lost Cities: one of the opponent's hand cards swapped with an undealt
    card); everything the acting player sees is unchanged. Returns (index, new states)."""
    cp = np.asarray(states.current_player)
    opp = 1 - cp
    n = len(cp)
    if isinstance(game, (KuhnPoker, LeducPoker)):
        field = "cards" if isinstance(game, KuhnPoker) else "private_cards"
        cards = np.asarray(getattr(states, field)).copy()
        seen = [cards[np.arange(n), cp]]
        if isinstance(game, LeducPoker):  # the public card is seen once revealed
            seen.append(np.where(np.asarray(states.round) == 1, np.asarray(states.public_card), -1))
        new = np.empty(n, np.int32)
        for i in range(n):
            free = [c for c in range(game.deck_size) if c not in {s[i] for s in seen} and c != cards[i, opp[i]]]
            new[i] = rng.choice(free)
        cards[np.arange(n), opp] = new
        index = np.arange(n)
        return index, _replace_rows(states, index, **{field: cards})
    # Lost Cities: needs an undealt card and an opponent card the acting player does not know.
    hands, deck = np.asarray(states.hands).copy(), np.asarray(states.deck).copy()
    known, deck_pos = np.asarray(states.known), np.asarray(states.deck_pos)
    index = []
    for i in range(n):
        hand = hands[i, opp[i]]
        unknown = [s for s in range(len(hand)) if hand[s] < game.deck_size and not known[i, opp[i], hand[s]]]
        if deck_pos[i] >= game.deck_size or not unknown:
            continue
        slot, pos = rng.choice(unknown), rng.integers(deck_pos[i], game.deck_size)
        hand[slot], deck[i, pos] = deck[i, pos], hand[slot]
        hands[i, opp[i]] = np.sort(hand)
        index.append(i)
    index = np.asarray(index)
    return index, _replace_rows(states, index, hands=hands[index], deck=deck[index])


def test_opponent_cards_change_the_history_not_the_observation(sampled):
    game, states = sampled
    rng = np.random.default_rng(0)
    index, changed = _swap_opponent_card(game, states, rng)
    assert len(index) > len(states.current_player) // 4
    hist, obs = _views(game, jax.tree.map(lambda x: np.asarray(x)[index], states))
    new_hist, new_obs = _views(game, changed)
    np.testing.assert_array_equal(obs, new_obs)  # the acting player sees no difference
    assert np.all(np.any(hist != new_hist, axis=1)), "the history must show the opponent's cards"


def test_undealt_order_does_not_show(sampled):
    """Reordering the cards still to be dealt leaves every history unchanged."""
    game, states = sampled
    rng = np.random.default_rng(1)
    n = len(np.asarray(states.current_player))
    if isinstance(game, KuhnPoker):
        # The state holds no undealt card: decks differing only in the third card deal equal games.
        for a, b in itertools.permutations(range(3), 2):
            (c,) = {0, 1, 2} - {a, b}
            one, two = game.init_from_deck(jnp.array([a, b, c])), game.init_from_deck(jnp.array([a, b]))
            np.testing.assert_array_equal(game.observe_history(one), game.observe_history(two))
        return
    if isinstance(game, LeducPoker):
        # Before round 2 the public card is undealt: any card other than the private ones.
        index = np.flatnonzero(np.asarray(states.round) == 0)
        private = np.asarray(states.private_cards)[index]
        public = np.array([rng.choice([c for c in range(6) if c not in set(p)]) for p in private])
        changed = _replace_rows(states, index, public_card=public.astype(np.int32))
    else:
        deck, deck_pos = np.asarray(states.deck), np.asarray(states.deck_pos)
        index = np.flatnonzero(deck_pos < game.deck_size - 1)
        positions = np.arange(game.deck_size)[None, :]
        order = np.where(positions < deck_pos[index, None], positions - game.deck_size, rng.random((len(index), game.deck_size)))
        new_deck = np.take_along_axis(deck[index], np.argsort(order, axis=1), axis=1)
        assert np.mean(np.any(new_deck != deck[index], axis=1)) > 0.9
        changed = _replace_rows(states, index, deck=new_deck)
    assert len(index) > n // 4
    hist, _ = _views(game, jax.tree.map(lambda x: np.asarray(x)[index], states))
    new_hist, _ = _views(game, changed)
    np.testing.assert_array_equal(hist, new_hist)


def test_kuhn_histories_are_distinct_across_deals_and_betting():
    """All 6 deals x 9 betting sequences (terminal ones included): 54 distinct histories."""
    game = KuhnPoker()
    sequences = [(), (PASS,), (BET,), (PASS, PASS), (PASS, BET), (BET, PASS), (BET, BET), (PASS, BET, PASS), (PASS, BET, BET)]
    seen = set()
    for deal in game.all_decks():
        for sequence in sequences:
            state = game.init_from_deck(jnp.asarray(deal))
            for action in sequence:
                assert not bool(state.terminated)
                state = game.step(state, jnp.int32(action))
            seen.add(np.asarray(game.observe_history(state)).tobytes())
    assert len(seen) == 6 * len(sequences)
