"""`hidden_alternatives` of Kuhn poker and Leduc hold'em, on every state of every deal.

Alternative k of `game.hidden_alternatives(state, player)` is `state` with the opponent
holding card k, and `prior[k]` the chance probability of that card given what `player` has
seen. On every state reachable from every deck of `game.all_decks()` (every betting
sequence: 6 x 9 states in Kuhn, 120 x 85 in Leduc), for both players, these tests check:

- the prior is a distribution, uniform on the cards `player` cannot rule out (all but its
  own and, in Leduc once the public card is revealed, that card);
- it is the exact posterior: enumerating every deal consistent with what `player` saw
  gives the prior as the distribution of the opponent's card, and averaging the
  prior-weighted alternatives over the deals of an information set gives back the
  distribution of all hidden cards (in Leduc before the reveal, the public card too);
- every possible alternative (prior > 0) looks the same to `player` (observation and legal
  actions) and differs from `state` only in the opponent's card and, in Leduc before the
  reveal when k is the undealt public card, in the public card, which becomes the actual
  opponent card; its cards are distinct; the alternative of the actual card, and every
  impossible one, is `state` itself;
- the alternatives keep the state's dtypes behind a leading `num_alternatives` axis, the
  function is gather-free under vmap, and vmap gives what per-state calls give;
- `lcjax.env.api_test` rejects a game whose `hidden_alternatives` breaks its contract.

Every jitted function compiles once per game (states go through it in padded chunks).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax.cfr import exploitability as ex
from lcjax.env.api_test import api_test
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.leduc import LeducPoker
from lcjax.onehot import indexing_primitives

from batching import chunked  # tests/env/batching.py


class Case(NamedTuple):
    game: object
    private: str  # the state's field of private cards, int32[2]
    public: str | None  # the state's public card field (int32[]), if any
    chunk: int  # rows per jitted call
    num_states: int  # states over all decks and betting sequences
    num_alternatives: int  # one per card


CASES = {
    "kuhn": Case(KuhnPoker(), "cards", None, 64, 6 * 9, 3),
    "leduc": Case(LeducPoker(), "private_cards", "public_card", 2048, 120 * 85, 6),
}


class Data(NamedTuple):
    case: Case
    states: object  # N rows: every state twice, once per player
    player: np.ndarray  # int32[N]
    alts: object  # leaves [N, K, ...]
    prior: np.ndarray  # float32[N, K]
    obs: np.ndarray  # [N, D]: observe(state, player)
    alt_obs: np.ndarray  # [N, K, D]: observe(alt_k, player)
    mask: np.ndarray  # [N, A]
    alt_mask: np.ndarray  # [N, K, A]

    @property
    def own(self):
        return np.take_along_axis(self.private(self.states), self.player[:, None], 1)[:, 0]

    @property
    def opponent_card(self):
        return np.take_along_axis(self.private(self.states), 1 - self.player[:, None], 1)[:, 0]

    def private(self, states):
        return getattr(states, self.case.private)

    def public(self, states):
        """The public card (-1 in Kuhn)."""
        if self.case.public is None:
            return np.full(np.shape(states.terminated), -1, np.int32)
        return getattr(states, self.case.public)

    @property
    def revealed(self):
        """bool[N]: the public card is visible (Leduc's second round)."""
        if self.case.public is None:
            return np.zeros(len(self.player), bool)
        return self.states.round == 1


@pytest.fixture(scope="module", params=sorted(CASES))
def data(request) -> Data:
    case = CASES[request.param]
    game = case.game
    # Every state of every deal: the nodes of the exact solver's game tree.
    states = ex.game_tree(game).states
    n = len(states.terminated)
    assert n == case.num_states
    states = jax.tree.map(lambda x: np.concatenate([x, x]), states)
    player = np.repeat(np.arange(2, dtype=np.int32), n)

    def analyse(state, player):
        alts, prior = game.hidden_alternatives(state, player)
        return (
            alts,
            prior,
            game.observe(state, player),
            jax.vmap(game.observe, in_axes=(0, None))(alts, player),
            game.legal_action_mask(state),
            jax.vmap(game.legal_action_mask)(alts),
        )

    out = chunked(jax.jit(jax.vmap(analyse)), case.chunk, states, player)
    return Data(case, states, player, *out)


def _leaves_equal(a, b):
    """bool[N]: per row, every leaf of `a` equals that of `b` (leaves [N, ...])."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b))
    return np.all(np.stack([np.all((x == y).reshape(len(x), -1), axis=1) for x, y in pairs]), axis=0)


def _alternative(data, k):
    """The k-th alternative of every row: leaves [N, ...]."""
    return jax.tree.map(lambda x: x[:, k], data.alts)


def test_states_cover_both_rounds_and_terminals(data):
    assert data.states.terminated.any() and (~data.states.terminated).any()
    if data.case.public is not None:
        assert data.revealed.any() and (~data.revealed).any()


def test_shapes_and_dtypes(data):
    k = data.case.game.num_alternatives
    assert k == data.case.num_alternatives
    assert data.prior.dtype == np.float32 and data.prior.shape == (len(data.player), k)
    for alt, leaf in zip(jax.tree.leaves(data.alts), jax.tree.leaves(data.states)):
        assert alt.dtype == leaf.dtype
        assert alt.shape == (leaf.shape[0], k) + leaf.shape[1:]


def test_prior_is_uniform_on_the_cards_player_cannot_rule_out(data):
    k = data.case.game.num_alternatives
    cards = np.arange(k)
    support = (cards != data.own[:, None]) & ~(
        data.revealed[:, None] & (cards == data.public(data.states)[:, None])
    )
    assert np.all(data.prior >= 0)
    np.testing.assert_allclose(data.prior.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(data.prior > 0, support)
    # Kuhn: 1/2 for each other card; Leduc: 1/5 before the reveal, 1/4 after.
    if data.case.public is None:
        sizes = np.full(len(data.player), 2)
    else:
        sizes = np.where(data.revealed, 4, 5)
    np.testing.assert_array_equal(support.sum(-1), sizes)
    np.testing.assert_allclose(data.prior, support / sizes[:, None], rtol=1e-6)


def test_prior_is_the_opponent_card_distribution_over_consistent_deals(data):
    """Counting the decks that agree with what `player` saw gives the prior."""
    decks = data.case.game.all_decks()  # [M, 2 or 3], all equally likely
    k = data.case.game.num_alternatives
    own_col = np.where(data.player[:, None] == 0, decks[None, :, 0], decks[None, :, 1])  # [N, M]
    opp_col = np.where(data.player[:, None] == 0, decks[None, :, 1], decks[None, :, 0])
    consistent = own_col == data.own[:, None]
    if data.case.public is not None:
        consistent &= ~data.revealed[:, None] | (decks[None, :, 2] == data.public(data.states)[:, None])
    counts = np.sum(consistent[..., None] & (opp_col[..., None] == np.arange(k)), axis=1)
    posterior = counts / counts.sum(-1, keepdims=True)
    np.testing.assert_allclose(data.prior, posterior, atol=1e-6)


def test_alternatives_mix_back_to_the_information_set(data):
    """Over the deals of an information set, the prior-weighted alternatives are those deals.

    Every deck reaches every betting sequence, so the rows with one observation and one
    betting sequence are the (equally likely) deals `player` cannot tell apart. (The
    observation alone does not identify the sequence: Leduc's encodes a fold like an
    unused slot.) Picking one of these rows uniformly, then alternative k with probability
    prior[k], must give each of their deals (opponent's card, public card) with the same
    probability: a uniform one.
    """
    k = data.case.game.num_alternatives
    hidden = (data.opponent_card + 1) * (k + 1) + data.public(data.states) + 1
    alt_hidden = (
        np.take_along_axis(data.private(data.alts), 1 - data.player[:, None, None], 2)[..., 0] + 1
    ) * (k + 1) + data.public(data.alts) + 1  # [N, K]
    # Everything but the cards and the card-dependent payoffs: the betting sequence.
    public_fields = [
        f for f in data.states._fields if f not in (data.case.private, data.case.public, "payoffs")
    ]
    keys = np.concatenate(
        [data.obs] + [getattr(data.states, f).reshape(len(data.player), -1) for f in public_fields],
        axis=1,
    )
    infosets = {}
    for row, key in enumerate(map(bytes, keys.astype(np.float32))):
        infosets.setdefault(key, []).append(row)
    assert len(infosets) < len(data.player)
    for rows in infosets.values():
        expected = {}
        for h in hidden[rows]:
            expected[h] = expected.get(h, 0.0) + 1.0 / len(rows)
        assert len(expected) == len(rows)  # distinct deals
        mixed = {}
        for row in rows:
            for kk in np.flatnonzero(data.prior[row] > 0):
                h = alt_hidden[row, kk]
                mixed[h] = mixed.get(h, 0.0) + data.prior[row, kk] / len(rows)
        assert mixed.keys() == expected.keys()
        for h, p in expected.items():
            assert mixed[h] == pytest.approx(p, abs=1e-6)


def test_player_cannot_tell_the_alternatives_apart(data):
    possible = data.prior > 0
    same_obs = np.all(data.alt_obs == data.obs[:, None], axis=-1)
    same_mask = np.all(data.alt_mask == data.mask[:, None], axis=-1)
    assert np.all(same_obs | ~possible)
    assert np.all(same_mask | ~possible)


def test_alternative_k_changes_only_the_opponent_card(data):
    own, actual = data.own, data.opponent_card
    public = data.public(data.states)
    others = [f for f in data.states._fields if f not in (data.case.private, data.case.public)]
    for k in range(data.case.game.num_alternatives):
        alt = _alternative(data, k)
        rows = data.prior[:, k] > 0
        alt_private = data.private(alt)
        alt_own = np.take_along_axis(alt_private, data.player[:, None], 1)[:, 0]
        alt_opp = np.take_along_axis(alt_private, 1 - data.player[:, None], 1)[:, 0]
        np.testing.assert_array_equal(alt_opp[rows], k)
        np.testing.assert_array_equal(alt_own[rows], own[rows])
        # Leduc before the reveal: the alternative holding the undealt public card swaps it in.
        swap = ~data.revealed & (public == k)
        expected_public = np.where(swap, actual, public)
        alt_public = data.public(alt)
        np.testing.assert_array_equal(alt_public[rows], expected_public[rows])
        if data.case.public is not None:
            assert np.any(swap & rows)
            cards = np.stack([alt_own, alt_opp, alt_public], axis=-1)[rows]
            assert np.all(np.sort(cards, axis=-1)[:, 1:] != np.sort(cards, axis=-1)[:, :-1])
        else:
            assert np.all(alt_own[rows] != alt_opp[rows])
        for field in others:
            np.testing.assert_array_equal(
                getattr(alt, field)[rows], getattr(data.states, field)[rows], err_msg=f"{field}, k={k}"
            )


def test_actual_and_impossible_alternatives_are_the_state(data):
    def at_actual_card(x):
        index = data.opponent_card.reshape((-1, 1) + (1,) * (x.ndim - 2))
        return np.take_along_axis(x, index, 1)[:, 0]

    actual = jax.tree.map(at_actual_card, data.alts)
    assert np.all(_leaves_equal(actual, data.states))
    for k in range(data.case.game.num_alternatives):
        impossible = data.prior[:, k] == 0
        assert np.all(_leaves_equal(_alternative(data, k), data.states)[impossible])


def test_vmap_matches_per_state(data):
    single = jax.jit(data.case.game.hidden_alternatives)
    rows = np.random.default_rng(0).choice(len(data.player), size=16, replace=False)
    for row in rows:
        state = jax.tree.map(lambda x: x[row], data.states)
        alts, prior = jax.device_get(single(state, data.player[row]))
        np.testing.assert_array_equal(prior, data.prior[row])
        jax.tree.map(lambda x, y: np.testing.assert_array_equal(x, y[row]), alts, data.alts)


def test_gather_free_under_vmap(data):
    rows = np.arange(0, len(data.player), max(1, len(data.player) // 8))
    states = jax.tree.map(lambda x: x[rows], data.states)
    game = data.case.game
    assert indexing_primitives(jax.vmap(game.hidden_alternatives), states, data.player[rows]) == set()


class _PriorOff(KuhnPoker):
    def hidden_alternatives(self, state, player):
        alts, prior = super().hidden_alternatives(state, player)
        return alts, prior * 0.9


class _Leaky(KuhnPoker):
    """Replaces `player`'s own card instead of the opponent's: `player` would see it."""

    def hidden_alternatives(self, state, player):
        return super().hidden_alternatives(state, 1 - jnp.asarray(player))


class _NoLeadingAxis(KuhnPoker):
    def hidden_alternatives(self, state, player):
        alts, prior = super().hidden_alternatives(state, player)
        return alts._replace(num_moves=state.num_moves), prior


@pytest.mark.parametrize(
    "game, message",
    [
        (_PriorOff(), "prior is non-negative and sums to 1"),
        (_Leaky(), r"observe\(alternative, player\) == observe\(state, player\)"),
        (_NoLeadingAxis(), "leading axis of num_alternatives"),
    ],
    ids=["prior", "leak", "shape"],
)
def test_api_test_catches_broken_alternatives(game, message):
    with pytest.raises(AssertionError, match=message):
        api_test(game, num_games=8, max_steps=8)
