"""`lcjax.diagnostics`: probe states, reference action values, and the agreement metrics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lcjax import diagnostics as D
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.lost_cities import PHASE_PLAY, LostCities, Rules


# ---------------------------------------------------------------------------- the math
def test_masked_correlation_on_hand_made_arrays():
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]], bool)
    ref = np.array([[1.0, 2.0, 3.0, 0.0], [1.0, 2.0, 3.0, 4.0], [5.0, 0, 0, 0], [1.0, 1.0, 1.0, 0.0]])
    pred = np.array(
        [
            [10.0, 20.0, 30.0, -99.0],  # same order, illegal entry ignored: +1
            [4.0, 3.0, 2.0, 1.0],  # reversed: -1
            [1.0, 0, 0, 0],  # one legal action: undefined
            [1.0, 2.0, 3.0, 0.0],  # constant reference: undefined
        ]
    )
    corr = D.masked_correlation(pred, ref, mask)
    np.testing.assert_allclose(corr[:2], [1.0, -1.0])
    assert np.isnan(corr[2]) and np.isnan(corr[3])
    # A partial relation: corr([1, 0, 0], [1, 2, 0]) computed by hand.
    x, y = np.array([1.0, 0.0, 0.0]), np.array([1.0, 2.0, 0.0])
    want = np.corrcoef(x, y)[0, 1]
    got = D.masked_correlation(np.r_[x, 7.0][None], np.r_[y, -7.0][None], np.array([[1, 1, 1, 0]], bool))
    np.testing.assert_allclose(got, [want])


def test_argmax_agreement_ignores_illegal_actions():
    mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
    ref = np.array([[0.0, 1.0, 9.0], [3.0, 2.0, 1.0]])
    pred = np.array([[-1.0, 0.0, 99.0], [0.0, 5.0, 1.0]])
    np.testing.assert_array_equal(D.argmax_agreement(pred, ref, mask), [True, False])


def test_agreement_metrics_select_rows():
    probes = D.ProbeSet(
        states=None,
        players=np.array([0, 1, 0]),
        observations=None,
        masks=np.ones((3, 3), bool),
        values=np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]),
        regrets=None,
    )
    pred = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0], [0.0, 1.0, 3.0]])
    m = D.agreement_metrics(pred, probes, "diag/x", np.array([True, False, True]))
    assert m["diag/x/argmax_agreement"] == pytest.approx(0.5)
    want = (1.0 + np.corrcoef([0.0, 1.0, 3.0], [2.0, 1.0, 0.0])[0, 1]) / 2
    assert m["diag/x/correlation"] == pytest.approx(want)


# ---------------------------------------------------------------------------- reference values
def test_reference_values_when_the_game_ends_after_this_turn():
    """One card left in the deck and no expedition opened: after any play or discard the
    player's draw ends the game (the only non-empty pile is the one just discarded to, which
    is blocked), so the value of playing a card is its expedition's score, (face - 20) or
    -40 for a wager, and of discarding 0, in every re-deal."""
    game = LostCities(Rules())
    state = game.init(jax.random.key(3))
    state = state._replace(deck_pos=jnp.int32(game.deck_size - 1))
    states = jax.tree.map(lambda x: x[None], state)
    values, regrets = D.reference_values(game, states, jax.random.key(0), 4)
    values, regrets = np.asarray(values)[0], np.asarray(regrets)[0]
    mask = np.asarray(game.legal_action_mask(state))
    h = game.rules.hand_size
    hand = np.asarray(state.hands[0])
    for slot in range(h):
        card = int(hand[slot])
        if mask[slot]:
            want = -40.0 if game.card_is_wager(card) else float(game.card_face(card)) - 20.0
            assert values[slot] == pytest.approx(want), game.card_name(card)
        if mask[h + slot]:
            assert values[h + slot] == 0.0
    # Discarding is clearly best: every legal discard beats every legal play.
    assert values[h : 2 * h][mask[h : 2 * h]].min() > values[:h][mask[:h]].max()
    assert (values[~mask] == 0).all() and regrets[mask].sum() == pytest.approx(0.0, abs=1e-4)


def test_probe_set_is_fixed_by_its_seed_and_play_phase():
    game = LostCities()
    probes = D.build_probe_set(game, jax.random.key(7), num_states=8, redeals=2)
    again = D.build_probe_set(game, jax.random.key(7), num_states=8, redeals=2)
    assert probes.values.shape == (8, game.num_actions)
    np.testing.assert_array_equal(np.asarray(probes.values), np.asarray(again.values))
    assert (np.asarray(probes.states.phase) == PHASE_PLAY).all() and not np.asarray(probes.states.terminated).any()
    assert len(set(np.asarray(probes.states.turn).tolist())) > 1  # various depths
    obs = np.asarray(jax.vmap(game.observe)(probes.states, probes.players))
    np.testing.assert_array_equal(obs, np.asarray(probes.observations))
    # The reference varies across actions (a signal to correlate with).
    assert np.asarray(probes.regrets).std() > 0.5


def test_diagnostics_only_for_games_with_bots():
    assert D.has_diagnostics(LostCities())
    assert not D.has_diagnostics(KuhnPoker())
    with pytest.raises(ValueError, match="no probe diagnostics"):
        D.build_probe_set(KuhnPoker(), jax.random.key(0), 4, 2)
